/* test_snapname: snapname_new, the Snapshot a writer names its new object with, against the
 * parser: for every kind, suffix, ".final" and store prefix, the struct built from the fields is
 * the one snapname_parse gives for its own key, so no writer needs to parse its name back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "store/snapname.h"

static void assert_same_snapshot(const Snapshot *a, const Snapshot *b) {
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->start_revision, b->start_revision);
    assert_int_equal(a->last_revision, b->last_revision);
    assert_int_equal(a->created_on, b->created_on);
    assert_string_equal(a->compression_suffix, b->compression_suffix);
    assert_int_equal(a->encrypted, b->encrypted);
    assert_int_equal(a->is_final, b->is_final);
    assert_int_equal(a->is_chunk, b->is_chunk);
    assert_int_equal(a->version, b->version);
    assert_string_equal(a->key, b->key);
    assert_string_equal(a->snap_dir, b->snap_dir);
    assert_string_equal(a->snap_name, b->snap_name);
    assert_string_equal(a->prefix, b->prefix);
    assert_int_equal(a->size, b->size);
    assert_string_equal(a->history, b->history);
    assert_int_equal(a->abandoned, b->abandoned);
}

static void test_new_is_what_the_parser_reads_back(void **state) {
    (void)state;
    static const char *const suffixes[] = {"",        ".gz",       ".zst", ".enc",
                                           ".enc.gz", ".enc.zlib", ".encx"};
    static const char *const store_prefixes[] = {"", "etcd-main", "a/b/c"};
    static const int64_t revs[][2] = {{0, 190}, {191, 191}, {123456789012, 123456789013}};
    for (size_t p = 0; p < sizeof store_prefixes / sizeof *store_prefixes; p++) {
        char key_prefix[600];
        snprintf(key_prefix, sizeof key_prefix, "%s%sv2/", store_prefixes[p],
                 store_prefixes[p][0] ? "/" : "");
        for (size_t x = 0; x < sizeof suffixes / sizeof *suffixes; x++)
            for (int final = 0; final < 2; final++)
                for (size_t r = 0; r < sizeof revs / sizeof *revs; r++) {
                    SnapKind kind = revs[r][0] == 0 ? SNAP_FULL : SNAP_INCR;
                    Snapshot made, parsed;
                    int rc = snapname_new(kind, revs[r][0], revs[r][1], 1795974943, suffixes[x],
                                          final, key_prefix, &made);
                    if (rc) fail_msg("snapname_new %s %s: %s", key_prefix, suffixes[x], err_msg());
                    rc = snapname_parse(made.key, store_prefixes[p], &parsed);
                    if (rc) fail_msg("snapname_parse %s: %s", made.key, err_msg());
                    assert_same_snapshot(&made, &parsed);
                    /* and the name is snapname_format's */
                    char name[256];
                    assert_int_equal(snapname_format(kind, revs[r][0], revs[r][1], 1795974943,
                                                     suffixes[x], final, name, sizeof name),
                                     0);
                    assert_string_equal(made.snap_name, name);
                }
    }
    Snapshot s;
    assert_int_equal(snapname_new(SNAP_INCR, 5, 9, 1700000000, ".enc.gz", 1, "pfx/v2/", &s), 0);
    assert_string_equal(s.key, "pfx/v2/Incr-00000005-00000009-1700000000.enc.gz.final");
    assert_true(s.encrypted);
    assert_string_equal(s.compression_suffix, ".gz");
    assert_int_equal(s.size, -1);
}

static void test_new_refuses_what_format_or_the_layout_refuses(void **state) {
    (void)state;
    Snapshot s;
    /* what snapname_format refuses */
    assert_int_equal(snapname_new(SNAP_FULL, 6, 5, 1, "", 0, "v2/", &s), ERR_INVALID);
    assert_int_equal(snapname_new(SNAP_FULL, 0, 5, 1, ".gz.enc", 0, "v2/", &s), ERR_INVALID);
    assert_int_equal(snapname_new(SNAP_FULL, 0, INT64_MAX, 1, "", 0, "v2/", &s), ERR_INVALID);
    /* a key prefix that is not the v2 directory of a store */
    assert_int_equal(snapname_new(SNAP_FULL, 0, 5, 1, "", 0, "v1/", &s), ERR_INVALID);
    assert_int_equal(snapname_new(SNAP_FULL, 0, 5, 1, "", 0, "pfxv2/", &s), ERR_INVALID);
    assert_int_equal(snapname_new(SNAP_FULL, 0, 5, 1, "", 0, "pfx/v2", &s), ERR_INVALID);
    assert_int_equal(snapname_new(SNAP_FULL, 0, 5, 1, "", 0, NULL, &s), ERR_INVALID);
    char long_prefix[1100];
    memset(long_prefix, 'a', sizeof long_prefix);
    memcpy(long_prefix + sizeof long_prefix - 5, "/v2/", 5);
    assert_int_equal(snapname_new(SNAP_FULL, 0, 5, 1, "", 0, long_prefix, &s), ERR_INVALID);
    assert_string_equal(s.key, "");
    assert_string_equal(s.snap_name, "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_is_what_the_parser_reads_back),
        cmocka_unit_test(test_new_refuses_what_format_or_the_layout_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
