/* test_restore_plan: the plan stage of a restore (src/restore/restore_plan.h) on a real Local
 * store holding full snapshots and deltas written by the project's own writers
 * (support/restore_fixture.h): the newest full snapshot at or before the target and the deltas
 * that continue it, point in time by revision and by time, a gap refused naming both objects
 * and the missing revisions, a target beyond the backups refused as a usage error, deltas of
 * another history never combined with the set, and the restored members' identity checked
 * against the backed-up cluster's members. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/restore_fixture.h"
#include "support/testutil.h"

#include "common/err.h"
#include "format/bbolt.h"
#include "restore/cluster.h"
#include "restore/restore_plan.h"

#include <stdio.h>
#include <string.h>

#define T0 1700000000LL

/* Full 5, Incr 6-8, Incr 9-12, Full 12, Incr 13-15: two sets. */
static void fill_two_sets(RfStore *s) {
    rf_put_full(s, 5, 5, T0, "", NULL, NULL, 0);
    rf_put_delta(s, 6, 8, T0 + 10, NULL, NULL, 0);
    rf_put_delta(s, 9, 12, T0 + 20, NULL, NULL, 0);
    rf_put_full(s, 12, 12, T0 + 30, "", NULL, NULL, 0);
    rf_put_delta(s, 13, 15, T0 + 40, NULL, NULL, 0);
}

/* Full 5, Incr 6-8, Full 12, Incr 13-15: the first set's deltas end before Full 12, so revisions
 * 9-11 are in no delta. The delta's and Full 12's names into d and full12 (may be NULL). */
static void fill_set_ending_early(RfStore *s, char *d, size_t dn, char *full12, size_t fn) {
    rf_put_full(s, 5, 5, T0, "", NULL, NULL, 0);
    rf_put_delta(s, 6, 8, T0 + 10, NULL, d, dn);
    rf_put_full(s, 12, 12, T0 + 30, "", NULL, full12, fn);
    rf_put_delta(s, 13, 15, T0 + 40, NULL, NULL, 0);
}

static void plan_ok(RfStore *s, int64_t rev, int64_t time_ns, RestorePlan *p) {
    RestoreTarget t = {s->store, rev, time_ns, 0};
    if (restore_plan_make(&t, p)) fail_msg("restore_plan_make: %s", err_msg());
}

static void test_plan_latest_set_without_target(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill_two_sets(&s);
    RestorePlan p;
    plan_ok(&s, 0, 0, &p);
    assert_int_equal(p.full->last_revision, 12);
    assert_int_equal(p.n_deltas, 1);
    assert_int_equal(p.deltas[0].start_revision, 13);
    assert_int_equal(p.store_last, 15);
    assert_false(p.target_refused);
    restore_plan_free(&p);
    rf_close(&s);
}

static void test_plan_newest_full_at_or_before_target_revision(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill_two_sets(&s);
    RestorePlan p;
    plan_ok(&s, 10, 0, &p); /* Full 12 is past it: Full 5 and both deltas up to 10 */
    assert_int_equal(p.full->last_revision, 5);
    assert_int_equal(p.n_deltas, 2);
    assert_int_equal(p.deltas[0].last_revision, 8);
    assert_int_equal(p.deltas[1].last_revision, 12);
    restore_plan_free(&p);
    plan_ok(&s, 7, 0, &p); /* the delta 9-12 starts after the target: left out */
    assert_int_equal(p.full->last_revision, 5);
    assert_int_equal(p.n_deltas, 1);
    assert_int_equal(p.deltas[0].start_revision, 6);
    restore_plan_free(&p);
    plan_ok(&s, 12, 0, &p); /* exactly a full snapshot: no delta */
    assert_int_equal(p.full->last_revision, 12);
    assert_int_equal(p.n_deltas, 0);
    restore_plan_free(&p);
    rf_close(&s);
}

static void test_plan_point_in_time_by_time(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill_two_sets(&s);
    RestorePlan p;
    /* before Full 12 was named (T0 + 30): the first set */
    plan_ok(&s, 0, (T0 + 25) * 1000000000LL, &p);
    assert_int_equal(p.full->last_revision, 5);
    assert_int_equal(p.n_deltas, 2); /* not the next set's delta 13-15 */
    assert_int_equal(p.next_full->last_revision, 12);
    restore_plan_free(&p);
    plan_ok(&s, 0, (T0 + 45) * 1000000000LL, &p);
    assert_int_equal(p.full->last_revision, 12);
    restore_plan_free(&p);
    RestoreTarget t = {s.store, 0, (T0 - 5) * 1000000000LL, 0}; /* before every full snapshot */
    assert_int_equal(restore_plan_make(&t, &p), ERR_NOT_FOUND);
    assert_non_null(strstr(err_msg(), "target time"));
    restore_plan_free(&p);
    rf_close(&s);
}

