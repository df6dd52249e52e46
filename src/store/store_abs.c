/* store_abs: the Azure Blob Storage driver. Objects are block blobs in one container; writes stage
 * blocks of min_chunk_size bytes (Put Block, up to max_parallel_chunk_uploads in flight, so memory
 * is bounded by the blocks in flight) and become visible only with Put Block List, sent with
 * If-None-Match: * so a commit never replaces a blob (a small object is one conditional Put Blob).
 * Every request goes through objhttp (retries, streaming, redacted errors); SharedKey signing is
 * its per-attempt auth hook. Credentials are re-read when their files change. Keys, signatures
 * and SAS tokens never reach messages or logs. */
#include "store_abs.h"
#include "../codec/base64.h"
#include "../common/err.h"
#include "../common/strbuf.h"
#include "../common/log.h"
#include "objhttp.h"

#include <dirent.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define ABS_DEFAULT_DOMAIN "blob.core.windows.net"
#define ABS_DEFAULT_BLOCK (5 * 1024 * 1024)
#define ABS_DEFAULT_PARALLEL 5
#define ABS_MAX_KEY 1024
#define ABS_LIST_MAX_BODY (16u << 20) /* a page of 5,000 blobs is about 5 MiB */

/* ---- credentials ---- */

void abs_creds_clear(AbsCreds *c) {
    if (!c) return;
    free(c->account);
    if (c->key) OPENSSL_cleanse(c->key, c->key_len);
    free(c->key);
    free(c->domain);
    objhttp_free_secret(c->sas);
    free(c->blob_endpoint);
    memset(c, 0, sizeof *c);
}

/* Decodes base64 text, skipping line breaks and blanks as Go's decoder does; *out owned (also
 * holds a secret). ERR_INVALID (empty or not base64) or ERR_NOMEM. */
static int b64_decode_owned(const char *in, unsigned char **out, size_t *out_len) {
    size_t n = strlen(in), want;
    const unsigned flags = B64_PAD_REQUIRED | B64_SKIP_BLANKS;
    if (b64_decoded_len(in, n, flags, &want, NULL) || want == 0) return ERR_INVALID;
    unsigned char *buf = malloc(want);
    if (!buf) return ERR_NOMEM;
    if (b64_decode(in, n, flags, buf, want, out_len, NULL)) {
        free(buf);
        return ERR_INVALID;
    }
    *out = buf;
    return 0;
}

/* Takes ownership of the field values (each may be NULL) and validates them into out. */
static int creds_fill(AbsCreds *out, char *account, char *key, char *domain, char *sas,
                      const char *where) {
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!account || !account[0]) {
        rc = err_set(ERR_INVALID, "ABS credentials %s: storageAccount is missing", where);
        goto done;
    }
    if (key && key[0]) {
        rc = b64_decode_owned(key, &out->key, &out->key_len);
        if (rc == ERR_INVALID)
            rc = err_set(ERR_INVALID, "ABS credentials %s: storageKey is not valid base64", where);
        else if (rc)
            rc = err_set(rc, "ABS credentials: out of memory");
        if (rc) goto done;
    }
    out->account = account;
    account = NULL;
    if (domain && domain[0]) {
        out->domain = domain;
        domain = NULL;
    } else {
        out->domain = strdup(ABS_DEFAULT_DOMAIN);
    }
    if (sas && sas[0]) {
        out->sas = strdup(sas[0] == '?' ? sas + 1 : sas);
        if (!out->sas) rc = err_set(ERR_NOMEM, "ABS credentials: out of memory");
    }
    if (!out->domain) rc = err_set(ERR_NOMEM, "ABS credentials: out of memory");
done:
    free(account);
    objhttp_free_secret(key);
    free(domain);
    objhttp_free_secret(sas);
    if (rc) abs_creds_clear(out);
    return rc;
}

static char *json_field(json_t *root, const char *name) {
    const char *v = json_string_value(json_object_get(root, name));
    return v ? strdup(v) : NULL;
}

static int creds_load_json(const char *path, AbsCreds *out) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return err_set(ERR_INVALID, "ABS credentials %s: not a JSON object (line %d)", path,
                       je.line);
    }
    int rc = creds_fill(out, json_field(root, "storageAccount"), json_field(root, "storageKey"),
                        json_field(root, "domain"), json_field(root, "sasToken"), path);
    /* jansson keeps its own copy of the key; wipe it before the object goes */
    json_t *k = json_object_get(root, "storageKey");
    if (json_is_string(k)) {
        char *ks = (char *)json_string_value(k);
        OPENSSL_cleanse(ks, strlen(ks));
    }
    json_decref(root);
    return rc;
}

