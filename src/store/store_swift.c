/* store_swift: the OpenStack Swift driver (store_swift.h): requests, operations, open and free.
 * Authentication (tempauth/swauth v1 or Keystone v3, by the auth URL) is the session of
 * store_swift_auth.c; a request answered 401 re-authenticates once and is sent again. Writes
 * upload segments of a Dynamic Large Object (up to max_parallel_chunk_uploads in flight, so memory
 * is bounded by the segments in flight) and then the manifest; an object that fits in one segment
 * is one PUT. Every request goes through objhttp (retries, streaming, redacted errors); tokens
 * and passwords never reach messages or logs. */
#include "../common/err.h"
#include "../common/log.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "store_swift.h"
#include "../common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWIFT_DEFAULT_PARALLEL 5
#define SWIFT_MAX_KEY 1024
#define SWIFT_LIST_MAX_BODY ((size_t)16 << 20) /* 10,000 names: about 2 MiB */
#define SWIFT_MAX_PAGE 10000                   /* Swift's default container_listing_limit */

typedef struct SwiftDriver {
    ObjHttpDriver o; /* first; o.min_chunk is the first segments' size, o.list_page the limit */
    SwiftSession *session; /* credentials, token, storage URL */
} SwiftDriver;

typedef struct TokenCtx {
    const char *header; /* "X-Auth-Token: ..." */
} TokenCtx;

static int token_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    return objhttp_hook_header(headers, ((TokenCtx *)ctx)->header, "Swift");
}

typedef struct SwiftCall {
    const char *method;
    const char *key;
    const char *query;
    const char *const *headers;
    size_t nh;
    const void *body;
    size_t body_len;
    size_t max_body;
} SwiftCall;

/* Sends c (buffered into resp, or streamed into *stream for a GET when stream is non-NULL). A 401
 * re-authenticates once and sends the call again. */
static int swift_do(SwiftDriver *d, const SwiftCall *c, ObjHttpResponse *resp,
                    ObjHttpStream **stream) {
    int rc = 0;
    char *ekey = NULL, *econt = objhttp_pct_encode(d->o.container, 0);
    if (!econt) return err_set(ERR_NOMEM, "Swift: out of memory");
    if (c->key && !(ekey = objhttp_pct_encode(c->key, 1))) {
        free(econt);
        return err_set(ERR_NOMEM, "Swift: out of memory");
    }
    for (int attempt = 0;; attempt++) {
        unsigned gen;
        char *hdr, *base;
        if (swift_session_get(d->session, &hdr, &base, &gen) != 0) {
            if (attempt == 0 && (rc = swift_session_auth(d->session, d->o.http, gen)) == 0)
                continue;
            if (!rc) rc = err_set(ERR_NOMEM, "Swift: out of memory");
            break;
        }
        size_t n = strlen(base) + strlen(econt) + (ekey ? strlen(ekey) : 0) +
                   (c->query ? strlen(c->query) : 0) + 4;
        char *url = malloc(n);
        if (url)
            snprintf(url, n, "%s/%s%s%s%s%s", base, econt, ekey ? "/" : "", ekey ? ekey : "",
                     c->query ? "?" : "", c->query ? c->query : "");
        free(base);
        if (!url) {
            objhttp_free_secret(hdr);
            rc = err_set(ERR_NOMEM, "Swift: out of memory");
            break;
        }
        TokenCtx tc = {hdr};
        ObjHttpRequest req = {
            .method = c->method,
            .url = url,
            .headers = c->headers,
            .n_headers = c->nh,
            .body = c->body,
            .body_len = c->body_len,
            .max_body = c->max_body,
            .auth = token_hook,
            .auth_ctx = &tc,
        };
        if (resp) objhttp_response_clear(resp);
        ObjHttpResponse local = {0};
        ObjHttpResponse *r = resp ? resp : &local;
        if (stream)
            rc = objhttp_stream_open(d->o.http, &req, r, stream);
        else
            rc = objhttp_do(d->o.http, &req, r);
        long status = r->status;
        objhttp_response_clear(&local);
        objhttp_free_secret(hdr);
        free(url);
        if (rc != 0 && status == 401 && attempt == 0) {
            log_info("Swift: %s %s: token refused (HTTP 401); authenticating again", c->method,
                     c->key ? c->key : d->o.container);
            int ar = swift_session_auth(d->session, d->o.http, gen);
            if (ar == 0) continue;
            rc = ar;
        }
        break;
    }
    free(ekey);
    free(econt);
    return rc;
}

