/* test_gc: garbage collection (docs/go-tool.md §6, §13 scenario 7, §15.10). gc_plan runs over built
 * Snapshot arrays with a fake clock (explicit `now`); gc_run over a real Local store in a temp
 * dir, and over a Local driver wrapped so that chosen removals fail. A seeded property test
 * checks over many random stores that the latest set survives every policy and parameter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backup/gc.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/snapname.h"
#include "store/store.h"
#include "store/store_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOUR INT64_C(3600)
#define DAY INT64_C(86400)
#define WEEK (7 * DAY)

/* 2024-03-15 00:00:00 UTC (a Friday) and 14:50:00 that day. */
#define DAY0 INT64_C(1710460800)
#define NOW0 (DAY0 + 14 * HOUR + 50 * 60)

/* ---------- building lists ---------- */

typedef struct SnapVec {
    Snapshot *v;
    size_t n, cap;
} SnapVec;

static Snapshot make_snap(SnapKind kind, int64_t start, int64_t last, int64_t created, int chunk) {
    Snapshot s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.start_revision = start;
    s.last_revision = last;
    s.created_on = created;
    s.version = 2;
    s.is_chunk = chunk;
    s.size = -1;
    char name[200];
    assert_int_equal(snapname_format(kind, start, last, created, "", 0, name, sizeof name), 0);
    if (chunk)
        snprintf(s.snap_name, sizeof s.snap_name, "%s/0000000001", name);
    else
        snprintf(s.snap_name, sizeof s.snap_name, "%s", name);
    snprintf(s.prefix, sizeof s.prefix, "v2/");
    snprintf(s.key, sizeof s.key, "v2/%s", s.snap_name);
    return s;
}

static void vec_push(SnapVec *sv, Snapshot s) {
    if (sv->n == sv->cap) {
        sv->cap = sv->cap ? sv->cap * 2 : 16;
        sv->v = realloc(sv->v, sv->cap * sizeof *sv->v);
        assert_non_null(sv->v);
    }
    sv->v[sv->n++] = s;
}

/* Appends a full at revision rev (so the list stays sorted when revisions grow). */
static void add_full(SnapVec *sv, int64_t rev, int64_t created) {
    vec_push(sv, make_snap(SNAP_FULL, 0, rev, created, 0));
}

static void add_incr(SnapVec *sv, int64_t start, int64_t last, int64_t created) {
    vec_push(sv, make_snap(SNAP_INCR, start, last, created, 0));
}

static uint8_t *plan_ok(const SnapVec *sv, GcPolicy p, int max_backups, int64_t retention,
                        int64_t now) {
    uint8_t *rm = malloc(sv->n ? sv->n : 1);
    assert_non_null(rm);
    int rc = gc_plan(sv->v, sv->n, p, max_backups, retention, now, rm);
    if (rc != 0) fail_msg("gc_plan: %s", err_msg());
    return rm;
}

/* Asserts the plan as a string of 'k' (keep) / 'x' (remove), one per entry. */
static void assert_plan(const SnapVec *sv, const uint8_t *rm, const char *want) {
    assert_int_equal(strlen(want), sv->n);
    char got[256];
    assert_true(sv->n < sizeof got);
    for (size_t i = 0; i < sv->n; i++)
        got[i] = rm[i] ? 'x' : 'k';
    got[sv->n] = '\0';
    assert_string_equal(got, want);
}

/* ---------- policy names ---------- */

static void test_parse_policy_accepts_go_names_only(void **state) {
    (void)state;
    GcPolicy p = GC_LIMIT_BASED;
    assert_int_equal(gc_parse_policy("Exponential", &p), 0);
    assert_int_equal(p, GC_EXPONENTIAL);
    assert_int_equal(gc_parse_policy("LimitBased", &p), 0);
    assert_int_equal(p, GC_LIMIT_BASED);
    assert_string_equal(gc_policy_name(GC_EXPONENTIAL), "Exponential");
    assert_string_equal(gc_policy_name(GC_LIMIT_BASED), "LimitBased");
    assert_int_equal(gc_parse_policy("exponential", &p), ERR_INVALID);
    assert_int_equal(gc_parse_policy("Limitbased", &p), ERR_INVALID);
    assert_int_equal(gc_parse_policy("", &p), ERR_INVALID);
    assert_int_equal(gc_parse_policy(NULL, &p), ERR_INVALID);
}

/* ---------- LimitBased and delta retention ---------- */

/* Five streams F D D; stream k starts at revision 100k, one snapshot every 10 minutes. */
static void build_five_streams(SnapVec *sv, int64_t t0) {
    for (int k = 0; k < 5; k++) {
        int64_t r = 100 * (k + 1), t = t0 + k * 30 * 60;
        add_full(sv, r, t);
        add_incr(sv, r + 1, r + 10, t + 600);
        add_incr(sv, r + 11, r + 20, t + 1200);
    }
}

static void test_limit_based_keeps_newest_max_backups_fulls_and_latest_deltas(void **state) {
    (void)state;
    SnapVec sv = {0};
    build_five_streams(&sv, NOW0 - 10 * HOUR);
    uint8_t *rm = plan_ok(&sv, GC_LIMIT_BASED, 2, 0, NOW0);
    assert_plan(&sv, rm,
                "xxx"
                "xxx"
                "xxx"
                "kxx"
                "kkk");
    free(rm);
    rm = plan_ok(&sv, GC_LIMIT_BASED, 7, 0, NOW0);
    assert_plan(&sv, rm,
                "kxx"
                "kxx"
                "kxx"
                "kxx"
                "kkk");
    free(rm);
    rm = plan_ok(&sv, GC_LIMIT_BASED, 1, 0, NOW0);
    assert_plan(&sv, rm,
                "xxx"
                "xxx"
                "xxx"
                "xxx"
                "kkk");
    free(rm);
    free(sv.v);
}

static void test_retention_keeps_deltas_younger_than_the_period(void **state) {
    (void)state;
    SnapVec sv = {0};
    int64_t t0 = NOW0 - 10 * HOUR;
    build_five_streams(&sv, t0);
    /* All older than the period: every delta outside the latest stream goes. */
    uint8_t *rm = plan_ok(&sv, GC_LIMIT_BASED, 10, HOUR, NOW0);
    assert_plan(&sv, rm,
                "kxx"
                "kxx"
                "kxx"
                "kxx"
                "kkk");
    free(rm);
    /* None older: all kept. */
    rm = plan_ok(&sv, GC_LIMIT_BASED, 10, 11 * HOUR, NOW0);
    assert_plan(&sv, rm,
                "kkk"
                "kkk"
                "kkk"
                "kkk"
                "kkk");
    free(rm);
    /* Mixed: the cutoff falls at stream 2's first delta (t0 + 70 min), which is kept because
     * only deltas created strictly before now - retention go. */
    int64_t retention = NOW0 - (t0 + 70 * 60);
    rm = plan_ok(&sv, GC_LIMIT_BASED, 10, retention, NOW0);
    assert_plan(&sv, rm,
                "kxx"
                "kxx"
                "kkk"
                "kkk"
                "kkk");
    free(rm);
    /* Retention does not save the fulls LimitBased drops: their young deltas stay (orphans, as
     * in the Go tool; the next cycle counts them to the previous stream). */
    rm = plan_ok(&sv, GC_LIMIT_BASED, 2, retention, NOW0);
    assert_plan(&sv, rm,
                "xxx"
                "xxx"
                "xkk"
                "kkk"
                "kkk");
    free(rm);
    free(sv.v);
}

