/* test_restore_build: the build stage of a restore (src/restore/restore_build.h) from a real
 * Local store (support/restore_fixture.h) through the real plan and fetch stages: the db built
 * holds every key of the full snapshot and of the deltas up to the target, at the expected
 * revision (latest, a target revision, a target time cut inside a delta), with a bump and a
 * scheduled compaction; revisions a full snapshot already holds are applied once; the restore
 * mark is written unless a db sink takes the db; deltas that end before the target revision
 * are refused. The db is read back with the project's bbolt reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/restore_fixture.h"
#include "support/testutil.h"

#include "common/err.h"
#include "format/bbolt.h"
#include "format/mvcc.h"
#include "restore/restore_build.h"
#include "restore/restore_plan.h"
#include "store/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1700000000LL

/* Full 5, Incr 6-8 (events at T0+8..T0+10), Incr 9-12 (at T0+17..T0+20). */
static void fill(RfStore *s) {
    rf_put_full(s, 5, 5, T0, "", NULL, NULL, 0);
    rf_put_delta(s, 6, 8, T0 + 10, NULL, NULL, 0);
    rf_put_delta(s, 9, 12, T0 + 20, NULL, NULL, 0);
}

typedef struct {
    RfStore s;
    RestorePlan plan;
    RestoreFullDb full;
    RestoreFetch *fetch;
    RestoreResult out;
    char db_path[400];
    int64_t final_rev;
} Built;

/* Plans, fetches and builds cfg's target from b->s into <dir>/restored.db; rc of the build. */
static int build(Built *b, RestoreConfig *cfg, size_t n_deltas_given) {
    cfg->store = b->s.store;
    cfg->max_fetchers = 2;
    RestoreTarget t = {b->s.store, cfg->target_revision, cfg->target_time_ns, cfg->bump_revision};
    if (restore_plan_make(&t, &b->plan)) fail_msg("plan: %s", err_msg());
    RestoreFetchConfig fc = {.store = b->s.store, .scratch = b->s.scratch, .max_fetchers = 2};
    if (restore_fetch_full(&fc, b->plan.full, cfg->target_revision, &b->full))
        fail_msg("fetch: %s", err_msg());
    size_t n = n_deltas_given < b->plan.n_deltas ? n_deltas_given : b->plan.n_deltas;
    assert_int_equal(restore_fetch_start(&fc, b->plan.deltas, n, &b->fetch), 0);
    snprintf(b->db_path, sizeof b->db_path, "%s/restored.db", b->s.dir);
    memset(&b->out, 0, sizeof b->out);
    RestoreBuildInput in = {.src_path = b->full.path,
                            .src_len = b->full.db_len,
                            .full = b->plan.full,
                            .base_revision = b->full.revision,
                            .deltas = b->plan.deltas,
                            .n_deltas = n,
                            .fetch = b->fetch,
                            .last_revision = b->plan.store_last,
                            .db_path = b->db_path};
    return restore_build_db(cfg, &in, &b->out, &b->final_rev);
}

static void done(Built *b) {
    restore_fetch_stop(b->fetch);
    restore_full_db_release(&b->full);
    restore_plan_free(&b->plan);
    rf_close(&b->s);
}

/* The db's last revision, and whether it holds key "k<rev>" = "v<rev>" for exactly revisions
 * 2..upto (each put once, at its own revision). */
static int64_t check_keys(const char *path, int64_t upto) {
    BboltDb *db = NULL;
    if (bbolt_open(path, 0, &db)) fail_msg("open %s: %s", path, err_msg());
    int64_t rev = 0;
    assert_int_equal(bbolt_etcd_revision(db, &rev), 0);
    BboltName name = {MVCC_BUCKET_KEY, 3};
    BboltCursor *c = NULL;
    assert_int_equal(bbolt_cursor_open(db, &name, 1, &c), 0);
    int64_t want = 2;
    BboltItem it;
    int got = 0;
    while (bbolt_cursor_next(c, &it, &got) == 0 && got) {
        MvccKeyValue kv;
        assert_int_equal(mvcc_kv_unmarshal(it.value, it.value_len, &kv), 0);
        char k[32], v[32];
        snprintf(k, sizeof k, "k%lld", (long long)want);
        snprintf(v, sizeof v, "v%lld", (long long)want);
        assert_int_equal(kv.mod_revision, want);
        assert_int_equal(kv.key_len, strlen(k));
        assert_memory_equal(kv.key, k, kv.key_len);
        assert_memory_equal(kv.value, v, kv.value_len);
        want++;
    }
    assert_int_equal(want - 1, upto);
    bbolt_cursor_close(c);
    bbolt_close(db);
    return rev;
}

static int has_mark(const char *path) {
    BboltDb *db = NULL;
    assert_int_equal(bbolt_open(path, 0, &db), 0);
    int rc =
        bbolt_get(db, HISTORY_DB_BUCKET, HISTORY_DB_KEY, strlen(HISTORY_DB_KEY), NULL, 0, NULL);
    bbolt_close(db);
    return rc == 0;
}

static void test_build_latest_holds_every_key(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    fill(&b.s);
    RestoreConfig cfg = {0};
    if (build(&b, &cfg, SIZE_MAX)) fail_msg("build: %s", err_msg());
    assert_int_equal(b.final_rev, 12);
    assert_int_equal(check_keys(b.db_path, 12), 12);
    assert_int_equal(b.out.deltas_applied, 2);
    assert_int_equal(b.out.revisions_applied, 7);
    assert_int_equal(b.out.events_applied, 7);
    assert_true(b.out.db_bytes > 0);
    assert_true(has_mark(b.db_path));
    done(&b);
}

