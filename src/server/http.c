/* http: see http.h. Threads: libmicrohttpd's event-loop thread runs on_request, the connection
 * notifications and inline handlers; worker threads run the other handlers while their
 * connection is suspended (pool_mu guards the queue and each queued Req's state); the sweeper
 * closes connections past their deadline (track_mu guards the Track list). A Req is touched by a
 * worker only between its dispatch and MHD_resume_connection; the event loop takes it back when
 * it calls on_request again after the resume. */
#include "http.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/thread.h"
#include "../common/timeutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* File descriptors kept free for everything but HTTP connections (store, etcd, files). */
#define HTTP_FD_RESERVE 256u

/* ---------- the request, copied out of the connection ---------- */

typedef struct {
    char *key, *value; /* value NULL: an argument without '=' */
} Kv;

typedef struct {
    Kv *v;
    size_t n, cap;
    int oom;
} KvList;

struct HttpRequest {
    char *method, *path;
    KvList args, headers;
};

static void kv_free(KvList *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static enum MHD_Result kv_collect(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value) {
    (void)kind;
    KvList *l = cls;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        Kv *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) {
            l->oom = 1;
            return MHD_NO;
        }
        l->v = nv;
        l->cap = cap;
    }
    Kv kv = {strdup(key ? key : ""), value ? strdup(value) : NULL};
    if (!kv.key || (value && !kv.value)) {
        free(kv.key);
        free(kv.value);
        l->oom = 1;
        return MHD_NO;
    }
    l->v[l->n++] = kv;
    return MHD_YES;
}

static const char *kv_find(const KvList *l, const char *key) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcasecmp(l->v[i].key, key)) return l->v[i].value;
    return NULL;
}

const char *http_request_method(const HttpRequest *r) {
    return r->method;
}
const char *http_request_path(const HttpRequest *r) {
    return r->path;
}
const char *http_request_query(const HttpRequest *r, const char *name) {
    return kv_find(&r->args, name);
}

const char *http_request_header(const HttpRequest *r, const char *name) {
    return kv_find(&r->headers, name);
}

typedef struct {
    char *buf;
    size_t cap, len;
    int overflow;
} QueryBuf;

static void query_put(QueryBuf *q, char c) {
    if (q->len + 1 >= q->cap) {
        q->overflow = 1;
        return;
    }
    q->buf[q->len++] = c;
}

static void query_put_escaped(QueryBuf *q, const char *v) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)v; *p && !q->overflow; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            query_put(q, (char)*p);
        } else {
            query_put(q, '%');
            query_put(q, hex[*p >> 4]);
            query_put(q, hex[*p & 15]);
        }
    }
}

int http_request_query_string(const HttpRequest *r, char *buf, size_t cap) {
    if (cap == 0) return err_set(ERR_INVALID, "query buffer of 0 bytes");
    QueryBuf q = {buf, cap, 0, 0};
    for (size_t i = 0; i < r->args.n && !q.overflow; i++) {
        query_put(&q, i == 0 ? '?' : '&');
        query_put_escaped(&q, r->args.v[i].key);
        if (r->args.v[i].value) {
            query_put(&q, '=');
            query_put_escaped(&q, r->args.v[i].value);
        }
    }
    buf[q.overflow ? 0 : q.len] = '\0';
    if (q.overflow) return err_set(ERR_INVALID, "query string longer than %zu bytes", cap - 1);
    return 0;
}

void http_respond(HttpResponse *resp, int status, const char *content_type, const char *text) {
    resp->status = status;
    resp->content_type = content_type;
    free(resp->body);
    resp->body = text ? strdup(text) : NULL;
    resp->body_len = text ? strlen(text) : 0;
}

/* ---------- server state ---------- */

typedef enum { REQ_RECEIVING, REQ_QUEUED, REQ_DONE } ReqState;

/* One request (libmicrohttpd's con_cls), from its headers to its completion. */
typedef struct Req {
    struct MHD_Connection *conn;
    HttpRequest req;
    HttpResponse resp;
    uint64_t body_bytes;
    ReqState state; /* pool_mu once dispatched */
    int suspended;  /* event loop only */
    int refused;    /* answered 503 by dispatch: the answer says when to retry */
    struct Req *next;
} Req;

