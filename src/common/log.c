/* log: see log.h. One fprintf per line under a mutex so lines from threads never interleave. */
#include "log.h"
#include "err.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <time.h>

static LogLevel log_level = LOG_INFO;
static int log_json;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void log_setup(LogLevel level, int json) {
    log_level = level;
    log_json = json;
}

int log_parse_level(const char *s, LogLevel *out) {
    static const struct {
        const char *name;
        LogLevel level;
    } names[] = {
        {"error", LOG_ERROR}, {"warn", LOG_WARN},   {"warning", LOG_WARN}, {"info", LOG_INFO},
        {"debug", LOG_DEBUG}, {"trace", LOG_DEBUG}, {"0", LOG_ERROR},      {"1", LOG_ERROR},
        {"2", LOG_ERROR},     {"3", LOG_WARN},      {"4", LOG_INFO},       {"5", LOG_DEBUG},
        {"6", LOG_DEBUG},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    return err_set(ERR_INVALID, "unknown log level %s", s);
}

static const char *level_name(LogLevel l) {
    switch (l) {
    case LOG_ERROR:
        return "error";
    case LOG_WARN:
        return "warning";
    case LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

/* Writes s as a JSON / logfmt quoted string. */
static void put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', f);
            fputc(*p, f);
        } else if (*p == '\n') {
            fputs("\\n", f);
        } else if (*p == '\t') {
            fputs("\\t", f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

void log_msg(LogLevel level, const char *fmt, ...) {
    if (level > log_level) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tbuf[64];
    size_t n = strftime(tbuf, sizeof tbuf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(tbuf + n, sizeof tbuf - n, ".%03ldZ", ts.tv_nsec / 1000000);

    pthread_mutex_lock(&log_mu);
    if (log_json) {
        fprintf(stderr, "{\"level\":\"%s\",\"msg\":", level_name(level));
        put_quoted(stderr, msg);
        fprintf(stderr, ",\"time\":\"%s\"}\n", tbuf);
    } else {
        fprintf(stderr, "time=\"%s\" level=%s msg=", tbuf, level_name(level));
        put_quoted(stderr, msg);
        fputc('\n', stderr);
    }
    fflush(stderr);
    pthread_mutex_unlock(&log_mu);
}
