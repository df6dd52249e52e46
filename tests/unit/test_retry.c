/* test_retry: backoff ceilings and full-jitter delays (pure), the default classification of HTTP
 * failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/retry.h"

#include <curl/curl.h>

static void test_backoff_ceiling_doubles_up_to_cap(void **state) {
    (void)state;
    RetryPolicy p = {6, 1000, 16000};
    assert_int_equal(retry_backoff_ceiling_ms(&p, 0), 0);
    assert_int_equal(retry_backoff_ceiling_ms(&p, 1), 1000);
    assert_int_equal(retry_backoff_ceiling_ms(&p, 2), 2000);
    assert_int_equal(retry_backoff_ceiling_ms(&p, 3), 4000);
    assert_int_equal(retry_backoff_ceiling_ms(&p, 5), 16000);
    assert_int_equal(retry_backoff_ceiling_ms(&p, 6), 16000);
    assert_int_equal(retry_backoff_ceiling_ms(&p, 1000), 16000); /* no overflow */
    RetryPolicy odd = {3, 300, 1000};
    assert_int_equal(retry_backoff_ceiling_ms(&odd, 3), 1000); /* 1200 capped */
    RetryPolicy none = {1, 0, 0};
    assert_int_equal(retry_backoff_ceiling_ms(&none, 2), 0);
}

static void test_full_jitter_spans_zero_to_ceiling(void **state) {
    (void)state;
    RetryPolicy p = {6, 1000, 16000};
    assert_int_equal(retry_delay_ms(&p, 2, 0), 0);
    assert_int_equal(retry_delay_ms(&p, 2, 2000), 2000);
    assert_int_equal(retry_delay_ms(&p, 2, 2001), 0);
    assert_int_equal(retry_delay_ms(&p, 2, 1234), 1234);
    assert_int_equal(retry_delay_ms(&p, 9, UINT64_MAX), (int64_t)(UINT64_MAX % 16001));
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 2000; i++) {
        int64_t d = retry_delay_ms(&p, 3, retry_random());
        assert_true(d >= 0 && d <= 4000);
        if (d < lo) lo = d;
        if (d > hi) hi = d;
    }
    assert_true(lo < 1000 && hi > 3000); /* spread over the range, not a constant */
}

static void test_classify_retries_5xx_429_and_connection_errors(void **state) {
    (void)state;
    assert_int_equal(retry_classify_http(500, 0), RETRY_YES);
    assert_int_equal(retry_classify_http(503, 0), RETRY_YES);
    assert_int_equal(retry_classify_http(501, 0), RETRY_NO); /* Not Implemented: an answer */
    assert_int_equal(retry_classify_http(429, 0), RETRY_YES);
    assert_int_equal(retry_classify_http(408, 0), RETRY_YES);
    assert_int_equal(retry_classify_http(0, CURLE_COULDNT_CONNECT), RETRY_YES);
    assert_int_equal(retry_classify_http(0, CURLE_OPERATION_TIMEDOUT), RETRY_YES);
    assert_int_equal(retry_classify_http(200, CURLE_RECV_ERROR), RETRY_YES);
}

static void test_classify_does_not_retry_client_errors(void **state) {
    (void)state;
    assert_int_equal(retry_classify_http(403, 0), RETRY_NO);
    assert_int_equal(retry_classify_http(404, 0), RETRY_NO);
    assert_int_equal(retry_classify_http(400, 0), RETRY_NO);
    assert_int_equal(retry_classify_http(0, CURLE_WRITE_ERROR), RETRY_NO);
    assert_int_equal(retry_classify_http(0, CURLE_PEER_FAILED_VERIFICATION), RETRY_NO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_ceiling_doubles_up_to_cap),
        cmocka_unit_test(test_full_jitter_spans_zero_to_ceiling),
        cmocka_unit_test(test_classify_retries_5xx_429_and_connection_errors),
        cmocka_unit_test(test_classify_does_not_retry_client_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
