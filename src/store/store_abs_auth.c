/* store_abs_auth: the ABS driver's credentials and signature (store_abs.h): the credentials file
 * or directory and the connection string as the Go tool reads them, the SharedKey string-to-sign
 * and signature, and the keyring the driver asks for the account, key or SAS and URL base before
 * each request (it re-reads rotated credential files, under its own mutex). Keys, signatures and
 * SAS tokens never reach messages or logs. */
#include "../codec/base64.h"
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "oauth2.h"
#include "store_abs.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define ABS_DEFAULT_DOMAIN "blob.core.windows.net"

/* ---- credentials ---- */

void abs_creds_clear(AbsCreds *c) {
    if (!c) return;
    if (c->key) OPENSSL_cleanse(c->key, c->key_len);
    objhttp_free_secret(c->sas);
    FREE_ALL(c->account, c->key, c->domain, c->blob_endpoint);
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

int abs_creds_load(const char *path, AbsCreds *out) {
    static const char *const names[4] = {"storageAccount", "storageKey", "domain", "sasToken"};
    char *v[4];
    memset(out, 0, sizeof *out);
    int rc = objhttp_creds_read(path, "ABS", names, 4, v);
    if (rc) return rc;
    return creds_fill(out, v[0], v[1], v[2], v[3], path);
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
    char **qs = calloc(nq + 1, sizeof *qs);
    if (!qs) goto fail;
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
            const char *v = objhttp_header_value(headers, n_headers, std_headers[i], &l);
            if (v) strbuf_add(&b, v, l);
        }
        strbuf_str(&b, "\n");
    }
    objhttp_canon_headers(&b, headers, n_headers, "x-ms-");
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
    for (size_t i = 0; i < nq; i++)
        free(qs[i]);
    free(qs);
    if (b.oom) {
        free(b.d);
        return NULL;
    }
    return b.d;
fail:
    if (qs)
        for (size_t i = 0; i < nq; i++)
            free(qs[i]);
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

/* ---- signed headers ---- */

int abs_sign_headers(const AbsReqCreds *c, const AbsSignReq *s, time_t now, char *date_h,
                     size_t date_cap, char *auth, size_t auth_cap) {
    char date[64];
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(date_h, date_cap, "x-ms-date: %s", date);
    const char **all = calloc(s->nh + 1, sizeof *all);
    if (!all) return err_set(ERR_NOMEM, "ABS: out of memory");
    for (size_t i = 0; i < s->nh; i++)
        all[i] = s->headers[i];
    all[s->nh] = date_h;
    char *sts = abs_string_to_sign(s->method, s->content_length, all, s->nh + 1, c->account,
                                   s->path, s->qn, s->qv, s->nq);
    free(all);
    if (!sts) return err_set(ERR_NOMEM, "ABS: out of memory");
    char sig[64];
    int rc = abs_sign(c->key, c->key_len, sts, sig, sizeof sig);
    free(sts);
    if (rc) return rc;
    snprintf(auth, auth_cap, "Authorization: SharedKey %s:%s", c->account, sig);
    OPENSSL_cleanse(sig, sizeof sig);
    return 0;
}

/* ---- the keyring ---- */

enum CredSource { CRED_FILE, CRED_CONNSTR, CRED_ACCOUNT_ONLY };

struct AbsKeyring {
    pthread_mutex_t mu; /* guards creds and the stamp */
    AbsCreds creds;
    enum CredSource source;
    char *cred_path;  /* file or directory the credentials came from */
    char *env_sas;    /* $AZURE_STORAGE_SAS_TOKEN */
    char *endpoint;   /* override: scheme://host[:port][/path], no trailing '/'; NULL = Azure */
    char stamp[256];  /* mtimes of what was read, to notice rotation */
    AbsWid *wid;      /* workload identity from the environment; NULL when not set up */
    Oauth2Cached tok; /* its access token */
};

void abs_keyring_free(AbsKeyring *k) {
    if (!k) return;
    abs_creds_clear(&k->creds);
    pthread_mutex_destroy(&k->mu);
    objhttp_free_secret(k->env_sas);
    abs_wid_free(k->wid);
    oauth2_cached_clear(&k->tok);
    FREE_ALL(k->cred_path, k->endpoint, k);
}

