/* snapshotter: see snapshotter.h. State, by concern (struct Snapshotter below): the
 * configuration; etcd's client and watch (opened at chain.prev_rev + 1); the spool of events not
 * yet stored; the chain stored so far and its history; the timers; how the loop runs; and what
 * other threads share with it under Shared.mu (requests and status). Contiguity is checked on
 * every event: the next revision must be the current one or the one after it. The first put of
 * each lease in a spool carries the lease's granted TTL ("leaseTTL", delta.h); the leases looked
 * up for the spool are forgotten whenever the spool is reset. Only the loop thread touches etcd,
 * the spool and the store. Each object is named once, as a Snapshot (fullsnap_snapshot_new), and
 * that struct travels: to the writer, the history tag, the last stored snapshot, the events. */
#include "snapshotter.h"
#include "chainproof.h"
#include "delta.h"
#include "fullsnap.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/i64map.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/timeutil.h"
#include "../common/thread.h"

#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Requests from other threads, in one batch per kind (SnapshotRequestKind indexes the arrays).
 * A request joins its kind's batch while that batch waits for the loop; one arriving while its
 * kind's batch is being served opens the next batch, so every requester gets a snapshot taken
 * after it asked. Batch ids grow; a requester waits until done_id of its kind reaches its id. */
#define REQ_KINDS 3
typedef struct {
    uint64_t next_id;                    /* last batch id handed out */
    uint64_t pending_id[REQ_KINDS];      /* batch waiting for the loop, 0 = none */
    unsigned pending_waiters[REQ_KINDS]; /* requesters in the pending batch */
    uint64_t done_id[REQ_KINDS];         /* last batch served */
    int rc[REQ_KINDS], none[REQ_KINDS];
    Snapshot result[REQ_KINDS];
    char error[REQ_KINDS][512];
} Requests;

/* etcd, as the loop sees it: the client of the configured endpoints and the one Watch on all
 * keys. Loop thread only. */
typedef struct {
    EtcdClient *client;    /* every etcd call of the loop */
    EtcdWatch *watch;      /* all keys from chain.prev_rev + 1; NULL while closed */
    int64_t next_expected; /* next revision the watch must deliver */
} SnapWatch;

/* The delta being built: the events received and not yet stored, spooled to a file (delta.h),
 * and the leases looked up for them (the first put of each lease records its granted TTL).
 * Emptied whenever a delta is stored or the watch reopens (spool_reset). Loop thread only. */
typedef struct {
    DeltaWriter *w;
    I64Map *leases;    /* lease IDs looked up for the spool -> granted TTL (s), 0 = none */
    int lookup_warned; /* a lookup failed for this spool and was logged */
    int lookups_off;   /* a lookup failed slowly: no more for this spool */
} Spool;

/* The chain this loop writes: how far the store holds it, its newest object, and the backup
 * history (history.h) it is written under, proven to be this etcd's (chainproof.h). Loop thread
 * only; what other threads see of it is copied into Shared.status under Shared.mu. */
typedef struct {
    int64_t prev_rev;                 /* last revision stored (full or delta) */
    int need_full;                    /* a hole was seen or a full failed: next must be full */
    Snapshot last_stored;             /* the most recent stored snapshot, as it was named */
    char history[HISTORY_ID_LEN + 1]; /* the backup history written under; "" = not decided */
    int adopts_untagged;              /* its GC may collect untagged objects */
    int record_pending;               /* record is written before the history's next object */
    HistoryRecord record;
    int chain_rejected; /* the store's chain was not proven ours: the next full snapshot starts a
                           new history instead of continuing or adopting it */
    uint64_t cluster_id, member_id; /* etcd's, as last seen by decide_history */
} Chain;

/* When each kind of work is due next. Loop thread only. */
typedef struct {
    int64_t next_full_s;       /* Unix seconds of the next scheduled full */
    int64_t next_delta_ms;     /* monotonic deadline of the next delta */
    int64_t next_gc_ms;        /* monotonic time of the next garbage collection */
    int64_t next_defrag_s;     /* Unix seconds of the next defragmentation, 0 = none */
    int64_t handover_until_ms; /* monotonic; before it each delta re-lists the store first */
} Timers;

/* How the loop is doing. Loop thread only (status.failing and status.fenced are their copies
 * for other threads). */
typedef struct {
    atomic_int *stop; /* snapshotter_run's, for the chain proof's wait */
    int failing;      /* an attempt failed and no snapshot has been stored since */
    int fenced;       /* the fence refused a store: the loop stops (still_leader) */
    int store_failed; /* a store call of the current full or delta attempt failed (listing,
                         history record or tag); cleared when an attempt begins */
} RunState;

/* What other threads meet: their requests and the status they read. Everything here is guarded
 * by mu; cv wakes requesters (monotonic clock). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    Requests req;
    SnapshotterStatus status;
} Shared;

struct Snapshotter {
    SnapshotterConfig cfg; /* defaults applied; read-only after snapshotter_new */
    SnapWatch etcd;
    Spool spool;
    Chain chain;
    Timers due;
    RunState run;
    Shared shared;
};

int snapshotter_new(const SnapshotterConfig *cfg, Snapshotter **out) {
    Snapshotter *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "out of memory");
    s->cfg = *cfg;
    if (s->cfg.backoff_multiplier <= 0) s->cfg.backoff_multiplier = 2;
    if (s->cfg.backoff_attempt_limit <= 0) s->cfg.backoff_attempt_limit = 6;
    if (s->cfg.backoff_max_ms <= 0) s->cfg.backoff_max_ms = 128000;
    if (s->cfg.stop_drain_ms <= 0) s->cfg.stop_drain_ms = 30000;
    pthread_mutex_init(&s->shared.mu, NULL);
    cond_init_monotonic(&s->shared.cv);       /* request deadlines: a wall-clock step moves none */
    int rc = fs_mkdir_p(cfg->temp_dir, 0700); /* as the Go tool: created if missing */
    if (!rc) rc = etcd_client_new(&cfg->etcd, &s->etcd.client);
    if (!rc) rc = delta_writer_new(cfg->temp_dir, &s->spool.w);
    if (!rc) rc = i64map_new(&s->spool.leases);
    RETURN_BUILT(rc, out, s, snapshotter_free(s));
}

void snapshotter_free(Snapshotter *s) {
    if (!s) return;
    etcd_watch_close(s->etcd.watch);
    delta_writer_free(s->spool.w);
    i64map_free(s->spool.leases);
    etcd_client_free(s->etcd.client);
    pthread_mutex_destroy(&s->shared.mu);
    pthread_cond_destroy(&s->shared.cv);
    free(s);
}

void snapshotter_status(Snapshotter *s, SnapshotterStatus *out) {
    pthread_mutex_lock(&s->shared.mu);
    *out = s->shared.status;
    pthread_mutex_unlock(&s->shared.mu);
}

static void emit(const SnapshotterConfig *cfg, const SnapshotterEvent *ev) {
    if (cfg->on_event) cfg->on_event(cfg->event_ctx, ev);
}

static void set_error(Shared *sh, const char *msg) {
    pthread_mutex_lock(&sh->mu);
    sh->status.failing = msg != NULL;
    if (msg) snprintf(sh->status.last_error, sizeof sh->status.last_error, "%s", msg);
    pthread_mutex_unlock(&sh->mu);
}

