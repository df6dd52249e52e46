/* store_oss: the Alibaba Cloud OSS driver. Requests carry OSS signature V1 (Authorization: OSS
 * <AccessKeyId>:base64(HMAC-SHA1)), made in objhttp's per-attempt hook so a retried request gets a
 * fresh Date. Writes buffer up to one part: an object that fits is one PutObject, a larger one a
 * multipart upload (InitiateMultipartUpload, UploadPart on up to max_parallel threads, memory
 * bounded by the parts in flight, CompleteMultipartUpload; AbortMultipartUpload on any failure,
 * and the failure is returned: unlike the Go tool, a failed part never reports success). Every
 * write sends x-oss-forbid-overwrite: true, so a commit never replaces an object. Reads are
 * ranged (x-oss-range-behavior: standard) and resume after a broken transfer. Listing is
 * ListObjects v1 with marker paging and encoding-type=url. Secrets never reach messages. */
#include "store_oss.h"
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/strbuf.h"
#include "../common/log.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "objhttp_mpu.h"
#include "store_s3.h" /* s3_part_size, s3_creds_mtime: OSS has S3's 10 000-part limit */

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define OSS_MAX_PARTS 10000
#define OSS_MAX_KEY 1023
#define OSS_LIST_MAX_BODY (16u << 20) /* a page of 1,000 keys is under 1 MiB */

/* ---- the driver ---- */

typedef struct OssDriver {
    ObjHttpDriver h;    /* first: bucket (container), describe, part size, parallelism, client */
    char *base_url;     /* scheme://bucket.host[:port] or scheme://ip[:port]/bucket */
    pthread_mutex_t mu; /* guards the keys and cred_mtime */
    char *access_key, *secret;
    char *cred_path;
    int64_t cred_mtime;
} OssDriver;

/* Re-reads the credentials when their files changed; unreadable new files keep the old keys. */
static void creds_refresh(OssDriver *d) {
    int64_t m = s3_creds_mtime(d->cred_path);
    ObjHttpKeyPair pair = {&d->mu, &d->access_key, &d->secret, &d->cred_mtime};
    if (!objhttp_key_pair_changed(&pair, m)) return;
    OssCreds c;
    if (oss_creds_load(d->cred_path, &c) != 0) {
        log_warn("OSS: credentials %s changed but cannot be read (keeping the previous keys): %s",
                 d->cred_path, err_msg());
        return;
    }
    objhttp_key_pair_swap(&pair, &c.access_key, &c.secret, m);
    oss_creds_clear(&c);
    log_info("OSS: credentials re-read from %s", d->cred_path);
}

/* One request. sub_*: signed sub-resources (query parameters of the canonicalized resource);
 * q_*: other query parameters (not signed). A NULL value gives the bare name ("?uploads"). */
typedef struct OssCall {
    const char *method;
    const char *key; /* NULL: the bucket */
    const char *const *sub_n;
    const char *const *sub_v;
    size_t n_sub;
    const char *const *q_n;
    const char *const *q_v;
    size_t n_q;
    const char *const *headers; /* "Name: value" (Content-MD5, Content-Type, x-oss-* are signed) */
    size_t nh;
    const void *body;
    size_t body_len;
    size_t max_body;
} OssCall;

typedef struct SignCtx {
    const OssCall *c;
    const char *bucket;
    char *id, *secret;
} SignCtx;

static int sign_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    SignCtx *s = ctx;
    const OssCall *c = s->c;
    char date[64], date_h[80];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(date_h, sizeof date_h, "Date: %s", date);
    const char **all = calloc(c->nh + 1, sizeof *all);
    if (!all) return err_set(ERR_NOMEM, "OSS: out of memory");
    for (size_t i = 0; i < c->nh; i++)
        all[i] = c->headers[i];
    all[c->nh] = date_h;
    char *sts = oss_string_to_sign(c->method, all, c->nh + 1, s->bucket, c->key, c->sub_n, c->sub_v,
                                   c->n_sub);
    free(all);
    if (!sts) return err_set(ERR_NOMEM, "OSS: out of memory");
    char sig[64];
    int rc = oss_sign(s->secret, sts, sig, sizeof sig);
    free(sts);
    if (rc) return rc;
    size_t al = strlen(s->id) + strlen(sig) + 32;
    char *auth = malloc(al);
    if (!auth) return err_set(ERR_NOMEM, "OSS: out of memory");
    snprintf(auth, al, "Authorization: OSS %s:%s", s->id, sig);
    struct curl_slist *t = curl_slist_append(*headers, date_h);
    if (t) {
        *headers = t;
        t = curl_slist_append(*headers, auth);
        if (t) *headers = t;
    }
    OPENSSL_cleanse(sig, sizeof sig);
    objhttp_free_secret(auth);
    return t ? 0 : err_set(ERR_NOMEM, "OSS: out of memory");
}