/* The whole file as a string (verbatim), NULL if it does not exist or cannot be read. */
static char *dir_field(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return objhttp_read_small_file(p);
}

int abs_creds_load(const char *path, AbsCreds *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (!path || !path[0]) return err_set(ERR_INVALID, "ABS credentials: no path");
    if (stat(path, &st) != 0)
        return err_set(ERR_NOT_FOUND, "ABS credentials %s: does not exist", path);
    if (!S_ISDIR(st.st_mode)) return creds_load_json(path, out);
    char *js = objhttp_dir_first_json(path);
    if (js) {
        int rc = creds_load_json(js, out);
        free(js);
        return rc;
    }
    return creds_fill(out, dir_field(path, "storageAccount"), dir_field(path, "storageKey"),
                      dir_field(path, "domain"), dir_field(path, "sasToken"), path);
}

int abs_creds_from_connection_string(const char *cs, AbsCreds *out) {
    memset(out, 0, sizeof *out);
    char *account = NULL, *key = NULL, *sas = NULL, *endpoint = NULL, *suffix = NULL;
    const char *p = cs;
    while (p && *p) {
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (eq) {
            size_t nl = (size_t)(eq - p);
            char *v = strndup(eq + 1, len - nl - 1);
            char **slot = NULL;
            if (nl == 11 && strncasecmp(p, "AccountName", nl) == 0) slot = &account;
            if (nl == 10 && strncasecmp(p, "AccountKey", nl) == 0) slot = &key;
            if (nl == 12 && strncasecmp(p, "BlobEndpoint", nl) == 0) slot = &endpoint;
            if (nl == 14 && strncasecmp(p, "EndpointSuffix", nl) == 0) slot = &suffix;
            if (nl == 21 && strncasecmp(p, "SharedAccessSignature", nl) == 0) slot = &sas;
            if (slot) {
                objhttp_free_secret(*slot);
                *slot = v;
            } else {
                objhttp_free_secret(v);
            }
        }
        p = e ? e + 1 : NULL;
    }
    char *dom = NULL;
    if (suffix && suffix[0]) {
        size_t n = strlen(suffix) + 6;
        dom = malloc(n);
        if (dom) snprintf(dom, n, "blob.%s", suffix);
    }
    free(suffix);
    int rc = creds_fill(out, account, key, dom, sas, "(connection string)");
    if (rc == 0 && endpoint && endpoint[0]) {
        size_t l = strlen(endpoint);
        while (l > 0 && endpoint[l - 1] == '/')
            endpoint[--l] = '\0';
        out->blob_endpoint = endpoint;
        endpoint = NULL;
    }
    free(endpoint);
    return rc;
}

/* ---- signing ---- */

static int hdr_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The value of header name among "Name: value" lines (trimmed, borrowed up to *len), NULL. */
static const char *hdr_find(const char *const *h, size_t n, const char *name, size_t *len) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++) {
        if (strncasecmp(h[i], name, nl) != 0 || h[i][nl] != ':') continue;
        const char *v = h[i] + nl + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t l = strlen(v);
        while (l > 0 && (v[l - 1] == ' ' || v[l - 1] == '\t'))
            l--;
        *len = l;
        return v;
    }
    return NULL;
}

static char *lower_dup(const char *s, size_t n) {
    char *o = malloc(n + 1);
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++)
        o[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    o[n] = '\0';
    return o;
}