/* One connection (libmicrohttpd's socket context): the time by which it must have made progress
 * (0 = none: a handler is working on its request), for the sweeper. */
typedef struct Track {
    int fd;
    int64_t deadline_ms; /* monotonic */
    int shut;            /* shutdown() done; libmicrohttpd closes it next */
    struct Track *prev, *next;
} Track;

struct HttpServer {
    struct MHD_Daemon *d;
    HttpHandler handler;
    void *ctx;
    int (*inline_ok)(void *ctx, const HttpRequest *req);
    char *cert, *key, *client_ca;
    AuthToken *token;
    const char *const *open_paths;
    int port, ipv6;

    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;   /* work queued, or stopping */
    pthread_cond_t pool_idle; /* queue empty and no worker busy; or a suspension ended */
    Req *q_head, *q_tail;
    unsigned queued, busy, idle_workers, n_workers, n_suspended;
    pthread_t workers[HTTP_WORKERS];
    int stopping;

    pthread_mutex_t track_mu;
    pthread_cond_t sweep_cv;
    Track *tracks;
    int sweep_stop, sweeper_started;
    pthread_t sweeper;
    uint64_t timed_out; /* connections closed by the sweeper since the last log line */
    int64_t timed_out_log_ms;
    int locks_ready;
};

/* ---------- deadlines and the sweeper ---------- */

