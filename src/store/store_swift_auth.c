/* store_swift_auth: the Swift driver's credentials and authentication (store_swift.h): the
 * credentials file, directory or OS_* environment as the Go tool reads them, tempauth/swauth v1
 * (GET <authURL> with X-Auth-User/X-Auth-Key: X-Auth-Token and X-Storage-Url) and Keystone v3
 * (POST /v3/auth/tokens: X-Subject-Token, the object-store endpoint from the catalog), chosen by
 * the auth URL, and the session that holds the token and storage URL under its own mutex.
 * Tokens and passwords never reach messages or logs. */
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/log.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "store_swift.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SWIFT_AUTH_MAX_BODY ((size_t)8 << 20)

/* ---- credentials ---- */

void swift_creds_clear(SwiftCreds *c) {
    if (!c) return;
    FREE_SECRETS(c->password, c->app_cred_secret);
    FREE_ALL(c->auth_url, c->username, c->domain_name, c->tenant_name, c->region, c->app_cred_id,
             c->app_cred_name);
    memset(c, 0, sizeof *c);
}

/* The credential fields: JSON key = file name, and the OS_* variable. */
static const struct {
    const char *name;
    const char *env;
    size_t off;
} fields[] = {
    {"authURL", "OS_AUTH_URL", offsetof(SwiftCreds, auth_url)},
    {"username", "OS_USERNAME", offsetof(SwiftCreds, username)},
    {"password", "OS_PASSWORD", offsetof(SwiftCreds, password)},
    {"domainName", "OS_DOMAIN_NAME", offsetof(SwiftCreds, domain_name)},
    {"tenantName", "OS_TENANT_NAME", offsetof(SwiftCreds, tenant_name)},
    {"region", "OS_REGION_NAME", offsetof(SwiftCreds, region)},
    {"applicationCredentialID", "OS_APPLICATION_CREDENTIAL_ID", offsetof(SwiftCreds, app_cred_id)},
    {"applicationCredentialName", "OS_APPLICATION_CREDENTIAL_NAME",
     offsetof(SwiftCreds, app_cred_name)},
    {"applicationCredentialSecret", "OS_APPLICATION_CREDENTIAL_SECRET",
     offsetof(SwiftCreds, app_cred_secret)},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static char **field_slot(SwiftCreds *c, size_t i) {
    return (char **)((char *)c + fields[i].off);
}

static int set(const char *v) {
    return v && v[0];
}

int swift_creds_check(const SwiftCreds *c, const char *where) {
    if (!set(c->auth_url)) return err_set(ERR_INVALID, "Swift credentials %s: no authURL", where);
    if (strncmp(c->auth_url, "http://", 7) != 0 && strncmp(c->auth_url, "https://", 8) != 0)
        return err_set(ERR_INVALID,
                       "Swift credentials %s: authURL must start with http:// or https://", where);
    int user = set(c->password);
    int app = set(c->app_cred_id) || set(c->app_cred_name) || set(c->app_cred_secret);
    if (user && app)
        return err_set(ERR_INVALID,
                       "Swift credentials %s: both a password and an application credential are "
                       "set; use username + password or applicationCredentialID/Name + "
                       "applicationCredentialSecret, not both",
                       where);
    if (app) {
        if (!set(c->app_cred_secret))
            return err_set(ERR_INVALID,
                           "Swift credentials %s: applicationCredentialSecret is missing", where);
        if (!set(c->app_cred_id) && !(set(c->app_cred_name) && set(c->username)))
            return err_set(ERR_INVALID,
                           "Swift credentials %s: an application credential needs "
                           "applicationCredentialID, or applicationCredentialName and username",
                           where);
        return 0;
    }
    if (!set(c->username) || !user)
        return err_set(ERR_INVALID,
                       "Swift credentials %s: username and password (or an application "
                       "credential) are required",
                       where);
    return 0;
}

int swift_creds_load(const char *path, SwiftCreds *out) {
    const char *names[N_FIELDS];
    char *v[N_FIELDS];
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < N_FIELDS; i++)
        names[i] = fields[i].name;
    int rc = objhttp_creds_read(path, "Swift", names, N_FIELDS, v);
    if (rc) return rc;
    for (size_t i = 0; i < N_FIELDS; i++)
        *field_slot(out, i) = v[i];
    rc = swift_creds_check(out, path);
    if (rc) swift_creds_clear(out);
    return rc;
}

