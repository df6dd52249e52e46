/* peer_url: see peer_url.h. Calls go to this member's etcd first (endpoints[0]), then to the
 * others given; nothing is kept between calls. */
#include "peer_url.h"
#include "etcd_config.h"
#include "leader_proxy.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/timeutil.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CALL_TIMEOUT_MS 5000  /* docs/go-tool.md Appendix B: member ops, 5 s per call */
#define FIRST_BACKOFF_MS 2000 /* then x2 */
#define WRAPPER_TIMEOUT_MS 10000
#define WRAPPER_CONNECT_TRIES 3 /* only while the connection is refused: nothing reached it */

/* ---------- pure parts ---------- */

/* The next entry of the list at *s (blanks trimmed, empty ones skipped): its start and length;
 * 0 at the end. */
static int next_url(const char **s, const char **b, size_t *len) {
    while (**s) {
        size_t n = strcspn(*s, ",");
        const char *p = *s, *e = *s + n;
        *s = *e ? e + 1 : e;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (p == e) continue;
        *b = p;
        *len = (size_t)(e - p);
        return 1;
    }
    return 0;
}

static size_t trim_slash(const char *u, size_t n) {
    while (n && u[n - 1] == '/')
        n--;
    return n;
}

static int listed(const char *u, size_t n, const char *list) {
    const char *b;
    size_t len;
    n = trim_slash(u, n);
    while (next_url(&list, &b, &len)) {
        len = trim_slash(b, len);
        if (len == n && memcmp(b, u, n) == 0) return 1;
    }
    return 0;
}

size_t peer_urls_unregistered(const char *config_urls, const char *registered, char *out,
                              size_t cap) {
    size_t count = 0, used = 0;
    if (out && cap) out[0] = '\0';
    const char *s = config_urls ? config_urls : "", *b;
    size_t len;
    while (next_url(&s, &b, &len)) {
        if (listed(b, len, registered ? registered : "")) continue;
        if (out && cap) {
            int w = snprintf(out + used, cap - used, "%s%.*s", count ? "," : "", (int)len, b);
            if (w > 0) used += (size_t)w < cap - used ? (size_t)w : cap - used - 1;
        }
        count++;
    }
    return count;
}

int etcd_wrapper_stop_url(const char *endpoint, int tls, char *out, size_t cap) {
    char base[600];
    int rc =
        leader_proxy_base_url(endpoint ? endpoint : "", ETCD_WRAPPER_PORT, tls, base, sizeof base);
    if (rc) return err_wrap(rc, "etcd-wrapper's address from --endpoints");
    if (snprintf(out, cap, "%s/stop", base) >= (int)cap)
        return err_set(ERR_INVALID, "etcd-wrapper URL longer than %zu bytes", cap - 1);
    return 0;
}

/* ---------- calls ---------- */

/* A client for endpoints[0] and then the others. */
static int client_new(const PeerUrlConfig *pc, EtcdClient **c) {
    const char *eps[17];
    size_t n = 0;
    if (pc->etcd.n_endpoints) eps[n++] = pc->etcd.endpoints[0];
    for (size_t i = 0; i < pc->n_others && n < sizeof eps / sizeof *eps; i++)
        if (!n || strcmp(pc->others[i], eps[0]) != 0) eps[n++] = pc->others[i];
    if (!n) return err_set(ERR_INVALID, "no etcd endpoint");
    EtcdConfig ec = pc->etcd;
    ec.endpoints = eps;
    ec.n_endpoints = n;
    ec.connection_timeout_ms = CALL_TIMEOUT_MS;
    return etcd_client_new(&ec, c); /* copies the endpoints */
}

typedef struct {
    uint64_t id;
    const char *const *urls;
    size_t n_urls;
    EtcdMember *members; /* the member list (list) or the list after the update (update) */
    size_t n_members;
} CallArgs;

static int call_list(EtcdClient *c, CallArgs *a) {
    return etcd_member_list(c, &a->members, &a->n_members);
}

static int call_update(EtcdClient *c, CallArgs *a) {
    return etcd_member_update(c, a->id, a->urls, a->n_urls, &a->members, &a->n_members);
}

/* call with PEER_URL_ATTEMPTS tries, waits 2, 4, 8 s between them; what names it in logs. */
static int with_retry(const PeerUrlConfig *pc, const char *what,
                      int (*call)(EtcdClient *, CallArgs *), CallArgs *a) {
    int rc = 0;
    int64_t wait = FIRST_BACKOFF_MS;
    for (int i = 1; i <= PEER_URL_ATTEMPTS; i++) {
        EtcdClient *c = NULL;
        free(a->members);
        a->members = NULL;
        a->n_members = 0;
        rc = client_new(pc, &c);
        if (!rc) rc = call(c, a);
        etcd_client_free(c);
        if (!rc) return 0;
        if (i == PEER_URL_ATTEMPTS) break;
        log_warn("%s failed (attempt %d of %d, next in %.0fs): %s", what, i, PEER_URL_ATTEMPTS,
                 (double)wait / 1000.0, err_msg());
        if (sleep_unless_stopped(pc->stop, wait)) return err_set(ERR_CANCELED, "stopping");
        wait *= 2;
    }
    return err_wrap(rc, "%s failed %d times", what, PEER_URL_ATTEMPTS);
}

static size_t body_discard(char *p, size_t size, size_t nmemb, void *ud) {
    (void)p;
    (void)ud;
    return size * nmemb;
}

