/* k8s_client: see k8s_client.h. */
#include "k8s_client.h"
#include "../common/err.h"
#include "../common/mem.h"
#include "../store/objhttp.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct K8sClient {
    ObjHttp *http;
    char *base;       /* "https://host:port", no trailing slash */
    char *token_path; /* <sa dir>/token */
    char *ns;
};

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

/* A small file's content with surrounding whitespace trimmed (owned), NULL if unreadable. */
static char *read_trimmed(const char *path) {
    char *s = objhttp_read_small_file(path);
    if (!s) return NULL;
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    size_t i = 0;
    while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')
        i++;
    if (i) memmove(s, s + i, n - i + 1);
    return s;
}

/* A DNS-1123 label, as namespace names are: [a-z0-9-], at most 63 bytes. */
static int valid_namespace(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 63) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return 0;
    return 1;
}

int k8s_client_new(const K8sClientConfig *cfg, K8sClient **out) {
    *out = NULL;
    K8sClientConfig none = {0};
    if (!cfg) cfg = &none;
    const char *dir = cfg->sa_dir;
    if (!dir || !*dir) dir = getenv("ETCDBR_K8S_SERVICE_ACCOUNT_DIR");
    if (!dir || !*dir) dir = K8S_SERVICE_ACCOUNT_DIR;
    K8sClient *c = calloc(1, sizeof *c);
    char *ca = join(dir, "ca.crt");
    char *ns_file = join(dir, "namespace");
    int rc = 0;
    if (!c || !ca || !ns_file) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    c->token_path = join(dir, "token");
    if (!c->token_path) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (cfg->api_url && *cfg->api_url) {
        c->base = strdup(cfg->api_url);
    } else {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !*host || !port || !*port) {
            rc = err_set(ERR_INVALID,
                         "not running in a Kubernetes cluster: KUBERNETES_SERVICE_HOST and "
                         "KUBERNETES_SERVICE_PORT must be set");
            goto fail;
        }
        size_t n = strlen(host) + strlen(port) + 16;
        c->base = malloc(n);
        /* an IPv6 service address goes in brackets (client-go: net.JoinHostPort) */
        if (c->base)
            snprintf(c->base, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
                     port);
    }
    if (!c->base) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    size_t bl = strlen(c->base);
    while (bl && c->base[bl - 1] == '/')
        c->base[--bl] = '\0';
    struct stat st;
    if (stat(ca, &st) != 0) {
        rc =
            err_set(ERR_INVALID, "Kubernetes service account: CA file %s: %s", ca, strerror(errno));
        goto fail;
    }
    char *tok = objhttp_read_small_file(c->token_path);
    if (!tok) {
        rc = err_set(ERR_INVALID, "Kubernetes service account: token file %s: %s", c->token_path,
                     strerror(errno));
        goto fail;
    }
    objhttp_free_secret(tok);
    const char *ns = cfg->namespace;
    if (!ns || !*ns) ns = getenv("POD_NAMESPACE");
    if (ns && *ns) {
        c->ns = strdup(ns);
    } else {
        c->ns = read_trimmed(ns_file);
        if (!c->ns) {
            rc = err_set(ERR_INVALID,
                         "Kubernetes namespace: POD_NAMESPACE is not set and %s cannot be read: "
                         "%s",
                         ns_file, strerror(errno));
            goto fail;
        }
    }
    if (!c->ns) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (!valid_namespace(c->ns)) {
        rc = err_set(ERR_INVALID, "Kubernetes namespace \"%.80s\" is not a valid namespace name",
                     c->ns);
        goto fail;
    }
    ObjHttpConfig hc = {
        .what = "Kubernetes API",
        .ca_file = ca,
        .timeout_ms = 60000,
        .retry = {1, 0, 0}, /* one try: the callers retry (lease updates, heartbeats) */
    };
    rc = objhttp_new(&hc, &c->http);
    if (rc) goto fail;
    free(ca);
    free(ns_file);
    *out = c;
    return 0;
fail:
    free(ca);
    free(ns_file);
    k8s_client_free(c);
    return rc;
}

void k8s_client_free(K8sClient *c) {
    if (!c) return;
    objhttp_free(c->http);
    FREE_ALL(c->base, c->token_path, c->ns, c);
}

