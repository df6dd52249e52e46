/* gc: garbage collection of old snapshots (docs/go-tool.md §6). gc_plan is a pure function of the
 * sorted list and an explicit clock; gc_run lists, plans and removes. The latest stream (newest
 * full and the deltas after it) is never iterated, and a final check against
 * snapname_latest_set (restore's own definition of "latest") refuses any plan that touches it.
 * Chunks are skipped everywhere; they never start or end a stream. */
#include "gc.h"

#include "../common/err.h"
#include "../common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Differences from the Go tool (docs/go-tool.md §6, §15.10):
 *   - Exponential compares a full with the nearest newer full it keeps, not with the next full
 *     in the listing (which Go may have deleted in the same pass); see plan_exponential.
 *   - Orphan deltas before the first full are a stream without a full: they go by the retention
 *     rule only. Go treats index 0 as a full even when it is a delta, so LimitBased counts it
 *     against max-backups and Exponential may delete it as a "full" regardless of retention.
 *   - Chunks are left alone (Go deletes those of finished uploads: §6.1). No immutability
 *     expiry is known for a Snapshot, so none is checked (Local has none).
 *   - An immutable object (ERR_IMMUTABLE, ABS BlobImmutableDueToPolicy) is skipped and not
 *     counted as a failure, as Go does; unlike Go, the full of a stream keeps as long as one
 *     of its deltas is immutable, so no delta is left without the full it applies to.
 *   - gc_run removes nothing after a failed snapshot attempt, stops a cycle after 5 failed
 *     removals of any kind (Go: 5 delta errors per stream), keeps a full whose delta failed
 *     (as Go), and treats an object already gone as removed. */

#define SECS_PER_HOUR INT64_C(3600)
#define SECS_PER_DAY INT64_C(86400)
#define SECS_PER_WEEK INT64_C(604800)

int gc_parse_policy(const char *s, GcPolicy *out) {
    if (s && strcmp(s, "Exponential") == 0) {
        *out = GC_EXPONENTIAL;
        return 0;
    }
    if (s && strcmp(s, "LimitBased") == 0) {
        *out = GC_LIMIT_BASED;
        return 0;
    }
    return err_set(ERR_INVALID,
                   "garbage collection policy \"%s\": must be Exponential or LimitBased",
                   s ? s : "");
}

const char *gc_policy_name(GcPolicy policy) {
    return policy == GC_LIMIT_BASED ? "LimitBased" : "Exponential";
}

static int is_full(const Snapshot *s) {
    return !s->is_chunk && s->kind == SNAP_FULL;
}

static int is_delta(const Snapshot *s) {
    return !s->is_chunk && s->kind == SNAP_INCR;
}