char *abs_string_to_sign(const char *method, uint64_t content_length, const char *const *headers,
                         size_t n_headers, const char *account, const char *path,
                         const char *const *qnames, const char *const *qvalues, size_t nq) {
    static const char *const std_headers[] = {"Content-Encoding",
                                              "Content-Language",
                                              NULL /* Content-Length */,
                                              "Content-MD5",
                                              "Content-Type",
                                              "Date",
                                              "If-Modified-Since",
                                              "If-Match",
                                              "If-None-Match",
                                              "If-Unmodified-Since",
                                              "Range"};
    StrBuf b = {0};
    char **xms = calloc(n_headers + 1, sizeof *xms);
    char **qs = calloc(nq + 1, sizeof *qs);
    size_t nx = 0;
    if (!xms || !qs) goto fail;
    strbuf_str(&b, method);
    strbuf_str(&b, "\n");
    for (size_t i = 0; i < sizeof std_headers / sizeof std_headers[0]; i++) {
        if (!std_headers[i]) {
            if (content_length > 0) {
                char n[32];
                snprintf(n, sizeof n, "%llu", (unsigned long long)content_length);
                strbuf_str(&b, n);
            }
        } else {
            size_t l;
            const char *v = hdr_find(headers, n_headers, std_headers[i], &l);
            if (v) strbuf_add(&b, v, l);
        }
        strbuf_str(&b, "\n");
    }
    /* canonicalized headers: x-ms-*, names lower-cased, sorted, "name:value\n" */
    for (size_t i = 0; i < n_headers; i++) {
        const char *colon = strchr(headers[i], ':');
        if (!colon || strncasecmp(headers[i], "x-ms-", 5) != 0) continue;
        size_t nl = (size_t)(colon - headers[i]);
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t vl = strlen(v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        char *name = lower_dup(headers[i], nl);
        if (!name) goto fail;
        size_t n = nl + vl + 2;
        xms[nx] = malloc(n);
        if (!xms[nx]) {
            free(name);
            goto fail;
        }
        snprintf(xms[nx], n, "%s:%.*s", name, (int)vl, v);
        free(name);
        nx++;
    }
    qsort(xms, nx, sizeof *xms, hdr_cmp);
    for (size_t i = 0; i < nx; i++) {
        strbuf_str(&b, xms[i]);
        strbuf_str(&b, "\n");
    }
    /* canonicalized resource: /account/path, then "\nname:value" sorted by lower-cased name */
    strbuf_str(&b, "/");
    strbuf_str(&b, account);
    strbuf_str(&b, path);
    for (size_t i = 0; i < nq; i++) {
        char *name = lower_dup(qnames[i], strlen(qnames[i]));
        if (!name) goto fail;
        const char *v = qvalues[i] ? qvalues[i] : "";
        size_t n = strlen(name) + strlen(v) + 2;
        qs[i] = malloc(n);
        if (!qs[i]) {
            free(name);
            goto fail;
        }
        snprintf(qs[i], n, "%s:%s", name, v);
        free(name);
    }
    qsort(qs, nq, sizeof *qs, hdr_cmp);
    for (size_t i = 0; i < nq; i++) {
        strbuf_str(&b, "\n");
        strbuf_str(&b, qs[i]);
    }
    for (size_t i = 0; i < nx; i++)
        free(xms[i]);
    for (size_t i = 0; i < nq; i++)
        free(qs[i]);
    free(xms);
    free(qs);
    if (b.oom) {
        free(b.d);
        return NULL;
    }
    return b.d;
fail:
    if (xms)
        for (size_t i = 0; i < nx; i++)
            free(xms[i]);
    if (qs)
        for (size_t i = 0; i < nq; i++)
            free(qs[i]);
    free(xms);
    free(qs);
    free(b.d);
    return NULL;
}

int abs_sign(const unsigned char *key, size_t key_len, const char *sts, char *out, size_t cap) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    if (cap < 45 ||
        !HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)sts, strlen(sts), mac, &ml))
        return err_set(ERR_INVALID, "ABS: signing failed");
    EVP_EncodeBlock((unsigned char *)out, mac, (int)ml);
    OPENSSL_cleanse(mac, sizeof mac);
    return 0;
}

void abs_block_id(int n, char out[24]) {
    char raw[16];
    snprintf(raw, sizeof raw, "%010d", n);
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)raw, 10);
}

/* ---- listing XML ---- */

static const char *find_str(const char *p, const char *end, const char *s) {
    size_t l = strlen(s);
    for (; p && p + l <= end; p++) {
        p = memchr(p, s[0], (size_t)(end - p));
        if (!p || p + l > end) return NULL;
        if (memcmp(p, s, l) == 0) return p;
    }
    return NULL;
}

/* The element <tag ...>text</tag> first found in [p, end): text span and whether its opening
 * tag says Encoded="true". 1 found (empty element "<tag/>" gives an empty span), 0 absent,
 * -1 malformed. */
