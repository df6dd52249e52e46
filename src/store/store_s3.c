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
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../common/timeutil.h"
#include "objhttp.h"
#include "objhttp_mpu.h"
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

#define S3_MAX_PARTS 10000
#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* ---- credentials ---- */

static void wipe_free(char *s) {
    if (!s) return;
    volatile char *v = s;
    while (*v)
        *v++ = 0;
    free(s);
}

void s3_creds_clear(S3Creds *c) {
    if (!c) return;
    free(c->region);
    wipe_free(c->access_key);
    wipe_free(c->secret_key);
    wipe_free(c->session_token);
    free(c->endpoint);
    free(c->trusted_ca_cert);
    wipe_free(c->sse_key);
    free(c->sse_algo);
    free(c->role_arn);
    free(c->token_path);
    memset(c, 0, sizeof *c);
}

typedef enum { F_STR, F_BOOL } FieldType;

static const struct {
    const char *name;
    FieldType type;
    size_t off;
} fields[] = {
    {"region", F_STR, offsetof(S3Creds, region)},
    {"accessKeyID", F_STR, offsetof(S3Creds, access_key)},
    {"secretAccessKey", F_STR, offsetof(S3Creds, secret_key)},
    {"endpoint", F_STR, offsetof(S3Creds, endpoint)},
    {"trustedCaCert", F_STR, offsetof(S3Creds, trusted_ca_cert)},
    {"sseCustomerKey", F_STR, offsetof(S3Creds, sse_key)},
    {"sseCustomerAlgorithm", F_STR, offsetof(S3Creds, sse_algo)},
    {"roleARN", F_STR, offsetof(S3Creds, role_arn)},
    {"tokenPath", F_STR, offsetof(S3Creds, token_path)},
    {"s3ForcePathStyle", F_BOOL, offsetof(S3Creds, force_path_style)},
    {"insecureSkipVerify", F_BOOL, offsetof(S3Creds, insecure_skip_verify)},
    {"disableSSL", F_BOOL, offsetof(S3Creds, disable_ssl)},
};

static int parse_bool(const char *s, size_t len, int *out) {
    while (len > 0 &&
           (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    static const char *const t[] = {"1", "t", "T", "true", "TRUE", "True"};
    static const char *const f[] = {"0", "f", "F", "false", "FALSE", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strlen(t[i]) == len && memcmp(s, t[i], len) == 0) return *out = 1, 0;
        if (strlen(f[i]) == len && memcmp(s, f[i], len) == 0) return *out = 0, 0;
    }
    return -1;
}

static int set_field(S3Creds *c, size_t i, const char *val, size_t len, const char *path) {
    if (fields[i].type == F_BOOL) {
        if (parse_bool(val, len, (int *)((char *)c + fields[i].off)) != 0)
            return err_set(ERR_INVALID, "credentials %s: %s is not a boolean", path,
                           fields[i].name);
        return 0;
    }
    char **slot = (char **)((char *)c + fields[i].off);
    char *v = malloc(len + 1);
    if (!v) return err_set(ERR_NOMEM, "credentials %s: out of memory", path);
    memcpy(v, val, len);
    v[len] = '\0';
    wipe_free(*slot);
    *slot = v;
    return 0;
}

static int creds_from_json(const char *path, S3Creds *c) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        if (errno == ENOENT && je.line < 0)
            return err_set(ERR_NOT_FOUND, "credentials %s: no such file", path);
        return err_set(ERR_INVALID, "credentials %s: invalid JSON at line %d: %s", path, je.line,
                       je.text);
    }
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_set(ERR_INVALID, "credentials %s: not a JSON object", path);
        goto done;
    }
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && rc == 0; i++) {
        json_t *v = json_object_get(root, fields[i].name);
        if (!v || json_is_null(v)) continue;
        if (json_is_string(v)) {
            rc = set_field(c, i, json_string_value(v), json_string_length(v), path);
        } else if (json_is_boolean(v) && fields[i].type == F_BOOL) {
            *(int *)((char *)c + fields[i].off) = json_is_true(v);
        } else {
            rc = err_set(ERR_INVALID, "credentials %s: %s has the wrong JSON type", path,
                         fields[i].name);
        }
    }
done:
    json_decref(root);
    return rc;
}

