/* test_initializer: the initializer's multi-member decisions (docs/go-tool.md §9.2) through fake
 * cluster hooks (the real ones, src/sidecar/member.c, are covered against real etcd clusters by
 * tests/integration/test_cluster_*.sh): a member absent from the member list joins as a learner
 * with its data dir aside and without validation; a listed member with an invalid data dir is
 * removed, its data dir kept aside, and re-added; a failed removal touches nothing; without the
 * cluster the single-member rules apply and no hook but the probe runs; a listed member whose
 * others have no quorum is neither restored nor started empty. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/err.h"
#include "common/fsutil.h"
#include "restore/initializer.h"
#include "support/testutil.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    InitMemberState state;
    int remove_rc, add_rc;
    int removes, adds;
    int dir_existed_at_add; /* the data dir was still there when add_learner ran */
    const char *dir;
} Fake;

static InitMemberState fake_probe(void *ctx) {
    return ((Fake *)ctx)->state;
}
static int fake_remove(void *ctx) {
    Fake *f = ctx;
    f->removes++;
    return f->remove_rc ? err_set(f->remove_rc, "fake: removal refused") : 0;
}
static int fake_add(void *ctx) {
    Fake *f = ctx;
    f->adds++;
    f->dir_existed_at_add = fs_exists(f->dir);
    return f->add_rc ? err_set(f->add_rc, "fake: add refused") : 0;
}

static char root[256];

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "%s/etcdbr-init-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(root));
    return 0;
}
static int teardown(void **state) {
    (void)state;
    fs_remove_tree(root);
    return 0;
}

/* A data dir with a marker file and an invalid structure (no member/wal). */
static void stale_dir(const char *dd) {
    char p[512];
    snprintf(p, sizeof p, "%s/member/snap", dd);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);
    snprintf(p, sizeof p, "%s/member/marker", dd);
    write_file(p, "old", 3);
}

static void write_file_mkdirs(const char *path, const char *text, size_t len) {
    char *dir = fs_dirname(path);
    assert_non_null(dir);
    assert_int_equal(fs_mkdir_p(dir, 0700), 0);
    free(dir);
    write_file(path, text, len);
}

/* The copies of dd moved aside ("<dd>.invalid.<UTC time>[.<n>]"), sorted: their count; the
 * n-th's "member/marker" into out when out is given. */