/* The account alone ($AZURE_STORAGE_ACCOUNT) when workload identity has no credentials file. */
static int account_only(AbsKeyring *k, const StoreConfig *cfg) {
    const char *ep = store_env_prefix(cfg);
    const char *acct = store_env(cfg, "AZURE_STORAGE_ACCOUNT");
    if (!acct)
        return err_set(ERR_INVALID,
                       "ABS: workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, "
                       "AZURE_TENANT_ID) needs the storage account: set %sAZURE_STORAGE_ACCOUNT "
                       "or storageAccount in %sAZURE_APPLICATION_CREDENTIALS_JSON",
                       ep, ep);
    k->source = CRED_ACCOUNT_ONLY;
    char *a = strdup(acct);
    if (!a) return err_set(ERR_NOMEM, "ABS: out of memory");
    return creds_fill(&k->creds, a, NULL, NULL, NULL, "AZURE_STORAGE_ACCOUNT");
}

/* Reads the credentials cfg names into k. */
static int keyring_load(AbsKeyring *k, const StoreConfig *cfg) {
    const char *path = cfg->credentials && cfg->credentials[0] ? cfg->credentials : NULL;
    if (!path) path = store_env(cfg, "AZURE_APPLICATION_CREDENTIALS_JSON");
    if (!path) path = store_env(cfg, "AZURE_APPLICATION_CREDENTIALS");
    const char *cs = store_env(cfg, "AZURE_STORAGE_CONNECTION_STRING");
    const char *ep = store_env_prefix(cfg);
    int rc;
    if (path) {
        k->source = CRED_FILE;
        k->cred_path = strdup(path);
        if (!k->cred_path) return err_set(ERR_NOMEM, "ABS: out of memory");
        objhttp_creds_stamp(path, k->stamp, sizeof k->stamp);
        rc = abs_creds_load(path, &k->creds);
        if (rc == ERR_NOT_FOUND) rc = ERR_INVALID;
    } else if (cs) {
        k->source = CRED_CONNSTR;
        rc = abs_creds_from_connection_string(cs, &k->creds);
    } else if (k->wid) {
        rc = account_only(k, cfg);
    } else {
        rc = err_set(ERR_INVALID,
                     "ABS: no credentials: set %sAZURE_APPLICATION_CREDENTIALS_JSON, "
                     "%sAZURE_APPLICATION_CREDENTIALS or %sAZURE_STORAGE_CONNECTION_STRING, or "
                     "workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, "
                     "AZURE_TENANT_ID)",
                     ep, ep, ep);
    }
    if (rc == 0 && !k->creds.key && !k->creds.sas && !k->env_sas && !k->wid)
        rc = err_set(ERR_INVALID,
                     "ABS: the credentials have neither storageKey nor sasToken, "
                     "%sAZURE_STORAGE_SAS_TOKEN is not set, and no workload identity "
                     "(AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID) is",
                     ep);
    return rc;
}

int abs_keyring_new(const StoreConfig *cfg, const char *endpoint, AbsKeyring **out) {
    *out = NULL;
    AbsKeyring *k = calloc(1, sizeof *k);
    if (!k) return err_set(ERR_NOMEM, "ABS: out of memory");
    pthread_mutex_init(&k->mu, NULL);
    const char *sas = store_env(cfg, "AZURE_STORAGE_SAS_TOKEN");
    if (sas) k->env_sas = strdup(sas[0] == '?' ? sas + 1 : sas);
    if (endpoint) k->endpoint = strdup(endpoint);
    int rc = (sas && !k->env_sas) || (endpoint && !k->endpoint)
                 ? err_set(ERR_NOMEM, "ABS: out of memory")
                 : abs_wid_from_env(&k->wid);
    if (rc == 0) rc = keyring_load(k, cfg);
    RETURN_BUILT(rc, out, k, abs_keyring_free(k));
}