static int deltas_enabled(const SnapshotterConfig *cfg) {
    return cfg->delta_period_ms >= 1000;
}

static void schedule_next_full(Timers *due, const CronSchedule *schedule) {
    due->next_full_s = cron_next(schedule, now_unix_s());
}

/* Empties the spool for the next delta (stored, or discarded to be collected again) and forgets
 * the leases looked up for it: every delta records the TTLs of its own leases. */
static int spool_reset(Spool *sp) {
    i64map_clear(sp->leases);
    sp->lookup_warned = sp->lookups_off = 0;
    return delta_writer_reset(sp->w);
}

static void close_watch(SnapWatch *e) {
    etcd_watch_close(e->watch);
    e->watch = NULL;
}

static int open_watch(Snapshotter *s) {
    close_watch(&s->etcd);
    /* the watch starts again at prev_rev + 1: whatever the spool holds is collected again */
    int rc = spool_reset(&s->spool);
    if (rc) return rc;
    if (!deltas_enabled(&s->cfg)) return 0;
    static const uint8_t all_from[1] = {0};
    rc = etcd_watch_open(s->etcd.client, all_from, 1, all_from, 1, s->chain.prev_rev + 1, 1,
                         &s->etcd.watch);
    if (rc) return err_wrap(rc, "watch from revision %lld", (long long)(s->chain.prev_rev + 1));
    s->etcd.next_expected = s->chain.prev_rev + 1;
    s->due.next_delta_ms = now_mono_ms() + s->cfg.delta_period_ms;
    return 0;
}

/* A snapshot was stored (or the watch is healthy with nothing pending): not failing any more. */
static void clear_failing(Snapshotter *s) {
    if (!s->run.failing) return;
    s->run.failing = 0;
    log_info("recovered: snapshots resume from revision %lld", (long long)s->chain.prev_rev);
    set_error(&s->shared, NULL);
}

/* snap (as it was named, not parsed back) was stored and is the chain's end now. */
static void note_stored(Snapshotter *s, const Snapshot *snap) {
    clear_failing(s);
    s->chain.prev_rev = snap->last_revision;
    s->chain.last_stored = *snap;
    pthread_mutex_lock(&s->shared.mu);
    if (snap->kind == SNAP_FULL)
        s->shared.status.last_full_ok_s = now_unix_s();
    else
        s->shared.status.last_delta_ok_s = now_unix_s();
    s->shared.status.last_revision = snap->last_revision;
    pthread_mutex_unlock(&s->shared.mu);
}

static void set_conflict(Shared *sh, int conflict) {
    pthread_mutex_lock(&sh->mu);
    sh->status.store_conflict = conflict;
    pthread_mutex_unlock(&sh->mu);
}

/* The server's fence (SnapshotterConfig.still_leader) before storing `what` or collecting
 * garbage: 0 to go on; else the loop is fenced: ERR_CANCELED, logged, status.fenced set. */
static int fence(Snapshotter *s, const char *what) {
    if (!s->cfg.still_leader) return 0;
    if (s->run.fenced)
        return err_set(ERR_CANCELED, "%s not stored: no longer the backup leader", what);
    int rc = s->cfg.still_leader(s->cfg.leader_ctx);
    if (!rc) return 0;
    char why[600];
    snprintf(why, sizeof why, "%s", err_msg());
    s->run.fenced = 1;
    pthread_mutex_lock(&s->shared.mu);
    s->shared.status.fenced = 1;
    pthread_mutex_unlock(&s->shared.mu);
    log_warn("%s: not done, this member's etcd is not confirmed as the raft leader any more (%s); "
             "stopping snapshots, the new leader's sidecar continues from the store",
             what, why);
    return err_set(ERR_CANCELED, "%s not done: no longer the backup leader (%s)", what, why);
}

/* Lists the store and decides under which history this etcd may write (history_decide). mark:
 * the restore mark of a full snapshot just taken, or NULL. *recs (may be NULL) receives the
 * records (owned). */
static int decide_history(Snapshotter *s, const HistoryRestoreMark *mark, HistoryDecision *d,
                          Snapshot **list_out, size_t *n_out, HistoryRecord **recs_out,
                          size_t *n_recs_out) {
    Snapshot *list = NULL;
    HistoryRecord *recs = NULL;
    size_t n = 0, nr = 0;
    EtcdStatus st;
    int rc = store_list_ex(s->cfg.store, 0, &list, &n, &recs, &nr);
    if (rc) {
        s->run.store_failed = 1;
        return err_wrap(rc, "listing the store");
    }
    rc = etcd_status(s->etcd.client, &st);
    if (rc) {
        free(list);
        free(recs);
        return err_wrap(rc, "etcd status");
    }
    history_decide(list, n, recs, nr, st.cluster_id, st.member_id, st.revision, mark,
                   s->cfg.abandon_other_histories, now_unix_s(), d);
    s->chain.cluster_id = st.cluster_id;
    s->chain.member_id = st.member_id;
    /* a new raft leader may not have applied every committed entry yet while the previous
     * leader's sidecar stored them: its revision catches up within moments (up to 3 s here) */
    for (int i = 0; i < 30 && !mark && d->action == HISTORY_NEED_DB &&
                    d->latest_revision > st.revision && d->latest_revision - st.revision < 100000;
         i++) {
        usleep(100 * 1000);
        if (etcd_status(s->etcd.client, &st) != 0) break;
        history_decide(list, n, recs, nr, st.cluster_id, st.member_id, st.revision, mark,
                       s->cfg.abandon_other_histories, now_unix_s(), d);
    }
    if (list_out) {
        *list_out = list;
        *n_out = n;
    } else {
        free(list);
    }
    if (recs_out) {
        *recs_out = recs;
        *n_recs_out = nr;
    } else {
        free(recs);
    }
    return 0;
}

/* Makes d the history written under from now on; a new history gets a fresh id and its record
 * is written before its first object. REFUSE and NEED_DB are ERR_CONFLICT. */
static int apply_history(Snapshotter *s, HistoryDecision *d, const HistoryRecord *recs,
                         size_t n_recs) {
    if (d->action == HISTORY_REFUSE || d->action == HISTORY_NEED_DB) {
        set_conflict(&s->shared, 1);
        return err_set(ERR_CONFLICT, "store %s: %s", store_describe(s->cfg.store), d->why);
    }
    int rc = 0;
    if (d->write_record) {
        if (!d->history[0] && (rc = history_new_id(d->history))) return rc;
        memcpy(d->record.id, d->history, sizeof d->record.id);
        s->chain.record = d->record;
        s->chain.record_pending = 1;
        s->chain.adopts_untagged = d->record.adopts_untagged;
    } else {
        const HistoryRecord *r = history_find(recs, n_recs, d->history);
        s->chain.adopts_untagged = r ? r->adopts_untagged : 0;
        s->chain.record_pending = 0;
    }
    if (strcmp(s->chain.history, d->history) != 0)
        log_info("backup history %s (%s): %s", d->history, history_action_name(d->action), d->why);
    memcpy(s->chain.history, d->history, sizeof s->chain.history);
    pthread_mutex_lock(&s->shared.mu);
    memcpy(s->shared.status.history, s->chain.history, sizeof s->shared.status.history);
    s->shared.status.adopts_untagged = s->chain.adopts_untagged;
    s->shared.status.store_conflict = 0;
    pthread_mutex_unlock(&s->shared.mu);
    return 0;
}

