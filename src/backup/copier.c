/* copier: see copier.h. The workers take objects from one shared queue (an index under a mutex);
 * each streams one object from the source store into the destination store and checks it.
 * Failures are collected under the same mutex and reported together at the end. */
#include "copier.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/progress.h"
#include "../common/timeutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FINAL_SUFFIX ".final"
#define MAX_NAMED_FAILURES 5

typedef struct {
    size_t full;  /* index of the full snapshot */
    size_t first; /* its deltas: delta_idx[first .. first + n_deltas) */
    size_t n_deltas;
} Backup;

/* Newest created_on first; ties: the higher index (newer by revision) first. */
static int backup_cmp(const void *a, const void *b, void *snaps) {
    const Snapshot *s = snaps;
    const Backup *x = a, *y = b;
    int64_t cx = s[x->full].created_on, cy = s[y->full].created_on;
    if (cx != cy) return cx > cy ? -1 : 1;
    return x->full > y->full ? -1 : (x->full < y->full ? 1 : 0);
}

/* A small insertion sort with context (backups are few; qsort_r is not in C17). */
static void sort_backups(Backup *b, size_t n, const Snapshot *snaps) {
    for (size_t i = 1; i < n; i++) {
        Backup t = b[i];
        size_t j = i;
        while (j > 0 && backup_cmp(&t, &b[j - 1], (void *)snaps) < 0) {
            b[j] = b[j - 1];
            j--;
        }
        b[j] = t;
    }
}

int copier_select(const Snapshot *snaps, size_t n, int max_backups, int max_age_days, int64_t now,
                  size_t *order, size_t *n_order, size_t *n_backups) {
    if (n_order) *n_order = 0;
    if (n_backups) *n_backups = 0;
    if ((n && (!snaps || !order)) || !n_order || max_backups < -1 || max_age_days < -1)
        return err_set(ERR_INVALID, "copier_select: bad arguments");
    if (n == 0) return 0;
    Backup *backups = malloc(n * sizeof *backups);
    size_t *deltas = malloc(n * sizeof *deltas); /* newest first while walking */
    if (!backups || !deltas) {
        free(backups);
        free(deltas);
        return err_set(ERR_NOMEM, "copy: out of memory");
    }
    size_t nb = 0, nd = 0, pending_from = 0;
    for (size_t i = n; i-- > 0;) {
        if (snaps[i].is_chunk) continue;
        if (snaps[i].kind == SNAP_INCR) {
            deltas[nd++] = i;
            continue;
        }
        backups[nb++] = (Backup){.full = i, .first = pending_from, .n_deltas = nd - pending_from};
        pending_from = nd;
    }
    /* deltas[pending_from..nd) are older than the oldest full: no backup takes them */
    sort_backups(backups, nb, snaps);
    size_t kept = 0, k = 0;
    for (size_t b = 0; b < nb; b++) {
        if (max_backups >= 0 && kept >= (size_t)max_backups) break;
        if (max_age_days >= 0 &&
            snaps[backups[b].full].created_on < now - (int64_t)max_age_days * 86400)
            continue;
        kept++;
        order[k++] = backups[b].full;
        /* the walk collected them newest first: ascending is the reverse */
        for (size_t d = backups[b].n_deltas; d-- > 0;)
            order[k++] = deltas[backups[b].first + d];
    }
    *n_order = k;
    if (n_backups) *n_backups = kept;
    free(backups);
    free(deltas);
    return 0;
}

/* Length of name without a trailing ".final". */
static size_t stem_len(const char *name) {
    size_t l = strlen(name), f = strlen(FINAL_SUFFIX);
    if (l > f && strcmp(name + l - f, FINAL_SUFFIX) == 0) return l - f;
    return l;
}

int copier_dest_name(const Snapshot *s, char *out, size_t cap) {
    size_t l = stem_len(s->snap_name);
    if (l == 0 || l >= cap || s->is_chunk)
        return err_set(ERR_INVALID, "copy: no destination name for \"%s\"", s->snap_name);
    memcpy(out, s->snap_name, l);
    out[l] = '\0';
    return 0;
}

