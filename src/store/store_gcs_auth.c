/* store_gcs_auth: the GCS driver's credentials (store_gcs.h): the service-account key file as the
 * Go tool accepts it, the RS256 JWT of the OAuth2 JWT-bearer grant, the token endpoint's answer,
 * and the token source the driver asks for an access token before each request: it exchanges a
 * JWT at the key's token_uri, caches the token (one refresh at a time, under its own mutex) until
 * shortly before it expires, and re-reads a rotated key file. Tokens and keys never reach
 * messages or logs. */
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/log.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "oauth2.h"
#include "store_gcs.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GCS_DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"

/* ---- credentials ---- */

void gcs_creds_clear(GcsCreds *c) {
    if (!c) return;
    objhttp_free_secret(c->private_key);
    FREE_ALL(c->project_id, c->client_email, c->private_key_id, c->token_uri, c->universe_domain);
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
                     "GCS credentials %s: type external_account is a workload identity file, "
                     "not a service_account key (gcs_ext_parse reads it)",
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
    if (root) objhttp_json_wipe_strings(root);
    json_decref(root);
    if (rc) gcs_creds_clear(out);
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
    return oauth2_token_parse(json, len, "access_token", "expires_in", token, expires_in);
}

/* ---- listing JSON ---- */

/* ---- the token source ---- */

enum GcsSource { GCS_SRC_KEY, GCS_SRC_EXTERNAL, GCS_SRC_METADATA };

struct GcsTokens {
    char *bucket;       /* for messages */
    char *cred_path;    /* GOOGLE_APPLICATION_CREDENTIALS; NULL: the metadata server */
    char *cred_var;     /* the variable's name with the store's prefix, for messages */
    pthread_mutex_t mu; /* guards the credentials, the token and the stamp; held while fetching */
    enum GcsSource src;
    GcsCreds creds;  /* GCS_SRC_KEY */
    GcsExtCreds ext; /* GCS_SRC_EXTERNAL */
    char stamp[128]; /* the credentials file's mtime/size, to notice rotation */
    Oauth2Cached tok;
    ObjHttp *md_http; /* GCS_SRC_METADATA: a client that gives up in seconds off GCE */
};

/* Reads the credentials file at path: a service_account key into *sa or an external_account
 * file into *ext (*src says which). 0, ERR_NOT_FOUND (no file), ERR_IO, ERR_INVALID (as
 * gcs_creds_parse / gcs_ext_parse), ERR_UNSUPPORTED or ERR_NOMEM. */
static int cred_file_load(const char *path, GcsCreds *sa, GcsExtCreds *ext, enum GcsSource *src) {
    memset(sa, 0, sizeof *sa);
    memset(ext, 0, sizeof *ext);
    char *b = objhttp_read_small_file(path);
    if (!b) {
        FILE *f = fopen(path, "rb");
        int exists = f != NULL;
        if (f) fclose(f);
        return err_set(exists ? ERR_INVALID : ERR_NOT_FOUND,
                       "GCS credentials %s: cannot be read (or larger than 1 MiB)", path);
    }
    json_t *root = json_loads(b, 0, NULL);
    const char *type = json_string_value(json_object_get(root, "type"));
    int ext_kind = type && strcmp(type, "external_account") == 0;
    if (root) objhttp_json_wipe_strings(root);
    json_decref(root);
    int rc;
    if (ext_kind) {
        *src = GCS_SRC_EXTERNAL;
        rc = gcs_ext_parse(b, strlen(b), path, ext);
    } else {
        *src = GCS_SRC_KEY;
        rc = gcs_creds_parse(b, strlen(b), path, sa);
    }
    objhttp_free_secret(b);
    return rc;
}

