/* test_mvcc: etcd's key/lease bucket encoding. The reference is etcd itself: every value of the
 * key bucket of a full snapshot written by a real etcd 3.4 (the Go tool's fixture) must unmarshal
 * and marshal back to the same bytes, and every key must parse as a revision; hand-checked
 * vectors from gogoproto's wire format for the rest. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/err.h"
#include "format/bbolt.h"
#include "format/mvcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FIXTURE_FULL "tests/fixtures/seed-plain/store/v2/Full-00000000-00000190-1795974921"

static void test_rev_key_round_trips_and_marks_tombstones(void **state) {
    (void)state;
    uint8_t k[MVCC_MARK_BYTES];
    assert_int_equal(mvcc_rev_key(0x0102030405060708LL, 3, 0, k), 17);
    const uint8_t want[17] = {1, 2, 3, 4, 5, 6, 7, 8, '_', 0, 0, 0, 0, 0, 0, 0, 3};
    assert_memory_equal(k, want, 17);
    int64_t m, s;
    int t;
    assert_int_equal(mvcc_rev_parse(k, 17, &m, &s, &t), 0);
    assert_int_equal(m, 0x0102030405060708LL);
    assert_int_equal(s, 3);
    assert_int_equal(t, 0);
    assert_int_equal(mvcc_rev_key(42, 0, 1, k), 18);
    assert_int_equal(k[17], 't');
    assert_int_equal(mvcc_rev_parse(k, 18, &m, &s, &t), 0);
    assert_int_equal(m, 42);
    assert_int_equal(t, 1);
    /* wrong lengths, separator or mark */
    assert_int_equal(mvcc_rev_parse(k, 16, NULL, NULL, NULL), ERR_CORRUPT);
    k[17] = 'x';
    assert_int_equal(mvcc_rev_parse(k, 18, NULL, NULL, NULL), ERR_CORRUPT);
    k[8] = '-';
    assert_int_equal(mvcc_rev_parse(k, 17, NULL, NULL, NULL), ERR_CORRUPT);
}

static void test_kv_marshal_matches_gogoproto_wire_format(void **state) {
    (void)state;
    /* KeyValue{key "a", create 5, mod 7, version 2, value "xy", lease 300}:
     * 0a 01 61 | 10 05 | 18 07 | 20 02 | 2a 02 78 79 | 30 ac 02 */
    MvccKeyValue kv = {(const uint8_t *)"a", 1, (const uint8_t *)"xy", 2, 5, 7, 2, 300};
    const uint8_t want[] = {0x0a, 1,    'a', 0x10, 5,   0x18, 7,    0x20,
                            2,    0x2a, 2,   'x',  'y', 0x30, 0xac, 2};
    uint8_t buf[64];
    assert_int_equal(mvcc_kv_size(&kv), sizeof want);
    assert_int_equal(mvcc_kv_marshal(&kv, buf), sizeof want);
    assert_memory_equal(buf, want, sizeof want);
    /* a tombstone's value is the key only; zero fields and empty bytes are omitted */
    MvccKeyValue del = {(const uint8_t *)"k", 1, NULL, 0, 0, 0, 0, 0};
    assert_int_equal(mvcc_kv_marshal(&del, buf), 3);
    assert_memory_equal(buf, "\x0a\x01k", 3);
    /* a negative int64 takes ten varint bytes */
    MvccKeyValue neg = {(const uint8_t *)"k", 1, NULL, 0, 0, 0, 0, -1};
    assert_int_equal(mvcc_kv_marshal(&neg, buf), 3 + 11);
    MvccKeyValue back;
    assert_int_equal(mvcc_kv_unmarshal(buf, 14, &back), 0);
    assert_int_equal(back.lease, -1);
    /* truncated and bad wire types are corrupt */
    assert_int_equal(mvcc_kv_unmarshal(want, sizeof want - 1, &back), ERR_CORRUPT);
    const uint8_t badwt[] = {0x0b, 0};
    assert_int_equal(mvcc_kv_unmarshal(badwt, sizeof badwt, &back), ERR_CORRUPT);
    /* an unknown field is skipped */
    const uint8_t unknown[] = {0x0a, 1, 'a', 0x78, 9, 0x10, 5};
    assert_int_equal(mvcc_kv_unmarshal(unknown, sizeof unknown, &back), 0);
    assert_int_equal(back.create_revision, 5);
}

static void test_lease_marshal_round_trips(void **state) {
    (void)state;
    uint8_t buf[MVCC_LEASE_MAX];
    size_t n = mvcc_lease_marshal(1, 15, 0, buf);
    assert_int_equal(n, 4);
    assert_memory_equal(buf, "\x08\x01\x10\x0f", 4);
    n = mvcc_lease_marshal(INT64_MAX, 3600, 1200, buf);
    int64_t id, ttl, rem;
    assert_int_equal(mvcc_lease_unmarshal(buf, n, &id, &ttl, &rem), 0);
    assert_true(id == INT64_MAX && ttl == 3600 && rem == 1200);
    assert_int_equal(mvcc_lease_unmarshal(buf, n - 1, &id, &ttl, &rem), ERR_CORRUPT);
    uint8_t k[8];
    mvcc_lease_key(0x0102030405060708LL, k);
    assert_memory_equal(k, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
}

/* Every key bucket entry etcd wrote re-encodes to the same bytes. */
static void test_etcd_key_bucket_reencodes_byte_for_byte(void **state) {
    (void)state;
    const char *src = getenv("ETCDBR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src ? src : ".", FIXTURE_FULL);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    BboltDb *db = NULL;
    assert_int_equal(bbolt_open(path, (uint64_t)st.st_size - 32, &db), 0);
    BboltName bucket = {"key", 3};
    BboltCursor *c = NULL;
    assert_int_equal(bbolt_cursor_open(db, &bucket, 1, &c), 0);
    size_t n = 0, tombstones = 0;
    int64_t prev_main = 0;
    uint8_t *buf = malloc(1 << 21);
    assert_non_null(buf);
    for (;;) {
        BboltItem it;
        int got = 0;
        assert_int_equal(bbolt_cursor_next(c, &it, &got), 0);
        if (!got) break;
        int64_t m, s;
        int t;
        assert_int_equal(mvcc_rev_parse(it.key, it.key_len, &m, &s, &t), 0);
        assert_true(m >= prev_main);
        prev_main = m;
        MvccKeyValue kv;
        assert_int_equal(mvcc_kv_unmarshal(it.value, it.value_len, &kv), 0);
        if (t) {
            tombstones++;
        } else {
            assert_int_equal(kv.mod_revision, m);
        }
        assert_int_equal(mvcc_kv_size(&kv), it.value_len);
        assert_int_equal(mvcc_kv_marshal(&kv, buf), it.value_len);
        assert_memory_equal(buf, it.value, it.value_len);
        n++;
    }
    assert_true(n >= 190);
    assert_true(tombstones > 0);
    free(buf);
    bbolt_cursor_close(c);
    bbolt_close(db);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rev_key_round_trips_and_marks_tombstones),
        cmocka_unit_test(test_kv_marshal_matches_gogoproto_wire_format),
        cmocka_unit_test(test_lease_marshal_round_trips),
        cmocka_unit_test(test_etcd_key_bucket_reencodes_byte_for_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