static int oss_do(OssDriver *d, const OssCall *c, ObjHttpResponse *resp, ObjHttpStream **stream) {
    StrBuf u = {0};
    strbuf_str(&u, d->base_url);
    strbuf_str(&u, "/");
    if (c->key) {
        char *ek = objhttp_pct_encode(c->key, 1);
        if (!ek) return err_set(ERR_NOMEM, "OSS %s: out of memory", c->method);
        strbuf_str(&u, ek);
        free(ek);
    }
    int first = 1;
    objhttp_query_append(&u, c->sub_n, c->sub_v, c->n_sub, &first);
    objhttp_query_append(&u, c->q_n, c->q_v, c->n_q, &first);
    if (u.oom) {
        free(u.d);
        return err_set(ERR_NOMEM, "OSS %s: out of memory", c->method);
    }
    SignCtx sc = {c, d->h.container, NULL, NULL};
    pthread_mutex_lock(&d->mu);
    sc.id = strdup(d->access_key);
    sc.secret = strdup(d->secret);
    pthread_mutex_unlock(&d->mu);
    int rc;
    if (!sc.id || !sc.secret) {
        rc = err_set(ERR_NOMEM, "OSS %s: out of memory", c->method);
    } else {
        ObjHttpRequest req = {
            .method = c->method,
            .url = u.d,
            .headers = c->headers,
            .n_headers = c->nh,
            .body = c->body,
            .body_len = c->body_len,
            .max_body = c->max_body,
            .auth = sign_hook,
            .auth_ctx = &sc,
        };
        if (stream)
            rc = objhttp_stream_open(d->h.http, &req, resp, stream);
        else
            rc = objhttp_do(d->h.http, &req, resp);
    }
    objhttp_free_secret(sc.id);
    objhttp_free_secret(sc.secret);
    free(u.d);
    return rc;
}

static const char *resp_code(const ObjHttpResponse *r, char *buf, size_t cap) {
    return oss_parse_error_code(r ? r->body : NULL, r && r->body ? r->body_len : 0, buf, cap);
}

/* Adds a hint to a refused request: which credential to check (the signature is never shown). */
static int explain(int rc, const ObjHttpResponse *r, const OssDriver *d) {
    if (rc == 0 || r->status != 403) return rc;
    char code[64];
    resp_code(r, code, sizeof code);
    if (strcmp(code, "RequestTimeTooSkewed") == 0)
        return err_wrap(rc,
                        "OSS bucket %s: the request time is more than 15 minutes off the "
                        "server's: check this machine's clock",
                        d->h.container);
    return err_wrap(rc,
                    "OSS bucket %s: access denied (%s): check accessKeyID and accessKeySecret "
                    "in %s",
                    d->h.container, code[0] ? code : "HTTP 403", d->cred_path);
}

/* ---- list ---- */

/* One ListObjects page after marker (objhttp_list_pages); the next marker must sort after it. */
static int list_page(void *ctx, const char *marker, char **next) {
    ObjHttpListFiltered *p = ctx;
    OssDriver *d = p->drv;
    const char *qn[4] = {"encoding-type", "max-keys", "prefix", "marker"};
    const char *qv[4] = {"url", p->page, p->f.prefix, marker};
    OssCall c = {.method = "GET",
                 .q_n = qn,
                 .q_v = qv,
                 .n_q = marker ? 4 : 3,
                 .max_body = OSS_LIST_MAX_BODY};
    ObjHttpResponse r = {0};
    int rc = explain(oss_do(d, &c, &r, NULL), &r, d);
    p->pages++;
    int truncated = 0;
    if (rc == ERR_NOT_FOUND)
        rc = err_wrap(ERR_IO, "OSS list %s: bucket %s not found", p->f.prefix, d->h.container);
    if (rc == 0 && (rc = oss_parse_list(r.body, r.body_len, objhttp_prefix_filter, &p->f,
                                        &truncated, next)) == ERR_CORRUPT)
        rc = err_wrap(ERR_IO, "OSS list %s (page %d)", p->f.prefix, p->pages);
    if (rc == 0 && truncated && marker && *next && strcmp(*next, marker) <= 0)
        rc = err_set(ERR_IO, "OSS list %s (page %d): NextMarker does not advance", p->f.prefix,
                     p->pages);
    objhttp_response_clear(&r);
    if (rc != 0 || !truncated) {
        free(*next);
        *next = NULL;
    }
    return rc;
}

