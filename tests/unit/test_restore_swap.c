/* test_restore_swap: the targets and the swap into place of a restore
 * (src/restore/restore_swap.h) on real directories in a temp dir: a data dir that is not empty
 * is refused and left as it was; two members may not share a data dir; a second restore into
 * the same parent is refused while the first holds its lock; a "<data-dir>.part" that is not
 * ours is refused and never touched, one left by a killed restore (our marker) is replaced; a
 * failure before the swap removes only our "<data-dir>.part" and leaves the data dir as it was;
 * the swap renames the member dir into place (an empty data dir replaced); a swap that fails
 * for the second member keeps that member's data dir and its files and says the first was
 * already written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/testutil.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "restore/restore_swap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char dir[128];
    char a[256], b[256]; /* two data dirs in dir */
    RestoreMember ms[2];
} Dirs;

static void dirs_make(Dirs *d) {
    snprintf(d->dir, sizeof d->dir, "/tmp/test_restore_swap.XXXXXX");
    assert_non_null(mkdtemp(d->dir));
    snprintf(d->a, sizeof d->a, "%s/a", d->dir);
    snprintf(d->b, sizeof d->b, "%s/b", d->dir);
    d->ms[0] = (RestoreMember){"m1", d->a, "http://127.0.0.1:2380"};
    d->ms[1] = (RestoreMember){"m2", d->b, "http://127.0.0.1:2381"};
}

static void dirs_drop(Dirs *d) {
    assert_int_equal(sh(NULL, 0, "rm -rf '%s'", d->dir), 0);
}

static void file_in(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, text, strlen(text));
}

static int has_file(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!fs_exists(path)) return 0;
    size_t len = 0;
    uint8_t *buf = read_file(path, &len);
    int same = len == strlen(text) && memcmp(buf, text, len) == 0;
    free(buf);
    return same;
}

static void test_swap_refuses_a_data_dir_that_is_not_empty(void **state) {
    (void)state;
    Dirs d;
    dirs_make(&d);
    assert_int_equal(mkdir(d.a, 0700), 0);
    file_in(d.a, "old", "operator's data");
    RestoreSwap s;
    int refused = 0;
    assert_int_equal(restore_swap_lock(&s, d.ms, 1, &refused), ERR_EXISTS);
    assert_non_null(strstr(err_msg(), d.a));
    restore_swap_abort(&s, ERR_EXISTS);
    restore_swap_free(&s);
    assert_true(has_file(d.a, "old", "operator's data"));
    assert_false(refused);
    dirs_drop(&d);
}

static void test_swap_refuses_one_data_dir_for_two_members(void **state) {
    (void)state;
    Dirs d;
    dirs_make(&d);
    d.ms[1].data_dir = d.a;
    RestoreSwap s;
    int refused = 0;
    assert_int_equal(restore_swap_lock(&s, d.ms, 2, &refused), ERR_INVALID);
    assert_true(refused);
    assert_non_null(strstr(err_msg(), "same data dir"));
    restore_swap_free(&s);
    dirs_drop(&d);
}

static void test_swap_second_restore_into_a_locked_parent_refused(void **state) {
    (void)state;
    Dirs d;
    dirs_make(&d);
    RestoreSwap s1, s2;
    int refused = 0;
    assert_int_equal(restore_swap_lock(&s1, d.ms, 1, &refused), 0);
    assert_int_equal(restore_swap_lock(&s2, d.ms, 1, &refused), ERR_EXISTS);
    assert_non_null(strstr(err_msg(), "another restore"));
    restore_swap_free(&s2);
    restore_swap_free(&s1); /* the lock is released */
    assert_int_equal(restore_swap_lock(&s2, d.ms, 1, &refused), 0);
    restore_swap_free(&s2);
    dirs_drop(&d);
}

static void test_swap_never_touches_a_part_dir_that_is_not_ours(void **state) {
    (void)state;
    Dirs d;
    dirs_make(&d);
    char part[300];
    snprintf(part, sizeof part, "%s.part", d.a);
    assert_int_equal(mkdir(part, 0700), 0);
    file_in(part, "notes", "the operator's");
    RestoreSwap s;
    int refused = 0;
    assert_int_equal(restore_swap_lock(&s, d.ms, 1, &refused), 0);
    assert_int_equal(restore_swap_prepare(&s), ERR_EXISTS);
    assert_non_null(strstr(err_msg(), part));
    restore_swap_abort(&s, ERR_EXISTS);
    restore_swap_free(&s);
    assert_true(has_file(part, "notes", "the operator's"));
    assert_false(fs_exists(d.a));
    dirs_drop(&d);
}

