/* inspect_kube: inspect_kube_type (inspect_print.h). */
#include "inspect_print.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define KUBE_MAGIC "k8s\0"
#define KUBE_JSON_MAX (4u << 20) /* a larger JSON value is not parsed for its type */

/* A protobuf varint at *p (before end): 0 and *v, or -1 when truncated or longer than 10 bytes. */
static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

/* The length-delimited field `field` of the message [p, end): *out, *out_len; 0 or -1. Skips
 * other fields by their wire type; groups and bad wire types are -1. */
static int find_field(const uint8_t *p, const uint8_t *end, uint64_t field, const uint8_t **out,
                      size_t *out_len) {
    while (p < end) {
        uint64_t tag, n;
        if (varint(&p, end, &tag)) return -1;
        switch (tag & 7) {
        case 0:
            if (varint(&p, end, &n)) return -1;
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        case 2:
            if (varint(&p, end, &n) || n > (uint64_t)(end - p)) return -1;
            if ((tag >> 3) == field) {
                *out = p;
                *out_len = (size_t)n;
                return 0;
            }
            p += n;
            break;
        default:
            return -1;
        }
    }
    return -1;
}

static int from_protobuf(const uint8_t *v, size_t len, char *out, size_t cap) {
    const uint8_t *tm, *api, *kind;
    size_t tm_len, api_len, kind_len;
    const uint8_t *p = v + 4, *end = v + len;
    if (find_field(p, end, 1, &tm, &tm_len)) return 0; /* runtime.Unknown.typeMeta */
    if (find_field(tm, tm + tm_len, 1, &api, &api_len) ||
        find_field(tm, tm + tm_len, 2, &kind, &kind_len))
        return 0;
    if (api_len > 128 || kind_len > 128) return 0;
    snprintf(out, cap, "%.*s %.*s", (int)api_len, (const char *)api, (int)kind_len,
             (const char *)kind);
    return 1;
}

static int from_json(const uint8_t *v, size_t len, char *out, size_t cap) {
    json_error_t e;
    json_t *j = json_loadb((const char *)v, len, JSON_REJECT_DUPLICATES, &e);
    const char *api = json_string_value(json_object_get(j, "apiVersion"));
    const char *kind = json_string_value(json_object_get(j, "kind"));
    int ok = api && kind && strlen(api) <= 128 && strlen(kind) <= 128;
    if (ok) snprintf(out, cap, "%s %s", api, kind);
    json_decref(j);
    return ok;
}

int inspect_kube_type(const uint8_t *value, size_t len, char *out, size_t cap) {
    int found = 0;
    if (len >= 4 && memcmp(value, KUBE_MAGIC, 4) == 0)
        found = from_protobuf(value, len, out, cap);
    else if (len && len <= KUBE_JSON_MAX && value[0] == '{')
        found = from_json(value, len, out, cap);
    for (char *p = out; found && *p; p++) /* a terminal shows text, not control bytes */
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) *p = '?';
    return found;
}