/* A time in the second the next full snapshot is named in may be after it (names are whole
 * seconds): the deltas that continue the set past it without a gap are taken too, their events
 * filtered by time later; a next set's delta after a gap is not. */
static void test_plan_time_in_the_next_full_snapshots_second(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill_two_sets(&s);
    RestorePlan p;
    plan_ok(&s, 0, (T0 + 30) * 1000000000LL + 700000000LL, &p);
    assert_int_equal(p.full->last_revision, 5);
    assert_int_equal(p.next_full->last_revision, 12);
    assert_int_equal(p.n_deltas, 3); /* 6-8, 9-12 and the next set's 13-15 */
    assert_int_equal(p.deltas[2].start_revision, 13);
    restore_plan_free(&p);
    plan_ok(&s, 0, (T0 + 29) * 1000000000LL + 700000000LL, &p); /* the second before: not */
    assert_int_equal(p.n_deltas, 2);
    restore_plan_free(&p);
    rf_close(&s);

    rf_open(&s); /* the set's deltas end at 8, before Full 12: 13-15 would leave a gap */
    fill_set_ending_early(&s, NULL, 0, NULL, 0);
    plan_ok(&s, 0, (T0 + 30) * 1000000000LL + 700000000LL, &p);
    assert_int_equal(p.full->last_revision, 5);
    assert_int_equal(p.n_deltas, 1);
    restore_plan_free(&p);
    rf_close(&s);
}

static void test_plan_refuses_a_gap_naming_both_objects(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    char d1[256], d2[256];
    rf_put_full(&s, 5, 5, T0, "", NULL, NULL, 0);
    rf_put_delta(&s, 6, 8, T0 + 10, NULL, d1, sizeof d1);
    rf_put_delta(&s, 10, 12, T0 + 20, NULL, d2, sizeof d2); /* revision 9 missing */
    RestoreTarget t = {s.store, 0, 0, 0};
    RestorePlan p;
    assert_int_equal(restore_plan_make(&t, &p), ERR_GAP);
    const char *m = err_msg();
    assert_non_null(strstr(m, "revisions 9-9 are missing"));
    assert_non_null(strstr(m, d1));
    assert_non_null(strstr(m, d2));
    restore_plan_free(&p);
    RestorePlan q; /* a gap after the target does not matter */
    plan_ok(&s, 8, 0, &q);
    assert_int_equal(q.n_deltas, 1);
    restore_plan_free(&q);
    rf_close(&s);
}

static void test_plan_refuses_a_gap_after_the_full_snapshot(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    char full[256], d[256];
    rf_put_full(&s, 5, 5, T0, "", NULL, full, sizeof full);
    rf_put_delta(&s, 8, 9, T0 + 10, NULL, d, sizeof d);
    RestoreTarget t = {s.store, 0, 0, 0};
    RestorePlan p;
    assert_int_equal(restore_plan_make(&t, &p), ERR_GAP);
    assert_non_null(strstr(err_msg(), "revisions 6-7"));
    assert_non_null(strstr(err_msg(), full));
    assert_non_null(strstr(err_msg(), d));
    restore_plan_free(&p);
    rf_close(&s);
}

static void test_plan_refuses_a_target_beyond_the_backups(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    fill_two_sets(&s);
    RestoreTarget t = {s.store, 16, 0, 0};
    RestorePlan p;
    assert_int_equal(restore_plan_make(&t, &p), ERR_INVALID);
    assert_true(p.target_refused);
    assert_non_null(strstr(err_msg(), "end at revision 15"));
    restore_plan_free(&p);
    RestoreTarget bump = {s.store, 0, 0, INT64_MAX - 10}; /* 15 + bump overflows */
    assert_int_equal(restore_plan_make(&bump, &p), ERR_INVALID);
    assert_true(p.target_refused);
    restore_plan_free(&p);
    RestoreTarget early = {s.store, 4, 0, 0}; /* before the first full snapshot */
    assert_int_equal(restore_plan_make(&early, &p), ERR_NOT_FOUND);
    assert_false(p.target_refused);
    restore_plan_free(&p);
    rf_close(&s);
}

/* Full 5, Incr 6-8, Full 12, Incr 13-15: revisions 9-11 are in no delta. A revision there is
 * refused naming both sets' ends; a time between Incr 6-8 and Full 12 plans the first set alone
 * (the second set's delta is not a gap in it). */
