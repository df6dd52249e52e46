/* store_gcs: the Google Cloud Storage driver, on the JSON API (storage/v1) through objhttp.
 * Authentication: a service-account key (GOOGLE_APPLICATION_CREDENTIALS) signs an RS256 JWT that
 * the key's token_uri exchanges for an OAuth2 access token, cached (one refresh at a time, under
 * the driver's mutex) until shortly before it expires; an http:// endpoint is an emulator and
 * gets no token, as in the Go tool. Writes: an object smaller than one chunk is one media upload;
 * a larger one streams chunk objects "<key>/%010d" (1-based, up to max-parallel-chunk-uploads in
 * flight), folds every 31 of them into an intermediate composite "<key>/1%09d" and composes the
 * last intermediate and the remaining chunks into <key> with ifGenerationMatch=0 (atomic no
 * replace), then deletes the chunk objects. Chunk-shaped keys are never listed. Tokens and keys
 * never reach messages or logs. */
#include "store_gcs.h"
#include "../common/err.h"
#include "../common/log.h"
#include "objhttp.h"
#include "store_driver.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define GCS_DEFAULT_BASE "https://storage.googleapis.com"
#define GCS_DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define GCS_DEFAULT_CHUNK (5 * 1024 * 1024)
#define GCS_DEFAULT_PARALLEL 5
#define GCS_MAX_KEY 1024
#define GCS_LIST_MAX_BODY (16u << 20) /* a page of 1,000 items is under 1 MiB */
/* Longest OAuth2 access token accepted (Google's are about 200 to 2,000 bytes). */
#define GCS_TOKEN_MAX 16384
#define GCS_BATCH 31 /* chunks folded into one intermediate composite (+ the previous one = 32) */
#define GCS_INTERMEDIATE_BASE 1000000000 /* "<key>/1000000001": intermediates sort after chunks */

/* ---- credentials ---- */

void gcs_creds_clear(GcsCreds *c) {
    if (!c) return;
    free(c->project_id);
    free(c->client_email);
    objhttp_free_secret(c->private_key);
    free(c->private_key_id);
    free(c->token_uri);
    free(c->universe_domain);
    memset(c, 0, sizeof *c);
}

/* ^[a-z][a-z0-9-]{4,28}[a-z0-9]$ */
static int project_id_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 6 || n > 30 || !(s[0] >= 'a' && s[0] <= 'z')) return 0;
    for (size_t i = 1; i < n; i++) {
        int c = (unsigned char)s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && i + 1 < n);
        if (!ok) return 0;
    }
    return 1;
}

static int dup_field(json_t *root, const char *name, char **out) {
    const char *v = json_string_value(json_object_get(root, name));
    *out = NULL;
    if (!v) return 0;
    *out = strdup(v);
    return *out ? 0 : err_set(ERR_NOMEM, "GCS credentials: out of memory");
}

/* Wipes the string values of root (jansson holds its own copy of the private key). */
static void wipe_json_strings(json_t *root) {
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (json_is_string(v)) {
            char *s = (char *)json_string_value(v);
            OPENSSL_cleanse(s, strlen(s));
        }
    }
}

int gcs_creds_parse(const char *json, size_t len, const char *where, GcsCreds *out) {
    static const char *const allowed[] = {"type",
                                          "project_id",
                                          "client_email",
                                          "universe_domain",
                                          "auth_uri",
                                          "auth_provider_x509_cert_url",
                                          "client_x509_cert_url",
                                          "client_id",
                                          "private_key_id",
                                          "private_key",
                                          "token_uri"};
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    int rc = 0;
    if (!root || !json_is_object(root)) {
        rc = err_set(ERR_INVALID, "GCS credentials %s: not a JSON object (line %d: %s)", where,
                     je.line, root ? "not an object" : je.text);
        goto done;
    }
    const char *type = json_string_value(json_object_get(root, "type"));
    if (!type) {
        rc = err_set(ERR_INVALID, "GCS credentials %s: no \"type\" field", where);
        goto done;
    }
    if (strcmp(type, "external_account") == 0) {
        rc = err_set(ERR_UNSUPPORTED,
                     "GCS credentials %s: type external_account (workload identity federation) "
                     "is not supported by etcdbr yet; use a service_account key",
                     where);
        goto done;
    }
    if (strcmp(type, "service_account") != 0) {
        rc = err_set(ERR_INVALID,
                     "GCS credentials %s: type \"%.40s\" is not supported (must be "
                     "service_account)",
                     where, type);
        goto done;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        size_t i = 0;
        while (i < sizeof allowed / sizeof allowed[0] && strcmp(k, allowed[i]) != 0)
            i++;
        if (i == sizeof allowed / sizeof allowed[0]) {
            rc = err_set(ERR_INVALID,
                         "GCS credentials %s: field \"%.60s\" is not allowed in a service_account "
                         "key",
                         where, k);
            goto done;
        }
        if (!json_is_string(v)) {
            rc = err_set(ERR_INVALID, "GCS credentials %s: field %s must be a string", where, k);
            goto done;
        }
    }
    if ((rc = dup_field(root, "project_id", &out->project_id)) ||
        (rc = dup_field(root, "client_email", &out->client_email)) ||
        (rc = dup_field(root, "private_key", &out->private_key)) ||
        (rc = dup_field(root, "private_key_id", &out->private_key_id)) ||
        (rc = dup_field(root, "token_uri", &out->token_uri)) ||
        (rc = dup_field(root, "universe_domain", &out->universe_domain)))
        goto done;
    if (out->project_id && !project_id_ok(out->project_id)) {
        rc = err_set(ERR_INVALID,
                     "GCS credentials %s: project_id \"%.40s\" does not match "
                     "^[a-z][a-z0-9-]{4,28}[a-z0-9]$",
                     where, out->project_id);
        goto done;
    }
    if (!out->client_email || !out->client_email[0]) {
        rc = err_set(ERR_INVALID, "GCS credentials %s: client_email is missing", where);
        goto done;
    }
    if (!out->private_key || !out->private_key[0]) {
        rc = err_set(ERR_INVALID, "GCS credentials %s: private_key is missing", where);
        goto done;
    }
    if (!out->token_uri || !out->token_uri[0]) {
        free(out->token_uri);
        out->token_uri = strdup(GCS_DEFAULT_TOKEN_URI);
        if (!out->token_uri) rc = err_set(ERR_NOMEM, "GCS credentials: out of memory");
    } else if (strncmp(out->token_uri, "https://", 8) != 0 &&
               strncmp(out->token_uri, "http://", 7) != 0) {
        rc = err_set(ERR_INVALID, "GCS credentials %s: token_uri must be an http(s) URL", where);
    }
done:
    if (root) wipe_json_strings(root);
    json_decref(root);
    if (rc) gcs_creds_clear(out);
    return rc;
}