static Track *conn_track(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The connection's next deadline: in after_s seconds, or none (0). */
static void set_deadline(HttpServer *s, struct MHD_Connection *c, unsigned after_s) {
    Track *t = conn_track(c);
    if (!t) return;
    pthread_mutex_lock(&s->track_mu);
    t->deadline_ms = after_s ? now_mono_ms() + (int64_t)after_s * 1000 : 0;
    pthread_mutex_unlock(&s->track_mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    HttpServer *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        Track *t = calloc(1, sizeof *t);
        if (!t || !ci) { /* untracked: only the idle timeout applies */
            free(t);
            *socket_context = NULL;
            return;
        }
        t->fd = ci->connect_fd;
        t->deadline_ms = now_mono_ms() + HTTP_REQUEST_TIMEOUT_S * 1000;
        pthread_mutex_lock(&s->track_mu);
        t->next = s->tracks;
        if (s->tracks) s->tracks->prev = t;
        s->tracks = t;
        pthread_mutex_unlock(&s->track_mu);
        *socket_context = t;
        return;
    }
    Track *t = *socket_context; /* CLOSED: libmicrohttpd closes the fd after this returns */
    if (!t) return;
    pthread_mutex_lock(&s->track_mu);
    if (t->prev)
        t->prev->next = t->next;
    else
        s->tracks = t->next;
    if (t->next) t->next->prev = t->prev;
    pthread_mutex_unlock(&s->track_mu);
    free(t);
    *socket_context = NULL;
}

/* Every 500 ms: shuts down connections past their deadline (a slow client: slowloris, a body
 * trickled in, an answer not read); libmicrohttpd then sees the socket end and closes it. The
 * fd is still open and ours under track_mu (CLOSED takes the lock before it is closed). */
static void *sweeper_main(void *arg) {
    HttpServer *s = arg;
    thread_name_self("http-sweeper");
    pthread_mutex_lock(&s->track_mu);
    while (!s->sweep_stop) {
        int64_t now = now_mono_ms();
        for (Track *t = s->tracks; t; t = t->next) {
            if (t->shut || !t->deadline_ms || now < t->deadline_ms) continue;
            shutdown(t->fd, SHUT_RDWR);
            t->shut = 1;
            s->timed_out++;
        }
        if (s->timed_out && now - s->timed_out_log_ms >= 60000) {
            log_warn("HTTP: closed %llu connection(s) that did not send a whole request within "
                     "%us of connecting (or %us after the previous answer), or did not read "
                     "their answer within %us",
                     (unsigned long long)s->timed_out, HTTP_REQUEST_TIMEOUT_S, HTTP_IDLE_TIMEOUT_S,
                     HTTP_SEND_TIMEOUT_S);
            s->timed_out = 0;
            s->timed_out_log_ms = now;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 500 * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&s->sweep_cv, &s->track_mu, &until);
    }
    pthread_mutex_unlock(&s->track_mu);
    return NULL;
}

/* ---------- workers ---------- */

static void *worker_main(void *arg) {
    HttpServer *s = arg;
    thread_name_self("http-worker");
    pthread_mutex_lock(&s->pool_mu);
    for (;;) {
        while (!s->q_head && !s->stopping) {
            s->idle_workers++;
            pthread_cond_wait(&s->pool_cv, &s->pool_mu);
            s->idle_workers--;
        }
        Req *r = s->q_head;
        if (!r) break; /* stopping, nothing left */
        s->q_head = r->next;
        if (!s->q_head) s->q_tail = NULL;
        s->queued--;
        s->busy++;
        pthread_mutex_unlock(&s->pool_mu);
        s->handler(s->ctx, &r->req, &r->resp);
        pthread_mutex_lock(&s->pool_mu);
        r->state = REQ_DONE;
        struct MHD_Connection *c = r->conn;
        pthread_mutex_unlock(&s->pool_mu);
        MHD_resume_connection(c); /* r belongs to the event loop again */
        pthread_mutex_lock(&s->pool_mu);
        if (--s->busy == 0 && !s->q_head) pthread_cond_broadcast(&s->pool_idle);
    }
    pthread_mutex_unlock(&s->pool_mu);
    return NULL;
}

/* Event loop: hands r to a worker with its connection suspended. A full queue or a stopping
 * server answers 503 (the connection is resumed at once). */
static void dispatch(HttpServer *s, Req *r) {
    MHD_suspend_connection(r->conn);
    r->suspended = 1;
    set_deadline(s, r->conn, 0);
    pthread_mutex_lock(&s->pool_mu);
    s->n_suspended++;
    int ok = !s->stopping && s->queued < HTTP_MAX_QUEUED;
    if (ok && s->queued + 1 > s->idle_workers && s->n_workers < HTTP_WORKERS &&
        thread_start_quiet(&s->workers[s->n_workers], worker_main, s) == 0)
        s->n_workers++;
    if (ok && s->n_workers == 0) ok = 0;
    if (ok) {
        r->state = REQ_QUEUED;
        r->next = NULL;
        if (s->q_tail)
            s->q_tail->next = r;
        else
            s->q_head = r;
        s->q_tail = r;
        s->queued++;
        pthread_cond_signal(&s->pool_cv);
    } else {
        r->state = REQ_DONE;
    }
    pthread_mutex_unlock(&s->pool_mu);
    if (!ok) {
        r->refused = 1;
        http_respond(&r->resp, 503, NULL,
                     s->stopping ? "server stopping\n" : "server busy: too many requests\n");
        MHD_resume_connection(r->conn);
    }
}

/* ---------- libmicrohttpd callbacks ---------- */

static Req *req_new(struct MHD_Connection *conn, const char *method, const char *url) {
    Req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->conn = conn;
    r->resp.status = 500;
    r->req.method = strdup(method);
    r->req.path = strdup(url);
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, kv_collect, &r->req.args);
    MHD_get_connection_values(conn, MHD_HEADER_KIND, kv_collect, &r->req.headers);
    if (!r->req.method || !r->req.path || r->req.args.oom || r->req.headers.oom) {
        free(r->req.method);
        free(r->req.path);
        kv_free(&r->req.args);
        kv_free(&r->req.headers);
        free(r);
        return NULL;
    }
    return r;
}

static void req_free(Req *r) {
    if (!r) return;
    free(r->req.method);
    free(r->req.path);
    kv_free(&r->req.args);
    kv_free(&r->req.headers);
    free(r->resp.body);
    free(r);
}

static enum MHD_Result queue_answer(HttpServer *s, Req *r) {
    HttpResponse *resp = &r->resp;
    struct MHD_Response *m = MHD_create_response_from_buffer(
        resp->body_len, resp->body ? resp->body : (void *)"",
        resp->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!m) return MHD_NO;
    resp->body = NULL; /* the response owns it */
    MHD_add_response_header(m, "Content-Type",
                            resp->content_type ? resp->content_type : "text/plain; charset=utf-8");
    if (resp->allow) MHD_add_response_header(m, "Allow", resp->allow);
    if (resp->www_authenticate)
        MHD_add_response_header(m, "WWW-Authenticate", resp->www_authenticate);
    if (r->refused) MHD_add_response_header(m, "Retry-After", "1");
    if (s->cert) {
        MHD_add_response_header(m, "Strict-Transport-Security", "max-age=31536000");
        MHD_add_response_header(m, "Content-Security-Policy", "default-src 'self'");
    }
    set_deadline(s, r->conn, HTTP_SEND_TIMEOUT_S);
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)resp->status, m);
    MHD_destroy_response(m);
    return ret;
}

