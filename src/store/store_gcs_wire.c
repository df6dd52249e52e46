/* store_gcs_wire: what the GCS driver reads from the JSON API and its configuration
 * (store_gcs.h): objects.list pages, fields of object metadata, error documents, the chunk layout
 * of uploads and the endpoint override. No I/O. */
#include "../common/err.h"
#include "store_gcs.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* RFC 3339 "2024-05-06T07:08:09[.frac](Z|+hh:mm)" to Unix seconds; 0 if unparseable. */
static int64_t rfc3339(const char *s) {
    int y, mo, d, h, mi, sec;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &sec) != 6) return 0;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970) return 0;
    /* days from civil (Howard Hinnant) */
    int yy = y - (mo <= 2);
    int era = yy / 400;
    int yoe = yy - era * 400;
    int doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = (int64_t)era * 146097 + doe - 719468;
    int64_t t = days * 86400 + h * 3600 + mi * 60 + sec;
    const char *z = s + 19;
    if (*z == '.')
        for (z++; isdigit((unsigned char)*z); z++)
            ;
    int oh, om;
    if ((*z == '+' || *z == '-') && sscanf(z + 1, "%2d:%2d", &oh, &om) == 2)
        t -= (*z == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
    return t;
}

int gcs_list_parse(const char *json, size_t len, GcsListCb cb, void *ctx, char **next_token) {
    *next_token = NULL;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    int rc = 0;
    if (!root || !json_is_object(root)) {
        rc = err_set(ERR_CORRUPT, "GCS list: the response is not a JSON object (line %d)", je.line);
        goto done;
    }
    json_t *items = json_object_get(root, "items");
    if (items && !json_is_array(items)) {
        rc = err_set(ERR_CORRUPT, "GCS list: \"items\" is not an array");
        goto done;
    }
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        const char *name = json_string_value(json_object_get(it, "name"));
        if (!name) {
            rc = err_set(ERR_CORRUPT, "GCS list: item %zu has no name", i);
            goto done;
        }
        int64_t size = -1;
        json_t *sz = json_object_get(it, "size");
        if (json_is_string(sz)) { /* int64 as a JSON string */
            char *ep;
            errno = 0;
            long long v = strtoll(json_string_value(sz), &ep, 10);
            if (!errno && *ep == '\0' && ep != json_string_value(sz) && v >= 0) size = v;
        } else if (json_is_integer(sz) && json_integer_value(sz) >= 0) {
            size = json_integer_value(sz);
        }
        int64_t ret = rfc3339(json_string_value(json_object_get(it, "retentionExpirationTime")));
        rc = cb(ctx, name, size, ret);
        if (rc) goto done;
    }
    const char *tok = json_string_value(json_object_get(root, "nextPageToken"));
    if (tok && tok[0]) {
        *next_token = strdup(tok);
        if (!*next_token) rc = err_set(ERR_NOMEM, "GCS list: out of memory");
    }
done:
    json_decref(root);
    return rc;
}

/* ---- layout ---- */

int64_t gcs_chunk_size(int64_t min_chunk, int n) {
    if (min_chunk <= 0) min_chunk = GCS_DEFAULT_CHUNK;
    if (n < 1) n = 1;
    return min_chunk * (1 + (n - 1) / 128);
}

int gcs_is_chunk_key(const char *key) {
    size_t n = strlen(key);
    if (n < 12 || key[n - 11] != '/') return 0;
    for (size_t i = n - 10; i < n; i++)
        if (!isdigit((unsigned char)key[i])) return 0;
    return 1;
}

int gcs_endpoint_parse(const char *endpoint, char **base, int *emulator) {
    *base = NULL;
    *emulator = 0;
    const char *e = endpoint;
    char *b;
    if (strncmp(e, "https://", 8) == 0) {
        b = strdup(e);
    } else if (strncmp(e, "http://", 7) == 0) {
        b = strdup(e);
        *emulator = 1;
    } else if (!strstr(e, "://") && e[0] && !strchr(e, '/')) {
        /* host:port as in STORAGE_EMULATOR_HOST */
        size_t n = strlen(e) + 8;
        b = malloc(n);
        if (b) snprintf(b, n, "http://%s", e);
        *emulator = 1;
    } else {
        return err_set(ERR_INVALID,
                       "GCS: endpoint \"%s\" must be an http:// or https:// URL (or host:port)", e);
    }
    if (!b) return err_set(ERR_NOMEM, "GCS: out of memory");
    size_t hostoff = (size_t)(strstr(b, "://") - b) + 3;
    if (!b[hostoff] || b[hostoff] == '/') {
        free(b);
        return err_set(ERR_INVALID, "GCS: endpoint \"%s\" has no host", e);
    }
    size_t l = strlen(b);
    while (l > 0 && b[l - 1] == '/')
        b[--l] = '\0';
    /* the Go SDK's WithEndpoint takes ".../storage/v1/"; our URLs add it themselves */
    static const char sv1[] = "/storage/v1";
    if (l >= sizeof sv1 - 1 && strcmp(b + l - (sizeof sv1 - 1), sv1) == 0)
        b[l - (sizeof sv1 - 1)] = '\0';
    l = strlen(b);
    while (l > 0 && b[l - 1] == '/')
        b[--l] = '\0';
    *base = b;
    return 0;
}

/* ---- metadata and errors ---- */

int gcs_meta_int(const char *json, size_t len, const char *field, int64_t *out) {
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *v = json_object_get(root, field);
    int ok = 0;
    if (json_is_string(v)) {
        char *ep;
        long long x = strtoll(json_string_value(v), &ep, 10);
        ok = *ep == '\0' && ep != json_string_value(v);
        *out = x;
    } else if (json_is_integer(v)) {
        *out = json_integer_value(v);
        ok = 1;
    }
    json_decref(root);
    return ok ? 0 : ERR_CORRUPT;
}

void gcs_api_error(const char *json, size_t len, char *out, size_t cap) {
    out[0] = '\0';
    if (!json || !len) return;
    json_t *root = json_loadb(json, len, 0, NULL);
    json_t *e = json_object_get(root, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *reason = json_string_value(
        json_object_get(json_array_get(json_object_get(e, "errors"), 0), "reason"));
    if (msg || reason)
        snprintf(out, cap, "%s%s%.300s", reason ? reason : "", reason && msg ? ": " : "",
                 msg ? msg : "");
    json_decref(root);
}
