/* setup: see setup.h. */
#include "setup.h"
#include "etcd_config.h"
#include "rpo.h"
#include "../backup/delta.h"
#include "../common/err.h"
#include "../common/exitcode.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../server/metrics.h"
#include "../store/objhttp.h"
#include "../store/snapobj.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int server_start_leases(ServerSetup *s) {
    if (lease_renewer_start(s->leases, &s->snap.etcd, s->leader_timeout_ms, s->store)) {
        log_error("%s", err_msg());
        return EXIT_FAIL;
    }
    return EXIT_OK;
}

int server_take_etcd_client_urls(ServerSetup *s, char *const *etcd_argv) {
    const char *source = NULL;
    char *urls = NULL;
    int rc = etcd_client_urls(etcd_argv, &urls, &source);
    if (rc) return err_wrap(rc, "--endpoints from the etcd command line");
    if (!urls) {
        log_info("etcd's command line names no client URL: endpoints %s (etcd's default)",
                 s->snap.etcd.endpoints[0]);
        return 0;
    }
    size_t n = 1;
    for (const char *p = urls; *p; p++)
        n += *p == ',';
    const char **list = calloc(n, sizeof *list);
    if (!list) {
        free(urls);
        return err_set(ERR_NOMEM, "out of memory");
    }
    n = 0;
    for (char *save = NULL, *t = strtok_r(urls, ",", &save); t; t = strtok_r(NULL, ",", &save))
        list[n++] = t;
    free(s->client_url_list);
    free(s->client_urls);
    s->client_urls = urls;
    s->client_url_list = list;
    s->snap.etcd.endpoints = list;
    s->snap.etcd.n_endpoints = n;
    log_info("endpoints from %s: %s%s", source, list[0], n > 1 ? " (and more)" : "");
    return 0;
}

void server_teardown(ServerSetup *s) {
    lease_renewer_free(s->leases); /* after the snapshotter: its last delta's update */
    s->leases = NULL;
    store_free(s->store);
    s->store = NULL;
    store_free(s->secondary);
    s->secondary = NULL;
    free(s->client_url_list);
    s->client_url_list = NULL;
    free(s->client_urls);
    s->client_urls = NULL;
    free(s->peer_urls);
    s->peer_urls = NULL;
}

/* ---------- metrics glue ---------- */

static const char *const TRUE_FALSE[2] = {"false", "true"};

/* Unix seconds of the last stored full / delta snapshot, for the age gauges. */
static _Atomic int64_t last_ok_s[2];

static double snapshot_age(void *arg) {
    int64_t t = last_ok_s[(intptr_t)arg];
    return t ? (double)(now_unix_s() - t) : NAN;
}

/* The leader's recovery point (rpo.h): etcdbr_snapshot_rpo_seconds. */
static Rpo rpo;

static double rpo_metric(void *arg) {
    (void)arg;
    return rpo_seconds(&rpo, now_mono_ms());
}

void server_register_age_metrics(void) {
    static int done;
    if (done++) return;
    metrics_register_func(metrics_default(), METRIC_GAUGE, "etcdbr_snapshot_rpo_seconds",
                          "Seconds since the store last held everything etcd had (reset when a "
                          "full or delta snapshot is stored, from the moment its revision was "
                          "read, and when a delta period ends with nothing to store); counted "
                          "from the start of the snapshotter until its first success; NaN "
                          "where no snapshotter runs (followers, no store).",
                          rpo_metric, NULL, NULL);
    metrics_register_func(metrics_default(), METRIC_GAUGE, "etcdbr_full_snapshot_age_seconds",
                          "Seconds since the last successful full snapshot (NaN: none yet).",
                          snapshot_age, (void *)(intptr_t)0, NULL);
    metrics_register_func(metrics_default(), METRIC_GAUGE, "etcdbr_delta_snapshot_age_seconds",
                          "Seconds since the last successful delta snapshot (NaN: none yet).",
                          snapshot_age, (void *)(intptr_t)1, NULL);
}

/* Sets the gauge without labels name (registered with help at its first use) to v. */
static void gauge_set(const char *name, const char *help, double v) {
    MetricOpts mo = {.name = name, .help = help};
    Metric *m = metrics_find_or_register(metrics_default(), METRIC_GAUGE, &mo);
    if (m) metrics_gauge_set(m, NULL, v);
}