static int element(const char *p, const char *end, const char *tag, const char **ts, size_t *tl,
                   int *encoded, const char **after) {
    const char *o = objhttp_xml_open(p, end, tag);
    if (!o) return 0;
    const char *gt = memchr(o, '>', (size_t)(end - o));
    if (!gt) return -1;
    if (encoded) *encoded = find_str(o, gt, "Encoded=\"true\"") != NULL;
    if (gt[-1] == '/') {
        *ts = gt + 1;
        *tl = 0;
        if (after) *after = gt + 1;
        return 1;
    }
    char close[64];
    snprintf(close, sizeof close, "</%s>", tag);
    const char *c = find_str(gt + 1, end, close);
    if (!c) return -1;
    *ts = gt + 1;
    *tl = (size_t)(c - *ts);
    if (after) *after = c + strlen(close);
    return 1;
}

int abs_parse_list(const char *xml, size_t len, StoreDriverListCb cb, void *ctx,
                   char **next_marker) {
    *next_marker = NULL;
    const char *end = xml + len, *p = xml;
    if (!objhttp_xml_open(xml, end, "EnumerationResults"))
        return err_set(ERR_CORRUPT, "ABS list: not an EnumerationResults document");
    const char *blobs_end = end;
    const char *bs = objhttp_xml_open(xml, end, "Blobs");
    if (bs) {
        const char *be = find_str(bs, end, "</Blobs>");
        if (be) blobs_end = be;
        p = bs;
    }
    for (;;) {
        const char *b = objhttp_xml_open(p, blobs_end, "Blob");
        if (!b) break;
        const char *be = find_str(b, blobs_end, "</Blob>");
        if (!be) return err_set(ERR_CORRUPT, "ABS list: unterminated <Blob>");
        const char *ts;
        size_t tl;
        int enc = 0;
        if (element(b, be, "Name", &ts, &tl, &enc, NULL) != 1)
            return err_set(ERR_CORRUPT, "ABS list: <Blob> without <Name>");
        char *name = objhttp_xml_text_pct(ts, tl, enc);
        if (!name) return err_set(ERR_CORRUPT, "ABS list: bad name (entity or memory)");
        int64_t size = -1;
        if (element(b, be, "Content-Length", &ts, &tl, NULL, NULL) == 1 && tl > 0 && tl < 20) {
            char num[24];
            memcpy(num, ts, tl);
            num[tl] = '\0';
            char *ep;
            long long v = strtoll(num, &ep, 10);
            if (*ep == '\0' && v >= 0) size = v;
        }
        int rc = cb(ctx, name, size);
        free(name);
        if (rc) return rc;
        p = be + 7;
    }
    const char *ts;
    size_t tl;
    /* NextMarker follows </Blobs> */
    int r = element(blobs_end, end, "NextMarker", &ts, &tl, NULL, NULL);
    if (r < 0) return err_set(ERR_CORRUPT, "ABS list: malformed <NextMarker>");
    if (r == 1 && tl > 0) {
        *next_marker = objhttp_xml_text(ts, tl);
        if (!*next_marker) return err_set(ERR_CORRUPT, "ABS list: bad NextMarker");
    }
    return 0;
}

/* ---- the driver ---- */

enum CredSource { CRED_FILE, CRED_CONNSTR };

typedef struct AbsDriver {
    StoreDriver base;
    ObjHttp *http;
    char *container;
    char *endpoint; /* override: scheme://host[:port][/path], no trailing '/'; NULL = Azure */
    char *describe;
    int64_t block_size;
    int parallel;
    int list_page;      /* maxresults; 0 = the service's default (5000) */
    pthread_mutex_t mu; /* guards creds and the stamp */
    AbsCreds creds;
    enum CredSource source;
    char *cred_path; /* file or directory the credentials came from */
    char *env_sas;   /* $AZURE_STORAGE_SAS_TOKEN */
    char stamp[256]; /* mtimes of what was read, to notice rotation */
} AbsDriver;

/* Per-request copy of what signing and the URL need (account, key, SAS, URL base). */
typedef struct ReqCreds {
    char account[256];
    unsigned char key[128];
    size_t key_len;
    char *sas;
    char base[1024];     /* scheme://host[:port][/path] */
    size_t base_pathoff; /* where the path of base starts (its length if none) */
} ReqCreds;

static void req_creds_clear(ReqCreds *r) {
    objhttp_free_secret(r->sas);
    OPENSSL_cleanse(r, sizeof *r);
}

