/* secondary_sync: the server's dual-site backup sync (--secondary-backup-sync-enabled;
 * docs/go-tool.md §1.7, §10.3). While this member is the backup leader, one thread copies every
 * backup the secondary store lacks from the primary store (copier.h: all backups, 10 parallel
 * copies, no wait for a final snapshot) at once and then every sync period, and garbage-collects
 * the secondary store every garbage-collection period with the primary's policy, over the objects
 * of the snapshotter's own backup history only (docs/store-history.md): another cluster's,
 * the operator's and untagged objects there are never removed. A failed sync is logged at error
 * level and counted in etcdbr_secondary_sync_failures_total; the secondary GC deletes nothing after
 * a failed sync. */
#ifndef ETCDBR_SECONDARY_SYNC_H
#define ETCDBR_SECONDARY_SYNC_H

#include "../backup/gc.h"
#include "../backup/snapshotter.h"
#include "../store/store.h"

#include <stdint.h>

/* The copy's parallelism in the server (the Go tool's fixed 10). */
#define SECONDARY_SYNC_WORKERS 10

typedef struct SecondarySyncConfig {
    Store *primary, *secondary; /* borrowed; outlive the sync */
    Snapshotter *snap;          /* borrowed: its history scopes the secondary GC; outlives it */
    int64_t period_ms;          /* --secondary-backup-sync-period (>= 1000) */
    int64_t gc_period_ms;       /* --garbage-collection-period; <= 1000: no secondary GC */
    GcPolicy gc_policy;
    int max_backups;
    int64_t delta_retention_s;
} SecondarySyncConfig;

typedef struct SecondarySync SecondarySync;

/* Registers the sync's metrics in the default registry (idempotent):
 *   etcdbr_secondary_sync_last_success_timestamp_seconds  gauge, Unix s of the last good sync
 *   etcdbr_secondary_sync_failures_total                   counter
 *   etcdbr_secondary_sync_copied_objects_total             counter, objects copied
 *   etcdbr_secondary_sync_copied_bytes_total               counter, bytes copied
 *   etcdbr_secondary_sync_duration_seconds                 histogram {succeeded}
 *   etcdbr_secondary_snapshot_gc_total                     counter {kind, succeeded}: objects
 *                                                          removed (failed) by the secondary GC */
void secondary_sync_register_metrics(void);

/* Starts the sync thread (its first copy begins at once). *out owned (secondary_sync_stop).
 * 0, ERR_INVALID or ERR_NOMEM / ERR_IO (no thread). */
int secondary_sync_start(const SecondarySyncConfig *cfg, SecondarySync **out);

/* Stops a copy in progress (objects being copied are aborted, nothing half-written becomes
 * visible), joins the thread and frees s. NULL-safe. */
void secondary_sync_stop(SecondarySync *s);

#endif