/* getenv(prefix + name). */
static const char *penv(const char *prefix, const char *name) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return getenv(full);
}

int swift_creds_from_env(const char *env_prefix, SwiftCreds *out) {
    memset(out, 0, sizeof *out);
    const char *ep = env_prefix ? env_prefix : "";
    const char *url = penv(ep, "OS_AUTH_URL");
    if (!set(url)) return err_set(ERR_NOT_FOUND, "Swift: %sOS_AUTH_URL is not set", ep);
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *v = penv(ep, fields[i].env);
        /* gophercloud: OS_PROJECT_NAME is the newer name of OS_TENANT_NAME and wins */
        if (fields[i].off == offsetof(SwiftCreds, tenant_name) && set(penv(ep, "OS_PROJECT_NAME")))
            v = penv(ep, "OS_PROJECT_NAME");
        if (fields[i].off == offsetof(SwiftCreds, domain_name) && !set(v))
            v = penv(ep, "OS_USER_DOMAIN_NAME");
        if (!set(v)) continue;
        char **slot = field_slot(out, i);
        *slot = strdup(v);
        if (!*slot) {
            swift_creds_clear(out);
            return err_set(ERR_NOMEM, "Swift credentials: out of memory");
        }
    }
    int rc = swift_creds_check(out, "(OS_* environment)");
    if (rc) swift_creds_clear(out);
    return rc;
}

/* ---- auth helpers ---- */

static int ends_with(const char *s, size_t l, const char *suf) {
    size_t n = strlen(suf);
    return l >= n && strncmp(s + l - n, suf, n) == 0;
}

/* Length of url without its query and trailing '/'. */
static size_t path_len(const char *url) {
    size_t l = strcspn(url, "?#");
    while (l > 0 && url[l - 1] == '/')
        l--;
    return l;
}

int swift_auth_is_v1(const char *auth_url) {
    size_t l = path_len(auth_url);
    return ends_with(auth_url, l, "/auth/v1.0") || ends_with(auth_url, l, "/auth/v1") ||
           ends_with(auth_url, l, "/v1.0");
}

char *swift_keystone_tokens_url(const char *auth_url) {
    size_t l = path_len(auth_url);
    const char *tail = ends_with(auth_url, l, "/v3") ? "/auth/tokens" : "/v3/auth/tokens";
    size_t n = l + strlen(tail) + 1;
    char *u = malloc(n);
    if (u) snprintf(u, n, "%.*s%s", (int)l, auth_url, tail);
    return u;
}

/* {"name": name, "domain": {"name": domain}} (domain "Default" when unset). */
static json_t *named_in_domain(const char *name, const char *domain) {
    return json_pack("{s:s, s:{s:s}}", "name", name, "domain", "name",
                     set(domain) ? domain : "Default");
}

char *swift_keystone_body(const SwiftCreds *c) {
    json_t *identity = NULL, *auth = NULL;
    if (set(c->app_cred_secret)) {
        json_t *ac =
            set(c->app_cred_id)
                ? json_pack("{s:s, s:s}", "id", c->app_cred_id, "secret", c->app_cred_secret)
                : json_pack("{s:s, s:o, s:s}", "name", c->app_cred_name, "user",
                            named_in_domain(c->username, c->domain_name), "secret",
                            c->app_cred_secret);
        identity = json_pack("{s:[s], s:o}", "methods", "application_credential",
                             "application_credential", ac);
        auth = json_pack("{s:{s:o}}", "auth", "identity", identity);
    } else {
        json_t *user = named_in_domain(c->username ? c->username : "", c->domain_name);
        if (user)
            json_object_set_new(user, "password", json_string(c->password ? c->password : ""));
        identity = json_pack("{s:[s], s:{s:o}}", "methods", "password", "password", "user", user);
        if (set(c->tenant_name))
            auth = json_pack("{s:{s:o, s:{s:o}}}", "auth", "identity", identity, "scope", "project",
                             named_in_domain(c->tenant_name, c->domain_name));
        else
            auth = json_pack("{s:{s:o}}", "auth", "identity", identity);
    }
    if (!auth) return NULL;
    char *s = json_dumps(auth, JSON_COMPACT);
    /* wipe jansson's copies of the secret */
    json_t *sec = json_object_get(
        json_object_get(json_object_get(json_object_get(auth, "auth"), "identity"),
                        set(c->app_cred_secret) ? "application_credential" : "password"),
        set(c->app_cred_secret) ? "secret" : "user");
    if (json_is_object(sec)) sec = json_object_get(sec, "password");
    if (json_is_string(sec)) {
        char *v = (char *)json_string_value(sec);
        OPENSSL_cleanse(v, strlen(v));
    }
    json_decref(auth);
    return s;
}

