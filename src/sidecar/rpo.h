/* rpo: the recovery point the store offers now, for etcdbr_snapshot_rpo_seconds
 * (docs/server.md, "Metrics"): seconds since the store last held everything this member's etcd
 * had, i.e. how much of etcd's recent history a restore from the store right now would lose,
 * at most. Only the backup leader's snapshotter can tell; elsewhere it is unknown (NaN).
 * Lock-free; every function is safe from any thread. Times are CLOCK_MONOTONIC milliseconds
 * (now_mono_ms), so wall-clock steps do not move it. */
#ifndef ETCDBR_SIDECAR_RPO_H
#define ETCDBR_SIDECAR_RPO_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct Rpo {
    /* monotonic ms since when the store is known to be behind etcd at most; 0 = unknown */
    _Atomic int64_t since_ms;
} Rpo;

/* This member's snapshotter starts (it became the backup leader) at now_ms: until its first
 * success the store is not known to hold anything newer, so the RPO counts from now_ms (a lower
 * bound: a store that was behind before stays so, and the value rises while it fails). */
void rpo_started(Rpo *r, int64_t now_ms);

/* The store held everything etcd had at at_ms: a full or delta snapshot whose cut (the moment
 * its revision was read) was at at_ms has been stored, or a delta period ended at at_ms with
 * nothing to store. Ignored while unknown (no snapshotter runs) and when at_ms is older than
 * what is known (a slow upload does not move the point back). */
void rpo_caught_up(Rpo *r, int64_t at_ms);

/* The snapshotter stopped (leadership lost, shutdown): unknown from now on. */
void rpo_stopped(Rpo *r);

/* Seconds from the last catch-up (or the start) to now_ms; NaN when unknown; never negative. */
double rpo_seconds(const Rpo *r, int64_t now_ms);

#endif
