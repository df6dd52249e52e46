/* store_s3: the S3 driver (also Dell ECS and OpenShift OCS, which speak the S3 API), over objhttp.
 * Requests are signed with libcurl's SigV4 (CURLOPT_AWS_SIGV4); curl 7.88 does not add
 * x-amz-content-sha256, so every request carries the hex SHA-256 of its body: all our bodies are
 * in memory (parts are buffered, listings and XML are small), so the payload is always signed and
 * UNSIGNED-PAYLOAD is never needed. Keys are percent-encoded per RFC 3986 ('/' kept) and queries
 * are sorted and encoded (curl signs both verbatim). Writes buffer up to one part; an object that
 * fits is one PUT, a larger one a multipart upload with up to max_parallel parts in flight, each
 * on its own thread (memory: (parallel + 1) x part size). Credentials files are re-read when
 * their mtime changes (checked as each operation takes its keys). Secrets never reach messages. */
#include "store_s3.h"
#include "../codec/sha256.h"
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../common/timeutil.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "objhttp_mpu.h"
#include "store_s3_keys.h"
#include "store_driver.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/md5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* ---- the driver ---- */

typedef struct {
    StoreDriver base;
    char *provider; /* "S3", "ECS" or "OCS" */
    char *bucket;
    char *describe;   /* "<provider>:<bucket>" */
    char *bucket_url; /* scheme://host[:port][/path]/bucket or scheme://bucket.host[:port] */
    int path_style;
    char *region;
    ObjHttp *http;
    int64_t part_min;
    int parallel;
    int list_page;
    char *sse_algo, *sse_key_b64, *sse_md5_b64; /* SSE-C headers' values; NULL = none */
    S3Keys keys;                                /* what signs the requests (store_s3_keys.h) */
    /* the server answered a conditional write (If-None-Match: *) with 501 NotImplemented (Swift's
     * s3api, older S3 emulators): later writes are sent without it; atomic */
    int no_conditional;
    ObjHttpMpuOps mpu; /* the multipart steps (their what names the provider) */
} S3Driver;

/* URL of key (NULL = the bucket itself: "/bucket" path-style, as s3rver signs it, "/" for a
 * virtual host) with an optional canonical query. Owned. */
static char *s3_url(const S3Driver *d, const char *key, const char *query) {
    char *ek = key ? objhttp_pct_encode(key, 1) : NULL;
    if (key && !ek) return NULL;
    size_t n = strlen(d->bucket_url) + (ek ? strlen(ek) : 0) + (query ? strlen(query) : 0) + 4;
    char *u = malloc(n);
    if (u)
        snprintf(u, n, "%s%s%s%s%s", d->bucket_url, ek || !d->path_style ? "/" : "", ek ? ek : "",
                 query && query[0] ? "?" : "", query ? query : "");
    free(ek);
    return u;
}

static void hex_sha256(const void *buf, size_t len, char out[65]) {
    if (len == 0) {
        memcpy(out, S3_EMPTY_SHA256, 65);
        return;
    }
    uint8_t dg[SHA256_LEN];
    unsigned int dl = 0;
    EVP_Digest(buf, len, dg, &dl, EVP_sha256(), NULL);
    for (int i = 0; i < SHA256_LEN; i++)
        sprintf(out + 2 * i, "%02x", dg[i]);
}

#define MAX_HDRS 12

/* The SSE-C header lines (docs/go-tool.md §12: algorithm, base64 key, base64 MD5 of the key), kept
 * in the caller's storage for the request's life. */
typedef struct {
    char alg[200], key[300], md5[100];
} SseHeaders;

/* Appends the SSE-C headers to hdrs (3 slots needed) when the credentials set them; no-op
 * otherwise. */