/* ---- list ---- */

typedef struct {
    SwiftDriver *d;
    const char *prefix;
    int include_segments;
    StoreDriverListCb cb;
    void *ctx;
} ListPages;

/* One page after marker (objhttp_list_pages): the last name of a non-empty page is the next. */
static int list_page(void *ctx, const char *marker, char **next) {
    ListPages *p = ctx;
    char page[16];
    const char *qn[4] = {"format", "prefix"};
    const char *qv[4] = {"json", p->prefix};
    size_t nq = objhttp_list_pairs(qn, qv, 2, "limit", p->d->o.list_page, page, "marker", marker);
    char *q = objhttp_query(qn, qv, nq);
    if (!q) return err_set(ERR_NOMEM, "Swift list: out of memory");
    SwiftCall c = {.method = "GET", .query = q, .max_body = SWIFT_LIST_MAX_BODY};
    ObjHttpResponse r = {0};
    int rc = swift_do(p->d, &c, &r, NULL);
    free(q);
    size_t n = 0;
    if (rc == 0 && r.status != 204) /* an empty container may answer 204 */
        rc = swift_parse_list(r.body, r.body_len, p->include_segments, p->cb, p->ctx, &n, next);
    objhttp_response_clear(&r);
    if (n == 0) {
        free(*next);
        *next = NULL;
    }
    return rc;
}

/* Lists every object under prefix, segments or not (include_segments), page by page until an
 * empty page (as python-swiftclient does: a page may be shorter than asked when the server's
 * listing limit is lower). limit is sent only when ETCDBR_SWIFT_LIST_PAGE_SIZE sets one, since a
 * limit above the server's maximum is refused (412). */
static int list_prefix(SwiftDriver *d, const char *prefix, int include_segments,
                       StoreDriverListCb cb, void *ctx) {
    ListPages p = {d, prefix, include_segments, cb, ctx};
    return objhttp_list_pages("Swift", "container", d->o.container, prefix, list_page, &p);
}

static int swift_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    return list_prefix((SwiftDriver *)drv, key_prefix, 0, cb, ctx);
}

/* ---- stat, remove ---- */

static int swift_stat(StoreDriver *drv, const char *key, int64_t *size) {
    SwiftDriver *d = (SwiftDriver *)drv;
    int rc = objhttp_driver_key_ok(&d->o, key, "stat");
    if (rc) return rc;
    SwiftCall c = {.method = "HEAD", .key = key};
    ObjHttpResponse r = {0};
    rc = swift_do(d, &c, &r, NULL);
    if (rc == 0) {
        if (objhttp_response_length(&r, size) != 0)
            rc = err_set(ERR_IO, "Swift stat %s: no Content-Length in the answer", key);
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "Swift stat %s: not found", key);
    }
    objhttp_response_clear(&r);
    return rc;
}

/* DELETE of one object; a missing one is ERR_NOT_FOUND. */
static int delete_object(SwiftDriver *d, const char *key) {
    SwiftCall c = {.method = "DELETE", .key = key};
    ObjHttpResponse r = {0};
    int rc = swift_do(d, &c, &r, NULL);
    objhttp_response_clear(&r);
    return rc;
}

typedef struct SegDel {
    SwiftDriver *d;
    const char *key; /* the object whose segments go */
    size_t key_len;
    int above; /* delete only segments numbered above this (0: all) */
    int deleted;
} SegDel;

/* Deletes a listed segment of exactly sd->key ("<key>/<10 digits>"): nothing of a sibling. */
static int seg_delete_cb(void *ctx, const char *name, int64_t size) {
    (void)size;
    SegDel *sd = ctx;
    if (strlen(name) != sd->key_len + 11 || strncmp(name, sd->key, sd->key_len) != 0 ||
        name[sd->key_len] != '/')
        return 0;
    if (atoi(name + sd->key_len + 1) <= sd->above) return 0;
    int rc = delete_object(sd->d, name);
    if (rc == ERR_NOT_FOUND) rc = 0;
    if (rc == 0) sd->deleted++;
    return rc;
}