static void test_plan_rejects_bad_parameters_and_unsorted_lists(void **state) {
    (void)state;
    SnapVec sv = {0};
    build_five_streams(&sv, NOW0 - 10 * HOUR);
    uint8_t rm[15];
    memset(rm, 7, sizeof rm);
    assert_int_equal(gc_plan(sv.v, sv.n, GC_LIMIT_BASED, 0, 0, NOW0, rm), ERR_INVALID);
    for (size_t i = 0; i < sv.n; i++)
        assert_int_equal(rm[i], 0);
    assert_int_equal(gc_plan(sv.v, sv.n, GC_EXPONENTIAL, 0, -1, NOW0, rm), ERR_INVALID);
    assert_int_equal(gc_plan(sv.v, sv.n, (GcPolicy)9, 3, 0, NOW0, rm), ERR_INVALID);
    assert_int_equal(gc_plan(NULL, 3, GC_EXPONENTIAL, 3, 0, NOW0, rm), ERR_INVALID);
    /* Exponential ignores max_backups. */
    assert_int_equal(gc_plan(sv.v, sv.n, GC_EXPONENTIAL, 0, 0, NOW0, rm), 0);
    /* Swap two entries: the list is no longer sorted by revision. */
    Snapshot tmp = sv.v[3];
    sv.v[3] = sv.v[4];
    sv.v[4] = tmp;
    memset(rm, 7, sizeof rm);
    assert_int_equal(gc_plan(sv.v, sv.n, GC_LIMIT_BASED, 1, 0, NOW0, rm), ERR_INVALID);
    for (size_t i = 0; i < sv.n; i++)
        assert_int_equal(rm[i], 0);
    assert_int_equal(gc_plan(NULL, 0, GC_LIMIT_BASED, 1, 0, NOW0, NULL), 0);
    free(sv.v);
}

/* ---------- special stores ---------- */

static void test_store_whose_newest_set_is_only_a_full_keeps_that_full(void **state) {
    (void)state;
    SnapVec sv = {0};
    add_full(&sv, 10, NOW0 - 50 * DAY);
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        uint8_t *rm = plan_ok(&sv, p, 1, 0, NOW0);
        assert_plan(&sv, rm, "k");
        free(rm);
    }
    add_incr(&sv, 11, 20, NOW0 - 49 * DAY);
    add_full(&sv, 30, NOW0 - 40 * DAY);
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        uint8_t *rm = plan_ok(&sv, p, 1, 0, NOW0);
        assert_plan(&sv, rm, "xxk");
        free(rm);
    }
    free(sv.v);
}

static void test_store_with_only_deltas_removes_nothing(void **state) {
    (void)state;
    SnapVec sv = {0};
    for (int i = 0; i < 6; i++)
        add_incr(&sv, 10 * i + 1, 10 * i + 10, NOW0 - 60 * DAY + i * DAY);
    vec_push(&sv, make_snap(SNAP_FULL, 0, 100, NOW0 - 70 * DAY, 1)); /* a chunk, not a full */
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        uint8_t *rm = plan_ok(&sv, p, 1, 0, NOW0);
        assert_plan(&sv, rm, "kkkkkkk");
        free(rm);
    }
    free(sv.v);
}

static void test_orphan_deltas_before_first_full_go_like_old_deltas(void **state) {
    (void)state;
    SnapVec sv = {0};
    add_incr(&sv, 1, 10, NOW0 - 5 * HOUR);
    add_incr(&sv, 11, 20, NOW0 - 4 * HOUR);
    add_full(&sv, 30, NOW0 - 3 * HOUR);
    add_incr(&sv, 31, 40, NOW0 - 2 * HOUR);
    add_full(&sv, 50, NOW0 - 1 * HOUR);
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        uint8_t *rm = plan_ok(&sv, p, 2, 0, NOW0);
        assert_plan(&sv, rm, "xxkxk");
        free(rm);
        /* Young orphans stay; they do not count against max-backups. */
        rm = plan_ok(&sv, p, 2, 5 * HOUR, NOW0);
        assert_plan(&sv, rm, "kkkkk");
        free(rm);
    }
    free(sv.v);
}

static void test_chunks_are_never_planned_and_do_not_split_streams(void **state) {
    (void)state;
    SnapVec sv = {0};
    add_full(&sv, 10, NOW0 - 40 * DAY);
    vec_push(&sv, make_snap(SNAP_FULL, 0, 10, NOW0 - 40 * DAY, 1));
    add_incr(&sv, 11, 20, NOW0 - 39 * DAY);
    vec_push(&sv, make_snap(SNAP_INCR, 11, 20, NOW0 - 39 * DAY, 1));
    add_full(&sv, 30, NOW0 - 2 * DAY);
    add_incr(&sv, 31, 40, NOW0 - DAY);
    /* A chunk of an upload in progress, newer than everything: the latest set is still
     * Full-30 + Incr-40. */
    vec_push(&sv, make_snap(SNAP_FULL, 0, 50, NOW0, 1));
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        uint8_t *rm = plan_ok(&sv, p, 1, 0, NOW0);
        assert_plan(&sv, rm, "xkxkkkk");
        free(rm);
    }
    free(sv.v);
}

static void test_revisions_wider_than_8_digits_keep_numeric_order(void **state) {
    (void)state;
    /* Built out of order and sorted by snapname_sort: as strings, "100000000" < "99999999". */
    SnapVec sv = {0};
    add_full(&sv, INT64_C(123456789012), NOW0 - 2 * HOUR);
    add_incr(&sv, INT64_C(123456789013), INT64_C(123456789020), NOW0 - HOUR);
    add_full(&sv, INT64_C(100000000), NOW0 - 3 * HOUR);
    add_full(&sv, INT64_C(99999999), NOW0 - 4 * HOUR);
    add_incr(&sv, INT64_C(100000001), INT64_C(100000010), NOW0 - 170 * 60);
    snapname_sort(sv.v, sv.n);
    assert_int_equal(sv.v[0].last_revision, INT64_C(99999999));
    assert_int_equal(sv.v[3].last_revision, INT64_C(123456789012));
    uint8_t *rm = plan_ok(&sv, GC_LIMIT_BASED, 1, 0, NOW0);
    assert_plan(&sv, rm, "xxxkk");
    free(rm);
    rm = plan_ok(&sv, GC_LIMIT_BASED, 2, 0, NOW0);
    assert_plan(&sv, rm, "xkxkk");
    free(rm);
    /* Exponential: one per past hour today. */
    rm = plan_ok(&sv, GC_EXPONENTIAL, 0, 0, NOW0);
    assert_plan(&sv, rm, "kkxkk");
    free(rm);
    free(sv.v);
}