static void add_sse_headers(const S3Driver *d, SseHeaders *h, const char **hdrs, size_t *nh) {
    if (!d->sse_algo) return;
    snprintf(h->alg, sizeof h->alg, "x-amz-server-side-encryption-customer-algorithm: %s",
             d->sse_algo);
    snprintf(h->key, sizeof h->key, "x-amz-server-side-encryption-customer-key: %s",
             d->sse_key_b64);
    snprintf(h->md5, sizeof h->md5, "x-amz-server-side-encryption-customer-key-MD5: %s",
             d->sse_md5_b64);
    hdrs[(*nh)++] = h->alg;
    hdrs[(*nh)++] = h->key;
    hdrs[(*nh)++] = h->md5;
}

/* One signed request. sse: add the SSE-C headers. extra: more "Name: value" lines. */
static int s3_call(S3Driver *d, const char *method, const char *key, const char *query, int sse,
                   const char *const *extra, size_t n_extra, const void *body, size_t len,
                   ObjHttpResponse *resp, int64_t timeout_ms) {
    char sha[65], h_sha[100];
    SseHeaders sh;
    const char *hdrs[MAX_HDRS];
    size_t nh = 0;
    hex_sha256(body, len, sha);
    snprintf(h_sha, sizeof h_sha, "x-amz-content-sha256: %s", sha);
    hdrs[nh++] = h_sha;
    if (sse) add_sse_headers(d, &sh, hdrs, &nh);
    for (size_t i = 0; i < n_extra && nh < MAX_HDRS; i++)
        hdrs[nh++] = extra[i];
    char *url = s3_url(d, key, query);
    S3Auth a;
    int rc =
        url ? s3_keys_take(&d->keys, &a) : err_set(ERR_NOMEM, "%s: out of memory", d->provider);
    if (rc == 0) {
        ObjHttpRequest req = {
            .method = method,
            .url = url,
            .headers = hdrs,
            .n_headers = nh,
            .body = body,
            .body_len = len,
            .auth = s3_auth_hook,
            .auth_ctx = &a,
            .timeout_ms = timeout_ms,
        };
        rc = objhttp_do(d->http, &req, resp);
        s3_auth_clear(&a);
    }
    memset(&sh, 0, sizeof sh); /* the key does not outlive the request */
    free(url);
    return rc;
}

/* ---- list ---- */

/* One ListObjectsV2 page after token (objhttp_list_pages). */
static int list_page(void *ctx, const char *token, char **next) {
    ObjHttpListFiltered *p = ctx; /* p->f: the server filters by prefix; this too */
    S3Driver *d = p->drv;
    const char *names[4] = {"list-type", "prefix", "max-keys", "continuation-token"};
    const char *values[4] = {"2", p->f.prefix, p->page, token};
    char *q = objhttp_query(names, values, token ? 4 : 3);
    if (!q) return err_set(ERR_NOMEM, "%s list: out of memory", d->provider);
    ObjHttpResponse resp = {0};
    int rc = s3_call(d, "GET", NULL, q, 0, NULL, 0, NULL, 0, &resp, 0);
    free(q);
    p->pages++;
    if (rc == ERR_NOT_FOUND)
        rc = err_wrap(ERR_IO, "%s list %s: bucket %s not found", d->provider, p->f.prefix,
                      d->bucket);
    int truncated = 0;
    if (rc == 0 && (rc = s3_list_parse(resp.body, resp.body_len, objhttp_prefix_filter, &p->f,
                                       &truncated, next)) == ERR_CORRUPT)
        rc = err_wrap(ERR_IO, "%s list %s (page %d)", d->provider, p->f.prefix, p->pages);
    objhttp_response_clear(&resp);
    if (rc != 0 || !truncated) { /* s3_list_parse refuses a truncated page without a token */
        free(*next);
        *next = NULL;
    }
    return rc;
}

static int s3_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    S3Driver *d = (S3Driver *)drv;
    return objhttp_list_filtered(d->provider, "bucket", d->bucket, d, d->list_page, key_prefix, cb,
                                 ctx, list_page);
}

/* ---- stat, remove ---- */

