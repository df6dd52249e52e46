/* restorer: rebuilds a data dir from the latest set in a store (DESIGN.md restore engine):
 * newest full snapshot by revision -> etcd's own snapshot restore into "<data-dir>.part" ->
 * a temporary etcd on loopback replays every later delta, one transaction per original
 * revision -> final revision checked -> etcd stopped -> files fsynced -> renamed into place.
 * An interrupted restore leaves the target absent; a rerun starts clean. */
#ifndef ETCDBR_RESTORER_H
#define ETCDBR_RESTORER_H

#include "../store/store.h"

#include <stdint.h>

typedef struct RestoreConfig {
    Store *store;         /* borrowed */
    const char *data_dir; /* target; must be absent or empty */
    const char *temp_dir; /* --restoration-temp-snapshots-dir (created, removed after) */
    const char *name;     /* member name */
    const char *initial_cluster;
    const char *initial_cluster_token;
    const char *initial_advertise_peer_urls; /* comma-joined */
    int skip_hash_check;
    int max_fetchers;          /* parallel delta downloads, >= 1; also the read-ahead bound */
    int64_t max_request_bytes; /* lower bound for the temporary etcd */
    int64_t max_txn_ops;       /* lower bound for the temporary etcd */
    int64_t quota_bytes;       /* temporary etcd backend quota */
    const char *etcd_bin;      /* NULL/"" = etcd from PATH */
    const char *etcdutl_bin;   /* NULL/"" = etcdutl, else etcdctl from PATH */
} RestoreConfig;

typedef struct RestoreResult {
    int64_t base_revision; /* revision of the full snapshot */
    int64_t revision;      /* final revision of the data dir */
    size_t deltas_applied;
    uint64_t events_applied, txns_applied;
    char base_name[256];
    double seconds_total, seconds_replay;
} RestoreResult;

/* Restores. Errors: ERR_EXISTS (non-empty data dir), ERR_NOT_FOUND (no full snapshot in the
 * store), ERR_GAP (missing revisions between two objects; both named), ERR_CORRUPT (hash,
 * format, revision mismatch), ERR_IO, ERR_ETCD. On error the data dir is left absent. */
int restorer_run(const RestoreConfig *cfg, RestoreResult *out);

#endif
