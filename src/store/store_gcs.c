/* store_gcs: the Google Cloud Storage driver, on the JSON API (storage/v1) through objhttp: the
 * requests, the operations, open and free. Authentication: a service-account key or a workload
 * identity (external_account) file (GOOGLE_APPLICATION_CREDENTIALS), else the metadata server,
 * whose token source (store_gcs_auth.c, store_gcs_ext.c) hands out OAuth2 access tokens; an
 * http:// endpoint is an emulator and gets no token, as in the Go tool. Writes are
 * chunked and composed (store_gcs_compose.c); chunk-shaped keys are never listed. The parsers
 * are store_gcs_wire.c. Tokens and keys never reach messages or logs. */
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/log.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "store_driver.h"
#include "store_gcs.h"
#include "store_gcs_int.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GCS_DEFAULT_BASE "https://storage.googleapis.com"
#define GCS_DEFAULT_PARALLEL 5
#define GCS_LIST_MAX_BODY (16u << 20) /* a page of 1,000 items is under 1 MiB */

struct GcsDriver {
    ObjHttpDriver o;   /* first; o.container is the bucket, o.list_page maxResults */
    char *ebucket;     /* percent-encoded */
    char *api;         /* scheme://host[:port][/path] */
    int batch;         /* chunks per intermediate composite (GCS_BATCH; tests lower it) */
    GcsTokens *tokens; /* NULL: no authentication (an emulator) */
    atomic_int sweep;  /* delete chunk leftovers of finished uploads found by listings */
};

typedef struct {
    GcsDriver *d;
    long gen; /* the token the last attempt carried */
} AuthCtx;

static int auth_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    AuthCtx *a = ctx;
    char *h = NULL;
    int rc = gcs_tokens_header(a->d->tokens, a->d->o.http, &h, &a->gen);
    if (rc) return rc;
    rc = objhttp_hook_header(headers, h, "GCS");
    objhttp_free_secret(h);
    return rc;
}

int gcs_request(GcsDriver *d, const char *method, const char *url, const char *const *headers,
                size_t nh, const void *body, size_t body_len, size_t max_body,
                ObjHttpResponse *resp, ObjHttpStream **stream) {
    AuthCtx actx = {d, -1};
    ObjHttpRequest req = {.method = method,
                          .url = url,
                          .headers = headers,
                          .n_headers = nh,
                          .body = body,
                          .body_len = body_len,
                          .max_body = max_body,
                          .auth = d->tokens ? auth_hook : NULL,
                          .auth_ctx = &actx};
    ObjHttpResponse local = {0};
    if (!resp) resp = &local;
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = stream ? objhttp_stream_open(d->o.http, &req, resp, stream)
                    : objhttp_do(d->o.http, &req, resp);
        if (rc == 0 || resp->status != 401 || !d->tokens) break;
        gcs_tokens_invalidate(d->tokens, actx.gen);
    }
    if (rc && resp->status >= 400) {
        char ex[400];
        gcs_api_error(resp->body, resp->body_len, ex, sizeof ex);
        if (resp->status == 401 || resp->status == 403)
            rc = err_wrap(rc,
                          "GCS bucket %s: access denied (HTTP %ld%s%s): check the service "
                          "account (or workload identity) and its permissions on the bucket",
                          d->o.container, resp->status, ex[0] ? ", " : "", ex);
    }
    objhttp_response_clear(&local);
    return rc;
}

char *gcs_object_url(const GcsDriver *d, const char *key, const char *suffix) {
    char *ek = objhttp_pct_encode(key, 0);
    if (!ek) return NULL;
    char *u =
        objhttp_strfmt("%s/storage/v1/b/%s/o/%s%s", d->api, d->ebucket, ek, suffix ? suffix : "");
    free(ek);
    return u;
}

/* list */

#define SWEEP_RECENT 64 /* non-chunk names remembered to find a chunk's parent */
#define SWEEP_MAX 256   /* chunk objects of finished uploads deleted after one listing */

typedef struct {
    StoreDriverListCb cb;
    void *ctx;
    char *recent[SWEEP_RECENT]; /* the last non-chunk names listed (a ring) */
    size_t n_recent;
    char *sweep[SWEEP_MAX]; /* chunks whose object was listed just before them */
    size_t n_sweep;
} ListCtx;

