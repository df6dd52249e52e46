/* rpo: see rpo.h. */
#include "rpo.h"

#include <math.h>

void rpo_started(Rpo *r, int64_t now_ms) {
    atomic_store(&r->since_ms, now_ms > 0 ? now_ms : 1);
}

void rpo_caught_up(Rpo *r, int64_t at_ms) {
    int64_t cur = atomic_load(&r->since_ms);
    /* only forward, and never out of "unknown": a late event after a stop stays unknown */
    while (cur != 0 && at_ms > cur && !atomic_compare_exchange_weak(&r->since_ms, &cur, at_ms)) {
    }
}

void rpo_stopped(Rpo *r) {
    atomic_store(&r->since_ms, 0);
}

double rpo_seconds(const Rpo *r, int64_t now_ms) {
    int64_t since = atomic_load(&r->since_ms);
    if (since == 0) return NAN;
    return now_ms > since ? (double)(now_ms - since) / 1000.0 : 0.0;
}
