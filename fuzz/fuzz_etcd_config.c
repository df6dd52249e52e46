/* fuzz_etcd_config: GET /config's rendering of an etcd config file (outside bytes). The first
 * byte picks whether a member list is given. */
#include "sidecar/etcd_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    EtcdMember m[2];
    memset(m, 0, sizeof m);
    strcpy(m[0].name, "etcd-main-etcd-main-1");
    strcpy(m[1].name, "m2");
    m[1].is_learner = data[0] & 2;
    char *out = NULL;
    if (etcd_config_render((const char *)data + 1, size - 1, (data[0] & 4) ? "etcd-main-0" : NULL,
                           (data[0] & 1) ? m : NULL, 2, &out) == 0 &&
        !out)
        abort();
    free(out);
    return 0;
}
