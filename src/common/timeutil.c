/* timeutil: see timeutil.h. */
#include "timeutil.h"
#include "err.h"
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <ctype.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int duration_parse_ms(const char *s, int64_t *ms_out) {
    const char *orig = s;
    int neg = 0;
    if (*s == '-' || *s == '+') neg = (*s++ == '-');
    if (strcmp(s, "0") == 0) {
        *ms_out = 0;
        return 0;
    }
    if (*s == '\0') return err_set(ERR_INVALID, "invalid duration \"%s\"", orig);
    double total_ns = 0;
    while (*s) {
        if (!isdigit((unsigned char)*s) && *s != '.')
            return err_set(ERR_INVALID, "invalid duration \"%s\"", orig);
        double v = 0, frac = 0.1;
        int digits = 0, dot = 0;
        for (; isdigit((unsigned char)*s) || *s == '.'; s++) {
            if (*s == '.') {
                if (dot++) return err_set(ERR_INVALID, "invalid duration \"%s\"", orig);
                continue;
            }
            digits++;
            if (!dot) {
                v = v * 10 + (*s - '0');
            } else {
                v += (*s - '0') * frac;
                frac /= 10;
            }
        }
        if (!digits) return err_set(ERR_INVALID, "invalid duration \"%s\"", orig);
        static const struct {
            const char *u;
            double ns;
        } units[] = {
            {"ns", 1},   {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"\xce\xbcs", 1e3},
            {"ms", 1e6}, {"s", 1e9},  {"m", 60e9},        {"h", 3600e9},
        };
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t l = strlen(units[i].u);
            if (strncmp(s, units[i].u, l) == 0 && l > best_len) {
                /* "m" must not swallow "ms" */
                best = i;
                best_len = l;
            }
        }
        if (!best_len) return err_set(ERR_INVALID, "missing unit in duration \"%s\"", orig);
        total_ns += v * units[best].ns;
        s += best_len;
    }
    if (total_ns > 9.2e18) return err_set(ERR_INVALID, "duration \"%s\" out of range", orig);
    int64_t ms = (int64_t)(total_ns / 1e6);
    *ms_out = neg ? -ms : ms;
    return 0;
}

int64_t now_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sleep_unless_stopped(const atomic_int *stop, int64_t ms) {
    int64_t end = now_mono_ms() + ms;
    while (now_mono_ms() < end) {
        if (stop && atomic_load(stop)) return 1;
        usleep(100 * 1000);
    }
    return stop && atomic_load(stop);
}

/* lock-free atomic_int: C11 7.14.1.1 allows it in a signal handler */
static atomic_int stop_flag;

atomic_int *process_stop_flag(void) {
    return &stop_flag;
}

int process_stopping(void) {
    return atomic_load(&stop_flag) != 0;
}

int stop_stall_abort(StopStall *s, int64_t moved) {
    int64_t now = now_mono_ms();
    if (s->last_ms == 0 || moved != s->moved) {
        s->last_ms = now;
        s->moved = moved;
    }
    if (process_stopping() && now - s->last_ms >= STOP_STALL_MS) s->aborted = 1;
    return s->aborted;
}

void wait_note_start(WaitNote *w) {
    w->start_ms = now_mono_ms();
    w->logged = 0;
}

void wait_note_check(WaitNote *w, const char *fmt, ...) {
    if (w->logged) return;
    int64_t now = now_mono_ms();
    if (w->start_ms == 0) w->start_ms = now;
    if (now - w->start_ms < WAIT_NOTE_MS) return;
    w->logged = 1;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    log_warn("still waiting for %s after %.1f s", what, (double)(now - w->start_ms) / 1000.0);
}

int sleep_noted(int64_t ms, const char *what) {
    if (what && ms > WAIT_NOTE_MS) log_warn("waiting %.1f s for %s", (double)ms / 1000.0, what);
    int64_t end = now_mono_ms() + ms;
    for (;;) {
        if (process_stopping()) return 1;
        int64_t left = end - now_mono_ms();
        if (left <= 0) return 0;
        usleep((useconds_t)(left < 100 ? left : 100) * 1000);
    }
}

int64_t now_unix_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t now_unix_s(void) {
    return (int64_t)time(NULL);
}