static int list_item(void *ctx, const char *name, int64_t size, int64_t retention_until) {
    ListCtx *l = ctx;
    (void)retention_until; /* no slot in StoreDriverListCb yet */
    size_t n = strlen(name);
    if (gcs_is_chunk_key(name)) {
        /* parts of an upload, never a snapshot. If the object itself was listed (names come
         * sorted, so "<key>" precedes "<key>/0000000001") the upload finished and the chunk is a
         * leftover: the Go tool leaves them for its GC (docs/go-tool.md §6.1) */
        for (size_t i = 0; i < SWEEP_RECENT && i < l->n_recent && l->n_sweep < SWEEP_MAX; i++) {
            const char *p = l->recent[i];
            if (p && strlen(p) == n - 11 && strncmp(p, name, n - 11) == 0) {
                l->sweep[l->n_sweep] = strdup(name);
                if (l->sweep[l->n_sweep]) l->n_sweep++;
                break;
            }
        }
        return 0;
    }
    size_t slot = l->n_recent++ % SWEEP_RECENT;
    free(l->recent[slot]);
    l->recent[slot] = strdup(name); /* NULL on no memory: only a missed sweep */
    return l->cb(l->ctx, name, size);
}

/* Deletes the chunk objects of finished uploads a listing found. Best effort: a store we may
 * only read (403) is remembered and never swept again. */
static void sweep_chunks(GcsDriver *d, ListCtx *l) {
    size_t done = 0;
    for (size_t i = 0; i < l->n_sweep && atomic_load(&d->sweep); i++) {
        ObjHttpResponse r = {0};
        int rc = gcs_delete_object(d, l->sweep[i], &r);
        if (rc == 0) {
            done++;
        } else if (r.status == 403) {
            atomic_store(&d->sweep, 0);
            log_debug("GCS: no permission to delete chunk leftovers (%s); not trying again",
                      err_msg());
        } else if (rc != ERR_NOT_FOUND) {
            log_debug("GCS: deleting chunk leftover %s: %s", l->sweep[i], err_msg());
        }
        objhttp_response_clear(&r);
    }
    if (done)
        log_info("GCS: deleted %zu chunk objects of finished uploads (the Go tool leaves them)",
                 done);
}

static void list_ctx_free(ListCtx *l) {
    for (size_t i = 0; i < SWEEP_RECENT; i++)
        free(l->recent[i]);
    for (size_t i = 0; i < l->n_sweep; i++)
        free(l->sweep[i]);
}

/* Lists key_prefix; with sweep, deletes the chunk leftovers of finished uploads found on the way
 * (only GC asks for that: a listing for a restore never deletes). */
/* Lists key_prefix; with sweep, deletes the chunk leftovers of finished uploads found on the way
 * (only GC asks for that: a listing for a restore never deletes). */
typedef struct {
    GcsDriver *d;
    const char *prefix;
    ListCtx *lc;
} ListPages;

/* One objects.list page (objhttp_list_pages). */
static int list_page(void *ctx, const char *token, char **next) {
    ListPages *p = ctx;
    GcsDriver *d = p->d;
    char page[16];
    const char *qn[4] = {"prefix", "fields"};
    const char *qv[4] = {p->prefix, "items(name,size,retentionExpirationTime),nextPageToken"};
    size_t nq =
        objhttp_list_pairs(qn, qv, 2, "maxResults", d->o.list_page, page, "pageToken", token);
    char *q = objhttp_query(qn, qv, nq);
    char *url = q ? objhttp_strfmt("%s/storage/v1/b/%s/o?%s", d->api, d->ebucket, q) : NULL;
    free(q);
    if (!url) return err_set(ERR_NOMEM, "GCS list: out of memory");
    ObjHttpResponse r = {0};
    int rc = gcs_request(d, "GET", url, NULL, 0, NULL, 0, GCS_LIST_MAX_BODY, &r, NULL);
    free(url);
    if (rc == 0) rc = gcs_list_parse(r.body, r.body_len, list_item, p->lc, next);
    objhttp_response_clear(&r);
    return rc;
}

