/* phase: see phase.h. */
#include "phase.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t phase_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void phase_timer_begin(PhaseTimer *t) {
    memset(t, 0, sizeof *t);
    t->start_ns = phase_now_ns();
}

void phase_add(PhaseTimer *t, const char *name, int64_t ns) {
    if (!t || !name) return;
    if (ns < 0) ns = 0;
    for (size_t i = 0; i < t->n; i++)
        if (!strncmp(t->v[i].name, name, PHASE_NAME_MAX - 1)) {
            t->v[i].ns = ns > INT64_MAX - t->v[i].ns ? INT64_MAX : t->v[i].ns + ns;
            return;
        }
    if (t->n == PHASE_MAX) {
        t->dropped_ns = ns > INT64_MAX - t->dropped_ns ? INT64_MAX : t->dropped_ns + ns;
        return;
    }
    snprintf(t->v[t->n].name, sizeof t->v[t->n].name, "%s", name);
    t->v[t->n].ns = ns;
    t->n++;
}

void phase_lap(PhaseTimer *t, const char *name, int64_t *mark) {
    int64_t now = phase_now_ns();
    phase_add(t, name, now - *mark);
    *mark = now;
}

int64_t phase_get(const PhaseTimer *t, const char *name) {
    for (size_t i = 0; i < t->n; i++)
        if (!strncmp(t->v[i].name, name, PHASE_NAME_MAX - 1)) return t->v[i].ns;
    return -1;
}

int64_t phase_sum_ns(const PhaseTimer *t) {
    int64_t s = t->dropped_ns;
    for (size_t i = 0; i < t->n; i++)
        s = t->v[i].ns > INT64_MAX - s ? INT64_MAX : s + t->v[i].ns;
    return s;
}

void phase_timer_end(PhaseTimer *t, int ok, const char *label) {
    t->total_ns = phase_now_ns() - t->start_ns;
    if (t->total_ns < 0) t->total_ns = 0;
    t->ended_unix_s = (int64_t)time(NULL);
    t->ok = ok ? 1 : 0;
    if (label) snprintf(t->label, sizeof t->label, "%s", label);
}

static pthread_mutex_t last_mu = PTHREAD_MUTEX_INITIALIZER;
static PhaseTimer last[PHASE_LAST_N]; /* last_mu */
static int have[PHASE_LAST_N];        /* last_mu */

void phase_last_set(PhaseLastKind kind, const PhaseTimer *t) {
    if ((unsigned)kind >= PHASE_LAST_N || !t) return;
    pthread_mutex_lock(&last_mu);
    last[kind] = *t;
    have[kind] = 1;
    pthread_mutex_unlock(&last_mu);
}

int phase_last_get(PhaseLastKind kind, PhaseTimer *out) {
    memset(out, 0, sizeof *out);
    if ((unsigned)kind >= PHASE_LAST_N) return 0;
    pthread_mutex_lock(&last_mu);
    int h = have[kind];
    if (h) *out = last[kind];
    pthread_mutex_unlock(&last_mu);
    return h;
}

void phase_last_clear(void) {
    pthread_mutex_lock(&last_mu);
    memset(have, 0, sizeof have);
    pthread_mutex_unlock(&last_mu);
}

const char *phase_last_name(PhaseLastKind kind) {
    static const char *const names[PHASE_LAST_N] = {"full", "delta", "restore"};
    return (unsigned)kind < PHASE_LAST_N ? names[kind] : "";
}