static int read_whole(const char *path, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "credentials %s: %s", path, strerror(errno));
    size_t cap = 256, n = 0;
    char *b = malloc(cap);
    int rc = 0;
    while (b) {
        if (n == cap) {
            if (cap > (1u << 20)) {
                rc = err_set(ERR_INVALID, "credentials %s: larger than 1 MiB", path);
                break;
            }
            char *g = realloc(b, cap * 2);
            if (!g) break;
            b = g;
            cap *= 2;
        }
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (!b)
        rc = err_set(ERR_NOMEM, "credentials %s: out of memory", path);
    else if (rc == 0 && ferror(f))
        rc = err_set(ERR_IO, "credentials %s: read error", path);
    fclose(f);
    if (rc != 0) {
        if (b) memset(b, 0, cap);
        free(b);
        return rc;
    }
    *out = b;
    *len = n;
    return 0;
}

static int creds_from_dir(const char *dir, S3Creds *c) {
    DIR *d = opendir(dir);
    if (!d) return err_set(ERR_IO, "credentials %s: %s", dir, strerror(errno));
    int rc = 0;
    char path[4096];
    /* a *.json file in the directory wins: the first in directory order, as the Go tool */
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] != '.' && n > 5 && strcmp(e->d_name + n - 5, ".json") == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            closedir(d);
            return creds_from_json(path, c);
        }
    }
    closedir(d);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, fields[i].name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        char *buf = NULL;
        size_t len = 0;
        rc = read_whole(path, &buf, &len);
        if (rc == 0) rc = set_field(c, i, buf, len, path);
        if (buf) memset(buf, 0, len);
        free(buf);
    }
    /* the web-identity form of a directory: the token is its file "token" (as the Go tool) */
    if (rc == 0 && c->role_arn && !c->token_path) {
        snprintf(path, sizeof path, "%s/token", dir);
        if (!(c->token_path = strdup(path))) rc = err_set(ERR_NOMEM, "credentials: out of memory");
    }
    return rc;
}

int s3_creds_read(const char *path, S3Creds *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "credentials %s: %s", path,
                       strerror(errno));
    int rc = S_ISDIR(st.st_mode) ? creds_from_dir(path, out) : creds_from_json(path, out);
    if (rc == 0 && (!out->sse_key) != (!out->sse_algo))
        rc = err_set(ERR_INVALID,
                     "credentials %s: sseCustomerKey and sseCustomerAlgorithm go together", path);
    if (rc != 0) s3_creds_clear(out);
    return rc;
}

static int64_t ts_ns(const struct stat *st) {
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int64_t s3_creds_mtime(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    int64_t m = ts_ns(&st);
    if (!S_ISDIR(st.st_mode)) return m;
    DIR *d = opendir(path);
    if (!d) return m;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &st) == 0 && ts_ns(&st) > m) m = ts_ns(&st);
    }
    closedir(d);
    return m;
}

int64_t s3_part_size(int64_t min_chunk, int64_t known_size, int part_no) {
    if (min_chunk <= 0) min_chunk = 5 << 20;
    if (known_size >= 0) {
        int64_t s = (known_size + S3_MAX_PARTS - 2) / (S3_MAX_PARTS - 1);
        return s > min_chunk ? s : min_chunk;
    }
    int shift = part_no > 0 ? (part_no - 1) / 1000 : 0;
    return min_chunk << shift;
}

/* ---- STS response parser ---- */

void s3_sts_creds_clear(S3StsCreds *c) {
    if (!c) return;
    wipe_free(c->access_key);
    wipe_free(c->secret_key);
    wipe_free(c->session_token);
    memset(c, 0, sizeof *c);
}

static const char *xml_find(const char *s, const char *e, const char *tag, size_t *n);

/* "2019-11-09T13:34:41Z" (fractional seconds allowed) to unix seconds; -1 if malformed. */
static int64_t iso8601_utc(const char *s) {
    int y, mo, d, h, mi, sec, used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 ||
        used != 19)
        return -1;
    const char *p = s + 19;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) {
        }
    if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0) return -1;
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 60)
        return -1;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    return (int64_t)timegm(&tm);
}

