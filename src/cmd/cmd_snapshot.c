/* cmd_snapshot: `etcdbrctl snapshot`: full snapshots on --schedule and deltas until SIGTERM or
 * SIGINT, then a last delta up to etcd's revision at the signal and exit 0; exit 1 when that
 * delta falls short or fails (docs/snapshot.md, "Stopping"). */
#include "cmd.h"
#include "server_common.h"
#include "../backup/fullsnap.h"
#include "../backup/snapshotter.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/proc.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

int cmd_snapshot(const Opts *o) {
    Store *store = NULL;
    Snapshotter *snap = NULL;
    SnapshotterConfig sc;
    CronSchedule defrag;
    int code = setup_snapshotter_config(o, &sc, &defrag);
    if (code) return code;
    opts_log_effective(o, "snapshot");
    code = setup_store(o, 0, &store);
    if (code) return code;
    sc.store = store;
    /* temp files of snapshotters killed earlier (kill -9, OOM): only unlocked ones of ours */
    fullsnap_cleanup_stale(sc.temp_dir);
    if (snapshotter_new(&sc, &snap)) {
        log_error("%s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    if (snapshotter_run(snap, cmd_install_stop_signals(), 1)) {
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
