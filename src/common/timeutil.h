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

#endif