static int s3_stat(StoreDriver *drv, const char *key, int64_t *size) {
    S3Driver *d = (S3Driver *)drv;
    ObjHttpResponse resp = {0};
    int rc = s3_call(d, "HEAD", key, NULL, 1, NULL, 0, NULL, 0, &resp, 0);
    if (rc == 0 && objhttp_response_length(&resp, size) != 0)
        rc = err_set(ERR_IO, "%s stat %s: no Content-Length in the answer", d->provider, key);
    objhttp_response_clear(&resp);
    return rc;
}

static int s3_remove(StoreDriver *drv, const char *key) {
    S3Driver *d = (S3Driver *)drv;
    /* S3 answers 204 to a DELETE of a missing key: ask first, so a missing key is reported */
    ObjHttpResponse resp = {0};
    int rc = s3_call(d, "HEAD", key, NULL, 1, NULL, 0, NULL, 0, &resp, 0);
    if (rc == ERR_IO && resp.status == 400 && d->sse_algo) rc = 0; /* not ours to judge */
    objhttp_response_clear(&resp);
    if (rc != 0) return rc;
    rc = s3_call(d, "DELETE", key, NULL, 0, NULL, 0, NULL, 0, &resp, 0);
    objhttp_response_clear(&resp);
    return rc;
}

/* ---- read ---- */

typedef struct {
    ObjHttpResumable r; /* first: key, offset, stream, resumes */
    S3Driver *d;
} S3Reader;

/* Opens the body of key from res->offset; 416 (offset at or past the end) is an empty stream.
 * Objects are never replaced (conditional writes), so a resumed read needs no ETag pin. */
static int reader_open(ObjHttpResumable *res) {
    S3Driver *d = ((S3Reader *)res)->d;
    char range[64], sha[100];
    SseHeaders sh;
    const char *hdrs[5];
    size_t nh = 0;
    snprintf(sha, sizeof sha, "x-amz-content-sha256: %s", S3_EMPTY_SHA256);
    hdrs[nh++] = sha;
    if (res->offset > 0) {
        snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)res->offset);
        hdrs[nh++] = range;
    }
    add_sse_headers(d, &sh, hdrs, &nh);
    char *url = s3_url(d, res->key, NULL);
    S3Auth a;
    int rc =
        url ? s3_keys_take(&d->keys, &a) : err_set(ERR_NOMEM, "%s: out of memory", d->provider);
    if (rc == 0) {
        ObjHttpRequest req = {.method = "GET",
                              .url = url,
                              .headers = hdrs,
                              .n_headers = nh,
                              .auth = s3_auth_hook,
                              .auth_ctx = &a};
        ObjHttpResponse resp = {0};
        rc = objhttp_stream_open(d->http, &req, &resp, &res->s);
        if (rc == ERR_IO && resp.status == 416) {
            rc = 0;
            res->s = NULL;
        }
        objhttp_response_clear(&resp);
        s3_auth_clear(&a);
    }
    memset(&sh, 0, sizeof sh); /* the key does not outlive the request */
    free(url);
    return rc;
}

static int s3_open_read(StoreDriver *drv, const char *key, uint64_t offset, IoReader **out) {
    S3Driver *d = (S3Driver *)drv;
    *out = NULL;
    S3Reader *r = calloc(1, sizeof *r);
    if (!r) return err_set(ERR_NOMEM, "%s read %s: out of memory", d->provider, key);
    r->d = d;
    return objhttp_resumable_start(&r->r, d->provider, key, offset, reader_open, NULL, out);
}

/* ---- write: the multipart flow is objhttp_mpu's; here is how each step goes on the wire ---- */

/* 412 to If-None-Match: * means another writer got there first. */
static int exists_or(int rc, const ObjHttpResponse *resp, const S3Driver *d, const char *key) {
    if (rc == ERR_IO && resp->status == 412)
        return err_set(ERR_EXISTS, "%s commit %s: object already exists", d->provider, key);
    return rc;
}