/* ---------- Exponential: the Go unit test (docs/go-tool.md §6.3) ---------- */

/* The Go test's store: from 00:00 UTC 36 days before now's day, one snapshot every 10 minutes
 * up to now inclusive, Full, Incr, Incr in turn (so fulls at :00 and :30). Revisions grow. */
static void build_go_store(SnapVec *sv, int64_t now) {
    int64_t midnight = now - now % DAY;
    int64_t rev = 0;
    int count = 0;
    for (int64_t t = midnight - 36 * DAY; t <= now; t += 600) {
        if (count == 0)
            add_full(sv, rev + 1, t);
        else
            add_incr(sv, rev + 1, rev + 5, t);
        rev += 5;
        count = (count + 1) % 3;
    }
}

typedef struct Want {
    SnapKind kind;
    int64_t created;
} Want;

/* The Go test's expected list, built the way it builds it (not from the algorithm): 4 weekly
 * fulls, 7 daily, one per past hour of today, all fulls of the current hour, then the latest
 * stream's deltas. Returns the count. */
static size_t go_expected(int64_t now, Want *w, size_t cap) {
    size_t n = 0;
    int64_t midnight = now - now % DAY, hour = now - now % HOUR;
    int64_t t = midnight - 35 * DAY - 30 * 60;
    for (int i = 1; i <= 4; i++) {
        t += WEEK;
        w[n++] = (Want){SNAP_FULL, t};
    }
    for (int i = 1; i <= 7; i++) {
        t += DAY;
        w[n++] = (Want){SNAP_FULL, t};
    }
    for (t += HOUR; hour - t > 0; t += HOUR)
        w[n++] = (Want){SNAP_FULL, t};
    for (t = hour; now - t >= 0; t += 30 * 60)
        w[n++] = (Want){SNAP_FULL, t};
    for (t += -30 * 60 + 10 * 60; now - t >= 0; t += 10 * 60)
        w[n++] = (Want){SNAP_INCR, t};
    assert_true(n <= cap);
    return n;
}

/* Runs the Exponential plan over the Go store at now; asserts the survivors are exactly the Go
 * test's expected list; returns the number of survivors. */
static size_t check_go_exponential(int64_t now) {
    SnapVec sv = {0};
    build_go_store(&sv, now);
    Want want[128];
    size_t nw = go_expected(now, want, 128);
    uint8_t *rm = plan_ok(&sv, GC_EXPONENTIAL, 7, 0, now);
    size_t k = 0;
    for (size_t i = 0; i < sv.n; i++) {
        if (rm[i]) continue;
        if (k >= nw || sv.v[i].kind != want[k].kind || sv.v[i].created_on != want[k].created)
            fail_msg("now=%lld: survivor %zu is %s (expected %s)", (long long)now, k, sv.v[i].key,
                     k < nw ? (want[k].kind == SNAP_FULL ? "a full" : "a delta") : "nothing");
        k++;
    }
    assert_int_equal(k, nw);
    free(rm);
    free(sv.v);
    return k;
}

static void test_exponential_reproduces_go_unit_test_expected_set(void **state) {
    (void)state;
    /* At 14:50: 4 weekly + 7 daily + 14 hourly (00:30 .. 13:30) + 2 of the current hour (14:00,
     * 14:30) fulls + 2 deltas of the latest stream (14:40, 14:50) = 29 of 5274. */
    SnapVec sv = {0};
    build_go_store(&sv, NOW0);
    assert_int_equal(sv.n, 36 * 144 + 14 * 6 + 5 + 1);
    uint8_t *rm = plan_ok(&sv, GC_EXPONENTIAL, 7, 0, NOW0);
    size_t fulls = 0, deltas = 0;
    for (size_t i = 0; i < sv.n; i++) {
        if (rm[i]) continue;
        if (sv.v[i].kind == SNAP_FULL)
            fulls++;
        else
            deltas++;
    }
    assert_int_equal(fulls, 27);
    assert_int_equal(deltas, 2);
    /* Which ones: the weekly ones are the 23:30 fulls of days -29, -22, -15, -8. */
    size_t k = 0;
    int64_t weekly[4] = {DAY0 - 29 * DAY, DAY0 - 22 * DAY, DAY0 - 15 * DAY, DAY0 - 8 * DAY};
    for (size_t i = 0; i < sv.n && k < 4; i++) {
        if (rm[i]) continue;
        assert_int_equal(sv.v[i].created_on, weekly[k] + 23 * HOUR + 30 * 60);
        k++;
    }
    free(rm);
    free(sv.v);
    assert_int_equal(check_go_exponential(NOW0), 29);
}

static void test_exponential_matches_go_expectation_at_any_time_of_day(void **state) {
    (void)state;
    /* Hour edges (00:00, 00:05, 23:59:59), exactly on a full (14:30:00) and 60 instants spread
     * over a week of wall-clock times and weekdays. */
    assert_int_equal(check_go_exponential(DAY0), 4 + 7 + 0 + 1 + 0);
    assert_int_equal(check_go_exponential(DAY0 + 5 * 60), 4 + 7 + 0 + 1 + 0);
    assert_int_equal(check_go_exponential(DAY0 + 14 * HOUR + 30 * 60), 4 + 7 + 14 + 2 + 0);
    assert_int_equal(check_go_exponential(DAY0 + DAY - 1), 4 + 7 + 23 + 2 + 2);
    for (int i = 0; i < 60; i++)
        check_go_exponential(DAY0 + i * (2 * HOUR + 47 * 60 + 13));
}

/* ---------- Exponential: bucket boundaries ---------- */

static void test_exponential_hour_buckets_follow_clock_hours(void **state) {
    (void)state;
    SnapVec sv = {0};
    int64_t now = DAY0 + 12 * HOUR;
    add_full(&sv, 10, DAY0 + 9 * HOUR + 10 * 60);       /* hour 9, older in its hour: goes */
    add_full(&sv, 20, DAY0 + 9 * HOUR + 59 * 60 + 59);  /* last second of hour 9: kept */
    add_full(&sv, 30, DAY0 + 10 * HOUR);                /* first second of hour 10: goes */
    add_full(&sv, 40, DAY0 + 10 * HOUR + 59 * 60 + 59); /* kept */
    add_full(&sv, 50, DAY0 + 12 * HOUR - 1);            /* hour 11, only one: kept */
    add_full(&sv, 60, DAY0 + 12 * HOUR);                /* current hour: all kept */
    add_full(&sv, 70, DAY0 + 12 * HOUR);
    add_full(&sv, 80, DAY0 + 12 * HOUR);
    uint8_t *rm = plan_ok(&sv, GC_EXPONENTIAL, 0, 0, now);
    assert_plan(&sv, rm, "xkxkkkkk");
    free(rm);
    free(sv.v);
}

