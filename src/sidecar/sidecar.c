/* sidecar: see sidecar.h. The sidecar (docs/go-tool.md §1.7, §2, §7): the HTTP API, the
 * initialization state machine (validate the data dir, restore it when needed), and, while this
 * member's etcd is the raft leader, the snapshotter with GC and scheduled defragmentation.
 * Threads: the HTTP server's event loop (quick answers: answers_at_once) and its workers (the
 * requests that wait), a leader-check loop (main thread), the snapshotter thread while leading,
 * and one initialization thread at a time.
 * Snapshotter lifetime: the main thread creates and frees it; HTTP handlers use it only through
 * a reference (snap_acquire/snap_release under mu), and the main thread frees it only after
 * unpublishing it, stopping its thread and waiting for the references to drop to zero, so losing
 * leadership while requests are in flight is safe. Only the main thread takes stop signals. */
#include "sidecar.h"
#include "leader_proxy.h"
#include "member.h"
#include "peer_url.h"
#include "profiling.h"
#include "secondary_sync.h"
#include "server_verify.h"
#include "../backup/fullsnap.h"
#include "../backup/snapshotter.h"
#include "../common/err.h"
#include "../common/exitcode.h"
#include "../common/goparse.h"
#include "../common/log.h"
#include "../common/phase.h"
#include "../common/timeutil.h"
#include "../restore/initializer.h"
#include "../server/http.h"
#include "../server/metrics.h"
#include "../common/thread.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

typedef enum { INIT_NEW, INIT_PROGRESS, INIT_SUCCESSFUL, INIT_FAILED } InitState;
static const char *const init_state_names[] = {"New", "Progress", "Successful", "Failed"};

typedef struct {
    const SidecarOptions *so;
    ServerSetup *setup; /* the configuration (setup.h): the caller's, torn down here */
    pthread_mutex_t mu;
    InitState init_state;
    int init_running;
    char init_mode[16];
    pthread_t init_thread;
    Snapshotter *snap;        /* published while leading (mu); NULL once stopping */
    int snap_users;           /* HTTP handlers holding snap (mu) */
    pthread_cond_t snap_idle; /* snap_users dropped to 0 */
    Snapshotter *snap_owned;  /* main thread only: the snapshotter it runs and will free */
    SecondarySync *sync;      /* main thread only: the secondary backup sync while leading */
    pthread_t snap_thread;
    /* snapshotter_run's stop flag: its interface is a atomic_int (snapshotter.h);
     * written only by request_snapshotter_stop */
    atomic_int snap_stop;
    int64_t next_no_store_warn_ms; /* no store: monotonic time of the next warning */
    int leading;        /* this member's etcd is the raft leader: the backup leader (written by the
                           main thread under mu; read by handlers under mu) */
    int etcd_ok;        /* last probe answered */
    int probe_failures; /* consecutive failed probes */
    int64_t last_probe_log_ms;
    int64_t cluster_size_ms;  /* monotonic; when etcdbr_cluster_size was last read (0: never) */
    ServerVerify *verify;     /* --verify-schedule's thread, or NULL */
    MemberCtl *member;        /* rejoin, scale-up and promotion (member.h) */
    int peer_url_pending;     /* the start-up peer URL check (peer_url.h) is still to do */
    int peer_url_wrapper;     /* --use-etcd-wrapper, in server mode */
    int64_t peer_url_next_ms; /* monotonic; no check before (a minute after a failed one) */
} Server;

/* ---------- initialization ---------- */

/* Validation and restoration metrics of one initialization (rc: initializer_run's). A restore
 * counts when one happened or when the initialization failed after an invalid data dir; the
 * validation "succeeded" unless it failed on a data dir it did not find valid. */
static void observe_init(const InitResult *res, int rc) {
    int ok = rc == 0;
    etcdbr_metrics_initialization(res->validation_ok || ok, res->validation_seconds,
                                  res->restored || (!ok && !res->validation_ok), ok,
                                  res->restore_seconds);
    if (res->restore_phases.n) phase_last_set(PHASE_LAST_RESTORE, &res->restore_phases);
}

/* Before validating the data dir. An etcd that answers on this member's endpoint runs on the data
 * dir, and the validator would wait 120 s for its bbolt lock in silence: ERR_EXISTS at once. A db
 * locked by a process that does not answer is waited for, as the Go tool does, but said first.
 * 0 = validate. */
