/* test_verifier: the pure parts of the verifier (src/restore/verifier.h): the sets it plans from a
 * listing (latest only or all), contiguity faults (gaps named with both objects, overlaps as
 * warnings), objects of another history inside a set, the verdict, and the text and JSON reports
 * (never "verified" for a failed or uncompared check), and the server's etcdbr_verify_* metrics.
 * Lists are built from names with snapname_parse and sorted with snapname_sort, as store_list
 * returns them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sidecar/server_verify.h"
#include "common/err.h"
#include "restore/verifier.h"
#include "server/metrics.h"
#include "store/snapname.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H1 "1111111111111111"
#define H2 "2222222222222222"

typedef struct {
    const char *key;
    const char *history;
} Obj;

static size_t build(const Obj *objs, Snapshot *out) {
    size_t n = 0;
    for (; objs[n].key; n++) {
        assert_int_equal(snapname_parse(objs[n].key, "", &out[n]), 0);
        snprintf(out[n].history, sizeof out[n].history, "%s",
                 objs[n].history ? objs[n].history : "");
    }
    snapname_sort(out, n);
    return n;
}

static const VerifyFault *find_fault(const VerifyReport *r, VerifyFaultKind k) {
    for (size_t i = 0; i < r->n_faults; i++)
        if (r->faults[i].kind == k) return &r->faults[i];
    return NULL;
}

static void plan(const Obj *objs, int all, VerifyReport *r, VerifyPlanSet **ps, size_t *n_sets) {
    static Snapshot snaps[32];
    size_t n = build(objs, snaps);
    memset(r, 0, sizeof *r);
    assert_int_equal(verify_plan(snaps, n, all, ps, n_sets, r), 0);
}

static void test_verify_contiguous_latest_set_has_no_fault(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000011-00000020-101.gz", H1},
                  {"v2/Incr-00000021-00000025-102.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    assert_int_equal(n, 1);
    assert_int_equal(ps[0].n_deltas, 2);
    assert_int_equal(r.n_faults, 0);
    assert_int_equal(r.latest_revision, 25);
    assert_string_equal(r.latest_history, H1);
    assert_true(r.sets[0].ok && r.sets[0].latest);
    assert_true(verify_report_passed(&r));
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_gap_names_missing_revisions_and_both_objects(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000011-00000020-101.gz", H1},
                  {"v2/Incr-00000026-00000030-103.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    const VerifyFault *f = find_fault(&r, VERIFY_GAP);
    assert_non_null(f);
    assert_false(f->warning);
    assert_int_equal(f->from, 21);
    assert_int_equal(f->to, 25);
    assert_string_equal(f->other, "v2/Incr-00000011-00000020-101.gz");
    assert_string_equal(f->object, "v2/Incr-00000026-00000030-103.gz");
    assert_non_null(strstr(f->message, "revisions 21-25 are missing between "
                                       "v2/Incr-00000011-00000020-101.gz and "
                                       "v2/Incr-00000026-00000030-103.gz"));
    assert_false(r.sets[0].ok);
    assert_false(verify_report_passed(&r));
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_gap_after_full_snapshot(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000013-00000020-101.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    const VerifyFault *f = find_fault(&r, VERIFY_GAP);
    assert_non_null(f);
    assert_int_equal(f->from, 11);
    assert_int_equal(f->to, 12);
    assert_string_equal(f->other, "v2/Full-00000000-00000010-100.gz");
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_overlap_is_a_warning(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000011-00000020-101.gz", H1},
                  {"v2/Incr-00000018-00000030-102.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    assert_int_equal(r.n_faults, 1);
    assert_int_equal(r.n_errors, 0);
    const VerifyFault *f = find_fault(&r, VERIFY_OVERLAP);
    assert_non_null(f);
    assert_true(f->warning);
    assert_int_equal(f->from, 18);
    assert_int_equal(f->to, 20);
    assert_true(verify_report_passed(&r));
    assert_int_equal(r.latest_revision, 30);
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

/* A store written under encryption keys, then an unencrypted object after an encrypted one in
 * the same set: a snapshotter restarted without the keys, or an object planted by whoever can
 * write the store (no key needed, and a restore applies it). Encryption is meant to make such a
 * change detectable (docs/encryption.md), so it is a fault; unencrypted objects before the first
 * encrypted one (encryption turned on later) are not. */
