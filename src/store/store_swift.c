/* store_swift: the OpenStack Swift driver (store_swift.h). Authentication is tempauth/swauth v1
 * (GET <authURL> with X-Auth-User/X-Auth-Key: X-Auth-Token and X-Storage-Url) or Keystone v3
 * (POST /v3/auth/tokens: X-Subject-Token, the object-store endpoint from the catalog), chosen by
 * the auth URL; a request answered 401 re-authenticates once and is sent again. Writes upload
 * segments of a Dynamic Large Object (up to max_parallel_chunk_uploads in flight, so memory is
 * bounded by the segments in flight) and then the manifest; an object that fits in one segment
 * is one PUT. Every request goes through objhttp (retries, streaming, redacted errors); tokens
 * and passwords never reach messages or logs. */
#include "store_swift.h"
#include "../common/err.h"
#include "../common/log.h"
#include "objhttp.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define SWIFT_DEFAULT_SEGMENT ((int64_t)5 << 20)
#define SWIFT_MAX_OBJECT ((int64_t)5 << 30)
#define SWIFT_DEFAULT_PARALLEL 5
#define SWIFT_MAX_KEY 1024
#define SWIFT_LIST_MAX_BODY ((size_t)16 << 20) /* 10,000 names: about 2 MiB */
#define SWIFT_AUTH_MAX_BODY ((size_t)8 << 20)
#define SWIFT_MAX_PAGE 10000 /* Swift's default container_listing_limit */

/* ---- credentials ---- */

void swift_creds_clear(SwiftCreds *c) {
    if (!c) return;
    free(c->auth_url);
    free(c->username);
    objhttp_free_secret(c->password);
    free(c->domain_name);
    free(c->tenant_name);
    free(c->region);
    free(c->app_cred_id);
    free(c->app_cred_name);
    objhttp_free_secret(c->app_cred_secret);
    memset(c, 0, sizeof *c);
}

/* The credential fields: JSON key = file name, and the OS_* variable. */
static const struct {
    const char *name;
    const char *env;
    size_t off;
    int secret;
} fields[] = {
    {"authURL", "OS_AUTH_URL", offsetof(SwiftCreds, auth_url), 0},
    {"username", "OS_USERNAME", offsetof(SwiftCreds, username), 0},
    {"password", "OS_PASSWORD", offsetof(SwiftCreds, password), 1},
    {"domainName", "OS_DOMAIN_NAME", offsetof(SwiftCreds, domain_name), 0},
    {"tenantName", "OS_TENANT_NAME", offsetof(SwiftCreds, tenant_name), 0},
    {"region", "OS_REGION_NAME", offsetof(SwiftCreds, region), 0},
    {"applicationCredentialID", "OS_APPLICATION_CREDENTIAL_ID", offsetof(SwiftCreds, app_cred_id),
     0},
    {"applicationCredentialName", "OS_APPLICATION_CREDENTIAL_NAME",
     offsetof(SwiftCreds, app_cred_name), 0},
    {"applicationCredentialSecret", "OS_APPLICATION_CREDENTIAL_SECRET",
     offsetof(SwiftCreds, app_cred_secret), 1},
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

static int load_json(const char *path, SwiftCreds *out) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return err_set(ERR_INVALID, "Swift credentials %s: not a JSON object (line %d)", path,
                       je.line);
    }
    int rc = 0;
    for (size_t i = 0; i < N_FIELDS && rc == 0; i++) {
        json_t *v = json_object_get(root, fields[i].name);
        if (!v) continue;
        if (!json_is_string(v)) {
            rc = err_set(ERR_INVALID, "Swift credentials %s: %s must be a string", path,
                         fields[i].name);
            break;
        }
        char **slot = field_slot(out, i);
        *slot = strdup(json_string_value(v));
        if (!*slot) rc = err_set(ERR_NOMEM, "Swift credentials: out of memory");
        if (fields[i].secret) { /* jansson's copy of a secret is wiped before it goes */
            char *s = (char *)json_string_value(v);
            OPENSSL_cleanse(s, strlen(s));
        }
    }
    json_decref(root);
    return rc;
}

