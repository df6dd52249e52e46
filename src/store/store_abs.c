/* store_abs: the Azure Blob Storage driver. Objects are block blobs in one container; writes stage
 * blocks of min_chunk_size bytes (Put Block, up to max_parallel_chunk_uploads in flight, so memory
 * is bounded by the blocks in flight) and become visible only with Put Block List, sent with
 * If-None-Match: * so a commit never replaces a blob (a small object is one conditional Put Blob).
 * Every request goes through objhttp (retries, streaming, redacted errors); SharedKey signing is
 * its per-attempt auth hook. Credentials are re-read when their files change. Keys, signatures
 * and SAS tokens never reach messages or logs. */
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "store_abs.h"
#include "../common/mem.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ABS_DEFAULT_BLOCK (5 * 1024 * 1024)
#define ABS_DEFAULT_PARALLEL 5
#define ABS_LIST_MAX_BODY (16u << 20) /* a page of 5,000 blobs is about 5 MiB */

typedef struct AbsDriver {
    ObjHttpDriver o;  /* first; o.min_chunk is the block size, o.list_page maxresults */
    AbsKeyring *keys; /* credentials, re-read when they change */
} AbsDriver;

typedef struct SignCtx {
    const AbsReqCreds *rc;
    AbsSignReq req;
} SignCtx;

/* x-ms-date and the bearer line of a workload identity request (x-ms-version, sent with every
 * request, is 2017-11-09 or later, as bearer tokens need). */
static int bearer_headers(const AbsReqCreds *c, struct curl_slist **headers) {
    char date_h[80], date[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(date_h, sizeof date_h, "x-ms-date: %s", date);
    int rc = objhttp_hook_header(headers, date_h, "ABS");
    if (rc == 0) rc = objhttp_hook_header(headers, c->bearer, "ABS");
    return rc;
}

static int sign_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    SignCtx *s = ctx;
    if (s->rc->bearer) return bearer_headers(s->rc, headers);
    if (!s->rc->key_len) return 0; /* SAS in the URL */
    char date_h[80], auth[512];
    int rc = abs_sign_headers(s->rc, &s->req, time(NULL), date_h, sizeof date_h, auth, sizeof auth);
    if (rc == 0) rc = objhttp_hook_header(headers, date_h, "ABS");
    if (rc == 0) rc = objhttp_hook_header(headers, auth, "ABS");
    OPENSSL_cleanse(auth, sizeof auth);
    return rc;
}

/* One request: method on the container (key NULL) or a blob, with query pairs and extra headers
 * ("Name: value"; x-ms-version is added). Buffered (resp, may be NULL) or streamed (stream
 * non-NULL: GET). */
typedef struct AbsCall {
    const char *method;
    const char *key;
    const char *const *qn;
    const char *const *qv;
    size_t nq;
    const char *const *headers;
    size_t nh;
    const void *body;
    size_t body_len;
    size_t max_body;
} AbsCall;