int gcs_tokens_new(const char *bucket, const char *cred_path, const char *cred_var,
                   GcsTokens **out) {
    *out = NULL;
    GcsTokens *t = calloc(1, sizeof *t);
    if (!t) return err_set(ERR_NOMEM, "GCS: out of memory");
    pthread_mutex_init(&t->mu, NULL);
    if (!(t->bucket = strdup(bucket)) || !(t->cred_var = strdup(cred_var)) ||
        (cred_path && !(t->cred_path = strdup(cred_path)))) {
        gcs_tokens_free(t);
        return err_set(ERR_NOMEM, "GCS: out of memory");
    }
    int rc = 0;
    t->src = GCS_SRC_METADATA;
    if (!cred_path) {
        /* off GCE the metadata host does not resolve: three tries within seconds, not six */
        ObjHttpConfig hc = {
            .what = "GCS metadata server", .container = bucket, .timeout_ms = 10000};
        hc.retry = (RetryPolicy){3, 500, 2000};
        rc = objhttp_new(&hc, &t->md_http);
    } else {
        objhttp_creds_stamp(cred_path, t->stamp, sizeof t->stamp);
        rc = cred_file_load(cred_path, &t->creds, &t->ext, &t->src);
    }
    if (rc == ERR_NOT_FOUND) rc = ERR_INVALID;
    RETURN_BUILT(rc, out, t, gcs_tokens_free(t));
}

void gcs_tokens_free(GcsTokens *t) {
    if (!t) return;
    gcs_creds_clear(&t->creds);
    gcs_ext_clear(&t->ext);
    oauth2_cached_clear(&t->tok);
    objhttp_free(t->md_http);
    pthread_mutex_destroy(&t->mu);
    FREE_ALL(t->bucket, t->cred_path, t->cred_var, t);
}

const char *gcs_tokens_universe(const GcsTokens *t) {
    if (!t) return NULL;
    return t->src == GCS_SRC_EXTERNAL ? t->ext.universe_domain : t->creds.universe_domain;
}

/* Re-reads the credentials file when it changed (a rotated secret); caller holds mu. */
static void creds_refresh_locked(GcsTokens *t) {
    if (!t->cred_path) return;
    char st[128];
    objhttp_creds_stamp(t->cred_path, st, sizeof st);
    if (strcmp(st, t->stamp) == 0) return;
    GcsCreds nc;
    GcsExtCreds ne;
    enum GcsSource ns;
    if (cred_file_load(t->cred_path, &nc, &ne, &ns) != 0) {
        log_warn("GCS: credentials %s changed but cannot be read (%s); keeping the previous ones",
                 t->cred_path, err_msg());
        snprintf(t->stamp, sizeof t->stamp, "%s", st);
        return;
    }
    gcs_creds_clear(&t->creds);
    gcs_ext_clear(&t->ext);
    t->creds = nc;
    t->ext = ne;
    t->src = ns;
    snprintf(t->stamp, sizeof t->stamp, "%s", st);
    oauth2_cached_clear(&t->tok);
    log_info("GCS: credentials re-read from %s (changed)", t->cred_path);
}

/* The form body of the JWT-bearer grant for a fresh JWT (owned, secret). */
static int grant_body(GcsTokens *t, char **out) {
    char *jwt = NULL;
    int rc = gcs_jwt(&t->creds, GCS_SCOPE, (int64_t)time(NULL), &jwt);
    if (rc) return err_wrap(rc, "GCS credentials %s", t->cred_path);
    char *ej = objhttp_pct_encode(jwt, 0);
    objhttp_free_secret(jwt);
    *out = ej ? objhttp_strfmt("grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-"
                               "bearer&assertion=%s",
                               ej)
              : NULL;
    objhttp_free_secret(ej);
    return *out ? 0 : err_set(ERR_NOMEM, "GCS: out of memory");
}