/* Before snap is stored in store: its history's record (once) and its tag. */
static int tag_object(Chain *ch, Store *store, const Snapshot *snap) {
    if (!ch->history[0])
        return err_set(ERR_INVALID, "no backup history decided for %s", snap->snap_name);
    int rc;
    if (ch->record_pending) {
        if ((rc = store_history_put_record(store, &ch->record))) return rc;
        ch->record_pending = 0;
    }
    return store_history_tag(store, ch->history, snap->snap_name);
}

/* After storing snap failed: its tag goes unless the object is there after all (a commit whose
 * answer was lost). Best effort: a dangling tag is harmless, GC never sees it. */
static void untag_unstored(const Chain *ch, Store *store, const Snapshot *snap) {
    if (!ch->history[0] || store_snapshot_stat(store, snap, NULL) != ERR_NOT_FOUND) return;
    Snapshot tagged = *snap;
    memcpy(tagged.history, ch->history, sizeof tagged.history);
    store_history_untag(store, &tagged);
}

/* The store's chain was not proven to be this etcd's (start): a decision to continue or adopt
 * it becomes a new history, whose record adopts nothing and abandons nothing. */
static void reject_chain_history(const Chain *ch, HistoryDecision *d) {
    if (d->action != HISTORY_CONTINUE && d->action != HISTORY_ADOPT) return;
    d->action = HISTORY_NEW;
    d->history[0] = '\0';
    d->write_record = 1;
    memset(&d->record, 0, sizeof d->record);
    d->record.cluster_id = ch->cluster_id;
    d->record.member_id = ch->member_id;
    d->record.created_s = now_unix_s();
    snprintf(d->record.reason, sizeof d->record.reason, "new");
    snprintf(d->why, sizeof d->why,
             "the store's latest chain (%s, ending at revision %lld) was not proven to be this "
             "cluster's history",
             d->latest_history[0] ? d->latest_history : "untagged", (long long)d->latest_revision);
}

/* Before a full snapshot is stored: decides its history with the restore mark in its db. */
static int full_hook(void *ctx, const HistoryRestoreMark *mark, uint64_t db_bytes,
                     const Snapshot *snap) {
    (void)db_bytes;
    Snapshotter *s = ctx;
    HistoryDecision d;
    HistoryRecord *recs = NULL;
    size_t nr = 0;
    char what[300];
    snprintf(what, sizeof what, "full snapshot %s", snap->snap_name);
    int rc = fence(s, what);
    if (rc) return rc;
    rc = decide_history(s, mark, &d, NULL, NULL, &recs, &nr);
    if (!rc && s->chain.chain_rejected) reject_chain_history(&s->chain, &d);
    if (!rc) rc = apply_history(s, &d, recs, nr);
    free(recs);
    if (!rc && (rc = tag_object(&s->chain, s->cfg.store, snap))) s->run.store_failed = 1;
    return rc;
}

/* An attempt of kind of (SNAP_EVENT_FULL, _DELTA, _GC) begins: reported, store_failed cleared. */
static void begin_attempt(Snapshotter *s, SnapshotterEventKind of) {
    s->run.store_failed = 0;
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_BEGIN, .ok = 1, .of = of});
}

static int take_full(Snapshotter *s, int is_final) {
    close_watch(&s->etcd);
    begin_attempt(s, SNAP_EVENT_FULL);
    int64_t t0 = now_mono_ms();
    FullSnapshotResult res = {0};
    int owed = s->chain.need_full;
    s->chain.need_full = 1; /* until one succeeds */
    int rc = fullsnap_take(s->etcd.client, s->cfg.store, s->cfg.temp_dir, s->cfg.compression,
                           is_final, full_hook, s, &res);
    const Snapshot *snap = &res.snap; /* named (snap_name set) once the db was read */
    double secs = (double)(now_mono_ms() - t0) / 1000.0;
    phase_timer_end(&res.phases, rc == 0, snap->snap_name);
    phase_last_set(PHASE_LAST_FULL, &res.phases);
    if (rc && s->run.fenced) return rc; /* not a failure: the hook stored nothing */
    if (rc == ERR_CANCELED && ((s->run.stop && *s->run.stop) || atomic_load(process_stop_flag()))) {
        /* stopped by a signal, nothing stored: the chain stands as it was, so the last delta
         * continues it from prev_rev (its watch is reopened there) unless a full was owed */
        s->chain.need_full = owed;
        if (snap->snap_name[0]) untag_unstored(&s->chain, s->cfg.store, snap);
        log_warn("full snapshot stopped by a signal after %.1fs: nothing stored", secs);
        return rc;
    }
    if (rc) {
        err_wrap(rc, "full snapshot");
        char *msg = strdup(err_msg());
        if (snap->snap_name[0]) untag_unstored(&s->chain, s->cfg.store, snap);
        if (msg) err_set(rc, "%s", msg);
        free(msg);
        emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_FULL,
                                          .rc = rc,
                                          .seconds = secs,
                                          .error = err_msg(),
                                          .in_store = res.store_failed || s->run.store_failed});
        return rc;
    }
    log_info("full snapshot %s stored: revision %lld, db %llu bytes, stored %llu bytes, %.3fs",
             snap->snap_name, (long long)snap->last_revision, (unsigned long long)res.db_bytes,
             (unsigned long long)res.stored_bytes, secs);
    s->chain.need_full = 0;
    s->chain.chain_rejected = 0; /* the new history has its first object */
    note_stored(s, snap);
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_FULL,
                                      .ok = 1,
                                      .seconds = secs,
                                      .revision = snap->last_revision,
                                      .created_on = snap->created_on,
                                      .snap_name = snap->snap_name});
    rc = spool_reset(&s->spool);
    if (!rc) rc = open_watch(s);
    return rc;
}

/* 1 when a full snapshot now would store nothing new: the last stored object is a full snapshot
 * (final as is_final) of this etcd cluster at etcd's current revision, no full snapshot is owed
 * (need_full), and the store's chain was not rejected by the identity proof (chain_rejected: the
 * full then starts this cluster's history). etcd not answering is 0: the full snapshot then
 * reports it. */
static int full_is_current(Snapshotter *s, int is_final) {
    if (s->chain.need_full || s->chain.chain_rejected || s->chain.last_stored.kind != SNAP_FULL ||
        !s->chain.last_stored.is_final != !is_final || !s->chain.cluster_id)
        return 0;
    EtcdStatus st;
    if (etcd_status(s->etcd.client, &st) != 0) return 0;
    return st.cluster_id == s->chain.cluster_id &&
           st.revision == s->chain.last_stored.last_revision;
}

/* A full snapshot (why: "scheduled", "requested"...), unless full_is_current: then nothing is
 * stored, as the Go tool skips a full snapshot without updates since the previous one; it is
 * logged and reported as a skipped full (SnapshotterEvent.skipped), and last_stored, the newest
 * full for requests and garbage collection, stays. */
static int take_full_unless_current(Snapshotter *s, int is_final, const char *why) {
    if (!full_is_current(s, is_final)) return take_full(s, is_final);
    const Snapshot *last = &s->chain.last_stored;
    log_info("%s full snapshot at revision %lld: no new revision since full %s: skipped", why,
             (long long)last->last_revision, last->snap_name);
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_FULL,
                                      .ok = 1,
                                      .skipped = 1,
                                      .revision = last->last_revision,
                                      .created_on = last->created_on,
                                      .snap_name = last->snap_name});
    return 0;
}

