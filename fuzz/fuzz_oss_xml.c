/* fuzz_oss_xml: libFuzzer target for the OSS driver's parsers of server answers: the ListObjects
 * page (oss_parse_list), the InitiateMultipartUpload result (oss_parse_upload_id) and the error
 * document (oss_parse_error_code), all on the same input. Any input must give 0 or a project
 * error, never crash or read out of bounds (the input is not NUL-terminated); every reported key,
 * marker and upload id is a NUL-terminated string no longer than the input. Seeds in
 * fuzz/corpus/oss_xml/: pages as fake_oss.py answers (entities, encoding-type=url, NextMarker,
 * last page), an initiate result and error documents. */
#include "common/err.h"
#include "store/store_oss.h"

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
    size_t max = size;
    int truncated = 0;
    char *next = NULL;
    int rc = oss_parse_list(copy, size, cb, &max, &truncated, &next);
    if (rc == 0 && next && strlen(next) > size) abort();
    if (rc == 0 && truncated && !next) abort();
    free(next);
    char *id = NULL;
    rc = oss_parse_upload_id(copy, size, &id);
    if (rc == 0 && (!id || strlen(id) > size)) abort();
    free(id);
    char code[64];
    oss_parse_error_code(copy, size, code, sizeof code);
    if (strlen(code) >= sizeof code) abort();
    free(copy);
    return 0;
}