const char *abs_keyring_account(const AbsKeyring *k) {
    return k->creds.account;
}

int abs_keyring_bearer(AbsKeyring *k) {
    pthread_mutex_lock(&k->mu);
    int b = k->wid && !k->creds.key && !k->creds.sas && !k->env_sas;
    pthread_mutex_unlock(&k->mu);
    return b;
}

void abs_req_creds_clear(AbsReqCreds *r) {
    FREE_SECRETS(r->sas, r->bearer);
    OPENSSL_cleanse(r, sizeof *r);
}

/* Re-reads the credentials files when they changed (a rotated secret); caller holds mu. */
static void keyring_refresh_locked(AbsKeyring *k) {
    if (k->source != CRED_FILE) return;
    char st[256];
    objhttp_creds_stamp(k->cred_path, st, sizeof st);
    if (strcmp(st, k->stamp) == 0) return;
    AbsCreds nc;
    if (abs_creds_load(k->cred_path, &nc) == 0) {
        abs_creds_clear(&k->creds);
        k->creds = nc;
        snprintf(k->stamp, sizeof k->stamp, "%s", st);
        log_info("ABS: credentials re-read from %s (changed)", k->cred_path);
    } else {
        log_warn("ABS: credentials %s changed but cannot be read (%s); keeping the "
                 "previous ones",
                 k->cred_path, err_msg());
    }
}

/* r->base (and r->base_pathoff) for the account of c; 0 or ERR_INVALID. */
static int req_base(const AbsKeyring *k, const AbsCreds *c, AbsReqCreds *r) {
    const char *ep = k->endpoint ? k->endpoint : c->blob_endpoint;
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
    if (n < 0 || (size_t)n >= sizeof r->base) return err_set(ERR_INVALID, "ABS: endpoint too long");
    return 0;
}

/* r->bearer from the cached token, fetched first when due; caller holds mu. */
static int bearer_locked(AbsKeyring *k, ObjHttp *http, AbsReqCreds *r) {
    if (!oauth2_cached_fresh(&k->tok)) {
        char *tok = NULL;
        int64_t ex = 0;
        int rc = abs_wid_token(k->wid, http, &tok, &ex);
        if (rc) return err_wrap(rc, "ABS account %s", k->creds.account);
        oauth2_cached_set(&k->tok, tok, ex);
        log_debug("ABS: workload identity access token obtained (expires in %lld s, fetch %ld)",
                  (long long)ex, k->tok.gen);
    }
    r->bearer = objhttp_strfmt("Authorization: Bearer %s", k->tok.token);
    r->gen = k->tok.gen;
    return r->bearer ? 0 : err_set(ERR_NOMEM, "ABS: out of memory");
}

int abs_keyring_get(AbsKeyring *k, ObjHttp *http, AbsReqCreds *r) {
    memset(r, 0, sizeof *r);
    int rc = 0;
    pthread_mutex_lock(&k->mu);
    keyring_refresh_locked(k);
    const AbsCreds *c = &k->creds;
    if (strlen(c->account) >= sizeof r->account || c->key_len > sizeof r->key) {
        rc = err_set(ERR_INVALID, "ABS: storage account name or key too long");
        goto done;
    }
    snprintf(r->account, sizeof r->account, "%s", c->account);
    if (c->key) memcpy(r->key, c->key, c->key_len);
    r->key_len = c->key_len;
    const char *sas = c->sas ? c->sas : k->env_sas;
    if (!c->key && sas) {
        r->sas = strdup(sas);
        if (!r->sas) rc = err_set(ERR_NOMEM, "ABS: out of memory");
    } else if (!c->key && k->wid) {
        rc = bearer_locked(k, http, r);
    }
    if (rc == 0) rc = req_base(k, c, r);
done:
    pthread_mutex_unlock(&k->mu);
    if (rc) abs_req_creds_clear(r);
    return rc;
}

void abs_keyring_invalidate(AbsKeyring *k, long gen) {
    pthread_mutex_lock(&k->mu);
    oauth2_cached_drop(&k->tok, gen);
    pthread_mutex_unlock(&k->mu);
}