int swift_creds_load(const char *path, SwiftCreds *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (!path || !path[0]) return err_set(ERR_INVALID, "Swift credentials: no path");
    if (stat(path, &st) != 0)
        return err_set(ERR_NOT_FOUND, "Swift credentials %s: does not exist", path);
    int rc = 0;
    if (!S_ISDIR(st.st_mode)) {
        rc = load_json(path, out);
    } else {
        char *js = objhttp_dir_first_json(path);
        if (js) {
            rc = load_json(js, out);
            free(js);
        } else {
            for (size_t i = 0; i < N_FIELDS; i++) {
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", path, fields[i].name);
                *field_slot(out, i) = objhttp_read_small_file(p);
            }
        }
    }
    if (rc == 0) rc = swift_creds_check(out, path);
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

/* ---- layout ---- */

int swift_is_segment(const char *key) {
    size_t l = strlen(key);
    if (l < 11 || key[l - 11] != '/') return 0;
    for (size_t i = l - 10; i < l; i++)
        if (key[i] < '0' || key[i] > '9') return 0;
    return 1;
}

int64_t swift_segment_size(int64_t min_chunk, int seg_no) {
    if (min_chunk <= 0) min_chunk = SWIFT_DEFAULT_SEGMENT;
    if (min_chunk > SWIFT_MAX_OBJECT) min_chunk = SWIFT_MAX_OBJECT;
    int shift = seg_no > 0 ? (seg_no - 1) / 333 : 0;
    int64_t s = min_chunk;
    for (int i = 0; i < shift && s <= SWIFT_MAX_OBJECT / 2; i++)
        s *= 2;
    return s;
}

int swift_parse_list(const char *json, size_t len, int include_segments, StoreDriverListCb cb,
                     void *ctx, size_t *n_entries, char **last) {
    *n_entries = 0;
    *last = NULL;
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!json_is_array(root)) {
        json_decref(root);
        return err_set(ERR_CORRUPT, "Swift list: not a JSON array (line %d: %s)", je.line, je.text);
    }
    int rc = 0;
    size_t i;
    json_t *e;
    const char *last_name = NULL;
    json_array_foreach(root, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name) {
            name = json_string_value(json_object_get(e, "subdir"));
            if (name) { /* only with a delimiter, which we never send */
                last_name = name;
                continue;
            }
            rc = err_set(ERR_CORRUPT, "Swift list: entry %zu has no name", i);
            break;
        }
        last_name = name;
        if (!name[0] || strlen(name) != json_string_length(json_object_get(e, "name"))) {
            rc = err_set(ERR_CORRUPT, "Swift list: entry %zu has an empty name or a NUL byte", i);
            break;
        }
        if (swift_is_segment(name) != include_segments) continue;
        json_t *b = json_object_get(e, "bytes");
        int64_t size =
            json_is_integer(b) && json_integer_value(b) > 0 ? (int64_t)json_integer_value(b) : -1;
        rc = cb(ctx, name, size);
        if (rc) break;
    }
    *n_entries = json_array_size(root);
    if (rc == 0 && last_name) {
        *last = strdup(last_name);
        if (!*last) rc = err_set(ERR_NOMEM, "Swift list: out of memory");
    }
    json_decref(root);
    return rc;
}

/* ---- the driver ---- */

typedef struct SwiftDriver {
    StoreDriver base;
    ObjHttp *http;
    char *container;
    char *describe;
    char *endpoint;  /* --store-endpoint-override: replaces the storage URL's scheme://host[:port]
                        (or the whole URL when it has a path); NULL = as authentication says */
    int64_t seg_min; /* --min-chunk-size */
    int parallel;
    int list_page; /* ETCDBR_SWIFT_LIST_PAGE_SIZE; 0 = the server's page size */
    SwiftCreds creds;
    char *region;       /* catalog region (Keystone) */
    pthread_mutex_t mu; /* guards token, storage_url, gen; held during authentication */
    char *token;
    char *storage_url; /* no trailing '/' */
    unsigned gen;      /* bumped by every authentication */
} SwiftDriver;

/* A secret header line "Name: value" (owned; objhttp_free_secret). */
static char *secret_header(const char *name, const char *value) {
    size_t n = strlen(name) + strlen(value) + 3;
    char *h = malloc(n);
    if (h) snprintf(h, n, "%s: %s", name, value);
    return h;
}

