/* server_common: see server_common.h. */
#include "server_common.h"
#include "cmd.h"
#include "etcd_config.h"
#include "../backup/delta.h"
#include "../codec/crypt.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../server/metrics.h"
#include "../store/snapobj.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *opt_or_null(const Opts *o, const char *name) {
    const char *v = opt_str(o, name);
    return v && *v ? v : NULL;
}

int setup_etcd_config(const Opts *o, EtcdConfig *out) {
    int64_t conn = opt_duration_ms(o, "etcd-connection-timeout");
    int64_t snapt = opt_duration_ms(o, "etcd-snapshot-timeout");
    if (conn <= 0 || snapt <= 0 || snapt < conn) {
        log_error("etcd timeouts must be > 0 and --etcd-snapshot-timeout >= "
                  "--etcd-connection-timeout");
        return EXIT_USAGE;
    }
    size_t n_ep = 0;
    const char *const *eps = opt_list(o, "endpoints", &n_ep);
    if (n_ep == 0) {
        log_error("--endpoints: at least one endpoint is needed");
        return EXIT_USAGE;
    }
    *out = (EtcdConfig){
        .endpoints = eps,
        .n_endpoints = n_ep,
        .cacert = opt_or_null(o, "cacert"),
        .cert = opt_or_null(o, "cert"),
        .key = opt_or_null(o, "key"),
        .insecure_skip_tls_verify = opt_bool(o, "insecure-skip-tls-verify"),
        .username = opt_str(o, "etcd-username"),
        .password = opt_str(o, "etcd-password"),
        .connection_timeout_ms = conn,
        .snapshot_timeout_ms = snapt,
        .defrag_timeout_ms = opt_duration_ms(o, "etcd-defrag-timeout"),
    };
    return EXIT_OK;
}

