/* leader_proxy: see leader_proxy.h. One libcurl easy handle per call (two requests); no state. */
#include "leader_proxy.h"
#include "../common/array.h"
#include "../common/err.h"
#include "../common/mem.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char *buf;
    size_t len, cap;
    int too_big;
} Body;

static size_t body_write(char *p, size_t size, size_t nmemb, void *ud) {
    Body *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > LEADER_PROXY_MAX_BODY) {
        b->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (array_reserve_bytes(&b->buf, &b->cap, b->len + n + 1, 4096, "the leader's answer"))
        return 0; /* aborts the transfer */
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    b->buf[b->len] = '\0';
    return n;
}

int leader_proxy_base_url(const char *client_urls, int port, int tls, char *out, size_t cap) {
    char first[512];
    snprintf(first, sizeof first, "%s", client_urls);
    char *comma = strchr(first, ',');
    if (comma) *comma = '\0';
    const char *host = strstr(first, "://");
    host = host ? host + 3 : first;
    char h[300];
    size_t hl;
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        if (!end) return err_set(ERR_INVALID, "leader's client URL %s: bad IPv6 host", first);
        hl = (size_t)(end - host) + 1;
    } else {
        hl = strcspn(host, ":/?#");
    }
    if (hl == 0 || hl >= sizeof h)
        return err_set(ERR_INVALID, "leader's client URL \"%s\" has no host", first);
    memcpy(h, host, hl);
    h[hl] = '\0';
    if (snprintf(out, cap, "%s://%s:%d", tls ? "https" : "http", h, port) >= (int)cap)
        return err_set(ERR_INVALID, "leader URL longer than %zu bytes", cap - 1);
    return 0;
}

/* The bearer token's header line into a fresh list node appended to *l (the buffers holding the
 * token are wiped; libcurl's copy lives in the list). */
static int append_bearer(AuthToken *t, struct curl_slist **l) {
    char tok[AUTH_TOKEN_MAX_FILE + 1];
    char line[AUTH_TOKEN_MAX_FILE + 32];
    int rc = auth_token_current(t, tok, sizeof tok);
    if (rc) return err_wrap(rc, "the token for the leader's sidecar");
    snprintf(line, sizeof line, "Authorization: Bearer %s", tok);
    struct curl_slist *n = curl_slist_append(*l, line);
    explicit_bzero(tok, sizeof tok);
    explicit_bzero(line, sizeof line);
    if (!n) return err_set(ERR_NOMEM, "out of memory");
    *l = n;
    return 0;
}

int leader_proxy_headers(const LeaderProxyConfig *cfg, int forwarded, struct curl_slist **out) {
    *out = NULL;
    if (!forwarded) return 0;
    struct curl_slist *l = curl_slist_append(NULL, LEADER_PROXY_HEADER ": etcdbrctl");
    if (!l) return err_set(ERR_NOMEM, "out of memory");
    int rc = cfg->token ? append_bearer(cfg->token, &l) : 0;
    RETURN_BUILT(rc, out, l, curl_slist_free_all(l));
}

/* One request; *status and the body (bounded) on an answer, ERR_IO otherwise. */
static int request(const LeaderProxyConfig *cfg, const char *method, const char *url,
                   int64_t timeout_ms, int forwarded, long *status, Body *b, char *ctype,
                   size_t ctype_cap) {
    CURL *c = curl_easy_init();
    if (!c) return err_set(ERR_NOMEM, "curl_easy_init failed");
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hl = NULL;
    int hrc = leader_proxy_headers(cfg, forwarded, &hl);
    if (hrc) {
        curl_easy_cleanup(c);
        return hrc;
    }
    if (hl) curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* sidecar to sidecar, never via a proxy */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < 5000 ? timeout_ms : 5000));
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    if (cfg->cacert && cfg->cacert[0]) curl_easy_setopt(c, CURLOPT_CAINFO, cfg->cacert);
    if (cfg->client_cert && cfg->client_cert[0] && cfg->client_key && cfg->client_key[0]) {
        curl_easy_setopt(c, CURLOPT_SSLCERT, cfg->client_cert);
        curl_easy_setopt(c, CURLOPT_SSLKEY, cfg->client_key);
    }
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode cc = curl_easy_perform(c);
    int rc = 0;
    if (cc != CURLE_OK) {
        if (b->too_big)
            rc = err_set(ERR_IO, "%s %s: answer longer than %d bytes", method, url,
                         LEADER_PROXY_MAX_BODY);
        else
            rc = err_set(ERR_IO, "%s %s: %s", method, url,
                         errbuf[0] ? errbuf : curl_easy_strerror(cc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ctype) snprintf(ctype, ctype_cap, "%s", ct ? ct : "");
    }
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return rc;
}