static int oss_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    OssDriver *d = (OssDriver *)drv;
    creds_refresh(d);
    return objhttp_list_filtered("OSS", "bucket", d->h.container, d, d->h.list_page, key_prefix, cb,
                                 ctx, list_page);
}

/* ---- stat, remove ---- */

static int oss_stat(StoreDriver *drv, const char *key, int64_t *size) {
    OssDriver *d = (OssDriver *)drv;
    int rc = objhttp_driver_key_ok(&d->h, key, "stat");
    if (rc) return rc;
    OssCall c = {.method = "HEAD", .key = key};
    ObjHttpResponse r = {0};
    rc = explain(oss_do(d, &c, &r, NULL), &r, d);
    if (rc == 0 && objhttp_response_length(&r, size) != 0)
        rc = err_set(ERR_IO, "OSS stat %s: no Content-Length in the answer", key);
    else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "OSS stat %s: not found in bucket %s", key, d->h.container);
    }
    objhttp_response_clear(&r);
    return rc;
}

static int oss_remove(StoreDriver *drv, const char *key) {
    OssDriver *d = (OssDriver *)drv;
    /* DeleteObject answers 204 for a missing key too: ask first, so absence is reported */
    int64_t size;
    int rc = oss_stat(drv, key, &size);
    if (rc) return rc;
    OssCall c = {.method = "DELETE", .key = key};
    ObjHttpResponse r = {0};
    rc = oss_do(d, &c, &r, NULL);
    char code[64];
    if (rc != 0 && r.status == 409 &&
        strcmp(resp_code(&r, code, sizeof code), "FileImmutable") == 0)
        rc = err_set(ERR_IMMUTABLE,
                     "OSS remove %s: the object is protected by the bucket's retention policy "
                     "(WORM, FileImmutable); it stays until its retention period ends",
                     key);
    else
        rc = explain(rc, &r, d);
    objhttp_response_clear(&r);
    return rc;
}

/* ---- read ---- */

/* The read_open of objhttp_driver_open_read: the stream at r->offset, If-Match the first answer's
 * ETag (the reader's pin). */
static int reader_open(ObjHttpResumable *res) {
    ObjHttpDriverReader *r = (ObjHttpDriverReader *)res;
    OssDriver *d = (OssDriver *)r->d;
    char range[64], match[OBJHTTP_ETAG_MAX + 16];
    const char *h[3];
    size_t nh = 0;
    if (res->offset > 0) {
        snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)res->offset);
        h[nh++] = range;
        h[nh++] = "x-oss-range-behavior: standard";
    }
    if (r->pin[0]) {
        snprintf(match, sizeof match, "If-Match: %s", r->pin);
        h[nh++] = match;
    }
    OssCall c = {.method = "GET", .key = res->key, .headers = h, .nh = nh};
    ObjHttpResponse resp = {0};
    int rc = oss_do(d, &c, &resp, &res->s);
    if (rc == ERR_IO && resp.status == 416 && res->offset > 0) {
        rc = 0; /* at or past the end: an empty stream */
        res->s = NULL;
    } else if (rc == ERR_NOT_FOUND) {
        rc =
            err_set(ERR_NOT_FOUND, "OSS read %s: not found in bucket %s", res->key, d->h.container);
    } else {
        rc = explain(rc, &resp, d);
    }
    if (rc == 0 && res->s) {
        if (res->offset > 0 && resp.status == 200) res->skip = res->offset; /* Range ignored */
        if (!r->pin[0]) rc = objhttp_resumable_pin(res, &resp, "ETag", r->pin, sizeof r->pin);
    }
    objhttp_response_clear(&resp);
    return rc;
}

/* ---- write: the multipart flow is objhttp_mpu's; here is how each step goes on the wire ---- */