static void test_exponential_day_buckets_follow_utc_days(void **state) {
    (void)state;
    SnapVec sv = {0};
    int64_t now = DAY0 + 12 * HOUR;
    add_full(&sv, 10, DAY0 - 3 * DAY + 12 * HOUR); /* day -3, only one: kept */
    add_full(&sv, 20, DAY0 - 2 * DAY);             /* first second of day -2: goes */
    add_full(&sv, 30, DAY0 - DAY - 1);             /* last second of day -2: kept */
    add_full(&sv, 40, DAY0 - DAY);                 /* day -1: goes */
    add_full(&sv, 50, DAY0 - 1);                   /* last second of day -1: kept */
    add_full(&sv, 60, DAY0);                       /* today hour 0, alone: kept */
    add_full(&sv, 70, DAY0 + 12 * HOUR);
    uint8_t *rm = plan_ok(&sv, GC_EXPONENTIAL, 0, 0, now);
    assert_plan(&sv, rm, "kxkxkkk");
    free(rm);
    free(sv.v);
}

static void test_exponential_week_buckets_end_with_the_previous_day(void **state) {
    (void)state;
    /* Once the first full 8+ days old is met, weeks are counted back from the end of yesterday:
     * days -14..-8 are one week, -21..-15 the next; older than 35 days (from that shifted end)
     * goes whatever its neighbours. */
    SnapVec sv = {0};
    int64_t now = DAY0 + 12 * HOUR;
    add_full(&sv, 5, DAY0 - 36 * DAY + 12 * HOUR); /* day -36: too old */
    add_full(&sv, 6, DAY0 - 35 * DAY);             /* day -35, alone in days -35..-29: kept */
    add_full(&sv, 10, DAY0 - 21 * DAY);            /* first second of day -21: goes */
    add_full(&sv, 20, DAY0 - 14 * DAY - 1);        /* last second of day -15: kept */
    add_full(&sv, 30, DAY0 - 14 * DAY);            /* first second of day -14: goes */
    add_full(&sv, 40, DAY0 - 9 * DAY + 12 * HOUR); /* day -9: goes */
    add_full(&sv, 50, DAY0 - 7 * DAY - 1);         /* last second of day -8: kept */
    add_full(&sv, 60, DAY0 - DAY + 12 * HOUR);     /* day -1: kept */
    add_full(&sv, 70, DAY0 + 12 * HOUR);
    uint8_t *rm = plan_ok(&sv, GC_EXPONENTIAL, 0, 0, now);
    assert_plan(&sv, rm, "xkxkxxkkk");
    free(rm);
    free(sv.v);
}

static void test_exponential_keeps_future_full_of_the_current_clock_hour_like_go(void **state) {
    (void)state;
    /* Clock skew: fulls whose names say tomorrow. Go's current-hour test compares only the hour
     * of day, so the one at tomorrow 14:10 is kept like a full of the current hour; the one at
     * tomorrow 09:10 is compared by hours with its newer neighbour (the same hour: goes). */
    SnapVec sv = {0};
    add_full(&sv, 10, DAY0 + DAY + 9 * HOUR + 10 * 60);
    add_full(&sv, 20, DAY0 + DAY + 9 * HOUR + 20 * 60);
    add_full(&sv, 30, DAY0 + DAY + 14 * HOUR + 10 * 60);
    add_full(&sv, 40, DAY0 + DAY + 14 * HOUR + 20 * 60);
    add_full(&sv, 50, NOW0);
    uint8_t *rm = plan_ok(&sv, GC_EXPONENTIAL, 0, 0, NOW0);
    assert_plan(&sv, rm, "xkkkk");
    free(rm);
    free(sv.v);
}

static void test_exponential_compares_with_kept_neighbour_not_a_removed_one(void **state) {
    (void)state;
    /* docs/go-tool.md §15.10. Fulls in revision order: 13:10 today, then one whose name says 40
     * days ago (a clock that went back), then 13:30, then the newest at 14:30. The 40-day-old one
     * goes. Go then compares 13:10 with it (a different hour), keeping two fulls of hour 13;
     * this plan compares 13:10 with 13:30, the newer full it keeps, and drops 13:10. */
    SnapVec sv = {0};
    add_full(&sv, 10, DAY0 + 13 * HOUR + 10 * 60);
    add_full(&sv, 20, DAY0 - 40 * DAY);
    add_full(&sv, 30, DAY0 + 13 * HOUR + 30 * 60);
    add_full(&sv, 40, DAY0 + 14 * HOUR + 30 * 60);
    uint8_t *rm = plan_ok(&sv, GC_EXPONENTIAL, 0, 0, NOW0);
    assert_plan(&sv, rm, "xxkk");
    free(rm);
    free(sv.v);
}

/* ---------- property: the latest set survives everything ---------- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int64_t rng_range(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

/* Returns nonzero if the names' times do not follow the revisions. */
static int random_store(uint64_t *rs, SnapVec *sv, int64_t *now) {
    sv->n = 0;
    size_t n = (size_t)rng_range(rs, 0, 48);
    int64_t rev = rng_range(rs, 1, 2) == 1 ? rng_range(rs, 1, 1000) : INT64_C(123456789012);
    int64_t t = DAY0 - rng_range(rs, 0, 60) * DAY;
    int skewed = rng_range(rs, 0, 3) == 0; /* names whose times do not follow revisions */
    for (size_t i = 0; i < n; i++) {
        int64_t last = rev + rng_range(rs, 0, 2); /* ties allowed */
        t += rng_range(rs, 0, 3) == 0 ? rng_range(rs, 0, 3 * DAY) : rng_range(rs, 0, 40 * 60);
        int64_t created = skewed ? t - rng_range(rs, 0, 10 * DAY) : t;
        int chunk = rng_range(rs, 0, 9) == 0;
        SnapKind kind = rng_range(rs, 0, 3) == 0 ? SNAP_FULL : SNAP_INCR;
        vec_push(sv, make_snap(kind, kind == SNAP_FULL ? 0 : rev, last, created, chunk));
        rev = last + 1;
    }
    snapname_sort(sv->v, sv->n);
    *now = t + rng_range(rs, -HOUR, 3 * DAY);
    return skewed;
}