static int list_objects(GcsDriver *d, const char *key_prefix, StoreDriverListCb cb, void *ctx,
                        int sweep) {
    ListCtx lc = {.cb = cb, .ctx = ctx};
    ListPages p = {d, key_prefix, &lc};
    int rc = objhttp_list_pages("GCS", "bucket", d->o.container, key_prefix, list_page, &p);
    if (rc == 0 && sweep && lc.n_sweep) sweep_chunks(d, &lc);
    list_ctx_free(&lc);
    return rc;
}

static int gcs_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    return list_objects((GcsDriver *)drv, key_prefix, cb, ctx, 0);
}

static int ignore_item(void *ctx, const char *key, int64_t size) {
    (void)ctx, (void)key, (void)size;
    return 0;
}

/* The Go tool leaves the chunk objects of its composed uploads behind for its GC (docs/go-tool.md
 * §6.1); ours deletes those whose object exists. Chunks of an upload without its object (killed,
 * or still running in another process) are left alone. */
static int gcs_sweep_leftovers(StoreDriver *drv, const char *key_prefix) {
    return list_objects((GcsDriver *)drv, key_prefix, ignore_item, NULL, 1);
}

/* stat, remove */

/* method (GET: the metadata, DELETE) on the object key, buffered into r. */
static int object_call(GcsDriver *d, const char *method, const char *key, ObjHttpResponse *r) {
    char *url = gcs_object_url(d, key, NULL);
    if (!url) return err_set(ERR_NOMEM, "GCS: out of memory");
    int rc = gcs_request(d, method, url, NULL, 0, NULL, 0, 0, r, NULL);
    free(url);
    return rc;
}

int gcs_get_meta(GcsDriver *d, const char *key, ObjHttpResponse *r) {
    return object_call(d, "GET", key, r);
}

static int gcs_stat(StoreDriver *drv, const char *key, int64_t *size) {
    GcsDriver *d = (GcsDriver *)drv;
    int rc = objhttp_driver_key_ok(&d->o, key, "stat");
    if (rc) return rc;
    ObjHttpResponse r = {0};
    rc = gcs_get_meta(d, key, &r);
    if (rc == 0 && gcs_meta_int(r.body, r.body_len, "size", size) != 0)
        rc = err_set(ERR_IO, "GCS stat %s: no size in the object's metadata", key);
    else if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_NOT_FOUND, "GCS stat %s: not found", key);
    objhttp_response_clear(&r);
    return rc;
}

int gcs_delete_object(GcsDriver *d, const char *key, ObjHttpResponse *r) {
    return object_call(d, "DELETE", key, r);
}

int gcs_upload(GcsDriver *d, const char *name, const void *body, size_t len, int if_absent,
               int64_t *generation, ObjHttpResponse *r) {
    const char *qn[3] = {"uploadType", "name", "ifGenerationMatch"};
    const char *qv[3] = {"media", name, "0"};
    char *q = objhttp_query(qn, qv, if_absent ? 3 : 2);
    char *url = q ? objhttp_strfmt("%s/upload/storage/v1/b/%s/o?%s", d->api, d->ebucket, q) : NULL;
    free(q);
    if (!url) return err_set(ERR_NOMEM, "GCS write: out of memory");
    const char *h[1] = {"Content-Type: application/octet-stream"};
    int rc = gcs_request(d, "POST", url, h, 1, body, len, 0, r, NULL);
    free(url);
    if (rc == 0 && generation && gcs_meta_int(r->body, r->body_len, "generation", generation) != 0)
        *generation = 0;
    return rc;
}

static int gcs_remove(StoreDriver *drv, const char *key) {
    GcsDriver *d = (GcsDriver *)drv;
    int rc = objhttp_driver_key_ok(&d->o, key, "remove");
    if (rc) return rc;
    ObjHttpResponse r = {0};
    rc = gcs_delete_object(d, key, &r);
    char ex[400];
    gcs_api_error(r.body, r.body_len, ex, sizeof ex);
    if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "GCS remove %s: not found", key);
    } else if (rc != 0 && r.status == 403 && (strstr(ex, "retention") || strstr(ex, "Retention"))) {
        rc = err_set(ERR_IMMUTABLE,
                     "GCS remove %s: the object is under a retention policy (%s); it stays "
                     "until its retention period ends",
                     key, ex);
    }
    objhttp_response_clear(&r);
    return rc;
}

/* read */

