/* cmd_restore: `etcdbrctl restore`: the latest full snapshot plus every later delta into
 * --data-dir (seed-spec §1.9), or the state at --revision / --time. Unlike the Go tool, a store
 * without a full snapshot is an error (exit 4), not a silent success. */
#include "cmd.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/proc.h"
#include "../restore/restorer.h"

#include <stdatomic.h>
#include <stdlib.h>

int cmd_restore(const Opts *o) {
    Store *store = NULL;
    char *peer_urls = NULL;
    RestoreConfig rc;
    atomic_int *stop = cmd_install_stop_signals(); /* stop, clean up, say so */
    int code = setup_restore_config(o, &rc, &peer_urls);
    if (code) return code;
    opts_log_effective(o, "restore");
    code = setup_store(o, 0, &store);
    if (code) goto done;
    rc.store = store;
    rc.stop = stop;
    RestoreResult res;
    int r = restorer_run(&rc, &res);
    if (r) {
        if (r == ERR_CANCELED)
            log_error("%s: no data dir was written and our scratch files were removed", err_msg());
        else
            log_error("restore failed: %s", err_msg());
        code = r == ERR_EXISTS      ? EXIT_EXISTS
               : r == ERR_NOT_FOUND ? EXIT_NO_SNAPSHOT
               : res.target_refused ? EXIT_USAGE
                                    : EXIT_FAIL;
        goto done;
    }
    log_info("restore done: %s at revision %lld (full snapshot %s at %lld, %zu deltas, %llu "
             "revisions, %llu events, db built in %.3fs, total %.3fs, peak RSS %lld KiB)",
             rc.data_dir, (long long)res.revision, res.base_name, (long long)res.base_revision,
             res.deltas_applied, (unsigned long long)res.revisions_applied,
             (unsigned long long)res.events_applied, res.seconds_build, res.seconds_total,
             (long long)proc_peak_rss_kib());
done:
    free(peer_urls);
    store_free(store);
    return code;
}
