/* cron: robfig/cron v3 "standard" schedules; see cron.h. Time zones: local and UTC only
 * (a "CRON_TZ=Europe/Berlin" prefix is refused with a clear error rather than misread). */
#include "cron.h"
#include "err.h"
#include "timeutil.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

typedef struct {
    int min, max;
    const char *const *names; /* index = value */
    int n_names;
} FieldSpec;

static const char *const month_names[] = {"",    "jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const dow_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

static int parse_value(const char *s, size_t len, const FieldSpec *f, int *out) {
    if (len == 0) return -1;
    for (int i = 0; i < f->n_names; i++) {
        if (f->names[i][0] && strlen(f->names[i]) == len && strncasecmp(s, f->names[i], len) == 0) {
            *out = i;
            return 0;
        }
    }
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]) || v > 1000) return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* One comma-separated term: "*", "?", "a", "a-b", with optional "/step". */
static int parse_term(const char *s, size_t len, const FieldSpec *f, uint64_t *bits, int *star) {
    const char *slash = memchr(s, '/', len);
    size_t rlen = slash ? (size_t)(slash - s) : len;
    int lo, hi, step = 1;
    if ((rlen == 1 && (s[0] == '*' || s[0] == '?'))) {
        lo = f->min;
        hi = f->max;
        if (!slash) *star = 1;
    } else {
        const char *dash = memchr(s, '-', rlen);
        if (dash) {
            if (parse_value(s, (size_t)(dash - s), f, &lo) ||
                parse_value(dash + 1, rlen - (size_t)(dash - s) - 1, f, &hi))
                return -1;
        } else {
            if (parse_value(s, rlen, f, &lo)) return -1;
            hi = slash ? f->max : lo;
        }
    }
    if (slash) {
        if (parse_value(slash + 1, len - rlen - 1, &(FieldSpec){0, 0, NULL, 0}, &step) || step < 1)
            return -1;
    }
    if (lo < f->min || hi > f->max || lo > hi) return -1;
    for (int v = lo; v <= hi; v += step)
        *bits |= 1ULL << v;
    return 0;
}

static int parse_field(const char *s, const FieldSpec *f, uint64_t *bits, int *star) {
    *bits = 0;
    *star = 0;
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (parse_term(s, len, f, bits, star)) return -1;
        s += len + (comma ? 1 : 0);
        if (comma && !*s) return -1;
    }
    return *bits ? 0 : -1;
}

int cron_parse(const char *spec, CronSchedule *out) {
    memset(out, 0, sizeof *out);
    while (isspace((unsigned char)*spec))
        spec++;
    if (strncmp(spec, "CRON_TZ=", 8) == 0 || strncmp(spec, "TZ=", 3) == 0) {
        const char *z = strchr(spec, '=') + 1;
        const char *sp = strchr(z, ' ');
        if (!sp) return err_set(ERR_INVALID, "cron \"%s\": missing fields after time zone", spec);
        snprintf(out->tz, sizeof out->tz, "%.*s", (int)(sp - z), z);
        if (strcmp(out->tz, "UTC") && strcmp(out->tz, "Etc/UTC") && strcmp(out->tz, "Local"))
            return err_set(ERR_UNSUPPORTED,
                           "cron \"%s\": time zone %s not supported (use UTC or local)", spec,
                           out->tz);
        if (strcmp(out->tz, "Local") == 0) out->tz[0] = '\0';
        spec = sp + 1;
        while (isspace((unsigned char)*spec))
            spec++;
    }
    static const struct {
        const char *name, *expr;
    } desc[] = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"},
    };
    if (spec[0] == '@') {
        if (strncmp(spec, "@every ", 7) == 0) {
            int64_t ms;
            if (duration_parse_ms(spec + 7, &ms) || ms < 1000)
                return err_set(ERR_INVALID, "cron \"%s\": @every needs a duration of at least 1s",
                               spec);
            out->every_s = ms / 1000;
            return 0;
        }
        for (size_t i = 0; i < sizeof desc / sizeof desc[0]; i++) {
            if (strcmp(spec, desc[i].name) == 0) {
                char tz[sizeof out->tz];
                memcpy(tz, out->tz, sizeof tz);
                int rc = cron_parse(desc[i].expr, out);
                memcpy(out->tz, tz, sizeof tz);
                return rc;
            }
        }
        return err_set(ERR_INVALID, "cron \"%s\": unknown descriptor", spec);
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *fields[6];
    int n = 0;
    for (char *tok = strtok(buf, " \t"); tok; tok = strtok(NULL, " \t")) {
        if (n == 5) return err_set(ERR_INVALID, "cron \"%s\": expected 5 fields", spec);
        fields[n++] = tok;
    }
    if (n != 5) return err_set(ERR_INVALID, "cron \"%s\": expected 5 fields, got %d", spec, n);
    static const char *const field_names[] = {"minute", "hour", "day of month", "month",
                                              "day of week"};
    const FieldSpec specs[5] = {
        {0, 59, NULL, 0},         {0, 23, NULL, 0},     {1, 31, NULL, 0},
        {1, 12, month_names, 13}, {0, 7, dow_names, 7},
    };
    uint64_t *bits[5] = {&out->minute, &out->hour, &out->dom, &out->month, &out->dow};
    int stars[5];
    for (int i = 0; i < 5; i++) {
        if (parse_field(fields[i], &specs[i], bits[i], &stars[i]))
            return err_set(ERR_INVALID, "cron \"%s\": bad %s field \"%s\"", spec, field_names[i],
                           fields[i]);
    }
    if (out->dow & (1ULL << 7)) out->dow = (out->dow | 1ULL) & ~(1ULL << 7); /* 7 = Sunday */
    out->dom_star = stars[2];
    out->dow_star = stars[4];
    return 0;
}

static int day_matches(const CronSchedule *s, const struct tm *tm) {
    int dom = (s->dom >> tm->tm_mday) & 1;
    int dow = (s->dow >> tm->tm_wday) & 1;
    if (s->dom_star || s->dow_star) return dom && dow;
    return dom || dow;
}

int64_t cron_next(const CronSchedule *s, int64_t after) {
    if (s->every_s > 0) return after + s->every_s;
    int utc = s->tz[0] != '\0';
    time_t t = (time_t)(after - (after % 60) + 60); /* next whole minute */
    time_t limit = t + (time_t)5 * 366 * 86400;
    struct tm tm;
    while (t <= limit) {
        if (utc)
            gmtime_r(&t, &tm);
        else
            localtime_r(&t, &tm);
        if (!((s->month >> (tm.tm_mon + 1)) & 1)) {
            /* first minute of the next month */
            tm.tm_mon++;
            tm.tm_mday = 1;
            tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        } else if (!day_matches(s, &tm)) {
            tm.tm_mday++;
            tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
        } else if (!((s->hour >> tm.tm_hour) & 1)) {
            tm.tm_hour++;
            tm.tm_min = tm.tm_sec = 0;
        } else if (!((s->minute >> tm.tm_min) & 1)) {
            tm.tm_min++;
            tm.tm_sec = 0;
        } else {
            return (int64_t)t;
        }
        tm.tm_isdst = -1;
        time_t nt = utc ? timegm(&tm) : mktime(&tm);
        if (nt <= t) nt = t + 60; /* DST fold: always move forward */
        t = nt;
    }
    return -1;
}