/* Applies the endpoint override to url (owned; replaced). */
static int apply_override(const SwiftDriver *d, char **url) {
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
static int auth_failed(const SwiftDriver *d, int rc, const ObjHttpResponse *r, const char *url) {
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

static int auth_v1(SwiftDriver *d, char **token, char **url) {
    const SwiftCreds *c = &d->creds;
    char *user = NULL;
    if (!strchr(c->username, ':') && set(c->tenant_name)) {
        size_t n = strlen(c->tenant_name) + strlen(c->username) + 2;
        user = malloc(n);
        if (user) snprintf(user, n, "%s:%s", c->tenant_name, c->username);
    } else {
        user = strdup(c->username);
    }
    char *hu = user ? secret_header("X-Auth-User", user) : NULL;
    char *hk = secret_header("X-Auth-Key", c->password);
    free(user);
    int rc = 0;
    ObjHttpResponse r = {0};
    if (!hu || !hk) {
        rc = err_set(ERR_NOMEM, "Swift auth: out of memory");
        goto done;
    }
    const char *h[2] = {hu, hk};
    ObjHttpRequest req = {.method = "GET", .url = c->auth_url, .headers = h, .n_headers = 2};
    rc = auth_failed(d, objhttp_do(d->http, &req, &r), &r, c->auth_url);
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

static int auth_v3(SwiftDriver *d, char **token, char **url) {
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
    rc = auth_failed(d, objhttp_do(d->http, &req, &r), &r, turl);
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

/* Authenticates unless another thread already did since generation seen (d->mu held by none). */
static int reauth(SwiftDriver *d, unsigned seen) {
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    if (d->token && d->gen != seen) goto done;
    char *tok = NULL, *url = NULL;
    rc = swift_auth_is_v1(d->creds.auth_url) ? auth_v1(d, &tok, &url) : auth_v3(d, &tok, &url);
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

typedef struct TokenCtx {
    const char *header; /* "X-Auth-Token: ..." */
} TokenCtx;

static int token_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    TokenCtx *t = ctx;
    struct curl_slist *n = curl_slist_append(*headers, t->header);
    if (!n) return err_set(ERR_NOMEM, "Swift: out of memory");
    *headers = n;
    return 0;
}

/* One call on the container (key NULL) or an object, with an encoded query (may be NULL). */
typedef struct SwiftCall {
    const char *method;
    const char *key;
    const char *query;
    const char *const *headers;
    size_t nh;
    const void *body;
    size_t body_len;
    size_t max_body;
} SwiftCall;

/* Sends c (buffered into resp, or streamed into *stream for a GET when stream is non-NULL). A 401
 * re-authenticates once and sends the call again. */
static int swift_do(SwiftDriver *d, const SwiftCall *c, ObjHttpResponse *resp,
                    ObjHttpStream **stream) {
    int rc = 0;
    char *ekey = NULL, *econt = objhttp_pct_encode(d->container, 0);
    if (!econt) return err_set(ERR_NOMEM, "Swift: out of memory");
    if (c->key && !(ekey = objhttp_pct_encode(c->key, 1))) {
        free(econt);
        return err_set(ERR_NOMEM, "Swift: out of memory");
    }
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&d->mu);
        unsigned gen = d->gen;
        char *hdr = d->token ? secret_header("X-Auth-Token", d->token) : NULL;
        char *base = d->storage_url ? strdup(d->storage_url) : NULL;
        pthread_mutex_unlock(&d->mu);
        if (!hdr || !base) {
            objhttp_free_secret(hdr);
            free(base);
            if (attempt == 0 && (rc = reauth(d, gen)) == 0) continue;
            if (!rc) rc = err_set(ERR_NOMEM, "Swift: out of memory");
            break;
        }
        size_t n = strlen(base) + strlen(econt) + (ekey ? strlen(ekey) : 0) +
                   (c->query ? strlen(c->query) : 0) + 4;
        char *url = malloc(n);
        if (url)
            snprintf(url, n, "%s/%s%s%s%s%s", base, econt, ekey ? "/" : "", ekey ? ekey : "",
                     c->query ? "?" : "", c->query ? c->query : "");
        free(base);
        if (!url) {
            objhttp_free_secret(hdr);
            rc = err_set(ERR_NOMEM, "Swift: out of memory");
            break;
        }
        TokenCtx tc = {hdr};
        ObjHttpRequest req = {
            .method = c->method,
            .url = url,
            .headers = c->headers,
            .n_headers = c->nh,
            .body = c->body,
            .body_len = c->body_len,
            .max_body = c->max_body,
            .auth = token_hook,
            .auth_ctx = &tc,
        };
        if (resp) objhttp_response_clear(resp);
        ObjHttpResponse local = {0};
        ObjHttpResponse *r = resp ? resp : &local;
        if (stream)
            rc = objhttp_stream_open(d->http, &req, r, stream);
        else
            rc = objhttp_do(d->http, &req, r);
        long status = r->status;
        objhttp_response_clear(&local);
        objhttp_free_secret(hdr);
        free(url);
        if (rc != 0 && status == 401 && attempt == 0) {
            log_info("Swift: %s %s: token refused (HTTP 401); authenticating again", c->method,
                     c->key ? c->key : d->container);
            int ar = reauth(d, gen);
            if (ar == 0) continue;
            rc = ar;
        }
        break;
    }
    free(ekey);
    free(econt);
    return rc;
}

static int key_ok(const char *key, const char *op) {
    return objhttp_key_ok("Swift", op, key, SWIFT_MAX_KEY, 0);
}

/* ---- list ---- */

/* Lists every object under prefix, segments or not (include_segments), page by page until an
 * empty page (as python-swiftclient does: a page may be shorter than asked when the server's
 * listing limit is lower). limit is sent only when ETCDBR_SWIFT_LIST_PAGE_SIZE sets one, since a
 * limit above the server's maximum is refused (412). */
static int list_prefix(SwiftDriver *d, const char *prefix, int include_segments,
                       StoreDriverListCb cb, void *ctx) {
    char *marker = NULL;
    int rc = 0;
    char page[16];
    snprintf(page, sizeof page, "%d", d->list_page);
    ObjHttpListing lg;
    objhttp_listing_begin(&lg, "Swift", d->container, prefix);
    for (;;) {
        rc = objhttp_listing_page(&lg, marker);
        if (rc != 0) break;
        const char *qn[4] = {"format", "prefix", "marker", "limit"};
        const char *qv[4] = {"json", prefix, marker, page};
        size_t nq = 2;
        if (marker) nq++;
        if (d->list_page > 0) {
            qn[nq] = "limit";
            qv[nq++] = page;
        }
        char *q = objhttp_query(qn, qv, nq);
        if (!q) {
            rc = err_set(ERR_NOMEM, "Swift list: out of memory");
            break;
        }
        SwiftCall c = {.method = "GET", .query = q, .max_body = SWIFT_LIST_MAX_BODY};
        ObjHttpResponse r = {0};
        rc = swift_do(d, &c, &r, NULL);
        free(q);
        size_t n = 0;
        char *last = NULL;
        if (rc == 0 && r.status == 204) { /* an empty container may answer 204 */
            objhttp_response_clear(&r);
            break;
        }
        if (rc == 0)
            rc = swift_parse_list(r.body, r.body_len, include_segments, cb, ctx, &n, &last);
        objhttp_response_clear(&r);
        free(marker);
        marker = last;
        if (rc || !marker || n == 0) break;
    }
    objhttp_listing_end(&lg);
    free(marker);
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_IO, "Swift list: container %s does not exist", d->container);
    return rc;
}

static int swift_list(StoreDriver *drv, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    return list_prefix((SwiftDriver *)drv, key_prefix, 0, cb, ctx);
}

/* ---- stat, remove ---- */

static int swift_stat(StoreDriver *drv, const char *key, int64_t *size) {
    SwiftDriver *d = (SwiftDriver *)drv;
    int rc = key_ok(key, "stat");
    if (rc) return rc;
    SwiftCall c = {.method = "HEAD", .key = key};
    ObjHttpResponse r = {0};
    rc = swift_do(d, &c, &r, NULL);
    if (rc == 0) {
        char v[32];
        char *ep = NULL;
        if (objhttp_response_header(&r, "Content-Length", v, sizeof v)) *size = strtoll(v, &ep, 10);
        if (!ep || *ep || *size < 0)
            rc = err_set(ERR_IO, "Swift stat %s: no Content-Length in the answer", key);
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "Swift stat %s: not found", key);
    }
    objhttp_response_clear(&r);
    return rc;
}