int swift_catalog_lookup(const char *json, size_t len, const char *region, char **url) {
    *url = NULL;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    json_t *catalog = json_object_get(json_object_get(root, "token"), "catalog");
    if (!json_is_array(catalog)) {
        json_decref(root);
        return err_set(ERR_CORRUPT, "Swift auth: the Keystone answer has no token catalog");
    }
    char seen[256] = "";
    size_t so = 0;
    int rc = ERR_NOT_FOUND;
    size_t i, j;
    json_t *svc, *ep;
    json_array_foreach(catalog, i, svc) {
        const char *type = json_string_value(json_object_get(svc, "type"));
        json_t *eps = json_object_get(svc, "endpoints");
        if (!type || strcmp(type, "object-store") != 0 || !json_is_array(eps)) continue;
        json_array_foreach(eps, j, ep) {
            const char *iface = json_string_value(json_object_get(ep, "interface"));
            const char *r = json_string_value(json_object_get(ep, "region"));
            const char *rid = json_string_value(json_object_get(ep, "region_id"));
            const char *u = json_string_value(json_object_get(ep, "url"));
            if (!iface || strcmp(iface, "public") != 0 || !u || !u[0]) continue;
            if (set(region) && !(r && strcmp(r, region) == 0) &&
                !(rid && strcmp(rid, region) == 0)) {
                const char *name = r ? r : rid ? rid : "?";
                if (so < sizeof seen - 1)
                    so +=
                        (size_t)snprintf(seen + so, sizeof seen - so, "%s%s", so ? ", " : "", name);
                if (so >= sizeof seen) so = sizeof seen - 1;
                continue;
            }
            size_t l = strlen(u);
            while (l > 0 && u[l - 1] == '/')
                l--;
            *url = strndup(u, l);
            rc = *url ? 0 : err_set(ERR_NOMEM, "Swift auth: out of memory");
            goto done;
        }
    }
    if (set(region))
        err_set(ERR_NOT_FOUND,
                "Swift auth: no public object-store endpoint in region %s in the service catalog "
                "(regions seen: %s)",
                region, so ? seen : "none");
    else
        err_set(ERR_NOT_FOUND,
                "Swift auth: no public object-store endpoint in the service catalog");
done:
    json_decref(root);
    return rc;
}

/* ---- the session ---- */

struct SwiftSession {
    SwiftCreds creds;
    char *container;    /* for messages */
    char *endpoint;     /* --store-endpoint-override (no trailing '/'); NULL = none */
    char *region;       /* catalog region (Keystone) */
    pthread_mutex_t mu; /* guards token, storage_url, gen; held during authentication */
    char *token;
    char *storage_url; /* no trailing '/' */
    unsigned gen;      /* bumped by every authentication */
};

void swift_session_free(SwiftSession *s) {
    if (!s) return;
    swift_creds_clear(&s->creds);
    pthread_mutex_destroy(&s->mu);
    objhttp_free_secret(s->token);
    FREE_ALL(s->storage_url, s->container, s->endpoint, s->region, s);
}