/* The error of a refused token request (HTTP status of r); rc the request's. */
static int token_refused(GcsTokens *t, int rc, const ObjHttpResponse *r) {
    char *u = objhttp_redact_url(t->creds.token_uri);
    if (r->status == 400 || r->status == 401 || r->status == 403) {
        char *tok = NULL;
        int64_t ex;
        gcs_token_parse(r->body, r->body_len, &tok, &ex); /* sets the OAuth2 error text */
        objhttp_free_secret(tok);
        char why[512];
        snprintf(why, sizeof why, "%s", err_msg());
        rc = err_set(ERR_INVALID,
                     "GCS bucket %s: the token endpoint %s refused the service account %s "
                     "(HTTP %ld): %s; check that the key in %s is current and belongs to that "
                     "account",
                     t->bucket, u ? u : "(token_uri)", t->creds.client_email, r->status, why,
                     t->cred_path);
    } else {
        rc = err_wrap(rc, "GCS: getting an access token");
    }
    free(u);
    return rc;
}

/* Exchanges a fresh JWT for an access token; caller holds mu. */
static int key_fetch_locked(GcsTokens *t, ObjHttp *http, char **tok, int64_t *ex) {
    char *body = NULL;
    int rc = grant_body(t, &body);
    if (rc) return rc;
    const char *h[1] = {"Content-Type: application/x-www-form-urlencoded"};
    ObjHttpRequest req = {.method = "POST",
                          .url = t->creds.token_uri,
                          .headers = h,
                          .n_headers = 1,
                          .body = body,
                          .body_len = strlen(body),
                          .max_body = 64 << 10};
    ObjHttpResponse r = {0};
    rc = objhttp_do(http, &req, &r);
    objhttp_free_secret(body);
    if (rc) {
        rc = token_refused(t, rc, &r);
        objhttp_response_clear(&r);
        return rc;
    }
    rc = gcs_token_parse(r.body, r.body_len, tok, ex);
    if (r.body) OPENSSL_cleanse(r.body, r.body_len);
    objhttp_response_clear(&r);
    if (rc) return err_wrap(rc, "GCS: token endpoint %s", t->creds.token_uri);
    return 0;
}

/* A new access token from the source of t into its cache; caller holds mu. */
static int token_fetch_locked(GcsTokens *t, ObjHttp *http) {
    char *tok = NULL;
    int64_t ex = 0;
    int rc;
    const char *who;
    if (t->src == GCS_SRC_KEY) {
        rc = key_fetch_locked(t, http, &tok, &ex);
        who = t->creds.client_email;
    } else if (t->src == GCS_SRC_EXTERNAL) {
        rc = gcs_ext_token(&t->ext, http, GCS_SCOPE, &tok, &ex);
        who = "the external account";
    } else {
        rc = gcs_metadata_token(t->md_http ? t->md_http : http, &tok, &ex);
        who = "the metadata server's default service account";
    }
    if (rc && t->src == GCS_SRC_EXTERNAL)
        return err_wrap(rc, "GCS bucket %s (workload identity file %s)", t->bucket, t->cred_path);
    if (rc && t->src == GCS_SRC_METADATA)
        return err_wrap(rc,
                        "GCS bucket %s: %s is not set and the metadata server gave no token (not "
                        "on GCE or GKE?)",
                        t->bucket, t->cred_var);
    if (rc) return rc;
    oauth2_cached_set(&t->tok, tok, ex);
    log_debug("GCS: access token for %s obtained (expires in %lld s, fetch %ld)", who,
              (long long)ex, t->tok.gen);
    return 0;
}

int gcs_tokens_header(GcsTokens *t, ObjHttp *http, char **out, long *gen) {
    *out = NULL;
    pthread_mutex_lock(&t->mu);
    creds_refresh_locked(t);
    int rc = 0;
    if (!oauth2_cached_fresh(&t->tok)) rc = token_fetch_locked(t, http);
    if (rc == 0) {
        *out = objhttp_strfmt("Authorization: Bearer %s", t->tok.token);
        *gen = t->tok.gen;
        if (!*out) rc = err_set(ERR_NOMEM, "GCS: out of memory");
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void gcs_tokens_invalidate(GcsTokens *t, long gen) {
    pthread_mutex_lock(&t->mu);
    oauth2_cached_drop(&t->tok, gen);
    pthread_mutex_unlock(&t->mu);
}