/* DELETE of one object; a missing one is ERR_NOT_FOUND. */
static int delete_object(SwiftDriver *d, const char *key) {
    SwiftCall c = {.method = "DELETE", .key = key};
    ObjHttpResponse r = {0};
    int rc = swift_do(d, &c, &r, NULL);
    objhttp_response_clear(&r);
    return rc;
}

typedef struct SegDel {
    SwiftDriver *d;
    const char *key; /* the object whose segments go */
    size_t key_len;
    int above; /* delete only segments numbered above this (0: all) */
    int deleted;
} SegDel;

/* Deletes a listed segment of exactly sd->key ("<key>/<10 digits>"): nothing of a sibling. */
static int seg_delete_cb(void *ctx, const char *name, int64_t size) {
    (void)size;
    SegDel *sd = ctx;
    if (strlen(name) != sd->key_len + 11 || strncmp(name, sd->key, sd->key_len) != 0 ||
        name[sd->key_len] != '/')
        return 0;
    if (atoi(name + sd->key_len + 1) <= sd->above) return 0;
    int rc = delete_object(sd->d, name);
    if (rc == ERR_NOT_FOUND) rc = 0;
    if (rc == 0) sd->deleted++;
    return rc;
}

/* Deletes the segments "<key>/<10 digits>" numbered above `above`. */
static int delete_segments(SwiftDriver *d, const char *key, int above, int *deleted) {
    size_t kl = strlen(key);
    char *prefix = malloc(kl + 2);
    if (!prefix) return err_set(ERR_NOMEM, "Swift: out of memory");
    snprintf(prefix, kl + 2, "%s/", key);
    SegDel sd = {d, key, kl, above, 0};
    int rc = list_prefix(d, prefix, 1, seg_delete_cb, &sd);
    free(prefix);
    if (deleted) *deleted = sd.deleted;
    return rc;
}