static void test_latest_set_survives_every_policy_on_random_stores(void **state) {
    (void)state;
    uint64_t rs = 20240315;
    SnapVec sv = {0};
    uint8_t rm[64], rm2[64];
    static const int64_t retentions[] = {0, 600, HOUR, DAY, 40 * DAY};
    size_t removed_total = 0;
    for (int iter = 0; iter < 3000; iter++) {
        int64_t now;
        int skewed = random_store(&rs, &sv, &now);
        for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
            for (int mb = 1; mb <= 8; mb += 3) {
                int64_t ret = retentions[rng_range(&rs, 0, 4)];
                assert_int_equal(gc_plan(sv.v, sv.n, p, mb, ret, now, rm), 0);
                /* The latest set as restore picks it, computed independently. */
                ptrdiff_t latest = -1;
                for (size_t i = sv.n; i-- > 0;) {
                    if (!sv.v[i].is_chunk && sv.v[i].kind == SNAP_FULL) {
                        latest = (ptrdiff_t)i;
                        break;
                    }
                }
                size_t fulls = 0, fulls_kept = 0;
                for (size_t i = 0; i < sv.n; i++) {
                    const Snapshot *s = &sv.v[i];
                    removed_total += rm[i];
                    if (s->is_chunk || latest < 0 || (ptrdiff_t)i >= latest) {
                        if (rm[i])
                            fail_msg("iter %d policy %d: removes protected %s", iter, (int)p,
                                     s->key);
                        continue;
                    }
                    if (s->kind == SNAP_INCR) assert_int_equal(rm[i], s->created_on < now - ret);
                }
                for (size_t i = 0; i < sv.n; i++) {
                    if (sv.v[i].is_chunk || sv.v[i].kind != SNAP_FULL) continue;
                    fulls++;
                    fulls_kept += !rm[i];
                }
                if (p == GC_LIMIT_BASED)
                    assert_int_equal(fulls_kept, fulls < (size_t)mb ? fulls : (size_t)mb);
                else
                    assert_true(fulls_kept >= (fulls ? 1u : 0u));
                /* A second cycle at the same instant over what is left removes nothing (when
                 * times follow revisions; with skewed times the buckets of neighbours do not
                 * nest and a second pass may thin further, in Go as here). */
                if (skewed) continue;
                SnapVec left = {0};
                for (size_t i = 0; i < sv.n; i++)
                    if (!rm[i]) vec_push(&left, sv.v[i]);
                assert_int_equal(gc_plan(left.v, left.n, p, mb, ret, now, rm2), 0);
                for (size_t i = 0; i < left.n; i++)
                    if (rm2[i])
                        fail_msg("iter %d policy %d skewed %d now %lld: second cycle removes %s",
                                 iter, (int)p, skewed, (long long)now, left.v[i].key);
                free(left.v);
            }
        }
    }
    assert_true(removed_total > 1000); /* the generator does produce work */
    free(sv.v);
}

/* ---------- gc_run on a real Local store ---------- */

static char *make_tmpdir(void) {
    char tmpl[] = "/tmp/etcdbr-test-gc-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void rm_tmpdir(char *d) {
    assert_int_equal(fs_remove_tree(d), 0);
    free(d);
}

static void write_raw(const char *root, const char *rel) {
    char *path = fs_join(root, rel);
    char *dir = fs_dirname(path);
    assert_int_equal(fs_mkdir_p(dir, 0700), 0);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("x", f);
    assert_int_equal(fclose(f), 0);
    free(dir);
    free(path);
}

static int exists_rel(const char *root, const char *rel) {
    char *path = fs_join(root, rel);
    int e = fs_exists(path);
    free(path);
    return e;
}

/* A Local driver whose remove fails with fail_rc (ERR_IO unless set) for keys containing
 * fail_substr ("" = all). */
typedef struct FailDrv {
    StoreDriver base;
    StoreDriver *inner;
    const char *fail_substr;
    int fail_rc;
    int removes_tried;
    StoreDriverVt vt;
} FailDrv;

static int fd_list(StoreDriver *d, const char *p, StoreDriverListCb cb, void *ctx) {
    FailDrv *f = (FailDrv *)d;
    return f->inner->vt->list(f->inner, p, cb, ctx);
}
static int fd_open_read(StoreDriver *d, const char *key, uint64_t offset, IoReader **out) {
    FailDrv *f = (FailDrv *)d;
    return f->inner->vt->open_read(f->inner, key, offset, out);
}
static int fd_open_write(StoreDriver *d, const char *key, StoreDriverWriter **out) {
    FailDrv *f = (FailDrv *)d;
    return f->inner->vt->open_write(f->inner, key, out);
}
static int fd_remove(StoreDriver *d, const char *key) {
    FailDrv *f = (FailDrv *)d;
    f->removes_tried++;
    if (f->fail_substr && strstr(key, f->fail_substr))
        return err_set(f->fail_rc ? f->fail_rc : ERR_IO, "remove %s: injected failure", key);
    return f->inner->vt->remove(f->inner, key);
}
static int fd_stat(StoreDriver *d, const char *key, int64_t *size) {
    FailDrv *f = (FailDrv *)d;
    return f->inner->vt->stat(f->inner, key, size);
}
static int fd_remove_dir(StoreDriver *d, const char *dir) {
    FailDrv *f = (FailDrv *)d;
    return f->inner->vt->remove_dir(f->inner, dir);
}
static const char *fd_describe(const StoreDriver *d) {
    const FailDrv *f = (const FailDrv *)d;
    return f->inner->vt->describe(f->inner);
}
static void fd_free(StoreDriver *d) {
    FailDrv *f = (FailDrv *)d;
    store_driver_free(f->inner);
    free(f);
}

/* Opens dir as a Local store with prefix "etcd-main"; with fail_substr, through FailDrv
 * (*fd_out set). */
static Store *open_store(const char *dir, const char *fail_substr, FailDrv **fd_out) {
    StoreDriver *local = NULL;
    assert_int_equal(store_local_driver_new(dir, &local), 0);
    StoreDriver *drv = local;
    if (fail_substr) {
        FailDrv *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->inner = local;
        f->fail_substr = fail_substr;
        f->vt = *local->vt;
        f->vt.list = fd_list;
        f->vt.open_read = fd_open_read;
        f->vt.open_write = fd_open_write;
        f->vt.remove = fd_remove;
        f->vt.stat = fd_stat;
        f->vt.remove_dir = local->vt->remove_dir ? fd_remove_dir : NULL;
        f->vt.describe = fd_describe;
        f->vt.free = fd_free;
        f->base.vt = &f->vt;
        drv = &f->base;
        *fd_out = f;
    }
    Store *s = NULL;
    int rc = store_new_with_driver(drv, "etcd-main", &s);
    if (rc != 0) fail_msg("store_new_with_driver: %s", err_msg());
    return s;
}

static void put(Store *s, SnapKind kind, int64_t start, int64_t last, int64_t created) {
    char name[200];
    assert_int_equal(snapname_format(kind, start, last, created, ".gz", 0, name, sizeof name), 0);
    StoreWriter *w = NULL;
    int rc = store_open_write(s, name, &w);
    if (rc != 0) fail_msg("store_open_write %s: %s", name, err_msg());
    assert_int_equal(io_write(store_writer_io(w), name, strlen(name)), 0);
    assert_int_equal(io_finish(store_writer_io(w)), 0);
    rc = store_writer_commit(w);
    if (rc != 0) fail_msg("commit %s: %s", name, err_msg());
}

#define T0 (NOW0 - 20 * HOUR)

/* v1 full (rev 5), Full 10 + Incr 20, Full 30 + Incr 40, Full 50 + Incr 60 + Incr 70, and
 * objects GC must leave alone: an unparseable name and a chunk of an upload in progress. */
