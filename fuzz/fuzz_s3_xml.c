/* fuzz_s3_xml: libFuzzer target for the S3 driver's parsers of server bytes: the ListObjectsV2
 * page parser (s3_list_parse) and the STS AssumeRoleWithWebIdentity response parser
 * (s3_sts_parse). Any input must give 0 or a project error, never crash or read out of bounds
 * (the input is not NUL-terminated); every reported key and credential is a NUL-terminated string
 * no longer than the input. Seeds in fuzz/corpus/s3_xml/: s3rver-shaped pages, STS answers. */
#include "common/err.h"
#include "store/store_s3.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cb(void *ctx, const char *key, int64_t size) {
    if (strlen(key) > *(size_t *)ctx || size < -1) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy) return 0;
    memcpy(copy, data, size);
    char *next = NULL;
    int truncated = 0;
    size_t max = size;
    int rc = s3_list_parse(copy, size, cb, &max, &truncated, &next);
    if (rc == 0 && next && strlen(next) > size) abort();
    free(next);
    S3StsCreds c;
    if (s3_sts_parse(copy, size, &c) == 0 &&
        (!c.access_key || !c.secret_key || !c.session_token || strlen(c.access_key) > size ||
         strlen(c.session_token) > size))
        abort();
    s3_sts_creds_clear(&c);
    free(copy);
    return 0;
}
