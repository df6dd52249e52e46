/* test_snapshotter: the snapshotter's retry decisions (snapshotter_backoff_next) against the Go
 * tool's backoff: 1 s x multiplier, growing for attempt-limit + 1 retries, then the threshold. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "backup/snapshotter.h"

static void test_backoff_defaults_double_to_the_threshold_then_stay(void **state) {
    (void)state;
    SnapshotterConfig cfg = {0};
    int64_t delay = 1000, attempt = 0;
    const int64_t want[] = {2000, 4000, 8000, 16000, 32000, 64000, 128000, 128000, 128000};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        assert_int_equal(snapshotter_backoff_next(&cfg, &delay, &attempt), want[i]);
}

static void test_backoff_multiplier_is_a_factor_not_the_first_delay(void **state) {
    (void)state;
    SnapshotterConfig cfg = {
        .backoff_multiplier = 3, .backoff_attempt_limit = 2, .backoff_max_ms = 60000};
    int64_t delay = 1000, attempt = 0;
    const int64_t want[] = {3000, 9000, 27000, 60000, 60000};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        assert_int_equal(snapshotter_backoff_next(&cfg, &delay, &attempt), want[i]);
    /* a cap below the growth: capped at once, never above */
    SnapshotterConfig small = {
        .backoff_multiplier = 10, .backoff_attempt_limit = 6, .backoff_max_ms = 2000};
    delay = 1000;
    attempt = 0;
    for (int i = 0; i < 10; i++)
        assert_int_equal(snapshotter_backoff_next(&small, &delay, &attempt), 2000);
    /* multiplier 1: a steady 1 s until the limit, then the threshold */
    SnapshotterConfig one = {
        .backoff_multiplier = 1, .backoff_attempt_limit = 1, .backoff_max_ms = 5000};
    delay = 1000;
    attempt = 0;
    assert_int_equal(snapshotter_backoff_next(&one, &delay, &attempt), 1000);
    assert_int_equal(snapshotter_backoff_next(&one, &delay, &attempt), 1000);
    assert_int_equal(snapshotter_backoff_next(&one, &delay, &attempt), 5000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_defaults_double_to_the_threshold_then_stay),
        cmocka_unit_test(test_backoff_multiplier_is_a_factor_not_the_first_delay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