static size_t aside_copies(const char *dd, size_t n, char *out, size_t size) {
    char pat[600];
    snprintf(pat, sizeof pat, "%s.invalid.*", dd);
    glob_t g;
    size_t count = glob(pat, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
    if (out && n < count) snprintf(out, size, "%s/member/marker", g.gl_pathv[n]);
    if (count) globfree(&g);
    return count;
}

static int run_init_max(const char *dd, Fake *f, InitResult *res, int max_copies) {
    f->dir = dd;
    InitMember hooks = {
        .ctx = f, .probe = fake_probe, .remove_self = fake_remove, .add_learner = fake_add};
    InitConfig ic;
    memset(&ic, 0, sizeof ic);
    ic.restore.data_dir = dd;
    ic.full_mode = 1;
    ic.member = &hooks;
    ic.max_invalid_copies = max_copies;
    return initializer_run(&ic, res);
}

static int run_init(const char *dd, Fake *f, InitResult *res) {
    return run_init_max(dd, f, res, 0);
}

static void test_absent_member_joins_as_learner_with_its_data_dir_aside(void **state) {
    (void)state;
    char dd[512], aside[600];
    snprintf(dd, sizeof dd, "%s/absent.etcd", root);
    stale_dir(dd);
    Fake f = {.state = INIT_MEMBER_ABSENT};
    InitResult res;
    assert_int_equal(run_init(dd, &f, &res), 0);
    assert_int_equal(f.removes, 0);
    assert_int_equal(f.adds, 1);
    assert_false(f.dir_existed_at_add);
    assert_true(res.joined_as_learner);
    assert_false(res.restored);
    assert_int_equal(aside_copies(dd, 0, aside, sizeof aside), 1);
    assert_true(fs_exists(aside));
    assert_non_null(strstr(res.summary, "--initial-cluster-state=existing"));
}

static void test_listed_member_with_invalid_data_dir_is_removed_and_re_added(void **state) {
    (void)state;
    char dd[512], aside[600];
    snprintf(dd, sizeof dd, "%s/listed.etcd", root);
    stale_dir(dd);
    Fake f = {.state = INIT_MEMBER_LISTED};
    InitResult res;
    assert_int_equal(run_init(dd, &f, &res), 0);
    assert_int_equal(f.removes, 1);
    assert_int_equal(f.adds, 1);
    assert_false(f.dir_existed_at_add);
    assert_true(res.joined_as_learner);
    assert_int_equal(aside_copies(dd, 0, aside, sizeof aside), 1);
    assert_true(fs_exists(aside));
    /* a missing data dir takes the same way */
    Fake g = {.state = INIT_MEMBER_LISTED};
    snprintf(dd, sizeof dd, "%s/missing.etcd", root);
    assert_int_equal(run_init(dd, &g, &res), 0);
    assert_int_equal(g.removes, 1);
    assert_int_equal(g.adds, 1);
}

static void test_failed_removal_keeps_the_data_dir_and_adds_nothing(void **state) {
    (void)state;
    char dd[512], marker[600];
    snprintf(dd, sizeof dd, "%s/refused.etcd", root);
    snprintf(marker, sizeof marker, "%s/member/marker", dd);
    stale_dir(dd);
    Fake f = {.state = INIT_MEMBER_LISTED, .remove_rc = ERR_ETCD};
    InitResult res;
    assert_int_equal(run_init(dd, &f, &res), ERR_ETCD);
    assert_non_null(strstr(err_msg(), "removing this member"));
    assert_int_equal(f.adds, 0);
    assert_true(fs_exists(marker));
    assert_false(res.joined_as_learner);
}

static void test_failed_add_is_an_error(void **state) {
    (void)state;
    char dd[512];
    snprintf(dd, sizeof dd, "%s/addfails.etcd", root);
    Fake f = {.state = INIT_MEMBER_ABSENT, .add_rc = ERR_ETCD};
    InitResult res;
    assert_int_equal(run_init(dd, &f, &res), ERR_ETCD);
    assert_non_null(strstr(err_msg(), "as a learner"));
    assert_false(res.joined_as_learner);
}

static void test_unknown_cluster_keeps_the_single_member_rules(void **state) {
    (void)state;
    char dd[512], aside[600];
    snprintf(dd, sizeof dd, "%s/single.etcd", root);
    stale_dir(dd);
    Fake f = {.state = INIT_MEMBER_UNKNOWN};
    InitResult res;
    assert_int_equal(run_init(dd, &f, &res), 0); /* no store: etcd starts empty */
    assert_int_equal(f.removes + f.adds, 0);
    assert_false(res.joined_as_learner);
    assert_int_equal(aside_copies(dd, 0, aside, sizeof aside), 1);
    assert_true(fs_exists(aside));
    assert_non_null(strstr(res.summary, "no store is configured"));
}

/* A listed member whose other members have no quorum: a restore from the store (or an empty
 * start) under the same member ID would let the old leader replay its raft log onto it once
 * quorum returns (a diverging keyspace), so nothing is restored, removed, added or moved. */
static void test_no_quorum_refuses_to_restore_an_invalid_data_dir(void **state) {
    (void)state;
    char dd[512], marker[600];
    snprintf(dd, sizeof dd, "%s/noquorum.etcd", root);
    snprintf(marker, sizeof marker, "%s/member/marker", dd);
    stale_dir(dd);
    Fake f = {.state = INIT_MEMBER_NO_QUORUM};
    InitResult res;
    assert_int_equal(run_init(dd, &f, &res), ERR_ETCD);
    assert_non_null(strstr(err_msg(), "no quorum"));
    assert_int_equal(f.removes + f.adds, 0);
    assert_false(res.restored);
    assert_false(res.joined_as_learner);
    assert_true(fs_exists(marker)); /* the data dir is where it was */

    snprintf(dd, sizeof dd, "%s/noquorum-missing.etcd", root);
    assert_int_equal(run_init(dd, &f, &res), ERR_ETCD);
    assert_false(fs_exists(dd)); /* etcd does not start empty either */
}

/* Every invalid data dir is kept: a second one never replaces the first, and the bound removes
 * only the oldest copy that etcdbr made (named as it names them AND holding its marker), never
 * a look-alike without the marker, another data dir's copy, or the copy just made. */
static void test_invalid_copies_are_kept_and_bounded_by_age(void **state) {
    (void)state;
    char dd[512], p[700], first[700], second[700], cur[700];
    snprintf(dd, sizeof dd, "%s/bounded.etcd", root);
    /* look-alikes: older by name, but no marker / another data dir's copy */
    snprintf(p, sizeof p, "%s.invalid.20000101T000000Z/member/marker", dd);
    write_file_mkdirs(p, "user", 4);
    snprintf(p, sizeof p, "%s/other.etcd.invalid.20000101T000000Z/.etcdbr-invalid", root);
    write_file_mkdirs(p, "x", 1);
    Fake f = {.state = INIT_MEMBER_UNKNOWN};
    InitResult res;
    stale_dir(dd);
    assert_int_equal(run_init_max(dd, &f, &res, 2), 0);
    stale_dir(dd);
    assert_int_equal(run_init_max(dd, &f, &res, 2), 0);
    assert_int_equal(aside_copies(dd, 1, first, sizeof first), 3); /* both, and the look-alike */
    assert_int_equal(aside_copies(dd, 2, second, sizeof second), 3);
    assert_true(fs_exists(first) && fs_exists(second));
    stale_dir(dd);
    assert_int_equal(run_init_max(dd, &f, &res, 2), 0); /* the first copy goes */
    assert_int_equal(aside_copies(dd, 0, cur, sizeof cur), 3);
    assert_non_null(strstr(cur, ".invalid.20000101T000000Z/"));
    assert_false(fs_exists(first));
    assert_true(fs_exists(second));
    snprintf(p, sizeof p, "%s/other.etcd.invalid.20000101T000000Z/.etcdbr-invalid", root);
    assert_true(fs_exists(p));
    /* the copy carries a note saying what it is */
    snprintf(p, sizeof p, "%.*s/.etcdbr-invalid", (int)(strlen(second) - strlen("/member/marker")),
             second);
    assert_true(fs_exists(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_member_joins_as_learner_with_its_data_dir_aside),
        cmocka_unit_test(test_listed_member_with_invalid_data_dir_is_removed_and_re_added),
        cmocka_unit_test(test_failed_removal_keeps_the_data_dir_and_adds_nothing),
        cmocka_unit_test(test_failed_add_is_an_error),
        cmocka_unit_test(test_unknown_cluster_keeps_the_single_member_rules),
        cmocka_unit_test(test_no_quorum_refuses_to_restore_an_invalid_data_dir),
        cmocka_unit_test(test_invalid_copies_are_kept_and_bounded_by_age),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