/* The leader's client URLs (comma-joined) into urls; ERR_INVALID when this member leads. */
static int find_leader(const LeaderProxyConfig *cfg, char *urls, size_t cap) {
    EtcdConfig ec = cfg->etcd;
    ec.n_endpoints = 1; /* this member's etcd, as the Go tool */
    EtcdClient *c = NULL;
    EtcdStatus st;
    EtcdMember *m = NULL;
    size_t n = 0;
    int rc = etcd_client_new(&ec, &c);
    if (!rc && (rc = etcd_status(c, &st))) err_wrap(rc, "etcd status");
    if (!rc && (rc = etcd_member_list(c, &m, &n))) err_wrap(rc, "etcd member list");
    etcd_client_free(c);
    if (rc) return rc;
    if (st.leader == 0) {
        free(m);
        return err_set(ERR_INVALID, "etcd has no leader");
    }
    if (st.leader == st.member_id) {
        free(m);
        return err_set(ERR_INVALID,
                       "etcd names this member (%llx) the leader, and this sidecar "
                       "has not started its snapshotter yet; retry",
                       (unsigned long long)st.leader);
    }
    rc = err_set(ERR_INVALID, "leader %llx is not in the member list",
                 (unsigned long long)st.leader);
    for (size_t i = 0; i < n; i++) {
        if (m[i].id != st.leader) continue;
        if (!m[i].client_urls[0])
            rc = err_set(ERR_INVALID, "leader %s (%llx) has no client URL", m[i].name,
                         (unsigned long long)st.leader);
        else
            rc = 0, snprintf(urls, cap, "%s", m[i].client_urls);
        break;
    }
    free(m);
    return rc;
}

int leader_proxy_forward(const LeaderProxyConfig *cfg, const char *method, const char *path_query,
                         LeaderProxyResponse *out) {
    memset(out, 0, sizeof *out);
    char urls[512];
    int rc = find_leader(cfg, urls, sizeof urls);
    if (!rc)
        rc = leader_proxy_base_url(urls, cfg->server_port, cfg->tls, out->leader,
                                   sizeof out->leader);
    if (rc) return rc;
    /* the leader's sidecar must say it is healthy (it is the backup leader) */
    char url[2048];
    snprintf(url, sizeof url, "%s/healthz", out->leader);
    Body b = {0};
    long status = 0;
    rc = request(cfg, "GET", url, cfg->health_timeout_ms, 0, &status, &b, NULL, 0);
    if (!rc) {
        json_t *j = b.buf ? json_loadb(b.buf, b.len, 0, NULL) : NULL;
        int ok = j && json_is_true(json_object_get(j, "health"));
        json_decref(j);
        if (!ok)
            rc = err_set(ERR_UNSUPPORTED, "the leader's sidecar %s is not healthy: HTTP %ld %.200s",
                         out->leader, status, b.buf ? b.buf : "");
    }
    free(b.buf);
    if (rc) return rc;
    if (snprintf(url, sizeof url, "%s%s", out->leader, path_query) >= (int)sizeof url)
        return err_set(ERR_INVALID, "request URL too long");
    Body fb = {0};
    char ct[256] = "";
    rc = request(cfg, method, url, cfg->request_timeout_ms, 1, &status, &fb, ct, sizeof ct);
    if (rc) {
        free(fb.buf);
        return rc;
    }
    if (status == 401 || status == 403) {
        rc = err_set(ERR_UNSUPPORTED,
                     "the leader's sidecar %s refused this sidecar's %s: HTTP %ld %.200s",
                     out->leader,
                     status == 401 ? "token (--server-auth-token-file)"
                                   : "client certificate (--server-cert)",
                     status, fb.buf ? fb.buf : "");
        free(fb.buf);
        return rc;
    }
    out->status = (int)status;
    out->content_type =
        !strncasecmp(ct, "application/json", 16) ? "application/json" : "text/plain; charset=utf-8";
    out->body = fb.buf ? fb.buf : strdup("");
    out->body_len = fb.len;
    if (!out->body) return err_set(ERR_NOMEM, "out of memory");
    return 0;
}
