/* log: leveled logging in the Go tool's logrus text form
 *   time="2026-11-29T18:00:00Z" level=info msg="..."
 * or one JSON object a line with --log-format=json. Thread-safe; lower layers do not log,
 * commands and the snapshotter/restorer do. Settings are set once before threads start. */
#ifndef ETCDBR_LOG_H
#define ETCDBR_LOG_H

typedef enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 } LogLevel;

/* level: highest level printed; json: nonzero for JSON lines. Output goes to stderr. */
void log_setup(LogLevel level, int json);

/* Parses "error|warn|warning|info|debug|trace" or a logrus number (2 error .. 6 trace).
 * Returns 0 and sets *out, or ERR_INVALID. */
int log_parse_level(const char *s, LogLevel *out);

void log_msg(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A terminal status line (progress.h): writes "\r<text>\033[K" to stderr under the log's lock, so
 * that it never splices into a log line; the next log line erases it first (it is redrawn by its
 * owner at its next tick). log_status_clear erases it now (nothing when none is drawn). Call
 * them only when stderr is a terminal. */
void log_status(const char *text);
void log_status_clear(void);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
