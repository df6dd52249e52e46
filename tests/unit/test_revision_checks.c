/* test_revision_checks: the checks that keep a restore from trusting a name over its contents
 * and keep revision arithmetic inside int64: name bounds (snapname.h), the events a delta's name
 * promises (delta_check_name_event / _end), --bump-revision on top of a revision
 * (restorer_check_bump), and the plain objects an encrypted store leaves out
 * (snapname_drop_plain_after_encrypted). Inputs that vary come from a seed that is printed
 * (ETCDBR_TEST_SEED repeats a run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backup/delta.h"
#include "common/err.h"
#include "restore/restorer.h"
#include "store/snapname.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned g_seed;

static int setup(void **state) {
    (void)state;
    const char *env = getenv("ETCDBR_TEST_SEED");
    g_seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("seed: %u (ETCDBR_TEST_SEED=%u repeats this run)\n", g_seed, g_seed);
    return 0;
}

static void test_name_numbers_stay_inside_int64_arithmetic(void **state) {
    (void)state;
    Snapshot s;
    assert_int_equal(snapname_parse("v2/Full-00000000-9223372036854775806-1", "", &s), 0);
    assert_int_equal(s.last_revision, INT64_MAX - 1);
    assert_int_equal(snapname_parse("v2/Full-00000000-9223372036854775807-1", "", &s), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "9223372036854775807"));
    assert_int_equal(snapname_parse("v2/Incr-9223372036854775807-9223372036854775807-1", "", &s),
                     ERR_INVALID);
    assert_int_equal(snapname_parse("v2/Full-00000000-00000010-9223372035", "", &s), 0);
    assert_int_equal(snapname_parse("v2/Full-00000000-00000010-9223372036", "", &s), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "creation time"));
    char out[128];
    assert_int_equal(snapname_format(SNAP_FULL, 0, INT64_MAX, 1, "", 0, out, sizeof out),
                     ERR_INVALID);
    assert_int_equal(
        snapname_format(SNAP_FULL, 0, 5, SNAPNAME_TIME_MAX + 1, "", 0, out, sizeof out),
        ERR_INVALID);
    /* the identity bound into encrypted objects: no prefix, no suffixes */
    assert_int_equal(
        snapname_parse("pfx/v2/Incr-00000005-00000009-1700000000.enc.gz.final", "pfx", &s), 0);
    assert_int_equal(snapname_identity(&s, out, sizeof out), 0);
    assert_string_equal(out, "Incr-00000005-00000009-1700000000");
    assert_int_equal(snapname_identity(&s, out, 8), ERR_INVALID);
}

static void test_bump_must_leave_a_revision_after_it(void **state) {
    (void)state;
    assert_int_equal(restorer_check_bump(100, 0), 0);
    assert_int_equal(restorer_check_bump(100, -5), 0);
    assert_int_equal(restorer_check_bump(100, INT64_MAX - 101), 0); /* ends at INT64_MAX - 1 */
    assert_int_equal(restorer_check_bump(100, INT64_MAX - 100), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "--bump-revision"));
    assert_non_null(strstr(err_msg(), "overflows int64"));
    assert_int_equal(restorer_check_bump(100, INT64_MAX), ERR_INVALID);
    assert_int_equal(restorer_check_bump(INT64_MAX - 1, 1), ERR_INVALID);
    assert_int_equal(restorer_check_bump(0, INT64_MAX - 1), 0);
    unsigned seed = g_seed;
    for (int i = 0; i < 1000; i++) {
        int64_t rev = ((int64_t)rand_r(&seed) << 31 | rand_r(&seed)) % (INT64_MAX / 2);
        int64_t room = INT64_MAX - 1 - rev;
        int64_t k = rand_r(&seed) % 1000;
        assert_int_equal(restorer_check_bump(rev, room - k), 0);
        if (k < room - 1) assert_int_equal(restorer_check_bump(rev, room + 1 + k % 2), ERR_INVALID);
    }
}

/* Runs the name checks over revs[0..n) for a delta named start..last: 0 or the first error. */
static int check_events(int64_t start, int64_t last, const int64_t *revs, size_t n) {
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = delta_check_name_event("v2/Incr-x", start, last, prev, revs[i]);
        if (rc) return rc;
        prev = revs[i];
    }
    return delta_check_name_end("v2/Incr-x", last, prev);
}