typedef struct {
    const char *name;
    size_t len;
    int64_t size; /* as listed, -1 if unknown */
    const char *key;
} NameRef;

static int nameref_cmp(const void *a, const void *b) {
    const NameRef *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, m);
    if (c) return c;
    return x->len < y->len ? -1 : (x->len > y->len ? 1 : 0);
}

int copier_plan(const Snapshot *src, const size_t *order, size_t n_order, const Snapshot *dst,
                size_t n_dst, uint8_t *need) {
    NameRef *names = malloc((n_dst ? n_dst : 1) * sizeof *names);
    if (!names) return err_set(ERR_NOMEM, "copy: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n_dst; i++) {
        if (dst[i].is_chunk) continue;
        names[k++] =
            (NameRef){dst[i].snap_name, stem_len(dst[i].snap_name), dst[i].size, dst[i].key};
    }
    qsort(names, k, sizeof *names, nameref_cmp);
    for (size_t j = 0; j < n_order; j++) {
        const Snapshot *s = &src[order[j]];
        NameRef key = {s->snap_name, stem_len(s->snap_name), s->size, s->key};
        const NameRef *there = k ? bsearch(&key, names, k, sizeof *names, nameref_cmp) : NULL;
        need[j] = !s->is_chunk && !there;
        /* a copy keeps the stored bytes, so the same name with another size is another object:
         * it stays (nothing in the destination is replaced), but the operator must know the
         * destination does not hold the source's */
        if (!s->is_chunk && there && s->size >= 0 && there->size >= 0 && s->size != there->size)
            log_warn("copy: %s is already in the destination as %s, but with %lld bytes where the "
                     "source's has %lld: another object under the same name; it is kept, not "
                     "replaced, so the destination does not hold the source's",
                     s->key, there->key, (long long)there->size, (long long)s->size);
    }
    free(names);
    return 0;
}

/* ---------- running a copy ---------- */

typedef struct {
    const CopierConfig *cfg;
    const Snapshot *src; /* the source listing (borrowed) */
    const size_t *jobs;  /* indices into src of the objects to copy */
    size_t n_jobs;
    pthread_mutex_t mu;
    size_t next;            /* next job (mu) */
    size_t done, copied;    /* finished / copied jobs (mu) */
    uint64_t bytes_done;    /* of finished objects (mu) */
    _Atomic uint64_t bytes; /* all bytes so far, in-flight included (progress) */
    Progress *progress;
    size_t failed;       /* (mu) */
    size_t vanished;     /* removed from the source after the listing (mu) */
    int first_rc;        /* (mu) */
    char failures[2048]; /* the first few failures (mu) */
} Run;

typedef struct {
    Run *run;
    uint64_t last; /* bytes of this object already added to run->bytes */
} Tick;

static int tick(void *ctx, uint64_t n) {
    Tick *t = ctx;
    atomic_fetch_add(&t->run->bytes, n - t->last);
    t->last = n;
    progress_set(t->run->progress, atomic_load(&t->run->bytes));
    if (t->run->cfg->stop && atomic_load(t->run->cfg->stop))
        return err_set(ERR_CANCELED, "copy stopped");
    return 0;
}