static void fill_store(const char *dir, Store *s) {
    char rel[256];
    snprintf(rel, sizeof rel, "etcd-main/v1/Backup-%lld/Full-00000000-00000005-%lld",
             (long long)(T0 - DAY), (long long)(T0 - DAY));
    write_raw(dir, rel);
    put(s, SNAP_FULL, 0, 10, T0);
    put(s, SNAP_INCR, 11, 20, T0 + HOUR);
    put(s, SNAP_FULL, 0, 30, T0 + 2 * HOUR);
    put(s, SNAP_INCR, 31, 40, T0 + 3 * HOUR);
    put(s, SNAP_FULL, 0, 50, T0 + 4 * HOUR);
    put(s, SNAP_INCR, 51, 60, T0 + 5 * HOUR);
    put(s, SNAP_INCR, 61, 70, T0 + 6 * HOUR);
    write_raw(dir, "etcd-main/v2/notes.txt");
    snprintf(rel, sizeof rel, "etcd-main/v2/Full-00000000-00000080-%lld.gz/0000000001",
             (long long)(T0 + 7 * HOUR));
    write_raw(dir, rel);
}

static int has_v2(const char *dir, SnapKind kind, int64_t start, int64_t last, int64_t t) {
    char name[200], rel[300];
    assert_int_equal(snapname_format(kind, start, last, t, ".gz", 0, name, sizeof name), 0);
    snprintf(rel, sizeof rel, "etcd-main/v2/%s", name);
    return exists_rel(dir, rel);
}