/* etcdbr_snapshotter_store_conflict: 1 while snapshots are refused because the store holds
 * another backup history (docs/store-history.md), 0 once one is stored. */
static void set_store_conflict(int conflict) {
    gauge_set("etcdbr_snapshotter_store_conflict",
              "1 while no snapshot is stored because the store's latest backups belong to another "
              "etcd cluster or a newer history (docs/store-history.md); 0 otherwise.",
              conflict);
}

/* etcdbr_snapshot_final_delta_short_revisions: how many revisions the last delta on stop fell
 * short of etcd's revision at the stop (--final-delta-drain-timeout ran out); 0 otherwise. */
static void set_final_delta_short(int64_t revisions) {
    gauge_set("etcdbr_snapshot_final_delta_short_revisions",
              "Revisions the last delta before a stop left out: etcd's revision at SIGTERM/SIGINT "
              "minus the last one stored, when --final-delta-drain-timeout ran out first; 0 "
              "otherwise.",
              (double)revisions);
}

void server_register_store_metric(int configured) {
    set_store_conflict(0);
    set_final_delta_short(0);
    gauge_set("etcdbr_snapshotter_store_configured",
              "1 when a snapshot store is configured; 0: none is (no --storage-provider or "
              "--store-container), no backups are taken.",
              configured ? 1 : 0);
}

/* ---------- store request failures ---------- */

/* The EtcdbrOperation the leader's snapshotter is in (its BEGIN events), -1 where none runs: a
 * failed store request stamps it at once (store_request_failed). */
static atomic_int snapshot_op = -1;

/* Classes of objhttp_failure_class, pre-initialised for the configured provider. */
static const char *const STORE_FAILURE_CLASSES[] = {
    "connect", "timeout", "tls", "network", "throttled", "http_5xx", "http_4xx", "other", NULL};

static Metric *store_failures;

/* The objhttp failure hook: any thread (part uploads run on pool threads); metrics calls only. */
static void store_request_failed(void *ctx, const ObjHttpFailure *f) {
    (void)ctx;
    metrics_counter_inc(store_failures, (const char *[]){f->provider, f->cls});
    int op = atomic_load(&snapshot_op);
    if (op >= 0) etcdbr_metrics_stamp_error((EtcdbrOperation)op);
}

void server_register_store_failure_metric(const Store *store) {
    if (!store_failures) {
        static const char *const labels[] = {"provider", "class", NULL};
        MetricOpts mo = {.name = "etcdbr_store_request_failures_total",
                         .help = "Store requests that failed in a passing way (no answer, "
                                 "timeout, HTTP 5xx or 429), every try counted as it fails "
                                 "(before the retry), by provider and class.",
                         .labels = labels};
        if (metrics_register(metrics_default(), METRIC_COUNTER, &mo, &store_failures)) return;
    }
    /* pre-initialise the provider's classes, so that increase() sees the first failure: the
     * provider is the first word of an object store's description ("S3:bucket/prefix") */
    char provider[32] = "";
    const char *d = store ? store_describe(store) : NULL;
    const char *colon = d ? strchr(d, ':') : NULL;
    if (colon && colon > d && (size_t)(colon - d) < sizeof provider && d[0] != '/')
        snprintf(provider, sizeof provider, "%.*s", (int)(colon - d), d);
    if (provider[0] && strcmp(provider, "Local") != 0) {
        const char *const prov[] = {provider, NULL};
        metrics_touch_all(store_failures,
                          (const char *const *const[]){prov, STORE_FAILURE_CLASSES});
    }
    objhttp_set_failure_hook(store_request_failed, NULL);
}