#define GCS_GENERATION_MAX 32 /* the pinned generation's buffer: digits of an int64 */

/* The read_open of objhttp_driver_open_read: the stream at r->offset, of the generation the first
 * answer gave (the reader's pin) when it was all digits. */
static int reader_open(ObjHttpResumable *res) {
    ObjHttpDriverReader *a = (ObjHttpDriverReader *)res;
    GcsDriver *d = (GcsDriver *)a->d;
    char range[64];
    const char *h[1] = {range};
    snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)res->offset);
    char suffix[96];
    snprintf(suffix, sizeof suffix, "?alt=media%s%.*s", a->pin[0] ? "&generation=" : "",
             GCS_GENERATION_MAX - 1, a->pin); /* pinned with that bound */
    char *url = gcs_object_url(d, res->key, suffix);
    if (!url) return err_set(ERR_NOMEM, "GCS read: out of memory");
    ObjHttpResponse r = {0};
    int rc = gcs_request(d, "GET", url, h, res->offset > 0 ? 1 : 0, NULL, 0, 0, &r, &res->s);
    free(url);
    if (rc != 0 && res->offset > 0 && r.status == 416) {
        int64_t size;
        res->s = NULL;
        rc = gcs_stat(&d->o.base, res->key, &size); /* empty, if the object exists */
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "GCS read %s: not found", res->key);
    }
    if (rc == 0 && !a->pin[0])
        rc = objhttp_resumable_pin(res, &r, "x-goog-generation", a->pin, GCS_GENERATION_MAX);
    for (char *p = a->pin; *p; p++)
        if (!isdigit((unsigned char)*p)) a->pin[0] = '\0';
    objhttp_response_clear(&r);
    return rc;
}

/* write */

static int gcs_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    GcsDriver *d = (GcsDriver *)drv;
    return gcs_writer_open(d, key, d->o.min_chunk, d->o.parallel, d->batch, out);
}

static void gcs_free(StoreDriver *drv) {
    GcsDriver *d = (GcsDriver *)drv;
    if (!d) return;
    objhttp_driver_clear(&d->o);
    gcs_tokens_free(d->tokens);
    FREE_ALL(d->ebucket, d->api, d);
}

static const StoreDriverVt gcs_vt = {
    .name = "GCS",
    .features = STORE_FEAT_THREAD_SAFE | STORE_FEAT_NO_REPLACE,
    .list = gcs_list,
    .sweep_leftovers = gcs_sweep_leftovers,
    .open_read = objhttp_driver_open_read,
    .open_write = gcs_open_write,
    .remove = gcs_remove,
    .stat = gcs_stat,
    .remove_dir = NULL,
    .describe = objhttp_driver_describe,
    .free = gcs_free,
};

/* The deprecated "storageAPIEndpoint" file next to the credentials (trimmed), else
 * $GOOGLE_STORAGE_API_ENDPOINT (with cfg's env prefix), as the Go tool; owned or NULL. */
static char *endpoint_from_file(const StoreConfig *cfg, const char *cred_path) {
    char *out = NULL;
    if (cred_path) {
        const char *slash = strrchr(cred_path, '/');
        size_t dl = slash ? (size_t)(slash - cred_path) : 1;
        char *p = objhttp_strfmt("%.*s/storageAPIEndpoint", (int)dl, slash ? cred_path : ".");
        FILE *f = p ? fopen(p, "r") : NULL;
        free(p);
        if (f) {
            char buf[1024];
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = '\0';
            char *s = buf;
            while (*s && isspace((unsigned char)*s))
                s++;
            size_t l = strlen(s);
            while (l > 0 && isspace((unsigned char)s[l - 1]))
                s[--l] = '\0';
            if (l) out = strdup(s);
        }
    }
    if (!out && store_env(cfg, "GOOGLE_STORAGE_API_ENDPOINT")) {
        out = strdup(store_env(cfg, "GOOGLE_STORAGE_API_ENDPOINT"));
        if (out) {
            char *s = out;
            size_t l = strlen(s);
            while (l > 0 && isspace((unsigned char)s[l - 1]))
                s[--l] = '\0';
        }
    }
    return out;
}