/* a - b, saturated (names may carry any int64 time). */
static int64_t sat_sub(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* UTC hour of day (0-23) of Unix seconds t, like Go's Time.Hour() on a UTC time. */
static int64_t hour_of_day(int64_t t) {
    int64_t day_start = floor_div(t, SECS_PER_DAY) * SECS_PER_DAY;
    return (t - day_start) / SECS_PER_HOUR;
}

/* Exponential policy over the fulls before index latest (the newest full). The Go tool's
 * arithmetic (docs/go-tool.md §6.3): eod = end of the current UTC day (23:59:59), moved back a day
 * once the first full in the weekly range is met; H/D/W = whole hours/days/weeks from eod,
 * truncated toward zero as Go's int(float) conversion does (C integer division does the same). One
 * change: `kept` is the nearest newer full that this plan keeps, where Go compares with the next
 * full in the listing even if it decided to delete it in the same pass (docs/go-tool.md §15.10).
 * For fulls whose times grow with their revisions both give the same result (buckets nest); they
 * differ when a name's time goes backwards (clock reset, data restored into the same prefix), where
 * Go can keep two fulls of one bucket or drop the only one of another. */
static void plan_exponential(const Snapshot *snaps, size_t latest, int64_t now, uint8_t *remove) {
    int64_t eod = floor_div(now, SECS_PER_DAY) * SECS_PER_DAY;
    eod = sat_sub(eod, -(SECS_PER_DAY - 1));
    int tracking_week = 0;
    size_t kept = latest;
    for (size_t i = latest; i-- > 0;) {
        if (!is_full(&snaps[i])) continue;
        const Snapshot *next = &snaps[i], *snap = &snaps[kept];
        int64_t age = sat_sub(eod, next->created_on);
        int64_t threshold;
        if (age < 24 * SECS_PER_HOUR) {
            /* Current day: every full of the current clock hour, else one per hour. */
            threshold = hour_of_day(next->created_on) == hour_of_day(now) ? 0 : 1;
        } else if (age < 8 * SECS_PER_DAY) {
            threshold = 24;
        } else if (age < 35 * SECS_PER_DAY) {
            if (!tracking_week) {
                /* The weeks end with the previous day (as in Go). */
                eod = sat_sub(eod, SECS_PER_DAY);
                tracking_week = 1;
            }
            threshold = 24 * 7;
        } else {
            threshold = INT32_MAX;
        }
        int64_t dn = sat_sub(eod, next->created_on), ds = sat_sub(eod, snap->created_on);
        int64_t hour_change = dn / SECS_PER_HOUR - ds / SECS_PER_HOUR;
        int64_t day_change = dn / SECS_PER_DAY - ds / SECS_PER_DAY;
        int64_t week_change = dn / SECS_PER_WEEK - ds / SECS_PER_WEEK;
        int keep = threshold == 0 || hour_change / threshold != 0 ||
                   day_change * 24 / threshold != 0 || week_change * 24 * 7 / threshold != 0;
        if (keep)
            kept = i;
        else
            remove[i] = 1;
    }
}

/* 1 if the plan touches a chunk or the latest set as restore defines it, 0 if not, -1 if out
 * of memory (the plan is then refused too). */
static int plan_touches_protected(const Snapshot *snaps, size_t n, const uint8_t *remove) {
    ptrdiff_t full = -1;
    size_t n_deltas = 0;
    size_t *delta_idx = malloc(n * sizeof *delta_idx);
    if (!delta_idx) return -1;
    snapname_latest_set(snaps, n, &full, delta_idx, &n_deltas);
    int bad = full >= 0 && remove[full];
    for (size_t k = 0; k < n_deltas; k++)
        bad |= remove[delta_idx[k]];
    for (size_t i = 0; i < n; i++)
        bad |= snaps[i].is_chunk && remove[i];
    free(delta_idx);
    return bad;
}

int gc_plan(const Snapshot *snaps, size_t n, GcPolicy policy, int max_backups,
            int64_t delta_retention_s, int64_t now, uint8_t *remove) {
    if (n == 0) return 0;
    if (!snaps || !remove) return err_set(ERR_INVALID, "gc plan: no snapshot list");
    memset(remove, 0, n);
    if (policy != GC_EXPONENTIAL && policy != GC_LIMIT_BASED)
        return err_set(ERR_INVALID, "gc plan: unknown policy %d", (int)policy);
    if (policy == GC_LIMIT_BASED && max_backups < 1)
        return err_set(ERR_INVALID, "gc plan: max-backups %d must be > 0 for LimitBased",
                       max_backups);
    if (delta_retention_s < 0)
        return err_set(ERR_INVALID, "gc plan: negative delta retention %lld s",
                       (long long)delta_retention_s);
    int64_t prev = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        if (snaps[i].last_revision < prev)
            return err_set(ERR_INVALID, "gc plan: list not sorted by revision at %s", snaps[i].key);
        prev = snaps[i].last_revision;
    }

    size_t latest = n;
    for (size_t i = n; i-- > 0;) {
        if (is_full(&snaps[i])) {
            latest = i;
            break;
        }
    }
    if (latest == n) return 0; /* no full: every delta belongs to the latest set */

    /* Deltas of older streams, orphans before the first full included. */
    int64_t cutoff = sat_sub(now, delta_retention_s);
    for (size_t i = 0; i < latest; i++)
        if (is_delta(&snaps[i]) && snaps[i].created_on < cutoff) remove[i] = 1;

    if (policy == GC_LIMIT_BASED) {
        int kept = 1; /* the newest full */
        for (size_t i = latest; i-- > 0;) {
            if (!is_full(&snaps[i])) continue;
            if (kept < max_backups)
                kept++;
            else
                remove[i] = 1;
        }
    } else {
        plan_exponential(snaps, latest, now, remove);
    }

    int bad = plan_touches_protected(snaps, n, remove);
    if (bad != 0) {
        memset(remove, 0, n);
        if (bad < 0) return err_set(ERR_NOMEM, "gc plan: out of memory for %zu snapshots", n);
        return err_set(ERR_INVALID, "gc plan: internal error: plan touches the latest set");
    }
    return 0;
}

typedef struct RunCtx {
    Store *store;
    GcStats *st;
    size_t errors;
    int first_rc;
    char first_msg[1200];
} RunCtx;

/* Removes one snapshot; ERR_NOT_FOUND counts as removed (another GC or an eventually consistent
 * listing got there first). 0 or the store error. */
static int remove_one(RunCtx *c, const Snapshot *s) {
    const char *kind = s->kind == SNAP_FULL ? "full" : "delta";
    int rc = store_remove(c->store, s);
    if (rc == ERR_NOT_FOUND) {
        log_info("GC: old %s snapshot %s already gone", kind, s->key);
        rc = 0;
    } else if (rc == 0) {
        log_info("GC: removed old %s snapshot %s", kind, s->key);
    }
    if (rc == 0) {
        if (store_history_untag(c->store, s) != 0) /* a dangling tag is harmless */
            log_debug("GC: history tag of %s: %s", s->key, err_msg());
        if (s->kind == SNAP_FULL)
            c->st->full_removed++;
        else
            c->st->incr_removed++;
        return 0;
    }
    if (rc == ERR_IMMUTABLE) {
        /* docs/go-tool.md §6.4: skipped until its immutability period ends; not a failure */
        log_info("GC: %s snapshot %s is immutable, skipped: %s", kind, s->key, err_msg());
        c->st->immutable_skipped++;
        return rc;
    }
    log_warn("GC: failed to remove %s snapshot %s: %s", kind, s->key, err_msg());
    if (s->kind == SNAP_FULL)
        c->st->full_failed++;
    else
        c->st->incr_failed++;
    if (c->errors++ == 0) {
        c->first_rc = rc;
        snprintf(c->first_msg, sizeof c->first_msg, "%s", err_msg());
    }
    return rc;
}

