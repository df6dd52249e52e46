/* fuzz_mvcc: libFuzzer target over the parsers of etcd's key-bucket and lease-bucket bytes
 * (mvcc_rev_parse, mvcc_kv_unmarshal, mvcc_lease_unmarshal), which read values from a full
 * snapshot's db. A value that unmarshals must marshal to no more bytes than it had (unknown
 * fields are dropped, known ones kept) and unmarshal again to the same fields. */
#include "format/mvcc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_mvcc: check failed: %s (line %d)\n", #cond, __LINE__);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int64_t m, s, id, ttl, rem;
    int t;
    if (mvcc_rev_parse(data, size, &m, &s, &t) == 0) {
        uint8_t k[MVCC_MARK_BYTES];
        CHECK(mvcc_rev_key(m, s, t, k) == size && memcmp(k, data, size) == 0);
    }
    MvccKeyValue kv;
    if (mvcc_kv_unmarshal(data, size, &kv) == 0) {
        size_t n = mvcc_kv_size(&kv);
        uint8_t *buf = malloc(n ? n : 1);
        CHECK(buf);
        CHECK(mvcc_kv_marshal(&kv, buf) == n);
        MvccKeyValue again;
        CHECK(mvcc_kv_unmarshal(buf, n, &again) == 0);
        CHECK(again.key_len == kv.key_len && again.value_len == kv.value_len);
        CHECK(again.create_revision == kv.create_revision && again.mod_revision == kv.mod_revision);
        CHECK(again.version == kv.version && again.lease == kv.lease);
        CHECK(!kv.key_len || memcmp(again.key, kv.key, kv.key_len) == 0);
        CHECK(!kv.value_len || memcmp(again.value, kv.value, kv.value_len) == 0);
        free(buf);
    }
    if (mvcc_lease_unmarshal(data, size, &id, &ttl, &rem) == 0) {
        uint8_t buf[MVCC_LEASE_MAX];
        size_t n = mvcc_lease_marshal(id, ttl, rem, buf);
        int64_t id2, ttl2, rem2;
        CHECK(mvcc_lease_unmarshal(buf, n, &id2, &ttl2, &rem2) == 0);
        CHECK(id2 == id && ttl2 == ttl && rem2 == rem);
    }
    return 0;
}
