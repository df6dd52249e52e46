/* secondary_sync: see secondary_sync.h. One thread; it waits on a condition variable
 * (CLOCK_MONOTONIC) between runs, so a stop wakes it at once; a copy in progress sees the stop
 * through the copier's atomic flag. */
#include "secondary_sync.h"
#include "../backup/copier.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../server/metrics.h"
#include "../common/thread.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct SecondarySync {
    SecondarySyncConfig cfg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int stop; /* also the copier's stop flag */
};

static Metric *m_last_ok, *m_failures, *m_objects, *m_bytes, *m_duration, *m_gc;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static Metric *reg(MetricType type, const char *name, const char *help, const char *const *labels) {
    MetricOpts mo = {.name = name, .help = help, .labels = labels};
    return metrics_find_or_register(metrics_default(), type, &mo);
}

static void register_once(void) {
    static const char *const succeeded[] = {"succeeded", NULL};
    static const char *const kind_succeeded[] = {"kind", "succeeded", NULL};
    m_last_ok = reg(METRIC_GAUGE, "etcdbr_secondary_sync_last_success_timestamp_seconds",
                    "Unix time of the last backup sync to the secondary store that copied "
                    "every missing object (0: none yet).",
                    NULL);
    m_failures = reg(METRIC_COUNTER, "etcdbr_secondary_sync_failures_total",
                     "Backup syncs to the secondary store that failed.", NULL);
    m_objects = reg(METRIC_COUNTER, "etcdbr_secondary_sync_copied_objects_total",
                    "Snapshot objects copied to the secondary store.", NULL);
    m_bytes = reg(METRIC_COUNTER, "etcdbr_secondary_sync_copied_bytes_total",
                  "Bytes of snapshot objects copied to the secondary store.", NULL);
    m_duration = reg(METRIC_HISTOGRAM, "etcdbr_secondary_sync_duration_seconds",
                     "Duration of a backup sync to the secondary store, seconds.", succeeded);
    m_gc = reg(METRIC_COUNTER, "etcdbr_secondary_snapshot_gc_total",
               "Snapshots removed (succeeded=true) or not removable (false) by garbage "
               "collection in the secondary store.",
               kind_succeeded);
    static const char *const kinds[] = {"Full", "Incr", NULL};
    static const char *const tf[] = {"false", "true", NULL};
    static const char *const *const sets[] = {kinds, tf, NULL};
    static const char *const *const tf_set[] = {tf, NULL};
    if (m_gc) metrics_touch_all(m_gc, sets);
    if (m_duration) metrics_touch_all(m_duration, tf_set);
    if (m_last_ok) metrics_touch(m_last_ok, NULL);
    if (m_failures) metrics_touch(m_failures, NULL);
    if (m_objects) metrics_touch(m_objects, NULL);
    if (m_bytes) metrics_touch(m_bytes, NULL);
}

void secondary_sync_register_metrics(void) {
    pthread_once(&metrics_once, register_once);
}

/* One copy; 0 or its error (logged). */
static int sync_once(SecondarySync *s) {
    CopierConfig cc = {
        .source = s->cfg.primary,
        .dest = s->cfg.secondary,
        .max_backups = -1,
        .max_backup_age_days = -1,
        .workers = SECONDARY_SYNC_WORKERS,
        .stop = &s->stop,
    };
    CopierResult res;
    int rc = copier_run(&cc, &res);
    const char *lv[] = {rc ? "false" : "true"};
    if (rc == ERR_CANCELED) return rc; /* stopping: neither a failure nor a success */
    metrics_histogram_observe(m_duration, lv, res.seconds);
    metrics_counter_add(m_objects, NULL, (double)res.copied);
    metrics_counter_add(m_bytes, NULL, (double)res.bytes);
    if (rc) {
        metrics_counter_inc(m_failures, NULL);
        log_error("secondary backup sync to %s failed: %s", store_describe(s->cfg.secondary),
                  err_msg());
        return rc;
    }
    metrics_gauge_set(m_last_ok, NULL, (double)now_unix_s());
    log_info("secondary backup sync to %s: %zu objects copied (%llu bytes), %zu already there, "
             "%.3fs",
             store_describe(s->cfg.secondary), res.copied, (unsigned long long)res.bytes,
             res.present, res.seconds);
    return 0;
}

