/* retry: backoff arithmetic and the default classification of HTTP failures (retry.h). */
#include "retry.h"
#include "timeutil.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

int64_t retry_backoff_ceiling_ms(const RetryPolicy *p, int attempt) {
    if (attempt < 1 || p->base_ms <= 0) return 0;
    int64_t c = p->base_ms;
    for (int i = 1; i < attempt; i++) {
        if (c >= p->cap_ms || c > INT64_MAX / 2) break;
        c *= 2;
    }
    return c > p->cap_ms ? p->cap_ms : c;
}

int64_t retry_delay_ms(const RetryPolicy *p, int attempt, uint64_t rnd) {
    int64_t c = retry_backoff_ceiling_ms(p, attempt);
    if (c <= 0) return 0;
    return (int64_t)(rnd % ((uint64_t)c + 1));
}

uint64_t retry_random(void) {
    /* splitmix64 over a shared counter seeded from the clock: distinct values across threads
     * without a lock; jitter needs spread, not secrecy */
    static _Atomic uint64_t state;
    uint64_t s = atomic_load(&state);
    if (s == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) | 1;
        uint64_t zero = 0;
        atomic_compare_exchange_strong(&state, &zero, seed);
    }
    uint64_t z = atomic_fetch_add(&state, 0x9e3779b97f4a7c15ull) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int retry_sleep_ms(int64_t ms, const char *what) {
    return sleep_noted(ms > 0 ? ms : 0, what);
}

RetryVerdict retry_classify_http(long status, int curl_code) {
    switch ((CURLcode)curl_code) {
    case CURLE_OK:
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
        return RETRY_YES;
    default:
        /* our own callbacks aborting, TLS verification, bad URLs: trying again cannot help */
        return RETRY_NO;
    }
    /* 501 Not Implemented is an answer, not a passing failure */
    if ((status >= 500 && status != 501) || status == 429 || status == 408) return RETRY_YES;
    return RETRY_NO;
}