int s3_sts_parse(const char *xml, size_t len, S3StsCreds *out) {
    memset(out, 0, sizeof *out);
    const char *end = xml + len;
    size_t n = 0;
    const char *cr = memmem(xml, len, "<AssumeRoleWithWebIdentityResponse", 34)
                         ? xml_find(xml, end, "Credentials", &n)
                         : NULL;
    if (!cr) return err_set(ERR_CORRUPT, "STS: not an AssumeRoleWithWebIdentity response");
    const char *ce = cr + n;
    static const char *const tags[] = {"AccessKeyId", "SecretAccessKey", "SessionToken",
                                       "Expiration"};
    char *v[4] = {0};
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++) {
        size_t vn = 0;
        const char *t = xml_find(cr, ce, tags[i], &vn);
        if (!t || vn == 0) {
            rc = err_set(ERR_CORRUPT, "STS: the response has no %s", tags[i]);
        } else if (!(v[i] = objhttp_xml_text(t, vn))) {
            rc = err_set(ERR_CORRUPT, "STS: %s is not valid XML text", tags[i]);
        }
    }
    if (rc == 0 && (out->expiration = iso8601_utc(v[3])) < 0)
        rc = err_set(ERR_CORRUPT, "STS: Expiration is not an ISO 8601 UTC time");
    if (rc == 0) {
        out->access_key = v[0];
        out->secret_key = v[1];
        out->session_token = v[2];
        v[0] = v[1] = v[2] = NULL;
    } else {
        out->expiration = 0;
    }
    for (int i = 0; i < 4; i++)
        wipe_free(v[i]);
    return rc;
}

/* ---- listing parser ---- */

/* The text between <tag> and </tag> within [s, e), or NULL; *n its length. */
static const char *xml_find(const char *s, const char *e, const char *tag, size_t *n) {
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    size_t ol = strlen(open), cl = strlen(close);
    for (const char *p = s; p + ol <= e; p++) {
        if (memcmp(p, open, ol) != 0) continue;
        const char *v = p + ol;
        for (const char *q = v; q + cl <= e; q++) {
            if (memcmp(q, close, cl) == 0) {
                *n = (size_t)(q - v);
                return v;
            }
        }
        return NULL;
    }
    return NULL;
}

int s3_list_parse(const char *xml, size_t len, S3ListCb cb, void *ctx, int *truncated,
                  char **next_token) {
    *truncated = 0;
    *next_token = NULL;
    const char *end = xml + len;
    if (!memmem(xml, len, "<ListBucketResult", 17))
        return err_set(ERR_CORRUPT, "S3 listing: no ListBucketResult element");
    const char *p = xml;
    for (;;) {
        size_t n;
        const char *c = xml_find(p, end, "Contents", &n);
        if (!c) break;
        const char *ce = c + n;
        size_t kn, sn;
        const char *k = xml_find(c, ce, "Key", &kn);
        if (!k) return err_set(ERR_CORRUPT, "S3 listing: an entry without a Key");
        char *key = objhttp_xml_text(k, kn);
        if (!key)
            return err_set(
                ERR_CORRUPT,
                "S3 listing: a Key with a bad XML entity or a NUL (refused, not cut short)");
        int64_t size = -1;
        const char *sz = xml_find(c, ce, "Size", &sn);
        if (sz && sn > 0 && sn < 20) {
            char num[24];
            memcpy(num, sz, sn);
            num[sn] = '\0';
            char *e2;
            long long v = strtoll(num, &e2, 10);
            if (*e2 || v < 0) {
                free(key);
                return err_set(ERR_CORRUPT, "S3 listing: bad Size");
            }
            size = v;
        }
        int rc = cb(ctx, key, size);
        free(key);
        if (rc != 0) return rc;
        p = ce + strlen("</Contents>");
        if (p > end) break;
    }
    size_t tn;
    const char *t = xml_find(xml, end, "IsTruncated", &tn);
    *truncated = t && tn == 4 && memcmp(t, "true", 4) == 0;
    const char *nt = xml_find(xml, end, "NextContinuationToken", &tn);
    if (nt && tn > 0) {
        *next_token = objhttp_xml_text(nt, tn);
        if (!*next_token) return err_set(ERR_CORRUPT, "S3 listing: bad NextContinuationToken");
    }
    if (*truncated && !*next_token)
        return err_set(ERR_CORRUPT, "S3 listing: truncated without a NextContinuationToken");
    return 0;
}

