/* fuzz_multipart: libFuzzer target for multipart uploads' answers and the completion document of
 * S3 and OSS: the InitiateMultipartUpload result (s3_parse_upload_id, oss_parse_upload_id) and
 * CompleteMultipartUpload built from ETags a server gave (objhttp_complete_xml). The input's
 * lines are taken as the ETags of parts 1..n (at most 64); the document must hold each one intact
 * (read back with objhttp_xml_element and objhttp_xml_text) whatever bytes it has: the heap
 * overflow of a long ETag full of quotes (issue 17) is the bug this guards. Any upload id must be
 * a NUL-terminated string no longer than the input, and at most OBJHTTP_ID_MAX bytes. Seeds in
 * fuzz/corpus/multipart/: initiate results of S3 and OSS, and ETag lists (quotes, entities, a
 * 300-character tag). */
#include "common/err.h"
#include "store/objhttp.h"
#include "store/store_oss.h"
#include "store/store_s3.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PARTS 64

static void check_id(int rc, char *id, size_t size) {
    if (rc == 0 && (!id || strlen(id) > size || strlen(id) > OBJHTTP_ID_MAX)) abort();
    if (rc != 0 && id) abort();
    free(id);
}

/* Builds the completion document of the input's lines and reads every tag back. */
static void complete_round_trip(const char *copy, size_t size) {
    char *tags[MAX_PARTS];
    int n = 0;
    const char *p = copy, *end = copy + size;
    while (p < end && n < MAX_PARTS) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (memchr(p, '\0', l)) l = strnlen(p, l); /* a C string ends at a NUL */
        tags[n] = malloc(l + 1);
        if (!tags[n]) break;
        memcpy(tags[n], p, l);
        tags[n++][l] = '\0';
        p += (nl ? (size_t)(nl - p) + 1 : l);
        if (!nl) break;
    }
    char *xml = NULL;
    size_t xl = 0;
    if (objhttp_complete_xml((const char *const *)tags, n, "fuzz", &xml, &xl) != 0) abort();
    if (strlen(xml) != xl) abort();
    const char *q = xml, *xe = xml + xl;
    for (int i = 0; i < n; i++) {
        size_t el = 0;
        const char *part = objhttp_xml_element(q, xe, "Part", &el, &q);
        if (!part) abort();
        size_t tl = 0;
        const char *t = objhttp_xml_element(part, part + el, "ETag", &tl, NULL);
        if (!t) abort();
        char *back = objhttp_xml_text(t, tl);
        if (!back || strcmp(back, tags[i]) != 0) abort(); /* the tag came back changed */
        free(back);
    }
    free(xml);
    for (int i = 0; i < n; i++)
        free(tags[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy) return 0;
    memcpy(copy, data, size);
    char *id = NULL;
    int rc = s3_parse_upload_id(copy, size, &id);
    check_id(rc, id, size);
    id = NULL;
    rc = oss_parse_upload_id(copy, size, &id);
    check_id(rc, id, size);
    complete_round_trip(copy, size);
    free(copy);
    return 0;
}