/* A full or delta snapshot attempt ended (ev->kind FULL or DELTA). */
static void on_snapshot_event(const SnapshotterEvent *ev) {
    const char *kind = ev->kind == SNAP_EVENT_FULL ? "Full" : "Incr";
    atomic_store(&snapshot_op, ETCDBR_OP_DELTA_SNAPSHOT); /* the loop's default activity */
    if (ev->ok) /* the store held everything etcd had when this snapshot's revision was read */
        rpo_caught_up(&rpo, now_mono_ms() - (int64_t)(ev->seconds * 1000.0));
    if (ev->skipped) { /* the newest full is current: a success, but nothing new stored */
        etcdbr_metrics_snapshot_saved(0, 0, ev->revision, ev->created_on);
        return;
    }
    const char *lv[] = {kind, TRUE_FALSE[ev->ok != 0]};
    metrics_histogram_observe(etcdbr_metric(ETCDBR_M_SNAPSHOT_DURATION_SECONDS), lv, ev->seconds);
    if (ev->ok) last_ok_s[ev->kind == SNAP_EVENT_DELTA] = now_unix_s();
    if (ev->ok)
        etcdbr_metrics_snapshot_saved(ev->kind == SNAP_EVENT_DELTA, ev->start_revision,
                                      ev->revision, ev->created_on);
    else
        etcdbr_metrics_record_error(ev->kind == SNAP_EVENT_FULL ? ETCDBR_OP_FULL_SNAPSHOT
                                                                : ETCDBR_OP_DELTA_SNAPSHOT,
                                    ev->in_store ? "store" : etcdbr_metrics_error_class(ev->rc));
    if (ev->ok || ev->rc == ERR_CONFLICT) set_store_conflict(ev->rc == ERR_CONFLICT);
}

/* BEGIN, STARTED, STOPPED: what the snapshotter is doing, for the RPO and the failure hook. */
static void on_loop_event(const SnapshotterEvent *ev) {
    switch (ev->kind) {
    case SNAP_EVENT_STARTED:
        rpo_started(&rpo, now_mono_ms());
        atomic_store(&snapshot_op, ETCDBR_OP_DELTA_SNAPSHOT);
        break;
    case SNAP_EVENT_STOPPED:
        rpo_stopped(&rpo);
        atomic_store(&snapshot_op, -1);
        break;
    case SNAP_EVENT_BEGIN:
        atomic_store(&snapshot_op, ev->of == SNAP_EVENT_FULL ? ETCDBR_OP_FULL_SNAPSHOT
                                   : ev->of == SNAP_EVENT_GC ? ETCDBR_OP_GC
                                                             : ETCDBR_OP_DELTA_SNAPSHOT);
        break;
    default:
        break;
    }
}

void server_on_snapshotter_event(void *ctx, const SnapshotterEvent *ev) {
    if (ctx) lease_renewer_on_event(((ServerSetup *)ctx)->leases, ev);
    switch (ev->kind) {
    case SNAP_EVENT_FULL:
    case SNAP_EVENT_DELTA:
        on_snapshot_event(ev);
        break;
    case SNAP_EVENT_BEGIN:
    case SNAP_EVENT_STARTED:
    case SNAP_EVENT_STOPPED:
        on_loop_event(ev);
        break;
    case SNAP_EVENT_EVENTS: {
        const char *full[] = {"Full"}, *incr[] = {"Incr"};
        metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSHOT_REQUIRED), full, 1);
        metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSHOT_REQUIRED), incr, 1);
        break;
    }
    case SNAP_EVENT_IDLE: /* caught up: nothing etcd has is missing from the store */
        rpo_caught_up(&rpo, now_mono_ms());
        break;
    case SNAP_EVENT_CHAIN_REJECTED:
        metrics_counter_inc(etcdbr_metric(ETCDBR_M_SNAPSHOT_CHAIN_REJECTED_TOTAL),
                            (const char *[]){ev->reason ? ev->reason : "mismatch"});
        break;
    case SNAP_EVENT_FINAL_SHORT:
        set_final_delta_short(ev->revision - ev->start_revision);
        break;
    case SNAP_EVENT_GC:
        atomic_store(&snapshot_op, ETCDBR_OP_DELTA_SNAPSHOT);
        if (ev->gc) {
            const char *fo[] = {"Full", "true"}, *io[] = {"Incr", "true"};
            const char *ff[] = {"Full", "false"}, *iff[] = {"Incr", "false"};
            Metric *m = etcdbr_metric(ETCDBR_M_SNAPSHOT_GC_TOTAL);
            metrics_counter_add(m, fo, (double)ev->gc->full_removed);
            metrics_counter_add(m, io, (double)ev->gc->incr_removed);
            metrics_counter_add(m, ff, (double)ev->gc->full_failed);
            metrics_counter_add(m, iff, (double)ev->gc->incr_failed);
        }
        if (!ev->ok) etcdbr_metrics_record_error(ETCDBR_OP_GC, etcdbr_metrics_error_class(ev->rc));
        break;
    case SNAP_EVENT_DEFRAG: {
        const char *lv[] = {TRUE_FALSE[ev->ok != 0], ev->endpoint ? ev->endpoint : ""};
        metrics_histogram_observe(etcdbr_metric(ETCDBR_M_DEFRAGMENTATION_DURATION_SECONDS), lv,
                                  ev->seconds);
        if (!ev->ok)
            etcdbr_metrics_record_error(ETCDBR_OP_DEFRAGMENTATION,
                                        etcdbr_metrics_error_class(ev->rc));
        break;
    }
    }
}