int s3_parse_upload_id(const char *xml, size_t len, char **upload_id) {
    size_t n;
    *upload_id = NULL;
    const char *id = xml_find(xml, xml + len, "UploadId", &n);
    if (!id || n == 0) return err_set(ERR_CORRUPT, "no UploadId in the answer");
    if (n > OBJHTTP_ID_MAX)
        return err_set(ERR_CORRUPT,
                       "the UploadId in the answer has %zu bytes, more than the %zu "
                       "accepted",
                       n, OBJHTTP_ID_MAX);
    *upload_id = objhttp_xml_text(id, n);
    return *upload_id ? 0
                      : err_set(ERR_CORRUPT, "the UploadId in the answer is not valid XML text");
}

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
    /* credentials: keys may be swapped by a reload; guarded by mu */
    pthread_mutex_t mu;
    char *access_key, *secret_key, *session_token;
    char *cred_path; /* file or directory re-read on mtime change; NULL = environment */
    int64_t cred_mtime;
    /* web identity: keys from STS AssumeRoleWithWebIdentity, renewed before they expire */
    char *role_arn, *token_path, *sts_url, *session_name;
    int64_t keys_expire;    /* unix seconds */
    pthread_mutex_t sts_mu; /* one renewal at a time */
    /* the server answered a conditional write (If-None-Match: *) with 501 NotImplemented (Swift's
     * s3api, older S3 emulators): later writes are sent without it; atomic */
    int no_conditional;
    ObjHttpMpuOps mpu; /* the multipart steps (their what names the provider) */
} S3Driver;

/* Keys for one request (a snapshot: a reload on another thread does not pull them away). */
typedef struct {
    char *user, *pass, *token;
    const char *sigv4;
    char sigv4_buf[160];
} S3Auth;

static void auth_clear(S3Auth *a) {
    wipe_free(a->user);
    wipe_free(a->pass);
    wipe_free(a->token);
    memset(a, 0, sizeof *a);
}

static void creds_refresh(S3Driver *d);
static int sts_refresh(S3Driver *d);

/* Every request takes its keys here, after a check that the credentials file did not change (a
 * stat per request), or with web identity that the temporary keys are not about to expire, so
 * no kind of request keeps using keys that were replaced. */
static int auth_take(S3Driver *d, S3Auth *a) {
    memset(a, 0, sizeof *a);
    if (d->role_arn) {
        int rc = sts_refresh(d);
        if (rc) return rc;
    } else {
        creds_refresh(d);
    }
    pthread_mutex_lock(&d->mu);
    a->user = strdup(d->access_key);
    a->pass = strdup(d->secret_key);
    a->token = d->session_token ? strdup(d->session_token) : NULL;
    int bad = !a->user || !a->pass || (d->session_token && !a->token);
    pthread_mutex_unlock(&d->mu);
    snprintf(a->sigv4_buf, sizeof a->sigv4_buf, "aws:amz:%s:s3", d->region);
    a->sigv4 = a->sigv4_buf;
    if (bad) {
        auth_clear(a);
        return err_set(ERR_NOMEM, "%s: out of memory", d->provider);
    }
    return 0;
}

static int s3_auth_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    S3Auth *a = ctx;
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, a->sigv4);
    curl_easy_setopt(curl, CURLOPT_USERNAME, a->user);
    curl_easy_setopt(curl, CURLOPT_PASSWORD, a->pass);
    if (a->token) {
        size_t n = strlen(a->token) + 32;
        char *h = malloc(n);
        if (!h) return err_set(ERR_NOMEM, "S3: out of memory");
        snprintf(h, n, "x-amz-security-token: %s", a->token);
        struct curl_slist *t = curl_slist_append(*headers, h);
        wipe_free(h);
        if (!t) return err_set(ERR_NOMEM, "S3: out of memory");
        *headers = t;
    }
    return 0;
}

/* Keys are renewed this long before STS says they expire. */
#define STS_RENEW_BEFORE_S 300

/* One AssumeRoleWithWebIdentity call (AWS STS API reference): the token file read now (projected
 * service-account tokens rotate), unsigned form POST to d->sts_url. */
