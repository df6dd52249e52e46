/* cmd_restore: `etcdbrctl restore`: the latest full snapshot plus every later delta into
 * --data-dir (seed-spec §1.9). Unlike the Go tool, a store without a full snapshot is an error
 * (exit 4), not a silent success. */
#include "cmd.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/proc.h"
#include "../restore/restorer.h"

#include <stdlib.h>
#include <string.h>

int cmd_restore(const Opts *o) {
    Store *store = NULL;
    int code = EXIT_OK;
    char *peer_urls = NULL;
    int64_t fetchers = opt_int(o, "max-fetchers");
    if (fetchers <= 0) {
        log_error("--max-fetchers must be > 0");
        return EXIT_USAGE;
    }
    if (opt_int(o, "embedded-etcd-quota-bytes") <= 0) {
        log_error("--embedded-etcd-quota-bytes must be > 0");
        return EXIT_USAGE;
    }
    const char *mode = opt_str(o, "auto-compaction-mode");
    if (strcmp(mode, "periodic") && strcmp(mode, "revision")) {
        log_error("--auto-compaction-mode must be periodic or revision, not \"%s\"", mode);
        return EXIT_USAGE;
    }
    size_t n_urls = 0;
    const char *const *urls = opt_list(o, "initial-advertise-peer-urls", &n_urls);
    size_t len = 1;
    for (size_t i = 0; i < n_urls; i++)
        len += strlen(urls[i]) + 1;
    peer_urls = calloc(1, len);
    if (!peer_urls) return EXIT_FAIL;
    for (size_t i = 0; i < n_urls; i++) {
        if (i) strcat(peer_urls, ",");
        strcat(peer_urls, urls[i]);
    }
    StoreConfig stc = {
        .provider = opt_str(o, "storage-provider"),
        .container = opt_str(o, "store-container"),
        .prefix = opt_str(o, "store-prefix"),
        .temp_dir = opt_str(o, "snapstore-temp-directory"),
    };
    opts_log_effective(o, "restore");
    if (store_open(&stc, &store)) {
        log_error("store: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    RestoreConfig rc = {
        .store = store,
        .data_dir = opt_str(o, "data-dir"),
        .temp_dir = opt_str(o, "restoration-temp-snapshots-dir"),
        .name = opt_str(o, "name"),
        .initial_cluster = opt_str(o, "initial-cluster"),
        .initial_cluster_token = opt_str(o, "initial-cluster-token"),
        .initial_advertise_peer_urls = peer_urls,
        .skip_hash_check = opt_bool(o, "skip-hash-check"),
        .max_fetchers = (int)fetchers,
        .max_request_bytes = opt_int(o, "max-request-bytes"),
        .max_txn_ops = opt_int(o, "max-txn-ops"),
        .quota_bytes = opt_int(o, "embedded-etcd-quota-bytes"),
        .etcd_bin = opt_str(o, "etcd-bin"),
        .etcdutl_bin = opt_str(o, "etcdutl-bin"),
    };
    RestoreResult res;
    int r = restorer_run(&rc, &res);
    if (r) {
        log_error("restore failed: %s", err_msg());
        code = r == ERR_EXISTS ? EXIT_EXISTS : r == ERR_NOT_FOUND ? EXIT_NO_SNAPSHOT : EXIT_FAIL;
        goto done;
    }
    log_info("restore done: %s at revision %lld (full snapshot %s at %lld, %zu deltas, %llu events "
             "in %llu transactions, replay %.3fs, total %.3fs, peak RSS %lld KiB)",
             rc.data_dir, (long long)res.revision, res.base_name, (long long)res.base_revision,
             res.deltas_applied, (unsigned long long)res.events_applied,
             (unsigned long long)res.txns_applied, res.seconds_replay, res.seconds_total,
             (long long)proc_peak_rss_kib());
done:
    free(peer_urls);
    store_free(store);
    return code;
}