/* 1 when the announced body is too long for this API (answered 413 at once). */
static int body_too_long(struct MHD_Connection *conn) {
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (!cl) return 0;
    errno = 0;
    char *end = NULL;
    unsigned long long n = strtoull(cl, &end, 10);
    return errno != 0 || end == cl || n > HTTP_MAX_BODY;
}

/* ---------- client certificate and token ---------- */

/* 1 when the connection's TLS client presented a certificate that verifies against the client
 * CA bundle (GnuTLS: chain to a trusted CA, validity dates, signatures, and a key purpose of TLS
 * client when the certificate restricts it); else 0 and why (cap bytes). */
static int client_cert_ok(struct MHD_Connection *conn, char *why, size_t cap) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t ss = ci ? (gnutls_session_t)ci->tls_session : NULL;
    unsigned n = 0;
    if (!ss || gnutls_certificate_type_get(ss) != GNUTLS_CRT_X509 ||
        !gnutls_certificate_get_peers(ss, &n) || n == 0) {
        snprintf(why, cap, "no client certificate");
        return 0;
    }
    gnutls_typed_vdata_st purpose = {.type = GNUTLS_DT_KEY_PURPOSE_OID,
                                     .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
    unsigned status = 0;
    int rc = gnutls_certificate_verify_peers(ss, &purpose, 1, &status);
    if (rc < 0) {
        snprintf(why, cap, "client certificate not verified: %s", gnutls_strerror(rc));
        return 0;
    }
    if (status != 0) {
        gnutls_datum_t txt = {NULL, 0};
        if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &txt, 0) == 0) {
            snprintf(why, cap, "client certificate refused: %s", (const char *)txt.data);
            gnutls_free(txt.data);
        } else {
            snprintf(why, cap, "client certificate refused (GnuTLS status 0x%x)", status);
        }
        return 0;
    }
    return 1;
}

static int open_path(const HttpServer *s, const char *path) {
    for (const char *const *p = s->open_paths; p && *p; p++)
        if (!strcmp(*p, path)) return 1;
    return 0;
}

/* 1 when r may be handled: its path is open, or it brings what the server asks for (client
 * certificate, bearer token); else r->resp holds the refusal (403 or 401). */