static int sts_assume(S3Driver *d, S3StsCreds *out) {
    char *tok = NULL;
    size_t tl = 0;
    int rc = read_whole(d->token_path, &tok, &tl);
    if (rc) return err_wrap(rc, "%s web identity: reading the token", d->provider);
    while (tl > 0 && (tok[tl - 1] == '\n' || tok[tl - 1] == '\r' || tok[tl - 1] == ' '))
        tl--;
    tok[tl] = '\0';
    char *e_role = objhttp_pct_encode(d->role_arn, 0);
    char *e_name = objhttp_pct_encode(d->session_name, 0);
    char *e_tok = objhttp_pct_encode(tok, 0);
    memset(tok, 0, tl);
    free(tok);
    char *body = NULL;
    if (e_role && e_name && e_tok &&
        asprintf(&body,
                 "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s"
                 "&RoleSessionName=%s&WebIdentityToken=%s",
                 e_role, e_name, e_tok) < 0)
        body = NULL;
    if (e_tok) wipe_free(e_tok);
    free(e_role);
    free(e_name);
    if (!body) return err_set(ERR_NOMEM, "%s web identity: out of memory", d->provider);
    if (tl == 0) {
        wipe_free(body);
        return err_set(ERR_INVALID, "%s web identity: token file %s is empty", d->provider,
                       d->token_path);
    }
    const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded; charset=utf-8",
                          "Accept: application/xml"};
    ObjHttpRequest req = {.method = "POST",
                          .url = d->sts_url,
                          .headers = hdrs,
                          .n_headers = 2,
                          .body = body,
                          .body_len = strlen(body)};
    ObjHttpResponse resp = {0};
    rc = objhttp_do(d->http, &req, &resp);
    wipe_free(body);
    if (rc == 0) rc = s3_sts_parse(resp.body, resp.body_len, out);
    objhttp_response_clear(&resp);
    if (rc)
        err_wrap(rc, "%s web identity: AssumeRoleWithWebIdentity for role %s", d->provider,
                 d->role_arn);
    return rc;
}

/* Renews the temporary keys when there are none or they expire within STS_RENEW_BEFORE_S. A
 * failed renewal keeps keys that are still valid (logged) and fails once they are not. */
static int sts_refresh(S3Driver *d) {
    int64_t now = now_unix_s();
    pthread_mutex_lock(&d->mu);
    int fresh = d->access_key && now < d->keys_expire - STS_RENEW_BEFORE_S;
    pthread_mutex_unlock(&d->mu);
    if (fresh) return 0;
    pthread_mutex_lock(&d->sts_mu);
    pthread_mutex_lock(&d->mu); /* another thread may have renewed them meanwhile */
    fresh = d->access_key && now < d->keys_expire - STS_RENEW_BEFORE_S;
    int usable = d->access_key && now < d->keys_expire;
    pthread_mutex_unlock(&d->mu);
    int rc = 0;
    if (!fresh) {
        S3StsCreds c = {0};
        rc = sts_assume(d, &c);
        if (rc == 0) {
            int64_t exp = c.expiration > now ? c.expiration : now + 900;
            pthread_mutex_lock(&d->mu);
            wipe_free(d->access_key);
            wipe_free(d->secret_key);
            wipe_free(d->session_token);
            d->access_key = c.access_key;
            d->secret_key = c.secret_key;
            d->session_token = c.session_token;
            d->keys_expire = exp;
            pthread_mutex_unlock(&d->mu);
            c.access_key = c.secret_key = c.session_token = NULL;
            log_info("%s: temporary credentials for role %s, valid for %llds", d->provider,
                     d->role_arn, (long long)(exp - now));
        } else if (usable) {
            log_warn("%s: renewing the temporary credentials failed (the current ones are valid "
                     "for %llds more): %s",
                     d->provider, (long long)(d->keys_expire - now), err_msg());
            rc = 0;
        }
        s3_sts_creds_clear(&c);
    }
    pthread_mutex_unlock(&d->sts_mu);
    return rc;
}

/* Re-reads the credentials file when its mtime changed; a file that cannot be read now keeps
 * the keys in use (logged), as a secret being rotated may be briefly incomplete. */
static void creds_refresh(S3Driver *d) {
    if (!d->cred_path) return;
    int64_t m = s3_creds_mtime(d->cred_path);
    pthread_mutex_lock(&d->mu);
    int changed = m != d->cred_mtime;
    pthread_mutex_unlock(&d->mu);
    if (!changed) return;
    S3Creds c;
    int rc = s3_creds_read(d->cred_path, &c);
    if (rc == 0 && (!c.access_key || !c.secret_key))
        rc = err_set(ERR_INVALID, "credentials %s: accessKeyID or secretAccessKey missing",
                     d->cred_path);
    if (rc != 0) {
        log_warn("%s: credentials changed but cannot be read (keeping the previous keys): %s",
                 d->provider, err_msg());
        s3_creds_clear(&c);
        return;
    }
    pthread_mutex_lock(&d->mu);
    wipe_free(d->access_key);
    wipe_free(d->secret_key);
    d->access_key = c.access_key;
    d->secret_key = c.secret_key;
    c.access_key = c.secret_key = NULL;
    d->cred_mtime = m;
    pthread_mutex_unlock(&d->mu);
    s3_creds_clear(&c);
    log_info("%s: credentials re-read from %s", d->provider, d->cred_path);
}

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
    int rc = url ? auth_take(d, &a) : err_set(ERR_NOMEM, "%s: out of memory", d->provider);
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
        auth_clear(&a);
    }
    memset(&sh, 0, sizeof sh); /* the key does not outlive the request */
    free(url);
    return rc;
}

