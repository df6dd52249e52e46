/* test_inspect_read: the reading under get, diff and history (src/inspect/inspect_read.h) on a
 * real Local store holding full snapshots and deltas written by the project's own writers
 * (support/restore_fixture.h: key "k<rev>" put at each revision). For every view (the latest, a
 * revision in a delta, a revision inside the only full snapshot, a time, two views on one set and
 * on two sets) the records that reach the sorter are exactly the puts of the keys in range at or
 * before the view's revision, each marked with its views; a gap, a revision beyond the backups
 * and a damaged full snapshot are refused naming what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/restore_fixture.h"
#include "support/testutil.h"

#include "common/err.h"
#include "inspect/inspect_read.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define T0 1700000000LL

/* Full 10 (k2..k10), Incr 11-15, Incr 16-20; with two_sets also Full 20 and Incr 21-22. */
static void fill(RfStore *s, int two_sets) {
    rf_put_full(s, 10, 10, T0, "", NULL, NULL, 0);
    rf_put_delta(s, 11, 15, T0 + 10, NULL, NULL, 0);
    rf_put_delta(s, 16, 20, T0 + 20, NULL, NULL, 0);
    if (!two_sets) return;
    rf_put_full(s, 20, 20, T0 + 30, ".gz", NULL, NULL, 0);
    rf_put_delta(s, 21, 22, T0 + 40, NULL, NULL, 0);
}

/* Reads views into a sorter; returns inspect_read's result, *res filled (the caller frees). The
 * records: bit v of views[rev] for each revision seen (a key k<rev> is put at rev). */
static int read_views_x(RfStore *s, const char *key, int prefix, const InspectView *v, size_t n,
                        int older, InspectResult *res, unsigned views[64], unsigned seen[64]) {
    KeyRange kr;
    assert_int_equal(keyrange_make(key, NULL, prefix, 0, &kr), 0);
    RecSort *sort = NULL;
    assert_int_equal(recsort_new(s->scratch, 0, &sort), 0);
    InspectConfig c = {.store = s->store,
                       .scratch = s->scratch,
                       .max_fetchers = 2,
                       .range = &kr,
                       .keep_values = 1,
                       .views = v,
                       .n_views = n,
                       .older_deltas = older};
    int rc = inspect_read(&c, sort, res);
    memset(views, 0, 64 * sizeof *views);
    memset(seen, 0, 64 * sizeof *seen);
    if (!rc) {
        assert_int_equal(recsort_finish(sort), 0);
        for (;;) {
            const InspectRec *h;
            const uint8_t *k, *val;
            int got = 0;
            assert_int_equal(recsort_next(sort, &h, &k, &val, &got), 0);
            if (!got) break;
            char want[32];
            snprintf(want, sizeof want, "k%lld", (long long)h->main);
            assert_int_equal(h->key_len, strlen(want)); /* the key put at that revision */
            assert_memory_equal(k, want, h->key_len);
            assert_true(h->main > 0 && h->main < 64 && !h->tombstone && h->version == 1);
            seen[h->main]++;
            views[h->main] |= h->views;
        }
    }
    recsort_free(sort);
    keyrange_free(&kr);
    return rc;
}

/* read_views_x without older deltas, each revision read once (overlaps taken once). */
static int read_views(RfStore *s, const char *key, int prefix, const InspectView *v, size_t n,
                      InspectResult *res, unsigned views[64]) {
    unsigned seen[64];
    int rc = read_views_x(s, key, prefix, v, n, 0, res, views, seen);
    for (int r = 0; r < 64; r++)
        if (seen[r] > 1) fail_msg("revision %d read %u times", r, seen[r]);
    return rc;
}

/* views[rev] is bits for every rev in lo..hi and 0 elsewhere. */
static void expect_bits(const unsigned views[64], int lo, int hi, unsigned bits) {
    for (int r = 0; r < 64; r++)
        if ((r >= lo && r <= hi ? bits : 0) != (views[r] & bits))
            fail_msg("revision %d: views %#x, want %#x", r, views[r],
                     r >= lo && r <= hi ? bits : 0);
}

/* Reads every key as of one point (a revision or a time) into res (the caller frees it) and
 * checks that it shows revisions 2..want of the fixture and answers at revision want. */
static void read_all_at(RfStore *s, InspectView at, int64_t want, InspectResult *res) {
    unsigned views[64];
    assert_int_equal(read_views(s, "", 1, &at, 1, res, views), 0);
    expect_bits(views, 2, (int)want, 1);
    assert_int_equal(res->revision[0], want);
}

static void test_latest_and_a_revision_in_a_delta(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill(&s, 0);
    InspectResult res;
    read_all_at(&s, (InspectView){0}, 20, &res);
    assert_int_equal(res.n_objects, 3);
    inspect_result_free(&res);
    read_all_at(&s, (InspectView){.revision = 13}, 13, &res);
    assert_int_equal(res.n_objects, 2); /* the second delta is not needed */
    inspect_result_free(&res);
    rf_close(&s);
}

static void test_revision_inside_the_only_full_snapshot(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill(&s, 0);
    InspectResult res;
    read_all_at(&s, (InspectView){.revision = 5}, 5, &res);
    inspect_result_free(&res);
    rf_close(&s);
}

static void test_one_key_only(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill(&s, 0);
    InspectResult res;
    unsigned views[64];
    InspectView latest = {0};
    assert_int_equal(read_views(&s, "k17", 0, &latest, 1, &res, views), 0);
    expect_bits(views, 17, 17, 1);
    assert_int_equal(res.records, 1);
    inspect_result_free(&res);
    assert_int_equal(read_views(&s, "k1", 1, &latest, 1, &res, views), 0); /* k1x */
    for (int r = 0; r < 64; r++)
        assert_int_equal(views[r] != 0, r >= 10 && r <= 19);
    inspect_result_free(&res);
    rf_close(&s);
}

