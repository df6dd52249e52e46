/* cron: schedules as robfig/cron's standard parser takes them (docs/go-tool.md §1): 5 fields
 * (minute hour day-of-month month day-of-week) with *, lists, ranges, steps, month and weekday
 * names; descriptors @yearly @annually @monthly @weekly @daily @midnight @hourly and
 * "@every <duration>"; optional "CRON_TZ=<zone> " / "TZ=<zone> " prefix. Times are evaluated
 * in the process's local zone unless a zone is given. */
#ifndef ETCDBR_CRON_H
#define ETCDBR_CRON_H

#include <stdint.h>

typedef struct CronSchedule {
    uint64_t minute, hour, dom, month, dow; /* bit sets */
    int dom_star, dow_star;                 /* field was "*" or "?" (robfig's star bit) */
    int64_t every_s;                        /* @every: > 0 */
    char tz[64];                            /* "" = local */
} CronSchedule;

/* 0 or ERR_INVALID with a message naming the field. */
int cron_parse(const char *spec, CronSchedule *out);

/* The first activation time strictly after `after` (Unix seconds), or -1 if none within 5 years
 * (e.g. "0 0 30 2 *"). */
int64_t cron_next(const CronSchedule *s, int64_t after);

#endif
