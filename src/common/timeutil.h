/* timeutil: clocks and Go-compatible duration text ("20s", "1h30m", "500ms", "0"), as the Go
 * tool's flags take them (time.ParseDuration). */
#ifndef ETCDBR_TIMEUTIL_H
#define ETCDBR_TIMEUTIL_H

#include <stdatomic.h>
#include <stdint.h>

/* Parses a Go duration into milliseconds (sub-millisecond parts are truncated). Units ns, us,
 * µs, ms, s, m, h; a bare "0" is allowed; a leading '-' gives a negative value. 0 or
 * ERR_INVALID. */
int duration_parse_ms(const char *s, int64_t *ms_out);

/* Monotonic clock in milliseconds. */
int64_t now_mono_ms(void);
/* Wall clock: Unix nanoseconds / seconds (UTC). */
int64_t now_unix_ns(void);
int64_t now_unix_s(void);

/* Sleeps ms milliseconds in 100 ms slices, ending early once *stop (may be NULL: never) is set.
 * Returns 1 when stop was asked for (before, during or at the end), else 0. */
int sleep_unless_stopped(const atomic_int *stop, int64_t ms);

/* The process's stop flag: SIGTERM/SIGINT set it once cmd_install_stop_signals ran (never set
 * before). Waits deep in the layers (retry backoff, lock waits, transfers) read it, so every
 * command ends within about a second of the signal (docs/exit-codes.md). */
atomic_int *process_stop_flag(void);
/* 1 once the process stop flag is set. */
int process_stopping(void);

/* After a stop, a transfer that has moved no byte for this long is aborted (ms). One that still
 * moves (the last delta's upload to a live store) is left to finish under its own timeouts. */
#define STOP_STALL_MS 300

/* State of one transfer for stop_stall_abort; zero it before the transfer. */
typedef struct StopStall {
    int64_t moved;   /* bytes up + down seen at last_ms */
    int64_t last_ms; /* monotonic ms when moved last changed (or of the first call) */
    int aborted;     /* 1 once stop_stall_abort returned 1: the transfer was stopped */
} StopStall;

/* For a libcurl progress (xferinfo) callback, called on every progress update of a transfer:
 * moved = bytes sent + received so far. 1 when the process is stopping and the transfer has
 * moved no byte for STOP_STALL_MS (a store or etcd that accepts and never answers): abort it
 * (s->aborted is set; the caller reports ERR_CANCELED); else 0. The caller must run the callback at
 * least every ~100 ms (a multi handle polled in short steps: curl_easy_perform calls it once a
 * second when idle). */
int stop_stall_abort(StopStall *s, int64_t moved);

/* A wait that may last: wait_note_check logs once, at warn level, what it waits for when the
 * wait passed WAIT_NOTE_MS (5 s); silent before. Zero-initialize, or wait_note_start. */
#define WAIT_NOTE_MS 5000
typedef struct WaitNote {
    int64_t start_ms; /* monotonic; 0 = set at the first check */
    int logged;
} WaitNote;
void wait_note_start(WaitNote *w);
/* what: printf format naming the thing waited for ("the store s3://b/p", "the lock on X"). */
void wait_note_check(WaitNote *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* sleep_unless_stopped for the process stop flag (100 ms slices); a sleep longer than
 * WAIT_NOTE_MS logs at its start, at warn level, what it waits for ("waiting 16.0 s for
 * <what>"); what may be NULL (no log). 1 when stopped (before or during), else 0. */
int sleep_noted(int64_t ms, const char *what);

#endif
