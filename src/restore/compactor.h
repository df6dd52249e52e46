/* compactor: `etcdbrctl compact` (docs/go-tool.md §1.10, §10.2, docs/compact.md): the store's
 * latest set (full snapshot plus deltas) becomes one new full snapshot `Full-00000000-<R>-<now>`,
 * built with the restore engine (restorer.h, its db handed over before the member dir) and no
 * etcd, stored, then read back and checked before success is reported. The old objects are left
 * to garbage collection, as in the Go tool. Unlike the Go tool the new snapshot keeps every
 * revision of the set (no mvcc compaction at R): a restore from it equals a restore of the set,
 * revisions, versions, leases and HashKV included. */
#ifndef ETCDBR_COMPACTOR_H
#define ETCDBR_COMPACTOR_H

#include "restorer.h"

#include <stdint.h>

typedef struct CompactResult {
    int nothing_to_do;     /* 1: the latest set is one full snapshot without later deltas */
    char name[256];        /* the new full snapshot's name */
    int64_t revision;      /* its revision, the set's last */
    int64_t created_on;    /* Unix s in its name */
    uint64_t db_bytes;     /* its db's size */
    uint64_t stored_bytes; /* bytes stored (compressed, encrypted) */
    RestoreResult restore; /* what was read to build it */
} CompactResult;

/* Compacts the latest set of cfg->store (cfg: the restore's settings: store, temp_dir,
 * skip_hash_check, max_fetchers, new_lease_ttl, quota_bytes, stop; db_sink is the compactor's
 * own). 0 (*out filled, or out->nothing_to_do), ERR_NOT_FOUND (no full snapshot in the store), or
 * the restore's, the store's or the read-back's ERR_* with a message; on failure the store's
 * earlier snapshots are untouched. */
int compactor_run(const RestoreConfig *cfg, CompactResult *out);

#endif