/* ---------- JSON ---------- */

static void rfc3339(int64_t unix_s, char *out, size_t cap) {
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

json_t *server_snapshot_json(const Snapshot *s) {
    char created[40];
    rfc3339(s->created_on, created, sizeof created);
    return json_pack("{s:s, s:s, s:n, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:b}", "createdOn",
                     created, "immutabilityExpriyTime", "0001-01-01T00:00:00Z", "versionID", "kind",
                     s->kind == SNAP_FULL ? "Full" : "Incr", "snapDir", s->snap_dir, "snapName",
                     s->snap_name, "prefix", s->prefix, "compressionSuffix", s->compression_suffix,
                     "startRevision", (json_int_t)s->start_revision, "lastRevision",
                     (json_int_t)s->last_revision, "isChunk", s->is_chunk, "isFinal", s->is_final);
}

int server_latest_json(const ServerSetup *s, char **text) {
    if (!s->store) return err_set(ERR_INVALID, "no snapshot store is configured");
    Snapshot *list = NULL;
    size_t n = 0;
    int rc = store_list(s->store, &list, &n);
    if (rc) return rc;
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    if (!idx) {
        free(list);
        return err_set(ERR_NOMEM, "out of memory");
    }
    ptrdiff_t fi;
    size_t nd = 0;
    snapname_latest_set(list, n, &fi, idx, &nd);
    json_t *deltas = nd ? json_array() : json_null();
    for (size_t i = 0; i < nd; i++)
        json_array_append_new(deltas, server_snapshot_json(&list[idx[i]]));
    json_t *root = json_pack("{s:o, s:o}", "fullSnapshot",
                             fi >= 0 ? server_snapshot_json(&list[fi]) : json_null(),
                             "deltaSnapshots", deltas);
    *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    free(idx);
    free(list);
    return *text ? 0 : err_set(ERR_NOMEM, "out of memory");
}

int server_etcd_config(const ServerSetup *s, char **text) {
    const char *path = NULL;
    char *buf = NULL;
    size_t n = 0;
    int rc = etcd_config_read_file(&buf, &n, &path);
    if (rc) return rc;
    /* the member list decides which initial-cluster entries stay (no list: keep them all) */
    EtcdMember *members = NULL;
    size_t n_members = 0;
    EtcdConfig ec = s->snap.etcd;
    if (s->service_endpoints_n) {
        ec.endpoints = s->service_endpoints;
        ec.n_endpoints = s->service_endpoints_n;
    }
    ec.connection_timeout_ms = 5000;
    EtcdClient *c = NULL;
    if (etcd_client_new(&ec, &c) || etcd_member_list(c, &members, &n_members)) {
        log_warn("/config: member list unavailable (%s): initial-cluster kept as written",
                 err_msg());
        free(members);
        members = NULL;
        n_members = 0;
    }
    etcd_client_free(c);
    rc = etcd_config_render(buf, n, getenv("POD_NAME"), members, n_members, text);
    free(members);
    free(buf);
    if (rc) return err_wrap(rc, "%s", path);
    /* as the Go tool: also written to $HOME/etcd.conf.yaml (0600) */
    const char *home = getenv("HOME");
    if (home && *home) {
        char out[4096];
        snprintf(out, sizeof out, "%s/etcd.conf.yaml", home);
        FILE *w = fopen(out, "w");
        if (w) {
            fputs(*text, w);
            fclose(w);
        }
    }
    return 0;
}

int server_probe_etcd(const ServerSetup *s, EtcdStatus *st) {
    EtcdConfig ec = s->snap.etcd;
    ec.n_endpoints = 1; /* as the Go tool: the first endpoint is this member's */
    ec.connection_timeout_ms = s->leader_timeout_ms;
    EtcdClient *c = NULL;
    int rc = etcd_client_new(&ec, &c);
    if (!rc) rc = etcd_status(c, st);
    etcd_client_free(c);
    return rc;
}
