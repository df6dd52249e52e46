/* snapshotter: full snapshots on a cron schedule and delta snapshots from one Watch on all keys
 * (docs/snapshot.md). A full snapshot (scheduled, after defragmentation, or requested) is skipped
 * when the newest stored object is a full snapshot at etcd's current revision: an idle cluster
 * does not pile up identical fulls, and that full stays the newest (GC keeps the latest set). One
 * thread runs the loop: the watch is drained between snapshots, events are spooled to disk
 * (delta.h), a delta is cut at the period, at the byte limit or at the event limit. A delta never
 * has a hole: a compacted start revision or a jump in revisions makes the next snapshot a full one.
 * Other threads (the HTTP server) ask for snapshots through snapshotter_request and read state
 * through snapshotter_status; both are thread-safe. */
#ifndef ETCDBR_SNAPSHOTTER_H
#define ETCDBR_SNAPSHOTTER_H

#include "../codec/compress.h"
#include "../common/cron.h"
#include "../etcd/etcd_client.h"
#include "../store/store.h"
#include "gc.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>

typedef enum {
    SNAP_EVENT_FULL,   /* a full snapshot attempt ended */
    SNAP_EVENT_DELTA,  /* a delta snapshot attempt ended */
    SNAP_EVENT_GC,     /* a garbage collection cycle ended */
    SNAP_EVENT_DEFRAG, /* one member was defragmented */
    SNAP_EVENT_EVENTS, /* events are pending (not yet stored) */
    SNAP_EVENT_IDLE,   /* a delta period ended with nothing to store (caught up) */
    /* the store's latest chain was not proven to be this etcd's (chainproof.h): a full
     * snapshot starts a new history; reason = chain_verdict_name, snap_name = its last object */
    SNAP_EVENT_CHAIN_REJECTED,
    SNAP_EVENT_FINAL_SHORT, /* on stop, the last delta ended short of etcd's revision at the
                               stop: start_revision = the revision reached, revision = etcd's */
    /* an attempt begins: `of` is SNAP_EVENT_FULL, SNAP_EVENT_DELTA or SNAP_EVENT_GC; its end is
     * reported by an event of that kind (a delta that finds a handover's objects, or is fenced,
     * may end without one) */
    SNAP_EVENT_BEGIN,
    SNAP_EVENT_STARTED, /* snapshotter_run began (before its first store call) */
    SNAP_EVENT_STOPPED, /* snapshotter_run is about to return: nothing more is stored */
} SnapshotterEventKind;

/* What the loop reports to its observer (metrics); pointers valid during the call only. */
typedef struct SnapshotterEvent {
    SnapshotterEventKind kind;
    int ok;
    int skipped;    /* FULL: not taken, the newest full snapshot (snap_name, revision, created_on)
                       is still at etcd's current revision; ok is 1 */
    int rc;         /* ERR_* of a failure, 0 on success */
    double seconds; /* duration of the attempt */
    int64_t start_revision, revision; /* of the stored snapshot */
    int64_t created_on;               /* Unix seconds in its name (the name's own field, not
                                         parsed back from it) */
    const char *snap_name;            /* stored object name, or NULL */
    const char *error;                /* failure message, or NULL */
    const char *endpoint;             /* DEFRAG: the member's client URL */
    const char *reason;               /* CHAIN_REJECTED: "mismatch", "compacted", ... */
    const GcStats *gc;                /* GC */
    int in_store;                     /* FULL, DELTA failed: 1 when the step that failed was a
                                         call into the store (listing it, writing the history
                                         tag or the object), 0 when etcd, the checks, the spool
                                         or the temp dir failed */
    SnapshotterEventKind of;          /* BEGIN: the attempt's kind */
} SnapshotterEvent;

typedef struct SnapshotterConfig {
    EtcdConfig etcd;             /* borrowed strings */
    Store *store;                /* borrowed */
    const char *temp_dir;        /* spool and staging files */
    CronSchedule schedule;       /* full snapshots */
    int64_t delta_period_ms;     /* < 1000 disables deltas (no watch) */
    uint64_t delta_memory_limit; /* bytes of pending events that force a delta */
    uint64_t max_changes;        /* pending events that force a delta; 0 = no limit */
    CompressKind compression;
    /* retries after failures, as the Go tool: 1 s x multiplier, growing by the multiplier for
     * attempt_limit + 1 retries, then every retry after backoff_max_ms (also the cap); reset
     * after a success. Defaults 2, 6, 128000. */
    int64_t backoff_multiplier, backoff_attempt_limit, backoff_max_ms;
    int64_t stop_drain_ms; /* on stop, how long the last delta may wait for the watch to reach
                              etcd's revision at the stop (--final-delta-drain-timeout, default
                              30000); falling short fails snapshotter_run (ERR_TIMEOUT) */
    int64_t gc_period_ms;  /* garbage collection every period; <= 1000 disables it */
    GcPolicy gc_policy;
    int max_backups;                     /* LimitBased */
    int64_t delta_retention_s;           /* deltas younger than this are kept */
    const CronSchedule *defrag_schedule; /* NULL = no scheduled defragmentation */
    int resume; /* 1: continue with deltas from the store's latest set when it is contiguous,
                   not final and etcd still has the next revision (a missed scheduled full is
                   taken after the events since that set are stored); 0: always start with a
                   full snapshot */
    int abandon_other_histories; /* on a conflict, start a new history that abandons the
                                    store's others (--abandon-other-histories, history.h) */
    void (*on_event)(void *ctx, const SnapshotterEvent *ev); /* may be NULL; loop thread */
    void *event_ctx;
    /* The fence of server mode (docs/server.md, "Leader handover"): called on the loop thread
     * just before any object (full or delta) is stored and before garbage collection; returns
     * 0 when this member's etcd is still the raft leader, nonzero (ERR_*, message set) when it
     * is not or cannot tell. Then nothing is stored, the loop stops without a last delta and
     * without counting a failure, status.fenced is set and snapshotter_run returns 0. NULL: no
     * fence (the snapshot command). */
    int (*still_leader)(void *ctx);
    void *leader_ctx;
    /* For this long (ms) after the loop started, the store is listed again before each delta:
     * when another sidecar (the previous leader) stored revisions after the last one this loop
     * stored, the loop continues after them (watch reopened there) instead of storing an
     * overlapping delta. 0 = never (the snapshot command). */
    int64_t handover_window_ms;
} SnapshotterConfig;