/* Copies one object; 0 with *bytes, or an error with the message set. */
static int copy_one(Run *run, const Snapshot *s, uint64_t *bytes) {
    const CopierConfig *cfg = run->cfg;
    char name[sizeof s->snap_name];
    IoReader *r = NULL;
    StoreWriter *w = NULL;
    Tick t = {run, 0};
    uint64_t copied = 0;
    int rc = copier_dest_name(s, name, sizeof name);
    if (rc) return rc;
    rc = store_open_read(cfg->source, s, &r);
    if (rc == ERR_NOT_FOUND) /* removed since the listing (the source's garbage collection) */
        return err_set(ERR_NOT_FOUND, "%s is not in %s any more (removed since it was listed)",
                       s->key, store_describe(cfg->source));
    if (rc) return err_wrap(rc, "reading %s from %s", s->key, store_describe(cfg->source));
    /* the tag before the object, as the snapshotter does: an object of ours is never untagged
     * (its history's record was written before the workers started) */
    if (s->history[0] && (rc = store_history_tag(cfg->dest, s->history, name))) goto done;
    rc = store_open_write(cfg->dest, name, &w);
    if (rc) goto done;
    rc = io_copy_tick(r, store_writer_io(w), &copied, tick, &t);
    if (rc) {
        if (rc != ERR_CANCELED)
            err_wrap(rc, "copying %s from %s", s->key, store_describe(cfg->source));
        goto done;
    }
    if (s->size >= 0 && copied != (uint64_t)s->size) {
        rc = err_set(ERR_CORRUPT, "%s in %s: read %llu bytes, the listing says %lld", s->key,
                     store_describe(cfg->source), (unsigned long long)copied, (long long)s->size);
        goto done;
    }
    rc = io_finish(store_writer_io(w));
    if (rc) goto done;
    rc = store_writer_commit(w);
    w = NULL;
    if (rc) goto done;
    Snapshot d;
    int64_t size = -1;
    rc = store_snapshot_for_name(cfg->dest, name, &d);
    if (!rc) rc = store_snapshot_stat(cfg->dest, &d, &size);
    if (rc) {
        err_wrap(rc, "checking the copy %s in %s", name, store_describe(cfg->dest));
        goto done;
    }
    if ((uint64_t)size != copied)
        rc = err_set(ERR_CORRUPT,
                     "the copy %s in %s has %lld bytes, %llu were written: it is left there "
                     "for inspection, nothing in the destination is ever removed",
                     d.key, store_describe(cfg->dest), (long long)size, (unsigned long long)copied);
done:
    store_writer_abort(w);
    io_reader_free(r);
    if (rc) atomic_fetch_sub(&run->bytes, t.last);
    *bytes = copied;
    return rc;
}

static void *worker(void *arg) {
    Run *run = arg;
    for (;;) {
        pthread_mutex_lock(&run->mu);
        int stopping = run->cfg->stop && atomic_load(run->cfg->stop);
        if (run->next >= run->n_jobs || stopping) {
            pthread_mutex_unlock(&run->mu);
            return NULL;
        }
        const Snapshot *s = &run->src[run->jobs[run->next++]];
        pthread_mutex_unlock(&run->mu);
        uint64_t bytes = 0;
        int rc = copy_one(run, s, &bytes);
        if (rc == ERR_NOT_FOUND) /* gone from the source: nothing to copy, not a failure */
            log_info("not copied: %s", err_msg());
        else if (rc && rc != ERR_CANCELED)
            log_error("copy of %s failed: %s", s->snap_name, err_msg());
        else if (!rc && run->cfg->progress) /* the progress line counts them */
            log_debug("copied %s (%llu bytes) to %s", s->snap_name, (unsigned long long)bytes,
                      store_describe(run->cfg->dest));
        else if (!rc)
            log_info("copied %s (%llu bytes) to %s", s->snap_name, (unsigned long long)bytes,
                     store_describe(run->cfg->dest));
        pthread_mutex_lock(&run->mu);
        run->done++;
        if (!rc) {
            run->copied++;
            run->bytes_done += bytes;
        } else if (rc == ERR_NOT_FOUND) {
            run->vanished++;
        } else {
            if (!run->first_rc || run->first_rc == ERR_CANCELED) run->first_rc = rc;
            if (rc != ERR_CANCELED) {
                run->failed++;
                size_t l = strlen(run->failures);
                if (run->failed <= MAX_NAMED_FAILURES && l + 8 < sizeof run->failures)
                    snprintf(run->failures + l, sizeof run->failures - l, "%s%s", l ? "; " : "",
                             err_msg());
            }
        }
        progress_set_items(run->progress, run->done, run->n_jobs);
        pthread_mutex_unlock(&run->mu);
    }
}

