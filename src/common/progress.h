/* progress: reports long work (a full snapshot received from etcd, a restore's download, a
 * verification, a copy): bytes done, rate, and with a total the share done and an ETA. A reporter
 * thread prints it, so the work is never silent for long even when its bytes stall: on a
 * terminal (stderr is a tty) one status line rewritten in place 4 times a second (log.h's
 * log_status: a log line in between erases it first), otherwise an info log line every
 * progress_log_every_ms() (5 s). The workers only publish their counts (atomic stores or adds).
 *
 *   Progress *p = progress_start_opts(&(ProgressOptions){.what = "downloading", .total = n,
 *                                       .total_kind = PROGRESS_TOTAL_EXACT, .counts_bytes = 1});
 *   progress_add(p, got);       (any thread, as bytes arrive)
 *   progress_end(p);            (the work is complete: one summary line)
 *   progress_finish(p);         (joins the reporter, frees p) */
#ifndef ETCDBR_PROGRESS_H
#define ETCDBR_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* Interval between log lines when stderr is not a terminal, unless ETCDBR_PROGRESS_EVERY_MS. */
#define PROGRESS_LOG_EVERY_MS 5000
/* Interval between redraws of the status line on a terminal. */
#define PROGRESS_TTY_EVERY_MS 250

typedef struct Progress Progress;

/* Where reports go: PROGRESS_TTY_AUTO asks isatty(stderr). */
enum { PROGRESS_TTY_AUTO = 0, PROGRESS_TTY_YES = 1, PROGRESS_TTY_NO = 2 };

/* What the total means. */
typedef enum {
    PROGRESS_TOTAL_NONE = 0, /* no total to give (bytes, rate, time so far) */
    PROGRESS_TOTAL_APPROX,   /* an estimate, shown "of ~48.0 MiB" (etcd's db size before the
                                stream; the work may pass it) */
    PROGRESS_TOTAL_EXACT,    /* known, shown "of 48.0 MiB" (the sizes a store listing gives) */
    PROGRESS_TOTAL_UNKNOWN,  /* there is one, but it is not known (a store listing without some
                                object's size): said so, never a share or an ETA */
} ProgressTotalKind;

/* One report's inputs: progress_format_sample turns them into text. */
typedef struct {
    const char *what;
    uint64_t done, total; /* bytes (or nothing with counts_bytes = 0) */
    ProgressTotalKind total_kind;
    int counts_bytes;
    uint64_t items_done, items_total; /* whole objects; items_total 0 = not shown */
    int64_t elapsed_ms;               /* since the start (for the rate and the ETA) */
    int final;                        /* the summary of completed work (progress_end) */
} ProgressSample;

typedef struct {
    const char *what;             /* copied; e.g. "downloading 5 objects" */
    uint64_t total;               /* bytes, per total_kind */
    ProgressTotalKind total_kind; /* PROGRESS_TOTAL_NONE: total unused */
    int counts_bytes;             /* 0: a check without a byte count, the time spent only */
    int64_t every_ms;             /* 0: PROGRESS_TTY_EVERY_MS on a terminal, else
                                     progress_log_every_ms() */
    int tty;                      /* PROGRESS_TTY_* */
    int64_t (*now_ms)(void *ctx); /* the clock; NULL: monotonic milliseconds. A clock of
                                     its own implies no_thread */
    void *clock_ctx;
    void (*emit)(void *ctx, const char *line, int tty); /* NULL: log_status or log_info */
    void *emit_ctx;
    int no_thread; /* no reporter thread: reports come only from progress_poll (tests) */
} ProgressOptions;

/* Milliseconds between progress log lines: PROGRESS_LOG_EVERY_MS, or ETCDBR_PROGRESS_EVERY_MS
 * (10-600000; for operators who want them more or less often, and for tests). Read once. */
int64_t progress_log_every_ms(void);

/* Starts reporting (o borrowed; what copied). Returns NULL when no reporter could be started
 * (out of memory, no thread): the work goes on unreported, every function below accepts NULL. */
Progress *progress_start_opts(const ProgressOptions *o);

/* progress_start_opts with `what`, a total of about `total` bytes (0: none; else
 * PROGRESS_TOTAL_APPROX) and counts_bytes. */
Progress *progress_start(const char *what, uint64_t total, int counts_bytes);

/* Publishes the bytes done so far (progress_set) or adds n to them (progress_add, for several
 * threads). Any thread; cheap (one atomic operation). */
void progress_set(Progress *p, uint64_t done);
void progress_add(Progress *p, uint64_t n);

/* Publishes a count of whole items (objects) done of total, shown after the bytes as
 * ", 3 of 10 objects" (total 0: not shown). progress_item_done adds one to the items done and
 * returns the new count (0 for NULL). Any thread; cheap (atomic operations). */
void progress_set_items(Progress *p, uint64_t done, uint64_t total);
uint64_t progress_item_done(Progress *p);

/* The work is complete: no more periodic reports; one summary line (log_info, also on a
 * terminal, whose status line it replaces) with the bytes, the time and the average rate. Once;
 * any thread. Work that fails or is stopped ends in progress_finish without it. */
void progress_end(Progress *p);

/* Reports now when a report is due by p's clock (for no_thread; the reporter thread runs the
 * same check). 1 when it reported, else 0. */
int progress_poll(Progress *p);

/* Stops the reporter (joins its thread), clears the terminal line and frees p. */
void progress_finish(Progress *p);

/* One report as text into buf (always terminated), e.g.
 *   "downloading 5 objects: 1.2 GiB of 3.4 GiB (35%), 210.0 MiB/s, ETA 11s, 2 of 5 objects"
 *   "receiving the snapshot: 12.0 MiB of ~48.0 MiB (25%), 6.0 MiB/s, ETA 6s"
 *   "downloading 5 objects: 1.2 GiB of an unknown total (the store listed no size for some
 *    objects), 210.0 MiB/s, 6s so far"
 *   final: "downloading 5 objects: done, 3.4 GiB of 3.4 GiB in 16s, 217.6 MiB/s, 5 of 5 objects"
 * The rate is the average since the start; the ETA is the rest at that rate. */
void progress_format_sample(char *buf, size_t cap, const ProgressSample *s);

/* progress_format_sample of a sample without items: total 0 is PROGRESS_TOTAL_NONE, any other
 * PROGRESS_TOTAL_APPROX. */
void progress_format(char *buf, size_t cap, const char *what, uint64_t done, uint64_t total,
                     int counts_bytes, int64_t elapsed_ms);

/* Bytes in binary units with one decimal ("512 B", "1.5 KiB", "12.0 MiB", "3.4 GiB",
 * "1.0 TiB") into buf (always terminated). */
void progress_format_bytes(char *buf, size_t cap, uint64_t bytes);

#endif
