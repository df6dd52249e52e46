/* test_progress: the progress report's text (bytes, rate, share, ETA) and the reporter's life. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/progress.h"

#include <string.h>

#define MIB 1048576ull

static void test_progress_reports_bytes_rate_share_and_eta(void **state) {
    (void)state;
    char buf[256];
    progress_format(buf, sizeof buf, "receiving", 12 * MIB, 48 * MIB, 1, 2000);
    assert_string_equal(buf, "receiving: 12.0 MiB of ~48.0 MiB (25%), 6.0 MiB/s, ETA 6s");
    progress_format(buf, sizeof buf, "receiving", 1 * MIB, 601 * MIB, 1, 1000);
    assert_string_equal(buf, "receiving: 1.0 MiB of ~601.0 MiB (0%), 1.0 MiB/s, ETA 10m00s");
    progress_format(buf, sizeof buf, "receiving", 1 * MIB, 7201 * MIB, 1, 1000);
    assert_string_equal(buf, "receiving: 1.0 MiB of ~7201.0 MiB (0%), 1.0 MiB/s, ETA 2h00m");
}

static void test_progress_without_total_or_past_it_gives_no_eta(void **state) {
    (void)state;
    char buf[256];
    progress_format(buf, sizeof buf, "storing", 10 * MIB, 0, 1, 5000);
    assert_string_equal(buf, "storing: 10.0 MiB, 2.0 MiB/s, 5s so far");
    /* the total is etcd's dbSize before the stream: the db may have grown since */
    progress_format(buf, sizeof buf, "receiving", 50 * MIB, 48 * MIB, 1, 5000);
    assert_string_equal(buf, "receiving: 50.0 MiB of ~48.0 MiB (100%), 10.0 MiB/s");
    /* nothing received yet (a stalled stream): no rate to divide by */
    progress_format(buf, sizeof buf, "receiving", 0, 48 * MIB, 1, 5000);
    assert_string_equal(buf, "receiving: 0.0 MiB of ~48.0 MiB (0%), 0.0 MiB/s, ETA unknown");
    progress_format(buf, sizeof buf, "checking", 0, 0, 0, 65000);
    assert_string_equal(buf, "checking: 1m05s so far");
}

static void test_progress_start_set_finish_and_null(void **state) {
    (void)state;
    Progress *p = progress_start("work", 100, 1);
    assert_non_null(p);
    progress_set(p, 50);
    progress_finish(p); /* joins the reporter at once, well before its first report */
    progress_set(NULL, 1);
    progress_finish(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_progress_reports_bytes_rate_share_and_eta),
        cmocka_unit_test(test_progress_without_total_or_past_it_gives_no_eta),
        cmocka_unit_test(test_progress_start_set_finish_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