static int get_creds(AbsDriver *d, ReqCreds *r) {
    memset(r, 0, sizeof *r);
    int rc = 0;
    pthread_mutex_lock(&d->mu);
    if (d->source == CRED_FILE) {
        char st[256];
        objhttp_creds_stamp(d->cred_path, st, sizeof st);
        if (strcmp(st, d->stamp) != 0) {
            AbsCreds nc;
            if (abs_creds_load(d->cred_path, &nc) == 0) {
                abs_creds_clear(&d->creds);
                d->creds = nc;
                snprintf(d->stamp, sizeof d->stamp, "%s", st);
                log_info("ABS: credentials re-read from %s (changed)", d->cred_path);
            } else {
                log_warn("ABS: credentials %s changed but cannot be read (%s); keeping the "
                         "previous ones",
                         d->cred_path, err_msg());
            }
        }
    }
    const AbsCreds *c = &d->creds;
    if (strlen(c->account) >= sizeof r->account || c->key_len > sizeof r->key) {
        rc = err_set(ERR_INVALID, "ABS: storage account name or key too long");
        goto done;
    }
    snprintf(r->account, sizeof r->account, "%s", c->account);
    if (c->key) memcpy(r->key, c->key, c->key_len);
    r->key_len = c->key_len;
    const char *sas = c->sas ? c->sas : d->env_sas;
    if (!c->key && sas) {
        r->sas = strdup(sas);
        if (!r->sas) rc = err_set(ERR_NOMEM, "ABS: out of memory");
    }
    const char *ep = d->endpoint ? d->endpoint : c->blob_endpoint;
    int n;
    if (ep) {
        const char *hs = strstr(ep, "://");
        const char *path = hs ? strchr(hs + 3, '/') : NULL;
        if (path && path[1]) /* the account's blob endpoint already: use as is */
            n = snprintf(r->base, sizeof r->base, "%s", ep);
        else /* scheme://host[:port]: path-style, the account comes first */
            n = snprintf(r->base, sizeof r->base, "%.*s/%s",
                         (int)(path ? (size_t)(path - ep) : strlen(ep)), ep, c->account);
        hs = strstr(r->base, "://");
        path = strchr(hs + 3, '/');
        r->base_pathoff = (size_t)(path - r->base);
    } else {
        n = snprintf(r->base, sizeof r->base, "https://%s.%s", c->account, c->domain);
        r->base_pathoff = (size_t)n;
    }
    if (n < 0 || (size_t)n >= sizeof r->base) rc = err_set(ERR_INVALID, "ABS: endpoint too long");
done:
    pthread_mutex_unlock(&d->mu);
    if (rc) req_creds_clear(r);
    return rc;
}

typedef struct SignCtx {
    const ReqCreds *rc;
    const char *method;
    const char *path; /* percent-encoded URL path */
    const char *const *qn;
    const char *const *qv;
    size_t nq;
    const char *const *headers;
    size_t nh;
    uint64_t content_length;
} SignCtx;

static int sign_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    SignCtx *s = ctx;
    if (!s->rc->key_len) return 0; /* SAS in the URL */
    char date[64], date_h[80];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(date_h, sizeof date_h, "x-ms-date: %s", date);
    const char **all = calloc(s->nh + 1, sizeof *all);
    if (!all) return err_set(ERR_NOMEM, "ABS: out of memory");
    for (size_t i = 0; i < s->nh; i++)
        all[i] = s->headers[i];
    all[s->nh] = date_h;
    char *sts = abs_string_to_sign(s->method, s->content_length, all, s->nh + 1, s->rc->account,
                                   s->path, s->qn, s->qv, s->nq);
    free(all);
    if (!sts) return err_set(ERR_NOMEM, "ABS: out of memory");
    char sig[64], auth[512];
    int rc = abs_sign(s->rc->key, s->rc->key_len, sts, sig, sizeof sig);
    free(sts);
    if (rc) return rc;
    snprintf(auth, sizeof auth, "Authorization: SharedKey %s:%s", s->rc->account, sig);
    struct curl_slist *t = curl_slist_append(*headers, date_h);
    if (t) {
        *headers = t;
        t = curl_slist_append(*headers, auth);
    }
    if (t) *headers = t;
    OPENSSL_cleanse(sig, sizeof sig);
    OPENSSL_cleanse(auth, sizeof auth);
    return t ? 0 : err_set(ERR_NOMEM, "ABS: out of memory");
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