static int abs_do_once(AbsDriver *d, const AbsCall *c, ObjHttpResponse *resp,
                       ObjHttpStream **stream, long *gen) {
    AbsReqCreds rcs;
    int rc = abs_keyring_get(d->keys, d->o.http, &rcs);
    if (rc) return rc;
    *gen = rcs.bearer ? rcs.gen : -1;
    char *ekey = NULL, *query = NULL, *url = NULL, *path = NULL;
    const char **hdrs = calloc(c->nh + 1, sizeof *hdrs);
    if (!hdrs) goto nomem;
    for (size_t i = 0; i < c->nh; i++)
        hdrs[i] = c->headers[i];
    hdrs[c->nh] = "x-ms-version: " ABS_API_VERSION;
    if (c->key) {
        ekey = objhttp_pct_encode(c->key, 1);
        if (!ekey) goto nomem;
    }
    query = objhttp_query(c->qn, c->qv, c->nq);
    if (!query) goto nomem;
    size_t n = strlen(rcs.base) + strlen(d->o.container) + (ekey ? strlen(ekey) : 0) +
               strlen(query) + (rcs.sas ? strlen(rcs.sas) : 0) + 8;
    url = malloc(n);
    if (!url) goto nomem;
    snprintf(url, n, "%s/%s%s%s%s%s%s%s", rcs.base, d->o.container, ekey ? "/" : "",
             ekey ? ekey : "", query[0] || rcs.sas ? "?" : "", query,
             query[0] && rcs.sas ? "&" : "", rcs.sas ? rcs.sas : "");
    const char *q = strchr(url + rcs.base_pathoff, '?');
    size_t pl = q ? (size_t)(q - (url + rcs.base_pathoff)) : strlen(url + rcs.base_pathoff);
    path = strndup(url + rcs.base_pathoff, pl);
    if (!path) goto nomem;
    SignCtx sc = {&rcs, {c->method, path, c->qn, c->qv, c->nq, hdrs, c->nh + 1, c->body_len}};
    ObjHttpRequest req = {
        .method = c->method,
        .url = url,
        .headers = hdrs,
        .n_headers = c->nh + 1,
        .body = c->body,
        .body_len = c->body_len,
        .max_body = c->max_body,
        .auth = sign_hook,
        .auth_ctx = &sc,
    };
    if (stream)
        rc = objhttp_stream_open(d->o.http, &req, resp, stream);
    else
        rc = objhttp_do(d->o.http, &req, resp);
    goto done;
nomem:
    rc = err_set(ERR_NOMEM, "ABS %s: out of memory", c->method);
done:
    if (url) OPENSSL_cleanse(url, strlen(url)); /* may hold a SAS */
    free(url);
    free(path);
    free(query);
    free(ekey);
    free(hdrs);
    abs_req_creds_clear(&rcs);
    return rc;
}

/* abs_do_once; a 401 to a request with a workload identity token drops the token and the request
 * is sent once more with a new one (a token revoked before its expiry). */
static int abs_do(AbsDriver *d, const AbsCall *c, ObjHttpResponse *resp, ObjHttpStream **stream) {
    ObjHttpResponse local = {0};
    if (!resp) resp = &local;
    long gen = -1;
    int rc = abs_do_once(d, c, resp, stream, &gen);
    if (rc != 0 && resp->status == 401 && gen >= 0) {
        abs_keyring_invalidate(d->keys, gen);
        objhttp_response_clear(resp);
        rc = abs_do_once(d, c, resp, stream, &gen);
    }
    objhttp_response_clear(&local);
    return rc;
}

static const char *resp_code(const ObjHttpResponse *r, char *buf, size_t cap) {
    const char *v = objhttp_response_header(r, "x-ms-error-code", buf, cap);
    return v ? v : "";
}

/* Adds a hint to a 403 message: the account or key is wrong (the signature is not shown). */
static int explain(int rc, const ObjHttpResponse *r, const AbsDriver *d) {
    if (rc != 0 && r->status == 403)
        return err_wrap(
            rc,
            "ABS container %s: access denied (HTTP 403): check storageAccount, "
            "storageKey or the SAS token%s",
            d->o.container,
            abs_keyring_bearer(d->keys) ? ", or the workload identity's role on the account" : "");
    return rc;
}

/* list */

typedef struct {
    AbsDriver *d;
    const char *prefix;
    StoreDriverListCb cb;
    void *ctx;
} ListPages;

/* One List Blobs page (objhttp_list_pages). */
static int list_page(void *ctx, const char *marker, char **next) {
    ListPages *p = ctx;
    char page[16];
    const char *qn[5] = {"restype", "comp", "prefix"};
    const char *qv[5] = {"container", "list", p->prefix};
    size_t nq =
        objhttp_list_pairs(qn, qv, 3, "maxresults", p->d->o.list_page, page, "marker", marker);
    AbsCall c = {.method = "GET", .qn = qn, .qv = qv, .nq = nq, .max_body = ABS_LIST_MAX_BODY};
    ObjHttpResponse r = {0};
    int rc = explain(abs_do(p->d, &c, &r, NULL), &r, p->d);
    if (rc == 0) rc = abs_parse_list(r.body, r.body_len, p->cb, p->ctx, next);
    objhttp_response_clear(&r);
    return rc;
}

