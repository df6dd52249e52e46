/* objhttp_inflight: see objhttp.h, "requests in flight". A fixed table of slots under one mutex:
 * a request takes a free slot (or none, when all are taken: it is still counted) and gives it
 * back at its end. */
#include "objhttp.h"
#include "../common/timeutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int used;
    char provider[16];
    char method[8];
    int64_t start_ms; /* monotonic */
} Slot;

/* The token of a request counted without a slot (the table was full). */
#define UNTRACKED (OBJHTTP_INFLIGHT_SLOTS + 1)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static Slot slots[OBJHTTP_INFLIGHT_SLOTS]; /* mu */
static uint64_t started, finished;         /* mu */

int objhttp_inflight_begin(const char *provider, const char *method) {
    int64_t now = now_mono_ms();
    pthread_mutex_lock(&mu);
    started++;
    int token = UNTRACKED;
    for (int i = 0; i < OBJHTTP_INFLIGHT_SLOTS; i++) {
        if (slots[i].used) continue;
        Slot *s = &slots[i];
        s->used = 1;
        snprintf(s->provider, sizeof s->provider, "%s", provider ? provider : "");
        snprintf(s->method, sizeof s->method, "%s", method ? method : "");
        s->start_ms = now;
        token = i + 1;
        break;
    }
    pthread_mutex_unlock(&mu);
    return token;
}

void objhttp_inflight_end(int token) {
    if (token <= 0 || token > UNTRACKED) return;
    pthread_mutex_lock(&mu);
    finished++;
    if (token != UNTRACKED) slots[token - 1].used = 0;
    pthread_mutex_unlock(&mu);
}

static int by_start(const void *a, const void *b) {
    const ObjHttpInflight *x = a, *y = b;
    return x->age_ms < y->age_ms ? 1 : x->age_ms > y->age_ms ? -1 : 0;
}

void objhttp_inflight_list(ObjHttpInflight *out, size_t cap, ObjHttpInflightStats *st) {
    int64_t now = now_mono_ms();
    ObjHttpInflight all[OBJHTTP_INFLIGHT_SLOTS];
    size_t n = 0;
    pthread_mutex_lock(&mu);
    st->started = started;
    st->finished = finished;
    for (int i = 0; i < OBJHTTP_INFLIGHT_SLOTS; i++) {
        if (!slots[i].used) continue;
        memcpy(all[n].provider, slots[i].provider, sizeof all[n].provider);
        memcpy(all[n].method, slots[i].method, sizeof all[n].method);
        all[n].age_ms = now - slots[i].start_ms;
        n++;
    }
    pthread_mutex_unlock(&mu);
    st->in_flight = st->started - st->finished;
    qsort(all, n, sizeof all[0], by_start);
    st->n = n < cap ? n : cap;
    if (st->n) memcpy(out, all, st->n * sizeof all[0]);
}