/* Handover window: lists the store again. When its latest set covers revisions after prev_rev
 * without a hole (objects the previous leader's sidecar stored after this loop listed the store),
 * the loop continues after them: prev_rev moves there and the watch is reopened after it (the
 * spool is dropped; what it held after that revision is collected again), *moved = 1. */
static int handover_relist(Snapshotter *s, int *moved) {
    *moved = 0;
    Snapshot *list = NULL;
    size_t n = 0;
    int rc = store_list_ex(s->cfg.store, 0, &list, &n, NULL, NULL);
    if (rc)
        return err_wrap(
            rc, "listing the store for objects another sidecar may have stored since this one "
                "took over");
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    if (!idx) {
        free(list);
        return err_set(ERR_NOMEM, "out of memory");
    }
    ptrdiff_t fi = -1, last = -1;
    size_t nd = 0;
    snapname_latest_set(list, n, &fi, idx, &nd);
    int64_t next = fi >= 0 ? list[fi].last_revision + 1 : 0;
    if (fi >= 0) last = fi;
    for (size_t i = 0; fi >= 0 && i < nd; i++) {
        const Snapshot *d = &list[idx[i]];
        if (d->last_revision < next) continue;
        if (d->start_revision > next) break;
        next = d->last_revision + 1;
        last = (ptrdiff_t)idx[i];
    }
    /* only objects of this loop's own history continue it: another history's (or, unless
     * adopted, untagged objects) were never proven to be this cluster's (chainproof.h) */
    if (last >= 0 && next - 1 > s->chain.prev_rev &&
        strcmp(list[last].history, s->chain.history) != 0 &&
        !(list[last].history[0] == '\0' && s->chain.adopts_untagged)) {
        log_warn("leader handover: %s (history %s) covers revisions after %lld, but is not of "
                 "this loop's history %s: not continuing after it",
                 list[last].key, list[last].history[0] ? list[last].history : "untagged",
                 (long long)s->chain.prev_rev, s->chain.history);
        last = -1;
    }
    if (last >= 0 && next - 1 > s->chain.prev_rev) {
        log_info("leader handover: %s in the store already covers revisions %lld-%lld (stored "
                 "by another sidecar); continuing after it",
                 list[last].snap_name, (long long)(s->chain.prev_rev + 1), (long long)(next - 1));
        s->chain.prev_rev = next - 1;
        s->chain.last_stored = list[last];
        pthread_mutex_lock(&s->shared.mu);
        s->shared.status.last_revision = s->chain.prev_rev;
        pthread_mutex_unlock(&s->shared.mu);
        rc = open_watch(s);
        if (!rc) *moved = 1;
    }
    free(idx);
    free(list);
    return rc;
}

/* Drops the pending events and closes the watch: they are collected again from the last stored
 * revision when the watch reopens. */
static void drop_pending(Snapshotter *s) {
    spool_reset(&s->spool);
    close_watch(&s->etcd);
}

/* Stores the pending events as one delta. 0 with nothing to do when the spool is empty
 * (*stored = 0). */
static int take_delta(Snapshotter *s, int *stored_out) {
    s->due.next_delta_ms = now_mono_ms() + s->cfg.delta_period_ms;
    if (stored_out) *stored_out = 0;
    size_t n = delta_writer_events(s->spool.w);
    if (n == 0) {
        if (s->etcd.watch) { /* caught up, nothing pending */
            clear_failing(s);
            emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_IDLE, .ok = 1});
        }
        return 0;
    }
    int rc;
    begin_attempt(s, SNAP_EVENT_DELTA);
    if (s->due.handover_until_ms && now_mono_ms() < s->due.handover_until_ms) {
        int moved = 0;
        if ((rc = handover_relist(s, &moved)) || moved) return rc;
    }
    if ((rc = fence(s, "delta snapshot"))) {
        drop_pending(s);
        return rc;
    }
    int64_t t0 = now_mono_ms();
    PhaseTimer pt; /* "prepare" (name, tag), "collect" (the spool closed and read back),
                      "compress_encrypt", "upload" */
    phase_timer_begin(&pt);
    phase_add(&pt, "prepare", 0); /* listed in this order */
    phase_add(&pt, "collect", 0);
    phase_add(&pt, "compress_encrypt", 0);
    phase_add(&pt, "upload", 0);
    int64_t lap = pt.start_ns;
    Snapshot snap; /* named once; the writer, the tag, last_stored and the event take it */
    rc =
        fullsnap_snapshot_new(s->cfg.store, SNAP_INCR, s->chain.prev_rev + 1,
                              delta_writer_last_revision(s->spool.w), s->cfg.compression, 0, &snap);
    if (rc) return rc;
    IoReader *payload = NULL;
    int in_store = 0; /* the failing step was the store's */
    rc = tag_object(&s->chain, s->cfg.store, &snap);
    if (rc) in_store = s->chain.history[0] != '\0'; /* not when no history was decided */
    phase_lap(&pt, "prepare", &lap);
    if (!rc) rc = delta_writer_payload(s->spool.w, &payload);
    phase_lap(&pt, "collect", &lap);
    uint64_t stored = 0;
    if (!rc)
        rc = fullsnap_store_stream_timed(s->cfg.store, &snap, s->cfg.compression, payload, &stored,
                                         &pt, "collect", &in_store);
    io_reader_free(payload);
    double secs = (double)(now_mono_ms() - t0) / 1000.0;
    phase_timer_end(&pt, rc == 0, snap.snap_name);
    phase_last_set(PHASE_LAST_DELTA, &pt);
    if (rc) {
        char *msg = strdup(err_msg());
        untag_unstored(&s->chain, s->cfg.store, &snap);
        if (msg) err_set(rc, "%s", msg);
        free(msg);
        /* the spool was closed for the payload: collected again on the next attempt */
        drop_pending(s);
        err_wrap(rc, "delta snapshot %s", snap.snap_name);
        emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_DELTA,
                                          .rc = rc,
                                          .seconds = secs,
                                          .error = err_msg(),
                                          .in_store = in_store});
        return rc;
    }
    log_info("delta snapshot %s stored: %zu events, revisions %lld-%lld, %llu bytes",
             snap.snap_name, n, (long long)snap.start_revision, (long long)snap.last_revision,
             (unsigned long long)stored);
    note_stored(s, &snap);
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_DELTA,
                                      .ok = 1,
                                      .seconds = secs,
                                      .start_revision = snap.start_revision,
                                      .revision = snap.last_revision,
                                      .created_on = snap.created_on,
                                      .snap_name = snap.snap_name});
    if (stored_out) *stored_out = 1;
    return spool_reset(&s->spool);
}

/* A failed lease lookup slower than this stops the lookups for the rest of the spool. */
#define LEASE_LOOKUP_SLOW_MS 1000

/* The granted TTL (s) to record with a put of lease `lease`, or 0 for none: only the first put
 * of each lease in the spool asks etcd (one LeaseTimeToLive per new lease per delta). A lease
 * that is gone records nothing (its revocation deletes its keys, and the watch delivers those
 * deletes). Any other failure records nothing either (restore then uses --new-lease-ttl) and
 * never fails the backup; it is logged once per delta. A slow failure (etcd not answering) also
 * ends the lookups for this delta, so it costs the watch loop one timeout per delta at most. */
