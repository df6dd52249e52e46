/* timeutil: see timeutil.h. */
#include "timeutil.h"
#include "err.h"

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

int64_t now_unix_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t now_unix_s(void) {
    return (int64_t)time(NULL);
}