/* s3_call with extra[0] and, unless the server refused conditional writes before, extra[1]
 * (If-None-Match: *). A 501 NotImplemented to the condition is remembered and the call sent again
 * without it: the generic layer's check before the write is then the only guard. */
static int conditional_call(S3Driver *d, const ObjHttpMpuCall *c, const char *method,
                            const char *query, int sse, const char *const extra[2],
                            ObjHttpResponse *resp) {
    int cond = !__atomic_load_n(&d->no_conditional, __ATOMIC_RELAXED);
    size_t n = extra[0] ? 1 : 0;
    const char *h[2] = {extra[0] ? extra[0] : extra[1], extra[1]};
    int rc = s3_call(d, method, c->key, query, sse, h, n + (size_t)cond, c->body, c->len, resp, 0);
    if (rc != 0 && cond && resp->status == 501) {
        if (!__atomic_exchange_n(&d->no_conditional, 1, __ATOMIC_RELAXED))
            log_warn("%s: the server does not support conditional writes (If-None-Match: *, "
                     "HTTP 501); writes no longer refuse to replace an object that appeared "
                     "after the check before the write",
                     d->provider);
        objhttp_response_clear(resp);
        rc = s3_call(d, method, c->key, query, sse, h, n, c->body, c->len, resp, 0);
    }
    return exists_or(rc, resp, d, c->key);
}

static int s3_mpu_send(void *drv, const ObjHttpMpuCall *c, ObjHttpResponse *resp) {
    S3Driver *d = drv;
    char pn[16];
    snprintf(pn, sizeof pn, "%d", c->part);
    const char *names[2] = {"uploadId", "partNumber"};
    const char *values[2] = {c->upload_id, pn};
    char *q = NULL;
    if (c->upload_id) {
        q = objhttp_query(names, values, c->step == OBJHTTP_MPU_PART ? 2 : 1);
        if (!q) return err_set(ERR_NOMEM, "%s write %s: out of memory", d->provider, c->key);
    }
    const char *put_extra[2] = {NULL, "If-None-Match: *"};
    const char *complete_extra[2] = {"Content-Type: application/xml", "If-None-Match: *"};
    int rc = 0;
    switch (c->step) {
    case OBJHTTP_MPU_PUT: /* refused if the key appeared meanwhile, where the server can */
        rc = conditional_call(d, c, "PUT", NULL, 1, put_extra, resp);
        break;
    case OBJHTTP_MPU_INITIATE:
        rc = s3_call(d, "POST", c->key, "uploads=", 1, NULL, 0, NULL, 0, resp, 0);
        break;
    case OBJHTTP_MPU_PART:
        rc = s3_call(d, "PUT", c->key, q, 1, NULL, 0, c->body, c->len, resp, 0);
        break;
    case OBJHTTP_MPU_COMPLETE:
        rc = conditional_call(d, c, "POST", q, 0, complete_extra, resp);
        /* S3 may answer 200 and put the error in the body */
        if (rc == 0 && resp->body && strstr(resp->body, "<Error>"))
            rc = err_set(ERR_IO, "%s complete multipart upload %s: %.200s", d->provider, c->key,
                         resp->body);
        break;
    case OBJHTTP_MPU_ABORT:
        rc = s3_call(d, "DELETE", c->key, q, 0, NULL, 0, NULL, 0, resp, 0);
        break;
    }
    free(q);
    return rc;
}

static size_t s3_mpu_part_size(void *drv, int num) {
    return (size_t)s3_part_size(((S3Driver *)drv)->part_min, -1, num);
}

static int s3_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    S3Driver *d = (S3Driver *)drv;
    *out = NULL;
    int rc = objhttp_key_ok(d->provider, "write", key, 1024, 0);
    if (rc) return rc;
    return objhttp_mpu_open(&d->mpu, d, d->parallel, key, out);
}

/* ---- open, free ---- */

static const char *s3_describe(const StoreDriver *drv) {
    return ((const S3Driver *)drv)->describe;
}

