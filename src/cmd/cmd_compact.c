/* cmd_compact: `etcdbrctl compact`: the store's latest set as one new full snapshot
 * (restore/compactor.h, docs/compact.md), then, as the Go tool, an optional full-snapshot Lease
 * update and a wait for a metrics scrape. */
#include "cmd.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../restore/compactor.h"

#include <stdatomic.h>
#include <unistd.h>

int cmd_compact(const Opts *o) {
    Store *store = NULL;
    atomic_int *stop = cmd_install_stop_signals();
    opts_log_effective(o, "compact");
    int code = setup_store(o, 0, &store);
    if (code) return code;
    RestoreConfig rcfg = {
        .store = store,
        .temp_dir = opts_values(o)->restoration_temp_snapshots_dir,
        .skip_hash_check = opts_values(o)->skip_hash_check,
        .max_fetchers = (int)opts_values(o)->max_fetchers,
        .new_lease_ttl = opts_values(o)->new_lease_ttl_ms / 1000,
        .quota_bytes = opts_values(o)->embedded_etcd_quota_bytes,
        .stop = stop,
    };
    if (rcfg.new_lease_ttl < 1) rcfg.new_lease_ttl = 1;
    CompactResult r;
    int rc = compactor_run(&rcfg, &r);
    if (rc == ERR_NOT_FOUND) {
        log_error("compact: %s (exit %d)", err_msg(), EXIT_NO_SNAPSHOT);
        store_free(store);
        return EXIT_NO_SNAPSHOT;
    }
    if (rc) {
        log_error("compact failed: %s; the store's earlier snapshots are untouched", err_msg());
        store_free(store);
        return EXIT_FAIL;
    }
    store_free(store);
    if (r.nothing_to_do) return EXIT_OK;
    log_info("compact done: %s at revision %lld (full snapshot %s at %lld + %zu deltas, %llu "
             "revisions; %.1f MiB db, %.1f MiB stored, read back and checked; %.3fs); the old "
             "objects are left to garbage collection",
             r.name, (long long)r.revision, r.restore.base_name, (long long)r.restore.base_revision,
             r.restore.deltas_applied, (unsigned long long)r.restore.revisions_applied,
             (double)r.db_bytes / 1048576.0, (double)r.stored_bytes / 1048576.0,
             r.restore.seconds_total);
    /* as the Go tool: a failed Lease update is a warning, the compaction stands */
    if (opts_values(o)->enable_snapshot_lease_renewal)
        lease_update_full_now(opts_values(o)->full_snapshot_lease_name, r.revision, r.created_on);
    int64_t wait_ms = opts_values(o)->metrics_scrape_wait_duration_ms;
    if (wait_ms > 0) {
        log_info("compact: waiting %lld ms (--metrics-scrape-wait-duration)", (long long)wait_ms);
        int64_t end = now_mono_ms() + wait_ms;
        while (!*stop && now_mono_ms() < end)
            usleep(100000);
    }
    return EXIT_OK;
}