/* The manifest (or plain object) goes first, then its segments: a removal cut short leaves
 * invisible segments behind, never a visible manifest whose GET returns a truncated
 * concatenation. A missing object is ERR_NOT_FOUND, but its segments are still removed, so a
 * retry finishes what an interrupted removal started. */
static int swift_remove(StoreDriver *drv, const char *key) {
    SwiftDriver *d = (SwiftDriver *)drv;
    int rc = key_ok(key, "remove");
    if (rc) return rc;
    if (swift_is_segment(key))
        return err_set(ERR_INVALID, "Swift remove %s: a segment is removed with its manifest", key);
    rc = delete_object(d, key);
    if (rc != 0 && rc != ERR_NOT_FOUND) return rc;
    int deleted = 0;
    int src = delete_segments(d, key, 0, &deleted);
    if (src) return err_wrap(src, "Swift remove %s: the object is gone but not its segments", key);
    if (deleted) log_debug("Swift remove %s: %d segments removed", key, deleted);
    if (rc == ERR_NOT_FOUND) return err_set(ERR_NOT_FOUND, "Swift remove %s: not found", key);
    return 0;
}

/* ---- read ---- */

typedef struct SwiftReader {
    ObjHttpResumable r; /* first: key, offset, stream, resumes */
    SwiftDriver *d;
    /* of the first answer: a resumed read must see the same object */
    char etag[OBJHTTP_ETAG_MAX + 1];
} SwiftReader;

static int reader_open(ObjHttpResumable *res) {
    SwiftReader *a = (SwiftReader *)res;
    char range[64];
    const char *h[1] = {range};
    snprintf(range, sizeof range, "Range: bytes=%llu-", (unsigned long long)res->offset);
    SwiftCall c = {.method = "GET", .key = res->key, .headers = h, .nh = res->offset > 0 ? 1 : 0};
    ObjHttpResponse r = {0};
    int rc = swift_do(a->d, &c, &r, &res->s);
    if (rc != 0 && res->offset > 0 && r.status == 416) {
        int64_t size; /* at or past the end: an empty stream, if the object exists */
        rc = swift_stat(&a->d->base, res->key, &size);
        res->s = NULL;
    } else if (rc == ERR_NOT_FOUND) {
        rc = err_set(ERR_NOT_FOUND, "Swift read %s: not found", res->key);
    }
    char etag[sizeof a->etag] = "";
    if (rc == 0 && res->s) rc = objhttp_resumable_pin(res, &r, "ETag", etag, sizeof etag);
    if (rc == 0 && res->s && etag[0]) {
        if (!a->etag[0]) {
            snprintf(a->etag, sizeof a->etag, "%s", etag);
        } else if (strcmp(etag, a->etag) != 0) {
            objhttp_stream_free(res->s);
            res->s = NULL;
            rc = err_set(ERR_IO,
                         "Swift read %s: the object changed while it was read (ETag %s, "
                         "then %s)",
                         res->key, a->etag, etag);
        }
    }
    objhttp_response_clear(&r);
    return rc;
}

