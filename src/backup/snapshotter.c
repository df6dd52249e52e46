/* snapshotter: see snapshotter.h. State: the last stored revision (prev_rev), the watch opened at
 * prev_rev + 1 and the spool of events not yet stored. Contiguity is checked on every event:
 * the next revision must be the current one or the one after it. */
#include "snapshotter.h"
#include "delta.h"
#include "fullsnap.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct Snapshotter {
    SnapshotterConfig cfg;
    EtcdClient *client;
    EtcdWatch *watch;
    DeltaWriter *spool;
    int64_t prev_rev;      /* last revision stored (full or delta) */
    int64_t next_expected; /* next revision the watch must deliver */
    int need_full;         /* a hole was seen: next snapshot must be full */
    int64_t next_full_s;   /* Unix seconds of the next scheduled full */
    int64_t next_delta_ms; /* monotonic deadline of the next delta */
    int64_t next_gc_ms;    /* monotonic time of the next garbage collection */
};

int snapshotter_new(const SnapshotterConfig *cfg, Snapshotter **out) {
    Snapshotter *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "out of memory");
    s->cfg = *cfg;
    if (s->cfg.backoff_initial_ms <= 0) s->cfg.backoff_initial_ms = 1000;
    if (s->cfg.backoff_max_ms <= 0) s->cfg.backoff_max_ms = 128000;
    if (s->cfg.stop_drain_ms <= 0) s->cfg.stop_drain_ms = 5000;
    int rc = fs_mkdir_p(cfg->temp_dir, 0700); /* as the Go tool: created if missing */
    if (!rc) rc = etcd_client_new(&cfg->etcd, &s->client);
    if (!rc) rc = delta_writer_new(cfg->temp_dir, &s->spool);
    if (rc) {
        snapshotter_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void snapshotter_free(Snapshotter *s) {
    if (!s) return;
    etcd_watch_close(s->watch);
    delta_writer_free(s->spool);
    etcd_client_free(s->client);
    free(s);
}

static int deltas_enabled(const Snapshotter *s) {
    return s->cfg.delta_period_ms >= 1000;
}

static void schedule_next_full(Snapshotter *s) {
    s->next_full_s = cron_next(&s->cfg.schedule, now_unix_s());
}

static int open_watch(Snapshotter *s) {
    etcd_watch_close(s->watch);
    s->watch = NULL;
    if (!deltas_enabled(s)) return 0;
    static const uint8_t all_from[1] = {0};
    int rc = etcd_watch_open(s->client, all_from, 1, all_from, 1, s->prev_rev + 1, 1, &s->watch);
    if (rc) return err_wrap(rc, "watch from revision %lld", (long long)(s->prev_rev + 1));
    s->next_expected = s->prev_rev + 1;
    s->next_delta_ms = now_mono_ms() + s->cfg.delta_period_ms;
    return 0;
}

static int take_full(Snapshotter *s) {
    etcd_watch_close(s->watch);
    s->watch = NULL;
    int64_t t0 = now_mono_ms();
    FullSnapshotResult res;
    s->need_full = 1; /* until one succeeds */
    int rc = fullsnap_take(s->client, s->cfg.store, s->cfg.temp_dir, s->cfg.compression, 0, &res);
    if (rc) return err_wrap(rc, "full snapshot");
    log_info("full snapshot %s stored: revision %lld, db %llu bytes, stored %llu bytes, %.3fs",
             res.snap_name, (long long)res.revision, (unsigned long long)res.db_bytes,
             (unsigned long long)res.stored_bytes, (double)(now_mono_ms() - t0) / 1000.0);
    s->prev_rev = res.revision;
    s->need_full = 0;
    rc = delta_writer_reset(s->spool);
    if (!rc) rc = open_watch(s);
    return rc;
}

/* Stores the pending events as one delta. 0 with nothing to do when the spool is empty. */
static int take_delta(Snapshotter *s) {
    s->next_delta_ms = now_mono_ms() + s->cfg.delta_period_ms;
    size_t n = delta_writer_events(s->spool);
    if (n == 0) return 0;
    int64_t last = delta_writer_last_revision(s->spool);
    char name[256];
    int rc = snapname_format(SNAP_INCR, s->prev_rev + 1, last, now_unix_s(),
                             compress_suffix(s->cfg.compression), 0, name, sizeof name);
    if (rc) return rc;
    IoReader *payload = NULL;
    rc = delta_writer_payload(s->spool, &payload);
    uint64_t stored = 0;
    if (!rc) rc = fullsnap_store_stream(s->cfg.store, name, s->cfg.compression, payload, &stored);
    io_reader_free(payload);
    if (rc) {
        /* the spool was closed for the payload; keep the events by reopening the watch from
         * the last stored revision on the next attempt */
        delta_writer_reset(s->spool);
        etcd_watch_close(s->watch);
        s->watch = NULL;
        return err_wrap(rc, "delta snapshot %s", name);
    }
    log_info("delta snapshot %s stored: %zu events, revisions %lld-%lld, %llu bytes", name, n,
             (long long)(s->prev_rev + 1), (long long)last, (unsigned long long)stored);
    s->prev_rev = last;
    return delta_writer_reset(s->spool);
}

/* Appends a watch response's events, checking contiguity. ERR_GAP on a hole. */
static int handle_events(Snapshotter *s, const EtcdWatchResponse *r) {
    int64_t now_ns = now_unix_ns();
    for (size_t i = 0; i < r->n_events; i++) {
        int64_t rev = r->events[i].kv.mod_revision;
        /* the same revision continues only inside the delta being collected */
        int same_rev = rev == s->next_expected - 1 && delta_writer_events(s->spool) > 0 &&
                       rev == delta_writer_last_revision(s->spool);
        if (rev != s->next_expected && !same_rev) {
            return err_set(ERR_GAP, "watch delivered revision %lld, expected %lld", (long long)rev,
                           (long long)s->next_expected);
        }
        s->next_expected = rev + 1;
        int rc = delta_writer_append(s->spool, &r->events[i], now_ns);
        if (rc) return rc;
    }
    return 0;
}

static int delta_due(const Snapshotter *s) {
    if (delta_writer_events(s->spool) == 0) return 0;
    if (delta_writer_bytes(s->spool) >= s->cfg.delta_memory_limit) return 1;
    if (s->cfg.max_changes && delta_writer_events(s->spool) >= s->cfg.max_changes) return 1;
    return 0;
}

/* Reads one watch response (or times out) and acts on it. */
static int pump_watch(Snapshotter *s, int timeout_ms) {
    EtcdWatchResponse r;
    int got = 0;
    int rc = etcd_watch_next(s->watch, timeout_ms, &r, &got);
    if (rc) return rc;
    if (!got) return 0;
    if (r.compact_revision > 0) {
        return err_set(ERR_COMPACTED, "watch from revision %lld: compacted at %lld",
                       (long long)(s->prev_rev + 1), (long long)r.compact_revision);
    }
    if (r.canceled) return err_set(ERR_ETCD, "watch canceled: %s", r.cancel_reason);
    rc = handle_events(s, &r);
    if (rc) return rc;
    if (delta_due(s)) return take_delta(s);
    return 0;
}

/* On stop: read events up to the revision current now, then store them as a last delta. */
static int final_delta(Snapshotter *s) {
    if (!s->watch) return 0;
    int64_t target = 0;
    if (etcd_get_revision(s->client, &target) == 0) {
        int64_t deadline = now_mono_ms() + s->cfg.stop_drain_ms;
        while (s->next_expected <= target && now_mono_ms() < deadline) {
            int rc = pump_watch(s, 200);
            if (rc) {
                log_warn("draining the watch before stop: %s", err_msg());
                break;
            }
        }
    }
    return take_delta(s);
}

/* One step of the loop: whatever is due now. */
static int step(Snapshotter *s, int recovering) {
    if (recovering) {
        /* a full snapshot only when needed; otherwise re-collect the events since the last
         * stored revision (a compacted revision turns into a full snapshot below) */
        if (s->need_full) return take_full(s);
        return open_watch(s);
    }
    if (s->next_full_s > 0 && now_unix_s() >= s->next_full_s) {
        schedule_next_full(s);
        return take_full(s);
    }
    if (s->watch && now_mono_ms() >= s->next_delta_ms) return take_delta(s);
    if (s->watch) {
        int64_t wait = s->next_delta_ms - now_mono_ms();
        if (wait > 200) wait = 200;
        if (wait < 0) wait = 0;
        return pump_watch(s, (int)wait);
    }
    if (deltas_enabled(s)) return open_watch(s);
    usleep(200 * 1000);
    return 0;
}

/* Garbage collection between snapshots; while snapshots are failing it deletes nothing. */
static void maybe_gc(Snapshotter *s, int failing) {
    if (s->cfg.gc_period_ms <= 1000 || now_mono_ms() < s->next_gc_ms) return;
    s->next_gc_ms = now_mono_ms() + s->cfg.gc_period_ms;
    GcStats st;
    int rc = gc_run(s->cfg.store, s->cfg.gc_policy, s->cfg.max_backups, s->cfg.delta_retention_s,
                    now_unix_s(), failing, &st);
    if (rc)
        log_error("garbage collection: %s", err_msg());
    else if (st.full_removed || st.incr_removed)
        log_info("garbage collection removed %zu full and %zu delta snapshots", st.full_removed,
                 st.incr_removed);
}

int snapshotter_run(Snapshotter *s, volatile sig_atomic_t *stop) {
    s->next_gc_ms = now_mono_ms() + s->cfg.gc_period_ms; /* first run after one period */
    log_info("taking the initial full snapshot");
    int rc = take_full(s);
    if (rc) return rc;
    schedule_next_full(s);
    int64_t backoff = s->cfg.backoff_initial_ms;
    int64_t retry_at = 0; /* monotonic ms; 0 = not recovering from a failure */
    while (!*stop) {
        if (retry_at && now_mono_ms() < retry_at) {
            maybe_gc(s, 1);
            usleep(100 * 1000);
            continue;
        }
        int recovering = retry_at != 0;
        maybe_gc(s, recovering);
        rc = step(s, recovering);
        if (rc == ERR_COMPACTED || rc == ERR_GAP) {
            log_warn("%s: taking a full snapshot instead of a delta with a hole", err_msg());
            s->need_full = 1;
            rc = take_full(s);
        }
        if (rc) {
            log_error("%s; retrying in %.1fs", err_msg(), (double)backoff / 1000.0);
            etcd_watch_close(s->watch);
            s->watch = NULL;
            retry_at = now_mono_ms() + backoff;
            backoff = backoff * 2 > s->cfg.backoff_max_ms ? s->cfg.backoff_max_ms : backoff * 2;
        } else if (recovering) {
            log_info("recovered: snapshots resume from revision %lld", (long long)s->prev_rev);
            retry_at = 0;
            backoff = s->cfg.backoff_initial_ms;
        }
    }
    if (retry_at) return 0;
    rc = final_delta(s);
    if (rc) log_error("last delta before stop: %s", err_msg());
    return rc;
}