/* Deletes the segments "<key>/<10 digits>" numbered above `above`. */
static int delete_segments(SwiftDriver *d, const char *key, int above, int *deleted) {
    size_t kl = strlen(key);
    char *prefix = malloc(kl + 2);
    if (!prefix) return err_set(ERR_NOMEM, "Swift: out of memory");
    snprintf(prefix, kl + 2, "%s/", key);
    SegDel sd = {d, key, kl, above, 0};
    int rc = list_prefix(d, prefix, 1, seg_delete_cb, &sd);
    free(prefix);
    if (deleted) *deleted = sd.deleted;
    return rc;
}

/* The manifest (or plain object) goes first, then its segments: a removal cut short leaves
 * invisible segments behind, never a visible manifest whose GET returns a truncated
 * concatenation. A missing object is ERR_NOT_FOUND, but its segments are still removed, so a
 * retry finishes what an interrupted removal started. */
static int swift_remove(StoreDriver *drv, const char *key) {
    SwiftDriver *d = (SwiftDriver *)drv;
    int rc = objhttp_driver_key_ok(&d->o, key, "remove");
    if (rc) return rc;
    if (swift_is_segment(key))
        return err_set(ERR_INVALID, "Swift remove %s: a segment is removed with its manifest", key);
    rc = delete_object(d, key);
    if (rc != 0 && rc != ERR_NOT_FOUND) return rc;
    int deleted = 0;
    int src = delete_segments(d, key, 0, &deleted);
    if (src) return err_wrap(src, "Swift remove %s: the object is gone but not its segments", key);
    if (deleted) log_debug("Swift remove %s: %d segments removed", key, deleted);
    if (rc == ERR_NOT_FOUND) return err_set(ERR_NOT_FOUND, "Swift remove %s: not found", key);
    return 0;
}

/* ---- read ---- */

/* The read_open of objhttp_driver_open_read: the stream at r->offset; a resumed read whose ETag
 * differs from the first answer's (the reader's pin) fails. */
static int reader_open(ObjHttpResumable *res) {
    ObjHttpDriverReader *a = (ObjHttpDriverReader *)res;
    SwiftDriver *d = (SwiftDriver *)a->d;
    char range[64];
    const char *h[1] = {range};
    snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)res->offset);
    SwiftCall c = {.method = "GET", .key = res->key, .headers = h, .nh = res->offset > 0 ? 1 : 0};
    ObjHttpResponse r = {0};
    int rc = swift_do(d, &c, &r, &res->s);
    if (rc != 0 && res->offset > 0 && r.status == 416) {
        int64_t size; /* at or past the end: an empty stream, if the object exists */
        rc = swift_stat(&d->o.base, res->key, &size);
        res->s = NULL;
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "Swift read %s: not found", res->key);
    }
    char etag[sizeof a->pin] = "";
    if (rc == 0 && res->s) rc = objhttp_resumable_pin(res, &r, "ETag", etag, sizeof etag);
    if (rc == 0 && res->s && etag[0]) {
        if (!a->pin[0]) {
            snprintf(a->pin, sizeof a->pin, "%s", etag);
        } else if (strcmp(etag, a->pin) != 0) {
            objhttp_stream_free(res->s);
            res->s = NULL;
            rc = err_set(ERR_IO,
                         "Swift read %s: the object changed while it was read (ETag %s, "
                         "then %s)",
                         res->key, a->pin, etag);
        }
    }
    objhttp_response_clear(&r);
    return rc;
}

/* ---- write ---- */

typedef struct SwiftWriter {
    StoreDriverWriter base;
    IoWriter io;
    SwiftDriver *d;
    char *key;
    ObjHttpPartWriter *pw; /* the segments (objhttp.h) */
} SwiftWriter;

static void seg_key(const char *key, int num, char *out, size_t cap) {
    snprintf(out, cap, "%s/%010d", key, num);
}

static int put_segment(void *ctx, int num, const void *data, size_t len) {
    SwiftWriter *w = ctx;
    char k[SWIFT_MAX_KEY + 16];
    seg_key(w->key, num, k, sizeof k);
    SwiftCall c = {.method = "PUT", .key = k, .body = data, .body_len = len};
    ObjHttpResponse r = {0};
    int rc = swift_do(w->d, &c, &r, NULL);
    objhttp_response_clear(&r);
    if (rc) err_wrap(rc, "Swift write %s: segment %d", w->key, num);
    return rc;
}