/* ---- list ---- */

typedef struct {
    const char *prefix;
    StoreDriverListCb cb;
    void *ctx;
} ListCtx;

static int list_entry(void *ctx, const char *key, int64_t size) {
    ListCtx *l = ctx;
    /* the server filters by prefix; a key outside it (a sibling prefix) is never passed on */
    if (strncmp(key, l->prefix, strlen(l->prefix)) != 0) return 0;
    return l->cb(l->ctx, key, size);
}

static int s3_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    S3Driver *d = (S3Driver *)drv;
    char page[16];
    snprintf(page, sizeof page, "%d", d->list_page);
    char *token = NULL;
    int rc = 0;
    ListCtx lc = {key_prefix, cb, ctx};
    ObjHttpListing lg;
    objhttp_listing_begin(&lg, d->provider, d->bucket, key_prefix);
    for (int pages = 0;; pages++) {
        rc = objhttp_listing_page(&lg, token);
        if (rc != 0) break;
        const char *names[4] = {"list-type", "prefix", "max-keys", "continuation-token"};
        const char *values[4] = {"2", key_prefix, page, token};
        char *q = objhttp_query(names, values, token ? 4 : 3);
        if (!q) {
            rc = err_set(ERR_NOMEM, "%s list: out of memory", d->provider);
            break;
        }
        ObjHttpResponse resp = {0};
        rc = s3_call(d, "GET", NULL, q, 0, NULL, 0, NULL, 0, &resp, 0);
        free(q);
        if (rc == ERR_NOT_FOUND)
            rc = err_wrap(ERR_IO, "%s list %s: bucket %s not found", d->provider, key_prefix,
                          d->bucket);
        if (rc == 0) {
            int truncated = 0;
            free(token);
            token = NULL;
            rc = s3_list_parse(resp.body, resp.body_len, list_entry, &lc, &truncated, &token);
            if (rc == ERR_CORRUPT)
                rc = err_wrap(ERR_IO, "%s list %s (page %d)", d->provider, key_prefix, pages + 1);
            if (rc == 0 && !truncated) {
                objhttp_response_clear(&resp);
                break;
            }
        }
        objhttp_response_clear(&resp);
        if (rc != 0) break;
    }
    objhttp_listing_end(&lg);
    free(token);
    return rc;
}

/* ---- stat, remove ---- */

static int s3_stat(StoreDriver *drv, const char *key, int64_t *size) {
    S3Driver *d = (S3Driver *)drv;
    ObjHttpResponse resp = {0};
    int rc = s3_call(d, "HEAD", key, NULL, 1, NULL, 0, NULL, 0, &resp, 0);
    if (rc == 0) {
        char v[32];
        char *e = NULL;
        const char *cl = objhttp_response_header(&resp, "content-length", v, sizeof v);
        long long n = cl ? strtoll(cl, &e, 10) : -1;
        if (!cl || *e || n < 0)
            rc = err_set(ERR_IO, "%s stat %s: no Content-Length in the answer", d->provider, key);
        else
            *size = n;
    }
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
    int rc = url ? auth_take(d, &a) : err_set(ERR_NOMEM, "%s: out of memory", d->provider);
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
        auth_clear(&a);
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
    free(d->provider);
    free(d->bucket);
    free(d->describe);
    free(d->bucket_url);
    free(d->region);
    free(d->sse_algo);
    wipe_free(d->sse_key_b64);
    free(d->sse_md5_b64);
    wipe_free(d->access_key);
    wipe_free(d->secret_key);
    wipe_free(d->session_token);
    free(d->cred_path);
    free(d->role_arn);
    free(d->token_path);
    free(d->sts_url);
    free(d->session_name);
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->sts_mu);
    free(d);
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