/* The credentials cfg names into s->creds, and the region. */
static int session_creds(SwiftSession *s, const StoreConfig *cfg) {
    const char *path = cfg->credentials && cfg->credentials[0] ? cfg->credentials : NULL;
    if (!path) path = store_env(cfg, "OPENSTACK_APPLICATION_CREDENTIALS_JSON");
    if (!path) path = store_env(cfg, "OPENSTACK_APPLICATION_CREDENTIALS");
    int rc;
    if (path) {
        rc = swift_creds_load(path, &s->creds);
        if (rc == ERR_NOT_FOUND) rc = ERR_INVALID;
    } else {
        rc = swift_creds_from_env(store_env_prefix(cfg), &s->creds);
        if (rc == ERR_NOT_FOUND)
            rc = err_set(ERR_INVALID,
                         "Swift: no credentials: set %1$sOPENSTACK_APPLICATION_CREDENTIALS_JSON, "
                         "%1$sOPENSTACK_APPLICATION_CREDENTIALS or the %1$sOS_* environment "
                         "(%1$sOS_AUTH_URL, %1$sOS_USERNAME, %1$sOS_PASSWORD, ...)",
                         store_env_prefix(cfg));
    }
    if (rc) return rc;
    const char *region = cfg->region && cfg->region[0] ? cfg->region : s->creds.region;
    if (!set(region)) region = store_env(cfg, "OS_REGION_NAME");
    if (region && !(s->region = strdup(region))) return err_set(ERR_NOMEM, "Swift: out of memory");
    return 0;
}

int swift_session_new(const StoreConfig *cfg, const char *container, const char *endpoint,
                      SwiftSession **out) {
    *out = NULL;
    SwiftSession *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "Swift: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    s->container = strdup(container);
    if (endpoint) s->endpoint = strdup(endpoint);
    int rc = !s->container || (endpoint && !s->endpoint)
                 ? err_set(ERR_NOMEM, "Swift: out of memory")
                 : session_creds(s, cfg);
    RETURN_BUILT(rc, out, s, swift_session_free(s));
}

int swift_session_get(SwiftSession *s, char **header, char **storage_url, unsigned *gen) {
    pthread_mutex_lock(&s->mu);
    *gen = s->gen;
    *header = s->token ? objhttp_header_line("X-Auth-Token", s->token) : NULL;
    *storage_url = s->storage_url ? strdup(s->storage_url) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (*header && *storage_url) return 0;
    objhttp_free_secret(*header);
    free(*storage_url);
    *header = *storage_url = NULL;
    return ERR_NOT_FOUND;
}

const char *swift_session_url(const SwiftSession *s) {
    return s->storage_url;
}

/* Applies the endpoint override to url (owned; replaced). */
static int apply_override(const SwiftSession *d, char **url) {
    if (!d->endpoint) return 0;
    const char *hs = strstr(d->endpoint, "://");
    const char *epath = hs ? strchr(hs + 3, '/') : NULL;
    char *n;
    if (epath && epath[1]) {
        n = strdup(d->endpoint);
    } else {
        const char *uh = strstr(*url, "://");
        const char *upath = uh ? strchr(uh + 3, '/') : NULL;
        size_t el = epath ? (size_t)(epath - d->endpoint) : strlen(d->endpoint);
        size_t sz = el + (upath ? strlen(upath) : 0) + 1;
        n = malloc(sz);
        if (n) snprintf(n, sz, "%.*s%s", (int)el, d->endpoint, upath ? upath : "");
    }
    if (!n) return err_set(ERR_NOMEM, "Swift auth: out of memory");
    free(*url);
    *url = n;
    size_t l = strlen(n);
    while (l > 0 && n[l - 1] == '/')
        n[--l] = '\0';
    return 0;
}

/* Explains an authentication failure: 401/403 are the credentials. */
static int auth_failed(const SwiftSession *d, int rc, const ObjHttpResponse *r, const char *url) {
    if (rc != 0 && (r->status == 401 || r->status == 403)) {
        char *red = objhttp_redact_url(url);
        rc = err_set(ERR_INVALID,
                     "Swift auth: %s answered HTTP %ld: the credentials were refused (Swift "
                     "refused the credentials for bucket %s: check username and password, or "
                     "the application credential)",
                     red ? red : "the auth URL", r->status, d->container ? d->container : "");
        free(red);
    }
    return rc;
}