/* Before the first segment: an existing object under the key is ERR_EXISTS, since its segments
 * would be overwritten before the manifest's If-None-Match could refuse (a writer racing between
 * this check and the manifest still can: the segment names are the Go tool's, fixed per key). */
static int before_segment(void *ctx, int num) {
    SwiftWriter *w = ctx;
    if (num > 1) return 0;
    int64_t size;
    int rc = swift_stat(&w->d->o.base, w->key, &size);
    if (rc == 0) return err_set(ERR_EXISTS, "Swift write %s: the object already exists", w->key);
    return rc == ERR_NOT_FOUND ? 0 : rc;
}

static size_t segment_size(void *ctx, int num) {
    return (size_t)swift_segment_size(((SwiftWriter *)ctx)->d->o.min_chunk, num);
}

static IoWriter *writer_io(StoreDriverWriter *sw) {
    return objhttp_pw_io(((SwiftWriter *)sw)->pw);
}

/* Stops the uploaders (the queued segments are skipped once discard is set), joins them. */
static void writer_stop(SwiftWriter *w, int discard) {
    objhttp_pw_stop(w->pw, discard);
}

/* Deletes the segments this writer may have handed to the uploaders; failures are logged. */
static void delete_own_segments(SwiftWriter *w) {
    for (int i = 1; w->pw && i <= objhttp_pw_parts(w->pw); i++) {
        char k[SWIFT_MAX_KEY + 16];
        seg_key(w->key, i, k, sizeof k);
        int rc = delete_object(w->d, k);
        if (rc != 0 && rc != ERR_NOT_FOUND)
            log_warn("Swift: cannot delete segment %s of an unfinished upload: %s", k, err_msg());
    }
}

static void writer_free(SwiftWriter *w) {
    objhttp_pw_free(w->pw, 1);
    free(w->key);
    free(w);
}

/* PUT key with body (plain object) or as a manifest (manifest non-NULL: the X-Object-Manifest
 * value), refused with 412 (ERR_EXISTS) when the key already exists. */
static int put_final(SwiftWriter *w, const void *body, size_t len, const char *manifest) {
    char *mh = manifest ? objhttp_header_line("X-Object-Manifest", manifest) : NULL;
    if (manifest && !mh) return err_set(ERR_NOMEM, "Swift write %s: out of memory", w->key);
    const char *h[2] = {"If-None-Match: *", mh};
    SwiftCall c = {.method = "PUT",
                   .key = w->key,
                   .headers = h,
                   .nh = mh ? 2 : 1,
                   .body = body,
                   .body_len = len};
    ObjHttpResponse r = {0};
    int rc = swift_do(w->d, &c, &r, NULL);
    if (rc != 0 && r.status == 412)
        rc = err_set(ERR_EXISTS, "Swift write %s: the object already exists (HTTP 412)", w->key);
    objhttp_response_clear(&r);
    free(mh);
    return rc;
}

static int writer_commit(StoreDriverWriter *sw) {
    SwiftWriter *w = (SwiftWriter *)sw;
    int rc = objhttp_pw_failed(w->pw);
    char *manifest = NULL;
    if (!rc && objhttp_pw_parts(w->pw) == 0) { /* fits in one segment: one plain object */
        size_t len;
        const void *body = objhttp_pw_rest(w->pw, &len);
        rc = put_final(w, body, len, NULL);
        writer_stop(w, rc != 0);
        writer_free(w);
        return rc;
    }
    if (rc == 0) rc = objhttp_pw_finish(w->pw);
    writer_stop(w, rc != 0);
    /* segments above ours, left by an earlier upload of this key that was killed, would be
     * concatenated too: they go before the manifest appears */
    if (rc == 0) rc = delete_segments(w->d, w->key, objhttp_pw_parts(w->pw), NULL);
    if (rc == 0) {
        char *ec = objhttp_pct_encode(w->d->o.container, 0);
        char *ek = objhttp_pct_encode(w->key, 1);
        size_t n = (ec ? strlen(ec) : 0) + (ek ? strlen(ek) : 0) + 3;
        manifest = ec && ek ? malloc(n) : NULL;
        if (manifest)
            snprintf(manifest, n, "%s/%s/", ec, ek);
        else
            rc = err_set(ERR_NOMEM, "Swift write %s: out of memory", w->key);
        free(ec);
        free(ek);
    }
    if (rc == 0) rc = put_final(w, "", 0, manifest);
    if (rc != 0 && rc != ERR_EXISTS) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        delete_own_segments(w);
        err_set(rc, "%s", msg);
    }
    /* ERR_EXISTS: the segments are the existing object's now (same names); they stay */
    free(manifest);
    writer_free(w);
    return rc;
}