int gcs_creds_load(const char *path, GcsCreds *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "GCS credentials %s: %s", path,
                       strerror(errno));
    size_t cap = 1u << 20, n = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        fclose(f);
        return err_set(ERR_NOMEM, "GCS credentials: out of memory");
    }
    n = fread(b, 1, cap + 1, f);
    int bad = ferror(f);
    fclose(f);
    int rc;
    if (bad)
        rc = err_set(ERR_IO, "GCS credentials %s: read error", path);
    else if (n > cap)
        rc = err_set(ERR_INVALID, "GCS credentials %s: larger than 1 MiB", path);
    else
        rc = gcs_creds_parse(b, n, path, out);
    OPENSSL_cleanse(b, n < cap + 1 ? n : cap + 1);
    free(b);
    return rc;
}

/* ---- JWT ---- */

char *gcs_b64url(const void *data, size_t len) {
    size_t cap = 4 * ((len + 2) / 3) + 1;
    char *o = malloc(cap);
    if (!o) return NULL;
    int n = EVP_EncodeBlock((unsigned char *)o, data, (int)len);
    while (n > 0 && o[n - 1] == '=')
        n--;
    o[n] = '\0';
    for (int i = 0; i < n; i++) {
        if (o[i] == '+') o[i] = '-';
        if (o[i] == '/') o[i] = '_';
    }
    return o;
}

/* b64url(json) of a jansson object (compact, keys in insertion order); owned or NULL. */
static char *b64_json(json_t *obj) {
    char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!s) return NULL;
    char *e = gcs_b64url(s, strlen(s));
    free(s);
    return e;
}

int gcs_jwt(const GcsCreds *c, const char *scope, int64_t now, char **out) {
    *out = NULL;
    int rc = 0;
    char *h64 = NULL, *c64 = NULL, *input = NULL, *sig64 = NULL;
    unsigned char *sig = NULL;
    EVP_PKEY *pkey = NULL;
    EVP_MD_CTX *md = NULL;
    json_t *hdr = json_pack("{s:s,s:s}", "alg", "RS256", "typ", "JWT");
    json_t *cl = json_pack("{s:s,s:s,s:s,s:I,s:I}", "iss", c->client_email, "scope", scope, "aud",
                           c->token_uri, "iat", (json_int_t)now, "exp", (json_int_t)(now + 3600));
    if (!hdr || !cl) goto nomem;
    if (c->private_key_id && c->private_key_id[0] &&
        json_object_set_new(hdr, "kid", json_string(c->private_key_id)) != 0)
        goto nomem;
    h64 = b64_json(hdr);
    c64 = b64_json(cl);
    if (!h64 || !c64) goto nomem;
    size_t il = strlen(h64) + strlen(c64) + 2;
    input = malloc(il);
    if (!input) goto nomem;
    snprintf(input, il, "%s.%s", h64, c64);
    BIO *bio = BIO_new_mem_buf(c->private_key, -1);
    if (!bio) goto nomem;
    pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (!pkey || EVP_PKEY_base_id(pkey) != EVP_PKEY_RSA) {
        rc = err_set(ERR_INVALID,
                     "GCS credentials: private_key is not an RSA private key in PEM form");
        goto done;
    }
    md = EVP_MD_CTX_new();
    size_t sl = 0;
    if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) != 1 ||
        EVP_DigestSign(md, NULL, &sl, (const unsigned char *)input, strlen(input)) != 1 ||
        !(sig = malloc(sl)) ||
        EVP_DigestSign(md, sig, &sl, (const unsigned char *)input, strlen(input)) != 1) {
        rc = err_set(ERR_INVALID, "GCS credentials: signing the JWT with private_key failed");
        goto done;
    }
    sig64 = gcs_b64url(sig, sl);
    if (!sig64) goto nomem;
    size_t ol = strlen(input) + strlen(sig64) + 2;
    *out = malloc(ol);
    if (!*out) goto nomem;
    snprintf(*out, ol, "%s.%s", input, sig64);
    goto done;
nomem:
    rc = err_set(ERR_NOMEM, "GCS: out of memory building the JWT");
done:
    json_decref(hdr);
    json_decref(cl);
    free(h64);
    free(c64);
    free(input);
    free(sig);
    free(sig64);
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pkey);
    return rc;
}

int gcs_token_parse(const char *json, size_t len, char **token, int64_t *expires_in) {
    *token = NULL;
    *expires_in = 3600;
    json_t *root = json_loadb(json, len, 0, NULL);
    int rc = 0;
    const char *t = root ? json_string_value(json_object_get(root, "access_token")) : NULL;
    if (!t || !t[0]) {
        const char *e = root ? json_string_value(json_object_get(root, "error")) : NULL;
        const char *ed =
            root ? json_string_value(json_object_get(root, "error_description")) : NULL;
        if (e)
            rc =
                err_set(ERR_CORRUPT, "OAuth2 error %.80s%s%.200s", e, ed ? ": " : "", ed ? ed : "");
        else
            rc = err_set(ERR_CORRUPT, "no access_token in the token response");
        goto done;
    }
    if (strlen(t) > GCS_TOKEN_MAX) {
        rc = err_set(ERR_CORRUPT,
                     "the access_token in the token response has %zu bytes, more "
                     "than the %d accepted",
                     strlen(t), GCS_TOKEN_MAX);
        goto done;
    }
    json_t *ex = json_object_get(root, "expires_in");
    if (json_is_integer(ex) && json_integer_value(ex) > 0) *expires_in = json_integer_value(ex);
    if (*expires_in > 86400) *expires_in = 86400; /* no overflow in the refresh time; a day */
    *token = strdup(t);
    if (!*token) rc = err_set(ERR_NOMEM, "GCS: out of memory");
done:
    if (root) wipe_json_strings(root);
    json_decref(root);
    return rc;
}