static void s3_free(StoreDriver *drv) {
    S3Driver *d = (S3Driver *)drv;
    if (!d) return;
    objhttp_free(d->http);
    objhttp_free_secret(d->sse_key_b64);
    s3_keys_clear(&d->keys);
    FREE_ALL(d->provider, d->bucket, d->describe, d->bucket_url, d->region, d->sse_algo,
             d->sse_md5_b64, d);
}

static const StoreDriverVt s3_vt = {
    .name = "S3",
    .features = STORE_FEAT_THREAD_SAFE,
    .list = s3_list,
    .open_read = s3_open_read,
    .open_write = s3_open_write,
    .remove = s3_remove,
    .stat = s3_stat,
    .remove_dir = NULL,
    .describe = s3_describe,
    .free = s3_free,
};

/* d->bucket_url and d->path_style from the endpoint: the flag (S3 only: the Go tool ignores it
 * for OCS and ECS), the credentials' endpoint, or AWS's regional one; path style when forced,
 * with any endpoint given, and for ECS and OCS. */
static int make_bucket_url(S3Driver *d, const StoreConfig *cfg, const S3Creds *c, const char *prov,
                           const char *bucket, const char *region) {
    const char *ep = NULL;
    int ep_override = 0;
    if (strcmp(prov, "S3") == 0 && cfg->endpoint_override && cfg->endpoint_override[0]) {
        ep = cfg->endpoint_override;
        ep_override = 1;
    } else if (c->endpoint && c->endpoint[0]) {
        ep = c->endpoint;
        ep_override = 1;
    }
    char aws_host[128];
    if (!ep) {
        snprintf(aws_host, sizeof aws_host, "https://s3.%s.amazonaws.com", region);
        ep = aws_host;
    }
    const char *scheme = "https";
    const char *hostpart = ep;
    const char *sep = strstr(ep, "://");
    if (sep) {
        if ((size_t)(sep - ep) == 4 && strncasecmp(ep, "http", 4) == 0)
            scheme = "http";
        else if ((size_t)(sep - ep) == 5 && strncasecmp(ep, "https", 5) == 0)
            scheme = "https";
        else
            return err_set(ERR_INVALID, "%s: endpoint %s: the scheme must be http or https", prov,
                           ep);
        hostpart = sep + 3;
    } else if (c->disable_ssl) {
        scheme = "http";
    }
    size_t hl = strlen(hostpart);
    while (hl > 0 && hostpart[hl - 1] == '/')
        hl--;
    if (hl == 0 || memchr(hostpart, '?', hl) || memchr(hostpart, '@', hl))
        return err_set(ERR_INVALID, "%s: invalid endpoint %s", prov, ep);
    d->path_style = c->force_path_style || ep_override || strcmp(prov, "S3") != 0;
    char *ebucket = objhttp_pct_encode(bucket, 0);
    size_t un = hl + (ebucket ? strlen(ebucket) : 0) + 16;
    d->bucket_url = malloc(un);
    if (d->bucket_url && ebucket) {
        if (d->path_style)
            snprintf(d->bucket_url, un, "%s://%.*s/%s", scheme, (int)hl, hostpart, ebucket);
        else
            snprintf(d->bucket_url, un, "%s://%s.%.*s", scheme, ebucket, (int)hl, hostpart);
    }
    free(ebucket);
    return 0;
}

static char *b64(const unsigned char *in, size_t n) {
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    if (o) EVP_EncodeBlock((unsigned char *)o, in, (int)n);
    return o;
}

/* The SSE-C header values from c's customer key: the algorithm, the key and its MD5, base64. */
static int take_sse(S3Driver *d, const S3Creds *c, const char *prov) {
    unsigned char md5[16];
    unsigned int ml = 0;
    EVP_Digest(c->sse_key, strlen(c->sse_key), md5, &ml, EVP_md5(), NULL);
    d->sse_algo = strdup(c->sse_algo);
    d->sse_key_b64 = b64((const unsigned char *)c->sse_key, strlen(c->sse_key));
    d->sse_md5_b64 = b64(md5, 16);
    if (!d->sse_algo || !d->sse_key_b64 || !d->sse_md5_b64)
        return err_set(ERR_NOMEM, "%s: out of memory", prov);
    return 0;
}