static void test_two_views_one_set_and_two_sets(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill(&s, 1);
    InspectResult res;
    unsigned views[64];
    InspectView same[2] = {{.revision = 12}, {.revision = 18}};
    assert_int_equal(read_views(&s, "", 1, same, 2, &res, views), 0);
    expect_bits(views, 2, 12, 1);
    expect_bits(views, 2, 18, 2);
    assert_int_equal(res.n_objects, 3); /* one pass: full 10 and its two deltas */
    inspect_result_free(&res);
    /* 12 from the first set, 22 from the second (full 20, gzip): two passes, each with its view's
     * bit; key k22 exists in the second only */
    InspectView apart[2] = {{.revision = 12}, {.revision = 22}};
    assert_int_equal(read_views(&s, "k22", 0, apart, 2, &res, views), 0);
    expect_bits(views, 22, 22, 2);
    expect_bits(views, 0, -1, 1);
    assert_int_equal(res.revision[0], 12);
    assert_int_equal(res.revision[1], 22);
    assert_int_equal(res.n_objects, 4); /* full 10 + delta 11-15, then full 20 + delta 21-22 */
    inspect_result_free(&res);
    rf_close(&s);
}

static void test_time_view(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill(&s, 0);
    InspectResult res;
    /* delta 16-20 named T0+20: revision r recorded at T0 + 20 - (20 - r) = T0 + r */
    read_all_at(&s, (InspectView){.time_ns = (T0 + 17) * 1000000000LL + 500000000LL}, 17, &res);
    inspect_result_free(&res);
    rf_close(&s);
}

/* Full 10, Incr 11-15, Full 20, Incr 21-22: revisions 16-19 are in no delta. A revision there
 * is read from Full 20's db (it holds every revision since it was never compacted); a time
 * after the first set's last delta but before Full 20 was named gets that set's last revision,
 * never a gap error from the second set's deltas. */
static void test_between_a_set_and_the_next_full_snapshot(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    rf_put_full(&s, 10, 10, T0, "", NULL, NULL, 0);
    rf_put_delta(&s, 11, 15, T0 + 10, NULL, NULL, 0);
    rf_put_full(&s, 20, 20, T0 + 30, "", NULL, NULL, 0);
    rf_put_delta(&s, 21, 22, T0 + 40, NULL, NULL, 0);
    InspectResult res;
    unsigned views[64];
    read_all_at(&s, (InspectView){.revision = 17}, 17, &res);
    assert_int_equal(res.n_objects, 1); /* Full 20 alone */
    inspect_result_free(&res);
    read_all_at(&s, (InspectView){.time_ns = (T0 + 25) * 1000000000LL}, 15, &res);
    inspect_result_free(&res);
    InspectView at21 = {.revision = 21}; /* the second set as before */
    assert_int_equal(read_views(&s, "", 1, &at21, 1, &res, views), 0);
    expect_bits(views, 2, 21, 1);
    inspect_result_free(&res);
    rf_close(&s);
}

static void test_refusals(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill(&s, 0);
    InspectResult res;
    unsigned views[64];
    InspectView beyond = {.revision = 21};
    assert_int_equal(read_views(&s, "", 1, &beyond, 1, &res, views), ERR_INVALID);
    assert_true(res.target_refused);
    inspect_result_free(&res);
    char name[256], path[512];
    rf_put_delta(&s, 21, 22, T0 + 40, NULL, NULL, 0);
    rf_put_delta(&s, 23, 24, T0 + 50, NULL, name, sizeof name);
    rf_put_delta(&s, 26, 27, T0 + 60, NULL, NULL, 0); /* 25 missing */
    InspectView latest = {0};
    assert_int_equal(read_views(&s, "", 1, &latest, 1, &res, views), ERR_GAP);
    assert_non_null(strstr(err_msg(), "25"));
    inspect_result_free(&res);
    /* the full snapshot damaged where it lies: the check's verdict names it */
    rf_object_path(&s, "Full-00000000-00000010-1700000000", path, sizeof path);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 4096 + 100, SEEK_SET), 0);
    fputc('X', f);
    fclose(f);
    InspectView at13 = {.revision = 13};
    assert_int_equal(read_views(&s, "", 1, &at13, 1, &res, views), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "Full-00000000-00000010-1700000000"));
    inspect_result_free(&res);
    rf_close(&s);
}

static void test_older_deltas_for_history(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill(&s, 1);
    InspectResult res;
    unsigned views[64], seen[64];
    InspectView latest = {0};
    /* k15 is in full 20's db and in the older set's delta 11-15: found in both, once each */
    assert_int_equal(read_views_x(&s, "k15", 0, &latest, 1, 1, &res, views, seen), 0);
    expect_bits(views, 15, 15, 1);
    assert_int_equal(seen[15], 2);
    assert_int_equal(res.n_objects, 4); /* full 20, delta 21-22, then deltas 11-15 and 16-20 */
    inspect_result_free(&res);
    assert_int_equal(read_views_x(&s, "k15", 0, &latest, 1, 0, &res, views, seen), 0);
    assert_int_equal(seen[15], 1);
    assert_int_equal(res.n_objects, 2);
    inspect_result_free(&res);
    rf_close(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_latest_and_a_revision_in_a_delta),
        cmocka_unit_test(test_revision_inside_the_only_full_snapshot),
        cmocka_unit_test(test_one_key_only),
        cmocka_unit_test(test_two_views_one_set_and_two_sets),
        cmocka_unit_test(test_time_view),
        cmocka_unit_test(test_between_a_set_and_the_next_full_snapshot),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_older_deltas_for_history),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