/* ---- listing JSON ---- */

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

/* ---- the driver ---- */

typedef struct GcsDriver {
    StoreDriver base;
    ObjHttp *http;
    char *bucket;
    char *ebucket; /* percent-encoded */
    char *api;     /* scheme://host[:port][/path] */
    char *describe;
    int64_t min_chunk;
    int parallel;
    int list_page;      /* maxResults; 0 = the service's default (1000) */
    int batch;          /* chunks per intermediate composite (GCS_BATCH; tests lower it) */
    int auth;           /* send OAuth2 tokens */
    char *cred_path;    /* GOOGLE_APPLICATION_CREDENTIALS */
    pthread_mutex_t mu; /* guards creds, the token and the stamp; held during a token refresh */
    GcsCreds creds;
    char stamp[128];          /* the credentials file's mtime/size, to notice rotation */
    char *token;              /* secret */
    int64_t token_refresh_at; /* CLOCK_MONOTONIC seconds after which the token is refreshed */
    long token_fetches;       /* for logs and tests */
    atomic_int sweep;         /* delete chunk leftovers of finished uploads found by listings */
} GcsDriver;

static int64_t mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

/* Re-reads the credentials file when it changed (a rotated secret); caller holds mu. */
static void creds_refresh_locked(GcsDriver *d) {
    char st[128];
    objhttp_creds_stamp(d->cred_path, st, sizeof st);
    if (strcmp(st, d->stamp) == 0) return;
    GcsCreds nc;
    if (gcs_creds_load(d->cred_path, &nc) != 0) {
        log_warn("GCS: credentials %s changed but cannot be read (%s); keeping the previous ones",
                 d->cred_path, err_msg());
        snprintf(d->stamp, sizeof d->stamp, "%s", st);
        return;
    }
    gcs_creds_clear(&d->creds);
    d->creds = nc;
    snprintf(d->stamp, sizeof d->stamp, "%s", st);
    objhttp_free_secret(d->token);
    d->token = NULL;
    log_info("GCS: credentials re-read from %s (changed)", d->cred_path);
}

static int form_escape_append(char **dst, size_t *len, const char *s) {
    char *e = objhttp_pct_encode(s, 0);
    if (!e) return ERR_NOMEM;
    size_t el = strlen(e);
    char *n = realloc(*dst, *len + el + 1);
    if (!n) {
        objhttp_free_secret(e);
        return ERR_NOMEM;
    }
    memcpy(n + *len, e, el + 1);
    *dst = n;
    *len += el;
    objhttp_free_secret(e);
    return 0;
}

/* Exchanges a fresh JWT for an access token; caller holds mu. */
static int token_fetch_locked(GcsDriver *d) {
    char *jwt = NULL, *body = NULL;
    size_t bl = 0;
    int rc = gcs_jwt(&d->creds, GCS_SCOPE, (int64_t)time(NULL), &jwt);
    if (rc) return err_wrap(rc, "GCS credentials %s", d->cred_path);
    body = strdup("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=");
    bl = body ? strlen(body) : 0;
    if (!body || form_escape_append(&body, &bl, jwt) != 0) {
        objhttp_free_secret(jwt);
        objhttp_free_secret(body);
        return err_set(ERR_NOMEM, "GCS: out of memory");
    }
    objhttp_free_secret(jwt);
    const char *h[1] = {"Content-Type: application/x-www-form-urlencoded"};
    ObjHttpRequest req = {.method = "POST",
                          .url = d->creds.token_uri,
                          .headers = h,
                          .n_headers = 1,
                          .body = body,
                          .body_len = bl,
                          .max_body = 64 << 10};
    ObjHttpResponse r = {0};
    rc = objhttp_do(d->http, &req, &r);
    objhttp_free_secret(body);
    if (rc) {
        char *u = objhttp_redact_url(d->creds.token_uri);
        if (r.status == 400 || r.status == 401 || r.status == 403) {
            char *tok = NULL;
            int64_t ex;
            gcs_token_parse(r.body, r.body_len, &tok, &ex); /* sets the OAuth2 error text */
            objhttp_free_secret(tok);
            char why[512];
            snprintf(why, sizeof why, "%s", err_msg());
            rc = err_set(ERR_INVALID,
                         "GCS bucket %s: the token endpoint %s refused the service account %s "
                         "(HTTP %ld): %s; check that the key in %s is current and belongs to that "
                         "account",
                         d->bucket, u ? u : "(token_uri)", d->creds.client_email, r.status, why,
                         d->cred_path);
        } else {
            rc = err_wrap(rc, "GCS: getting an access token");
        }
        free(u);
        objhttp_response_clear(&r);
        return rc;
    }
    char *tok = NULL;
    int64_t ex = 0;
    rc = gcs_token_parse(r.body, r.body_len, &tok, &ex);
    if (r.body) OPENSSL_cleanse(r.body, r.body_len);
    objhttp_response_clear(&r);
    if (rc) return err_wrap(rc, "GCS: token endpoint %s", d->creds.token_uri);
    objhttp_free_secret(d->token);
    d->token = tok;
    /* refresh a minute early (a quarter of the lifetime for short-lived tokens) */
    int64_t margin = ex >= 240 ? 60 : ex / 4;
    d->token_refresh_at = mono_s() + ex - margin;
    d->token_fetches++;
    log_debug("GCS: access token for %s obtained (expires in %lld s, fetch %ld)",
              d->creds.client_email, (long long)ex, d->token_fetches);
    return 0;
}