static void writer_abort(StoreDriverWriter *sw) {
    SwiftWriter *w = (SwiftWriter *)sw;
    writer_stop(w, 1);
    delete_own_segments(w);
    writer_free(w);
}

static const StoreDriverWriterVt writer_vt = {writer_io, writer_commit, writer_abort};

static int swift_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    SwiftDriver *d = (SwiftDriver *)drv;
    *out = NULL;
    int rc = objhttp_driver_key_ok(&d->o, key, "write");
    if (rc) return rc;
    if (strlen(key) + 11 > SWIFT_MAX_KEY)
        return err_set(ERR_INVALID, "Swift write: key \"%.64s\" leaves no room for segment names",
                       key);
    SwiftWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key))) {
        free(w);
        return err_set(ERR_NOMEM, "Swift write: out of memory");
    }
    w->base.vt = &writer_vt;
    w->d = d;
    ObjHttpPartWriterConfig pc = {.what = "Swift",
                                  .key = key,
                                  .parallel = d->o.parallel,
                                  .part_size = segment_size,
                                  .before = before_segment,
                                  .put = put_segment,
                                  .ctx = w};
    if ((rc = objhttp_pw_new(&pc, &w->pw))) {
        writer_free(w);
        return rc;
    }
    *out = &w->base;
    return 0;
}

static void swift_free(StoreDriver *drv) {
    SwiftDriver *d = (SwiftDriver *)drv;
    if (!d) return;
    objhttp_driver_clear(&d->o);
    swift_session_free(d->session);
    free(d);
}

static const StoreDriverVt swift_vt = {
    .name = "Swift",
    .features = STORE_FEAT_THREAD_SAFE,
    .list = swift_list,
    .open_read = objhttp_driver_open_read,
    .open_write = swift_open_write,
    .remove = swift_remove,
    .stat = swift_stat,
    .remove_dir = NULL,
    .describe = objhttp_driver_describe,
    .free = swift_free,
};

/* Settings, the session (credentials read, not yet authenticated) and the client of d. */
static int swift_setup(SwiftDriver *d, const StoreConfig *cfg) {
    char *endpoint = NULL;
    int rc;
    if ((rc = objhttp_env_int("ETCDBR_SWIFT_LIST_PAGE_SIZE", 1, SWIFT_MAX_PAGE, &d->o.list_page)))
        return rc;
    if ((rc = objhttp_cfg_endpoint(cfg, "Swift", &endpoint))) return rc;
    rc = swift_session_new(cfg, d->o.container, endpoint, &d->session);
    free(endpoint);
    return rc ? rc : objhttp_driver_client(&d->o, cfg);
}

int store_swift_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    SwiftDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "Swift: out of memory");
    int rc = objhttp_driver_init(&d->o, &swift_vt, cfg, "container", SWIFT_DEFAULT_SEGMENT,
                                 SWIFT_DEFAULT_PARALLEL);
    d->o.max_key = SWIFT_MAX_KEY;
    d->o.read_open = reader_open;
    if (rc == 0) rc = swift_setup(d, cfg);
    /* authenticate, and the container must exist */
    if (rc == 0) rc = swift_session_auth(d->session, d->o.http, 0);
    if (rc == 0) {
        SwiftCall c = {.method = "HEAD"};
        ObjHttpResponse r = {0};
        rc = swift_do(d, &c, &r, NULL);
        if (rc == ERR_NOT_FOUND)
            rc = err_set(ERR_NOT_FOUND, "Swift: container %s does not exist at %s", d->o.container,
                         swift_session_url(d->session));
        objhttp_response_clear(&r);
    }
    RETURN_BUILT(rc, out, &d->o.base, swift_free(&d->o.base));
}