static void test_run_removes_planned_objects_and_leaves_foreign_ones(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_store(dir, NULL, NULL);
    fill_store(dir, s);
    GcStats st;
    assert_int_equal(gc_run(s, GC_LIMIT_BASED, 2, 0, NOW0, 0, &st), 0);
    assert_int_equal(st.listed, 9);
    assert_int_equal(st.full_removed, 2);
    assert_int_equal(st.incr_removed, 2);
    assert_int_equal(st.full_failed + st.incr_failed, 0);
    assert_false(st.skipped);
    assert_false(st.stopped);
    char rel[256];
    snprintf(rel, sizeof rel, "etcd-main/v1/Backup-%lld", (long long)(T0 - DAY));
    assert_false(exists_rel(dir, rel)); /* v1 full gone, its Backup dir pruned */
    assert_false(has_v2(dir, SNAP_FULL, 0, 10, T0));
    assert_false(has_v2(dir, SNAP_INCR, 11, 20, T0 + HOUR));
    assert_true(has_v2(dir, SNAP_FULL, 0, 30, T0 + 2 * HOUR));
    assert_false(has_v2(dir, SNAP_INCR, 31, 40, T0 + 3 * HOUR));
    assert_true(has_v2(dir, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
    assert_true(has_v2(dir, SNAP_INCR, 51, 60, T0 + 5 * HOUR));
    assert_true(has_v2(dir, SNAP_INCR, 61, 70, T0 + 6 * HOUR));
    assert_true(exists_rel(dir, "etcd-main/v2/notes.txt"));
    snprintf(rel, sizeof rel, "etcd-main/v2/Full-00000000-00000080-%lld.gz/0000000001",
             (long long)(T0 + 7 * HOUR));
    assert_true(exists_rel(dir, rel));
    /* A second cycle finds nothing more to do. */
    assert_int_equal(gc_run(s, GC_LIMIT_BASED, 2, 0, NOW0, 0, &st), 0);
    assert_int_equal(st.listed, 5);
    assert_int_equal(st.full_removed + st.incr_removed, 0);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_run_removes_nothing_when_newest_attempt_failed(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    FailDrv *fd = NULL;
    Store *s = open_store(dir, "no-such-key", &fd);
    fill_store(dir, s);
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        GcStats st;
        assert_int_equal(gc_run(s, p, 1, 0, NOW0 + 60 * DAY, 1, &st), 0);
        assert_true(st.skipped);
        assert_int_equal(st.listed + st.full_removed + st.incr_removed, 0);
    }
    assert_int_equal(fd->removes_tried, 0);
    assert_true(has_v2(dir, SNAP_FULL, 0, 10, T0));
    assert_true(has_v2(dir, SNAP_INCR, 11, 20, T0 + HOUR));
    /* The same call without the flag does remove (so the test above can fail). */
    GcStats st;
    assert_int_equal(gc_run(s, GC_LIMIT_BASED, 1, 0, NOW0, 0, &st), 0);
    assert_false(has_v2(dir, SNAP_FULL, 0, 10, T0));
    store_free(s);
    rm_tmpdir(dir);
}

static void test_run_stops_after_five_failed_removals(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    FailDrv *fd = NULL;
    Store *s = open_store(dir, "", &fd); /* every remove fails */
    for (int k = 0; k < 8; k++) {
        put(s, SNAP_FULL, 0, 100 * (k + 1), T0 + k * HOUR);
        put(s, SNAP_INCR, 100 * (k + 1) + 1, 100 * (k + 1) + 50, T0 + k * HOUR + 600);
    }
    GcStats st;
    int rc = gc_run(s, GC_LIMIT_BASED, 1, 0, NOW0, 0, &st);
    assert_int_equal(rc, ERR_IO);
    assert_non_null(strstr(err_msg(), "injected failure"));
    assert_int_equal(fd->removes_tried, GC_MAX_REMOVE_ERRORS);
    assert_int_equal(st.full_failed + st.incr_failed, GC_MAX_REMOVE_ERRORS);
    /* A full goes only after its deltas: every failed delta kept its full. */
    assert_int_equal(st.full_failed, 0);
    assert_int_equal(st.full_removed + st.incr_removed, 0);
    assert_true(st.stopped);
    assert_true(has_v2(dir, SNAP_FULL, 0, 100, T0));
    store_free(s);
    rm_tmpdir(dir);
}

static void test_run_keeps_full_whose_delta_could_not_be_removed(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    FailDrv *fd = NULL;
    Store *s = open_store(dir, "Incr-00000011-", &fd);
    fill_store(dir, s);
    GcStats st;
    int rc = gc_run(s, GC_LIMIT_BASED, 1, 0, NOW0, 0, &st);
    assert_int_equal(rc, ERR_IO);
    assert_int_equal(st.incr_failed, 1);
    assert_int_equal(st.full_failed, 0);
    assert_false(st.stopped);
    assert_true(has_v2(dir, SNAP_FULL, 0, 10, T0));         /* kept: its delta failed */
    assert_true(has_v2(dir, SNAP_INCR, 11, 20, T0 + HOUR)); /* the failure */
    assert_false(has_v2(dir, SNAP_FULL, 0, 30, T0 + 2 * HOUR));
    assert_false(has_v2(dir, SNAP_INCR, 31, 40, T0 + 3 * HOUR));
    assert_true(has_v2(dir, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
    assert_int_equal(st.full_removed, 2); /* v1 full and Full 30 */
    assert_int_equal(st.incr_removed, 1);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_run_skips_immutable_objects_without_counting_failures(void **state) {
    (void)state;
    /* ABS BlobImmutableDueToPolicy (docs/go-tool.md §6.4): skipped, not a failure; the full whose
     * delta is immutable stays with it, the other streams go as planned. */
    char *dir = make_tmpdir();
    FailDrv *fd = NULL;
    Store *s = open_store(dir, "Incr-00000011-", &fd);
    fd->fail_rc = ERR_IMMUTABLE;
    fill_store(dir, s);
    GcStats st;
    assert_int_equal(gc_run(s, GC_LIMIT_BASED, 1, 0, NOW0, 0, &st), 0);
    assert_int_equal(st.immutable_skipped, 1);
    assert_int_equal(st.full_failed + st.incr_failed, 0);
    assert_false(st.stopped);
    assert_true(has_v2(dir, SNAP_FULL, 0, 10, T0));
    assert_true(has_v2(dir, SNAP_INCR, 11, 20, T0 + HOUR));
    assert_false(has_v2(dir, SNAP_FULL, 0, 30, T0 + 2 * HOUR));
    assert_false(has_v2(dir, SNAP_INCR, 31, 40, T0 + 3 * HOUR));
    assert_true(has_v2(dir, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
    store_free(s);
    rm_tmpdir(dir);
}

static void test_run_counts_already_removed_objects_as_removed(void **state) {
    (void)state;
    /* Another GC (or an eventually consistent listing) got there first: not a failure, so
     * neither the error limit nor the full of the stream is affected. */
    char *dir = make_tmpdir();
    FailDrv *fd = NULL;
    Store *s = open_store(dir, "Incr-", &fd);
    fd->fail_rc = ERR_NOT_FOUND;
    fill_store(dir, s);
    GcStats st;
    assert_int_equal(gc_run(s, GC_LIMIT_BASED, 1, 0, NOW0, 0, &st), 0);
    assert_int_equal(st.incr_removed, 2);
    assert_int_equal(st.full_removed, 3);
    assert_int_equal(st.full_failed + st.incr_failed, 0);
    assert_false(has_v2(dir, SNAP_FULL, 0, 10, T0));
    assert_false(has_v2(dir, SNAP_FULL, 0, 30, T0 + 2 * HOUR));
    store_free(s);
    rm_tmpdir(dir);
}

static void test_run_on_local_store_with_revisions_wider_than_8_digits(void **state) {
    (void)state;
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        char *dir = make_tmpdir();
        Store *s = open_store(dir, NULL, NULL);
        put(s, SNAP_FULL, 0, INT64_C(99999999), NOW0 - 50 * DAY);
        put(s, SNAP_INCR, INT64_C(100000000), INT64_C(100000005), NOW0 - 50 * DAY + 600);
        put(s, SNAP_FULL, 0, INT64_C(100000006), NOW0 - 45 * DAY);
        put(s, SNAP_FULL, 0, INT64_C(123456789012), NOW0 - 40 * DAY);
        put(s, SNAP_INCR, INT64_C(123456789013), INT64_C(123456789020), NOW0 - 40 * DAY + 600);
        GcStats st;
        assert_int_equal(gc_run(s, p, 1, 0, NOW0, 0, &st), 0);
        assert_int_equal(st.full_removed, 2);
        assert_int_equal(st.incr_removed, 1);
        assert_true(has_v2(dir, SNAP_FULL, 0, INT64_C(123456789012), NOW0 - 40 * DAY));
        assert_true(has_v2(dir, SNAP_INCR, INT64_C(123456789013), INT64_C(123456789020),
                           NOW0 - 40 * DAY + 600));
        assert_false(has_v2(dir, SNAP_FULL, 0, INT64_C(99999999), NOW0 - 50 * DAY));
        assert_false(has_v2(dir, SNAP_FULL, 0, INT64_C(100000006), NOW0 - 45 * DAY));
        store_free(s);
        rm_tmpdir(dir);
    }
}

/* ---------- GC scoped to one history (docs/store-history.md) ---------- */

#define GH_MINE "1111111111111111"
#define GH_OTHER "2222222222222222"

/* put() after tagging the name with hist ("" = untagged), as the snapshotter writes. */
static void put_h(Store *s, const char *hist, SnapKind kind, int64_t start, int64_t last,
                  int64_t created) {
    if (hist[0]) {
        char name[200];
        assert_int_equal(snapname_format(kind, start, last, created, ".gz", 0, name, sizeof name),
                         0);
        assert_int_equal(store_history_tag(s, hist, name), 0);
    }
    put(s, kind, start, last, created);
}

static int has_tag(const char *dir, const char *hist, SnapKind kind, int64_t start, int64_t last,
                   int64_t t) {
    char name[200], rel[300];
    assert_int_equal(snapname_format(kind, start, last, t, ".gz", 0, name, sizeof name), 0);
    snprintf(rel, sizeof rel, "etcd-main/etcdbr/history/%s/%s", hist, name);
    return exists_rel(dir, rel);
}

/* untagged: F10 I20; mine: F30 I40 F50 I60; other: F70 I80 F90 (newer fulls than mine). */
static void fill_histories(Store *s) {
    put_h(s, "", SNAP_FULL, 0, 10, T0);
    put_h(s, "", SNAP_INCR, 11, 20, T0 + HOUR);
    put_h(s, GH_MINE, SNAP_FULL, 0, 30, T0 + 2 * HOUR);
    put_h(s, GH_MINE, SNAP_INCR, 31, 40, T0 + 3 * HOUR);
    put_h(s, GH_MINE, SNAP_FULL, 0, 50, T0 + 4 * HOUR);
    put_h(s, GH_MINE, SNAP_INCR, 51, 60, T0 + 5 * HOUR);
    put_h(s, GH_OTHER, SNAP_FULL, 0, 70, T0 + 6 * HOUR);
    put_h(s, GH_OTHER, SNAP_INCR, 71, 80, T0 + 7 * HOUR);
    put_h(s, GH_OTHER, SNAP_FULL, 0, 90, T0 + 8 * HOUR);
}

static void test_run_scoped_removes_only_its_own_history(void **state) {
    (void)state;
    /* LimitBased 1 now, and Exponential two months on (it keeps only the newest full then):
     * both would remove every full but F90 if the scope were ignored. */
    for (GcPolicy p = GC_EXPONENTIAL; p <= GC_LIMIT_BASED; p++) {
        int64_t now = p == GC_LIMIT_BASED ? NOW0 : NOW0 + 60 * DAY;
        char *dir = make_tmpdir();
        Store *s = open_store(dir, NULL, NULL);
        fill_histories(s);
        GcScope mine = {GH_MINE, 0};
        GcStats st;
        assert_int_equal(gc_run_scoped(s, &mine, p, 1, 0, now, 0, &st), 0);
        assert_int_equal(st.listed, 9);
        assert_int_equal(st.full_removed, 1);
        assert_int_equal(st.incr_removed, 1);
        assert_false(has_v2(dir, SNAP_FULL, 0, 30, T0 + 2 * HOUR));
        assert_false(has_v2(dir, SNAP_INCR, 31, 40, T0 + 3 * HOUR));
        /* the newest full of the scope stays although another history has newer ones */
        assert_true(has_v2(dir, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
        assert_true(has_v2(dir, SNAP_INCR, 51, 60, T0 + 5 * HOUR));
        /* untagged and the other history's objects stay */
        assert_true(has_v2(dir, SNAP_FULL, 0, 10, T0));
        assert_true(has_v2(dir, SNAP_INCR, 11, 20, T0 + HOUR));
        assert_true(has_v2(dir, SNAP_FULL, 0, 70, T0 + 6 * HOUR));
        assert_true(has_v2(dir, SNAP_INCR, 71, 80, T0 + 7 * HOUR));
        assert_true(has_v2(dir, SNAP_FULL, 0, 90, T0 + 8 * HOUR));
        /* the tags of what was removed went with it; the others stay */
        assert_false(has_tag(dir, GH_MINE, SNAP_FULL, 0, 30, T0 + 2 * HOUR));
        assert_false(has_tag(dir, GH_MINE, SNAP_INCR, 31, 40, T0 + 3 * HOUR));
        assert_true(has_tag(dir, GH_MINE, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
        assert_true(has_tag(dir, GH_MINE, SNAP_INCR, 51, 60, T0 + 5 * HOUR));
        assert_true(has_tag(dir, GH_OTHER, SNAP_FULL, 0, 70, T0 + 6 * HOUR));

        /* with include_untagged (a history that adopted them) the untagged ones go too */
        mine.include_untagged = 1;
        assert_int_equal(gc_run_scoped(s, &mine, p, 1, 0, now, 0, &st), 0);
        assert_int_equal(st.listed, 7);
        assert_int_equal(st.full_removed, 1);
        assert_int_equal(st.incr_removed, 1);
        assert_false(has_v2(dir, SNAP_FULL, 0, 10, T0));
        assert_false(has_v2(dir, SNAP_INCR, 11, 20, T0 + HOUR));
        assert_true(has_v2(dir, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
        assert_true(has_v2(dir, SNAP_INCR, 51, 60, T0 + 5 * HOUR));
        assert_true(has_v2(dir, SNAP_FULL, 0, 70, T0 + 6 * HOUR));
        assert_true(has_v2(dir, SNAP_INCR, 71, 80, T0 + 7 * HOUR));
        assert_true(has_v2(dir, SNAP_FULL, 0, 90, T0 + 8 * HOUR));

        /* the other history's own scope removes its older stream, never mine */
        GcScope other = {GH_OTHER, 0};
        assert_int_equal(gc_run_scoped(s, &other, p, 1, 0, now, 0, &st), 0);
        assert_int_equal(st.full_removed, 1);
        assert_int_equal(st.incr_removed, 1);
        assert_false(has_v2(dir, SNAP_FULL, 0, 70, T0 + 6 * HOUR));
        assert_false(has_tag(dir, GH_OTHER, SNAP_FULL, 0, 70, T0 + 6 * HOUR));
        assert_true(has_v2(dir, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
        assert_true(has_v2(dir, SNAP_FULL, 0, 90, T0 + 8 * HOUR));
        store_free(s);
        rm_tmpdir(dir);
    }
}

static void test_run_scoped_never_collects_abandoned_objects(void **state) {
    (void)state;
    /* mine forked from other at 80: other's F90 (after 80) is abandoned, F70 I80 are not; GC
     * (even unscoped) never sees F90, so the newest full it keeps is F70 */
    char *dir = make_tmpdir();
    Store *s = open_store(dir, NULL, NULL);
    fill_histories(s);
    HistoryRecord r;
    memset(&r, 0, sizeof r);
    snprintf(r.id, sizeof r.id, GH_MINE);
    snprintf(r.reason, sizeof r.reason, "fork");
    r.n_abandons = 1;
    snprintf(r.abandons[0].history, sizeof r.abandons[0].history, GH_OTHER);
    r.abandons[0].after_revision = 80;
    assert_int_equal(store_history_put_record(s, &r), 0);
    GcStats st;
    assert_int_equal(gc_run(s, GC_LIMIT_BASED, 1, 0, NOW0, 0, &st), 0);
    assert_int_equal(st.listed, 8);
    assert_true(has_v2(dir, SNAP_FULL, 0, 90, T0 + 8 * HOUR));  /* abandoned: kept */
    assert_true(has_v2(dir, SNAP_INCR, 71, 80, T0 + 7 * HOUR)); /* latest set without F90 */
    assert_true(has_v2(dir, SNAP_FULL, 0, 70, T0 + 6 * HOUR));
    assert_true(has_tag(dir, GH_OTHER, SNAP_FULL, 0, 90, T0 + 8 * HOUR));
    assert_false(has_v2(dir, SNAP_FULL, 0, 50, T0 + 4 * HOUR));
    assert_false(has_v2(dir, SNAP_FULL, 0, 10, T0));
    assert_int_equal(st.full_removed, 3);
    assert_int_equal(st.incr_removed, 3);
    store_free(s);
    rm_tmpdir(dir);
}

int main(void) {
    log_setup(LOG_ERROR, 0); /* gc_run logs every removal at info */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_policy_accepts_go_names_only),
        cmocka_unit_test(test_limit_based_keeps_newest_max_backups_fulls_and_latest_deltas),
        cmocka_unit_test(test_retention_keeps_deltas_younger_than_the_period),
        cmocka_unit_test(test_plan_rejects_bad_parameters_and_unsorted_lists),
        cmocka_unit_test(test_store_whose_newest_set_is_only_a_full_keeps_that_full),
        cmocka_unit_test(test_store_with_only_deltas_removes_nothing),
        cmocka_unit_test(test_orphan_deltas_before_first_full_go_like_old_deltas),
        cmocka_unit_test(test_chunks_are_never_planned_and_do_not_split_streams),
        cmocka_unit_test(test_revisions_wider_than_8_digits_keep_numeric_order),
        cmocka_unit_test(test_exponential_reproduces_go_unit_test_expected_set),
        cmocka_unit_test(test_exponential_matches_go_expectation_at_any_time_of_day),
        cmocka_unit_test(test_exponential_hour_buckets_follow_clock_hours),
        cmocka_unit_test(test_exponential_day_buckets_follow_utc_days),
        cmocka_unit_test(test_exponential_week_buckets_end_with_the_previous_day),
        cmocka_unit_test(test_exponential_keeps_future_full_of_the_current_clock_hour_like_go),
        cmocka_unit_test(test_exponential_compares_with_kept_neighbour_not_a_removed_one),
        cmocka_unit_test(test_latest_set_survives_every_policy_on_random_stores),
        cmocka_unit_test(test_run_removes_planned_objects_and_leaves_foreign_ones),
        cmocka_unit_test(test_run_removes_nothing_when_newest_attempt_failed),
        cmocka_unit_test(test_run_stops_after_five_failed_removals),
        cmocka_unit_test(test_run_keeps_full_whose_delta_could_not_be_removed),
        cmocka_unit_test(test_run_skips_immutable_objects_without_counting_failures),
        cmocka_unit_test(test_run_counts_already_removed_objects_as_removed),
        cmocka_unit_test(test_run_on_local_store_with_revisions_wider_than_8_digits),
        cmocka_unit_test(test_run_scoped_removes_only_its_own_history),
        cmocka_unit_test(test_run_scoped_never_collects_abandoned_objects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