static int abs_do(AbsDriver *d, const AbsCall *c, ObjHttpResponse *resp, ObjHttpStream **stream) {
    ReqCreds rcs;
    int rc = get_creds(d, &rcs);
    if (rc) return rc;
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
    size_t n = strlen(rcs.base) + strlen(d->container) + (ekey ? strlen(ekey) : 0) + strlen(query) +
               (rcs.sas ? strlen(rcs.sas) : 0) + 8;
    url = malloc(n);
    if (!url) goto nomem;
    snprintf(url, n, "%s/%s%s%s%s%s%s%s", rcs.base, d->container, ekey ? "/" : "", ekey ? ekey : "",
             query[0] || rcs.sas ? "?" : "", query, query[0] && rcs.sas ? "&" : "",
             rcs.sas ? rcs.sas : "");
    const char *q = strchr(url + rcs.base_pathoff, '?');
    size_t pl = q ? (size_t)(q - (url + rcs.base_pathoff)) : strlen(url + rcs.base_pathoff);
    path = strndup(url + rcs.base_pathoff, pl);
    if (!path) goto nomem;
    SignCtx sc = {&rcs, c->method, path, c->qn, c->qv, c->nq, hdrs, c->nh + 1, c->body_len};
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
        rc = objhttp_stream_open(d->http, &req, resp, stream);
    else
        rc = objhttp_do(d->http, &req, resp);
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
    req_creds_clear(&rcs);
    return rc;
}

static const char *resp_code(const ObjHttpResponse *r, char *buf, size_t cap) {
    const char *v = objhttp_response_header(r, "x-ms-error-code", buf, cap);
    return v ? v : "";
}

/* Adds a hint to a 403 message: the account or key is wrong (the signature is not shown). */
static int explain(int rc, const ObjHttpResponse *r, const AbsDriver *d) {
    if (rc != 0 && r->status == 403)
        return err_wrap(rc,
                        "ABS container %s: access denied (HTTP 403): check storageAccount, "
                        "storageKey or the SAS token",
                        d->container);
    return rc;
}

static int key_ok(const char *key, const char *op) {
    return objhttp_key_ok("ABS", op, key, ABS_MAX_KEY, 0);
}

/* list */

static int abs_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    AbsDriver *d = (AbsDriver *)drv;
    char *marker = NULL;
    int rc = 0;
    char page[16];
    snprintf(page, sizeof page, "%d", d->list_page);
    ObjHttpListing lg;
    objhttp_listing_begin(&lg, "ABS", d->container, key_prefix);
    do {
        rc = objhttp_listing_page(&lg, marker);
        if (rc != 0) break;
        const char *qn[5] = {"restype", "comp", "prefix"};
        const char *qv[5] = {"container", "list", key_prefix};
        size_t nq = 3;
        if (d->list_page > 0) {
            qn[nq] = "maxresults";
            qv[nq++] = page;
        }
        if (marker) {
            qn[nq] = "marker";
            qv[nq++] = marker;
        }
        AbsCall c = {.method = "GET", .qn = qn, .qv = qv, .nq = nq, .max_body = ABS_LIST_MAX_BODY};
        ObjHttpResponse r = {0};
        rc = explain(abs_do(d, &c, &r, NULL), &r, d);
        char *next = NULL;
        if (rc == 0) rc = abs_parse_list(r.body, r.body_len, cb, ctx, &next);
        objhttp_response_clear(&r);
        free(marker);
        marker = next;
    } while (rc == 0 && marker);
    objhttp_listing_end(&lg);
    free(marker);
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_IO, "ABS list: container %s does not exist", d->container);
    return rc;
}

/* read */

typedef struct AbsReader {
    ObjHttpResumable r; /* first: key, offset, stream, resumes */
    AbsDriver *d;
    /* of the first response: a resumed read must see the same blob */
    char etag[OBJHTTP_ETAG_MAX + 1];
} AbsReader;