/* "Authorization: Bearer <token>" into out (owned, secret); *gen: which token (token_fetches). */
static int auth_header(GcsDriver *d, char **out, long *gen) {
    *out = NULL;
    pthread_mutex_lock(&d->mu);
    creds_refresh_locked(d);
    int rc = 0;
    if (!d->token || mono_s() >= d->token_refresh_at) rc = token_fetch_locked(d);
    if (rc == 0) {
        size_t n = strlen(d->token) + 32;
        *out = malloc(n);
        *gen = d->token_fetches;
        if (*out)
            snprintf(*out, n, "Authorization: Bearer %s", d->token);
        else
            rc = err_set(ERR_NOMEM, "GCS: out of memory");
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* Drops the token a request was refused with (401), unless another thread replaced it already. */
static void token_invalidate(GcsDriver *d, long gen) {
    pthread_mutex_lock(&d->mu);
    if (d->token_fetches == gen) {
        objhttp_free_secret(d->token);
        d->token = NULL;
    }
    pthread_mutex_unlock(&d->mu);
}

typedef struct {
    GcsDriver *d;
    long gen; /* the token the last attempt carried */
} AuthCtx;

static int auth_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    AuthCtx *a = ctx;
    char *h = NULL;
    int rc = auth_header(a->d, &h, &a->gen);
    if (rc) return rc;
    struct curl_slist *t = curl_slist_append(*headers, h);
    objhttp_free_secret(h);
    if (!t) return err_set(ERR_NOMEM, "GCS: out of memory");
    *headers = t;
    return 0;
}

/* "reason: message" of a JSON API error document into out ("" if none). */
static void api_error(const ObjHttpResponse *r, char *out, size_t cap) {
    out[0] = '\0';
    if (!r->body || !r->body_len) return;
    json_t *root = json_loadb(r->body, r->body_len, 0, NULL);
    json_t *e = json_object_get(root, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *reason = json_string_value(
        json_object_get(json_array_get(json_object_get(e, "errors"), 0), "reason"));
    if (msg || reason)
        snprintf(out, cap, "%s%s%.300s", reason ? reason : "", reason && msg ? ": " : "",
                 msg ? msg : "");
    json_decref(root);
}

/* One request. url owned by the caller; stream non-NULL: a streamed GET. A 401 with a token
 * (expired or revoked early) drops the token and tries once more with a fresh one. */
static int gcs_do(GcsDriver *d, const char *method, const char *url, const char *const *headers,
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
                          .auth = d->auth ? auth_hook : NULL,
                          .auth_ctx = &actx};
    ObjHttpResponse local = {0};
    if (!resp) resp = &local;
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = stream ? objhttp_stream_open(d->http, &req, resp, stream)
                    : objhttp_do(d->http, &req, resp);
        if (rc == 0 || resp->status != 401 || !d->auth) break;
        token_invalidate(d, actx.gen);
    }
    if (rc && resp->status >= 400) {
        char ex[400];
        api_error(resp, ex, sizeof ex);
        if (resp->status == 401 || resp->status == 403)
            rc = err_wrap(rc,
                          "GCS bucket %s: access denied (HTTP %ld%s%s): check the service "
                          "account and its permissions on the bucket",
                          d->bucket, resp->status, ex[0] ? ", " : "", ex);
    }
    objhttp_response_clear(&local);
    return rc;
}

static char *url_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *url_fmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* "<api>/storage/v1/b/<bucket>/o/<key>[suffix]" (key fully percent-encoded, '/' too). */
static char *object_url(const GcsDriver *d, const char *key, const char *suffix) {
    char *ek = objhttp_pct_encode(key, 0);
    if (!ek) return NULL;
    char *u = url_fmt("%s/storage/v1/b/%s/o/%s%s", d->api, d->ebucket, ek, suffix ? suffix : "");
    free(ek);
    return u;
}

static int key_ok(const char *key, const char *op) {
    return objhttp_key_ok("GCS", op, key, GCS_MAX_KEY, 0);
}

/* list */