/* The API base: the endpoint override (or the storageAPIEndpoint file, or
 * $GOOGLE_STORAGE_API_ENDPOINT), else storage.<universe_domain> of the key, else Google's.
 * *emulator set for an http:// endpoint. */
static int api_base(GcsDriver *d, const StoreConfig *cfg, const char *path, int *emulator) {
    *emulator = 0;
    char *endpoint = cfg->endpoint_override && cfg->endpoint_override[0]
                         ? strdup(cfg->endpoint_override)
                         : endpoint_from_file(cfg, path);
    if (!endpoint) return 0;
    int rc = gcs_endpoint_parse(endpoint, &d->api, emulator);
    free(endpoint);
    return rc;
}

/* Settings, the token source and the client of d; the bucket is not checked yet. */
static int gcs_setup(GcsDriver *d, const StoreConfig *cfg) {
    int rc;
    if ((rc = objhttp_env_int("ETCDBR_GCS_LIST_PAGE_SIZE", 1, 1000, &d->o.list_page)) ||
        (rc = objhttp_env_int("ETCDBR_GCS_COMPOSE_BATCH", 1, GCS_BATCH, &d->batch)))
        return rc;
    const char *path = cfg->credentials && cfg->credentials[0]
                           ? cfg->credentials
                           : store_env(cfg, "GOOGLE_APPLICATION_CREDENTIALS");
    int emulator = 0;
    if ((rc = api_base(d, cfg, path, &emulator))) return rc;
    /* an http:// endpoint is an emulator: no authentication (the Go tool sets
     * STORAGE_EMULATOR_HOST); ETCDBR_GCS_HTTP_AUTH=1 keeps it (tests with a fake token server) */
    const char *ha = objhttp_env("ETCDBR_GCS_HTTP_AUTH");
    if (!emulator || (ha && strcmp(ha, "1") == 0)) {
        /* no credentials file: the metadata server (GCE, GKE), as Google's default
         * credentials chain that the Go tool uses */
        if (!path)
            log_info("GCS: %sGOOGLE_APPLICATION_CREDENTIALS is not set: access tokens come from "
                     "the metadata server",
                     store_env_prefix(cfg));
        char var[96];
        snprintf(var, sizeof var, "%sGOOGLE_APPLICATION_CREDENTIALS", store_env_prefix(cfg));
        if ((rc = gcs_tokens_new(d->o.container, path, var, &d->tokens))) return rc;
    }
    if (!d->api) {
        const char *ud = gcs_tokens_universe(d->tokens);
        if (ud && ud[0] && strcmp(ud, "googleapis.com") != 0)
            d->api = objhttp_strfmt("https://storage.%s", ud);
        else
            d->api = strdup(GCS_DEFAULT_BASE);
        if (!d->api) return err_set(ERR_NOMEM, "GCS: out of memory");
    }
    return objhttp_driver_client(&d->o, cfg);
}

int store_gcs_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    GcsDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "GCS: out of memory");
    d->batch = GCS_BATCH;
    atomic_init(&d->sweep, 1);
    int rc =
        objhttp_driver_init(&d->o, &gcs_vt, cfg, "bucket", GCS_DEFAULT_CHUNK, GCS_DEFAULT_PARALLEL);
    d->o.max_key = GCS_MAX_KEY;
    d->o.read_open = reader_open;
    if (rc == 0 && !(d->ebucket = objhttp_pct_encode(d->o.container, 0)))
        rc = err_set(ERR_NOMEM, "GCS: out of memory");
    if (rc == 0) rc = gcs_setup(d, cfg);
    /* the bucket must exist (buckets.get); this also gets the first access token */
    char *url = rc ? NULL : objhttp_strfmt("%s/storage/v1/b/%s", d->api, d->ebucket);
    if (rc == 0 && !url) rc = err_set(ERR_NOMEM, "GCS: out of memory");
    if (rc == 0) {
        ObjHttpResponse r = {0};
        rc = gcs_request(d, "GET", url, NULL, 0, NULL, 0, 0, &r, NULL);
        objhttp_response_clear(&r);
        if (rc == ERR_NOT_FOUND)
            rc = err_set(ERR_NOT_FOUND, "GCS: bucket %s does not exist at %s", d->o.container,
                         d->api);
    }
    free(url);
    RETURN_BUILT(rc, out, &d->o.base, gcs_free(&d->o.base));
}
