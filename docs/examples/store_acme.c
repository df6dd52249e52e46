/* store_acme: an example of a seventh S3-like store (docs/store-driver.md). "Acme" speaks S3's
 * object API (ListObjectsV2, ranged GET, HEAD, DELETE, multipart upload) but signs with a bearer
 * token read from a credentials file ({"token": "..."}, or a directory with a file "token").
 * Everything else (retries, TLS, bounded bodies, resumable reads, the part pool, the multipart
 * flow, paging guards) is the net layer's. tests/unit/test_store_example.c compiles and runs it,
 * so this page cannot rot. */
#include "../../src/common/err.h"
#include "../../src/common/strbuf.h"
#include "../../src/store/objhttp.h"
#include "../../src/store/objhttp_mpu.h"
#include "../../src/store/store_driver.h"
#include "../../src/store/store_s3.h" /* the S3 wire format: s3_list_parse, upload ids, parts */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    StoreDriver base;
    ObjHttp *http;
    char *bucket_url; /* https://host/bucket */
    char *token;      /* secret */
    ObjHttpMpuOps mpu;
} AcmeDriver;

/* What differs 1: the signature, added to every attempt of every request. */
static int acme_auth(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    StrBuf h = {0};
    strbuf_str(&h, "Authorization: Bearer ");
    strbuf_str(&h, ((AcmeDriver *)ctx)->token);
    struct curl_slist *t = h.oom ? NULL : curl_slist_append(*headers, h.d);
    objhttp_free_secret(h.d);
    if (!t) return err_set(ERR_NOMEM, "Acme: out of memory");
    *headers = t;
    return 0;
}

/* What differs 2: the URL of a key and a query. */
static int acme_do(AcmeDriver *d, const char *method, const char *key, const char *query,
                   const void *body, size_t len, ObjHttpResponse *resp, ObjHttpStream **stream,
                   const char *const *hdrs, size_t nh) {
    char *ek = key ? objhttp_pct_encode(key, 1) : NULL;
    StrBuf u = {0};
    strbuf_str(&u, d->bucket_url);
    strbuf_str(&u, "/");
    strbuf_str(&u, ek ? ek : "");
    strbuf_str(&u, query ? "?" : "");
    strbuf_str(&u, query ? query : "");
    free(ek);
    if (u.oom || (key && !ek)) return err_set(ERR_NOMEM, "Acme: out of memory");
    ObjHttpRequest req = {.method = method,
                          .url = u.d,
                          .headers = hdrs,
                          .n_headers = nh,
                          .body = body,
                          .body_len = len,
                          .auth = acme_auth,
                          .auth_ctx = d,
                          .max_body = (size_t)16 << 20};
    int rc =
        stream ? objhttp_stream_open(d->http, &req, resp, stream) : objhttp_do(d->http, &req, resp);
    free(u.d);
    return rc;
}

static int acme_list(StoreDriver *drv, const char *prefix, StoreDriverListCb cb, void *ctx) {
    AcmeDriver *d = (AcmeDriver *)drv;
    ObjHttpListing lg;
    char *token = NULL;
    int rc, truncated = 0;
    objhttp_listing_begin(&lg, "Acme", d->bucket_url, prefix);
    do { /* the listing guard ends a server that never stops or repeats a page */
        if ((rc = objhttp_listing_page(&lg, token))) break;
        const char *n[3] = {"list-type", "prefix", "continuation-token"};
        const char *v[3] = {"2", prefix, token};
        char *q = objhttp_query(n, v, token ? 3 : 2);
        ObjHttpResponse r = {0};
        rc = q ? acme_do(d, "GET", NULL, q, NULL, 0, &r, NULL, NULL, 0) : ERR_NOMEM;
        free(token);
        token = NULL;
        if (rc == 0) rc = s3_list_parse(r.body, r.body_len, cb, ctx, &truncated, &token);
        objhttp_response_clear(&r);
        free(q);
    } while (rc == 0 && truncated);
    objhttp_listing_end(&lg);
    free(token);
    return rc;
}

static int acme_stat(StoreDriver *drv, const char *key, int64_t *size) {
    ObjHttpResponse r = {0};
    int rc = acme_do((AcmeDriver *)drv, "HEAD", key, NULL, NULL, 0, &r, NULL, NULL, 0);
    char v[32];
    if (rc == 0) *size = objhttp_response_header(&r, "Content-Length", v, sizeof v) ? atoll(v) : -1;
    objhttp_response_clear(&r);
    return rc;
}

static int acme_remove(StoreDriver *drv, const char *key) {
    ObjHttpResponse r = {0};
    int rc = acme_do((AcmeDriver *)drv, "DELETE", key, NULL, NULL, 0, &r, NULL, NULL, 0);
    objhttp_response_clear(&r);
    return rc;
}

