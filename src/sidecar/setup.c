/* setup: see setup.h. */
#include "setup.h"
#include "etcd_config.h"
#include "../backup/delta.h"
#include "../common/err.h"
#include "../common/exitcode.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../server/metrics.h"
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

void server_register_age_metrics(void) {
    static int done;
    if (done++) return;
    metrics_register_func(metrics_default(), METRIC_GAUGE, "etcdbr_full_snapshot_age_seconds",
                          "Seconds since the last successful full snapshot (NaN: none yet).",
                          snapshot_age, (void *)(intptr_t)0, NULL);
    metrics_register_func(metrics_default(), METRIC_GAUGE, "etcdbr_delta_snapshot_age_seconds",
                          "Seconds since the last successful delta snapshot (NaN: none yet).",
                          snapshot_age, (void *)(intptr_t)1, NULL);
}

static void set_store_conflict(int conflict);

/* etcdbr_snapshot_final_delta_short_revisions: how many revisions the last delta on stop fell
 * short of etcd's revision at the stop (--final-delta-drain-timeout ran out); 0 otherwise. */
static void set_final_delta_short(int64_t revisions) {
    Metric *m = metrics_find(metrics_default(), "etcdbr_snapshot_final_delta_short_revisions");
    if (!m) {
        MetricOpts mo = {.name = "etcdbr_snapshot_final_delta_short_revisions",
                         .help = "Revisions the last delta before a stop left out: etcd's revision "
                                 "at SIGTERM/SIGINT minus the last one stored, when "
                                 "--final-delta-drain-timeout ran out first; 0 otherwise."};
        if (metrics_register(metrics_default(), METRIC_GAUGE, &mo, &m)) return;
    }
    metrics_gauge_set(m, NULL, (double)revisions);
}

void server_register_store_metric(int configured) {
    set_store_conflict(0);
    set_final_delta_short(0);
    Metric *m = metrics_find(metrics_default(), "etcdbr_snapshotter_store_configured");
    if (!m) {
        MetricOpts mo = {.name = "etcdbr_snapshotter_store_configured",
                         .help = "1 when a snapshot store is configured; 0: none is (no "
                                 "--storage-provider or --store-container), no backups are taken."};
        if (metrics_register(metrics_default(), METRIC_GAUGE, &mo, &m)) return;
    }
    metrics_gauge_set(m, NULL, configured ? 1 : 0);
}

/* etcdbr_snapshotter_store_conflict: 1 while snapshots are refused because the store holds
 * another backup history (docs/store-history.md), 0 once one is stored. */
static void set_store_conflict(int conflict) {
    Metric *m = metrics_find(metrics_default(), "etcdbr_snapshotter_store_conflict");
    if (!m) {
        MetricOpts mo = {.name = "etcdbr_snapshotter_store_conflict",
                         .help = "1 while no snapshot is stored because the store's latest "
                                 "backups belong to another etcd cluster or a newer history "
                                 "(docs/store-history.md); 0 otherwise."};
        if (metrics_register(metrics_default(), METRIC_GAUGE, &mo, &m)) return;
    }
    metrics_gauge_set(m, NULL, conflict);
}

void server_on_snapshotter_event(void *ctx, const SnapshotterEvent *ev) {
    if (ctx) lease_renewer_on_event(((ServerSetup *)ctx)->leases, ev);
    const char *kind = ev->kind == SNAP_EVENT_FULL ? "Full" : "Incr";
    switch (ev->kind) {
    case SNAP_EVENT_FULL:
    case SNAP_EVENT_DELTA: {
        if (ev->skipped) { /* the newest full is current: a success, but nothing new stored */
            etcdbr_metrics_snapshot_saved(0, 0, ev->revision, ev->created_on);
            break;
        }
        const char *lv[] = {kind, TRUE_FALSE[ev->ok != 0]};
        metrics_histogram_observe(etcdbr_metric(ETCDBR_M_SNAPSHOT_DURATION_SECONDS), lv,
                                  ev->seconds);
        if (ev->ok) last_ok_s[ev->kind == SNAP_EVENT_DELTA] = now_unix_s();
        if (ev->ok)
            etcdbr_metrics_snapshot_saved(ev->kind == SNAP_EVENT_DELTA, ev->start_revision,
                                          ev->revision, ev->created_on);
        else
            etcdbr_metrics_record_error(ev->kind == SNAP_EVENT_FULL ? ETCDBR_OP_FULL_SNAPSHOT
                                                                    : ETCDBR_OP_DELTA_SNAPSHOT,
                                        etcdbr_metrics_error_class(ev->rc));
        if (ev->ok || ev->rc == ERR_CONFLICT) set_store_conflict(ev->rc == ERR_CONFLICT);
        break;
    }
    case SNAP_EVENT_EVENTS: {
        const char *full[] = {"Full"}, *incr[] = {"Incr"};
        metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSHOT_REQUIRED), full, 1);
        metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSHOT_REQUIRED), incr, 1);
        break;
    }
    case SNAP_EVENT_IDLE:
        break;
    case SNAP_EVENT_CHAIN_REJECTED:
        metrics_counter_inc(etcdbr_metric(ETCDBR_M_SNAPSHOT_CHAIN_REJECTED_TOTAL),
                            (const char *[]){ev->reason ? ev->reason : "mismatch"});
        break;
    case SNAP_EVENT_FINAL_SHORT:
        set_final_delta_short(ev->revision - ev->start_revision);
        break;
    case SNAP_EVENT_GC:
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
