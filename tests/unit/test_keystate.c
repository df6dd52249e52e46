/* test_keystate: the keyspace verify tracks through a set (src/restore/keystate.h): loaded from
 * a real bbolt db written with bbolt_writer (puts, an update, a tombstone), then events that
 * follow it pass and events etcd could not have written after it (a put of version 1 on a live
 * key, a put whose version or create_revision does not follow, a delete of an absent key) fail
 * with a message naming the key and revision; events inside the full snapshot are skipped, a
 * failed state checks nothing more, several events of one revision (a txn) all apply. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "format/bbolt_writer.h"
#include "format/mvcc.h"
#include "restore/keystate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_kv(BboltWriter *w, int64_t rev, int tomb, const char *key, int64_t create,
                   int64_t version) {
    uint8_t rk[MVCC_MARK_BYTES], buf[256];
    size_t rl = mvcc_rev_key(rev, 0, tomb, rk);
    MvccKeyValue kv = {.key = (const uint8_t *)key, .key_len = strlen(key)};
    if (!tomb) {
        kv.create_revision = create;
        kv.mod_revision = rev;
        kv.version = version;
        kv.value = (const uint8_t *)"v";
        kv.value_len = 1;
    }
    size_t n = mvcc_kv_marshal(&kv, buf);
    assert_int_equal(bbolt_writer_put(w, rk, rl, buf, n), 0);
}

/* a: created at 2, updated at 3 (version 2); b: created at 4, deleted at 5. Revision 5. */
static char *make_db(void) {
    char dir[] = "/tmp/test_keystate.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = malloc(strlen(dir) + 8);
    sprintf(path, "%s/db", dir);
    BboltWriter *w = NULL;
    assert_int_equal(bbolt_writer_open(path, 0, &w), 0);
    assert_int_equal(bbolt_writer_begin_bucket(w, "key", 3), 0);
    put_kv(w, 2, 0, "a", 2, 1);
    put_kv(w, 3, 0, "a", 2, 2);
    put_kv(w, 4, 0, "b", 4, 1);
    put_kv(w, 5, 1, "b", 0, 0);
    assert_int_equal(bbolt_writer_end_bucket(w), 0);
    assert_int_equal(bbolt_writer_finish(w), 0);
    bbolt_writer_free(w);
    return path;
}

static void drop_db(char *path) {
    unlink(path);
    *strrchr(path, '/') = '\0';
    rmdir(path);
    free(path);
}

static DeltaEvent ev(int del, const char *key, int64_t rev, int64_t create, int64_t version) {
    DeltaEvent e = {.type = del ? ETCD_OP_DELETE : ETCD_OP_PUT,
                    .key = (uint8_t *)key,
                    .key_len = strlen(key),
                    .mod_revision = rev,
                    .create_revision = del ? 0 : create,
                    .version = del ? 0 : version};
    return e;
}

static KeyState *loaded(char **path) {
    *path = make_db();
    KeyState *ks = NULL;
    assert_int_equal(keystate_new(&ks), 0);
    assert_false(keystate_ok(ks));
    assert_int_equal(keystate_load_db(ks, *path, 0, 5), 0);
    assert_true(keystate_ok(ks));
    assert_int_equal(keystate_revision(ks), 5);
    return ks;
}

static void test_keystate_events_that_follow_pass(void **state) {
    (void)state;
    char *path;
    KeyState *ks = loaded(&path);
    DeltaEvent e[] = {ev(0, "a", 6, 2, 3), ev(0, "b", 6, 6, 1), /* a txn: one revision */
                      ev(1, "a", 7, 0, 0), ev(0, "a", 8, 8, 1), ev(0, "a", 9, 8, 2)};
    for (size_t i = 0; i < sizeof e / sizeof *e; i++)
        assert_int_equal(keystate_apply(ks, &e[i]), 0);
    assert_true(keystate_ok(ks));
    assert_int_equal(keystate_revision(ks), 9);
    keystate_free(ks);
    drop_db(path);
}

static void expect_contradiction(DeltaEvent bad, const char *words) {
    char *path;
    KeyState *ks = loaded(&path);
    assert_int_equal(keystate_apply(ks, &bad), ERR_CORRUPT);
    if (!strstr(err_msg(), words)) fail_msg("message \"%s\" lacks \"%s\"", err_msg(), words);
    assert_false(keystate_ok(ks));
    /* nothing more is checked once the chain is known broken */
    DeltaEvent later = ev(1, "nothing", 20, 0, 0);
    assert_int_equal(keystate_apply(ks, &later), 0);
    keystate_free(ks);
    drop_db(path);
}

static void test_keystate_contradictions_fail_naming_key_and_revision(void **state) {
    (void)state;
    /* version 1 on a live key: another cluster created it */
    expect_contradiction(ev(0, "a", 6, 6, 1), "put of key \"a\" at revision 6");
    /* version 2 of an absent (deleted) key */
    expect_contradiction(ev(0, "b", 6, 4, 2), "was absent");
    /* the right version but another create_revision */
    expect_contradiction(ev(0, "a", 6, 3, 3), "created at revision 2, version 2");
    /* a skipped version */
    expect_contradiction(ev(0, "a", 6, 2, 5), "key \"a\"");
    /* a delete of an absent key */
    expect_contradiction(ev(1, "zz", 6, 0, 0), "delete of key \"zz\" at revision 6");
}

static void test_keystate_revisions_held_twice_apply_once(void **state) {
    (void)state;
    char *path;
    KeyState *ks = loaded(&path);
    keystate_begin_delta(ks);
    DeltaEvent d1[] = {ev(0, "a", 6, 2, 3), ev(0, "b", 7, 7, 1)};
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(keystate_apply(ks, &d1[i]), 0);
    keystate_begin_delta(ks); /* the next delta holds 6-7 again, then 8 */
    DeltaEvent d2[] = {ev(0, "a", 6, 2, 3), ev(0, "b", 7, 7, 1), ev(0, "a", 8, 2, 4)};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(keystate_apply(ks, &d2[i]), 0);
    assert_true(keystate_ok(ks));
    assert_int_equal(keystate_revision(ks), 8);
    keystate_free(ks);
    drop_db(path);
}

static void test_keystate_events_inside_the_full_snapshot_are_skipped(void **state) {
    (void)state;
    char *path;
    KeyState *ks = loaded(&path);
    DeltaEvent old = ev(1, "never", 5, 0, 0); /* at the db's revision: in the db already */
    assert_int_equal(keystate_apply(ks, &old), 0);
    assert_true(keystate_ok(ks));
    keystate_reset(ks);
    assert_false(keystate_ok(ks));
    DeltaEvent any = ev(1, "never", 6, 0, 0);
    assert_int_equal(keystate_apply(ks, &any), 0); /* invalid: not checked */
    keystate_free(ks);
    drop_db(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keystate_events_that_follow_pass),
        cmocka_unit_test(test_keystate_contradictions_fail_naming_key_and_revision),
        cmocka_unit_test(test_keystate_revisions_held_twice_apply_once),
        cmocka_unit_test(test_keystate_events_inside_the_full_snapshot_are_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
