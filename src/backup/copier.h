/* copier: copies backups from one store into another (`etcdbrctl copy`, the server's secondary
 * backup sync; docs/go-tool.md §1.12, §10.3). Objects are copied as stored (no decompression or
 * decryption), streamed, by N parallel workers, under the same name without ".final". Nothing in
 * the destination is ever replaced or removed: an object whose name (".final" stripped) is
 * there already is skipped. The history record and tag of each copied object are written into
 * the destination first (docs/store-history.md), so its restores and GC treat the copies as
 * the same backup history as the source's. */
#ifndef ETCDBR_COPIER_H
#define ETCDBR_COPIER_H

#include "../store/store.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* How often the wait for a final full snapshot lists the source (the Go tool's 15 s). */
#define COPIER_FINAL_POLL_MS 15000
/* The wait looks for a ".final" full snapshot among this many newest fulls (the Go tool's 4). */
#define COPIER_FINAL_AMONG 4

/* Selects from snaps (n entries sorted by snapname_sort; borrowed) the objects of the newest
 * backups, with the Go tool's "backups" grouping (docs/go-tool.md §3.6): walking from the newest
 * object back, chunks skipped, deltas accumulate and belong to the next older full snapshot;
 * deltas older than the oldest full belong to no backup and are never selected. Backups are
 * ordered by their full snapshot's created_on, newest first; max_age_days >= 0 drops those
 * whose full snapshot was created before now - max_age_days x 86400 (now: Unix seconds), then
 * max_backups >= 0 keeps the first max_backups (-1: no limit, for both). Writes the indices of
 * the selected objects into order (caller-provided, capacity n) in copy order: backup by
 * backup, newest first, each its full snapshot, then its deltas ascending. *n_order and
 * *n_backups (may be NULL) are set. Pure. 0, or ERR_INVALID (limits below -1, NULL arguments)
 * or ERR_NOMEM. */
int copier_select(const Snapshot *snaps, size_t n, int max_backups, int max_age_days, int64_t now,
                  size_t *order, size_t *n_order, size_t *n_backups);

/* The name a copy of s is stored under in the destination: its snapshot name (v1 objects
 * too: copies are v2) without a trailing ".final", so a copy never claims to be the final
 * snapshot of the destination's own cluster. 0 or ERR_INVALID when it does not fit in cap. */
int copier_dest_name(const Snapshot *s, char *out, size_t cap);

/* For each of the n_order objects src[order[k]]: need[k] = 1 when no object of dst (n_dst
 * entries, any order, chunks ignored) has its copier_dest_name, compared with ".final"
 * stripped from both sides; else 0. Pure. 0 or ERR_NOMEM. */
int copier_plan(const Snapshot *src, const size_t *order, size_t n_order, const Snapshot *dst,
                size_t n_dst, uint8_t *need);

typedef struct CopierConfig {
    Store *source, *dest;          /* borrowed; may be used from several threads (store.h) */
    int max_backups;               /* --max-backups-to-copy; -1 = all */
    int max_backup_age_days;       /* --max-backup-age; -1 = no limit */
    int workers;                   /* --max-parallel-copy-operations (>= 1) */
    int wait_final;                /* --wait-for-final-snapshot */
    int64_t wait_final_timeout_ms; /* 0 = wait for ever; at the timeout, copy anyway */
    int64_t wait_final_poll_ms;    /* 0 = COPIER_FINAL_POLL_MS */
    int progress; /* report progress (progress.h: a terminal line or log lines every 5 s) instead
                     of an info line per object copied (then at debug level) */
    atomic_int *stop; /* may be NULL; nonzero stops the copy (ERR_CANCELED) */
} CopierConfig;

typedef struct CopierResult {
    size_t backups;           /* backups selected */
    size_t selected;          /* objects in them */
    size_t present;           /* of those, already in the destination (skipped) */
    size_t copied, failed;    /* objects copied and verified / failed */
    size_t vanished;          /* removed from the source after the listing (its GC): skipped */
    uint64_t bytes;           /* bytes copied (objects copied only) */
    double seconds;           /* wall time, waiting for a final snapshot included */
    int final_wait_timed_out; /* the wait for a final snapshot ended at its timeout */
} CopierResult;

/* Lists the source and the destination once, selects (copier_select), skips objects present
 * (copier_plan), then copies the rest with cfg->workers threads: for an object of a history,
 * the history's record and the object's tag are written into the destination first; the bytes
 * are streamed (bounded memory), the source's listed size and the destination's size after the
 * write (store_snapshot_stat) must both equal the bytes copied. Every failure is logged at
 * error level and the copy goes on with the other objects; the return is then the first
 * failure's code with a message counting the failures and naming up to a few. *out (may be
 * NULL) is always filled. 0, the listing's error, ERR_CANCELED, or a copy failure's code. */
int copier_run(const CopierConfig *cfg, CopierResult *out);

#endif
