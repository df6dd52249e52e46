/* fuzz_abs_list: libFuzzer target for the Azure List Blobs parser (abs_parse_list). Any input must
 * give 0 or a project error, never crash or read out of bounds (the input is not NUL-terminated);
 * every reported name is a NUL-terminated string no longer than the input. Seeds in
 * fuzz/corpus/abs_list/: azurite-shaped pages (entities, Encoded names, NextMarker, last page). */
#include "common/err.h"
#include "store/store_abs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cb(void *ctx, const char *key, int64_t size) {
    size_t max = *(size_t *)ctx;
    if (strlen(key) > max || size < -1) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy) return 0;
    memcpy(copy, data, size);
    char *next = NULL;
    size_t max = size;
    int rc = abs_parse_list(copy, size, cb, &max, &next);
    if (rc == 0 && next && strlen(next) > size) abort();
    free(next);
    free(copy);
    return 0;
}