static int abs_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    AbsDriver *d = (AbsDriver *)drv;
    ListPages p = {d, key_prefix, cb, ctx};
    return objhttp_list_pages("ABS", "container", d->o.container, key_prefix, list_page, &p);
}

/* read */

/* The read_open of objhttp_driver_open_read: the stream at r->offset (If-Match the first ETag,
 * the reader's pin, when resuming). */
static int reader_open(ObjHttpResumable *res) {
    ObjHttpDriverReader *a = (ObjHttpDriverReader *)res;
    AbsDriver *d = (AbsDriver *)a->d;
    char range[64], match[OBJHTTP_ETAG_MAX + 16];
    const char *h[2] = {range, match};
    snprintf(range, sizeof range, "x-ms-range: bytes=%llu-", (unsigned long long)res->offset);
    snprintf(match, sizeof match, "If-Match: %s", a->pin);
    AbsCall c = {.method = "GET",
                 .key = res->key,
                 .headers = res->offset > 0 ? h : NULL,
                 .nh = res->offset > 0 ? (a->pin[0] ? 2 : 1) : 0};
    ObjHttpResponse r = {0};
    int rc = abs_do(d, &c, &r, &res->s);
    if (rc != 0 && res->offset > 0 && r.status == 416) {
        /* at or past the end: an empty stream, if the blob exists */
        int64_t size;
        rc = d->o.base.vt->stat(&d->o.base, res->key, &size);
        res->s = NULL;
    } else {
        rc = explain(rc, &r, d);
        if (rc == ERR_NOT_FOUND) rc = err_set(ERR_NOT_FOUND, "ABS read %s: not found", res->key);
    }
    if (rc == 0 && !a->pin[0]) rc = objhttp_resumable_pin(res, &r, "ETag", a->pin, sizeof a->pin);
    objhttp_response_clear(&r);
    return rc;
}

/* stat, remove */

static int abs_stat(StoreDriver *drv, const char *key, int64_t *size) {
    AbsDriver *d = (AbsDriver *)drv;
    int rc = objhttp_driver_key_ok(&d->o, key, "stat");
    if (rc) return rc;
    AbsCall c = {.method = "HEAD", .key = key};
    ObjHttpResponse r = {0};
    rc = explain(abs_do(d, &c, &r, NULL), &r, d);
    if (rc == 0) {
        if (objhttp_response_length(&r, size) != 0)
            rc = err_set(ERR_IO, "ABS stat %s: no Content-Length in the response", key);
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "ABS stat %s: not found", key);
    }
    objhttp_response_clear(&r);
    return rc;
}

static int abs_remove(StoreDriver *drv, const char *key) {
    AbsDriver *d = (AbsDriver *)drv;
    int rc = objhttp_driver_key_ok(&d->o, key, "remove");
    if (rc) return rc;
    AbsCall c = {.method = "DELETE", .key = key};
    ObjHttpResponse r = {0};
    rc = abs_do(d, &c, &r, NULL);
    char code[128];
    if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "ABS remove %s: not found", key);
    } else if (rc != 0 && r.status == 409 &&
               (strcmp(resp_code(&r, code, sizeof code), "BlobImmutableDueToPolicy") == 0 ||
                strstr(r.body, "BlobImmutableDueToPolicy"))) {
        rc = err_set(ERR_IMMUTABLE,
                     "ABS remove %s: the blob is immutable (BlobImmutableDueToPolicy); it stays "
                     "until its immutability period ends",
                     key);
    } else {
        rc = explain(rc, &r, d);
    }
    objhttp_response_clear(&r);
    return rc;
}

/* write */

typedef struct AbsWriter {
    StoreDriverWriter base;
    AbsDriver *d;
    char *key;
    ObjHttpPartWriter *pw; /* the blocks (objhttp.h) */
} AbsWriter;