/* Sleeps ms in short steps; 1 when stopped. */
static int sleep_or_stop(const CopierConfig *cfg, int64_t ms) {
    int64_t end = now_mono_ms() + ms;
    while (now_mono_ms() < end) {
        if (cfg->stop && atomic_load(cfg->stop)) return 1;
        int64_t left = end - now_mono_ms();
        usleep((useconds_t)((left > 100 ? 100 : (left > 0 ? left : 0)) * 1000));
    }
    return cfg->stop && atomic_load(cfg->stop);
}

/* 1 when one of the COPIER_FINAL_AMONG newest full snapshots is final. */
static int has_final(const Snapshot *v, size_t n) {
    int fulls = 0;
    for (size_t i = n; i-- > 0 && fulls < COPIER_FINAL_AMONG;) {
        if (v[i].is_chunk || v[i].kind != SNAP_FULL) continue;
        fulls++;
        if (v[i].is_final) return 1;
    }
    return 0;
}

static int wait_final(const CopierConfig *cfg, CopierResult *res) {
    int64_t poll = cfg->wait_final_poll_ms > 0 ? cfg->wait_final_poll_ms : COPIER_FINAL_POLL_MS;
    int64_t start = now_mono_ms();
    log_info("waiting for a final full snapshot in %s (%s)", store_describe(cfg->source),
             cfg->wait_final_timeout_ms > 0 ? "with a timeout" : "no timeout");
    for (;;) {
        Snapshot *v = NULL;
        size_t n = 0;
        int rc = store_list(cfg->source, &v, &n);
        int found = !rc && has_final(v, n);
        free(v);
        if (rc) log_warn("waiting for a final snapshot: %s", err_msg());
        if (found) {
            log_info("a final full snapshot is in %s", store_describe(cfg->source));
            return 0;
        }
        int64_t waited = now_mono_ms() - start;
        if (cfg->wait_final_timeout_ms > 0 && waited >= cfg->wait_final_timeout_ms) {
            log_warn("no final full snapshot appeared in %s within %.1fs: copying what is there",
                     store_describe(cfg->source), (double)waited / 1000.0);
            res->final_wait_timed_out = 1;
            return 0;
        }
        int64_t step = poll;
        if (cfg->wait_final_timeout_ms > 0 && cfg->wait_final_timeout_ms - waited < step)
            step = cfg->wait_final_timeout_ms - waited;
        if (sleep_or_stop(cfg, step))
            return err_set(ERR_CANCELED, "copy stopped while waiting for a final snapshot");
    }
}

/* Writes into the destination the record of every history among the jobs (once each). */
static int put_records(const CopierConfig *cfg, const Snapshot *src, const size_t *jobs,
                       size_t n_jobs, const HistoryRecord *recs, size_t n_recs) {
    for (size_t j = 0; j < n_jobs; j++) {
        const char *h = src[jobs[j]].history;
        if (!h[0]) continue;
        int seen = 0;
        for (size_t k = 0; k < j && !seen; k++)
            seen = strcmp(src[jobs[k]].history, h) == 0;
        if (seen) continue;
        const HistoryRecord *r = history_find(recs, n_recs, h);
        if (!r) {
            log_warn("copy: history %s has no readable record in %s: its objects are copied "
                     "with their tags only",
                     h, store_describe(cfg->source));
            continue;
        }
        int rc = store_history_put_record(cfg->dest, r);
        if (rc) return rc;
    }
    return 0;
}

