/* test_progress: the progress report's text (bytes in binary units, rate, share, ETA, an unknown
 * total, objects, the summary), the cadence of reports by an injected clock (a terminal's 4 a
 * second, log lines every interval, none after the end) and the reporter's life. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/progress.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define KIB 1024ull
#define MIB 1048576ull

static void test_progress_formats_bytes_in_binary_units(void **state) {
    (void)state;
    char b[32];
    progress_format_bytes(b, sizeof b, 0);
    assert_string_equal(b, "0 B");
    progress_format_bytes(b, sizeof b, 1023);
    assert_string_equal(b, "1023 B");
    progress_format_bytes(b, sizeof b, 1024);
    assert_string_equal(b, "1.0 KiB");
    progress_format_bytes(b, sizeof b, 1536);
    assert_string_equal(b, "1.5 KiB");
    progress_format_bytes(b, sizeof b, MIB - 1); /* rounds to 1024.0 KiB: one unit up */
    assert_string_equal(b, "1.0 MiB");
    progress_format_bytes(b, sizeof b, 1260 * MIB);
    assert_string_equal(b, "1.2 GiB");
    progress_format_bytes(b, sizeof b, 3ull << 40);
    assert_string_equal(b, "3.0 TiB");
    progress_format_bytes(b, sizeof b, UINT64_MAX);
    assert_string_equal(b, "16.0 EiB");
}

static void test_progress_reports_bytes_rate_share_and_eta(void **state) {
    (void)state;
    char buf[256];
    progress_format(buf, sizeof buf, "receiving", 12 * MIB, 48 * MIB, 1, 2000);
    assert_string_equal(buf, "receiving: 12.0 MiB of ~48.0 MiB (25%), 6.0 MiB/s, ETA 6s");
    progress_format(buf, sizeof buf, "receiving", 1 * MIB, 601 * MIB, 1, 1000);
    assert_string_equal(buf, "receiving: 1.0 MiB of ~601.0 MiB (0%), 1.0 MiB/s, ETA 10m00s");
    progress_format(buf, sizeof buf, "receiving", 1 * MIB, 7201 * MIB, 1, 1000);
    assert_string_equal(buf, "receiving: 1.0 MiB of ~7.0 GiB (0%), 1.0 MiB/s, ETA 2h00m");
    /* an exact total (a store listing's sizes): 1260 MiB in 6 s is 210 MiB/s; the 2220 MiB
     * left take 10.6 s, rounded to 11 */
    ProgressSample s = {.what = "downloading",
                        .done = 1260 * MIB,
                        .total = 3480 * MIB,
                        .total_kind = PROGRESS_TOTAL_EXACT,
                        .counts_bytes = 1,
                        .items_done = 2,
                        .items_total = 5,
                        .elapsed_ms = 6000};
    progress_format_sample(buf, sizeof buf, &s);
    assert_string_equal(
        buf, "downloading: 1.2 GiB of 3.4 GiB (36%), 210.0 MiB/s, ETA 11s, 2 of 5 objects");
}

static void test_progress_unknown_total_says_so_without_share_or_eta(void **state) {
    (void)state;
    char buf[256];
    ProgressSample s = {.what = "downloading",
                        .done = 10 * MIB,
                        .total = 4 * MIB, /* the sizes that were listed: no share of them */
                        .total_kind = PROGRESS_TOTAL_UNKNOWN,
                        .counts_bytes = 1,
                        .elapsed_ms = 5000};
    progress_format_sample(buf, sizeof buf, &s);
    assert_string_equal(buf, "downloading: 10.0 MiB of an unknown total (the store listed no size "
                             "for some of the objects), 2.0 MiB/s, 5s so far");
    assert_null(strchr(buf, '%'));
    assert_null(strstr(buf, "ETA"));
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
    assert_string_equal(buf, "receiving: 0 B of ~48.0 MiB (0%), 0 B/s, ETA unknown");
    /* no time passed yet: no rate, no division by zero */
    progress_format(buf, sizeof buf, "receiving", 5 * MIB, 48 * MIB, 1, 0);
    assert_string_equal(buf, "receiving: 5.0 MiB of ~48.0 MiB (10%), 0 B/s, ETA unknown");
    progress_format(buf, sizeof buf, "checking", 0, 0, 0, 65000);
    assert_string_equal(buf, "checking: 1m05s so far");
}

static void test_progress_summary_line(void **state) {
    (void)state;
    char buf[256];
    ProgressSample s = {.what = "downloading",
                        .done = 300 * MIB,
                        .total = 300 * MIB,
                        .total_kind = PROGRESS_TOTAL_EXACT,
                        .counts_bytes = 1,
                        .items_done = 5,
                        .items_total = 5,
                        .elapsed_ms = 1500,
                        .final = 1};
    progress_format_sample(buf, sizeof buf, &s);
    assert_string_equal(
        buf, "downloading: done, 300.0 MiB of 300.0 MiB in 1s, 200.0 MiB/s, 5 of 5 objects");
}

/* ---- cadence by an injected clock, reports captured ---- */

typedef struct {
    int64_t now;
    int n;
    char lines[16][256];
    int tty[16];
} Capture;

static int64_t test_clock(void *ctx) {
    return ((Capture *)ctx)->now;
}

