/* fuzz_http_response: libFuzzer target for what objhttp reads of every driver's answers: the
 * header block (objhttp_response_header, objhttp_response_header_fit: values copied with their
 * length checked into small buffers, the way drivers keep ETags, tokens and storage URLs), the
 * listing guard fed with the input's lines as continuation tokens (objhttp_listing_page: a
 * repeated token must be refused, a new one accepted), bounded copies (objhttp_dup_bounded) and
 * the excerpt of error documents (objhttp_body_excerpt: S3, ABS and OSS XML, GCS and Swift JSON).
 * Any input must give 0 or a project error, never crash or write out of bounds. Seeds in
 * fuzz/corpus/http_response/: header blocks of S3, ABS, GCS, Swift auth (X-Auth-Token,
 * X-Storage-Url), Keystone (X-Subject-Token) and OSS answers, and token lists. */
#include "common/err.h"
#include "store/objhttp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const NAMES[] = {"ETag",
                                    "X-Auth-Token",
                                    "X-Storage-Url",
                                    "Content-Length",
                                    "x-ms-error-code",
                                    "x-goog-generation",
                                    "X-Subject-Token",
                                    "Location",
                                    ""};

static void headers(const char *text) {
    ObjHttpResponse r = {0};
    r.headers = (char *)text;
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        char small[8], big[OBJHTTP_ETAG_MAX + 1];
        const char *v = objhttp_response_header(&r, NAMES[i], small, sizeof small);
        if (v && strlen(v) >= sizeof small) abort();
        int rc = objhttp_response_header_fit(&r, NAMES[i], big, sizeof big, "fuzz");
        if (rc == 0 && strlen(big) >= sizeof big) abort();
        rc = objhttp_response_header_fit(&r, NAMES[i], small, sizeof small, "fuzz");
        if (rc == 0 && strlen(small) >= sizeof small) abort();
    }
}

/* Lines as continuation tokens: a token seen before (exactly) must be refused. */
static void tokens(const char *text) {
    ObjHttpListing l;
    objhttp_listing_begin(&l, "fuzz", "b", "p/");
    const char *seen[64];
    size_t seen_len[64];
    int n = 0;
    const char *p = text;
    while (*p && n < 64) {
        size_t len = strcspn(p, "\n");
        char tok[256];
        size_t tl = len < sizeof tok - 1 ? len : sizeof tok - 1;
        memcpy(tok, p, tl);
        tok[tl] = '\0';
        int dup = 0;
        for (int i = 0; i < n; i++)
            if (seen_len[i] == tl && memcmp(seen[i], tok, tl) == 0) dup = 1;
        int rc = objhttp_listing_page(&l, tok);
        if (dup && tl > 0 && rc == 0) abort(); /* a repeated token went through */
        if (rc == 0) {
            seen[n] = p;
            seen_len[n++] = tl;
        }
        p += len;
        if (*p == '\n') p++;
    }
    objhttp_listing_end(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    headers(text);
    tokens(text);
    char *d = objhttp_dup_bounded(text, size, 100, "field", "fuzz");
    if ((size <= 100) != (d != NULL)) abort();
    if (d && (memcmp(d, text, size) != 0 || d[size] != '\0')) abort();
    free(d);
    char ex[64]; /* every driver's error document goes through this excerpt */
    objhttp_body_excerpt(text, ex, sizeof ex);
    if (strlen(ex) >= sizeof ex) abort();
    free(text);
    return 0;
}
