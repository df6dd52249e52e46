/* progress: see progress.h. The reporter thread waits on a condition variable (CLOCK_MONOTONIC)
 * so progress_finish wakes it at once; each report is due by p's own clock (progress_poll), so a
 * test drives the cadence with a clock of its own and no thread. */
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
    ProgressTotalKind total_kind;
    int counts_bytes;
    int tty;
    int64_t every_ms;
    int64_t (*now_ms)(void *ctx);
    void *clock_ctx;
    void (*emit)(void *ctx, const char *line, int tty);
    void *emit_ctx;
    int64_t start_ms;
    _Atomic uint64_t done;
    _Atomic uint64_t items_done, items_total; /* progress_set_items; total 0 = none */
    pthread_mutex_t mu;                       /* the fields below, and every report */
    pthread_cond_t cv;
    int64_t next_ms; /* when the next report is due */
    int stop, ended, drawn;
    int has_thread;
    pthread_t thread;
};

int64_t progress_log_every_ms(void) {
    static _Atomic int64_t every;
    int64_t e = atomic_load(&every);
    if (e) return e;
    const char *s = getenv("ETCDBR_PROGRESS_EVERY_MS");
    long long v = s && *s ? strtoll(s, NULL, 10) : 0;
    e = v >= 10 && v <= 600000 ? v : PROGRESS_LOG_EVERY_MS;
    atomic_store(&every, e);
    return e;
}

void progress_format_bytes(char *buf, size_t cap, uint64_t bytes) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1024.0;
    size_t u = 0;
    /* 1023.96 MiB would print as "1024.0 MiB": move up once it rounds to 1024.0 */
    while (v >= 1023.95 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", v, units[u]);
}