static void test_verify_unencrypted_object_after_encrypted_one_is_a_fault(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000011-00000020-101.enc.gz", H1},
                  {"v2/Incr-00000021-00000025-102.gz", NULL},
                  {"v2/Incr-00000026-00000030-103.enc.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    assert_int_equal(ps[0].n_deltas, 3);
    assert_int_equal(r.n_faults, 1);
    const VerifyFault *f = find_fault(&r, VERIFY_UNENCRYPTED_AFTER_ENCRYPTED);
    assert_non_null(f);
    assert_false(f->warning);
    assert_string_equal(f->object, "v2/Incr-00000021-00000025-102.gz");
    assert_string_equal(f->other, "v2/Incr-00000011-00000020-101.enc.gz");
    assert_non_null(strstr(f->message, "not encrypted"));
    assert_string_equal(verify_fault_kind_name(f->kind), "unencrypted-after-encrypted");
    assert_false(r.sets[0].ok);
    assert_false(verify_report_passed(&r));
    verify_plan_free(ps, n);
    verify_report_free(&r);
    /* an encrypted full snapshot and a plain delta after it */
    Obj objs2[] = {{"v2/Full-00000000-00000010-100.enc.zst", H1},
                   {"v2/Incr-00000011-00000020-101.gz", H1},
                   {NULL, NULL}};
    plan(objs2, 0, &r, &ps, &n);
    assert_non_null(find_fault(&r, VERIFY_UNENCRYPTED_AFTER_ENCRYPTED));
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_no_full_snapshot_is_a_fault(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Incr-00000011-00000020-101.gz", H1}, {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    assert_int_equal(n, 0);
    assert_non_null(find_fault(&r, VERIFY_NO_FULL));
    assert_false(verify_report_passed(&r));
    verify_report_free(&r);
}

static void test_verify_delta_of_other_history_inside_set(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000011-00000020-101.gz", H1},
                  {"v2/Incr-00000015-00000022-101.gz", H2},
                  {"v2/Incr-00000021-00000025-102.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    assert_int_equal(ps[0].n_deltas, 2); /* the intruder is not part of the set */
    const VerifyFault *f = find_fault(&r, VERIFY_OTHER_HISTORY);
    assert_non_null(f);
    assert_string_equal(f->object, "v2/Incr-00000015-00000022-101.gz");
    assert_non_null(strstr(f->message, "belongs to history " H2
                                       " but the set of v2/Full-00000000-00000010-100.gz is "
                                       "history " H1));
    assert_null(find_fault(&r, VERIFY_GAP));
    assert_false(verify_report_passed(&r));
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_untagged_full_with_two_histories_of_deltas(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", NULL},
                  {"v2/Incr-00000011-00000020-101.gz", H1},
                  {"v2/Incr-00000021-00000025-102.gz", H2},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    const VerifyFault *f = find_fault(&r, VERIFY_OTHER_HISTORY);
    assert_non_null(f);
    assert_string_equal(f->object, "v2/Incr-00000021-00000025-102.gz");
    assert_string_equal(r.sets[0].history, H1);
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_untagged_objects_combine_with_a_history(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", NULL},
                  {"v2/Incr-00000011-00000020-101.gz", NULL},
                  {"v2/Incr-00000021-00000025-102.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 0, &r, &ps, &n);
    assert_int_equal(r.n_faults, 0);
    assert_int_equal(ps[0].n_deltas, 2);
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_all_sets_bounded_by_next_full(void **state) {
    (void)state;
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000011-00000020-101.gz", H1},
                  {"v2/Incr-00000024-00000030-102.gz", H1}, /* gap in the older set */
                  {"v2/Full-00000000-00000030-103.gz", H1},
                  {"v2/Incr-00000031-00000040-104.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 1, &r, &ps, &n);
    assert_int_equal(n, 2);
    assert_int_equal(ps[0].n_deltas, 2);
    assert_int_equal(ps[0].end_revision, 30);
    assert_int_equal(ps[1].n_deltas, 1);
    assert_false(r.sets[0].ok);
    assert_true(r.sets[1].ok);
    assert_false(r.sets[0].latest);
    assert_true(r.sets[1].latest);
    assert_int_equal(r.latest_revision, 40);
    const VerifyFault *f = find_fault(&r, VERIFY_GAP);
    assert_non_null(f);
    assert_int_equal(f->from, 21);
    assert_int_equal(f->to, 23);
    verify_plan_free(ps, n);
    verify_report_free(&r);

    /* the latest set alone does not see the older set's gap */
    plan(objs, 0, &r, &ps, &n);
    assert_int_equal(n, 1);
    assert_int_equal(r.n_faults, 0);
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_older_set_missing_its_first_deltas_is_a_warning(void **state) {
    (void)state;
    /* garbage collection removed the older deltas of the older set (retention period) */
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Incr-00000021-00000030-102.gz", H1},
                  {"v2/Full-00000000-00000030-103.gz", H1},
                  {"v2/Incr-00000031-00000040-104.gz", H1},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 1, &r, &ps, &n);
    const VerifyFault *f = find_fault(&r, VERIFY_GAP);
    assert_non_null(f);
    assert_true(f->warning);
    assert_int_equal(f->from, 11);
    assert_int_equal(f->to, 20);
    assert_int_equal(r.n_errors, 0);
    assert_true(verify_report_passed(&r));
    verify_plan_free(ps, n);
    verify_report_free(&r);

    /* the same hole in the latest set is a fault */
    Obj latest[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                    {"v2/Incr-00000021-00000030-102.gz", H1},
                    {NULL, NULL}};
    plan(latest, 1, &r, &ps, &n);
    f = find_fault(&r, VERIFY_GAP);
    assert_non_null(f);
    assert_false(f->warning);
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static void test_verify_forked_history_is_not_an_intruder_of_older_set(void **state) {
    (void)state;
    /* H1's set ends where H2's full snapshot starts (the abandoned objects are not listed) */
    Obj objs[] = {{"v2/Full-00000000-00000010-100.gz", H1},
                  {"v2/Full-00000000-00000015-200.gz", H2},
                  {"v2/Incr-00000016-00000020-201.gz", H2},
                  {NULL, NULL}};
    VerifyReport r;
    VerifyPlanSet *ps;
    size_t n;
    plan(objs, 1, &r, &ps, &n);
    assert_int_equal(n, 2);
    assert_int_equal(r.n_faults, 0);
    verify_plan_free(ps, n);
    verify_report_free(&r);
}

static char *print(const VerifyReport *r) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    verify_report_print(r, f);
    fclose(f);
    return buf;
}

static void test_verify_report_never_says_verified_for_what_failed(void **state) {
    (void)state;
    VerifyReport r;
    memset(&r, 0, sizeof r);
    r.latest_revision = 42;
    char *t = print(&r);
    assert_non_null(strstr(t, "result: verified up to revision 42"));
    free(t);

    r.restore_test = RESTORE_TEST_NOT_COMPARED;
    snprintf(r.restore_note, sizeof r.restore_note, "cluster unreachable");
    t = print(&r);
    assert_non_null(strstr(t, "NOT compared"));
    assert_null(strstr(t, "restore tested"));
    free(t);

    r.restore_test = RESTORE_TEST_MATCH;
    t = print(&r);
    assert_non_null(strstr(t, "restore tested and matched"));
    free(t);

    assert_int_equal(verify_add_fault(&r, VERIFY_BAD_HASH, 0, "v2/Incr-1", NULL, 0, 0,
                                      "bad hash in %s", "v2/Incr-1"),
                     0);
    t = print(&r);
    assert_non_null(strstr(t, "FAULT [bad-hash] bad hash in v2/Incr-1"));
    assert_non_null(strstr(t, "result: FAILED (1 fault)"));
    assert_null(strstr(t, "verified"));
    free(t);
    assert_false(verify_report_passed(&r));

    json_t *j = verify_report_json(&r);
    assert_non_null(j);
    assert_false(json_is_true(json_object_get(j, "passed")));
    json_t *f0 = json_array_get(json_object_get(j, "faults"), 0);
    assert_string_equal(json_string_value(json_object_get(f0, "kind")), "bad-hash");
    assert_string_equal(json_string_value(json_object_get(f0, "object")), "v2/Incr-1");
    json_decref(j);
    verify_report_free(&r);

    memset(&r, 0, sizeof r);
    r.restore_test = RESTORE_TEST_MISMATCH;
    assert_false(verify_report_passed(&r));
    r.restore_test = RESTORE_TEST_FAILED;
    assert_false(verify_report_passed(&r));
}

/* The value of an unlabelled metric in the default registry's exposition, as text. */
static void metric_text(const char *name, char *out, size_t cap) {
    size_t len = 0;
    char *text = metrics_render(metrics_default(), &len);
    assert_non_null(text);
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(text, pat);
    assert_non_null(p);
    p += strlen(pat);
    size_t n = strcspn(p, "\n");
    snprintf(out, cap, "%.*s", (int)n, p);
    free(text);
}

static void test_server_verify_metrics_follow_the_last_result(void **state) {
    (void)state;
    VerifyReport r;
    memset(&r, 0, sizeof r);
    r.latest_revision = 120;
    r.restore_test = RESTORE_TEST_MATCH;
    r.seconds = 2.5;
    server_verify_publish(&r, 0);
    char v[64];
    metric_text("etcdbr_verify_success", v, sizeof v);
    assert_string_equal(v, "1");
    metric_text("etcdbr_verify_last_revision", v, sizeof v);
    assert_string_equal(v, "120");
    metric_text("etcdbr_verify_restore_test_match", v, sizeof v);
    assert_string_equal(v, "1");
    metric_text("etcdbr_verify_faults", v, sizeof v);
    assert_string_equal(v, "0");
    metric_text("etcdbr_verify_last_timestamp_seconds", v, sizeof v);
    assert_true(atof(v) > 1.7e9);

    /* a failed one: success 0, the last passing revision kept, the restore test not compared */
    r.latest_revision = 130;
    r.restore_test = RESTORE_TEST_NOT_COMPARED;
    assert_int_equal(verify_add_fault(&r, VERIFY_GAP, 0, "k", "j", 1, 2, "gap"), 0);
    server_verify_publish(&r, 0);
    metric_text("etcdbr_verify_success", v, sizeof v);
    assert_string_equal(v, "0");
    metric_text("etcdbr_verify_last_revision", v, sizeof v);
    assert_string_equal(v, "120");
    metric_text("etcdbr_verify_faults", v, sizeof v);
    assert_string_equal(v, "1");
    metric_text("etcdbr_verify_restore_test_match", v, sizeof v);
    assert_string_equal(v, "NaN");
    verify_report_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_contiguous_latest_set_has_no_fault),
        cmocka_unit_test(test_verify_gap_names_missing_revisions_and_both_objects),
        cmocka_unit_test(test_verify_gap_after_full_snapshot),
        cmocka_unit_test(test_verify_overlap_is_a_warning),
        cmocka_unit_test(test_verify_unencrypted_object_after_encrypted_one_is_a_fault),
        cmocka_unit_test(test_verify_no_full_snapshot_is_a_fault),
        cmocka_unit_test(test_verify_delta_of_other_history_inside_set),
        cmocka_unit_test(test_verify_untagged_full_with_two_histories_of_deltas),
        cmocka_unit_test(test_verify_untagged_objects_combine_with_a_history),
        cmocka_unit_test(test_verify_all_sets_bounded_by_next_full),
        cmocka_unit_test(test_verify_older_set_missing_its_first_deltas_is_a_warning),
        cmocka_unit_test(test_verify_forked_history_is_not_an_intruder_of_older_set),
        cmocka_unit_test(test_verify_report_never_says_verified_for_what_failed),
        cmocka_unit_test(test_server_verify_metrics_follow_the_last_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