static void test_build_stops_at_the_target_revision(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    fill(&b.s);
    RestoreConfig cfg = {.target_revision = 10};
    if (build(&b, &cfg, SIZE_MAX)) fail_msg("build: %s", err_msg());
    assert_int_equal(b.final_rev, 10);
    assert_int_equal(check_keys(b.db_path, 10), 10);
    assert_int_equal(b.out.revisions_applied, 5);
    done(&b);
}

/* Revision 10 was recorded at T0+18, 11 at T0+19: a time in between cuts inside delta 9-12. */
static void test_build_cuts_at_the_target_time(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    fill(&b.s);
    RestoreConfig cfg = {.target_time_ns = (T0 + 18) * 1000000000LL + 500000000LL};
    if (build(&b, &cfg, SIZE_MAX)) fail_msg("build: %s", err_msg());
    assert_int_equal(b.final_rev, 10);
    assert_int_equal(check_keys(b.db_path, 10), 10);
    done(&b);
}

static void test_build_bumps_and_marks_compacted(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    fill(&b.s);
    RestoreConfig cfg = {.bump_revision = 100, .mark_compacted = 1};
    if (build(&b, &cfg, SIZE_MAX)) fail_msg("build: %s", err_msg());
    assert_int_equal(b.final_rev, 112);
    BboltDb *db = NULL;
    assert_int_equal(bbolt_open(b.db_path, 0, &db), 0);
    int64_t rev = 0;
    assert_int_equal(bbolt_etcd_revision(db, &rev), 0);
    assert_int_equal(rev, 112);
    uint8_t v[MVCC_MARK_BYTES];
    size_t vl = 0;
    assert_int_equal(bbolt_get(db, MVCC_BUCKET_META, MVCC_META_SCHEDULED_COMPACT,
                               strlen(MVCC_META_SCHEDULED_COMPACT), v, sizeof v, &vl),
                     0);
    int64_t main_rev = 0, sub = 0;
    int tomb = 0;
    assert_int_equal(mvcc_rev_parse(v, vl, &main_rev, &sub, &tomb), 0);
    assert_int_equal(main_rev, 112);
    bbolt_close(db);
    done(&b);
}

/* A bump alone: the db's last revision is the bumped one (an empty value at it, as etcdutl). */
static void test_build_bump_alone_moves_the_revision(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    fill(&b.s);
    RestoreConfig cfg = {.bump_revision = 50};
    if (build(&b, &cfg, SIZE_MAX)) fail_msg("build: %s", err_msg());
    assert_int_equal(b.final_rev, 62);
    BboltDb *db = NULL;
    assert_int_equal(bbolt_open(b.db_path, 0, &db), 0);
    int64_t rev = 0;
    assert_int_equal(bbolt_etcd_revision(db, &rev), 0);
    assert_int_equal(rev, 62);
    bbolt_close(db);
    done(&b);
}

/* The Go tool names a full snapshot by a revision read before its stream: one named 5 may hold
 * revision 7. The delta 6-8 then repeats 6 and 7, and only 8 is applied (each revision once). */
static void test_build_applies_an_overlap_once(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    rf_put_full(&b.s, 5, 7, T0, "", NULL, NULL, 0);
    rf_put_delta(&b.s, 6, 8, T0 + 10, NULL, NULL, 0);
    RestoreConfig cfg = {0};
    if (build(&b, &cfg, SIZE_MAX)) fail_msg("build: %s", err_msg());
    assert_int_equal(b.final_rev, 8);
    assert_int_equal(check_keys(b.db_path, 8), 8);
    assert_int_equal(b.out.revisions_applied, 1);
    assert_int_equal(b.out.events_applied, 1);
    done(&b);
}

static int sink(void *ctx, const char *db_path, const Snapshot *full, const RestoreResult *res) {
    (void)ctx, (void)db_path, (void)full, (void)res;
    return 0;
}

static void test_build_for_a_db_sink_has_no_restore_mark(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    fill(&b.s);
    RestoreConfig cfg = {.db_sink = sink};
    if (build(&b, &cfg, SIZE_MAX)) fail_msg("build: %s", err_msg());
    assert_int_equal(check_keys(b.db_path, 12), 12);
    assert_false(has_mark(b.db_path));
    done(&b);
}

static void test_build_refuses_deltas_ending_before_the_target(void **state) {
    (void)state;
    Built b;
    rf_open(&b.s);
    fill(&b.s);
    RestoreConfig cfg = {.target_revision = 11};
    assert_int_equal(build(&b, &cfg, 1), ERR_GAP); /* only delta 6-8 given */
    assert_non_null(strstr(err_msg(), "end at revision 8, before the target 11"));
    done(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_latest_holds_every_key),
        cmocka_unit_test(test_build_stops_at_the_target_revision),
        cmocka_unit_test(test_build_cuts_at_the_target_time),
        cmocka_unit_test(test_build_bumps_and_marks_compacted),
        cmocka_unit_test(test_build_bump_alone_moves_the_revision),
        cmocka_unit_test(test_build_applies_an_overlap_once),
        cmocka_unit_test(test_build_for_a_db_sink_has_no_restore_mark),
        cmocka_unit_test(test_build_refuses_deltas_ending_before_the_target),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
