/* gc: garbage collection of old snapshots (docs/go-tool.md §6). The revision-sorted list is split
 * into streams (a full and the deltas after it); deltas of every stream but the latest go when
 * older than the retention period, fulls by policy (LimitBased or Exponential). Invariants: the
 * newest full and every delta after it (the latest set restore uses) are never removed; chunk
 * objects are never removed here; objects whose names do not parse never reach the list, so are
 * never touched. */
#ifndef ETCDBR_GC_H
#define ETCDBR_GC_H

#include "../store/snapname.h"
#include "../store/store.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { GC_EXPONENTIAL, GC_LIMIT_BASED } GcPolicy;

/* A cycle of gc_run stops after this many failed removals (as the Go tool's delta-error
 * threshold). */
#define GC_MAX_REMOVE_ERRORS 5

/* Parses "Exponential" or "LimitBased" (exact spelling, as the Go tool). 0 or ERR_INVALID. */
int gc_parse_policy(const char *s, GcPolicy *out);

/* "Exponential" / "LimitBased" (static storage). */
const char *gc_policy_name(GcPolicy policy);

/* Decides which entries of snaps (n entries, sorted by snapname_sort; borrowed) to remove:
 * sets remove[i] to 1 for those, 0 for the rest (remove: caller-provided, n bytes). Pure: no I/O,
 * no clock; `now` is Unix seconds (UTC). Rules:
 *   - Chunks (is_chunk) are never planned; the newest full and every delta after it are never
 *     planned. With no full at all nothing is planned (every delta is in the latest set).
 *   - Deltas of older streams, including orphan deltas before the first full, are planned when
 *     created_on < now - delta_retention_s (seconds, >= 0; 0 = every such delta).
 *   - GC_LIMIT_BASED: the fulls older than the newest max_backups (>= 1) fulls are planned.
 *   - GC_EXPONENTIAL (max_backups ignored): all fulls of the current hour, the newest full per
 *     hour of the current UTC day, per day for the previous 7 days, per week for about 4-5 weeks
 *     are kept, older fulls are planned; the Go tool's arithmetic (docs/go-tool.md §6.3), except
 * that each full is compared with the nearest newer full that is kept, not with its neighbour in
 *     the listing, which may itself be planned for removal (docs/go-tool.md §15.10).
 * Returns 0, or ERR_INVALID (NULL arguments, unknown policy, max_backups < 1 for LimitBased,
 * negative retention, a list not sorted by last revision) or ERR_NOMEM; remove[] is then all 0. */
int gc_plan(const Snapshot *snaps, size_t n, GcPolicy policy, int max_backups,
            int64_t delta_retention_s, int64_t now, uint8_t *remove);

typedef struct GcStats {
    size_t listed; /* entries listed, chunks included */
    size_t full_removed, incr_removed;
    size_t full_failed, incr_failed; /* store_remove errors */
    size_t immutable_skipped; /* ERR_IMMUTABLE: skipped, not failures (docs/go-tool.md §6.4) */
    int skipped;              /* 1: newest_attempt_failed, nothing was listed or removed */
    int stopped;              /* 1: GC_MAX_REMOVE_ERRORS reached, the cycle was cut short */
} GcStats;

/* One garbage-collection cycle over store (borrowed): lists, plans with gc_plan, removes. Within
 * a stream the deltas go first (newest first), then its full, which is kept for this cycle if one
 * of its deltas could not be removed; streams go oldest first. An object already gone
 * (ERR_NOT_FOUND) counts as removed, not as a failure. Each removal is logged at info,
 * each failure at warn. If newest_attempt_failed is nonzero (the latest snapshot attempt or the
 * store failed) nothing is listed or removed, out->skipped is set and 0 returned: an outage must
 * never end with GC eating the last good backups. *out (caller-provided) is always filled.
 * Returns 0; the list error (ERR_IO, ...); ERR_INVALID for bad parameters; or, when removals
 * failed, the code of the first failure with a message naming it and the failure count. Not
 * thread-safe against another gc_run on the same store. */
int gc_run(Store *store, GcPolicy policy, int max_backups, int64_t delta_retention_s, int64_t now,
           int newest_attempt_failed, GcStats *out);

/* Which objects a snapshotter's GC may remove: those of its own history, and untagged ones only
 * when its history continued them (HistoryRecord.adopts_untagged). Another history's objects
 * are never removed (docs/store-history.md). */
typedef struct GcScope {
    const char *history; /* 16 hex digits */
    int include_untagged;
} GcScope;

/* gc_run over the objects in scope only (NULL = every listed object, as gc_run): the plan is
 * made as if the others did not exist, so the newest full of the scope is always kept. The
 * history tag of each removed object is removed after it. */
int gc_run_scoped(Store *store, const GcScope *scope, GcPolicy policy, int max_backups,
                  int64_t delta_retention_s, int64_t now, int newest_attempt_failed, GcStats *out);

#endif