static void content_md5(const void *data, size_t len, char out[64]) {
    unsigned char md[16];
    unsigned int ml = 0;
    char b64[32];
    EVP_Digest(data, len, md, &ml, EVP_md5(), NULL);
    EVP_EncodeBlock((unsigned char *)b64, md, 16);
    snprintf(out, 64, "Content-MD5: %s", b64);
}

/* x-oss-forbid-overwrite answered 409 FileAlreadyExists: another writer got there first. */
static int exists_or(int rc, const ObjHttpResponse *r, OssDriver *d, const char *key) {
    char code[64];
    if (rc != 0 && r->status == 409 &&
        strcmp(resp_code(r, code, sizeof code), "FileAlreadyExists") == 0)
        return err_set(ERR_EXISTS, "OSS write %s: the object already exists", key);
    return explain(rc, r, d);
}

/* A complete retried after a first try that went through answers NoSuchUpload: the object is
 * there when it has all c->total bytes. */
static int completed_before(OssDriver *d, const ObjHttpMpuCall *c, const ObjHttpResponse *r,
                            int rc) {
    char code[64];
    if (rc != ERR_NOT_FOUND || strcmp(resp_code(r, code, sizeof code), "NoSuchUpload") != 0)
        return rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err_msg());
    int64_t size = -1;
    if (oss_stat(&d->h.base, c->key, &size) == 0 && size == (int64_t)c->total) {
        log_warn("OSS write %s: complete answered NoSuchUpload, but the object is there with all "
                 "%lld bytes (an earlier try succeeded)",
                 c->key, (long long)size);
        return 0;
    }
    return err_set(ERR_IO, "%s", msg);
}

static int oss_mpu_send(void *drv, const ObjHttpMpuCall *c, ObjHttpResponse *resp) {
    static const char *const step_method[] = {[OBJHTTP_MPU_PUT] = "PUT",
                                              [OBJHTTP_MPU_INITIATE] = "POST",
                                              [OBJHTTP_MPU_PART] = "PUT",
                                              [OBJHTTP_MPU_COMPLETE] = "POST",
                                              [OBJHTTP_MPU_ABORT] = "DELETE"};
    OssDriver *d = drv;
    char pn[16], md5[64];
    snprintf(pn, sizeof pn, "%d", c->part);
    const char *sn[2] = {"uploadId", NULL}, *sv[2] = {c->upload_id, NULL};
    const char *h[3];
    OssCall call = {.method = step_method[c->step],
                    .key = c->key,
                    .sub_n = sn,
                    .sub_v = sv,
                    .n_sub = c->upload_id ? 1 : 0,
                    .headers = h,
                    .body = c->body,
                    .body_len = c->len};
    if (c->step == OBJHTTP_MPU_INITIATE) {
        sn[0] = "uploads";
        call.sub_v = NULL;
        call.n_sub = 1;
    }
    if (c->step == OBJHTTP_MPU_PART) { /* partNumber first, as OSS's own SDKs send it */
        sn[0] = "partNumber";
        sv[0] = pn;
        sn[1] = "uploadId";
        sv[1] = c->upload_id;
        call.n_sub = 2;
    }
    if (c->step != OBJHTTP_MPU_ABORT)
        h[call.nh++] = c->step == OBJHTTP_MPU_COMPLETE ? "Content-Type: application/xml"
                                                       : "Content-Type: application/octet-stream";
    if (c->step == OBJHTTP_MPU_PUT || c->step == OBJHTTP_MPU_PART ||
        c->step == OBJHTTP_MPU_COMPLETE) {
        content_md5(c->body, c->len, md5);
        h[call.nh++] = md5;
    }
    if (c->step != OBJHTTP_MPU_PART && c->step != OBJHTTP_MPU_ABORT)
        h[call.nh++] = "x-oss-forbid-overwrite: true";
    int rc = exists_or(oss_do(d, &call, resp, NULL), resp, d, c->key);
    if (c->step == OBJHTTP_MPU_COMPLETE) rc = completed_before(d, c, resp, rc);
    return rc;
}

static size_t oss_mpu_part_size(void *drv, int num) {
    return (size_t)s3_part_size(((OssDriver *)drv)->h.min_chunk, -1, num);
}

static const ObjHttpMpuOps oss_mpu = {.what = "OSS",
                                      .max_parts = OSS_MAX_PARTS,
                                      .send = oss_mpu_send,
                                      .parse_upload_id = oss_parse_upload_id,
                                      .part_size = oss_mpu_part_size};