const char *k8s_client_namespace(const K8sClient *c) {
    return c->ns;
}

void k8s_response_clear(K8sResponse *r) {
    if (!r) return;
    free(r->body);
    memset(r, 0, sizeof *r);
}

void k8s_status_message(const char *body, size_t len, char *out, size_t cap) {
    if (!cap) return;
    out[0] = '\0';
    if (!body || !len) return;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    const char *m = NULL;
    if (json_is_object(j)) {
        const char *kind = json_string_value(json_object_get(j, "kind"));
        if (kind && !strcmp(kind, "Status")) m = json_string_value(json_object_get(j, "message"));
    }
    if (m) {
        size_t i = 0;
        for (; m[i] && i + 1 < cap; i++)
            out[i] = (unsigned char)m[i] < 0x20 ? ' ' : m[i];
        out[i] = '\0';
    }
    json_decref(j);
}

static const char *reason(long status) {
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 409:
        return "Conflict";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "";
    }
}

typedef struct {
    K8sClient *c;
} AuthCtx;

/* The bearer token, read now: a rotated token is used as soon as the kubelet writes it. */
static int auth_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    (void)curl;
    AuthCtx *a = ctx;
    char *tok = objhttp_read_small_file(a->c->token_path);
    if (!tok)
        return err_set(ERR_INVALID, "Kubernetes service account token %s: %s", a->c->token_path,
                       strerror(errno));
    size_t n = strlen(tok);
    while (n && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
        tok[--n] = '\0';
    size_t hl = n + 32;
    char *h = malloc(hl);
    if (!h) {
        objhttp_free_secret(tok);
        return err_set(ERR_NOMEM, "out of memory");
    }
    snprintf(h, hl, "Authorization: Bearer %s", tok);
    objhttp_free_secret(tok);
    struct curl_slist *l = curl_slist_append(*headers, h);
    objhttp_free_secret(h);
    if (!l) return err_set(ERR_NOMEM, "out of memory");
    *headers = l;
    return 0;
}

int k8s_request(K8sClient *c, const char *method, const char *path, const char *content_type,
                const char *body, int64_t timeout_ms, K8sResponse *resp) {
    memset(resp, 0, sizeof *resp);
    size_t ul = strlen(c->base) + strlen(path) + 1;
    char *url = malloc(ul);
    if (!url) return err_set(ERR_NOMEM, "out of memory");
    snprintf(url, ul, "%s%s", c->base, path);
    char ct[128];
    const char *hdrs[2] = {"Accept: application/json", ct};
    size_t nh = 1;
    if (content_type) {
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        nh = 2;
    }
    AuthCtx a = {c};
    ObjHttpRequest req = {.method = method,
                          .url = url,
                          .headers = hdrs,
                          .n_headers = nh,
                          .body = body,
                          .body_len = body ? strlen(body) : 0,
                          .auth = auth_hook,
                          .auth_ctx = &a,
                          .no_retry = 1,
                          .timeout_ms = timeout_ms > 0 ? timeout_ms : 1};
    ObjHttpResponse r = {0};
    int rc = objhttp_do(c->http, &req, &r);
    free(url);
    resp->status = r.status;
    resp->body = r.body;
    resp->body_len = r.body_len;
    r.body = NULL;
    objhttp_response_clear(&r);
    if (!resp->body) {
        resp->body = strdup("");
        resp->body_len = 0;
    }
    if (rc == 0 || resp->status < 300) return rc;
    char msg[512];
    k8s_status_message(resp->body, resp->body_len, msg, sizeof msg);
    int code = resp->status == 404                          ? ERR_NOT_FOUND
               : resp->status == 409                        ? ERR_EXISTS
               : resp->status == 401 || resp->status == 403 ? ERR_INVALID
                                                            : ERR_IO;
    const char *hint = resp->status == 401   ? " (the service account token was refused)"
                       : resp->status == 403 ? " (the service account lacks RBAC permission)"
                                             : "";
    return err_set(code, "Kubernetes API %s %s: HTTP %ld %s%s%s%s", method, path, resp->status,
                   reason(resp->status), msg[0] ? ": " : "", msg, hint);
}