static int delete_object(GcsDriver *d, const char *key, ObjHttpResponse *r);

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
        int rc = delete_object(d, l->sweep[i], &r);
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
static int list_objects(GcsDriver *d, const char *key_prefix, StoreDriverListCb cb, void *ctx,
                        int sweep) {
    char *token = NULL;
    int rc = 0;
    ListCtx lc = {.cb = cb, .ctx = ctx};
    char page[16];
    snprintf(page, sizeof page, "%d", d->list_page);
    ObjHttpListing lg;
    objhttp_listing_begin(&lg, "GCS", d->bucket, key_prefix);
    do {
        rc = objhttp_listing_page(&lg, token);
        if (rc != 0) break;
        const char *qn[4] = {"prefix", "fields"};
        const char *qv[4] = {key_prefix, "items(name,size,retentionExpirationTime),nextPageToken"};
        size_t nq = 2;
        if (d->list_page > 0) {
            qn[nq] = "maxResults";
            qv[nq++] = page;
        }
        if (token) {
            qn[nq] = "pageToken";
            qv[nq++] = token;
        }
        char *q = objhttp_query(qn, qv, nq);
        char *url = q ? url_fmt("%s/storage/v1/b/%s/o?%s", d->api, d->ebucket, q) : NULL;
        free(q);
        if (!url) {
            rc = err_set(ERR_NOMEM, "GCS list: out of memory");
            break;
        }
        ObjHttpResponse r = {0};
        rc = gcs_do(d, "GET", url, NULL, 0, NULL, 0, GCS_LIST_MAX_BODY, &r, NULL);
        free(url);
        char *next = NULL;
        if (rc == 0) rc = gcs_list_parse(r.body, r.body_len, list_item, &lc, &next);
        objhttp_response_clear(&r);
        free(token);
        token = next;
    } while (rc == 0 && token);
    objhttp_listing_end(&lg);
    free(token);
    if (rc == ERR_NOT_FOUND) rc = err_set(ERR_IO, "GCS list: bucket %s does not exist", d->bucket);
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

/* The object's metadata JSON (owned by r). */
static int get_meta(GcsDriver *d, const char *key, ObjHttpResponse *r) {
    char *url = object_url(d, key, NULL);
    if (!url) return err_set(ERR_NOMEM, "GCS: out of memory");
    int rc = gcs_do(d, "GET", url, NULL, 0, NULL, 0, 0, r, NULL);
    free(url);
    return rc;
}

static int meta_int(const ObjHttpResponse *r, const char *field, int64_t *out) {
    json_t *root = json_loadb(r->body, r->body_len, 0, NULL);
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

static int gcs_stat(StoreDriver *drv, const char *key, int64_t *size) {
    GcsDriver *d = (GcsDriver *)drv;
    int rc = key_ok(key, "stat");
    if (rc) return rc;
    ObjHttpResponse r = {0};
    rc = get_meta(d, key, &r);
    if (rc == 0 && meta_int(&r, "size", size) != 0)
        rc = err_set(ERR_IO, "GCS stat %s: no size in the object's metadata", key);
    else if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_NOT_FOUND, "GCS stat %s: not found", key);
    objhttp_response_clear(&r);
    return rc;
}

/* DELETE of one object; quiet: a missing object is ERR_NOT_FOUND without a new message. */
static int delete_object(GcsDriver *d, const char *key, ObjHttpResponse *r) {
    char *url = object_url(d, key, NULL);
    if (!url) return err_set(ERR_NOMEM, "GCS: out of memory");
    int rc = gcs_do(d, "DELETE", url, NULL, 0, NULL, 0, 0, r, NULL);
    free(url);
    return rc;
}

static int gcs_remove(StoreDriver *drv, const char *key) {
    GcsDriver *d = (GcsDriver *)drv;
    int rc = key_ok(key, "remove");
    if (rc) return rc;
    ObjHttpResponse r = {0};
    rc = delete_object(d, key, &r);
    char ex[400];
    api_error(&r, ex, sizeof ex);
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

typedef struct GcsReader {
    ObjHttpResumable r; /* first: key, offset, stream, resumes */
    GcsDriver *d;
    char generation[32]; /* of the first response: a resumed read must see the same object */
} GcsReader;

static int reader_open(ObjHttpResumable *res) {
    GcsReader *a = (GcsReader *)res;
    char range[64];
    const char *h[1] = {range};
    snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)res->offset);
    char suffix[96];
    snprintf(suffix, sizeof suffix, "?alt=media%s%s", a->generation[0] ? "&generation=" : "",
             a->generation);
    char *url = object_url(a->d, res->key, suffix);
    if (!url) return err_set(ERR_NOMEM, "GCS read: out of memory");
    ObjHttpResponse r = {0};
    int rc = gcs_do(a->d, "GET", url, h, res->offset > 0 ? 1 : 0, NULL, 0, 0, &r, &res->s);
    free(url);
    if (rc != 0 && res->offset > 0 && r.status == 416) {
        int64_t size;
        res->s = NULL;
        rc = gcs_stat(&a->d->base, res->key, &size); /* empty, if the object exists */
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "GCS read %s: not found", res->key);
    }
    if (rc == 0 && !a->generation[0])
        rc = objhttp_resumable_pin(res, &r, "x-goog-generation", a->generation,
                                   sizeof a->generation);
    for (char *p = a->generation; *p; p++)
        if (!isdigit((unsigned char)*p)) a->generation[0] = '\0';
    objhttp_response_clear(&r);
    return rc;
}

static int gcs_open_read(StoreDriver *drv, const char *key, uint64_t offset, IoReader **out) {
    *out = NULL;
    int rc = key_ok(key, "read");
    if (rc) return rc;
    GcsReader *a = calloc(1, sizeof *a);
    if (!a) return err_set(ERR_NOMEM, "GCS read: out of memory");
    a->d = (GcsDriver *)drv;
    return objhttp_resumable_start(&a->r, "GCS", key, offset, reader_open, NULL, out);
}

/* write */

typedef struct GcsWriter {
    StoreDriverWriter base;
    IoWriter io;
    GcsDriver *d;
    char *key;
    char upload_id[33];    /* random, in the final object's metadata: recognizes our own compose */
    ObjHttpPartWriter *pw; /* the chunks (objhttp.h) */
    int n_chunks;          /* handed to the uploaders */
    int first_open;        /* first chunk number not yet folded into an intermediate */
    int n_inter;           /* intermediates made; the newest is the current one */
    int64_t inter_gen;
    int64_t *gens; /* generation of chunk n at gens[n] (0: not uploaded); guarded by mu */
    pthread_mutex_t mu;
} GcsWriter;

static void chunk_name(const GcsWriter *w, int num, char *out, size_t cap) {
    snprintf(out, cap, "%s/%010d", w->key, num);
}

/* Media upload of body to name; *generation from the response. if_absent adds
 * ifGenerationMatch=0 (412 = the object exists). */
static int upload(GcsDriver *d, const char *name, const void *body, size_t len, int if_absent,
                  int64_t *generation, ObjHttpResponse *r) {
    const char *qn[3] = {"uploadType", "name", "ifGenerationMatch"};
    const char *qv[3] = {"media", name, "0"};
    char *q = objhttp_query(qn, qv, if_absent ? 3 : 2);
    char *url = q ? url_fmt("%s/upload/storage/v1/b/%s/o?%s", d->api, d->ebucket, q) : NULL;
    free(q);
    if (!url) return err_set(ERR_NOMEM, "GCS write: out of memory");
    const char *h[1] = {"Content-Type: application/octet-stream"};
    int rc = gcs_do(d, "POST", url, h, 1, body, len, 0, r, NULL);
    free(url);
    if (rc == 0 && generation && meta_int(r, "generation", generation) != 0) *generation = 0;
    return rc;
}