int copier_run(const CopierConfig *cfg, CopierResult *out) {
    CopierResult res;
    memset(&res, 0, sizeof res);
    int64_t t0 = now_mono_ms();
    Snapshot *src = NULL, *dst = NULL;
    HistoryRecord *recs = NULL;
    size_t n_src = 0, n_dst = 0, n_recs = 0, n_order = 0;
    size_t *order = NULL, *jobs = NULL;
    uint8_t *need = NULL;
    pthread_t *threads = NULL;
    size_t started = 0;
    Run run;
    memset(&run, 0, sizeof run);
    pthread_mutex_init(&run.mu, NULL);
    int rc = 0;
    if (!cfg || !cfg->source || !cfg->dest || cfg->workers < 1 || cfg->max_backups < -1 ||
        cfg->max_backup_age_days < -1) {
        rc = err_set(ERR_INVALID, "copy: bad configuration");
        goto done;
    }
    if (cfg->wait_final && (rc = wait_final(cfg, &res))) goto done;
    rc = store_list_ex(cfg->source, 0, &src, &n_src, &recs, &n_recs);
    if (rc) {
        err_wrap(rc, "listing the source %s", store_describe(cfg->source));
        goto done;
    }
    rc = store_list_ex(cfg->dest, 1, &dst, &n_dst, NULL, NULL);
    if (rc) {
        err_wrap(rc, "listing the destination %s", store_describe(cfg->dest));
        goto done;
    }
    order = malloc((n_src ? n_src : 1) * sizeof *order);
    jobs = malloc((n_src ? n_src : 1) * sizeof *jobs);
    need = malloc(n_src ? n_src : 1);
    if (!order || !jobs || !need) {
        rc = err_set(ERR_NOMEM, "copy: out of memory");
        goto done;
    }
    rc = copier_select(src, n_src, cfg->max_backups, cfg->max_backup_age_days, now_unix_s(), order,
                       &n_order, &res.backups);
    if (!rc) rc = copier_plan(src, order, n_order, dst, n_dst, need);
    if (rc) goto done;
    res.selected = n_order;
    uint64_t total = 0;
    size_t unsized = 0; /* objects the source listed without a size */
    for (size_t k = 0; k < n_order; k++) {
        if (!need[k]) {
            res.present++;
            continue;
        }
        jobs[run.n_jobs++] = order[k];
        if (src[order[k]].size >= 0)
            total += (uint64_t)src[order[k]].size;
        else
            unsized++;
    }
    log_info("copy from %s to %s: %zu backups, %zu objects, %zu already there, %zu to copy "
             "(%.1f MiB)",
             store_describe(cfg->source), store_describe(cfg->dest), res.backups, res.selected,
             res.present, run.n_jobs, (double)total / 1048576.0);
    if (run.n_jobs == 0) goto done;
    rc = put_records(cfg, src, jobs, run.n_jobs, recs, n_recs);
    if (rc) goto done;
    run.cfg = cfg;
    run.src = src;
    run.jobs = jobs;
    atomic_init(&run.bytes, 0);
    if (cfg->progress) {
        ProgressOptions po = {.what = "copying",
                              .total = total,
                              .total_kind = unsized ? PROGRESS_TOTAL_UNKNOWN : PROGRESS_TOTAL_EXACT,
                              .counts_bytes = 1};
        run.progress = progress_start_opts(&po);
        progress_set_items(run.progress, 0, run.n_jobs);
    }
    size_t nw = (size_t)cfg->workers < run.n_jobs ? (size_t)cfg->workers : run.n_jobs;
    threads = calloc(nw, sizeof *threads);
    if (!threads) {
        rc = err_set(ERR_NOMEM, "copy: out of memory");
        goto finish;
    }
    for (; started < nw; started++)
        if (pthread_create(&threads[started], NULL, worker, &run) != 0) break;
    if (started == 0) worker(&run); /* no thread: copy on this one */
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
finish:
    progress_finish(run.progress);
    run.progress = NULL;
    res.copied = run.copied;
    res.failed = run.failed;
    res.vanished = run.vanished;
    res.bytes = run.bytes_done;
    if (!rc && run.first_rc) {
        if (run.failed)
            rc = err_set(run.first_rc, "%zu of %zu objects failed to copy: %s%s", run.failed,
                         run.n_jobs, run.failures, run.failed > MAX_NAMED_FAILURES ? "; ..." : "");
        else
            rc = err_set(ERR_CANCELED, "copy stopped after %zu of %zu objects", run.copied,
                         run.n_jobs);
    } else if (!rc && run.done < run.n_jobs) {
        rc = err_set(ERR_CANCELED, "copy stopped after %zu of %zu objects", run.copied, run.n_jobs);
    }
done:
    res.seconds = (double)(now_mono_ms() - t0) / 1000.0;
    if (out) *out = res;
    pthread_mutex_destroy(&run.mu);
    FREE_ALL(threads, need, jobs, order, recs, dst, src);
    return rc;
}