static void format_duration(char *buf, size_t cap, int64_t s) {
    if (s < 60)
        snprintf(buf, cap, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, cap, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else
        snprintf(buf, cap, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

/* "<done> of <total>" (or "<done>" without a total) into buf. */
static void format_amount(char *buf, size_t cap, const ProgressSample *s) {
    char done[32], total[32];
    progress_format_bytes(done, sizeof done, s->done);
    progress_format_bytes(total, sizeof total, s->total);
    switch (s->total_kind) {
    case PROGRESS_TOTAL_EXACT:
        snprintf(buf, cap, "%s of %s", done, total);
        break;
    case PROGRESS_TOTAL_APPROX:
        snprintf(buf, cap, "%s of ~%s", done, total);
        break;
    case PROGRESS_TOTAL_UNKNOWN:
        snprintf(buf, cap,
                 "%s of an unknown total (the store listed no size for some of the objects)", done);
        break;
    default:
        snprintf(buf, cap, "%s", done);
    }
}

void progress_format_sample(char *buf, size_t cap, const ProgressSample *s) {
    char took[32], amount[160], rate_s[32], items[64] = "";
    int64_t elapsed = s->elapsed_ms > 0 ? s->elapsed_ms : 0;
    format_duration(took, sizeof took, elapsed / 1000);
    if (s->items_total)
        snprintf(items, sizeof items, ", %llu of %llu objects", (unsigned long long)s->items_done,
                 (unsigned long long)s->items_total);
    if (!s->counts_bytes) {
        snprintf(buf, cap, s->final ? "%s: done in %s%s" : "%s: %s so far%s", s->what, took, items);
        return;
    }
    /* bytes/s, the average since the start; none before a millisecond has passed */
    uint64_t rate = elapsed > 0 ? (uint64_t)((double)s->done * 1000.0 / (double)elapsed) : 0;
    progress_format_bytes(rate_s, sizeof rate_s, rate);
    format_amount(amount, sizeof amount, s);
    if (s->final) {
        snprintf(buf, cap, "%s: done, %s in %s, %s/s%s", s->what, amount, took, rate_s, items);
        return;
    }
    int has_total = s->total_kind == PROGRESS_TOTAL_EXACT || s->total_kind == PROGRESS_TOTAL_APPROX;
    if (!has_total || s->total == 0) {
        snprintf(buf, cap, "%s: %s, %s/s, %s so far%s", s->what, amount, rate_s, took, items);
        return;
    }
    if (s->done >= s->total) { /* all done, or past an estimate: no ETA to give */
        snprintf(buf, cap, "%s: %s (100%%), %s/s%s", s->what, amount, rate_s, items);
        return;
    }
    char eta[32] = "unknown";
    if (rate > 0)
        format_duration(eta, sizeof eta, (int64_t)((s->total - s->done + rate / 2) / rate));
    snprintf(buf, cap, "%s: %s (%d%%), %s/s, ETA %s%s", s->what, amount,
             (int)((double)s->done * 100.0 / (double)s->total), rate_s, eta, items);
}

void progress_format(char *buf, size_t cap, const char *what, uint64_t done, uint64_t total,
                     int counts_bytes, int64_t elapsed_ms) {
    ProgressSample s = {.what = what,
                        .done = done,
                        .total = total,
                        .total_kind = total ? PROGRESS_TOTAL_APPROX : PROGRESS_TOTAL_NONE,
                        .counts_bytes = counts_bytes,
                        .elapsed_ms = elapsed_ms};
    progress_format_sample(buf, cap, &s);
}

static int64_t mono_clock(void *ctx) {
    (void)ctx;
    return now_mono_ms();
}

static void default_emit(void *ctx, const char *line, int tty) {
    (void)ctx;
    if (tty)
        log_status(line);
    else
        log_info("%s", line);
}

/* The report of p now (p->mu held). */
static void report(Progress *p, int final) {
    char line[512];
    ProgressSample s = {.what = p->what,
                        .done = atomic_load(&p->done),
                        .total = p->total,
                        .total_kind = p->total_kind,
                        .counts_bytes = p->counts_bytes,
                        .items_done = atomic_load(&p->items_done),
                        .items_total = atomic_load(&p->items_total),
                        .elapsed_ms = p->now_ms(p->clock_ctx) - p->start_ms,
                        .final = final};
    progress_format_sample(line, sizeof line, &s);
    /* the summary is a log line, on a terminal too: it stays in the scrollback */
    p->emit(p->emit_ctx, line, final ? 0 : p->tty);
    if (p->tty && !final) p->drawn = 1;
}

/* progress_poll with p->mu held. */
static int poll_locked(Progress *p) {
    if (p->ended || p->stop) return 0;
    int64_t now = p->now_ms(p->clock_ctx);
    if (now < p->next_ms) return 0;
    report(p, 0);
    p->next_ms = now + p->every_ms;
    return 1;
}

int progress_poll(Progress *p) {
    if (!p) return 0;
    pthread_mutex_lock(&p->mu);
    int r = poll_locked(p);
    pthread_mutex_unlock(&p->mu);
    return r;
}

static void *reporter(void *arg) {
    Progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop && !p->ended) {
        /* the wait is on the monotonic clock; a test clock has no thread */
        int64_t next = p->next_ms;
        struct timespec ts = {(time_t)(next / 1000), (long)(next % 1000) * 1000000L};
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        poll_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

Progress *progress_start_opts(const ProgressOptions *o) {
    Progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->what = strdup(o->what ? o->what : "working");
    if (!p->what) {
        free(p);
        return NULL;
    }
    p->total = o->total;
    p->total_kind = o->total_kind;
    p->counts_bytes = o->counts_bytes;
    p->tty = o->tty == PROGRESS_TTY_AUTO ? isatty(STDERR_FILENO) : o->tty == PROGRESS_TTY_YES;
    p->every_ms = o->every_ms > 0 ? o->every_ms
                  : p->tty        ? PROGRESS_TTY_EVERY_MS
                                  : progress_log_every_ms();
    p->now_ms = o->now_ms ? o->now_ms : mono_clock;
    p->clock_ctx = o->clock_ctx;
    p->emit = o->emit ? o->emit : default_emit;
    p->emit_ctx = o->emit_ctx;
    p->start_ms = p->now_ms(p->clock_ctx);
    p->next_ms = p->start_ms + p->every_ms;
    atomic_init(&p->done, 0);
    atomic_init(&p->items_done, 0);
    atomic_init(&p->items_total, 0);
    pthread_mutex_init(&p->mu, NULL);
    cond_init_monotonic(&p->cv);
    if (!o->no_thread && !o->now_ms) {
        if (pthread_create(&p->thread, NULL, reporter, p) != 0) {
            pthread_cond_destroy(&p->cv);
            pthread_mutex_destroy(&p->mu);
            free(p->what);
            free(p);
            return NULL;
        }
        p->has_thread = 1;
    }
    return p;
}

Progress *progress_start(const char *what, uint64_t total, int counts_bytes) {
    ProgressOptions o = {.what = what,
                         .total = total,
                         .total_kind = total ? PROGRESS_TOTAL_APPROX : PROGRESS_TOTAL_NONE,
                         .counts_bytes = counts_bytes};
    return progress_start_opts(&o);
}

void progress_set(Progress *p, uint64_t done) {
    if (p) atomic_store_explicit(&p->done, done, memory_order_relaxed);
}

void progress_add(Progress *p, uint64_t n) {
    if (p) atomic_fetch_add_explicit(&p->done, n, memory_order_relaxed);
}

void progress_set_items(Progress *p, uint64_t done, uint64_t total) {
    if (!p) return;
    atomic_store_explicit(&p->items_done, done, memory_order_relaxed);
    atomic_store_explicit(&p->items_total, total, memory_order_relaxed);
}

uint64_t progress_item_done(Progress *p) {
    return p ? atomic_fetch_add(&p->items_done, 1) + 1 : 0;
}

/* Erases the terminal line p drew (p->mu held). */
static void clear_line(Progress *p) {
    if (p->drawn && p->emit == default_emit) log_status_clear();
    p->drawn = 0;
}

void progress_end(Progress *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    if (!p->ended && !p->stop) {
        p->ended = 1;
        clear_line(p);
        report(p, 1);
        pthread_cond_signal(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

void progress_finish(Progress *p) {
    if (!p) return;
    cond_raise(&p->mu, &p->cv, &p->stop);
    if (p->has_thread) pthread_join(p->thread, NULL);
    clear_line(p);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->what);
    free(p);
}
