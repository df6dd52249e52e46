/* log: see log.h. Each line is formatted whole and written with one write(2) under a mutex, so
 * neither threads nor processes sharing stderr (etcd under `run`) splice into it. */
#include "log.h"
#include "err.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

/* Appends s quoted as a JSON / logfmt string to line (at *len, capacity cap; cap leaves room for
 * the closing quote and the line's tail). Stops before an escape that would not fit. */
static void put_quoted(char *line, size_t *len, size_t cap, const char *s) {
    size_t n = *len;
    line[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        size_t k;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            k = 2;
        } else if (*p == '\n') {
            memcpy(esc, "\\n", 2);
            k = 2;
        } else if (*p == '\t') {
            memcpy(esc, "\\t", 2);
            k = 2;
        } else if (*p < 0x20) {
            k = (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p);
        } else {
            esc[0] = (char)*p;
            k = 1;
        }
        if (n + k + 1 > cap) break;
        memcpy(line + n, esc, k);
        n += k;
    }
    line[n++] = '"';
    *len = n;
}

/* Writes all of buf to fd 2, retrying short writes and EINTR; errors are dropped (nowhere to
 * report them). */
static void write_stderr(const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, buf, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;
        }
        buf += w;
        len -= (size_t)w;
    }
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

    /* The whole line goes out in one write(2): etcd (under `run`) and other processes share
     * this stderr, and a line written piecewise gets their output spliced into it. */
    enum { TAIL = 128 };
    char line[sizeof msg * 2 + 256];
    size_t len;
    if (log_json)
        len = (size_t)snprintf(line, sizeof line, "{\"level\":\"%s\",\"msg\":", level_name(level));
    else
        len = (size_t)snprintf(line, sizeof line, "time=\"%s\" level=%s msg=", tbuf,
                               level_name(level));
    put_quoted(line, &len, sizeof line - TAIL, msg);
    if (log_json)
        len += (size_t)snprintf(line + len, sizeof line - len, ",\"time\":\"%s\"}\n", tbuf);
    else
        line[len++] = '\n';

    pthread_mutex_lock(&log_mu);
    fflush(stderr);
    write_stderr(line, len);
    pthread_mutex_unlock(&log_mu);
}