/* Uploads chunk num (on an upload thread) and records its generation. */
static int put_chunk(void *ctx, int num, const void *data, size_t len) {
    GcsWriter *w = ctx;
    char name[GCS_MAX_KEY + 16];
    chunk_name(w, num, name, sizeof name);
    ObjHttpResponse r = {0};
    int64_t gen = 0;
    int rc = upload(w->d, name, data, len, 0, &gen, &r);
    objhttp_response_clear(&r);
    if (rc) return err_wrap(rc, "GCS write %s: chunk %d", w->key, num);
    pthread_mutex_lock(&w->mu);
    w->gens[num] = gen ? gen : -1; /* -1: uploaded, generation unknown */
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* Waits until no chunk is queued or uploading; the first upload error, if any. */
static int wait_idle(GcsWriter *w) {
    return objhttp_pw_wait(w->pw);
}

/* Best-effort delete of a temporary object (logged at debug when it fails). */
static void drop_temp(GcsWriter *w, const char *name) {
    ObjHttpResponse r = {0};
    int rc = delete_object(w->d, name, &r);
    if (rc && rc != ERR_NOT_FOUND)
        log_warn("GCS write %s: could not delete the temporary object %s: %s", w->key, name,
                 err_msg());
    objhttp_response_clear(&r);
}

/* Deletes the chunks first..last and the intermediate number inter (0 = none). */
static void drop_sources(GcsWriter *w, int inter, int first, int last) {
    char name[GCS_MAX_KEY + 16];
    if (inter > 0) {
        chunk_name(w, GCS_INTERMEDIATE_BASE + inter, name, sizeof name);
        drop_temp(w, name);
    }
    for (int n = first; n <= last; n++) {
        if (!w->gens[n]) continue;
        chunk_name(w, n, name, sizeof name);
        drop_temp(w, name);
        w->gens[n] = 0;
    }
}

/* Composes [intermediate inter (0 = none)] + chunks first..last into dest. final: dest is the
 * object (ifGenerationMatch=0, our upload id in its metadata). */
static int compose(GcsWriter *w, int inter, int first, int last, const char *dest, int final,
                   int64_t *dest_gen, ObjHttpResponse *r) {
    json_t *src = json_array();
    char name[GCS_MAX_KEY + 16];
    int rc = 0;
    char *body = NULL, *url = NULL;
    if (!src) goto nomem;
    for (int n = inter > 0 ? 0 : first; n <= last; n = n == 0 ? first : n + 1) {
        int num = n == 0 ? GCS_INTERMEDIATE_BASE + inter : n;
        int64_t gen = n == 0 ? w->inter_gen : w->gens[n];
        chunk_name(w, num, name, sizeof name);
        json_t *o = json_pack("{s:s}", "name", name);
        if (!o) goto nomem;
        /* exactly the generation we uploaded: a concurrent writer of the same key cannot mix
         * its chunks into ours */
        if (gen > 0)
            json_object_set_new(o, "objectPreconditions",
                                json_pack("{s:I}", "ifGenerationMatch", (json_int_t)gen));
        if (json_array_append_new(src, o) != 0) goto nomem;
        if (n == 0 && first > last) break;
    }
    json_t *req =
        json_pack("{s:o,s:{s:s,s:{s:s}}}", "sourceObjects", src, "destination", "contentType",
                  "application/octet-stream", "metadata", "etcdbr-upload", w->upload_id);
    src = NULL;
    if (!req) goto nomem;
    body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    url = object_url(w->d, dest, final ? "/compose?ifGenerationMatch=0" : "/compose");
    if (!body || !url) goto nomem;
    const char *h[1] = {"Content-Type: application/json"};
    rc = gcs_do(w->d, "POST", url, h, 1, body, strlen(body), 0, r, NULL);
    if (rc == 0 && dest_gen && meta_int(r, "generation", dest_gen) != 0) *dest_gen = 0;
    goto done;
nomem:
    rc = err_set(ERR_NOMEM, "GCS write %s: out of memory", w->key);
done:
    json_decref(src);
    free(body);
    free(url);
    return rc;
}

/* Folds the intermediate and the open chunks (all uploaded) into the next intermediate. */
static int fold(GcsWriter *w) {
    int rc = wait_idle(w);
    if (rc) return rc;
    int next = w->n_inter + 1, last = w->n_chunks;
    char dest[GCS_MAX_KEY + 16];
    chunk_name(w, GCS_INTERMEDIATE_BASE + next, dest, sizeof dest);
    ObjHttpResponse r = {0};
    int64_t gen = 0;
    rc = compose(w, w->n_inter, w->first_open, last, dest, 0, &gen, &r);
    objhttp_response_clear(&r);
    if (rc)
        return err_wrap(rc, "GCS write %s: composing chunks %d-%d", w->key, w->first_open, last);
    drop_sources(w, w->n_inter, w->first_open, last);
    w->n_inter = next;
    w->inter_gen = gen;
    w->first_open = last + 1;
    return 0;
}

/* Before chunk num goes to the uploaders: folds first when the open chunks make a full batch;
 * refuses a chunk beyond GCS's component limit. */
static int before_chunk(void *ctx, int num) {
    GcsWriter *w = ctx;
    if (num - w->first_open >= w->d->batch) {
        int rc = fold(w);
        if (rc) return rc;
    }
    if (num > GCS_MAX_COMPONENTS - 1)
        return err_set(ERR_INVALID,
                       "GCS write %s: more than %d chunks (%llu bytes): the object would exceed "
                       "GCS's %d components; raise --min-chunk-size",
                       w->key, GCS_MAX_COMPONENTS - 1, (unsigned long long)objhttp_pw_total(w->pw),
                       GCS_MAX_COMPONENTS);
    w->n_chunks = num;
    return 0;
}

static size_t chunk_size(void *ctx, int num) {
    return (size_t)gcs_chunk_size(((GcsWriter *)ctx)->d->min_chunk, num);
}

static IoWriter *writer_io(StoreDriverWriter *sw) {
    return objhttp_pw_io(((GcsWriter *)sw)->pw);
}

/* Stops the uploaders (queued chunks are skipped once failed is set) and frees w; discard
 * deletes every temporary object uploaded so far. */
static void writer_free(GcsWriter *w, int discard) {
    objhttp_pw_stop(w->pw, discard);
    if (discard) drop_sources(w, w->n_inter, w->first_open, w->n_chunks);
    objhttp_pw_free(w->pw, discard);
    pthread_mutex_destroy(&w->mu);
    free(w->gens);
    free(w->key);
    free(w);
}

/* After a refused conditional write (412): ours anyway if a retry of our own request got there
 * first (the object carries our upload id, or for a single upload our bytes' MD5). */
static int exists_is_ours(GcsWriter *w, const unsigned char *data, size_t len) {
    ObjHttpResponse r = {0};
    int ours = 0;
    if (get_meta(w->d, w->key, &r) == 0) {
        json_t *root = json_loadb(r.body, r.body_len, 0, NULL);
        const char *id =
            json_string_value(json_object_get(json_object_get(root, "metadata"), "etcdbr-upload"));
        if (id && strcmp(id, w->upload_id) == 0) ours = 1;
        const char *md5 = json_string_value(json_object_get(root, "md5Hash"));
        int64_t size = -1;
        if (!ours && data && md5 && meta_int(&r, "size", &size) == 0 && size == (int64_t)len) {
            unsigned char dig[EVP_MAX_MD_SIZE];
            unsigned int dl = 0;
            char b64[64];
            if (EVP_Digest(data, len, dig, &dl, EVP_md5(), NULL) == 1) {
                EVP_EncodeBlock((unsigned char *)b64, dig, (int)dl);
                ours = strcmp(b64, md5) == 0;
            }
        }
        json_decref(root);
    }
    objhttp_response_clear(&r);
    return ours;
}

static int writer_commit(StoreDriverWriter *sw) {
    GcsWriter *w = (GcsWriter *)sw;
    int rc = objhttp_pw_failed(w->pw);
    ObjHttpResponse r = {0};
    if (!rc && w->n_chunks == 0) { /* one conditional media upload */
        size_t len;
        const unsigned char *body = objhttp_pw_rest(w->pw, &len);
        rc = upload(w->d, w->key, body, len, 1, NULL, &r);
        if (rc != 0 && r.status == 412) {
            rc = exists_is_ours(w, body, len)
                     ? 0
                     : err_set(ERR_EXISTS, "GCS write %s: the object already exists (HTTP 412)",
                               w->key);
        }
        goto done;
    }
    if (rc || (rc = objhttp_pw_finish(w->pw)) != 0) goto done;
    rc = compose(w, w->n_inter, w->first_open, w->n_chunks, w->key, 1, NULL, &r);
    if (rc != 0 && r.status == 412) {
        rc =
            exists_is_ours(w, NULL, 0)
                ? 0
                : err_set(ERR_EXISTS, "GCS write %s: the object already exists (HTTP 412)", w->key);
    } else if (rc) {
        err_wrap(rc, "GCS write %s: composing the object", w->key);
    }
    if (rc == 0) {
        /* the object is complete: the chunks are leftovers now (the Go tool leaves them to its
         * garbage collection; we delete them right away) */
        drop_sources(w, w->n_inter, w->first_open, w->n_chunks);
        w->n_inter = 0;
        w->first_open = w->n_chunks + 1;
    }
done:
    objhttp_response_clear(&r);
    writer_free(w, rc != 0);
    return rc;
}

static void writer_abort(StoreDriverWriter *sw) {
    writer_free((GcsWriter *)sw, 1);
}

static const StoreDriverWriterVt writer_vt = {writer_io, writer_commit, writer_abort};

static int gcs_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    GcsDriver *d = (GcsDriver *)drv;
    *out = NULL;
    int rc = key_ok(key, "write");
    if (rc) return rc;
    if (strlen(key) > GCS_MAX_KEY - 11)
        return err_set(ERR_INVALID, "GCS write: key \"%.64s\" too long for its chunk names", key);
    if (gcs_is_chunk_key(key))
        return err_set(ERR_INVALID,
                       "GCS write: key \"%.64s\" ends in /<10 digits>, the shape of chunk objects",
                       key);
    GcsWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key)) ||
        !(w->gens = calloc(GCS_MAX_COMPONENTS + 1, sizeof *w->gens))) {
        if (w) free(w->key);
        free(w);
        return err_set(ERR_NOMEM, "GCS write: out of memory");
    }
    unsigned char rnd[16];
    if (RAND_bytes(rnd, sizeof rnd) != 1) { /* unique enough to tell our own upload */
        static atomic_uint seq;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                     ((uint64_t)atomic_fetch_add(&seq, 1) << 52) ^ (uint64_t)(uintptr_t)w;
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(v >> (8 * (i % 8)));
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(w->upload_id + 2 * i, 3, "%02x", rnd[i]);
    w->base.vt = &writer_vt;
    w->d = d;
    w->first_open = 1;
    pthread_mutex_init(&w->mu, NULL);
    ObjHttpPartWriterConfig pc = {.what = "GCS",
                                  .key = key,
                                  .parallel = d->parallel,
                                  .eager = 1,
                                  .part_size = chunk_size,
                                  .before = before_chunk,
                                  .put = put_chunk,
                                  .ctx = w};
    if ((rc = objhttp_pw_new(&pc, &w->pw))) {
        writer_free(w, 0);
        return rc;
    }
    *out = &w->base;
    return 0;
}