static void test_plan_between_a_set_and_the_next_full_snapshot(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    char d[256], full12[256];
    fill_set_ending_early(&s, d, sizeof d, full12, sizeof full12);
    RestoreTarget t = {s.store, 10, 0, 0};
    RestorePlan p;
    assert_int_equal(restore_plan_make(&t, &p), ERR_INVALID);
    assert_true(p.target_refused);
    assert_non_null(strstr(err_msg(), "in no delta"));
    assert_non_null(strstr(err_msg(), d));
    assert_non_null(strstr(err_msg(), full12));
    assert_int_equal(p.next_full->last_revision, 12);
    restore_plan_free(&p);
    plan_ok(&s, 0, (T0 + 25) * 1000000000LL, &p);
    assert_int_equal(p.full->last_revision, 5);
    assert_int_equal(p.n_deltas, 1);
    assert_int_equal(p.store_last, 8);
    restore_plan_free(&p);
    plan_ok(&s, 0, (T0 + 45) * 1000000000LL, &p); /* after Full 12: the second set */
    assert_int_equal(p.full->last_revision, 12);
    assert_int_equal(p.n_deltas, 1);
    assert_null(p.next_full);
    restore_plan_free(&p);
    rf_close(&s);
}

/* A delta of another history after a tagged full snapshot is not this set's: left out, so the
 * set ends at the full snapshot's own history (and the target beyond it is refused). */
static void test_plan_never_combines_another_history(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    const char *a = "00000000000000aa", *b = "00000000000000bb";
    rf_put_full(&s, 5, 5, T0, "", a, NULL, 0);
    rf_put_delta(&s, 6, 8, T0 + 10, a, NULL, 0);
    rf_put_delta(&s, 9, 12, T0 + 20, b, NULL, 0);
    RestorePlan p;
    plan_ok(&s, 0, 0, &p);
    assert_string_equal(p.full->history, a);
    assert_int_equal(p.n_deltas, 1);
    assert_string_equal(p.deltas[0].history, a);
    assert_int_equal(p.store_last, 8);
    restore_plan_free(&p);
    RestoreTarget t = {s.store, 10, 0, 0};
    assert_int_equal(restore_plan_make(&t, &p), ERR_INVALID);
    restore_plan_free(&p);
    rf_close(&s);
}

/* The restored member's ID (its peer URLs with the token) is a member of the backed-up cluster:
 * refused in mode 2 naming the member and the ID, a warning in mode 1; another token passes. */
static void test_plan_check_token_refuses_the_old_clusters_identity(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    const char *urls = "http://127.0.0.1:2380";
    char id[17], path[400];
    snprintf(id, sizeof id, "%llx", (unsigned long long)cluster_member_id(urls, "old-token"));
    snprintf(path, sizeof path, "%s/members.db", s.dir);
    rf_write_db(path, 5, id);
    BboltDb *db = NULL;
    assert_int_equal(bbolt_open(path, 0, &db), 0);
    RestoreMember m = {"m1", "/nonexistent", urls};
    int refused = 0;
    assert_int_equal(restore_plan_check_token(db, &m, 1, "old-token", 2, &refused), ERR_INVALID);
    assert_true(refused);
    assert_non_null(strstr(err_msg(), id));
    assert_non_null(strstr(err_msg(), "member m1"));
    refused = 0;
    assert_int_equal(restore_plan_check_token(db, &m, 1, "old-token", 1, &refused), 0);
    assert_int_equal(restore_plan_check_token(db, &m, 1, "new-token", 2, &refused), 0);
    assert_int_equal(restore_plan_check_token(db, &m, 1, "old-token", 0, &refused), 0);
    assert_false(refused);
    bbolt_close(db);
    rf_close(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_latest_set_without_target),
        cmocka_unit_test(test_plan_newest_full_at_or_before_target_revision),
        cmocka_unit_test(test_plan_point_in_time_by_time),
        cmocka_unit_test(test_plan_time_in_the_next_full_snapshots_second),
        cmocka_unit_test(test_plan_refuses_a_gap_naming_both_objects),
        cmocka_unit_test(test_plan_refuses_a_gap_after_the_full_snapshot),
        cmocka_unit_test(test_plan_refuses_a_target_beyond_the_backups),
        cmocka_unit_test(test_plan_between_a_set_and_the_next_full_snapshot),
        cmocka_unit_test(test_plan_never_combines_another_history),
        cmocka_unit_test(test_plan_check_token_refuses_the_old_clusters_identity),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