static int oss_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    OssDriver *d = (OssDriver *)drv;
    *out = NULL;
    int rc = objhttp_driver_key_ok(&d->h, key, "write");
    if (rc) return rc;
    creds_refresh(d);
    return objhttp_mpu_open(&oss_mpu, d, d->h.parallel, key, out);
}

/* ---- open, free ---- */

static void oss_free(StoreDriver *drv) {
    OssDriver *d = (OssDriver *)drv;
    if (!d) return;
    objhttp_driver_clear(&d->h);
    FREE_SECRETS(d->access_key, d->secret);
    pthread_mutex_destroy(&d->mu);
    FREE_ALL(d->base_url, d->cred_path, d);
}

static const StoreDriverVt oss_vt = {
    .name = "OSS",
    .features = STORE_FEAT_THREAD_SAFE | STORE_FEAT_NO_REPLACE,
    .list = oss_list,
    .open_read = objhttp_driver_open_read,
    .open_write = oss_open_write,
    .remove = oss_remove,
    .stat = oss_stat,
    .remove_dir = NULL,
    .describe = objhttp_driver_describe,
    .free = oss_free,
};

/* The bucket cfg names: OSS allows lower-case letters, digits and '-'. */
static int oss_bucket_ok(const char *bucket) {
    for (const char *c = bucket; *c; c++) {
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
            return err_set(ERR_INVALID,
                           "OSS: bucket \"%s\": only lower-case letters, digits and '-' are "
                           "allowed",
                           bucket);
    }
    return 0;
}

/* The credentials file or directory cfg names (--store-credentials, else the Go tool's
 * variables), borrowed. 0 or ERR_INVALID naming the variables. */
static int oss_creds_path(const StoreConfig *cfg, const char **path) {
    *path = cfg->credentials && cfg->credentials[0] ? cfg->credentials : NULL;
    if (!*path) *path = store_env(cfg, "ALICLOUD_APPLICATION_CREDENTIALS_JSON");
    if (!*path) *path = store_env(cfg, "ALICLOUD_APPLICATION_CREDENTIALS");
    if (!*path)
        return err_set(ERR_INVALID,
                       "OSS: no credentials: set %sALICLOUD_APPLICATION_CREDENTIALS_JSON "
                       "(a JSON file) or %sALICLOUD_APPLICATION_CREDENTIALS (a "
                       "directory)",
                       store_env_prefix(cfg), store_env_prefix(cfg));
    return 0;
}

int store_oss_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    const char *path;
    OssCreds c = {0};
    OssDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "OSS: out of memory");
    pthread_mutex_init(&d->mu, NULL);
    int rc = objhttp_driver_init(&d->h, &oss_vt, cfg, "bucket", (int64_t)5 << 20, 5);
    d->h.max_key = OSS_MAX_KEY;
    d->h.key_no_slash = 1;
    d->h.read_open = reader_open;
    if (!rc) rc = oss_bucket_ok(d->h.container);
    if (!rc) rc = oss_creds_path(cfg, &path);
    if (!rc && (rc = oss_creds_load(path, &c)) == ERR_NOT_FOUND) rc = ERR_INVALID;
    if (rc) goto done;
    d->cred_path = strdup(path);
    d->access_key = c.access_key;
    d->secret = c.secret;
    c.access_key = c.secret = NULL;
    d->cred_mtime = s3_creds_mtime(path);
    d->h.list_page = 1000;
    if ((rc = objhttp_env_int("ETCDBR_OSS_LIST_PAGE_SIZE", 1, 1000, &d->h.list_page))) goto done;
    if (!d->cred_path) {
        rc = err_set(ERR_NOMEM, "OSS: out of memory");
        goto done;
    }
    if (cfg->endpoint_override && cfg->endpoint_override[0])
        log_warn("OSS: --store-endpoint-override=%s is ignored: as in the Go tool, the endpoint "
                 "is storageEndpoint from the credentials (%s)",
                 cfg->endpoint_override, c.endpoint);
    rc = oss_base_url(c.endpoint, d->h.container, &d->base_url);
    if (!rc) rc = objhttp_driver_client(&d->h, cfg);
done:
    oss_creds_clear(&c);
    RETURN_BUILT(rc, out, &d->h.base, oss_free(&d->h.base));
}