static void capture(void *ctx, const char *line, int tty) {
    Capture *c = ctx;
    if (c->n >= 16) return;
    snprintf(c->lines[c->n], sizeof c->lines[0], "%s", line);
    c->tty[c->n++] = tty;
}

static Progress *start_captured(Capture *c, int tty, int64_t every_ms) {
    ProgressOptions o = {.what = "downloading",
                         .total = 100 * MIB,
                         .total_kind = PROGRESS_TOTAL_EXACT,
                         .counts_bytes = 1,
                         .every_ms = every_ms,
                         .tty = tty,
                         .now_ms = test_clock,
                         .clock_ctx = c,
                         .emit = capture,
                         .emit_ctx = c};
    return progress_start_opts(&o);
}

static void test_progress_log_cadence_and_end(void **state) {
    (void)state;
    Capture c = {.now = 10000};
    Progress *p = start_captured(&c, PROGRESS_TTY_NO, 2000);
    assert_non_null(p);
    progress_set_items(p, 0, 4);
    progress_add(p, 10 * MIB);
    c.now = 11999;
    assert_int_equal(progress_poll(p), 0); /* not due before the interval */
    c.now = 12000;
    assert_int_equal(progress_poll(p), 1);
    assert_string_equal(c.lines[0], "downloading: 10.0 MiB of 100.0 MiB (10%), 5.0 MiB/s, ETA 18s, "
                                    "0 of 4 objects");
    assert_int_equal(c.tty[0], 0);
    c.now = 13000;
    assert_int_equal(progress_poll(p), 0); /* at most one line an interval */
    progress_add(p, 30 * MIB);
    assert_int_equal(progress_item_done(p), 1);
    c.now = 14000;
    assert_int_equal(progress_poll(p), 1);
    assert_string_equal(c.lines[1], "downloading: 40.0 MiB of 100.0 MiB (40%), 10.0 MiB/s, ETA 6s, "
                                    "1 of 4 objects");
    progress_add(p, 60 * MIB);
    progress_set_items(p, 4, 4);
    c.now = 15000;
    progress_end(p);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.lines[2], "downloading: done, 100.0 MiB of 100.0 MiB in 5s, 20.0 MiB/s, "
                                    "4 of 4 objects");
    progress_end(p); /* once */
    c.now = 30000;
    assert_int_equal(progress_poll(p), 0); /* nothing after the end */
    assert_int_equal(c.n, 3);
    progress_finish(p);
}

static void test_progress_tty_redraws_four_times_a_second_and_ends_in_a_log_line(void **state) {
    (void)state;
    Capture c = {.now = 0};
    Progress *p = start_captured(&c, PROGRESS_TTY_YES, 0); /* the terminal's default interval */
    progress_add(p, MIB);
    for (c.now = 0; c.now <= 1000; c.now += 50)
        progress_poll(p);
    assert_int_equal(c.n, 4); /* at 250, 500, 750, 1000 */
    for (int i = 0; i < 4; i++)
        assert_int_equal(c.tty[i], 1);
    progress_end(p);
    assert_int_equal(c.n, 5);
    assert_int_equal(c.tty[4], 0); /* the summary stays in the log */
    progress_finish(p);
}

static void test_progress_finish_without_end_gives_no_summary(void **state) {
    (void)state;
    Capture c = {.now = 0};
    Progress *p = start_captured(&c, PROGRESS_TTY_NO, 1000);
    progress_add(p, MIB);
    progress_finish(p); /* a failed or stopped download: its error says enough */
    assert_int_equal(c.n, 0);
}

static void *adder(void *arg) {
    for (int i = 0; i < 1000; i++)
        progress_add(arg, KIB);
    progress_item_done(arg);
    return NULL;
}

static void test_progress_adds_from_threads(void **state) {
    (void)state;
    Capture c = {.now = 0};
    Progress *p = start_captured(&c, PROGRESS_TTY_NO, 1000);
    progress_set_items(p, 0, 4);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, adder, p), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    c.now = 1000;
    assert_int_equal(progress_poll(p), 1);
    assert_non_null(strstr(c.lines[0], "3.9 MiB of 100.0 MiB (3%)"));
    assert_non_null(strstr(c.lines[0], "4 of 4 objects"));
    progress_finish(p);
}

static void test_progress_start_set_finish_and_null(void **state) {
    (void)state;
    Progress *p = progress_start("work", 100, 1);
    assert_non_null(p);
    progress_set(p, 50);
    progress_finish(p); /* joins the reporter at once, well before its first report */
    progress_set(NULL, 1);
    progress_add(NULL, 1);
    assert_int_equal(progress_item_done(NULL), 0);
    progress_end(NULL);
    assert_int_equal(progress_poll(NULL), 0);
    progress_finish(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_progress_formats_bytes_in_binary_units),
        cmocka_unit_test(test_progress_reports_bytes_rate_share_and_eta),
        cmocka_unit_test(test_progress_unknown_total_says_so_without_share_or_eta),
        cmocka_unit_test(test_progress_without_total_or_past_it_gives_no_eta),
        cmocka_unit_test(test_progress_summary_line),
        cmocka_unit_test(test_progress_log_cadence_and_end),
        cmocka_unit_test(test_progress_tty_redraws_four_times_a_second_and_ends_in_a_log_line),
        cmocka_unit_test(test_progress_finish_without_end_gives_no_summary),
        cmocka_unit_test(test_progress_adds_from_threads),
        cmocka_unit_test(test_progress_start_set_finish_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
