/* progress: see progress.h. The reporter thread waits on a condition variable (CLOCK_MONOTONIC)
 * so progress_finish wakes it at once. */
#include "progress.h"
#include "log.h"
#include "timeutil.h"
#include "thread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct Progress {
    char *what;
    uint64_t total;
    int counts_bytes;
    int tty;
    int drawn; /* a terminal line is on screen (reporter thread only until joined) */
    int64_t start_ms;
    _Atomic uint64_t done;
    _Atomic uint64_t items_done, items_total; /* progress_set_items; total 0 = none */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop; /* under mu */
    pthread_t thread;
};

static void format_duration(char *buf, size_t cap, int64_t s) {
    if (s < 60)
        snprintf(buf, cap, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, cap, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else
        snprintf(buf, cap, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

void progress_format(char *buf, size_t cap, const char *what, uint64_t done, uint64_t total,
                     int counts_bytes, int64_t elapsed_ms) {
    char took[32];
    format_duration(took, sizeof took, elapsed_ms / 1000);
    if (!counts_bytes) {
        snprintf(buf, cap, "%s: %s so far", what, took);
        return;
    }
    const double mib = 1048576.0;
    double secs = (double)elapsed_ms / 1000.0;
    double rate = secs > 0 ? (double)done / secs : 0.0; /* bytes/s, average since the start */
    if (total == 0) {
        snprintf(buf, cap, "%s: %.1f MiB, %.1f MiB/s, %s so far", what, (double)done / mib,
                 rate / mib, took);
        return;
    }
    if (done >= total) { /* the total was approximate (the db grew): no ETA to give */
        snprintf(buf, cap, "%s: %.1f MiB of ~%.1f MiB (100%%), %.1f MiB/s", what,
                 (double)done / mib, (double)total / mib, rate / mib);
        return;
    }
    char eta[32] = "unknown";
    if (rate > 0) format_duration(eta, sizeof eta, (int64_t)((double)(total - done) / rate + 0.5));
    snprintf(buf, cap, "%s: %.1f MiB of ~%.1f MiB (%d%%), %.1f MiB/s, ETA %s", what,
             (double)done / mib, (double)total / mib, (int)((double)done * 100.0 / (double)total),
             rate / mib, eta);
}

static void report(Progress *p) {
    char line[512];
    progress_format(line, sizeof line, p->what, atomic_load(&p->done), p->total, p->counts_bytes,
                    now_mono_ms() - p->start_ms);
    uint64_t it = atomic_load(&p->items_total);
    if (it) {
        size_t l = strlen(line);
        snprintf(line + l, sizeof line - l, ", %llu of %llu objects",
                 (unsigned long long)atomic_load(&p->items_done), (unsigned long long)it);
    }
    if (p->tty) {
        /* \r and erase to the end of the line: the line is rewritten in place */
        fprintf(stderr, "\r%s\033[K", line);
        fflush(stderr);
        p->drawn = 1;
    } else {
        log_info("%s", line);
    }
}

static void *reporter(void *arg) {
    Progress *p = arg;
    int64_t every = p->tty ? PROGRESS_TTY_EVERY_MS : PROGRESS_LOG_EVERY_MS;
    int64_t next = p->start_ms + every;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts = {(time_t)(next / 1000), (long)(next % 1000) * 1000000L};
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->stop) break;
        int64_t now = now_mono_ms();
        if (now < next) continue;
        pthread_mutex_unlock(&p->mu);
        report(p);
        pthread_mutex_lock(&p->mu);
        next = now + every;
    }
    pthread_mutex_unlock(&p->mu);
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    return NULL;
}

Progress *progress_start(const char *what, uint64_t total, int counts_bytes) {
    Progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->what = strdup(what);
    if (!p->what) {
        free(p);
        return NULL;
    }
    p->total = total;
    p->counts_bytes = counts_bytes;
    p->tty = isatty(STDERR_FILENO);
    p->start_ms = now_mono_ms();
    atomic_init(&p->done, 0);
    atomic_init(&p->items_done, 0);
    atomic_init(&p->items_total, 0);
    pthread_mutex_init(&p->mu, NULL);
    cond_init_monotonic(&p->cv);
    if (pthread_create(&p->thread, NULL, reporter, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        free(p->what);
        free(p);
        return NULL;
    }
    return p;
}

void progress_set(Progress *p, uint64_t done) {
    if (p) atomic_store_explicit(&p->done, done, memory_order_relaxed);
}

void progress_set_items(Progress *p, uint64_t done, uint64_t total) {
    if (!p) return;
    atomic_store_explicit(&p->items_done, done, memory_order_relaxed);
    atomic_store_explicit(&p->items_total, total, memory_order_relaxed);
}

void progress_finish(Progress *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->what);
    free(p);
}
