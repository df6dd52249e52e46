/* fuzz_k8s_lease: libFuzzer target for the parsers of Kubernetes API server answers: a Lease
 * (k8s_lease_parse, then k8s_lease_decide for the full and the delta Lease), a Status object's
 * message (k8s_status_message) and a holderIdentity revision (k8s_lease_parse_revision). Any
 * input must give 0 or a project error, never crash or read out of bounds; parsed strings are
 * NUL-terminated within their buffers, a decided holderIdentity is a decimal revision, and a
 * full Lease is never lowered. Seeds in fuzz/corpus/k8s_lease/: Leases and Status objects as
 * the API server sends them. */
#include "common/err.h"
#include "k8s/k8s_client.h"
#include "k8s/lease.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy) return 0;
    memcpy(copy, data, size);
    char msg[64];
    k8s_status_message(copy, size, msg, sizeof msg);
    if (strlen(msg) >= sizeof msg) abort();
    K8sLease l;
    if (k8s_lease_parse(copy, size, &l) == 0) {
        if (!l.resource_version[0] || strlen(l.holder) >= sizeof l.holder) abort();
        int64_t rev = (int64_t)(size * 7919u);
        for (int full = 0; full < 2; full++) {
            char h[32];
            int skip = 0;
            int rc = k8s_lease_decide(&l, full, full ? rev : rev - 1, &skip, h, sizeof h);
            int64_t have = -1, want = -1;
            if (rc == 0 && h[0] && k8s_lease_parse_revision(h, &want) != 0) abort();
            if (rc == 0 && full && l.has_holder && k8s_lease_parse_revision(l.holder, &have) == 0 &&
                h[0] && want < have)
                abort();
            if (rc == 0 && full && skip && h[0]) abort();
        }
    }
    char buf[32];
    size_t n = size < sizeof buf - 1 ? size : sizeof buf - 1;
    memcpy(buf, data, n);
    buf[n] = '\0';
    int64_t r;
    if (k8s_lease_parse_revision(buf, &r) == 0 && r < 0) abort();
    free(copy);
    return 0;
}