static void test_delta_events_must_be_what_the_name_says(void **state) {
    (void)state;
    unsigned seed = g_seed ^ 0xde17au;
    for (int round = 0; round < 500; round++) {
        int64_t start = 1 + rand_r(&seed) % 100000, span = rand_r(&seed) % 50;
        int64_t last = start + span;
        size_t n = 0;
        int64_t revs[200];
        for (int64_t r = start; r <= last && n < 190; r++) {
            int events = 1 + rand_r(&seed) % 3; /* a txn writes several keys at one revision */
            for (int e = 0; e < events && n < 190; e++)
                revs[n++] = r;
        }
        if (revs[n - 1] != last) continue; /* capped: not a whole delta */
        assert_int_equal(check_events(start, last, revs, n), 0);
        /* the name starts before the first event */
        assert_int_equal(check_events(start - 1, last, revs, n), ERR_CORRUPT);
        assert_non_null(strstr(err_msg(), "first event"));
        assert_non_null(strstr(err_msg(), "does not match"));
        /* the name starts after the first event */
        assert_int_equal(check_events(start + 1, last + 1, revs, n), ERR_CORRUPT);
        assert_non_null(strstr(err_msg(), "outside its name"));
        /* the name ends after the last event */
        assert_int_equal(check_events(start, last + 1 + rand_r(&seed) % 5, revs, n), ERR_CORRUPT);
        assert_non_null(strstr(err_msg(), "last event"));
        /* the name ends before the last event */
        if (span > 0) {
            assert_int_equal(check_events(start, last - 1, revs, n), ERR_CORRUPT);
            assert_non_null(strstr(err_msg(), "outside its name"));
        }
        /* a revision missing inside, or events out of order */
        if (span > 1) {
            size_t cut = 0;
            while (revs[cut] == start)
                cut++;
            int64_t gap[200];
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (revs[i] != revs[cut]) gap[m++] = revs[i];
            assert_int_equal(check_events(start, last, gap, m), ERR_CORRUPT);
            assert_non_null(strstr(err_msg(), "revisions missing"));
            int64_t swapped[200];
            memcpy(swapped, revs, n * sizeof *revs);
            swapped[0] = revs[n - 1];
            swapped[n - 1] = revs[0];
            assert_int_equal(check_events(start, last, swapped, n), ERR_CORRUPT);
        }
    }
    assert_int_equal(check_events(5, 9, NULL, 0), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "no events"));
    /* the largest names still check without overflow */
    int64_t top[] = {SNAPNAME_REVISION_MAX - 1, SNAPNAME_REVISION_MAX};
    assert_int_equal(check_events(SNAPNAME_REVISION_MAX - 1, SNAPNAME_REVISION_MAX, top, 2), 0);
}

static void test_plain_objects_after_the_first_encrypted_are_left_out(void **state) {
    (void)state;
    unsigned seed = g_seed ^ 0xe7c0u;
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rand_r(&seed) % 40);
        Snapshot *s = calloc(n ? n : 1, sizeof *s), *orig = calloc(n ? n : 1, sizeof *orig);
        assert_non_null(s);
        assert_non_null(orig);
        size_t first_enc = n;
        for (size_t i = 0; i < n; i++) {
            s[i].last_revision = (int64_t)i + 1;
            s[i].encrypted = rand_r(&seed) % 3 == 0;
            s[i].is_chunk = rand_r(&seed) % 8 == 0;
            if (first_enc == n && s[i].encrypted && !s[i].is_chunk) first_enc = i;
        }
        memcpy(orig, s, n * sizeof *s);
        size_t kept = 0;
        assert_int_equal(snapname_drop_plain_after_encrypted(s, n, &kept), 0);
        size_t k = 0, d = kept;
        for (size_t i = 0; i < n; i++) {
            int left_out = i > first_enc && !orig[i].encrypted && !orig[i].is_chunk;
            if (left_out) /* at the end, in order */
                assert_int_equal(s[d++].last_revision, orig[i].last_revision);
            else
                assert_int_equal(s[k++].last_revision, orig[i].last_revision);
        }
        assert_int_equal(k, kept);
        assert_int_equal(d, n);
        free(s);
        free(orig);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_numbers_stay_inside_int64_arithmetic),
        cmocka_unit_test(test_bump_must_leave_a_revision_after_it),
        cmocka_unit_test(test_delta_events_must_be_what_the_name_says),
        cmocka_unit_test(test_plain_objects_after_the_first_encrypted_are_left_out),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