int setup_snapshotter_config(const Opts *o, SnapshotterConfig *sc, CronSchedule *defrag) {
    memset(sc, 0, sizeof *sc);
    int code = setup_etcd_config(o, &sc->etcd);
    if (code) return code;
    if (cron_parse(opt_str(o, "schedule"), &sc->schedule)) {
        log_error("--schedule: %s", err_msg());
        return EXIT_USAGE;
    }
    if (defrag) {
        if (cron_parse(opt_str(o, "defragmentation-schedule"), defrag)) {
            log_error("--defragmentation-schedule: %s", err_msg());
            return EXIT_USAGE;
        }
        sc->defrag_schedule = defrag;
    }
    sc->compression = COMPRESS_NONE;
    if (opt_bool(o, "compress-snapshots") &&
        compress_parse_policy(opt_str(o, "compression-policy"), &sc->compression)) {
        log_error("--compression-policy: %s", err_msg());
        return EXIT_USAGE;
    }
    GzipWriterOptions gz = {.threads = (int)opt_int(o, "gzip-threads")};
    if (compress_parse_gzip_mode(opt_str(o, "gzip-mode"), &gz.mode)) {
        log_error("--gzip-mode: %s", err_msg());
        return EXIT_USAGE;
    }
    compress_set_gzip_defaults(&gz); /* parsed config, before the snapshotter's threads */
    int64_t mem = opt_int(o, "delta-snapshot-memory-limit");
    int64_t maxch = opt_int(o, "max-changes-per-delta-snapshot"); /* >= 0: the table's range */
    sc->temp_dir = opt_str(o, "snapstore-temp-directory");
    sc->delta_period_ms = opt_duration_ms(o, "delta-snapshot-period");
    sc->delta_memory_limit = mem < 1 ? 10485760u : (uint64_t)mem; /* Go: < 1 resets */
    sc->max_changes = (uint64_t)maxch;
    sc->backoff_multiplier = opt_int(o, "backoff-multiplier");
    sc->backoff_attempt_limit = opt_int(o, "backoff-attempt-limit");
    sc->backoff_max_ms = opt_duration_ms(o, "backoff-threshold-time");
    sc->stop_drain_ms = opt_duration_ms(o, "final-delta-drain-timeout");
    sc->gc_period_ms = opt_duration_ms(o, "garbage-collection-period");
    sc->max_backups = (int)opt_int(o, "max-backups");
    sc->delta_retention_s = opt_duration_ms(o, "delta-snapshot-retention-period") / 1000;
    sc->resume = 1; /* snapshot and server: a crash loop must not stop backups (issue 7) */
    sc->abandon_other_histories = opt_bool(o, "abandon-other-histories");
    if (gc_parse_policy(opt_str(o, "garbage-collection-policy"), &sc->gc_policy)) {
        log_error("--garbage-collection-policy: %s", err_msg());
        return EXIT_USAGE;
    }
    if (sc->gc_policy == GC_LIMIT_BASED && sc->max_backups < 1) {
        log_error("--max-backups must be > 0 with the LimitBased policy");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int setup_restore_config(const Opts *o, RestoreConfig *rc, char **peer_urls_owned) {
    memset(rc, 0, sizeof *rc);
    *peer_urls_owned = NULL;
    /* ranges and allowed values (max-fetchers, quota, new-lease-ttl, revision, bump-revision,
     * auto-compaction-mode) are the option table's, checked before any command runs; the Go
     * tool's embedded-etcd flags are marked ignored there and warned about by opts_finish */
    int64_t fetchers = opt_int(o, "max-fetchers");
    int64_t lease_ttl_ms = opt_duration_ms(o, "new-lease-ttl");
    int64_t target_rev = 0, target_time = 0, bump = 0;
    int mark = 0;
    if (opts_has(o, "revision")) {
        target_rev = opt_int(o, "revision");
        bump = opt_int(o, "bump-revision");
        mark = opt_bool(o, "mark-compacted");
        const char *t = opt_str(o, "time");
        if (*t && delta_parse_time(t, &target_time)) {
            log_error("--time: %s", err_msg());
            return EXIT_USAGE;
        }
        if (*t && target_rev) {
            log_error("--revision and --time exclude each other");
            return EXIT_USAGE;
        }
        if ((bump > 0) != (mark != 0)) {
            log_error("--bump-revision and --mark-compacted go together (as in etcdutl snapshot "
                      "restore)");
            return EXIT_USAGE;
        }
    }
    size_t n_urls = 0;
    const char *const *urls = opt_list(o, "initial-advertise-peer-urls", &n_urls);
    size_t len = 1;
    for (size_t i = 0; i < n_urls; i++)
        len += strlen(urls[i]) + 1;
    char *peer = calloc(1, len);
    if (!peer) return EXIT_FAIL;
    for (size_t i = 0; i < n_urls; i++) {
        if (i) strcat(peer, ",");
        strcat(peer, urls[i]);
    }
    *peer_urls_owned = peer;
    *rc = (RestoreConfig){
        .data_dir = opt_str(o, "data-dir"),
        .temp_dir = opt_str(o, "restoration-temp-snapshots-dir"),
        .name = opt_str(o, "name"),
        .initial_cluster = opt_str(o, "initial-cluster"),
        .initial_cluster_token = opt_str(o, "initial-cluster-token"),
        .initial_advertise_peer_urls = peer,
        .skip_hash_check = opt_bool(o, "skip-hash-check"),
        .max_fetchers = (int)fetchers,
        .etcdutl_bin = opt_str(o, "etcdutl-bin"),
        .target_revision = target_rev,
        .target_time_ns = target_time,
        .bump_revision = bump,
        .mark_compacted = mark,
        .new_lease_ttl = lease_ttl_ms / 1000,
        .quota_bytes = opt_int(o, "embedded-etcd-quota-bytes"),
    };
    return EXIT_OK;
}

#define KEYS_ENV "ETCDBR_ENCRYPTION_KEYS"

int setup_keyring(const Opts *o, Keyring **out) {
    *out = NULL;
    const char *file = opts_has(o, "encryption-key-file") ? opt_str(o, "encryption-key-file") : "";
    char *env = getenv(KEYS_ENV);
    int rc = 0, code = EXIT_OK;
    if (env && !*env) env = NULL;
    if (*file && env) {
        log_error("encryption keys: both --encryption-key-file (or ETCDBR_ENCRYPTION_KEY_FILE) and "
                  "%s are set; give the keys one way",
                  KEYS_ENV);
        code = EXIT_USAGE;
    } else if (*file) {
        unsigned mode = 0;
        rc = keyring_load_file(file, out, &mode);
        if (!rc && (mode & 077))
            log_warn("key file %s may be read by group or others (mode %04o): chmod 600 it", file,
                     mode);
    } else if (env) {
        rc = keyring_parse(env, strlen(env), KEYS_ENV, out);
    }
    if (env) {
        /* the keys leave the environment: etcd and etcdutl children must not inherit them, and
         * the process's initial environment (/proc/<pid>/environ) no longer shows them */
        OPENSSL_cleanse(env, strlen(env));
        unsetenv(KEYS_ENV);
    }
    if (rc) {
        log_error("encryption keys: %s", err_msg());
        code = rc == ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
    }
    if (code) {
        keyring_free(*out);
        *out = NULL;
        return code;
    }
    if (*out)
        log_info("encryption: %zu key(s) from %s; new snapshots are encrypted with key id \"%s\"",
                 keyring_count(*out), *file ? file : KEYS_ENV, keyring_id(*out, 0));
    return EXIT_OK;
}

/* The STORE flag group's names, once per prefix ("", "source-", "secondary-"). */
typedef struct {
    const char *prefix, *provider, *container, *endpoint, *store_prefix, *temp_dir, *min_chunk,
        *parallel;
} StoreFlagNames;
static const StoreFlagNames STORE_FLAG_NAMES[] = {
    {"", "storage-provider", "store-container", "store-endpoint-override", "store-prefix",
     "snapstore-temp-directory", "min-chunk-size", "max-parallel-chunk-uploads"},
    {"source-", "source-storage-provider", "source-store-container",
     "source-store-endpoint-override", "source-store-prefix", "source-snapstore-temp-directory",
     "source-min-chunk-size", "source-max-parallel-chunk-uploads"},
    {"secondary-", "secondary-storage-provider", "secondary-store-container",
     "secondary-store-endpoint-override", "secondary-store-prefix",
     "secondary-snapstore-temp-directory", "secondary-min-chunk-size",
     "secondary-max-parallel-chunk-uploads"},
};

int setup_store_as(const Opts *o, const char *flag_prefix, const char *env_prefix, const char *role,
                   int allow_none, Store **out) {
    *out = NULL;
    const StoreFlagNames *f = &STORE_FLAG_NAMES[0];
    for (size_t i = 0; i < sizeof STORE_FLAG_NAMES / sizeof STORE_FLAG_NAMES[0]; i++)
        if (!strcmp(flag_prefix, STORE_FLAG_NAMES[i].prefix)) f = &STORE_FLAG_NAMES[i];
    int source = !strcmp(f->prefix, "source-");
    const char *provider = opt_str(o, f->provider);
    const char *container = opt_str(o, f->container);
    const char *prefix = opt_str(o, f->store_prefix);
    const char *temp_dir = opt_str(o, f->temp_dir);
    /* copy's source completion (docs/go-tool.md §1.12): an empty provider, prefix or temp directory
     * is the destination's */
    if (source && !*provider) provider = opt_str(o, "storage-provider");
    if (source && !*prefix && !opt_is_set(o, "source-store-prefix"))
        prefix = opt_str(o, "store-prefix"); /* --source-store-prefix= names the root */
    if (source && !*temp_dir) temp_dir = opt_str(o, "snapstore-temp-directory");
    /* the encryption keys belong to the command's own store; copy's source and the secondary
     * store are copied raw and need none */
    Keyring *kr = NULL;
    if (!*f->prefix) {
        int code = setup_keyring(o, &kr);
        if (code) return code;
    }
    if (!*f->prefix && opts_has(o, "max-delta-size")) { /* commands that decode snapshots */
        snapobj_set_limits((uint64_t)opt_int(o, "max-delta-size"),
                           (uint64_t)opt_int(o, "max-full-size"));
        fs_set_free_reserve((uint64_t)opt_int(o, "min-free-disk-bytes"),
                            (int)opt_int(o, "min-free-disk-percent"));
    }
    /* a container alone means Local, as the help says and as `snapshot` and `restore` take it */
    if (allow_none && !*provider && !*container) {
        if (kr) log_warn("encryption keys given but no store: they are not used");
        keyring_free(kr);
        return EXIT_OK;
    }
    StoreConfig stc = {
        .provider = *provider ? provider : "Local",
        .container = container,
        .prefix = prefix,
        .temp_dir = temp_dir,
        .endpoint_override = opt_str(o, f->endpoint),
        .min_chunk_size = opt_int(o, f->min_chunk),
        .max_parallel_chunk_uploads = (int)opt_int(o, f->parallel),
        .env_prefix = env_prefix,
    };
    int rc = store_open(&stc, out);
    if (rc) {
        keyring_free(kr);
        log_error("%s: %s", *f->prefix ? role : "store", err_msg());
        return rc == ERR_INVALID || rc == ERR_UNSUPPORTED ? EXIT_USAGE : EXIT_FAIL;
    }
    store_set_keyring(*out, kr);
    log_info("%s: %s", role, store_describe(*out));
    return EXIT_OK;
}

int setup_store(const Opts *o, int allow_none, Store **out) {
    return setup_store_as(o, "", "", "snapshot store", allow_none, out);
}

int server_setup(const Opts *o, ServerSetup *s) {
    memset(s, 0, sizeof *s);
    int code = setup_snapshotter_config(o, &s->snap, &s->defrag);
    if (!code) code = setup_restore_config(o, &s->restore, &s->peer_urls);
    if (!code) code = setup_store(o, 1, &s->store);
    if (code) {
        server_teardown(s);
        return code;
    }
    if (!code && opt_bool(o, "secondary-backup-sync-enabled")) {
        code = setup_store_as(o, "secondary-", "SECONDARY_", "secondary store", 1, &s->secondary);
        if (!code && !s->secondary) {
            log_error("--secondary-backup-sync-enabled needs a secondary store: give "
                      "--secondary-storage-provider or --secondary-store-container");
            code = EXIT_USAGE;
        } else if (!code && !s->store) {
            log_error("--secondary-backup-sync-enabled needs a snapshot store to copy from");
            code = EXIT_USAGE;
        } else if (!code && strcmp(store_describe(s->store), store_describe(s->secondary)) == 0) {
            log_error("the secondary store is the snapshot store itself (%s)",
                      store_describe(s->store));
            code = EXIT_USAGE;
        }
        s->secondary_period_ms = opt_duration_ms(o, "secondary-backup-sync-period");
        if (code) {
            server_teardown(s);
            return code;
        }
    } else if (!code && (*opt_str(o, "secondary-storage-provider") ||
                         *opt_str(o, "secondary-store-container"))) {
        log_warn("a secondary store is configured but --secondary-backup-sync-enabled is false: "
                 "nothing is copied to it");
    }
    s->has_store = s->store != NULL;
    s->snap.store = s->store;
    s->snap.resume = 1;
    s->restore.store = s->store;
    s->leader_timeout_ms = opt_duration_ms(o, "etcd-connection-timeout-leader-election");
    s->service_endpoints = opt_list(o, "service-endpoints", &s->service_endpoints_n);
    /* the Go tool's strict "> 1s" for both, which the table's inclusive bounds cannot say */
    if (s->leader_timeout_ms <= 1000 || opt_duration_ms(o, "reelection-period") <= 1000) {
        log_error("--etcd-connection-timeout-leader-election and --reelection-period must be "
                  "more than 1s");
        server_teardown(s);
        return EXIT_USAGE;
    }
    opts_log_effective(o, "server");
    if ((code = lease_renewer_new(o, &s->leases)) != EXIT_OK) {
        server_teardown(s);
        return code;
    }
    return EXIT_OK;
}

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
