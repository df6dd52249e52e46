/* cmd_snapshot: `etcdbrctl snapshot`: full snapshots on --schedule and deltas until SIGTERM or
 * SIGINT, then a last delta of the pending events and exit 0 (seed-spec §1.8). */
#include "cmd.h"
#include "../backup/snapshotter.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/proc.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

/* The first signal asks for a clean stop (last delta); a second one exits at once with 1,
 * as the Go tool does. */
static void on_signal(int sig) {
    (void)sig;
    if (stop_requested) _exit(EXIT_FAIL);
    stop_requested = 1;
}

int cmd_snapshot(const Opts *o) {
    Store *store = NULL;
    Snapshotter *snap = NULL;
    int code = EXIT_OK;
    SnapshotterConfig sc;
    memset(&sc, 0, sizeof sc);

    if (cron_parse(opt_str(o, "schedule"), &sc.schedule)) {
        log_error("--schedule: %s", err_msg());
        return EXIT_USAGE;
    }
    int compress = opt_bool(o, "compress-snapshots");
    sc.compression = COMPRESS_NONE;
    if (compress && compress_parse_policy(opt_str(o, "compression-policy"), &sc.compression)) {
        log_error("--compression-policy: %s", err_msg());
        return EXIT_USAGE;
    }
    int64_t conn = opt_duration_ms(o, "etcd-connection-timeout");
    int64_t snapt = opt_duration_ms(o, "etcd-snapshot-timeout");
    if (conn <= 0 || snapt <= 0 || snapt < conn) {
        log_error(
            "etcd timeouts must be > 0 and --etcd-snapshot-timeout >= --etcd-connection-timeout");
        return EXIT_USAGE;
    }
    int64_t mem = opt_int(o, "delta-snapshot-memory-limit");
    int64_t maxch = opt_int(o, "max-changes-per-delta-snapshot");
    if (maxch < 0) {
        log_error("--max-changes-per-delta-snapshot must be >= 0");
        return EXIT_USAGE;
    }
    const char *provider = opt_str(o, "storage-provider");
    size_t n_ep = 0;
    const char *const *eps = opt_list(o, "endpoints", &n_ep);
    if (n_ep == 0) {
        log_error("--endpoints: at least one endpoint is needed");
        return EXIT_USAGE;
    }
    sc.etcd = (EtcdConfig){
        .endpoints = eps,
        .n_endpoints = n_ep,
        .cacert = *opt_str(o, "cacert") ? opt_str(o, "cacert") : NULL,
        .cert = *opt_str(o, "cert") ? opt_str(o, "cert") : NULL,
        .key = *opt_str(o, "key") ? opt_str(o, "key") : NULL,
        .insecure_skip_tls_verify = opt_bool(o, "insecure-skip-tls-verify"),
        .username = opt_str(o, "etcd-username"),
        .password = opt_str(o, "etcd-password"),
        .connection_timeout_ms = conn,
        .snapshot_timeout_ms = snapt,
        .defrag_timeout_ms = opt_duration_ms(o, "etcd-defrag-timeout"),
    };
    sc.temp_dir = opt_str(o, "snapstore-temp-directory");
    sc.delta_period_ms = opt_duration_ms(o, "delta-snapshot-period");
    sc.delta_memory_limit = mem < 1 ? 10485760u : (uint64_t)mem;
    sc.max_changes = (uint64_t)maxch;
    sc.backoff_initial_ms = 1000 * opt_int(o, "backoff-multiplier");
    sc.gc_period_ms = opt_duration_ms(o, "garbage-collection-period");
    sc.max_backups = (int)opt_int(o, "max-backups");
    sc.delta_retention_s = opt_duration_ms(o, "delta-snapshot-retention-period") / 1000;
    if (gc_parse_policy(opt_str(o, "garbage-collection-policy"), &sc.gc_policy)) {
        log_error("--garbage-collection-policy: %s", err_msg());
        return EXIT_USAGE;
    }
    if (sc.gc_policy == GC_LIMIT_BASED && sc.max_backups < 1) {
        log_error("--max-backups must be > 0 with the LimitBased policy");
        return EXIT_USAGE;
    }
    sc.backoff_max_ms = opt_duration_ms(o, "backoff-threshold-time");

    StoreConfig stc = {
        .provider = provider,
        .container = opt_str(o, "store-container"),
        .prefix = opt_str(o, "store-prefix"),
        .temp_dir = sc.temp_dir,
    };
    if (store_open(&stc, &store)) {
        log_error("store: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    sc.store = store;
    opts_log_effective(o, "snapshot");
    log_info("snapshot store: %s", store_describe(store));
    if (snapshotter_new(&sc, &snap)) {
        log_error("%s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (snapshotter_run(snap, &stop_requested, 1)) {
        log_error("snapshotter: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    log_info("snapshotter stopped (peak RSS %lld KiB)", (long long)proc_peak_rss_kib());
done:
    snapshotter_free(snap);
    store_free(store);
    return code;
}