static int64_t lease_ttl_to_record(Spool *sp, EtcdClient *client, int64_t lease) {
    if (lease == 0 || sp->lookups_off || i64map_get(sp->leases, lease, NULL)) return 0;
    int64_t granted = 0, t0 = now_mono_ms();
    int rc = etcd_lease_time_to_live(client, lease, &granted, NULL);
    if (rc && rc != ERR_NOT_FOUND) {
        int slow = now_mono_ms() - t0 > LEASE_LOOKUP_SLOW_MS;
        if (!sp->lookup_warned)
            log_warn("granted TTL of lease %lld: %s; not recorded (restore uses --new-lease-ttl "
                     "for it)%s",
                     (long long)lease, err_msg(), slow ? "; no more lookups for this delta" : "");
        else
            log_debug("granted TTL of lease %lld: %s", (long long)lease, err_msg());
        sp->lookup_warned = 1;
        sp->lookups_off = slow;
        granted = 0;
    } else if (rc || granted < 0) {
        granted = 0;
    }
    /* out of memory here only means a later put of this lease asks (and records) again */
    (void)i64map_put(sp->leases, lease, granted);
    return granted;
}

/* Appends a watch response's events, checking contiguity. ERR_GAP on a hole. */
static int handle_events(Snapshotter *s, const EtcdWatchResponse *r) {
    int64_t now_ns = now_unix_ns();
    for (size_t i = 0; i < r->n_events; i++) {
        int64_t rev = r->events[i].kv.mod_revision;
        /* the same revision continues only inside the delta being collected */
        int same_rev = rev == s->etcd.next_expected - 1 && delta_writer_events(s->spool.w) > 0 &&
                       rev == delta_writer_last_revision(s->spool.w);
        if (rev != s->etcd.next_expected && !same_rev) {
            return err_set(ERR_GAP, "watch delivered revision %lld, expected %lld", (long long)rev,
                           (long long)s->etcd.next_expected);
        }
        s->etcd.next_expected = rev + 1;
        const EtcdEvent *ev = &r->events[i];
        int64_t ttl = ev->type == ETCD_OP_PUT
                          ? lease_ttl_to_record(&s->spool, s->etcd.client, ev->kv.lease)
                          : 0;
        int rc = delta_writer_append_lease(s->spool.w, ev, now_ns, ttl);
        if (rc) return rc;
    }
    if (r->n_events) emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_EVENTS, .ok = 1});
    return 0;
}

/* 1 when the spool holds enough for a delta before its period ends (the byte or event limit). */
static int delta_due(const Spool *sp, const SnapshotterConfig *cfg) {
    if (delta_writer_events(sp->w) == 0) return 0;
    if (delta_writer_bytes(sp->w) >= cfg->delta_memory_limit) return 1;
    if (cfg->max_changes && delta_writer_events(sp->w) >= cfg->max_changes) return 1;
    return 0;
}

/* Reads one watch response (or times out) and acts on it. */
static int pump_watch(Snapshotter *s, int timeout_ms) {
    EtcdWatchResponse r;
    int got = 0;
    int rc = etcd_watch_next(s->etcd.watch, timeout_ms, &r, &got);
    if (rc) return rc;
    if (!got) return 0;
    if (r.compact_revision > 0) {
        return err_set(ERR_COMPACTED, "watch from revision %lld: compacted at %lld",
                       (long long)(s->chain.prev_rev + 1), (long long)r.compact_revision);
    }
    if (r.canceled) return err_set(ERR_ETCD, "watch canceled: %s", r.cancel_reason);
    rc = handle_events(s, &r);
    if (rc) return rc;
    if (delta_due(&s->spool, &s->cfg)) return take_delta(s, NULL);
    return 0;
}

/* Reads events up to the revision current now (bounded by timeout_ms). Returns the watch's
 * error (ERR_COMPACTED, ERR_GAP...) or 0; not reaching the revision in time is not an error. */
static int drain_to_current(Snapshotter *s, int64_t timeout_ms) {
    int64_t target = 0;
    if (!s->etcd.watch || etcd_get_revision(s->etcd.client, &target) != 0) return 0;
    int64_t deadline = now_mono_ms() + timeout_ms;
    while (s->etcd.watch && s->etcd.next_expected <= target && now_mono_ms() < deadline &&
           !process_stopping()) { /* a stop drains again, to its own deadline (last_delta) */
        int rc = pump_watch(s, 200);
        if (rc) {
            log_warn("draining the watch: %s", err_msg());
            return rc;
        }
    }
    return 0;
}

/* Defragments every member, followers first and the leader last (docs/go-tool.md §10.1), then takes
 * a full snapshot. */
static int defragment_all(Snapshotter *s) {
    EtcdMember *members = NULL;
    size_t n = 0;
    EtcdStatus st;
    int rc = etcd_member_list(s->etcd.client, &members, &n);
    if (!rc) rc = etcd_status(s->etcd.client, &st);
    if (rc) {
        free(members);
        return err_wrap(rc, "defragmentation");
    }
    for (int pass = 0; pass < 2 && !rc; pass++) {
        for (size_t i = 0; i < n && !rc; i++) {
            int is_leader = members[i].id == st.leader || n == 1;
            if (is_leader != (pass == 1)) continue;
            char url[512];
            snprintf(url, sizeof url, "%s", members[i].client_urls);
            char *comma = strchr(url, ',');
            if (comma) *comma = '\0';
            if (!url[0]) continue;
            const char *ep = url;
            EtcdConfig ec = s->cfg.etcd;
            ec.endpoints = &ep;
            ec.n_endpoints = 1;
            EtcdClient *c = NULL;
            int64_t t0 = now_mono_ms();
            rc = etcd_client_new(&ec, &c);
            if (!rc) rc = etcd_defragment(c);
            etcd_client_free(c);
            double secs = (double)(now_mono_ms() - t0) / 1000.0;
            if (rc) err_wrap(rc, "defragmenting %s", url);
            emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_DEFRAG,
                                              .ok = rc == 0,
                                              .rc = rc,
                                              .seconds = secs,
                                              .endpoint = url,
                                              .error = rc ? err_msg() : NULL});
            if (!rc) log_info("defragmented member %s (%s) in %.3fs", members[i].name, url, secs);
        }
    }
    free(members);
    if (rc) return rc;
    /* Go never does this (the Go tool's quirk, docs/snapshot.md); operators expect it */
    return take_full_unless_current(s, 0, "post-defragmentation");
}

/* 1 when the deltas after the full snapshot at list[fi] (idx, nd) follow each other without a
 * hole; *gap_at: the first missing revision otherwise. */
static int set_contiguous(const Snapshot *list, ptrdiff_t fi, const size_t *idx, size_t nd,
                          int64_t *gap_at) {
    int64_t next = list[fi].last_revision + 1;
    for (size_t i = 0; i < nd; i++) {
        const Snapshot *d = &list[idx[i]];
        if (d->last_revision < next) continue; /* inside what is covered already */
        if (d->start_revision > next) {
            *gap_at = next;
            return 0;
        }
        next = d->last_revision + 1;
    }
    return 1;
}

/* 1 when the chain ending with `last` is of a history of ours (tagged, with its record) that
 * this etcd cluster started: the record's cluster ID is etcd's. */