static int init_precheck(Server *sv) {
    const char *ep = sv->setup->snap.etcd.endpoints[0];
    const char *dir = sv->setup->restore.data_dir;
    EtcdStatus st;
    if (server_probe_etcd(sv->setup, &st) == 0)
        return err_set(ERR_EXISTS,
                       "etcd is running: member %llx answers on %s, so data dir %s is in use; "
                       "stop etcd before initializing it",
                       (unsigned long long)st.member_id, ep, dir);
    char db[4096];
    snprintf(db, sizeof db, "%s/member/snap/db", dir);
    int fd = open(db, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        log_warn("waiting up to 120 s for the lock on %s: another process holds it (an etcd "
                 "that does not answer on %s?)",
                 db, ep);
    close(fd); /* releases our probe lock, if taken */
    return 0;
}

static void *init_main(void *arg) {
    Server *sv = arg;
    thread_name_self("initializer");
    int64_t t0 = now_mono_ms();
    InitConfig ic = {.restore = sv->setup->restore,
                     .full_mode = strcmp(sv->init_mode, "sanity") != 0,
                     .member = member_ctl_init_hooks(sv->member),
                     .max_invalid_copies = sv->so->max_invalid_copies};
    InitResult res;
    memset(&res, 0, sizeof res);
    int rc = init_precheck(sv);
    if (rc) {
        log_error("initialization refused: %s", err_msg());
        etcdbr_metrics_record_error(ETCDBR_OP_VALIDATION, etcdbr_metrics_error_class(rc));
        pthread_mutex_lock(&sv->mu);
        sv->init_state = INIT_FAILED;
        sv->init_running = 0;
        pthread_mutex_unlock(&sv->mu);
        return NULL;
    }
    rc = initializer_run(&ic, &res);
    double secs = (double)(now_mono_ms() - t0) / 1000.0;
    if (rc) {
        log_error("initialization failed after %.3fs: %s", secs, err_msg());
        etcdbr_metrics_record_error(ETCDBR_OP_VALIDATION, etcdbr_metrics_error_class(rc));
    } else {
        log_info("initialization done in %.3fs: %s", secs, res.summary);
    }
    observe_init(&res, rc);
    pthread_mutex_lock(&sv->mu);
    sv->init_state = rc ? INIT_FAILED : INIT_SUCCESSFUL;
    sv->init_running = 0;
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

static void init_start(Server *sv, const char *mode) {
    log_info("initialization requested (mode %s)",
             mode && !strcmp(mode, "sanity") ? "sanity" : "full");
    pthread_mutex_lock(&sv->mu);
    if (sv->init_state != INIT_NEW || sv->init_running) { /* already started: nothing */
        pthread_mutex_unlock(&sv->mu);
        return;
    }
    if (sv->init_thread) pthread_join(sv->init_thread, NULL);
    sv->init_thread = 0;
    snprintf(sv->init_mode, sizeof sv->init_mode, "%s",
             mode && !strcmp(mode, "sanity") ? "sanity" : "full");
    sv->init_state = INIT_PROGRESS;
    sv->init_running = 1;
    if (thread_start_quiet(&sv->init_thread, init_main, sv) != 0) {
        sv->init_state = INIT_FAILED;
        sv->init_running = 0;
        sv->init_thread = 0;
    }
    pthread_mutex_unlock(&sv->mu);
}

/* ---------- snapshotter while leading ---------- */

static void set_leading(Server *sv, int leading) {
    pthread_mutex_lock(&sv->mu);
    sv->leading = leading;
    pthread_mutex_unlock(&sv->mu);
}

/* The snapshotter's fence (SnapshotterConfig.still_leader), on its thread: this member's etcd
 * (first endpoint) still names itself the raft leader. The leader check only runs every
 * --reelection-period; this asks right before each store. */
static int still_leader(void *ctx) {
    Server *sv = ctx;
    EtcdStatus st;
    int rc = server_probe_etcd(sv->setup, &st);
    if (rc) return err_wrap(rc, "etcd status");
    if (st.leader == 0 || st.leader != st.member_id)
        return err_set(ERR_CANCELED, "etcd member %llx now reports leader %llx",
                       (unsigned long long)st.member_id, (unsigned long long)st.leader);
    return 0;
}

static void *snap_main(void *arg) {
    Server *sv = arg;
    thread_name_self("snapshotter");
    snapshotter_run(sv->snap_owned, &sv->snap_stop, 0);
    return NULL;
}

/* Asks the snapshotter thread to stop (it re-reads the atomic flag every pass). */
static void request_snapshotter_stop(Server *sv) {
    atomic_store(&sv->snap_stop, 1);
}

/* The longest time one delta is taken to need to reach the store (ms): part of the handover
 * window (docs/server.md, "Leader handover"). */
#define HANDOVER_STORE_MS 60000

/* Main thread only. */
static void start_snapshotter(Server *sv) {
    if (sv->snap_owned || !sv->setup->has_store) return;
    SnapshotterConfig sc = sv->setup->snap;
    sc.on_event = server_on_snapshotter_event;
    sc.event_ctx = sv->setup;
    sc.still_leader = still_leader;
    sc.leader_ctx = sv;
    /* the previous leader's sidecar may still store one delta it checked its fence for before
     * the handover: the leader check runs every reelection period (twice covers the old one
     * noticing), and a delta's store is taken to take under HANDOVER_STORE_MS */
    sc.handover_window_ms = 2 * sv->so->reelection_ms + HANDOVER_STORE_MS;
    Snapshotter *s = NULL;
    if (snapshotter_new(&sc, &s)) {
        log_error("snapshotter: %s", err_msg());
        return;
    }
    sv->snap_stop = 0; /* no snapshotter thread runs now */
    sv->snap_owned = s;
    if (thread_start_quiet(&sv->snap_thread, snap_main, sv) != 0) {
        log_error("cannot start the snapshotter thread");
        sv->snap_owned = NULL;
        snapshotter_free(s);
        return;
    }
    pthread_mutex_lock(&sv->mu);
    sv->snap = s;
    pthread_mutex_unlock(&sv->mu);
    log_info("became backup leader: snapshotter started");
    if (sv->setup->secondary) {
        SecondarySyncConfig yc = {
            .primary = sv->setup->store,
            .secondary = sv->setup->secondary,
            .snap = s,
            .period_ms = sv->setup->secondary_period_ms,
            .gc_period_ms = sc.gc_period_ms,
            .gc_policy = sc.gc_policy,
            .max_backups = sc.max_backups,
            .delta_retention_s = sc.delta_retention_s,
        };
        if (secondary_sync_start(&yc, &sv->sync))
            log_error("secondary backup sync not started: %s", err_msg());
    }
}

/* Main thread only: unpublishes the snapshotter (new requests get "not active"), stops its
 * loop (requests waiting in it are cancelled), waits until no handler holds it, frees it. */
static void stop_snapshotter(Server *sv) {
    Snapshotter *s = sv->snap_owned;
    if (!s) return;
    secondary_sync_stop(sv->sync); /* it reads the snapshotter's history */
    sv->sync = NULL;
    pthread_mutex_lock(&sv->mu);
    sv->snap = NULL;
    pthread_mutex_unlock(&sv->mu);
    request_snapshotter_stop(sv);
    pthread_join(sv->snap_thread, NULL);
    pthread_mutex_lock(&sv->mu);
    while (sv->snap_users > 0)
        pthread_cond_wait(&sv->snap_idle, &sv->mu);
    pthread_mutex_unlock(&sv->mu);
    sv->snap_owned = NULL;
    snapshotter_free(s);
    log_info("snapshotter stopped");
}

/* HTTP handlers: the published snapshotter with a reference, or NULL; snap_release after use. */
static Snapshotter *snap_acquire(Server *sv) {
    pthread_mutex_lock(&sv->mu);
    Snapshotter *s = sv->snap;
    if (s) sv->snap_users++;
    pthread_mutex_unlock(&sv->mu);
    return s;
}

static void snap_release(Server *sv) {
    pthread_mutex_lock(&sv->mu);
    if (--sv->snap_users == 0) pthread_cond_broadcast(&sv->snap_idle);
    pthread_mutex_unlock(&sv->mu);
}

/* ---------- HTTP ---------- */

static int is_get(const HttpRequest *r) {
    return !strcmp(http_request_method(r), "GET") || !strcmp(http_request_method(r), "HEAD");
}
static int is_get_or_post(const HttpRequest *r) {
    return is_get(r) || !strcmp(http_request_method(r), "POST");
}

static void method_not_allowed(HttpResponse *resp, const char *allow) {
    http_respond(resp, 405, NULL, "method not allowed\n");
    resp->allow = allow;
}

/* As the Go tool: 200 only on the backup leader (its etcd is the raft leader and answers), with
 * no initialization running and snapshots not failing; followers are 503. */
static int healthy(Server *sv) {
    pthread_mutex_lock(&sv->mu);
    int ok = sv->leading && sv->etcd_ok && sv->init_state != INIT_PROGRESS;
    pthread_mutex_unlock(&sv->mu);
    Snapshotter *s = ok ? snap_acquire(sv) : NULL;
    if (s) {
        SnapshotterStatus st;
        snapshotter_status(s, &st);
        snap_release(sv);
        ok = !st.failing;
    }
    return ok;
}

/* A follower's /snapshot/full or /snapshot/delta: forwarded to the backup leader's sidecar
 * (leader_proxy.h); any failure on the way is 405, as the Go tool. */
static void forward_to_leader(Server *sv, const HttpRequest *req, HttpResponse *resp) {
    if (http_request_header(req, LEADER_PROXY_HEADER)) {
        http_respond(resp, 405, NULL,
                     "not the backup leader, and this request was already forwarded to this "
                     "sidecar as the leader's: not forwarding it again\n");
        return;
    }
    char path[1200];
    size_t pl = (size_t)snprintf(path, sizeof path, "%s", http_request_path(req));
    if (pl >= sizeof path || http_request_query_string(req, path + pl, sizeof path - pl)) {
        http_respond(resp, 405, NULL, "not the backup leader; request too long to forward\n");
        return;
    }
    const char *cert = sv->so->server_cert, *key = sv->so->server_key;
    LeaderProxyConfig pc = {
        .etcd = sv->setup->snap.etcd,
        .server_port = sv->so->server_port,
        .tls = *cert && *key,
        /* with client certificates on, every sidecar's certificate is signed by the client CA
         * (it is presented to the leader), so the leader's is verified against it too */
        .cacert =
            *sv->so->server_client_ca ? sv->so->server_client_ca : sv->setup->snap.etcd.cacert,
        .client_cert = *sv->so->server_client_ca ? cert : NULL,
        .client_key = *sv->so->server_client_ca ? key : NULL,
        .token = sv->so->server_token,
        .health_timeout_ms = 10000,
        .request_timeout_ms = sv->setup->snap.etcd.snapshot_timeout_ms + 90000,
    };
    pc.etcd.connection_timeout_ms = sv->setup->leader_timeout_ms;
    LeaderProxyResponse pr;
    int rc = leader_proxy_forward(&pc, http_request_method(req), path, &pr);
    if (rc) {
        char msg[1300];
        snprintf(msg, sizeof msg,
                 "not the backup leader, and the request could not be forwarded to the leader's "
                 "sidecar: %s\n",
                 err_msg());
        log_warn("%s %s: %s", http_request_method(req), path, msg);
        http_respond(resp, 405, NULL, msg);
        return;
    }
    log_debug("%s %s forwarded to the backup leader %s: HTTP %d", http_request_method(req), path,
              pr.leader, pr.status);
    resp->status = pr.status;
    resp->content_type = pr.content_type;
    free(resp->body);
    resp->body = pr.body;
    resp->body_len = pr.body_len;
}

static void handle_snapshot(Server *sv, SnapshotRequestKind kind, const HttpRequest *req,
                            HttpResponse *resp) {
    if (!sv->setup->has_store) {
        http_respond(resp, 405, NULL, "no snapshot store is configured: no snapshots are taken\n");
        return;
    }
    Snapshotter *s = snap_acquire(sv);
    if (!s) {
        pthread_mutex_lock(&sv->mu);
        int leading = sv->leading;
        pthread_mutex_unlock(&sv->mu);
        if (!leading) return forward_to_leader(sv, req, resp);
        http_respond(resp, 500, NULL, "snapshotter is not active\n");
        return;
    }
    Snapshot snap;
    int none = 0;
    /* a request arriving while a snapshot of its kind is taken waits for that one and its own */
    int rc = snapshotter_request(s, kind, 2 * sv->setup->snap.etcd.snapshot_timeout_ms + 60000,
                                 &snap, &none);
    snap_release(sv);
    if (rc) {
        char msg[1100];
        snprintf(msg, sizeof msg, "%s\n", err_msg());
        http_respond(resp, 500, NULL, msg);
        return;
    }
    if (none) {
        http_respond(resp, 200, "application/json", "null");
        return;
    }
    json_t *j = server_snapshot_json(&snap);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    http_respond(resp, 200, "application/json", text);
    free(text);
}

/* A document built for a response (rc: its builder's): 200 with text (freed here), or 500 with
 * the builder's error message. */
static void respond_built(HttpResponse *resp, int rc, const char *type, char *text) {
    if (rc) {
        char msg[1100];
        snprintf(msg, sizeof msg, "%s\n", err_msg());
        http_respond(resp, 500, NULL, msg);
    } else {
        http_respond(resp, 200, type, text);
    }
    free(text);
}

static void handle(void *ctx, const HttpRequest *req, HttpResponse *resp) {
    Server *sv = ctx;
    const char *path = http_request_path(req);
    if (sv->so->enable_profiling && profiling_handle(req, resp)) return;
    if (!strcmp(path, "/healthz")) {
        if (!is_get(req)) return method_not_allowed(resp, "GET, HEAD");
        int ok = healthy(sv);
        http_respond(resp, ok ? 200 : 503, "application/json",
                     ok ? "{\"health\":true}" : "{\"health\":false}");
    } else if (!strcmp(path, "/livez")) {
        /* liveness (docs/server.md): 200 on every member, leader or follower, whenever the HTTP
         * event loop answers; ours, the Go tool has no such path */
        if (!is_get(req)) return method_not_allowed(resp, "GET, HEAD");
        http_respond(resp, 200, NULL, "ok\n");
    } else if (!strcmp(path, "/initialization/start")) {
        if (!is_get_or_post(req)) return method_not_allowed(resp, "GET, POST");
        init_start(sv, http_request_query(req, "mode"));
        http_respond(resp, 200, NULL, "");
    } else if (!strcmp(path, "/initialization/status")) {
        if (!is_get(req)) return method_not_allowed(resp, "GET, HEAD");
        pthread_mutex_lock(&sv->mu);
        InitState st = sv->init_state;
        if (st == INIT_SUCCESSFUL || st == INIT_FAILED) sv->init_state = INIT_NEW;
        pthread_mutex_unlock(&sv->mu);
        http_respond(resp, 200, NULL, init_state_names[st]);
    } else if (!strcmp(path, "/snapshot/full")) {
        if (!is_get_or_post(req)) return method_not_allowed(resp, "GET, POST");
        const char *f = http_request_query(req, "final");
        int final = 0;
        if (f && go_parse_bool(f, &final)) {
            http_respond(resp, 400, NULL, "invalid value of query parameter final\n");
            return;
        }
        handle_snapshot(sv, final ? SNAP_REQ_FULL_FINAL : SNAP_REQ_FULL, req, resp);
    } else if (!strcmp(path, "/snapshot/delta")) {
        if (!is_get_or_post(req)) return method_not_allowed(resp, "GET, POST");
        handle_snapshot(sv, SNAP_REQ_DELTA, req, resp);
    } else if (!strcmp(path, "/snapshot/latest")) {
        if (!is_get(req)) return method_not_allowed(resp, "GET, HEAD");
        char *text = NULL;
        int rc = server_latest_json(sv->setup, &text);
        respond_built(resp, rc, "application/json", text);
    } else if (!strcmp(path, "/config")) {
        if (!is_get(req)) return method_not_allowed(resp, "GET, HEAD");
        char *text = NULL;
        int rc = server_etcd_config(sv->setup, &text);
        respond_built(resp, rc, "application/yaml", text);
    } else if (!strcmp(path, "/metrics")) {
        if (!is_get(req)) return method_not_allowed(resp, "GET, HEAD");
        size_t len = 0;
        char *text = metrics_render(metrics_default(), &len);
        resp->status = 200;
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp->body = text;
        resp->body_len = len;
    } else {
        http_respond(resp, 404, NULL, "404 page not found\n");
    }
}

/* HttpServerConfig.inline_ok: the paths whose answer needs no I/O and no wait (state under a
 * mutex, the metrics registry) are answered on the HTTP event loop; the others (snapshots, which
 * wait for the snapshotter; forwarding to the leader; store listings; the member list for
 * /config; starting an initialization) go to the HTTP workers, so they never delay /healthz. */
static int answers_at_once(void *ctx, const HttpRequest *req) {
    (void)ctx;
    static const char *const slow[] = {"/snapshot/full", "/snapshot/delta", "/snapshot/latest",
                                       "/config", "/initialization/start"};
    const char *path = http_request_path(req);
    for (size_t i = 0; i < sizeof slow / sizeof slow[0]; i++)
        if (!strcmp(path, slow[i])) return 0;
    /* the profiling documents read hundreds of small /proc files: a worker's job */
    return strncmp(path, "/debug/pprof", 12) != 0;
}

/* Answered without client certificate or token (docs/server.md, "Production setting"): probes
 * and scrapers seldom have either, and these tell only health and counters. */
static const char *const open_paths[] = {"/healthz", "/livez", "/metrics", NULL};

/* The start line: scheme, port, address, and what a request must bring (never the token). */
static void log_serving(const SidecarOptions *so, const HttpServer *http) {
    const char *cert = so->server_cert;
    log_info("serving HTTP%s on port %d (%s)%s%s", *cert ? "S" : "", http_server_port(http),
             *so->server_address      ? so->server_address
             : http_server_ipv6(http) ? "IPv6 and IPv4"
                                      : "IPv4",
             *so->server_client_ca ? "; client certificates required" : "",
             so->server_token ? "; bearer token required" : "");
    if (*so->server_client_ca || so->server_token)
        log_info("HTTP paths open without credentials: /healthz, /livez, /metrics");
    if (so->enable_profiling)
        log_info("profiling documents served under %s (--enable-profiling)%s", PROFILING_PREFIX,
                 *so->server_client_ca || so->server_token ? ", with the same credentials as "
                                                             "every closed path"
                                                           : "");
}

/* ---------- leader check ---------- */

/* etcdbr_cluster_size from etcd's member list (learners included), read through this member's
 * endpoint at most once per reelection period; kept as it was when the list cannot be read. */
static void update_cluster_size(Server *sv) {
    int64_t now = now_mono_ms();
    if (sv->cluster_size_ms && now - sv->cluster_size_ms < sv->so->reelection_ms) return;
    sv->cluster_size_ms = now;
    EtcdConfig ec = sv->setup->snap.etcd;
    ec.n_endpoints = 1;
    ec.connection_timeout_ms = sv->setup->leader_timeout_ms;
    EtcdClient *c = NULL;
    EtcdMember *members = NULL;
    size_t n = 0;
    if (etcd_client_new(&ec, &c) == 0 && etcd_member_list(c, &members, &n) == 0)
        etcdbr_metrics_set_cluster_size(n);
    else
        log_debug("etcdbr_cluster_size not updated: %s", err_msg());
    free(members);
    etcd_client_free(c);
}

/* The start-up peer URL check (docs/go-tool.md §10.4, last paragraph), at this member's first
 * Status answer and before it may lead; again a minute later while it fails. 1 when it ran (it may
 * have taken seconds, or had etcd-wrapper stop etcd: the caller's Status is old). */
static int check_peer_urls(Server *sv, uint64_t member_id) {
    if (!sv->peer_url_pending || now_mono_ms() < sv->peer_url_next_ms) return 0;
    const char *cert = sv->so->server_cert, *key = sv->so->server_key;
    PeerUrlConfig pc = {
        .etcd = sv->setup->snap.etcd,
        .others = sv->setup->service_endpoints,
        .n_others = sv->setup->service_endpoints_n,
        .use_wrapper = sv->peer_url_wrapper,
        .server_tls = *cert && *key,
        .stop = sv->so->stop,
    };
    int rc = peer_url_update(&pc, member_id);
    if (rc == 0) {
        sv->peer_url_pending = 0;
    } else if (rc != ERR_CANCELED) { /* stopping: no next time */
        sv->peer_url_next_ms = now_mono_ms() + 60000;
        log_warn("peer URL check: trying again in 60s");
    }
    return 1;
}

static void leader_check(Server *sv) {
    EtcdStatus st;
    int rc = server_probe_etcd(sv->setup, &st);
    pthread_mutex_lock(&sv->mu);
    int was_ok = sv->etcd_ok;
    sv->etcd_ok = rc == 0;
    pthread_mutex_unlock(&sv->mu);
    /* say so on every change, and every minute while etcd does not answer */
    int64_t now = now_mono_ms();
    if (rc && (was_ok || sv->probe_failures == 0 || now - sv->last_probe_log_ms >= 60000)) {
        log_warn("etcd does not answer: %s", err_msg());
        sv->last_probe_log_ms = now;
    } else if (!rc && sv->probe_failures) {
        log_info("etcd answers again (member %llx, leader %llx)", (unsigned long long)st.member_id,
                 (unsigned long long)st.leader);
    }
    sv->probe_failures = rc ? sv->probe_failures + 1 : 0;
    member_ctl_tick(sv->member, rc, &st); /* a learner's promotion */
    if (rc == 0 && check_peer_urls(sv, st.member_id)) return;
    int lead = rc == 0 && st.leader != 0 && st.leader == st.member_id;
    if (lead && !sv->leading) {
        set_leading(sv, 1);
        start_snapshotter(sv);
        server_verify_set_leading(sv->verify, 1);
    } else if (!lead && sv->leading) {
        log_info(rc ? "etcd does not answer (%s): stopping snapshots"
                    : "no longer the leader: "
                      "stopping snapshots%s",
                 rc ? err_msg() : "");
        set_leading(sv, 0);
        server_verify_set_leading(sv->verify, 0);
        stop_snapshotter(sv);
    }
    if (rc == 0) update_cluster_size(sv);
}

/* Main thread: a snapshotter whose fence refused a store (this member's etcd is no longer the
 * raft leader) has stopped its loop: it is freed and the member counts as a follower until
 * the next leader check, which the caller runs at once. 1 when that happened. */
static int stop_if_fenced(Server *sv) {
    if (!sv->snap_owned) return 0;
    SnapshotterStatus st;
    snapshotter_status(sv->snap_owned, &st);
    if (!st.fenced) return 0;
    log_info("leadership moved (the fence refused a store): stopping snapshots");
    set_leading(sv, 0);
    server_verify_set_leading(sv->verify, 0);
    stop_snapshotter(sv);
    return 1;
}

/* ---------- run mode: etcd as a child ---------- */

typedef struct {
    char **argv; /* etcd command line (borrowed from main's argv) */
    pid_t pid;   /* 0 = not running */
    int restarts;
    int64_t next_start_ms; /* monotonic; backoff after a crash */
    int crashed;           /* the last exit was not asked for: validate fully */
} Child;

static pid_t spawn_etcd(char **argv) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        err_set(ERR_IO, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never an orphan etcd without its backups */
        if (getppid() != parent) _exit(127);
        execvp(argv[0], argv);
        fprintf(stderr, "etcdbrctl run: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

/* Starts etcd when it is not running: initialization first (full validation after a crash or
 * at the first start, as the Go tool's launcher does), then exec. */
static void supervise(Server *sv, Child *ch) {
    if (ch->pid > 0) {
        int st;
        pid_t r = waitpid(ch->pid, &st, WNOHANG);
        if (r != ch->pid) return;
        ch->pid = 0;
        ch->crashed = 1;
        ch->restarts++;
        int64_t backoff = ch->restarts > 6 ? 64000 : 1000LL << (ch->restarts - 1);
        ch->next_start_ms = now_mono_ms() + backoff;
        if (WIFEXITED(st))
            log_error("etcd exited with status %d; validating the data dir and restarting it in "
                      "%.0fs",
                      WEXITSTATUS(st), (double)backoff / 1000.0);
        else
            log_error("etcd was killed by signal %d; validating the data dir and restarting it "
                      "in %.0fs",
                      WTERMSIG(st), (double)backoff / 1000.0);
        stop_snapshotter(sv);
        set_leading(sv, 0);
        server_verify_set_leading(sv->verify, 0);
        return;
    }
    if (now_mono_ms() < ch->next_start_ms) return;
    if (init_precheck(sv)) {
        log_error("not starting etcd: %s; retrying", err_msg());
        ch->next_start_ms = now_mono_ms() + 5000;
        return;
    }
    InitConfig ic = {.restore = sv->setup->restore,
                     .full_mode = 1,
                     .member = member_ctl_init_hooks(sv->member),
                     .max_invalid_copies = sv->so->max_invalid_copies};
    InitResult res;
    int rc = initializer_run(&ic, &res);
    observe_init(&res, rc);
    if (rc) {
        log_error("initialization before starting etcd failed: %s; retrying", err_msg());
        ch->next_start_ms = now_mono_ms() + 5000;
        return;
    }
    log_info("%s", res.summary);
    ch->pid = spawn_etcd((char **)member_ctl_etcd_argv(sv->member, ch->argv));
    if (ch->pid < 0) {
        log_error("%s", err_msg());
        ch->pid = 0;
        ch->next_start_ms = now_mono_ms() + 5000;
        return;
    }
    log_info("started %s (pid %d)", ch->argv[0], (int)ch->pid);
}

static void stop_child(Child *ch) {
    if (ch->pid <= 0) return;
    kill(ch->pid, SIGTERM);
    for (int i = 0; i < 300; i++) { /* 30 s, then SIGKILL */
        if (waitpid(ch->pid, NULL, WNOHANG) == ch->pid) {
            ch->pid = 0;
            log_info("etcd stopped");
            return;
        }
        usleep(100 * 1000);
    }
    log_warn("etcd did not stop within 30s: killing it");
    kill(ch->pid, SIGKILL);
    waitpid(ch->pid, NULL, 0);
    ch->pid = 0;
}

/* No store configured: nothing is backed up. Said at start and every garbage-collection period
 * (at least a second apart), as /metrics says with etcdbr_snapshotter_store_configured 0. */
static void warn_no_store(Server *sv) {
    if (sv->setup->has_store || now_mono_ms() < sv->next_no_store_warn_ms) return;
    int64_t period = sv->setup->snap.gc_period_ms;
    sv->next_no_store_warn_ms = now_mono_ms() + (period < 1000 ? 1000 : period);
    log_warn("no snapshot store is configured (--storage-provider and --store-container are "
             "empty): no backups are taken");
}

int sidecar_run(ServerSetup *setup, const SidecarOptions *so, char **etcd_argv) {
    Server sv;
    memset(&sv, 0, sizeof sv);
    sv.so = so;
    sv.setup = setup;
    int code;
    if (server_start_leases(sv.setup) != EXIT_OK) {
        server_teardown(sv.setup);
        return EXIT_FAIL;
    }
    pthread_mutex_init(&sv.mu, NULL);
    pthread_cond_init(&sv.snap_idle, NULL);
    etcdbr_metrics_init();
    server_register_age_metrics();
    server_register_store_metric(sv.setup->has_store);
    server_register_store_failure_metric(sv.setup->store);
    if (sv.setup->secondary) secondary_sync_register_metrics();
    if ((code = server_verify_start(&so->verify, sv.setup, &sv.verify)) != EXIT_OK) {
        server_teardown(sv.setup);
        pthread_cond_destroy(&sv.snap_idle);
        pthread_mutex_destroy(&sv.mu);
        return code;
    }
    if ((code = member_ctl_new(&so->member, &sv.setup->snap.etcd, etcd_argv, so->reelection_ms,
                               so->stop, &sv.member))) {
        server_verify_stop(sv.verify);
        server_teardown(sv.setup);
        pthread_cond_destroy(&sv.snap_idle);
        pthread_mutex_destroy(&sv.mu);
        return code;
    }
    sv.peer_url_pending = 1;
    sv.peer_url_wrapper = so->use_etcd_wrapper;
    if (sv.peer_url_wrapper && etcd_argv) {
        /* run mode: etcdbrctl is etcd's parent, no etcd-wrapper exists; etcd's command line is
         * fixed, so restarting it would bring nothing new (docs/cluster.md) */
        log_warn("--use-etcd-wrapper has no effect under run: etcdbrctl starts etcd itself and "
                 "does not restart it after a peer URL update (etcd keeps its listeners; the "
                 "other members use the new URLs at once)");
        sv.peer_url_wrapper = 0;
    }
    /* temp files of a killed run go now, not at this member's first full snapshot as leader */
    if (sv.setup->has_store) fullsnap_cleanup_stale(sv.setup->snap.temp_dir);
    HttpServer *http = NULL;
    const char *cert = so->server_cert, *key = so->server_key;
    /* the HTTP threads (and the threads they start) inherit a mask without stop signals */
    sigset_t stop_sigs, old_mask;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGTERM);
    sigaddset(&stop_sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, &old_mask);
    HttpServerConfig hc = {.bind_addr = so->server_address,
                           .port = so->server_port,
                           .cert_pem_path = *cert ? cert : NULL,
                           .key_pem_path = *key ? key : NULL,
                           .handler = handle,
                           .ctx = &sv,
                           .inline_ok = answers_at_once,
                           .client_ca_path = so->server_client_ca,
                           .token = so->server_token,
                           .open_paths = open_paths};
    int hrc = http_server_start(&hc, &http);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (hrc) {
        log_error("%s", err_msg());
        member_ctl_free(sv.member);
        server_verify_stop(sv.verify);
        server_teardown(sv.setup);
        pthread_cond_destroy(&sv.snap_idle);
        pthread_mutex_destroy(&sv.mu);
        return EXIT_FAIL;
    }
    log_serving(so, http);
    atomic_int *stop = so->stop;
    Child child = {.argv = etcd_argv};
    int64_t period = so->reelection_ms;
    int64_t next_check = 0;
    while (!*stop) {
        warn_no_store(&sv);
        if (etcd_argv) supervise(&sv, &child);
        pthread_mutex_lock(&sv.mu);
        int initializing = sv.init_running;
        pthread_mutex_unlock(&sv.mu);
        if (stop_if_fenced(&sv)) next_check = 0;
        if (!initializing && now_mono_ms() >= next_check) {
            leader_check(&sv);
            /* while etcd starts, look again soon */
            next_check = now_mono_ms() + (sv.leading || !etcd_argv ? period : 500);
        }
        usleep(100 * 1000);
    }
    log_info("stopping");
    /* HTTP first: no handler can reach the snapshotter or start an initialization after this;
     * requests in flight finish (a snapshot request is served by the still running loop) */
    http_server_stop(http);
    server_verify_stop(sv.verify); /* a verification in progress is canceled */
    stop_snapshotter(&sv);         /* its last delta needs etcd: before etcd stops */
    stop_child(&child);
    if (sv.init_thread) pthread_join(sv.init_thread, NULL);
    member_ctl_free(sv.member);
    server_teardown(sv.setup);
    pthread_cond_destroy(&sv.snap_idle);
    pthread_mutex_destroy(&sv.mu);
    return EXIT_OK;
}