static int authorized(HttpServer *s, struct MHD_Connection *conn, Req *r) {
    if ((!s->client_ca && !s->token) || open_path(s, r->req.path)) return 1;
    char why[512];
    if (s->client_ca && !client_cert_ok(conn, why, sizeof why)) {
        log_debug("HTTP: %s %.200s refused: %s", r->req.method, r->req.path, why);
        char msg[640];
        snprintf(msg, sizeof msg,
                 "403 forbidden: a client certificate signed by the server's client CA "
                 "(--server-client-ca-file) is required: %s\n",
                 why);
        http_respond(&r->resp, 403, NULL, msg);
        return 0;
    }
    int bad = 0;
    if (s->token && !auth_token_check(s->token, kv_find(&r->req.headers, "Authorization"), &bad)) {
        log_debug("HTTP: %s %.200s refused: %s", r->req.method, r->req.path,
                  bad ? "wrong bearer token" : "no bearer token");
        http_respond(&r->resp, 401, NULL,
                     bad ? "401 unauthorized: wrong bearer token\n"
                         : "401 unauthorized: send Authorization: Bearer <token>\n");
        r->resp.www_authenticate =
            bad ? "Bearer realm=\"etcdbr\", error=\"invalid_token\"" : "Bearer realm=\"etcdbr\"";
        return 0;
    }
    return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    (void)version;
    (void)upload;
    HttpServer *s = cls;
    Req *r = *con_cls;
    if (!r) { /* first call: the headers are in */
        r = req_new(conn, method, url);
        if (!r) return MHD_NO;
        *con_cls = r;
        if (body_too_long(conn)) {
            http_respond(&r->resp, 413, NULL, "request bodies are not accepted\n");
            r->state = REQ_DONE;
            return queue_answer(s, r);
        }
        if (!authorized(s, conn, r)) {
            r->state = REQ_DONE;
            return queue_answer(s, r);
        }
        return MHD_YES;
    }
    if (*upload_size) { /* request bodies are counted and dropped */
        r->body_bytes += *upload_size;
        *upload_size = 0;
        return r->body_bytes > HTTP_MAX_BODY ? MHD_NO : MHD_YES;
    }
    if (r->suspended) { /* resumed by a worker or by dispatch */
        pthread_mutex_lock(&s->pool_mu);
        ReqState st = r->state;
        if (st == REQ_DONE && --s->n_suspended == 0) pthread_cond_broadcast(&s->pool_idle);
        pthread_mutex_unlock(&s->pool_mu);
        if (st != REQ_DONE) return MHD_YES; /* not expected: wait for the worker */
        r->suspended = 0;
        return queue_answer(s, r);
    }
    if (r->state == REQ_DONE) return MHD_YES; /* 413, 401 or 403 already queued */
    if (s->inline_ok && s->inline_ok(s->ctx, &r->req)) {
        s->handler(s->ctx, &r->req, &r->resp);
        r->state = REQ_DONE;
        return queue_answer(s, r);
    }
    dispatch(s, r);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
    (void)code;
    HttpServer *s = cls;
    req_free(*con_cls);
    *con_cls = NULL;
    set_deadline(s, conn, HTTP_IDLE_TIMEOUT_S); /* the next request on a kept-alive connection */
}

/* libmicrohttpd's messages (connection limit reached, ...): at most one line per 10 s, with the
 * count of those left out, so a flood does not flood the log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    static _Atomic int64_t next_ms;
    static atomic_ulong dropped;
    int64_t now = now_mono_ms(), next = atomic_load(&next_ms);
    if (now < next || !atomic_compare_exchange_strong(&next_ms, &next, now + 10000)) {
        atomic_fetch_add(&dropped, 1);
        return;
    }
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    unsigned long d = atomic_exchange(&dropped, 0);
    if (d)
        log_warn("HTTP: %s (and %lu more messages in the last 10 s)", msg, d);
    else
        log_warn("HTTP: %s", msg);
}

/* ---------- start and stop ---------- */

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb || cap > (1u << 20)) {
                free(nb ? nb : buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

/* The connection limit: HTTP_MAX_CONNECTIONS, or fewer when the open-files limit (its soft
 * limit raised to the hard one first, as Go programs do at start) leaves less. */
static unsigned connection_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return HTTP_MAX_CONNECTIONS;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = {rl.rlim_max, rl.rlim_max};
        if (want.rlim_cur == RLIM_INFINITY || want.rlim_cur > (1u << 20)) want.rlim_cur = 1u << 20;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl.rlim_cur = want.rlim_cur;
    }
    rlim_t need = (rlim_t)HTTP_MAX_CONNECTIONS + HTTP_FD_RESERVE;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return HTTP_MAX_CONNECTIONS;
    unsigned lim =
        rl.rlim_cur > HTTP_FD_RESERVE + 64 ? (unsigned)(rl.rlim_cur - HTTP_FD_RESERVE) : 64u;
    log_warn("the open-files limit (RLIMIT_NOFILE) is %llu (hard %llu), under the %llu the HTTP "
             "server needs for %u connections: it takes at most %u; raise the limit (ulimit -n, "
             "the container runtime's nofile)",
             (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
             (unsigned long long)need, HTTP_MAX_CONNECTIONS, lim);
    return lim;
}

/* The listen address: *fam AF_INET or AF_INET6 filled in sa; AF_UNSPEC for all interfaces. */
static int parse_bind(const char *addr, int port, struct sockaddr_storage *sa, int *fam) {
    memset(sa, 0, sizeof *sa);
    *fam = AF_UNSPEC;
    if (!addr || !*addr) return 0;
    char host[INET6_ADDRSTRLEN + 2];
    size_t n = strlen(addr);
    if (n >= sizeof host) return err_set(ERR_INVALID, "bad listen address %s", addr);
    memcpy(host, addr, n + 1);
    if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *fam = AF_INET;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *fam = AF_INET6;
    } else {
        return err_set(ERR_INVALID, "bad listen address %s: not an IPv4 or IPv6 address", addr);
    }
    return 0;
}

