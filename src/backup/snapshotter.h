/* snapshotter: full snapshots on a cron schedule and delta snapshots from one Watch on all keys
 * (seed-spec §7). Single-threaded event loop: the watch is drained between snapshots, events are
 * spooled to disk (delta.h), a delta is cut at the period, at the byte limit or at the event
 * limit. A delta never has a hole: a compacted start revision or a jump in revisions makes the
 * next snapshot a full one. */
#ifndef ETCDBR_SNAPSHOTTER_H
#define ETCDBR_SNAPSHOTTER_H

#include "../codec/compress.h"
#include "gc.h"
#include "../common/cron.h"
#include "../etcd/etcd_client.h"
#include "../store/store.h"

#include <signal.h>
#include <stdint.h>

typedef struct SnapshotterConfig {
    EtcdConfig etcd;             /* borrowed strings */
    Store *store;                /* borrowed */
    const char *temp_dir;        /* spool and staging files */
    CronSchedule schedule;       /* full snapshots */
    int64_t delta_period_ms;     /* < 1000 disables deltas (no watch) */
    uint64_t delta_memory_limit; /* bytes of pending events that force a delta */
    uint64_t max_changes;        /* pending events that force a delta; 0 = no limit */
    CompressKind compression;
    int64_t backoff_initial_ms, backoff_max_ms; /* retry after failures */
    int64_t stop_drain_ms; /* on stop, how long to wait for events up to the current
                              revision before the last delta (default 5000) */
    int64_t gc_period_ms;  /* garbage collection every period; <= 1000 disables it */
    GcPolicy gc_policy;
    int max_backups;           /* LimitBased */
    int64_t delta_retention_s; /* deltas younger than this are kept */
} SnapshotterConfig;

typedef struct Snapshotter Snapshotter;

/* 0 or ERR_*; no I/O. */
int snapshotter_new(const SnapshotterConfig *cfg, Snapshotter **out);
void snapshotter_free(Snapshotter *s);

/* Runs until *stop becomes nonzero: a full snapshot at once (its failure is returned: a wrong
 * endpoint or store is reported at start), then the schedule. Later failures are logged and
 * retried with backoff; events are never dropped without a full snapshot covering them. On
 * stop, pending events (drained up to the revision current at the stop) are stored as a last
 * delta. Returns 0 after a clean stop. */
int snapshotter_run(Snapshotter *s, volatile sig_atomic_t *stop);

#endif