static int swift_open_read(StoreDriver *drv, const char *key, uint64_t offset, IoReader **out) {
    *out = NULL;
    int rc = key_ok(key, "read");
    if (rc) return rc;
    SwiftReader *a = calloc(1, sizeof *a);
    if (!a) return err_set(ERR_NOMEM, "Swift read: out of memory");
    a->d = (SwiftDriver *)drv;
    return objhttp_resumable_start(&a->r, "Swift", key, offset, reader_open, NULL, out);
}

/* ---- write ---- */

typedef struct SwiftWriter {
    StoreDriverWriter base;
    IoWriter io;
    SwiftDriver *d;
    char *key;
    ObjHttpPartWriter *pw; /* the segments (objhttp.h) */
} SwiftWriter;

static void seg_key(const char *key, int num, char *out, size_t cap) {
    snprintf(out, cap, "%s/%010d", key, num);
}

static int put_segment(void *ctx, int num, const void *data, size_t len) {
    SwiftWriter *w = ctx;
    char k[SWIFT_MAX_KEY + 16];
    seg_key(w->key, num, k, sizeof k);
    SwiftCall c = {.method = "PUT", .key = k, .body = data, .body_len = len};
    ObjHttpResponse r = {0};
    int rc = swift_do(w->d, &c, &r, NULL);
    objhttp_response_clear(&r);
    if (rc) err_wrap(rc, "Swift write %s: segment %d", w->key, num);
    return rc;
}

/* Before the first segment: an existing object under the key is ERR_EXISTS, since its segments
 * would be overwritten before the manifest's If-None-Match could refuse (a writer racing between
 * this check and the manifest still can: the segment names are the Go tool's, fixed per key). */
static int before_segment(void *ctx, int num) {
    SwiftWriter *w = ctx;
    if (num > 1) return 0;
    int64_t size;
    int rc = swift_stat(&w->d->base, w->key, &size);
    if (rc == 0) return err_set(ERR_EXISTS, "Swift write %s: the object already exists", w->key);
    return rc == ERR_NOT_FOUND ? 0 : rc;
}

static size_t segment_size(void *ctx, int num) {
    return (size_t)swift_segment_size(((SwiftWriter *)ctx)->d->seg_min, num);
}

static IoWriter *writer_io(StoreDriverWriter *sw) {
    return objhttp_pw_io(((SwiftWriter *)sw)->pw);
}

/* Stops the uploaders (the queued segments are skipped once discard is set), joins them. */
static void writer_stop(SwiftWriter *w, int discard) {
    objhttp_pw_stop(w->pw, discard);
}

/* Deletes the segments this writer may have handed to the uploaders; failures are logged. */
static void delete_own_segments(SwiftWriter *w) {
    for (int i = 1; w->pw && i <= objhttp_pw_parts(w->pw); i++) {
        char k[SWIFT_MAX_KEY + 16];
        seg_key(w->key, i, k, sizeof k);
        int rc = delete_object(w->d, k);
        if (rc != 0 && rc != ERR_NOT_FOUND)
            log_warn("Swift: cannot delete segment %s of an unfinished upload: %s", k, err_msg());
    }
}

static void writer_free(SwiftWriter *w) {
    objhttp_pw_free(w->pw, 1);
    free(w->key);
    free(w);
}

/* PUT key with body (plain object) or as a manifest (manifest non-NULL: the X-Object-Manifest
 * value), refused with 412 (ERR_EXISTS) when the key already exists. */
static int put_final(SwiftWriter *w, const void *body, size_t len, const char *manifest) {
    char *mh = manifest ? secret_header("X-Object-Manifest", manifest) : NULL;
    if (manifest && !mh) return err_set(ERR_NOMEM, "Swift write %s: out of memory", w->key);
    const char *h[2] = {"If-None-Match: *", mh};
    SwiftCall c = {.method = "PUT",
                   .key = w->key,
                   .headers = h,
                   .nh = mh ? 2 : 1,
                   .body = body,
                   .body_len = len};
    ObjHttpResponse r = {0};
    int rc = swift_do(w->d, &c, &r, NULL);
    if (rc != 0 && r.status == 412)
        rc = err_set(ERR_EXISTS, "Swift write %s: the object already exists (HTTP 412)", w->key);
    objhttp_response_clear(&r);
    free(mh);
    return rc;
}