/* POST url once; 0 on a 2xx answer. *refused: the connection was refused (nothing reached). */
static int post_stop(const PeerUrlConfig *pc, const char *url, int *refused) {
    *refused = 0;
    CURL *c = curl_easy_init();
    if (!c) return err_set(ERR_NOMEM, "curl_easy_init failed");
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* the pod's own etcd-wrapper */
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)WRAPPER_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_discard);
    if (pc->server_tls && pc->etcd.cacert && *pc->etcd.cacert)
        curl_easy_setopt(c, CURLOPT_CAINFO, pc->etcd.cacert);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    int rc = 0;
    if (cc != CURLE_OK) {
        *refused = cc == CURLE_COULDNT_CONNECT;
        rc = err_set(ERR_IO, "POST %s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(cc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (status < 200 || status > 299) rc = err_set(ERR_IO, "POST %s: HTTP %ld", url, status);
    }
    curl_easy_cleanup(c);
    return rc;
}

/* Asks etcd-wrapper to restart etcd; logged either way. */
static void restart_via_wrapper(const PeerUrlConfig *pc) {
    char url[700];
    int rc = etcd_wrapper_stop_url(pc->etcd.n_endpoints ? pc->etcd.endpoints[0] : "",
                                   pc->server_tls, url, sizeof url);
    for (int i = 1; !rc && i <= WRAPPER_CONNECT_TRIES; i++) {
        int refused = 0;
        if (!(rc = post_stop(pc, url, &refused))) {
            log_info("asked etcd-wrapper to restart etcd with the new peer URLs: POST %s", url);
            return;
        }
        if (!refused || i == WRAPPER_CONNECT_TRIES || sleep_unless_stopped(pc->stop, 2000)) break;
        rc = 0; /* nothing reached etcd-wrapper yet: again */
    }
    log_error("--use-etcd-wrapper: etcd-wrapper was not asked to restart etcd: %s; the member's "
              "peer URLs are updated, restart etcd yourself for it to use them",
              err_msg());
}

int peer_url_update(const PeerUrlConfig *pc, uint64_t member_id) {
    const char *path = NULL;
    char *buf = NULL;
    size_t len = 0;
    int rc = etcd_config_read_file(&buf, &len, &path);
    if (rc == ERR_NOT_FOUND) {
        log_info("peer URLs not checked: %s", err_msg());
        return 0;
    }
    if (rc) {
        log_warn("peer URLs not checked: etcd config file %s: %s", path ? path : "", err_msg());
        return 0;
    }
    EtcdConfigMember *fm = malloc(sizeof *fm);
    if (!fm) {
        free(buf);
        log_warn("peer URLs not checked: out of memory");
        return 0;
    }
    rc = etcd_config_member(buf, len, getenv("POD_NAME"), fm);
    free(buf);
    if (rc) {
        log_warn("peer URLs not checked: etcd config file %s: %s", path, err_msg());
        free(fm);
        return 0;
    }
    if (!fm->peer_urls[0]) {
        log_info("peer URLs not checked: etcd config file %s has no initial-advertise-peer-urls "
                 "for member %s",
                 path, fm->name[0] ? fm->name : "(no name)");
        free(fm);
        return 0;
    }
    char what[128];
    snprintf(what, sizeof what, "member list for the peer URL check of member %llx",
             (unsigned long long)member_id);
    CallArgs a = {.id = member_id};
    char **urls = NULL;
    size_t n_urls = 0;
    if ((rc = with_retry(pc, what, call_list, &a))) goto done;
    const EtcdMember *self = NULL;
    for (size_t i = 0; i < a.n_members; i++)
        if (a.members[i].id == member_id) self = &a.members[i];
    if (!self) {
        rc = err_set(ERR_NOT_FOUND, "member %llx is not in the member list (%zu members)",
                     (unsigned long long)member_id, a.n_members);
        goto done;
    }
    char missing[1024];
    size_t n_missing =
        peer_urls_unregistered(fm->peer_urls, self->peer_urls, missing, sizeof missing);
    if (!n_missing) {
        log_info("member %s (%llx): the peer URLs %s of etcd config file %s are registered (%s): "
                 "nothing to update",
                 fm->name, (unsigned long long)member_id, fm->peer_urls, path, self->peer_urls);
        goto done;
    }
    log_info("member %s (%llx): etcd config file %s has peer URL%s %s that the member list does "
             "not (registered: %s): updating the member's peer URLs to %s",
             fm->name, (unsigned long long)member_id, path, n_missing > 1 ? "s" : "", missing,
             self->peer_urls[0] ? self->peer_urls : "none", fm->peer_urls);
    const char *s = fm->peer_urls, *b;
    size_t l;
    while (next_url(&s, &b, &l)) {
        char **nu = realloc(urls, (n_urls + 1) * sizeof *urls);
        if (!nu || !(nu[n_urls] = strndup(b, l))) {
            if (nu) urls = nu;
            rc = err_set(ERR_NOMEM, "out of memory");
            goto done;
        }
        urls = nu;
        n_urls++;
    }
    a.urls = (const char *const *)urls;
    a.n_urls = n_urls;
    snprintf(what, sizeof what, "MemberUpdate of member %llx", (unsigned long long)member_id);
    if ((rc = with_retry(pc, what, call_update, &a))) goto done;
    const char *now = "";
    for (size_t i = 0; i < a.n_members; i++)
        if (a.members[i].id == member_id) now = a.members[i].peer_urls;
    log_info("updated the peer URLs of member %s (%llx) to %s (member list now has %s)", fm->name,
             (unsigned long long)member_id, fm->peer_urls, now[0] ? now : "no entry for it");
    if (pc->use_wrapper) restart_via_wrapper(pc);
done:
    if (rc && rc != ERR_CANCELED)
        log_error("peer URL check of member %s (%llx) failed: %s", fm->name,
                  (unsigned long long)member_id, err_msg());
    for (size_t i = 0; i < n_urls; i++)
        free(urls[i]);
    FREE_ALL(urls, a.members, fm);
    return rc;
}
