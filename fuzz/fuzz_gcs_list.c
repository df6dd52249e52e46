/* fuzz_gcs_list: libFuzzer target for the GCS objects.list JSON parser (gcs_list_parse), the
 * token response parser (gcs_token_parse), the impersonation answer (oauth2_answer_parse with an
 * RFC 3339 expireTime) and the external_account file (gcs_ext_parse) on the same bytes. Any input
 * must give 0 or a project error, never crash or read out of bounds (the input is not
 * NUL-terminated); every reported name and the page token are NUL-terminated strings no longer than
 * the input, sizes are -1 or more. Seeds in fuzz/corpus/gcs_list/: fake-gcs-server-shaped pages
 * (escapes, sizes as strings, retention times, nextPageToken, the last page), a token response and
 * an error document. */
#include "common/err.h"
#include "store/oauth2.h"
#include "store/store_gcs.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cb(void *ctx, const char *name, int64_t sz, int64_t retention) {
    size_t max = *(size_t *)ctx;
    (void)retention;
    if (strlen(name) > max || sz < -1) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy) return 0;
    memcpy(copy, data, size);
    char *next = NULL;
    size_t max = size;
    int rc = gcs_list_parse(copy, size, cb, &max, &next);
    if (rc == 0 && next && strlen(next) > size) abort();
    if (rc != 0 && next) abort();
    free(next);
    char *tok = NULL;
    int64_t ex = 0;
    rc = gcs_token_parse(copy, size, &tok, &ex);
    if (rc == 0 && (!tok || strlen(tok) > size || ex <= 0)) abort();
    free(tok);
    tok = NULL;
    rc = oauth2_answer_parse(copy, size, "accessToken", NULL, "expireTime", 1700000000, &tok, &ex);
    if (rc == 0 && (!tok || strlen(tok) > size || ex <= 0 || ex > OAUTH2_MAX_LIFETIME)) abort();
    if (rc != 0 && tok) abort();
    free(tok);
    GcsExtCreds ec;
    if (gcs_ext_parse(copy, size, "fuzz", &ec) == 0 && (!ec.token_file || !ec.token_url)) abort();
    gcs_ext_clear(&ec);
    free(copy);
    return 0;
}