/* A failure after the work dirs were made (e.g. the build failed): only our
 * "<data-dir>.part" goes; an empty data dir the operator made stays. A part dir an earlier,
 * killed restore left (our marker) is replaced. */
static void test_swap_failure_before_commit_removes_only_ours(void **state) {
    (void)state;
    Dirs d;
    dirs_make(&d);
    assert_int_equal(mkdir(d.a, 0700), 0);
    RestoreSwap s;
    int refused = 0;
    assert_int_equal(restore_swap_lock(&s, d.ms, 1, &refused), 0);
    assert_int_equal(restore_swap_prepare(&s), 0);
    restore_swap_free(&s); /* killed: its part dir stays behind */
    char part[300];
    snprintf(part, sizeof part, "%s.part", d.a);
    assert_true(fs_exists(part));
    assert_int_equal(restore_swap_lock(&s, d.ms, 1, &refused), 0);
    assert_int_equal(restore_swap_prepare(&s), 0); /* the left-over one replaced */
    assert_int_equal(mkdir(s.part_data[0], 0700), 0);
    file_in(s.part_data[0], "db", "half written");
    err_set(ERR_IO, "the build failed");
    restore_swap_abort(&s, ERR_IO);
    assert_string_equal(err_msg(), "the build failed");
    restore_swap_free(&s);
    assert_false(fs_exists(part));
    assert_true(fs_exists(d.a));
    assert_int_equal(fs_dir_nonempty(d.a), 0);
    dirs_drop(&d);
}

static void test_swap_commit_renames_into_place(void **state) {
    (void)state;
    Dirs d;
    dirs_make(&d);
    assert_int_equal(mkdir(d.a, 0700), 0); /* empty: allowed, replaced */
    RestoreSwap s;
    int refused = 0;
    assert_int_equal(restore_swap_lock(&s, d.ms, 2, &refused), 0);
    assert_int_equal(restore_swap_prepare(&s), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mkdir(s.part_data[i], 0700), 0);
        file_in(s.part_data[i], "member", d.ms[i].name);
    }
    assert_int_equal(restore_swap_commit(&s), 0);
    assert_int_equal(s.committed, 2);
    restore_swap_free(&s);
    assert_true(has_file(d.a, "member", "m1"));
    assert_true(has_file(d.b, "member", "m2"));
    char part[300];
    snprintf(part, sizeof part, "%s.part", d.a);
    assert_false(fs_exists(part));
    dirs_drop(&d);
}

/* Member b's data dir gets a file after the lock (someone else wrote there): the swap stops at
 * it, keeps its file, and the error says member a was already written. */
static void test_swap_failing_commit_keeps_what_it_did_not_create(void **state) {
    (void)state;
    Dirs d;
    dirs_make(&d);
    RestoreSwap s;
    int refused = 0;
    assert_int_equal(restore_swap_lock(&s, d.ms, 2, &refused), 0);
    assert_int_equal(restore_swap_prepare(&s), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mkdir(s.part_data[i], 0700), 0);
        file_in(s.part_data[i], "member", d.ms[i].name);
    }
    assert_int_equal(mkdir(d.b, 0700), 0);
    file_in(d.b, "theirs", "not ours");
    int rc = restore_swap_commit(&s);
    assert_int_equal(rc, ERR_IO);
    assert_int_equal(s.committed, 1);
    restore_swap_abort(&s, rc);
    assert_non_null(strstr(err_msg(), "the first 1 members were already written"));
    restore_swap_free(&s);
    assert_true(has_file(d.a, "member", "m1"));
    assert_true(has_file(d.b, "theirs", "not ours"));
    assert_false(has_file(d.b, "member", "m2"));
    char part[300];
    snprintf(part, sizeof part, "%s.part", d.b);
    assert_false(fs_exists(part));
    dirs_drop(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swap_refuses_a_data_dir_that_is_not_empty),
        cmocka_unit_test(test_swap_refuses_one_data_dir_for_two_members),
        cmocka_unit_test(test_swap_second_restore_into_a_locked_parent_refused),
        cmocka_unit_test(test_swap_never_touches_a_part_dir_that_is_not_ours),
        cmocka_unit_test(test_swap_failure_before_commit_removes_only_ours),
        cmocka_unit_test(test_swap_commit_renames_into_place),
        cmocka_unit_test(test_swap_failing_commit_keeps_what_it_did_not_create),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