static int put_block(void *ctx, int num, const void *data, size_t len) {
    AbsWriter *w = ctx;
    char id[24];
    abs_block_id(num, id);
    const char *qn[2] = {"comp", "blockid"};
    const char *qv[2] = {"block", id};
    AbsCall c = {
        .method = "PUT", .key = w->key, .qn = qn, .qv = qv, .nq = 2, .body = data, .body_len = len};
    ObjHttpResponse r = {0};
    int rc = explain(abs_do(w->d, &c, &r, NULL), &r, w->d);
    objhttp_response_clear(&r);
    if (rc) err_wrap(rc, "ABS write %s: block %d", w->key, num);
    return rc;
}

/* Blocks of exactly --min-chunk-size, as the Go tool's. */
static size_t block_size(void *ctx, int num) {
    (void)num;
    return (size_t)((AbsWriter *)ctx)->d->o.min_chunk;
}

static IoWriter *writer_io(StoreDriverWriter *sw) {
    return objhttp_pw_io(((AbsWriter *)sw)->pw);
}

/* Stops the uploaders (after the queued blocks, skipped once discard is set) and frees w. */
static void writer_free(AbsWriter *w, int discard) {
    objhttp_pw_free(w->pw, discard);
    free(w->key);
    free(w);
}

static int commit_status(AbsWriter *w, int rc, const ObjHttpResponse *r) {
    char code[128];
    if (rc != 0 && (r->status == 409 || r->status == 412))
        return err_set(ERR_EXISTS, "ABS write %s: the blob already exists (HTTP %ld %s)", w->key,
                       r->status, resp_code(r, code, sizeof code));
    return explain(rc, r, w->d);
}

/* Put Blob (block_list 0) or Put Block List of body, with If-None-Match: * when conditional. */
static int send_commit(AbsWriter *w, const void *body, size_t len, int block_list,
                       int conditional) {
    const char *h[2] = {block_list ? "Content-Type: application/xml" : "x-ms-blob-type: BlockBlob",
                        "If-None-Match: *"};
    const char *qn[1] = {"comp"};
    const char *qv[1] = {"blocklist"};
    AbsCall c = {.method = "PUT",
                 .key = w->key,
                 .qn = qn,
                 .qv = qv,
                 .nq = block_list ? 1 : 0,
                 .headers = h,
                 .nh = conditional ? 2 : 1,
                 .body = body,
                 .body_len = len};
    ObjHttpResponse r = {0};
    int rc = commit_status(w, abs_do(w->d, &c, &r, NULL), &r);
    objhttp_response_clear(&r);
    return rc;
}

/* The conditional commit; when it is refused although no committed blob is there (HEAD says 404:
 * only uncommitted blocks of an aborted upload of the same key, which azurite counts as an
 * existing blob), once more without the condition. That second commit is guarded only by this
 * HEAD, not atomically: a writer committing the same key in between would be replaced. */
static int commit_no_replace(AbsWriter *w, const void *body, size_t len, int block_list) {
    int rc = send_commit(w, body, len, block_list, 1);
    if (rc != ERR_EXISTS) return rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err_msg());
    int64_t size;
    int st = abs_stat(&w->d->o.base, w->key, &size);
    if (st != ERR_NOT_FOUND) return err_set(ERR_EXISTS, "%s", msg);
    log_debug("ABS write %s: uncommitted blocks of an earlier upload; committing without "
              "If-None-Match",
              w->key);
    return send_commit(w, body, len, block_list, 0);
}