/* Opens the stream at r->offset (If-Match the first ETag when resuming). */
static int reader_open(ObjHttpResumable *res) {
    AbsReader *a = (AbsReader *)res;
    char range[64], match[OBJHTTP_ETAG_MAX + 16];
    const char *h[2] = {range, match};
    snprintf(range, sizeof range, "x-ms-range: bytes=%llu-", (unsigned long long)res->offset);
    snprintf(match, sizeof match, "If-Match: %s", a->etag);
    AbsCall c = {.method = "GET",
                 .key = res->key,
                 .headers = res->offset > 0 ? h : NULL,
                 .nh = res->offset > 0 ? (a->etag[0] ? 2 : 1) : 0};
    ObjHttpResponse r = {0};
    int rc = abs_do(a->d, &c, &r, &res->s);
    if (rc != 0 && res->offset > 0 && r.status == 416) {
        /* at or past the end: an empty stream, if the blob exists */
        int64_t size;
        rc = a->d->base.vt->stat(&a->d->base, res->key, &size);
        res->s = NULL;
    } else {
        rc = explain(rc, &r, a->d);
        if (rc == ERR_NOT_FOUND) rc = err_set(ERR_NOT_FOUND, "ABS read %s: not found", res->key);
    }
    if (rc == 0 && !a->etag[0])
        rc = objhttp_resumable_pin(res, &r, "ETag", a->etag, sizeof a->etag);
    objhttp_response_clear(&r);
    return rc;
}

static int abs_open_read(StoreDriver *drv, const char *key, uint64_t offset, IoReader **out) {
    *out = NULL;
    int rc = key_ok(key, "read");
    if (rc) return rc;
    AbsReader *a = calloc(1, sizeof *a);
    if (!a) return err_set(ERR_NOMEM, "ABS read: out of memory");
    a->d = (AbsDriver *)drv;
    return objhttp_resumable_start(&a->r, "ABS", key, offset, reader_open, NULL, out);
}

/* stat, remove */

static int abs_stat(StoreDriver *drv, const char *key, int64_t *size) {
    AbsDriver *d = (AbsDriver *)drv;
    int rc = key_ok(key, "stat");
    if (rc) return rc;
    AbsCall c = {.method = "HEAD", .key = key};
    ObjHttpResponse r = {0};
    rc = explain(abs_do(d, &c, &r, NULL), &r, d);
    if (rc == 0) {
        char v[32];
        char *ep = NULL;
        if (objhttp_response_header(&r, "Content-Length", v, sizeof v)) *size = strtoll(v, &ep, 10);
        if (!ep || *ep) rc = err_set(ERR_IO, "ABS stat %s: no Content-Length in the response", key);
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "ABS stat %s: not found", key);
    }
    objhttp_response_clear(&r);
    return rc;
}