/* Garbage collection in the secondary store over the snapshotter's history only. */
static void gc_once(SecondarySync *s, int sync_failed) {
    SnapshotterStatus st;
    snapshotter_status(s->cfg.snap, &st);
    if (!st.history[0]) {
        log_info("secondary store GC: skipped, no backup history decided yet");
        return;
    }
    /* untagged objects there may be anyone's (a Go tool writing into the secondary too): even
     * when our history adopted the primary's untagged objects, their copies are left alone */
    GcScope scope = {st.history, 0};
    GcStats gs;
    int rc = gc_run_scoped(s->cfg.secondary, &scope, s->cfg.gc_policy, s->cfg.max_backups,
                           s->cfg.delta_retention_s, now_unix_s(), sync_failed || st.failing, &gs);
    const char *fo[] = {"Full", "true"}, *io[] = {"Incr", "true"};
    const char *ff[] = {"Full", "false"}, *iff[] = {"Incr", "false"};
    metrics_counter_add(m_gc, fo, (double)gs.full_removed);
    metrics_counter_add(m_gc, io, (double)gs.incr_removed);
    metrics_counter_add(m_gc, ff, (double)gs.full_failed);
    metrics_counter_add(m_gc, iff, (double)gs.incr_failed);
    if (rc)
        log_error("secondary store %s garbage collection: %s", store_describe(s->cfg.secondary),
                  err_msg());
    else if (!gs.skipped)
        log_info("secondary store %s garbage collection (history %s): removed %zu full "
                 "snapshots and %zu deltas",
                 store_describe(s->cfg.secondary), st.history, gs.full_removed, gs.incr_removed);
}

static void *sync_main(void *arg) {
    SecondarySync *s = arg;
    int gc_on = s->cfg.gc_period_ms > 1000;
    int64_t next_copy = now_mono_ms();
    int64_t next_gc = now_mono_ms() + s->cfg.gc_period_ms;
    int failed = 0;
    while (!atomic_load(&s->stop)) {
        int64_t now = now_mono_ms();
        if (now >= next_copy) {
            int rc = sync_once(s);
            if (rc == ERR_CANCELED) break;
            failed = rc != 0;
            next_copy = now_mono_ms() + s->cfg.period_ms;
        }
        now = now_mono_ms();
        if (gc_on && now >= next_gc && !atomic_load(&s->stop)) {
            gc_once(s, failed);
            next_gc = now_mono_ms() + s->cfg.gc_period_ms;
        }
        int64_t wake = gc_on && next_gc < next_copy ? next_gc : next_copy;
        struct timespec ts = {(time_t)(wake / 1000), (long)(wake % 1000) * 1000000L};
        pthread_mutex_lock(&s->mu);
        if (!atomic_load(&s->stop)) pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

int secondary_sync_start(const SecondarySyncConfig *cfg, SecondarySync **out) {
    *out = NULL;
    if (!cfg || !cfg->primary || !cfg->secondary || !cfg->snap || cfg->period_ms < 1000)
        return err_set(ERR_INVALID, "secondary sync: bad configuration");
    secondary_sync_register_metrics();
    SecondarySync *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "secondary sync: out of memory");
    s->cfg = *cfg;
    atomic_init(&s->stop, 0);
    pthread_mutex_init(&s->mu, NULL);
    cond_init_monotonic(&s->cv);
    int prc = thread_start_quiet(&s->thread, sync_main, s);
    if (prc != 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return err_set(ERR_IO, "secondary sync: cannot start its thread");
    }
    log_info("secondary backup sync to %s started: every %.0fs", store_describe(cfg->secondary),
             (double)cfg->period_ms / 1000.0);
    *out = s;
    return 0;
}

void secondary_sync_stop(SecondarySync *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    log_info("secondary backup sync stopped");
}