static char *dup_env(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? strdup(v) : NULL;
}

/* $<prefix><name> duplicated, NULL when unset or empty. */
static char *dup_penv(const char *prefix, const char *name) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return dup_env(full);
}

/* The part of the AWS SDK's default chain we implement, read with env prefix ep. */
static void sdk_env_creds(const char *ep, S3Creds *c) {
    c->access_key = dup_penv(ep, "AWS_ACCESS_KEY_ID");
    c->secret_key = dup_penv(ep, "AWS_SECRET_ACCESS_KEY");
    c->session_token = dup_penv(ep, "AWS_SESSION_TOKEN");
    c->region = dup_penv(ep, "AWS_REGION");
    if (!c->region) c->region = dup_penv(ep, "AWS_DEFAULT_REGION");
    if (!c->access_key || !c->secret_key) { /* the SDK's web identity (EKS IRSA) */
        c->role_arn = dup_penv(ep, "AWS_ROLE_ARN");
        c->token_path = dup_penv(ep, "AWS_WEB_IDENTITY_TOKEN_FILE");
    }
}

static int env_bool(const char *name, int *out) {
    const char *v = getenv(name);
    *out = 0;
    if (!v || !v[0]) return 0;
    if (parse_bool(v, strlen(v), out) != 0)
        return err_set(ERR_INVALID, "%s=\"%s\" is not a boolean", name, v);
    return 0;
}

static char *b64(const unsigned char *in, size_t n) {
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    if (o) EVP_EncodeBlock((unsigned char *)o, in, (int)n);
    return o;
}

/* Loads the provider's credentials into c; *path gets the file to watch (owned, NULL = env). */
static int load_creds(const StoreConfig *cfg, const char *prov, S3Creds *c, char **path) {
    *path = NULL;
    memset(c, 0, sizeof *c);
    if (strcmp(prov, "ECS") == 0) {
        c->endpoint = dup_env("ECS_ENDPOINT");
        c->access_key = dup_env("ECS_ACCESS_KEY_ID");
        c->secret_key = dup_env("ECS_SECRET_ACCESS_KEY");
        c->region = strdup("US-Standard");
        int rc = env_bool("ECS_DISABLE_SSL", &c->disable_ssl);
        if (rc == 0) rc = env_bool("ECS_INSECURE_SKIP_VERIFY", &c->insecure_skip_verify);
        if (rc == 0 && (!c->endpoint || !c->access_key || !c->secret_key))
            rc = err_set(ERR_INVALID, "ECS: ECS_ENDPOINT, ECS_ACCESS_KEY_ID and "
                                      "ECS_SECRET_ACCESS_KEY must be set");
        return rc;
    }
    const char *json_env = strcmp(prov, "OCS") == 0 ? "OPENSHIFT_APPLICATION_CREDENTIALS_JSON"
                                                    : "AWS_APPLICATION_CREDENTIALS_JSON";
    const char *dir_env = strcmp(prov, "OCS") == 0 ? "OPENSHIFT_APPLICATION_CREDENTIALS"
                                                   : "AWS_APPLICATION_CREDENTIALS";
    const char *ep = store_env_prefix(cfg);
    const char *p = cfg->credentials && cfg->credentials[0] ? cfg->credentials : NULL;
    if (!p) p = store_env(cfg, json_env);
    if (!p) p = store_env(cfg, dir_env);
    if (p) {
        int rc = s3_creds_read(p, c);
        if (rc != 0) return rc;
        if (c->role_arn && strcmp(prov, "S3") == 0) {
            if (!c->token_path || !c->token_path[0])
                return err_set(ERR_INVALID, "S3 credentials %s: roleARN needs tokenPath", p);
            return 0; /* keys come from STS; the file is not watched */
        }
        if (!c->access_key || !c->secret_key)
            return err_set(ERR_INVALID,
                           "%s credentials %s: accessKeyID and secretAccessKey are "
                           "required",
                           prov, p);
        if (strcmp(prov, "OCS") == 0 && (!c->endpoint || !c->region))
            return err_set(ERR_INVALID, "OCS credentials %s: endpoint and region are required", p);
        *path = strdup(p);
        if (!*path) return err_set(ERR_NOMEM, "%s: out of memory", prov);
        return 0;
    }
    if (strcmp(prov, "OCS") == 0)
        return err_set(ERR_INVALID,
                       "OCS: set %sOPENSHIFT_APPLICATION_CREDENTIALS_JSON (a JSON file) "
                       "or %sOPENSHIFT_APPLICATION_CREDENTIALS (a directory)",
                       ep, ep);
    /* the AWS SDK's environment: the part of its default chain we implement. Read with the
     * prefix first; the Go tool's SDK reads it unprefixed for every store, so a prefixed store
     * with no prefixed SDK credentials falls back to them (an instance role or IRSA serves the
     * secondary store too) */
    sdk_env_creds(ep, c);
    int have = (c->access_key && c->secret_key) || (c->role_arn && c->token_path);
    if (!have && ep[0]) {
        s3_creds_clear(c);
        sdk_env_creds("", c);
        have = (c->access_key && c->secret_key) || (c->role_arn && c->token_path);
    }
    if (c->access_key && c->secret_key) {
        free(c->role_arn);
        free(c->token_path);
        c->role_arn = c->token_path = NULL;
    }
    if (!have)
        return err_set(ERR_INVALID,
                       "S3: no credentials: set %1$sAWS_APPLICATION_CREDENTIALS_JSON (a JSON "
                       "file), %1$sAWS_APPLICATION_CREDENTIALS (a directory) or "
                       "%1$sAWS_ACCESS_KEY_ID and %1$sAWS_SECRET_ACCESS_KEY",
                       ep);
    return 0;
}