static int history_of_this_cluster(const Chain *ch, const Snapshot *last, const HistoryRecord *recs,
                                   size_t nr) {
    const HistoryRecord *r = last->history[0] ? history_find(recs, nr, last->history) : NULL;
    return r && r->cluster_id && r->cluster_id == ch->cluster_id;
}

/* Before the store's chain ending with `last` is continued (resumed with deltas, or given the
 * next full snapshot in its history): proves it is this etcd's (chainproof.h). A chain that is
 * not, or cannot be proven, sets chain_rejected (logged once, with SNAP_EVENT_CHAIN_REJECTED):
 * the next full snapshot starts a new history. One exception: a chain whose last revision etcd
 * has compacted (no proof possible) in a history this cluster started (recs: the store's
 * history records) is continued, with a full snapshot first as its deltas cannot be resumed;
 * otherwise every restart after a compaction would start a history that garbage collection
 * never joins to the old one, and the old one would be kept forever. ERR_* when the proof could
 * not run. */
static int prove_chain(Snapshotter *s, const Snapshot *last, const HistoryRecord *recs, size_t nr) {
    ChainProof p;
    int rc = chain_prove(s->etcd.client, s->cfg.store, last, s->cfg.temp_dir, s->run.stop, &p);
    if (rc)
        return err_wrap(rc, "proving that the store's chain ending with %s is this cluster's",
                        last->key);
    if (p.verdict == CHAIN_PROVEN) {
        log_info("the store's chain ending with %s is this cluster's history: %s", last->key,
                 p.why);
        s->chain.chain_rejected = 0;
        return 0;
    }
    if (p.verdict == CHAIN_COMPACTED && history_of_this_cluster(&s->chain, last, recs, nr)) {
        log_warn("the store's chain ending with %s cannot be compared with etcd: %s; its history "
                 "%s was started by this etcd cluster (ID %016llx), so it continues, with a full "
                 "snapshot first",
                 last->key, p.why, last->history, (unsigned long long)s->chain.cluster_id);
        s->chain.chain_rejected = 0;
        return 0;
    }
    if (s->chain.chain_rejected) return 0; /* logged and counted by the first attempt */
    s->chain.chain_rejected = 1;
    log_warn("not continuing the store's chain ending with %s (history %s): %s (%s); taking a "
             "full snapshot that starts a new history",
             last->key, last->history[0] ? last->history : "untagged", p.why,
             chain_verdict_name(p.verdict));
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_CHAIN_REJECTED,
                                      .ok = 1,
                                      .revision = p.revision,
                                      .snap_name = last->key,
                                      .reason = chain_verdict_name(p.verdict)});
    return 0;
}

/* Decides how to start: resume with deltas from the store's latest set, or take a full
 * snapshot. The history is decided here for a resume, and by the full snapshot's hook (with the
 * restore mark in its db) otherwise. */
static int start(Snapshotter *s) {
    Snapshot *list = NULL;
    HistoryRecord *recs = NULL;
    size_t n = 0, nr = 0;
    HistoryDecision d;
    int rc = decide_history(s, NULL, &d, &list, &n, &recs, &nr);
    if (rc) return rc;
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    size_t nd = 0;
    ptrdiff_t fi = -1;
    int64_t gap_at = 0;
    int full_due = 0;
    char why[1024] = "";
    if (idx) snapname_latest_set(list, n, &fi, idx, &nd);
    if ((d.action == HISTORY_CONTINUE || d.action == HISTORY_ADOPT) && fi >= 0 &&
        (rc = prove_chain(s, nd ? &list[idx[nd - 1]] : &list[fi], recs, nr))) {
        free(idx); /* the proof could not run (store, etcd): retried with backoff */
        free(list);
        free(recs);
        return rc;
    }
    if (d.action == HISTORY_NEW)
        snprintf(why, sizeof why, "the store holds no backups");
    else if (d.action != HISTORY_CONTINUE && d.action != HISTORY_ADOPT)
        snprintf(why, sizeof why,
                 "%s; whether etcd was restored from those backups is read from its db", d.why);
    else if (s->chain.chain_rejected)
        snprintf(why, sizeof why,
                 "the store's latest chain is not this cluster's, as far as "
                 "can be proven; a new history starts with it");
    else if (!s->cfg.resume)
        snprintf(why, sizeof why, "every run starts with one");
    else if (fi < 0)
        snprintf(why, sizeof why, "no full snapshot in the store");
    else if (list[fi].is_final)
        snprintf(why, sizeof why, "the latest full snapshot is final");
    else if (!set_contiguous(list, fi, idx, nd, &gap_at))
        snprintf(why, sizeof why, "the latest set misses revision %lld", (long long)gap_at);
    else
        full_due = cron_next(&s->cfg.schedule, list[fi].created_on) <= now_unix_s();
    if (!why[0]) {
        const Snapshot *last = nd ? &list[idx[nd - 1]] : &list[fi];
        s->chain.prev_rev = last->last_revision;
        s->chain.last_stored = *last;
        rc = apply_history(s, &d, recs, nr);
        if (!rc)
            log_info("resuming from %s: deltas from revision %lld", last->key,
                     (long long)(s->chain.prev_rev + 1));
        /* an encrypted chain read without keys never gets here: its proof cannot read it */
    }
    FREE_ALL(idx, list, recs);
    if (rc) return rc;
    if (why[0]) {
        log_info("taking a full snapshot: %s", why);
        return take_full(s, 0);
    }
    s->chain.need_full = 0;
    rc = open_watch(s);
    if (rc == ERR_COMPACTED || rc == ERR_GAP) {
        log_warn("%s: taking a full snapshot", err_msg());
        return take_full(s, 0);
    }
    if (rc || !full_due) return rc;
    /* a restart must store progress even when it comes before a full snapshot could finish
     * (a crash loop): first the events since the latest set, then the missed full snapshot */
    log_info("a scheduled full snapshot was missed: storing the events since revision %lld "
             "first",
             (long long)(s->chain.prev_rev + 1));
    rc = drain_to_current(s, 30000);
    if (!rc) rc = take_delta(s, NULL);
    if (rc == ERR_COMPACTED || rc == ERR_GAP)
        log_warn("%s", err_msg());
    else if (rc)
        return rc;
    log_info("taking the missed scheduled full snapshot");
    return take_full_unless_current(s, 0, "missed scheduled");
}

/* Serves the oldest pending batch of requests from other threads, if any. */
static void serve_request(Snapshotter *s) {
    pthread_mutex_lock(&s->shared.mu);
    int k = -1;
    for (int i = 0; i < REQ_KINDS; i++)
        if (s->shared.req.pending_id[i] &&
            (k < 0 || s->shared.req.pending_id[i] < s->shared.req.pending_id[k]))
            k = i;
    uint64_t id = k >= 0 ? s->shared.req.pending_id[k] : 0;
    if (k >= 0) s->shared.req.pending_id[k] = 0; /* later requesters open the next batch */
    pthread_mutex_unlock(&s->shared.mu);
    if (!id) return;

    int rc = 0, none = 0, stored = 0;
    if (k == SNAP_REQ_DELTA) {
        drain_to_current(s, 2000);
        rc = take_delta(s, &stored);
        none = !rc && !stored;
    } else {
        rc = take_full_unless_current(s, k == SNAP_REQ_FULL_FINAL, "requested");
    }
    pthread_mutex_lock(&s->shared.mu);
    s->shared.req.rc[k] = rc;
    s->shared.req.none[k] = none;
    s->shared.req.result[k] = s->chain.last_stored;
    snprintf(s->shared.req.error[k], sizeof s->shared.req.error[k], "%s", rc ? err_msg() : "");
    s->shared.req.done_id[k] = id;
    pthread_cond_broadcast(&s->shared.cv);
    pthread_mutex_unlock(&s->shared.mu);
}