static const char *gcs_describe(const StoreDriver *drv) {
    return ((const GcsDriver *)drv)->describe;
}

static void gcs_free(StoreDriver *drv) {
    GcsDriver *d = (GcsDriver *)drv;
    if (!d) return;
    objhttp_free(d->http);
    gcs_creds_clear(&d->creds);
    objhttp_free_secret(d->token);
    pthread_mutex_destroy(&d->mu);
    free(d->bucket);
    free(d->ebucket);
    free(d->api);
    free(d->describe);
    free(d->cred_path);
    free(d);
}

static const StoreDriverVt gcs_vt = {
    .name = "GCS",
    .features = STORE_FEAT_THREAD_SAFE | STORE_FEAT_NO_REPLACE,
    .list = gcs_list,
    .sweep_leftovers = gcs_sweep_leftovers,
    .open_read = gcs_open_read,
    .open_write = gcs_open_write,
    .remove = gcs_remove,
    .stat = gcs_stat,
    .remove_dir = NULL,
    .describe = gcs_describe,
    .free = gcs_free,
};

/* The deprecated "storageAPIEndpoint" file next to the credentials (trimmed), else
 * $GOOGLE_STORAGE_API_ENDPOINT (with cfg's env prefix), as the Go tool; owned or NULL. */
static char *endpoint_from_file(const StoreConfig *cfg, const char *cred_path) {
    char *out = NULL;
    if (cred_path) {
        const char *slash = strrchr(cred_path, '/');
        size_t dl = slash ? (size_t)(slash - cred_path) : 1;
        char *p = url_fmt("%.*s/storageAPIEndpoint", (int)dl, slash ? cred_path : ".");
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

static int env_int(const char *name, int lo, int hi, int *out) {
    const char *v = objhttp_env(name);
    if (!v) return 0;
    char *ep;
    long x = strtol(v, &ep, 10);
    if (*ep || x < lo || x > hi)
        return err_set(ERR_INVALID, "%s=%s: must be %d to %d", name, v, lo, hi);
    *out = (int)x;
    return 0;
}

int store_gcs_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    const char *bucket =
        cfg->container && cfg->container[0] ? cfg->container : store_env(cfg, "STORAGE_CONTAINER");
    if (!bucket)
        return err_set(ERR_INVALID, "GCS: no bucket (--store-container or %sSTORAGE_CONTAINER)",
                       store_env_prefix(cfg));
    GcsDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "GCS: out of memory");
    d->base.vt = &gcs_vt;
    pthread_mutex_init(&d->mu, NULL);
    int rc = 0;
    char *endpoint = NULL;
    d->bucket = strdup(bucket);
    d->ebucket = objhttp_pct_encode(bucket, 0);
    d->min_chunk = cfg->min_chunk_size > 0 ? cfg->min_chunk_size : GCS_DEFAULT_CHUNK;
    d->parallel = cfg->max_parallel_chunk_uploads > 0 ? cfg->max_parallel_chunk_uploads
                                                      : GCS_DEFAULT_PARALLEL;
    d->batch = GCS_BATCH;
    atomic_init(&d->sweep, 1);
    if (!d->bucket || !d->ebucket) {
        rc = err_set(ERR_NOMEM, "GCS: out of memory");
        goto done;
    }
    if ((rc = env_int("ETCDBR_GCS_LIST_PAGE_SIZE", 1, 1000, &d->list_page)) ||
        (rc = env_int("ETCDBR_GCS_COMPOSE_BATCH", 1, GCS_BATCH, &d->batch)))
        goto done;
    const char *path = cfg->credentials && cfg->credentials[0]
                           ? cfg->credentials
                           : store_env(cfg, "GOOGLE_APPLICATION_CREDENTIALS");
    if (path && !(d->cred_path = strdup(path))) {
        rc = err_set(ERR_NOMEM, "GCS: out of memory");
        goto done;
    }
    int emulator = 0;
    if (cfg->endpoint_override && cfg->endpoint_override[0])
        endpoint = strdup(cfg->endpoint_override);
    else
        endpoint = endpoint_from_file(cfg, path);
    if (endpoint) {
        rc = gcs_endpoint_parse(endpoint, &d->api, &emulator);
        if (rc) goto done;
    }
    /* an http:// endpoint is an emulator: no authentication (the Go tool sets
     * STORAGE_EMULATOR_HOST); ETCDBR_GCS_HTTP_AUTH=1 keeps it (tests with a fake token server) */
    const char *ha = objhttp_env("ETCDBR_GCS_HTTP_AUTH");
    d->auth = !emulator || (ha && strcmp(ha, "1") == 0);
    if (d->auth) {
        if (!path) {
            rc = err_set(ERR_INVALID,
                         "GCS: no credentials: set %sGOOGLE_APPLICATION_CREDENTIALS to a "
                         "service-account key file (metadata-server credentials are not "
                         "supported)",
                         store_env_prefix(cfg));
            goto done;
        }
        objhttp_creds_stamp(path, d->stamp, sizeof d->stamp);
        rc = gcs_creds_load(path, &d->creds);
        if (rc == ERR_NOT_FOUND) rc = ERR_INVALID;
        if (rc) goto done;
    }
    if (!d->api) {
        const char *ud = d->creds.universe_domain;
        if (ud && ud[0] && strcmp(ud, "googleapis.com") != 0)
            d->api = url_fmt("https://storage.%s", ud);
        else
            d->api = strdup(GCS_DEFAULT_BASE);
        if (!d->api) {
            rc = err_set(ERR_NOMEM, "GCS: out of memory");
            goto done;
        }
    }
    ObjHttpConfig hc = {
        .what = "GCS",
        .container = d->bucket,
        .ca_file = cfg->ca_file,
        .insecure_skip_verify = cfg->insecure_skip_verify,
        .timeout_ms = cfg->timeout_ms,
    };
    hc.retry = (RetryPolicy)RETRY_POLICY_DEFAULT;
    rc = objhttp_new(&hc, &d->http);
    if (rc) goto done;
    d->describe = url_fmt("GCS:%s", d->bucket);
    if (!d->describe) {
        rc = err_set(ERR_NOMEM, "GCS: out of memory");
        goto done;
    }
    /* the bucket must exist (buckets.get); this also gets the first access token */
    char *url = url_fmt("%s/storage/v1/b/%s", d->api, d->ebucket);
    if (!url) {
        rc = err_set(ERR_NOMEM, "GCS: out of memory");
        goto done;
    }
    ObjHttpResponse r = {0};
    rc = gcs_do(d, "GET", url, NULL, 0, NULL, 0, 0, &r, NULL);
    free(url);
    objhttp_response_clear(&r);
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_NOT_FOUND, "GCS: bucket %s does not exist at %s", d->bucket, d->api);
done:
    free(endpoint);
    if (rc) {
        gcs_free(&d->base);
        return rc;
    }
    *out = &d->base;
    return 0;
}
