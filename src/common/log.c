/* log: see log.h. Each line is formatted whole and written with one write(2) under a mutex, so
 * neither threads nor processes sharing stderr (etcd under `run`) splice into it. */
#include "log.h"
#include "err.h"
#include "names.h"

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
static int status_drawn; /* a status line is on the terminal (log_mu) */

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
    static const char *const names[] = {
        [LOG_ERROR] = "error", [LOG_WARN] = "warning", [LOG_INFO] = "info", [LOG_DEBUG] = "debug"};
    return NAME_AT(names, l, "debug");
}

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF), 0 when p does not start one or it encodes a C1 control (U+0080-U+009F, which some
 * terminals obey like ESC). */
static size_t utf8_len(const unsigned char *p) {
    size_t n;
    unsigned cp;
    if (*p >= 0xc2 && *p <= 0xdf)
        n = 2, cp = *p & 0x1fu;
    else if (*p >= 0xe0 && *p <= 0xef)
        n = 3, cp = *p & 0x0fu;
    else if (*p >= 0xf0 && *p <= 0xf4)
        n = 4, cp = *p & 0x07u;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0; /* also stops at the NUL */
        cp = (cp << 6) | (p[i] & 0x3fu);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f) return 0;
    return n;
}

/* Appends s quoted as a JSON / logfmt string to line (at *len, capacity cap; cap leaves room for
 * the closing quote and the line's tail). Stops before an escape that would not fit. Control
 * characters (C0, DEL, C1) and bytes that are not valid UTF-8 are escaped as \u00XX, so text
 * from outside (object names from a store listing) can neither forge a line nor drive a
 * terminal. */
static void put_quoted(char *line, size_t *len, size_t cap, const char *s) {
    size_t n = *len;
    line[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        size_t k;
        size_t u = *p >= 0x80 ? utf8_len(p) : 0;
        if (u > 0) {
            if (n + u + 1 > cap) break;
            memcpy(line + n, p, u);
            n += u;
            p += u - 1;
            continue;
        }
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
        } else if (*p < 0x20 || *p >= 0x7f) {
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
    if (status_drawn) { /* the log line takes the status line's place */
        write_stderr("\r\033[K", 4);
        status_drawn = 0;
    }
    write_stderr(line, len);
    pthread_mutex_unlock(&log_mu);
}

void log_status(const char *text) {
    char line[1024];
    int n = snprintf(line, sizeof line, "\r%s\033[K", text);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
    pthread_mutex_lock(&log_mu);
    fflush(stderr);
    write_stderr(line, (size_t)n);
    status_drawn = 1;
    pthread_mutex_unlock(&log_mu);
}

void log_status_clear(void) {
    pthread_mutex_lock(&log_mu);
    if (status_drawn) write_stderr("\r\033[K", 4);
    status_drawn = 0;
    pthread_mutex_unlock(&log_mu);
}