typedef struct {
    ObjHttpResumable r; /* first */
    AcmeDriver *d;
} AcmeReader;

/* A ranged GET from r->offset; the net layer resumes it here when a transfer breaks. */
static int acme_reader_open(ObjHttpResumable *res) {
    char range[64];
    snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)res->offset);
    const char *h[1] = {range};
    ObjHttpResponse resp = {0};
    int rc = acme_do(((AcmeReader *)res)->d, "GET", res->key, NULL, NULL, 0, &resp, &res->s, h,
                     res->offset ? 1 : 0);
    objhttp_response_clear(&resp);
    return rc;
}

static int acme_open_read(StoreDriver *drv, const char *key, uint64_t off, IoReader **out) {
    AcmeReader *r = calloc(1, sizeof *r);
    if (!r) return err_set(ERR_NOMEM, "Acme read %s: out of memory", key);
    r->d = (AcmeDriver *)drv;
    return objhttp_resumable_start(&r->r, "Acme", key, off, acme_reader_open, NULL, out);
}

/* What differs 3: how each step of S3's multipart upload goes on the wire. */
static int acme_mpu_send(void *drv, const ObjHttpMpuCall *c, ObjHttpResponse *resp) {
    static const char *const method[] = {"PUT", "POST", "PUT", "POST", "DELETE"};
    char q[600] = "uploads";
    if (c->step == OBJHTTP_MPU_PART)
        snprintf(q, sizeof q, "partNumber=%d&uploadId=%s", c->part, c->upload_id);
    else if (c->upload_id)
        snprintf(q, sizeof q, "uploadId=%s", c->upload_id); /* a real driver encodes the id */
    const char *query = c->step == OBJHTTP_MPU_PUT ? NULL : q;
    int rc = acme_do(drv, method[c->step], c->key, query, c->body, c->len, resp, NULL, NULL, 0);
    return rc == ERR_IO && resp->status == 412 ? ERR_EXISTS : rc;
}

static size_t acme_part_size(void *drv, int num) {
    (void)drv;
    return (size_t)s3_part_size((int64_t)5 << 20, -1, num);
}

static int acme_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    AcmeDriver *d = (AcmeDriver *)drv;
    int rc = objhttp_key_ok("Acme", "write", key, 1024, 0);
    return rc ? rc : objhttp_mpu_open(&d->mpu, d, 4, key, out);
}

static const char *acme_describe(const StoreDriver *drv) {
    return ((const AcmeDriver *)drv)->bucket_url;
}

static void acme_free(StoreDriver *drv) {
    AcmeDriver *d = (AcmeDriver *)drv;
    if (!d) return;
    objhttp_free(d->http);
    objhttp_free_secret(d->token);
    free(d->bucket_url);
    free(d);
}

static const StoreDriverVt acme_vt = {.name = "Acme",
                                      .features = STORE_FEAT_THREAD_SAFE,
                                      .list = acme_list,
                                      .open_read = acme_open_read,
                                      .open_write = acme_open_write,
                                      .remove = acme_remove,
                                      .stat = acme_stat,
                                      .describe = acme_describe,
                                      .free = acme_free};

int store_acme_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    AcmeDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "Acme: out of memory");
    d->base.vt = &acme_vt;
    d->mpu = (ObjHttpMpuOps){.what = "Acme",
                             .max_parts = S3_MAX_PARTS,
                             .send = acme_mpu_send,
                             .parse_upload_id = s3_parse_upload_id,
                             .part_size = acme_part_size};
    const char *fields[1] = {"token"};
    const char *creds = store_env(cfg, "ACME_APPLICATION_CREDENTIALS");
    const char *host = store_env(cfg, "ACME_ENDPOINT");
    int rc = creds && host ? objhttp_creds_read(creds, "Acme", fields, 1, &d->token)
                           : err_set(ERR_INVALID, "Acme: set ACME_APPLICATION_CREDENTIALS and "
                                                  "ACME_ENDPOINT");
    if (rc == 0 && !d->token) rc = err_set(ERR_INVALID, "Acme credentials %s: no token", creds);
    if (rc == 0 && asprintf(&d->bucket_url, "%s/%s", host, cfg->container) < 0)
        rc = err_set(ERR_NOMEM, "Acme: out of memory");
    ObjHttpConfig hc = {.what = "Acme",
                        .container = cfg->container,
                        .ca_file = cfg->ca_file,
                        .timeout_ms = cfg->timeout_ms};
    if (rc == 0) rc = objhttp_new(&hc, &d->http);
    if (rc)
        acme_free(&d->base);
    else
        *out = &d->base;
    return rc;
}