static int writer_commit(StoreDriverWriter *sw) {
    AbsWriter *w = (AbsWriter *)sw;
    int rc = objhttp_pw_failed(w->pw);
    char *xml = NULL;
    if (!rc && objhttp_pw_parts(w->pw) == 0) { /* small object: one Put Blob */
        size_t len;
        const void *body = objhttp_pw_rest(w->pw, &len);
        rc = commit_no_replace(w, body, len, 0);
        goto done;
    }
    if (rc || (rc = objhttp_pw_finish(w->pw)) != 0) goto done;
    StrBuf b = {0};
    strbuf_str(&b, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
    for (int i = 1; i <= objhttp_pw_parts(w->pw); i++) {
        char id[24];
        abs_block_id(i, id);
        strbuf_str(&b, "<Latest>");
        strbuf_str(&b, id);
        strbuf_str(&b, "</Latest>");
    }
    strbuf_str(&b, "</BlockList>");
    xml = b.d;
    if (b.oom) {
        rc = err_set(ERR_NOMEM, "ABS write %s: out of memory", w->key);
        goto done;
    }
    rc = commit_no_replace(w, xml, b.n, 1);
done:
    free(xml);
    writer_free(w, rc != 0);
    return rc;
}

static void writer_abort(StoreDriverWriter *sw) {
    /* uncommitted blocks are never visible and expire on their own (7 days) */
    writer_free((AbsWriter *)sw, 1);
}

static const StoreDriverWriterVt writer_vt = {writer_io, writer_commit, writer_abort};

static int abs_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    AbsDriver *d = (AbsDriver *)drv;
    *out = NULL;
    int rc = objhttp_driver_key_ok(&d->o, key, "write");
    if (rc) return rc;
    AbsWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key))) {
        free(w);
        return err_set(ERR_NOMEM, "ABS write: out of memory");
    }
    w->base.vt = &writer_vt;
    w->d = d;
    ObjHttpPartWriterConfig pc = {.what = "ABS",
                                  .key = key,
                                  .parallel = d->o.parallel,
                                  .eager = 1,
                                  .part_size = block_size,
                                  .put = put_block,
                                  .ctx = w};
    if ((rc = objhttp_pw_new(&pc, &w->pw))) {
        writer_free(w, 1);
        return rc;
    }
    *out = &w->base;
    return 0;
}

static void abs_free(StoreDriver *drv) {
    AbsDriver *d = (AbsDriver *)drv;
    if (!d) return;
    objhttp_driver_clear(&d->o);
    abs_keyring_free(d->keys);
    free(d);
}

static const StoreDriverVt abs_vt = {
    .name = "ABS",
    .features = STORE_FEAT_THREAD_SAFE | STORE_FEAT_NO_REPLACE,
    .list = abs_list,
    .open_read = objhttp_driver_open_read,
    .open_write = abs_open_write,
    .remove = abs_remove,
    .stat = abs_stat,
    .remove_dir = NULL,
    .describe = objhttp_driver_describe,
    .free = abs_free,
};

/* Settings, credentials and the client of d; the container is not checked yet. */
static int abs_setup(AbsDriver *d, const StoreConfig *cfg) {
    char *endpoint = NULL;
    int rc;
    if ((rc = objhttp_env_int("ETCDBR_ABS_LIST_PAGE_SIZE", 1, 5000, &d->o.list_page)) ||
        (rc = objhttp_cfg_endpoint(cfg, "ABS", &endpoint)))
        return rc;
    rc = abs_keyring_new(cfg, endpoint, &d->keys);
    free(endpoint);
    return rc ? rc : objhttp_driver_client(&d->o, cfg);
}

int store_abs_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    AbsDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "ABS: out of memory");
    int rc = objhttp_driver_init(&d->o, &abs_vt, cfg, "container", ABS_DEFAULT_BLOCK,
                                 ABS_DEFAULT_PARALLEL);
    d->o.read_open = reader_open;
    if (rc == 0) rc = abs_setup(d, cfg);
    if (rc == 0) { /* the container must exist (Get Container Properties) */
        const char *qn[1] = {"restype"};
        const char *qv[1] = {"container"};
        AbsCall c = {.method = "GET", .qn = qn, .qv = qv, .nq = 1};
        ObjHttpResponse r = {0};
        rc = explain(abs_do(d, &c, &r, NULL), &r, d);
        if (rc == ERR_NOT_FOUND)
            rc = err_set(ERR_NOT_FOUND, "ABS: container %s does not exist in storage account %s",
                         d->o.container, abs_keyring_account(d->keys));
        objhttp_response_clear(&r);
    }
    RETURN_BUILT(rc, out, &d->o.base, abs_free(&d->o.base));
}