/* Web identity (roleARN + token file): the STS endpoint (AWS_ENDPOINT_URL_STS, the SDKs'
 * variable, or the regional one) and the session name; takes role_arn and token_path from c. */
static int take_web_identity(S3Driver *d, S3Creds *c, const char *region, const char *prov) {
    const char *sts = getenv("AWS_ENDPOINT_URL_STS");
    const char *sn = getenv("AWS_ROLE_SESSION_NAME");
    char def[160];
    snprintf(def, sizeof def, "https://sts.%s.amazonaws.com/", region);
    d->role_arn = c->role_arn;
    d->token_path = c->token_path;
    c->role_arn = c->token_path = NULL;
    d->sts_url = strdup(sts && sts[0] ? sts : def);
    if (sn && sn[0]) {
        d->session_name = strdup(sn);
    } else if (asprintf(&d->session_name, "etcdbrctl-%lld", (long long)now_unix_s()) < 0) {
        d->session_name = NULL;
    }
    if (!d->sts_url || !d->session_name) return err_set(ERR_NOMEM, "%s: out of memory", prov);
    return 0;
}

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
    int rc = load_creds(cfg, prov, &c, &cred_path);
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
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->sts_mu, NULL);
    d->provider = strdup(prov);
    d->bucket = strdup(bucket);
    d->region = strdup(region);
    d->part_min = cfg->min_chunk_size > 0 ? cfg->min_chunk_size : (int64_t)5 << 20;
    d->parallel = cfg->max_parallel_chunk_uploads > 0 ? cfg->max_parallel_chunk_uploads : 5;
    d->list_page = 1000;
    d->mpu = (ObjHttpMpuOps){.what = d->provider,
                             .max_parts = S3_MAX_PARTS,
                             .send = s3_mpu_send,
                             .parse_upload_id = s3_parse_upload_id,
                             .part_size = s3_mpu_part_size};
    const char *ps = getenv("ETCDBR_S3_LIST_PAGE_SIZE");
    if (ps && ps[0]) {
        int v = atoi(ps);
        if (v < 1 || v > 1000) {
            rc = err_set(ERR_INVALID, "ETCDBR_S3_LIST_PAGE_SIZE=%s: not in 1..1000", ps);
            goto done;
        }
        d->list_page = v;
    }
    if (c.role_arn && (rc = take_web_identity(d, &c, region, prov))) goto done;
    if (d->role_arn) {
        free(cred_path); /* web identity: the token file is read at each exchange */
        cred_path = NULL;
    }
    d->access_key = c.access_key;
    d->secret_key = c.secret_key;
    d->session_token = c.session_token;
    c.access_key = c.secret_key = c.session_token = NULL;
    d->cred_path = cred_path;
    cred_path = NULL;
    if (d->cred_path) d->cred_mtime = s3_creds_mtime(d->cred_path);

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
    *out = &d->base;
    d = NULL;
done:
    s3_free(d ? &d->base : NULL);
    free(cred_path);
    s3_creds_clear(&c);
    return rc;
}
