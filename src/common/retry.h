/* retry: one retry policy for every remote call (object stores now, anything over HTTP later):
 * exponential backoff with full jitter (AWS's "Exponential Backoff And Jitter"), a bounded number
 * of attempts, and a classification of a failed HTTP exchange into retryable (5xx but 501, 429,
 * timeouts, connection errors) or not, which a provider may refine with a hook. The delay
 * computation is pure (random input passed in) so tests can pin it. Thread-safe: no state but the
 * caller's. */
#ifndef ETCDBR_RETRY_H
#define ETCDBR_RETRY_H

#include <stdint.h>

typedef struct RetryPolicy {
    int attempts;    /* total tries, >= 1 (1 = no retry) */
    int64_t base_ms; /* ceiling of the first backoff */
    int64_t cap_ms;  /* no backoff ceiling grows beyond this */
} RetryPolicy;

/* 6 tries over up to ~1+2+4+8+16 s, like the Go tool's per-chunk retry (docs/go-tool.md §3.4). */
#define RETRY_POLICY_DEFAULT                                                                       \
    { 6, 1000, 16000 }

/* Ceiling of the backoff after failed try number attempt (1-based): min(cap, base * 2^(attempt-1)).
 * 0 for attempt < 1 or a policy with base <= 0. */
int64_t retry_backoff_ceiling_ms(const RetryPolicy *p, int attempt);

/* Full jitter: a delay uniform in [0, ceiling] chosen by rnd (any 64-bit value; rnd % (ceiling+1)).
 */
int64_t retry_delay_ms(const RetryPolicy *p, int attempt, uint64_t rnd);

/* A random 64-bit value for retry_delay_ms (thread-safe, not for cryptography). */
uint64_t retry_random(void);

/* Sleeps ms milliseconds before a retry, ending early when the process stops (SIGTERM/SIGINT,
 * timeutil.h process_stop_flag); a sleep over 5 s logs what it waits for (what, may be NULL).
 * 1 when stopped (the caller gives up with ERR_CANCELED), else 0. */
int retry_sleep_ms(int64_t ms, const char *what);

/* Verdict on one failed exchange. */
typedef enum { RETRY_NO = 0, RETRY_YES = 1, RETRY_DEFAULT = -1 } RetryVerdict;

/* The default classification: curl_code (a CURLcode, 0 = the exchange completed) and HTTP status
 * (0 if none). Connection errors, timeouts, resets, 5xx (but 501 Not Implemented), 429 and 408 are
 * retryable; any other status (4xx: auth, missing objects, bad requests) is not. */
RetryVerdict retry_classify_http(long status, int curl_code);

/* Per-provider refinement: returns RETRY_YES/RETRY_NO to decide, or RETRY_DEFAULT to fall back
 * to retry_classify_http. body is the (bounded, NUL-terminated, maybe empty) error response. */
typedef RetryVerdict (*RetryClassifyHook)(void *ctx, long status, int curl_code, const char *body);

#endif