static int abs_remove(StoreDriver *drv, const char *key) {
    AbsDriver *d = (AbsDriver *)drv;
    int rc = key_ok(key, "remove");
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
    return (size_t)((AbsWriter *)ctx)->d->block_size;
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
    int st = abs_stat(&w->d->base, w->key, &size);
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
    int rc = key_ok(key, "write");
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
                                  .parallel = d->parallel,
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

static const char *abs_describe(const StoreDriver *drv) {
    return ((const AbsDriver *)drv)->describe;
}

static void abs_free(StoreDriver *drv) {
    AbsDriver *d = (AbsDriver *)drv;
    if (!d) return;
    objhttp_free(d->http);
    abs_creds_clear(&d->creds);
    pthread_mutex_destroy(&d->mu);
    free(d->container);
    free(d->endpoint);
    free(d->describe);
    free(d->cred_path);
    objhttp_free_secret(d->env_sas);
    free(d);
}

static const StoreDriverVt abs_vt = {
    .name = "ABS",
    .features = STORE_FEAT_THREAD_SAFE | STORE_FEAT_NO_REPLACE,
    .list = abs_list,
    .open_read = abs_open_read,
    .open_write = abs_open_write,
    .remove = abs_remove,
    .stat = abs_stat,
    .remove_dir = NULL,
    .describe = abs_describe,
    .free = abs_free,
};

int store_abs_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    const char *container =
        cfg->container && cfg->container[0] ? cfg->container : store_env(cfg, "STORAGE_CONTAINER");
    if (!container)
        return err_set(ERR_INVALID, "ABS: no container (--store-container or %sSTORAGE_CONTAINER)",
                       store_env_prefix(cfg));
    AbsDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "ABS: out of memory");
    d->base.vt = &abs_vt;
    pthread_mutex_init(&d->mu, NULL);
    int rc = 0;
    d->container = strdup(container);
    d->block_size = cfg->min_chunk_size > 0 ? cfg->min_chunk_size : ABS_DEFAULT_BLOCK;
    d->parallel = cfg->max_parallel_chunk_uploads > 0 ? cfg->max_parallel_chunk_uploads
                                                      : ABS_DEFAULT_PARALLEL;
    const char *pg = objhttp_env("ETCDBR_ABS_LIST_PAGE_SIZE");
    if (pg) {
        d->list_page = atoi(pg);
        if (d->list_page < 1 || d->list_page > 5000) {
            rc = err_set(ERR_INVALID, "ETCDBR_ABS_LIST_PAGE_SIZE=%s: must be 1 to 5000", pg);
            goto done;
        }
    }
    if (cfg->endpoint_override && cfg->endpoint_override[0]) {
        const char *e = cfg->endpoint_override;
        if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0) {
            rc = err_set(ERR_INVALID,
                         "ABS: endpoint override \"%s\" must start with http:// or "
                         "https://",
                         e);
            goto done;
        }
        d->endpoint = strdup(e);
        if (d->endpoint) {
            size_t l = strlen(d->endpoint);
            while (l > 0 && d->endpoint[l - 1] == '/')
                d->endpoint[--l] = '\0';
        }
    }
    const char *sas = store_env(cfg, "AZURE_STORAGE_SAS_TOKEN");
    if (sas) d->env_sas = strdup(sas[0] == '?' ? sas + 1 : sas);
    if (!d->container || (cfg->endpoint_override && cfg->endpoint_override[0] && !d->endpoint) ||
        (sas && !d->env_sas)) {
        rc = err_set(ERR_NOMEM, "ABS: out of memory");
        goto done;
    }
    const char *path = cfg->credentials && cfg->credentials[0] ? cfg->credentials : NULL;
    if (!path) path = store_env(cfg, "AZURE_APPLICATION_CREDENTIALS_JSON");
    if (!path) path = store_env(cfg, "AZURE_APPLICATION_CREDENTIALS");
    const char *cs = store_env(cfg, "AZURE_STORAGE_CONNECTION_STRING");
    if (path) {
        d->source = CRED_FILE;
        d->cred_path = strdup(path);
        if (!d->cred_path) {
            rc = err_set(ERR_NOMEM, "ABS: out of memory");
            goto done;
        }
        objhttp_creds_stamp(path, d->stamp, sizeof d->stamp);
        rc = abs_creds_load(path, &d->creds);
        if (rc == ERR_NOT_FOUND) rc = ERR_INVALID;
    } else if (cs) {
        d->source = CRED_CONNSTR;
        rc = abs_creds_from_connection_string(cs, &d->creds);
    } else {
        const char *ep = store_env_prefix(cfg);
        rc = err_set(ERR_INVALID,
                     "ABS: no credentials: set %sAZURE_APPLICATION_CREDENTIALS_JSON, "
                     "%sAZURE_APPLICATION_CREDENTIALS or %sAZURE_STORAGE_CONNECTION_STRING",
                     ep, ep, ep);
    }
    if (rc) goto done;
    if (!d->creds.key && !d->creds.sas && !d->env_sas) {
        rc = err_set(ERR_INVALID,
                     "ABS: the credentials have neither storageKey nor sasToken, "
                     "and %sAZURE_STORAGE_SAS_TOKEN is not set",
                     store_env_prefix(cfg));
        goto done;
    }
    ObjHttpConfig hc = {
        .what = "ABS",
        .container = d->container,
        .ca_file = cfg->ca_file,
        .insecure_skip_verify = cfg->insecure_skip_verify,
        .timeout_ms = cfg->timeout_ms,
    };
    hc.retry = (RetryPolicy)RETRY_POLICY_DEFAULT;
    rc = objhttp_new(&hc, &d->http);
    if (rc) goto done;
    size_t n = strlen(d->container) + 8;
    d->describe = malloc(n);
    if (!d->describe) {
        rc = err_set(ERR_NOMEM, "ABS: out of memory");
        goto done;
    }
    snprintf(d->describe, n, "ABS:%s", d->container);

    /* the container must exist (Get Container Properties) */
    const char *qn[1] = {"restype"};
    const char *qv[1] = {"container"};
    AbsCall c = {.method = "GET", .qn = qn, .qv = qv, .nq = 1};
    ObjHttpResponse r = {0};
    rc = explain(abs_do(d, &c, &r, NULL), &r, d);
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_NOT_FOUND, "ABS: container %s does not exist in storage account %s",
                     d->container, d->creds.account);
    objhttp_response_clear(&r);
done:
    if (rc) {
        abs_free(&d->base);
        return rc;
    }
    *out = &d->base;
    return 0;
}
