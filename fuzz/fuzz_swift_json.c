/* fuzz_swift_json: libFuzzer target for the Swift driver's parsers of outside JSON: the container
 * listing (swift_parse_list, segments hidden or only segments) and the Keystone v3 token's
 * service catalog (swift_catalog_lookup). The first byte picks the parser and its options
 * (bit 0: catalog, bit 1: include_segments / a region filter); the rest is the document. Any
 * input must give 0 or a project error, never crash or read out of bounds; reported names and
 * the marker are NUL-terminated and no longer than the input, a reported size is -1 or positive,
 * and a segment is reported exactly when segments were asked for. Seeds in
 * fuzz/corpus/swift_json/: listing pages as Swift 2.30 sends them and Keystone token answers. */
#include "common/err.h"
#include "store/store_swift.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    size_t max;
    int segments;
} Ctx;

static int cb(void *ctx, const char *key, int64_t size) {
    Ctx *c = ctx;
    if (strlen(key) > c->max || size < -1 || size == 0) abort();
    if (swift_is_segment(key) != c->segments) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned mode = data[0];
    size--;
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy) return 0;
    memcpy(copy, data + 1, size);
    if (mode & 1) {
        char *url = NULL;
        int rc = swift_catalog_lookup(copy, size, (mode & 2) ? "RegionOne" : NULL, &url);
        if (rc == 0 && (!url || strlen(url) > size)) abort();
        if (rc != 0 && url) abort();
        free(url);
    } else {
        Ctx c = {size, (mode & 2) ? 1 : 0};
        size_t n = 0;
        char *last = NULL;
        int rc = swift_parse_list(copy, size, c.segments, cb, &c, &n, &last);
        if (rc == 0 && last && strlen(last) > size) abort();
        if (rc == 0 && n > 0 && !last) abort();
        free(last);
    }
    free(copy);
    return 0;
}
