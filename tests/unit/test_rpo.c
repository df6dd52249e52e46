/* test_rpo: the recovery point behind etcdbr_snapshot_rpo_seconds (sidecar/rpo.h): unknown (NaN)
 * until a snapshotter starts and after it stops, counted from the start until the first
 * catch-up, only ever moved forward, never negative. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "sidecar/rpo.h"

static void test_unknown_until_started(void **state) {
    (void)state;
    Rpo r = {0};
    assert_true(isnan(rpo_seconds(&r, 5000)));
    rpo_caught_up(&r, 4000); /* a late event of a stopped snapshotter: still unknown */
    assert_true(isnan(rpo_seconds(&r, 5000)));
}

static void test_counts_from_start_until_first_catch_up(void **state) {
    (void)state;
    Rpo r = {0};
    rpo_started(&r, 10000);
    assert_true(rpo_seconds(&r, 10000) == 0.0);
    /* the store fails from the start: the value rises with time */
    assert_true(rpo_seconds(&r, 13500) == 3.5);
    assert_true(rpo_seconds(&r, 70000) == 60.0);
    rpo_caught_up(&r, 69000); /* a delta cut at 69 s was stored */
    assert_true(rpo_seconds(&r, 70000) == 1.0);
}

static void test_only_moves_forward(void **state) {
    (void)state;
    Rpo r = {0};
    rpo_started(&r, 1000);
    rpo_caught_up(&r, 8000);
    rpo_caught_up(&r, 5000); /* a slow upload cut earlier ends later: ignored */
    assert_true(rpo_seconds(&r, 9000) == 1.0);
    rpo_caught_up(&r, 9000); /* idle period end */
    assert_true(rpo_seconds(&r, 9000) == 0.0);
}

static void test_never_negative(void **state) {
    (void)state;
    Rpo r = {0};
    rpo_started(&r, 1000);
    rpo_caught_up(&r, 3000); /* "now" read before the event's time on another thread */
    assert_true(rpo_seconds(&r, 2500) == 0.0);
}

static void test_stop_makes_it_unknown_and_restart_counts_again(void **state) {
    (void)state;
    Rpo r = {0};
    rpo_started(&r, 1000);
    rpo_caught_up(&r, 2000);
    rpo_stopped(&r); /* leadership lost: a follower alerts on nothing */
    assert_true(isnan(rpo_seconds(&r, 100000)));
    rpo_caught_up(&r, 3000);
    assert_true(isnan(rpo_seconds(&r, 100000)));
    rpo_started(&r, 50000); /* leader again: counted from then, not from the old catch-up */
    assert_true(rpo_seconds(&r, 52000) == 2.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_until_started),
        cmocka_unit_test(test_counts_from_start_until_first_catch_up),
        cmocka_unit_test(test_only_moves_forward),
        cmocka_unit_test(test_never_negative),
        cmocka_unit_test(test_stop_makes_it_unknown_and_restart_counts_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