static struct MHD_Daemon *start_daemon(HttpServer *s, unsigned flags, int port,
                                       const struct sockaddr_storage *sa, unsigned limit) {
    struct MHD_OptionItem opts[16];
    size_t k = 0;
    /* the logger first: libmicrohttpd says so otherwise, on stderr */
    opts[k++] =
        (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, (void *)s};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, limit, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                        limit / HTTP_PER_IP_DEN * HTTP_PER_IP_NUM, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, HTTP_IDLE_TIMEOUT_S, NULL};
    opts[k++] =
        (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, HTTP_CONNECTION_MEMORY, NULL};
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL};
    opts[k++] =
        (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, (void *)s};
    opts[k++] =
        (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, (void *)s};
    if (sa) opts[k++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)sa};
    if (s->cert) {
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->cert};
        opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->key};
        if (s->client_ca)
            opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->client_ca};
    }
    opts[k++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_ARRAY,
                            opts, MHD_OPTION_END);
}

static int start_listening(HttpServer *s, const HttpServerConfig *cfg) {
    struct sockaddr_storage sa;
    int fam;
    int rc = parse_bind(cfg->bind_addr, cfg->port, &sa, &fam);
    if (rc) return rc;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    flags |= MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL : MHD_USE_POLL;
    if (s->cert) flags |= MHD_USE_TLS;
    unsigned limit = connection_limit();
    if (fam == AF_UNSPEC && MHD_is_feature_supported(MHD_FEATURE_IPv6) == MHD_YES) {
        s->d = start_daemon(s, flags | MHD_USE_DUAL_STACK, cfg->port, NULL, limit);
        if (s->d) {
            s->ipv6 = 1;
        } else {
            log_warn("cannot listen on [::]:%d (%s): serving IPv4 only", cfg->port,
                     strerror(errno));
        }
    }
    if (!s->d) {
        if (fam == AF_INET6) flags |= MHD_USE_IPv6;
        s->d = start_daemon(s, flags, cfg->port, fam == AF_UNSPEC ? NULL : &sa, limit);
        s->ipv6 = fam == AF_INET6;
    }
    if (!s->d) {
        int e = errno;
        return err_set(ERR_IO, "cannot listen on %s port %d: %s",
                       cfg->bind_addr && *cfg->bind_addr ? cfg->bind_addr : "all interfaces",
                       cfg->port, strerror(e));
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info && info->port ? info->port : cfg->port;
    log_debug("HTTP: at most %u connections (%u per address), idle timeout %us, request timeout "
              "%us",
              limit, limit / HTTP_PER_IP_DEN * HTTP_PER_IP_NUM, HTTP_IDLE_TIMEOUT_S,
              HTTP_REQUEST_TIMEOUT_S);
    return 0;
}

/* The number of PEM certificates in pem (0 when none parses). */
static unsigned pem_cert_count(const char *pem) {
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)strlen(pem)};
    gnutls_x509_crt_t *list = NULL;
    unsigned n = 0;
    if (gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM, 0) < 0) return 0;
    for (unsigned i = 0; i < n; i++)
        gnutls_x509_crt_deinit(list[i]);
    gnutls_free(list);
    return n;
}

