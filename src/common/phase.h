/* phase: where the time of one operation went (a snapshot, a restore), as named phases with
 * their durations, and the last one of each kind kept process-wide for the profiling endpoints
 * (docs/server.md, "Profiling"). A PhaseTimer is a plain value: filled by one thread, copied
 * whole; the "last" slots are guarded by a mutex, so any thread may read them. */
#ifndef ETCDBR_PHASE_H
#define ETCDBR_PHASE_H

#include <stddef.h>
#include <stdint.h>

/* At most this many phases per timer; a phase beyond them is counted in dropped_ns. */
#define PHASE_MAX 8
/* Bytes of a phase name with its NUL; a longer name is cut. */
#define PHASE_NAME_MAX 24
/* Bytes of a timer's label (the snapshot's name, the data dir) with its NUL; cut when longer. */
#define PHASE_LABEL_MAX 160

typedef struct PhaseTimer {
    size_t n; /* phases used, in the order first added */
    struct {
        char name[PHASE_NAME_MAX];
        int64_t ns; /* nanoseconds, >= 0 */
    } v[PHASE_MAX];
    int64_t dropped_ns;   /* time of phases that found no free slot */
    int64_t start_ns;     /* monotonic ns at phase_timer_begin */
    int64_t total_ns;     /* the whole operation, set by phase_timer_end (0 before) */
    int64_t ended_unix_s; /* wall clock (Unix s) at phase_timer_end, 0 before */
    int ok;               /* 1: the operation succeeded (phase_timer_end) */
    char label[PHASE_LABEL_MAX];
} PhaseTimer;

/* Monotonic clock in nanoseconds. */
int64_t phase_now_ns(void);

/* Zeroes t and starts its clock now. */
void phase_timer_begin(PhaseTimer *t);
/* Adds ns (nanoseconds; a negative value counts as 0) to the phase name, created at the end of
 * the list at its first use. t NULL: nothing. */
void phase_add(PhaseTimer *t, const char *name, int64_t ns);
/* Adds the time since *mark (monotonic ns from phase_now_ns) to the phase name and sets *mark
 * to now: consecutive laps cover the time between them without a gap. */
void phase_lap(PhaseTimer *t, const char *name, int64_t *mark);
/* The phase's nanoseconds, or -1 when t has no phase of that name. */
int64_t phase_get(const PhaseTimer *t, const char *name);
/* Sum of every phase's nanoseconds (dropped_ns included). */
int64_t phase_sum_ns(const PhaseTimer *t);
/* Ends t: total_ns = now - start_ns, ended_unix_s = now, ok. label (may be NULL) copied. */
void phase_timer_end(PhaseTimer *t, int ok, const char *label);

/* The operations whose last timer is kept. */
typedef enum {
    PHASE_LAST_FULL,    /* the last full snapshot the snapshotter took */
    PHASE_LAST_DELTA,   /* the last delta snapshot it stored (or failed to) */
    PHASE_LAST_RESTORE, /* the last restore of an initialization */
    PHASE_LAST_N
} PhaseLastKind;

/* Keeps a copy of t as the last of kind (replacing the one before). Thread-safe. */
void phase_last_set(PhaseLastKind kind, const PhaseTimer *t);
/* Copies the last timer of kind into *out: 1, or 0 when none was kept (*out zeroed).
 * Thread-safe. */
int phase_last_get(PhaseLastKind kind, PhaseTimer *out);
/* Forgets every kept timer (tests). */
void phase_last_clear(void);
/* The kind's name in documents: "full", "delta", "restore" ("" out of range). */
const char *phase_last_name(PhaseLastKind kind);

#endif
