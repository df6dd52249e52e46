/* store_abs_wire: the List Blobs answer of the ABS driver (store_abs.h). No I/O. */
#include "../common/err.h"
#include "objhttp.h"
#include "store_abs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- listing XML ---- */

static const char *find_str(const char *p, const char *end, const char *s) {
    size_t l = strlen(s);
    for (; p && p + l <= end; p++) {
        p = memchr(p, s[0], (size_t)(end - p));
        if (!p || p + l > end) return NULL;
        if (memcmp(p, s, l) == 0) return p;
    }
    return NULL;
}

/* The element <tag ...>text</tag> first found in [p, end): text span and whether its opening
 * tag says Encoded="true". 1 found (empty element "<tag/>" gives an empty span), 0 absent,
 * -1 malformed. */
static int element(const char *p, const char *end, const char *tag, const char **ts, size_t *tl,
                   int *encoded, const char **after) {
    const char *o = objhttp_xml_open(p, end, tag);
    if (!o) return 0;
    const char *gt = memchr(o, '>', (size_t)(end - o));
    if (!gt) return -1;
    if (encoded) *encoded = find_str(o, gt, "Encoded=\"true\"") != NULL;
    if (gt[-1] == '/') {
        *ts = gt + 1;
        *tl = 0;
        if (after) *after = gt + 1;
        return 1;
    }
    char close[64];
    snprintf(close, sizeof close, "</%s>", tag);
    const char *c = find_str(gt + 1, end, close);
    if (!c) return -1;
    *ts = gt + 1;
    *tl = (size_t)(c - *ts);
    if (after) *after = c + strlen(close);
    return 1;
}

int abs_parse_list(const char *xml, size_t len, StoreDriverListCb cb, void *ctx,
                   char **next_marker) {
    *next_marker = NULL;
    const char *end = xml + len, *p = xml;
    if (!objhttp_xml_open(xml, end, "EnumerationResults"))
        return err_set(ERR_CORRUPT, "ABS list: not an EnumerationResults document");
    const char *blobs_end = end;
    const char *bs = objhttp_xml_open(xml, end, "Blobs");
    if (bs) {
        const char *be = find_str(bs, end, "</Blobs>");
        if (be) blobs_end = be;
        p = bs;
    }
    for (;;) {
        const char *b = objhttp_xml_open(p, blobs_end, "Blob");
        if (!b) break;
        const char *be = find_str(b, blobs_end, "</Blob>");
        if (!be) return err_set(ERR_CORRUPT, "ABS list: unterminated <Blob>");
        const char *ts;
        size_t tl;
        int enc = 0;
        if (element(b, be, "Name", &ts, &tl, &enc, NULL) != 1)
            return err_set(ERR_CORRUPT, "ABS list: <Blob> without <Name>");
        char *name = objhttp_xml_text_pct(ts, tl, enc);
        if (!name) return err_set(ERR_CORRUPT, "ABS list: bad name (entity or memory)");
        int64_t size = -1;
        if (element(b, be, "Content-Length", &ts, &tl, NULL, NULL) == 1)
            (void)objhttp_size_text(ts, tl, &size); /* -1 when it is not a size */
        int rc = cb(ctx, name, size);
        free(name);
        if (rc) return rc;
        p = be + 7;
    }
    const char *ts;
    size_t tl;
    /* NextMarker follows </Blobs> */
    int r = element(blobs_end, end, "NextMarker", &ts, &tl, NULL, NULL);
    if (r < 0) return err_set(ERR_CORRUPT, "ABS list: malformed <NextMarker>");
    if (r == 1 && tl > 0) {
        *next_marker = objhttp_xml_text(ts, tl);
        if (!*next_marker) return err_set(ERR_CORRUPT, "ABS list: bad NextMarker");
    }
    return 0;
}