int snapshotter_request(Snapshotter *s, SnapshotRequestKind kind, int64_t timeout_ms, Snapshot *out,
                        int *none) {
    if (kind == SNAP_REQ_DELTA && !deltas_enabled(&s->cfg))
        return err_set(ERR_UNSUPPORTED, "delta snapshots are disabled (--delta-snapshot-period)");
    if ((int)kind < 0 || (int)kind >= REQ_KINDS)
        return err_set(ERR_INVALID, "unknown snapshot request kind %d", (int)kind);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    pthread_mutex_lock(&s->shared.mu);
    if (!s->shared.status.active) {
        pthread_mutex_unlock(&s->shared.mu);
        return err_set(ERR_CANCELED, "snapshotter is not active");
    }
    uint64_t id = s->shared.req.pending_id[kind];
    if (!id) { /* none waiting: open a batch */
        id = s->shared.req.pending_id[kind] = ++s->shared.req.next_id;
        s->shared.req.pending_waiters[kind] = 0;
    }
    s->shared.req.pending_waiters[kind]++;
    int rc = 0;
    while (s->shared.req.done_id[kind] < id) {
        if (!s->shared.status.active) {
            rc = err_set(ERR_CANCELED, "snapshotter stopped");
            break;
        }
        if (pthread_cond_timedwait(&s->shared.cv, &s->shared.mu, &until)) {
            rc =
                err_set(ERR_TIMEOUT, "snapshot not finished within %lld ms", (long long)timeout_ms);
            break;
        }
    }
    /* giving up on a batch not yet started: the last one out withdraws it */
    if (rc && s->shared.req.pending_id[kind] == id && --s->shared.req.pending_waiters[kind] == 0)
        s->shared.req.pending_id[kind] = 0;
    if (!rc) {
        /* the batch's result, or a later batch's of the same kind (taken later: it covers this
         * request too) when that one also finished before this thread woke up */
        rc = s->shared.req.rc[kind];
        if (rc) {
            err_set(rc, "%s", s->shared.req.error[kind]);
        } else {
            if (out) *out = s->shared.req.result[kind];
            if (none) *none = s->shared.req.none[kind];
        }
    }
    pthread_mutex_unlock(&s->shared.mu);
    return rc;
}

/* One step of the loop: whatever is due now. */
static int step(Snapshotter *s, int recovering) {
    if (recovering) {
        /* a full snapshot only when needed; otherwise collect the events since the last stored
         * revision again (a compacted revision turns into a full snapshot in the caller) */
        if (s->chain.need_full) return take_full(s, 0);
        return open_watch(s);
    }
    if (s->due.next_full_s > 0 && now_unix_s() >= s->due.next_full_s) {
        schedule_next_full(&s->due, &s->cfg.schedule);
        return take_full_unless_current(s, 0, "scheduled");
    }
    if (s->due.next_defrag_s > 0 && now_unix_s() >= s->due.next_defrag_s) {
        s->due.next_defrag_s = cron_next(s->cfg.defrag_schedule, now_unix_s());
        return defragment_all(s);
    }
    if (s->etcd.watch && now_mono_ms() >= s->due.next_delta_ms) return take_delta(s, NULL);
    if (s->etcd.watch) {
        int64_t wait = s->due.next_delta_ms - now_mono_ms();
        if (wait > 100) wait = 100;
        if (wait < 0) wait = 0;
        return pump_watch(s, (int)wait);
    }
    if (deltas_enabled(&s->cfg)) return open_watch(s);
    usleep(100 * 1000);
    return 0;
}

/* Garbage collection between snapshots; while snapshots are failing it deletes nothing. */
/* Another history may have written into the store since the last full snapshot: a conflict
 * stops writing (ERR_CONFLICT; the next attempt is a full snapshot, whose hook decides again). */
static int check_history(Snapshotter *s) {
    HistoryDecision d;
    if (decide_history(s, NULL, &d, NULL, NULL, NULL, NULL) != 0) {
        log_warn("checking the store's history: %s", err_msg());
        return 0; /* the next snapshot reports a store or etcd that fails */
    }
    if (d.action != HISTORY_NEED_DB && d.action != HISTORY_REFUSE) return 0;
    s->chain.need_full = 1;
    set_conflict(&s->shared, 1);
    return err_set(ERR_CONFLICT, "store %s: %s", store_describe(s->cfg.store), d.why);
}

/* Garbage collection between snapshots, after the history check (its error is returned);
 * while snapshots are failing it deletes nothing. */
static int maybe_gc(Snapshotter *s, int failing) {
    if (s->cfg.gc_period_ms <= 1000 || now_mono_ms() < s->due.next_gc_ms) return 0;
    s->due.next_gc_ms = now_mono_ms() + s->cfg.gc_period_ms;
    int rc = fence(s, "garbage collection");
    if (rc) return rc;
    begin_attempt(s, SNAP_EVENT_GC);
    /* the history check and the GC plan share one listing of the store */
    store_pin_listing(s->cfg.store);
    if (!failing && s->chain.history[0]) {
        rc = check_history(s);
        if (rc) {
            store_unpin_listing(s->cfg.store);
            return rc;
        }
    }
    GcStats st;
    memset(&st, 0, sizeof st);
    int64_t t0 = now_mono_ms();
    GcScope scope = {s->chain.history, s->chain.adopts_untagged};
    rc = gc_run_scoped(s->cfg.store, s->chain.history[0] ? &scope : NULL, s->cfg.gc_policy,
                       s->cfg.max_backups, s->cfg.delta_retention_s, now_unix_s(),
                       failing || !s->chain.history[0], &st);
    store_unpin_listing(s->cfg.store);
    if (rc) log_error("garbage collection: %s", err_msg());
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_GC,
                                      .ok = rc == 0,
                                      .rc = rc,
                                      .seconds = (double)(now_mono_ms() - t0) / 1000.0,
                                      .gc = &st,
                                      .error = rc ? err_msg() : NULL});
    return 0;
}