int store_s3_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    const char *prov = cfg->provider && cfg->provider[0] ? cfg->provider : "S3";
    S3Creds c;
    char *cred_path = NULL;
    int rc = s3_creds_load(cfg, prov, &c, &cred_path);
    S3Driver *d = NULL;
    if (rc != 0) goto done;
    const char *bucket =
        cfg->container && cfg->container[0] ? cfg->container : store_env(cfg, "STORAGE_CONTAINER");
    if (!bucket || !bucket[0]) {
        rc = err_set(ERR_INVALID, "%s: no bucket: give --store-container or %sSTORAGE_CONTAINER",
                     prov, store_env_prefix(cfg));
        goto done;
    }
    const char *region = cfg->region && cfg->region[0] ? cfg->region : c.region;
    if (!region || !region[0]) {
        rc = err_set(ERR_INVALID, "%s: no region: set \"region\" in the credentials or AWS_REGION",
                     prov);
        goto done;
    }
    if (strpbrk(region, ":/ \r\n")) {
        rc = err_set(ERR_INVALID, "%s: invalid region \"%s\"", prov, region);
        goto done;
    }
    d = calloc(1, sizeof *d);
    if (!d) {
        rc = err_set(ERR_NOMEM, "%s: out of memory", prov);
        goto done;
    }
    d->base.vt = &s3_vt;
    d->provider = strdup(prov);
    d->bucket = strdup(bucket);
    d->region = strdup(region);
    s3_keys_init(&d->keys, d->provider, d->region);
    d->part_min = cfg->min_chunk_size > 0 ? cfg->min_chunk_size : (int64_t)5 << 20;
    d->parallel = cfg->max_parallel_chunk_uploads > 0 ? cfg->max_parallel_chunk_uploads : 5;
    d->list_page = 1000;
    d->mpu = (ObjHttpMpuOps){.what = d->provider,
                             .max_parts = S3_MAX_PARTS,
                             .send = s3_mpu_send,
                             .parse_upload_id = s3_parse_upload_id,
                             .part_size = s3_mpu_part_size};
    if ((rc = objhttp_env_int("ETCDBR_S3_LIST_PAGE_SIZE", 1, 1000, &d->list_page))) goto done;
    if (!d->provider || !d->region) {
        rc = err_set(ERR_NOMEM, "%s: out of memory", prov);
        goto done;
    }
    if ((rc = s3_keys_set(&d->keys, &c, &cred_path))) goto done;

    if ((rc = make_bucket_url(d, cfg, &c, prov, bucket, region))) goto done;
    size_t dn = strlen(prov) + strlen(bucket) + 2;
    d->describe = malloc(dn);
    if (d->describe) snprintf(d->describe, dn, "%s:%s", prov, bucket);
    if (c.sse_key && (rc = take_sse(d, &c, prov))) goto done;
    if (!d->provider || !d->bucket || !d->region || !d->bucket_url || !d->describe) {
        rc = err_set(ERR_NOMEM, "%s: out of memory", prov);
        goto done;
    }
    ObjHttpConfig hc = {
        .what = prov,
        .container = bucket,
        .ca_file = cfg->ca_file,
        .ca_pem = c.trusted_ca_cert,
        .insecure_skip_verify = cfg->insecure_skip_verify || c.insecure_skip_verify,
        .timeout_ms = cfg->timeout_ms,
    };
    rc = objhttp_new(&hc, &d->http);
    if (rc != 0) goto done;
    d->keys.http = d->http;
    *out = &d->base;
    d = NULL;
done:
    s3_free(d ? &d->base : NULL);
    free(cred_path);
    s3_creds_clear(&c);
    return rc;
}