typedef struct Snapshotter Snapshotter;

/* 0 or ERR_*; creates temp_dir (0700); no network I/O. */
int snapshotter_new(const SnapshotterConfig *cfg, Snapshotter **out);
void snapshotter_free(Snapshotter *s);

/* Runs until *stop becomes nonzero. Starts with a full snapshot (or, with resume, from the
 * store's latest set). Before it continues the store's latest chain (tagged or untagged, with
 * deltas or with a full snapshot in its history) it proves the chain is this etcd's history
 * (chainproof.h); when that fails or cannot be done, it logs why, reports
 * SNAP_EVENT_CHAIN_REJECTED and takes a full snapshot under a new history first. Every object is
 * written under one backup history (history.h): the store's latest set's when it belongs to this
 * etcd, a fork when etcd's db was restored from it, a new one in an empty store; a store whose
 * latest set belongs to another cluster or ends after etcd's revision is refused (ERR_CONFLICT,
 * status.store_conflict), and so is one another history writes into meanwhile (checked at every
 * full snapshot and GC period). If that first step fails and fail_fast is set, returns its error
 * (the snapshot command: a wrong endpoint or store is reported at once); otherwise every failure is
 * logged and retried with backoff. Events are never dropped without a snapshot covering them.
 * On stop, pending events (drained up to etcd's revision read at the stop) are stored as a last
 * delta. Returns 0 after a clean stop; ERR_TIMEOUT (after storing what it read, logged, and
 * SNAP_EVENT_FINAL_SHORT) when the drain did not reach that revision within stop_drain_ms;
 * another ERR_* when the last delta could not be stored. */
int snapshotter_run(Snapshotter *s, atomic_int *stop, int fail_fast);

typedef enum { SNAP_REQ_FULL, SNAP_REQ_FULL_FINAL, SNAP_REQ_DELTA } SnapshotRequestKind;

/* Asks the loop for an out-of-schedule snapshot and waits up to timeout_ms for it. Concurrent
 * requests of one kind coalesce: those arriving while one waits for the loop share its snapshot
 * and its result; one arriving while a snapshot of its kind is being taken waits for the next
 * (so the answer always covers the revision current when it asked). On success *out describes
 * the stored snapshot; a full snapshot whose newest full is still at etcd's revision is not
 * taken again and *out describes that one (as the Go tool); for a delta with no pending events
 * *none = 1 and nothing is stored. ERR_UNSUPPORTED: deltas are disabled; ERR_CANCELED: the loop
 * is not running (not active, or stopping); ERR_TIMEOUT. Thread-safe. */
int snapshotter_request(Snapshotter *s, SnapshotRequestKind kind, int64_t timeout_ms, Snapshot *out,
                        int *none);

typedef struct SnapshotterStatus {
    int active;                              /* the loop runs and its first snapshot succeeded */
    int failing;                             /* the last attempt failed; retrying with backoff */
    int64_t last_full_ok_s, last_delta_ok_s; /* Unix seconds, 0 = never */
    int64_t last_revision;                   /* last stored revision */
    int store_conflict; /* refusing to write: the store holds another history (history.h) */
    int fenced;         /* the fence (still_leader) refused a store: the loop has stopped */
    char history[HISTORY_ID_LEN + 1]; /* the backup history written under, "" = not decided */
    int adopts_untagged;              /* its GC may collect untagged objects */
    char last_error[512];
} SnapshotterStatus;

/* Thread-safe copy of the loop's state. */
void snapshotter_status(Snapshotter *s, SnapshotterStatus *out);

/* The wait (ms) before the next retry after a failure, as the Go tool's backoff: *delay_ms
 * starts at 1000 and *attempt at 0 (reset both after a success); each call multiplies the delay
 * by backoff_multiplier (capped at backoff_max_ms) for backoff_attempt_limit + 1 calls, then
 * returns backoff_max_ms. Pure; zero config fields take the defaults (2, 6, 128000). */
int64_t snapshotter_backoff_next(const SnapshotterConfig *cfg, int64_t *delay_ms, int64_t *attempt);

#endif