static void set_active(Shared *sh, int active) {
    pthread_mutex_lock(&sh->mu);
    sh->status.active = active;
    if (!active) /* waiters see !active and give up */
        memset(sh->req.pending_id, 0, sizeof sh->req.pending_id);
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

int64_t snapshotter_backoff_next(const SnapshotterConfig *cfg, int64_t *delay_ms,
                                 int64_t *attempt) {
    const int64_t cap = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : 128000;
    const int64_t mult = cfg->backoff_multiplier > 0 ? cfg->backoff_multiplier : 2;
    const int64_t limit = cfg->backoff_attempt_limit > 0 ? cfg->backoff_attempt_limit : 6;
    if (*attempt > limit) return cap;
    (*attempt)++;
    *delay_ms = *delay_ms > cap / mult ? cap : *delay_ms * mult;
    return *delay_ms;
}

/* The watch drain of the last delta: events up to target, until deadline (monotonic ms).
 * The watch's error (ERR_COMPACTED, ERR_GAP, ERR_CANCELED...) or 0; *reached: the last
 * revision whose events are all spooled or stored. */
static int drain_final(Snapshotter *s, int64_t target, int64_t deadline, int64_t *reached) {
    int rc = 0;
    WaitNote note;
    wait_note_start(&note);
    while (s->etcd.watch && s->etcd.next_expected <= target && now_mono_ms() < deadline) {
        wait_note_check(&note, "etcd's watch to reach revision %lld for the last delta (at %lld)",
                        (long long)target, (long long)(s->etcd.next_expected - 1));
        if ((rc = pump_watch(s, 200))) break;
    }
    *reached = s->etcd.watch ? s->etcd.next_expected - 1 : s->chain.prev_rev;
    return rc;
}

/* On stop: every event up to the revision etcd has now (read first, so as close to the signal
 * as the loop allows) is stored in a last delta (docs/snapshot.md, "Stopping"). Falling short
 * within stop_drain_ms is an error: logged with how far it got, reported as
 * SNAP_EVENT_FINAL_SHORT (the metric) and returned (ERR_TIMEOUT), after the events read so far
 * are stored. */
static int last_delta(Snapshotter *s) {
    /* a sidecar that is not the leader any more (stopped by the server's leader check) leaves
     * the pending revisions to the new leader's sidecar, which resumes from the store */
    if (fence(s, "the last delta before stop")) return 0;
    if (!deltas_enabled(&s->cfg)) return 0;
    if (s->chain.need_full) {
        log_error("stopping while a full snapshot is still needed: revisions after %lld are not "
                  "stored",
                  (long long)s->chain.prev_rev);
        return ERR_CANCELED;
    }
    int64_t target = 0, t0 = now_mono_ms();
    int rc = etcd_get_revision(s->etcd.client, &target);
    if (rc) {
        log_error("last delta before stop: etcd's revision is unknown (%s); revisions after %lld "
                  "may not be stored",
                  err_msg(), (long long)s->chain.prev_rev);
        target = 0;
    } else {
        log_info("stopping: storing the events up to revision %lld (etcd's revision now) in a "
                 "last delta, waiting up to %lld ms",
                 (long long)target, (long long)s->cfg.stop_drain_ms);
    }
    /* collected again from the store's last revision if the watch had failed */
    if (!s->etcd.watch && target > s->chain.prev_rev) rc = open_watch(s);
    int64_t reached = s->chain.prev_rev;
    if (!rc) rc = drain_final(s, target, t0 + s->cfg.stop_drain_ms, &reached);
    if (rc == ERR_COMPACTED || rc == ERR_GAP || (rc && !s->etcd.watch)) {
        log_error("last delta before stop: %s; revisions after %lld are not stored", err_msg(),
                  (long long)s->chain.prev_rev);
        return rc;
    }
    int drain_rc = rc;
    rc = take_delta(s, NULL);
    if (rc && s->run.fenced) return 0; /* logged by the fence: the new leader stores them */
    if (rc) {
        log_error("last delta before stop: %s; revisions after %lld are not stored", err_msg(),
                  (long long)s->chain.prev_rev);
        return rc;
    }
    if (target == 0)
        return err_set(ERR_ETCD,
                       "etcd's revision at the stop is unknown: the last delta (up to "
                       "revision %lld) may end short of it",
                       (long long)s->chain.prev_rev);
    if (reached >= target) {
        log_info("last delta before stop: stored up to revision %lld (etcd's revision at the stop: "
                 "%lld)",
                 (long long)s->chain.prev_rev, (long long)target);
        return 0;
    }
    log_error("last delta before stop stopped short: stored up to revision %lld, %lld revisions "
              "short of %lld (etcd's revision at the stop) after %.1f s%s%s; revisions %lld-%lld "
              "are not stored (raise --final-delta-drain-timeout, now %lld ms)",
              (long long)reached, (long long)(target - reached), (long long)target,
              (double)(now_mono_ms() - t0) / 1000.0, drain_rc ? ": " : "",
              drain_rc ? err_msg() : "", (long long)(reached + 1), (long long)target,
              (long long)s->cfg.stop_drain_ms);
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_FINAL_SHORT,
                                      .rc = ERR_TIMEOUT,
                                      .start_revision = reached,
                                      .revision = target});
    return err_set(ERR_TIMEOUT,
                   "the last delta ends at revision %lld, %lld revisions short of revision %lld",
                   (long long)reached, (long long)(target - reached), (long long)target);
}

/* snapshotter_run between its STARTED and STOPPED events. */
static int run_loop(Snapshotter *s, atomic_int *stop, int fail_fast) {
    s->run.stop = stop;
    s->due.next_gc_ms = now_mono_ms() + s->cfg.gc_period_ms; /* first run after one period */
    if (s->cfg.defrag_schedule)
        s->due.next_defrag_s = cron_next(s->cfg.defrag_schedule, now_unix_s());
    int64_t delay = 1000, attempt = 0, backoff = 0; /* backoff: the wait before the next retry */
    int64_t retry_at = 0;                           /* monotonic ms; 0 = not waiting to retry */
    int started = 0;
    int rc = 0;
    s->due.handover_until_ms =
        s->cfg.handover_window_ms > 0 ? now_mono_ms() + s->cfg.handover_window_ms : 0;
    while (!*stop && !s->run.fenced) {
        if (retry_at && now_mono_ms() < retry_at) {
            (void)maybe_gc(s, 1);
            usleep(100 * 1000);
            continue;
        }
        int recovering = retry_at != 0;
        retry_at = 0;
        if (started) {
            /* GC deletes nothing until a snapshot is stored again after a failure */
            rc = maybe_gc(s, s->run.failing);
            if (!rc) {
                serve_request(s);
                rc = step(s, recovering);
            }
        } else {
            rc = start(s);
            if (!rc) {
                started = 1;
                schedule_next_full(&s->due, &s->cfg.schedule);
                set_active(&s->shared, 1);
            } else if (fail_fast) {
                return rc;
            }
        }
        if (s->run.fenced) break; /* not a failure: another sidecar leads now */
        if (rc == ERR_CANCELED && (*stop || atomic_load(process_stop_flag()))) {
            /* a request (the watch, a full snapshot) ended by the stop: no error, no retry;
             * last_delta below reopens the watch if it must, and says what is not stored */
            close_watch(&s->etcd);
            break;
        }
        if (started && (rc == ERR_COMPACTED || rc == ERR_GAP)) {
            log_warn("%s: taking a full snapshot instead of a delta with a hole", err_msg());
            s->chain.need_full = 1;
            rc = take_full(s, 0);
        }
        if (rc) {
            backoff = snapshotter_backoff_next(&s->cfg, &delay, &attempt);
            log_error("%s; retrying in %.1fs", err_msg(), (double)backoff / 1000.0);
            s->run.failing = 1;
            set_error(&s->shared, err_msg());
            close_watch(&s->etcd);
            retry_at = now_mono_ms() + backoff;
        } else if (!s->run.failing) {
            delay = 1000;
            attempt = 0;
        }
    }
    set_active(&s->shared, 0);
    if (!started || s->run.fenced) return 0;
    return last_delta(s);
}

int snapshotter_run(Snapshotter *s, atomic_int *stop, int fail_fast) {
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_STARTED, .ok = 1});
    int rc = run_loop(s, stop, fail_fast);
    emit(&s->cfg, &(SnapshotterEvent){.kind = SNAP_EVENT_STOPPED, .ok = rc == 0, .rc = rc});
    return rc;
}