static int auth_v1(SwiftSession *d, ObjHttp *http, char **token, char **url) {
    const SwiftCreds *c = &d->creds;
    char *user = NULL;
    if (!strchr(c->username, ':') && set(c->tenant_name)) {
        size_t n = strlen(c->tenant_name) + strlen(c->username) + 2;
        user = malloc(n);
        if (user) snprintf(user, n, "%s:%s", c->tenant_name, c->username);
    } else {
        user = strdup(c->username);
    }
    char *hu = user ? objhttp_header_line("X-Auth-User", user) : NULL;
    char *hk = objhttp_header_line("X-Auth-Key", c->password);
    free(user);
    int rc = 0;
    ObjHttpResponse r = {0};
    if (!hu || !hk) {
        rc = err_set(ERR_NOMEM, "Swift auth: out of memory");
        goto done;
    }
    const char *h[2] = {hu, hk};
    ObjHttpRequest req = {.method = "GET", .url = c->auth_url, .headers = h, .n_headers = 2};
    rc = auth_failed(d, objhttp_do(http, &req, &r), &r, c->auth_url);
    if (rc) goto done;
    char tok[4096], su[4096];
    rc = objhttp_response_header_fit(&r, "X-Auth-Token", tok, sizeof tok, "Swift auth");
    if (rc == ERR_NOT_FOUND)
        rc = objhttp_response_header_fit(&r, "X-Storage-Token", tok, sizeof tok, "Swift auth");
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_IO, "Swift auth: GET %s: no X-Auth-Token in the answer", c->auth_url);
    if (rc) goto done;
    rc = objhttp_response_header_fit(&r, "X-Storage-Url", su, sizeof su, "Swift auth");
    if (rc) {
        OPENSSL_cleanse(tok, sizeof tok);
        if (rc == ERR_NOT_FOUND)
            rc = err_set(ERR_IO, "Swift auth: GET %s: no X-Storage-Url in the answer", c->auth_url);
        goto done;
    }
    *token = strdup(tok);
    size_t l = strlen(su);
    while (l > 0 && su[l - 1] == '/')
        l--;
    *url = strndup(su, l);
    OPENSSL_cleanse(tok, sizeof tok);
    if (!*token || !*url) rc = err_set(ERR_NOMEM, "Swift auth: out of memory");
done:
    objhttp_free_secret(hu);
    objhttp_free_secret(hk);
    objhttp_response_clear(&r);
    return rc;
}

static int auth_v3(SwiftSession *d, ObjHttp *http, char **token, char **url) {
    char *turl = swift_keystone_tokens_url(d->creds.auth_url);
    char *body = swift_keystone_body(&d->creds);
    ObjHttpResponse r = {0};
    int rc = 0;
    if (!turl || !body) {
        rc = err_set(ERR_NOMEM, "Swift auth: out of memory");
        goto done;
    }
    const char *h[1] = {"Content-Type: application/json"};
    ObjHttpRequest req = {.method = "POST",
                          .url = turl,
                          .headers = h,
                          .n_headers = 1,
                          .body = body,
                          .body_len = strlen(body),
                          .max_body = SWIFT_AUTH_MAX_BODY};
    rc = auth_failed(d, objhttp_do(http, &req, &r), &r, turl);
    if (rc) goto done;
    char tok[8192];
    rc = objhttp_response_header_fit(&r, "X-Subject-Token", tok, sizeof tok, "Swift auth");
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_IO, "Swift auth: POST %s: no X-Subject-Token in the answer", turl);
    if (rc) goto done;
    rc = swift_catalog_lookup(r.body, r.body_len, d->region, url);
    if (rc == 0) {
        *token = strdup(tok);
        if (!*token) rc = err_set(ERR_NOMEM, "Swift auth: out of memory");
    }
    OPENSSL_cleanse(tok, sizeof tok);
done:
    objhttp_free_secret(body);
    free(turl);
    objhttp_response_clear(&r);
    return rc;
}

int swift_session_auth(SwiftSession *d, ObjHttp *http, unsigned seen) {
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    if (d->token && d->gen != seen) goto done;
    char *tok = NULL, *url = NULL;
    rc = swift_auth_is_v1(d->creds.auth_url) ? auth_v1(d, http, &tok, &url)
                                             : auth_v3(d, http, &tok, &url);
    if (rc == 0) rc = apply_override(d, &url);
    if (rc) {
        objhttp_free_secret(tok);
        free(url);
        goto done;
    }
    objhttp_free_secret(d->token);
    free(d->storage_url);
    d->token = tok;
    d->storage_url = url;
    d->gen++;
    log_debug("Swift: authenticated at %s (storage URL %s)", d->creds.auth_url, url);
done:
    pthread_mutex_unlock(&d->mu);
    return rc;
}