static int writer_commit(StoreDriverWriter *sw) {
    SwiftWriter *w = (SwiftWriter *)sw;
    int rc = objhttp_pw_failed(w->pw);
    char *manifest = NULL;
    if (!rc && objhttp_pw_parts(w->pw) == 0) { /* fits in one segment: one plain object */
        size_t len;
        const void *body = objhttp_pw_rest(w->pw, &len);
        rc = put_final(w, body, len, NULL);
        writer_stop(w, rc != 0);
        writer_free(w);
        return rc;
    }
    if (rc == 0) rc = objhttp_pw_finish(w->pw);
    writer_stop(w, rc != 0);
    /* segments above ours, left by an earlier upload of this key that was killed, would be
     * concatenated too: they go before the manifest appears */
    if (rc == 0) rc = delete_segments(w->d, w->key, objhttp_pw_parts(w->pw), NULL);
    if (rc == 0) {
        char *ec = objhttp_pct_encode(w->d->container, 0);
        char *ek = objhttp_pct_encode(w->key, 1);
        size_t n = (ec ? strlen(ec) : 0) + (ek ? strlen(ek) : 0) + 3;
        manifest = ec && ek ? malloc(n) : NULL;
        if (manifest)
            snprintf(manifest, n, "%s/%s/", ec, ek);
        else
            rc = err_set(ERR_NOMEM, "Swift write %s: out of memory", w->key);
        free(ec);
        free(ek);
    }
    if (rc == 0) rc = put_final(w, "", 0, manifest);
    if (rc != 0 && rc != ERR_EXISTS) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        delete_own_segments(w);
        err_set(rc, "%s", msg);
    }
    /* ERR_EXISTS: the segments are the existing object's now (same names); they stay */
    free(manifest);
    writer_free(w);
    return rc;
}

static void writer_abort(StoreDriverWriter *sw) {
    SwiftWriter *w = (SwiftWriter *)sw;
    writer_stop(w, 1);
    delete_own_segments(w);
    writer_free(w);
}

static const StoreDriverWriterVt writer_vt = {writer_io, writer_commit, writer_abort};

static int swift_open_write(StoreDriver *drv, const char *key, StoreDriverWriter **out) {
    SwiftDriver *d = (SwiftDriver *)drv;
    *out = NULL;
    int rc = key_ok(key, "write");
    if (rc) return rc;
    if (strlen(key) + 11 > SWIFT_MAX_KEY)
        return err_set(ERR_INVALID, "Swift write: key \"%.64s\" leaves no room for segment names",
                       key);
    SwiftWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key))) {
        free(w);
        return err_set(ERR_NOMEM, "Swift write: out of memory");
    }
    w->base.vt = &writer_vt;
    w->d = d;
    ObjHttpPartWriterConfig pc = {.what = "Swift",
                                  .key = key,
                                  .parallel = d->parallel,
                                  .part_size = segment_size,
                                  .before = before_segment,
                                  .put = put_segment,
                                  .ctx = w};
    if ((rc = objhttp_pw_new(&pc, &w->pw))) {
        writer_free(w);
        return rc;
    }
    *out = &w->base;
    return 0;
}

static const char *swift_describe(const StoreDriver *drv) {
    return ((const SwiftDriver *)drv)->describe;
}

static void swift_free(StoreDriver *drv) {
    SwiftDriver *d = (SwiftDriver *)drv;
    if (!d) return;
    objhttp_free(d->http);
    swift_creds_clear(&d->creds);
    pthread_mutex_destroy(&d->mu);
    objhttp_free_secret(d->token);
    free(d->storage_url);
    free(d->container);
    free(d->describe);
    free(d->endpoint);
    free(d->region);
    free(d);
}

static const StoreDriverVt swift_vt = {
    .name = "Swift",
    .features = STORE_FEAT_THREAD_SAFE,
    .list = swift_list,
    .open_read = swift_open_read,
    .open_write = swift_open_write,
    .remove = swift_remove,
    .stat = swift_stat,
    .remove_dir = NULL,
    .describe = swift_describe,
    .free = swift_free,
};