/* The certificate, key and client CA bundle into s (each at most 1 MiB). */
static int load_tls(HttpServer *s, const HttpServerConfig *cfg) {
    int https = cfg->cert_pem_path && *cfg->cert_pem_path;
    const char *ca = cfg->client_ca_path && *cfg->client_ca_path ? cfg->client_ca_path : NULL;
    if (ca && !https)
        return err_set(ERR_INVALID,
                       "--server-client-ca-file %s needs --server-cert and "
                       "--server-key: client certificates exist only over HTTPS",
                       ca);
    if (!https) return 0;
    s->cert = read_file(cfg->cert_pem_path);
    s->key = cfg->key_pem_path ? read_file(cfg->key_pem_path) : NULL;
    if (!s->cert || !s->key)
        return err_set(ERR_INVALID, "cannot read --server-cert %s or --server-key %s",
                       cfg->cert_pem_path, cfg->key_pem_path ? cfg->key_pem_path : "");
    if (!ca) return 0;
    s->client_ca = read_file(ca);
    if (!s->client_ca)
        return err_set(ERR_INVALID,
                       "cannot read --server-client-ca-file %s (missing, unreadable "
                       "or over 1 MiB)",
                       ca);
    unsigned n = pem_cert_count(s->client_ca);
    if (n == 0)
        return err_set(ERR_INVALID, "--server-client-ca-file %s holds no PEM certificate", ca);
    log_debug("HTTP: client certificates verified against %u CA certificate(s) of %s", n, ca);
    return 0;
}

int http_server_start(const HttpServerConfig *cfg, HttpServer **out) {
    HttpServer *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "out of memory");
    s->handler = cfg->handler;
    s->ctx = cfg->ctx;
    s->inline_ok = cfg->inline_ok;
    pthread_mutex_init(&s->pool_mu, NULL);
    pthread_cond_init(&s->pool_cv, NULL);
    pthread_cond_init(&s->pool_idle, NULL);
    pthread_mutex_init(&s->track_mu, NULL);
    cond_init_monotonic(&s->sweep_cv);
    s->locks_ready = 1;
    s->token = cfg->token;
    s->open_paths = cfg->open_paths;
    int rc = load_tls(s, cfg);
    if (rc) {
        http_server_stop(s);
        return rc;
    }
    if (thread_start_quiet(&s->sweeper, sweeper_main, s) != 0) {
        http_server_stop(s);
        return err_set(ERR_IO, "cannot start the HTTP connection sweeper thread");
    }
    s->sweeper_started = 1;
    rc = start_listening(s, cfg);
    if (rc) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", err_msg());
        http_server_stop(s);
        return err_set(rc, "%s", msg);
    }
    *out = s;
    return 0;
}

int http_server_port(const HttpServer *s) {
    return s->port;
}

int http_server_ipv6(const HttpServer *s) {
    return s->ipv6;
}

/* Waits (up to 10 s) until no connection is suspended: libmicrohttpd aborts when stopped with
 * one. Every queued request was answered by a worker by now, so this is the event loop taking
 * the resumed ones back. */
static void wait_unsuspended(HttpServer *s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&s->pool_mu);
    while (s->n_suspended > 0)
        if (pthread_cond_timedwait(&s->pool_idle, &s->pool_mu, &until) != 0) break;
    if (s->n_suspended > 0) log_warn("HTTP: %u request(s) still suspended at stop", s->n_suspended);
    pthread_mutex_unlock(&s->pool_mu);
}

void http_server_stop(HttpServer *s) {
    if (!s) return;
    if (s->d) {
        MHD_socket l = MHD_quiesce_daemon(s->d); /* no new connections */
        if (l != MHD_INVALID_SOCKET) close(l);
    }
    if (s->locks_ready) {
        pthread_mutex_lock(&s->pool_mu);
        s->stopping = 1;
        pthread_cond_broadcast(&s->pool_cv);
        while (s->q_head || s->busy)
            pthread_cond_wait(&s->pool_idle, &s->pool_mu);
        unsigned n = s->n_workers;
        pthread_mutex_unlock(&s->pool_mu);
        for (unsigned i = 0; i < n; i++)
            pthread_join(s->workers[i], NULL);
        if (s->d) wait_unsuspended(s);
    }
    if (s->d) MHD_stop_daemon(s->d);
    if (s->sweeper_started) {
        thread_stop_join(s->sweeper, &s->track_mu, &s->sweep_cv, &s->sweep_stop);
    }
    if (s->locks_ready) {
        pthread_mutex_destroy(&s->pool_mu);
        pthread_cond_destroy(&s->pool_cv);
        pthread_cond_destroy(&s->pool_idle);
        pthread_mutex_destroy(&s->track_mu);
        pthread_cond_destroy(&s->sweep_cv);
    }
    FREE_ALL(s->cert, s->key, s->client_ca, s);
}
