/* store_swift_wire: the Swift driver's segment layout and container listing parser
 * (store_swift.h). No I/O. */
#include "../common/err.h"
#include "store_swift.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWIFT_MAX_OBJECT ((int64_t)5 << 30)

/* ---- layout ---- */

int swift_is_segment(const char *key) {
    size_t l = strlen(key);
    if (l < 11 || key[l - 11] != '/') return 0;
    for (size_t i = l - 10; i < l; i++)
        if (key[i] < '0' || key[i] > '9') return 0;
    return 1;
}

int64_t swift_segment_size(int64_t min_chunk, int seg_no) {
    if (min_chunk <= 0) min_chunk = SWIFT_DEFAULT_SEGMENT;
    if (min_chunk > SWIFT_MAX_OBJECT) min_chunk = SWIFT_MAX_OBJECT;
    int shift = seg_no > 0 ? (seg_no - 1) / 333 : 0;
    int64_t s = min_chunk;
    for (int i = 0; i < shift && s <= SWIFT_MAX_OBJECT / 2; i++)
        s *= 2;
    return s;
}

int swift_parse_list(const char *json, size_t len, int include_segments, StoreDriverListCb cb,
                     void *ctx, size_t *n_entries, char **last) {
    *n_entries = 0;
    *last = NULL;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!json_is_array(root)) {
        json_decref(root);
        return err_set(ERR_CORRUPT, "Swift list: not a JSON array (line %d: %s)", je.line, je.text);
    }
    int rc = 0;
    size_t i;
    json_t *e;
    const char *last_name = NULL;
    json_array_foreach(root, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name) {
            name = json_string_value(json_object_get(e, "subdir"));
            if (name) { /* only with a delimiter, which we never send */
                last_name = name;
                continue;
            }
            rc = err_set(ERR_CORRUPT, "Swift list: entry %zu has no name", i);
            break;
        }
        last_name = name;
        if (!name[0] || strlen(name) != json_string_length(json_object_get(e, "name"))) {
            rc = err_set(ERR_CORRUPT, "Swift list: entry %zu has an empty name or a NUL byte", i);
            break;
        }
        if (swift_is_segment(name) != include_segments) continue;
        json_t *b = json_object_get(e, "bytes");
        int64_t size =
            json_is_integer(b) && json_integer_value(b) > 0 ? (int64_t)json_integer_value(b) : -1;
        rc = cb(ctx, name, size);
        if (rc) break;
    }
    *n_entries = json_array_size(root);
    if (rc == 0 && last_name) {
        *last = strdup(last_name);
        if (!*last) rc = err_set(ERR_NOMEM, "Swift list: out of memory");
    }
    json_decref(root);
    return rc;
}