int gc_run(Store *store, GcPolicy policy, int max_backups, int64_t delta_retention_s, int64_t now,
           int newest_attempt_failed, GcStats *out) {
    return gc_run_scoped(store, NULL, policy, max_backups, delta_retention_s, now,
                         newest_attempt_failed, out);
}

/* Keeps the objects scope may collect (in place); returns the new count. */
static size_t filter_scope(Snapshot *snaps, size_t n, const GcScope *scope) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *h = snaps[i].history;
        int mine = h[0] ? strcmp(h, scope->history) == 0 : scope->include_untagged;
        if (mine) snaps[k++] = snaps[i];
    }
    if (k < n) log_debug("GC: %zu objects of other histories are not considered", n - k);
    return k;
}

int gc_run_scoped(Store *store, const GcScope *scope, GcPolicy policy, int max_backups,
                  int64_t delta_retention_s, int64_t now, int newest_attempt_failed, GcStats *out) {
    if (!out) return err_set(ERR_INVALID, "gc: no stats");
    memset(out, 0, sizeof *out);
    if (!store) return err_set(ERR_INVALID, "gc: no store");
    if (newest_attempt_failed) {
        log_warn("GC: skipped, the newest snapshot attempt failed; nothing is removed until a "
                 "snapshot succeeds");
        out->skipped = 1;
        return 0;
    }

    Snapshot *snaps = NULL;
    uint8_t *remove = NULL;
    size_t n = 0;
    RunCtx c = {store, out, 0, 0, ""};
    log_debug("GC: executing garbage collection (policy %s) on %s", gc_policy_name(policy),
              store_describe(store));
    int rc = store_list(store, &snaps, &n);
    if (rc != 0) {
        rc = err_wrap(rc, "gc: list %s", store_describe(store));
        goto done;
    }
    out->listed = n;
    /* the Go tool's upload leftovers (GCS chunk objects) of objects that exist: only where this
     * GC may collect untagged (Go tool) objects; our own uploads leave none */
    if ((!scope || scope->include_untagged) && store_sweep_leftovers(store) != 0)
        log_warn("GC: sweeping upload leftovers: %s", err_msg());
    if (scope) n = filter_scope(snaps, n, scope);
    if (n == 0) goto done;
    remove = calloc(n, 1);
    if (!remove) {
        rc = err_set(ERR_NOMEM, "gc: out of memory for %zu snapshots", n);
        goto done;
    }
    rc = gc_plan(snaps, n, policy, max_backups, delta_retention_s, now, remove);
    if (rc != 0) goto done;

    /* Streams oldest first; [a, b) = a full (or orphan deltas at the start) and what follows
     * it up to the next full. */
    for (size_t a = 0; a < n && c.errors < GC_MAX_REMOVE_ERRORS;) {
        size_t b = a + (is_full(&snaps[a]) ? 1 : 0);
        while (b < n && !is_full(&snaps[b]))
            b++;
        int stream_failed = 0, stream_immutable = 0;
        for (size_t i = b; i-- > a && c.errors < GC_MAX_REMOVE_ERRORS;) {
            if (!remove[i] || !is_delta(&snaps[i])) continue;
            int r = remove_one(&c, &snaps[i]);
            if (r == ERR_IMMUTABLE)
                stream_immutable = 1;
            else if (r != 0)
                stream_failed = 1;
        }
        if (is_full(&snaps[a]) && remove[a] && c.errors < GC_MAX_REMOVE_ERRORS) {
            if (stream_failed)
                log_warn("GC: keeping full snapshot %s this cycle: a delta after it could not be "
                         "removed",
                         snaps[a].key);
            else if (stream_immutable) /* its deltas stay: so does the full they apply to */
                log_info("GC: keeping full snapshot %s this cycle: a delta after it is immutable",
                         snaps[a].key);
            else
                remove_one(&c, &snaps[a]);
        }
        a = b;
    }
    if (c.errors >= GC_MAX_REMOVE_ERRORS) {
        out->stopped = 1;
        log_warn("GC: stopping this cycle after %zu failed removals", c.errors);
    }
    if (out->full_removed || out->incr_removed || out->full_failed || out->incr_failed)
        log_info("GC: removed %zu full and %zu delta snapshots, %zu removals failed",
                 out->full_removed, out->incr_removed, out->full_failed + out->incr_failed);
    else
        log_debug("GC: nothing to remove");
    if (c.errors)
        rc = err_set(c.first_rc, "gc: %zu removals failed; first: %s", c.errors, c.first_msg);

done:
    free(remove);
    free(snaps);
    return rc;
}