int store_swift_driver_new(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    const char *container =
        cfg->container && cfg->container[0] ? cfg->container : store_env(cfg, "STORAGE_CONTAINER");
    if (!container)
        return err_set(ERR_INVALID,
                       "Swift: no container (--store-container or %sSTORAGE_CONTAINER)",
                       store_env_prefix(cfg));
    SwiftDriver *d = calloc(1, sizeof *d);
    if (!d) return err_set(ERR_NOMEM, "Swift: out of memory");
    d->base.vt = &swift_vt;
    pthread_mutex_init(&d->mu, NULL);
    int rc = 0;
    d->container = strdup(container);
    d->seg_min = cfg->min_chunk_size > 0 ? cfg->min_chunk_size : SWIFT_DEFAULT_SEGMENT;
    d->parallel = cfg->max_parallel_chunk_uploads > 0 ? cfg->max_parallel_chunk_uploads
                                                      : SWIFT_DEFAULT_PARALLEL;
    const char *pg = objhttp_env("ETCDBR_SWIFT_LIST_PAGE_SIZE");
    if (pg) {
        d->list_page = atoi(pg);
        if (d->list_page < 1 || d->list_page > SWIFT_MAX_PAGE) {
            rc = err_set(ERR_INVALID, "ETCDBR_SWIFT_LIST_PAGE_SIZE=%s: must be 1 to %d", pg,
                         SWIFT_MAX_PAGE);
            goto done;
        }
    }
    if (!d->container) {
        rc = err_set(ERR_NOMEM, "Swift: out of memory");
        goto done;
    }
    if (cfg->endpoint_override && cfg->endpoint_override[0]) {
        const char *e = cfg->endpoint_override;
        if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0) {
            rc = err_set(ERR_INVALID,
                         "Swift: endpoint override \"%s\" must start with http:// or https://", e);
            goto done;
        }
        if (!(d->endpoint = strdup(e))) {
            rc = err_set(ERR_NOMEM, "Swift: out of memory");
            goto done;
        }
    }
    const char *path = cfg->credentials && cfg->credentials[0] ? cfg->credentials : NULL;
    if (!path) path = store_env(cfg, "OPENSTACK_APPLICATION_CREDENTIALS_JSON");
    if (!path) path = store_env(cfg, "OPENSTACK_APPLICATION_CREDENTIALS");
    if (path) {
        rc = swift_creds_load(path, &d->creds);
        if (rc == ERR_NOT_FOUND) rc = ERR_INVALID;
    } else {
        rc = swift_creds_from_env(store_env_prefix(cfg), &d->creds);
        if (rc == ERR_NOT_FOUND)
            rc = err_set(ERR_INVALID,
                         "Swift: no credentials: set %1$sOPENSTACK_APPLICATION_CREDENTIALS_JSON, "
                         "%1$sOPENSTACK_APPLICATION_CREDENTIALS or the %1$sOS_* environment "
                         "(%1$sOS_AUTH_URL, %1$sOS_USERNAME, %1$sOS_PASSWORD, ...)",
                         store_env_prefix(cfg));
    }
    if (rc) goto done;
    const char *region = cfg->region && cfg->region[0] ? cfg->region : d->creds.region;
    if (!set(region)) region = store_env(cfg, "OS_REGION_NAME");
    if (region && !(d->region = strdup(region))) {
        rc = err_set(ERR_NOMEM, "Swift: out of memory");
        goto done;
    }
    ObjHttpConfig hc = {
        .what = "Swift",
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
        rc = err_set(ERR_NOMEM, "Swift: out of memory");
        goto done;
    }
    snprintf(d->describe, n, "Swift:%s", d->container);

    /* authenticate, and the container must exist */
    rc = reauth(d, 0);
    if (rc) goto done;
    SwiftCall c = {.method = "HEAD"};
    ObjHttpResponse r = {0};
    rc = swift_do(d, &c, &r, NULL);
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_NOT_FOUND, "Swift: container %s does not exist at %s", d->container,
                     d->storage_url);
    objhttp_response_clear(&r);
done:
    if (rc) {
        swift_free(&d->base);
        return rc;
    }
    *out = &d->base;
    return 0;
}
