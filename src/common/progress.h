/* progress: reports long work (a full snapshot received from etcd, compressed and stored):
 * bytes done, rate, and with a known (approximate) total the share done and an ETA. A reporter
 * thread prints it, so the work is never silent for long even when its bytes stall: on a
 * terminal (stderr is a tty) one status line rewritten in place 4 times a second, otherwise an
 * info log line every 5 s. The worker only publishes its count (an atomic store). */
#ifndef ETCDBR_PROGRESS_H
#define ETCDBR_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Interval between log lines when stderr is not a terminal. */
#define PROGRESS_LOG_EVERY_MS 5000
/* Interval between redraws of the status line on a terminal. */
#define PROGRESS_TTY_EVERY_MS 250

typedef struct Progress Progress;

/* Starts reporting work named `what` (copied) of about `total` bytes (0: unknown). With
 * counts_bytes = 0 the work has no byte count (a check): only the time spent is reported.
 * Returns NULL when no reporter could be started (out of memory, no thread): the work goes on
 * unreported, every function below accepts NULL. */
Progress *progress_start(const char *what, uint64_t total, int counts_bytes);

/* Publishes the bytes done so far. Any thread; cheap (one atomic store). */
void progress_set(Progress *p, uint64_t done);

/* Publishes a count of whole items (objects) done of total, shown after the bytes as
 * ", 3 of 10 objects" (total 0: not shown). Any thread; cheap (atomic stores). */
void progress_set_items(Progress *p, uint64_t done, uint64_t total);

/* Stops the reporter (joins its thread), clears the terminal line and frees p. */
void progress_finish(Progress *p);

/* One report as text into buf (always terminated), e.g.
 *   "receiving the snapshot: 12.0 MiB of ~48.0 MiB (25%), 6.0 MiB/s, ETA 6s"
 * elapsed_ms: time since the start. For tests and the reporter. */
void progress_format(char *buf, size_t cap, const char *what, uint64_t done, uint64_t total,
                     int counts_bytes, int64_t elapsed_ms);

#endif
