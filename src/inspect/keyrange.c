/* keyrange: see keyrange.h. */
#include "keyrange.h"
#include "../common/err.h"
#include "../format/bbolt.h"

#include <stdlib.h>
#include <string.h>

static uint8_t *dup_bytes(const void *p, size_t n) {
    uint8_t *d = malloc(n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

int keyrange_make(const char *key, const char *end, int prefix, int from_key, KeyRange *kr) {
    memset(kr, 0, sizeof *kr);
    if (end && (prefix || from_key))
        return err_set(ERR_INVALID, "a RANGE_END goes with neither --prefix nor --from-key");
    if (prefix && from_key)
        return err_set(ERR_INVALID, "--prefix and --from-key exclude each other");
    size_t kl = strlen(key);
    kr->key = dup_bytes(key, kl);
    kr->key_len = kl;
    if (!kr->key) return err_set(ERR_NOMEM, "out of memory");
    if (end) {
        kr->end_len = strlen(end);
        kr->end = dup_bytes(end, kr->end_len);
    } else if (prefix) { /* clientv3 GetPrefixRangeEnd */
        size_t n = kl;
        while (n > 0 && kr->key[n - 1] == 0xff)
            n--;
        kr->end = dup_bytes(kr->key, n ? n : 1);
        kr->end_len = 1;
        if (kr->end && n) {
            kr->end[n - 1]++;
            kr->end_len = n;
        } else if (kr->end) {
            kr->end[0] = 0; /* every key */
        }
    } else if (from_key) {
        kr->end = dup_bytes("", 1);
        kr->end_len = 1;
    }
    if ((end || prefix || from_key) && !kr->end) {
        keyrange_free(kr);
        return err_set(ERR_NOMEM, "out of memory");
    }
    return 0;
}

void keyrange_free(KeyRange *kr) {
    free(kr->key);
    free(kr->end);
    memset(kr, 0, sizeof *kr);
}

int keyrange_has(const KeyRange *kr, const uint8_t *key, size_t len) {
    int lo = bbolt_key_cmp(key, len, kr->key, kr->key_len);
    if (!kr->end) return lo == 0;
    if (lo < 0) return 0;
    if (kr->end_len == 1 && kr->end[0] == 0) return 1;
    return bbolt_key_cmp(key, len, kr->end, kr->end_len) < 0;
}
