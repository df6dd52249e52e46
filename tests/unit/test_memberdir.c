/* test_memberdir: the WAL/snap writer (format/wal_writer) and the member dir a restore writes
 * (restore/memberdir): records written and read back with the existing reader (format/wal),
 * bounds, and a member dir byte-compared with what etcdutl v3.5.35 writes for the same flags
 * (tests/unit/data/memberdir/README.md). Whether etcd serves it is checked against real etcd
 * processes by tests/integration/test_restore_member_dir.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/err.h"
#include "common/fsutil.h"
#include "common/strbuf.h"
#include "format/wal.h"
#include "format/wal_writer.h"
#include "restore/cluster.h"
#include "restore/memberdir.h"
#include "support/testutil.h"

#define GOLDEN_CLUSTER                                                                             \
    "m1=http://127.0.0.1:2380,m2=http://127.0.0.1:2381,m2=http://127.0.0.2:2381,m3=https://"       \
    "[::1]:2382"

static char *tmpdir(void) {
    char tmpl[] = "/tmp/etcdbr-memberdir.XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static char *fixture(const char *name) {
    const char *src = getenv("ETCDBR_SOURCE_DIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/tests/unit/data/memberdir/%s", src ? src : ".", name);
    return p;
}

static void test_records_read_back_with_the_reader(void **state) {
    (void)state;
    char *dir = tmpdir(), path[4200];
    snprintf(path, sizeof path, "%s/seg.wal", dir);
    WalEncoder e = {0};
    uint8_t data[200];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7 + 1);
    assert_int_equal(wal_encoder_record(&e, WAL_REC_CRC, NULL, 0), 0);
    for (size_t len = 0; len < 40; len++) /* every padding 0-7, several times */
        assert_int_equal(wal_encoder_record(&e, WAL_REC_ENTRY, data, len * 5), 0);
    assert_int_equal(e.buf.n % 8, 0);
    assert_int_equal(wal_write_segment(path, &e), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((uint64_t)st.st_size, WAL_SEGMENT_BYTES);
    assert_int_equal(wal_write_segment(path, &e), ERR_EXISTS); /* never replaced */

    WalSegment *s = NULL;
    assert_int_equal(wal_segment_open(path, 1, &s), 0);
    uint32_t crc = 0;
    WalRecord rec;
    assert_int_equal(wal_segment_next(s, &crc, &rec), WAL_NEXT_RECORD);
    assert_int_equal(rec.type, WAL_REC_CRC);
    for (size_t len = 0; len < 40; len++) {
        assert_int_equal(wal_segment_next(s, &crc, &rec), WAL_NEXT_RECORD);
        assert_int_equal(rec.type, WAL_REC_ENTRY);
        assert_int_equal(rec.len, len * 5);
        if (len) assert_memory_equal(rec.data, data, len * 5);
    }
    assert_int_equal(crc, e.crc);
    assert_int_equal(wal_segment_next(s, &crc, &rec), WAL_NEXT_END); /* the zeros end it */
    wal_segment_close(s);
    wal_encoder_free(&e);
    fs_remove_tree(dir);
    free(dir);
}

static void test_lengths_are_bounded(void **state) {
    (void)state;
    WalEncoder e = {0};
    static const uint8_t one[1];
    /* refused before the data is read: the pointer only needs to be valid for 1 byte */
    assert_int_equal(wal_encoder_record(&e, WAL_REC_ENTRY, one, (size_t)WAL_MAX_RECORD + 1),
                     ERR_INVALID);
    assert_int_equal(e.buf.n, 0);
    char *dir = tmpdir(), path[4200];
    snprintf(path, sizeof path, "%s/x.snap", dir);
    assert_int_equal(wal_snap_write(path, one, 0), ERR_INVALID);
    assert_int_equal(wal_snap_write(path, one, (size_t)WAL_MAX_RECORD + 1), ERR_INVALID);
    fs_remove_tree(dir);
    free(dir);
}

static void test_snap_file_reads_back(void **state) {
    (void)state;
    char *dir = tmpdir(), path[4200];
    snprintf(path, sizeof path, "%s/0000000000000001-0000000000000002.snap", dir);
    StrBuf snap = {0};
    uint64_t voters[2] = {5, 9};
    wal_pb_raft_snapshot(&snap, (const uint8_t *)"{}", 2, 2, 1, voters, 2);
    assert_false(snap.oom);
    assert_int_equal(wal_snap_write(path, (const uint8_t *)snap.d, snap.n), 0);
    WalSnapMeta m;
    assert_int_equal(wal_snap_read(path, &m), 0);
    assert_int_equal(m.index, 2);
    assert_int_equal(m.term, 1);
    assert_int_equal(m.data_bytes, snap.n);
    free(snap.d);
    fs_remove_tree(dir);
    free(dir);
}

/* The member dir of member m2 of GOLDEN_CLUSTER, byte for byte as etcdutl 3.5.35 wrote it, and
 * readable by our reader as etcd reads it on start. */
static void test_member_dir_matches_etcdutl(void **state) {
    (void)state;
    InitialCluster ic;
    assert_int_equal(initial_cluster_parse(GOLDEN_CLUSTER, "tok-golden", &ic), 0);
    assert_int_equal(memberdir_check(&ic, "m2", "http://127.0.0.2:2381,http://127.0.0.1:2381"), 0);
    char *dir = tmpdir(), data[4200], p[4300];
    snprintf(data, sizeof data, "%s/data", dir);
    assert_int_equal(memberdir_make_dirs(data), 0);
    assert_int_equal(memberdir_make_dirs(data), ERR_EXISTS);
    assert_int_equal(memberdir_write_raft(data, &ic, "m2"), 0);

    size_t got_n, want_n;
    snprintf(p, sizeof p, "%s/member/snap/0000000000000001-0000000000000003.snap", data);
    uint8_t *got = read_file(p, &got_n);
    char *f = fixture("etcdutl-3.5.35.snap");
    uint8_t *want = read_file(f, &want_n);
    assert_int_equal(got_n, want_n);
    assert_memory_equal(got, want, want_n);
    free(got);
    free(want);
    free(f);

    snprintf(p, sizeof p, "%s/member/wal/0000000000000000-0000000000000000.wal", data);
    got = read_file(p, &got_n);
    f = fixture("etcdutl-3.5.35.wal-prefix");
    want = read_file(f, &want_n);
    assert_int_equal((uint64_t)got_n, WAL_SEGMENT_BYTES);
    assert_memory_equal(got, want, want_n);
    for (size_t i = want_n; i < got_n; i++)
        if (got[i]) fail_msg("WAL byte %zu is %u, not 0", i, got[i]);
    free(got);
    free(want);
    free(f);

    snprintf(p, sizeof p, "%s/member", data);
    WalInfo wi;
    assert_int_equal(wal_read_dir(p, 3, &wi), 0);
    assert_true(wi.have_snap);
    assert_int_equal(wi.snap_index, 3);
    assert_int_equal(wi.snap_term, 1);
    assert_int_equal(wi.hard_state.commit, 3);
    assert_int_equal(wi.hard_state.term, 1);
    assert_int_equal(wi.last_index, 3);
    assert_false(wi.torn_tail);
    initial_cluster_free(&ic);
    fs_remove_tree(dir);
    free(dir);
}

static void test_db_items_sort_by_key_bytes(void **state) {
    (void)state;
    /* IDs chosen so that hex order differs from number order: "100" < "1f" < "abc" */
    ClusterMember ms[3] = {
        {"a", "http://h:1", 0x1f}, {"b<&\"", "http://h:2", 0xabc}, {"c", "http://h:3", 0x100}};
    InitialCluster ic = {ms, 3, 42};
    MemberDbItems it;
    assert_int_equal(memberdir_db_items(&ic, &it), 0);
    assert_int_equal(it.n_members, 3);
    const char *keys[3] = {"100", "1f", "abc"};
    const char *vals[3] = {"{\"id\":256,\"peerURLs\":[\"http://h:3\"],\"name\":\"c\"}",
                           "{\"id\":31,\"peerURLs\":[\"http://h:1\"],\"name\":\"a\"}",
                           "{\"id\":2748,\"peerURLs\":[\"http://h:2\"],\"name\":"
                           "\"b\\u003c\\u0026\\\"\"}"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(it.members[i].key_len, strlen(keys[i]));
        assert_memory_equal(it.members[i].key, keys[i], strlen(keys[i]));
        assert_int_equal(it.members[i].value_len, strlen(vals[i]));
        assert_memory_equal(it.members[i].value, vals[i], strlen(vals[i]));
    }
    static const uint8_t three[8] = {0, 0, 0, 0, 0, 0, 0, 3}, one[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    assert_memory_equal(it.cindex, three, 8);
    assert_memory_equal(it.term, one, 8);
    memberdir_db_items_free(&it);

    /* the v2 store: children by hex key, creation indexes by ID */
    StrBuf v2 = {0};
    assert_int_equal(memberdir_v2_store_json(&ic, &v2), 0);
    const char *k100 = strstr(v2.d, "\"100\":{\"Path\":\"/0/members/100\",\"CreatedIndex\":2");
    const char *k1f = strstr(v2.d, "\"1f\":{\"Path\":\"/0/members/1f\",\"CreatedIndex\":1");
    assert_non_null(k100);
    assert_non_null(k1f);
    assert_true(k100 < k1f);
    assert_non_null(strstr(v2.d, "\"CurrentIndex\":3,"));
    free(v2.d);
}

static void test_checks_refuse_what_etcd_refuses(void **state) {
    (void)state;
    InitialCluster ic;
    const char *bad[] = {"a=http://h:1/",    "a=http://h",      "a=HTTP://h:1", "a=ftp://h:1",
                         "a=http://h:1?x",   "a=http://u@h:1",  "a=http://h:x", "a=http://h :1",
                         "a\x01=http://h:1", "a\xff=http://h:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(initial_cluster_parse(bad[i], "t", &ic), 0);
        if (memberdir_check(&ic, "a", NULL) != ERR_INVALID) fail_msg("accepted: %s", bad[i]);
        initial_cluster_free(&ic);
    }
    assert_int_equal(initial_cluster_parse("a=http://h:1,b=https://[::1]:2,c=unix://s", "t", &ic),
                     0);
    assert_int_equal(memberdir_check(&ic, "a", "http://h:1"), 0);
    assert_int_equal(memberdir_check(&ic, "x", NULL), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "\"x\""));
    assert_int_equal(memberdir_check(&ic, "a", "http://h:2"), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "--initial-advertise-peer-urls"));
    assert_int_equal(memberdir_check(&ic, "a", "http://h:1,http://h:3"), ERR_INVALID);
    initial_cluster_free(&ic);
    /* etcd compares advertised URLs also once resolved: localhost is 127.0.0.1 */
    assert_int_equal(initial_cluster_parse("a=http://127.0.0.1:1", "t", &ic), 0);
    assert_int_equal(memberdir_check(&ic, "a", "http://localhost:1"), 0);
    assert_int_equal(memberdir_check(&ic, "a", "http://localhost:2"), ERR_INVALID);
    initial_cluster_free(&ic);

    StrBuf spec = {0};
    for (int i = 0; i <= MEMBERDIR_MAX_MEMBERS; i++) {
        char e[64];
        snprintf(e, sizeof e, "%sm%d=http://h:%d", i ? "," : "", i, i + 1);
        strbuf_str(&spec, e);
    }
    assert_int_equal(initial_cluster_parse(spec.d, "t", &ic), 0);
    assert_int_equal(memberdir_check(&ic, "m0", NULL), ERR_INVALID);
    MemberDbItems it;
    assert_int_equal(memberdir_db_items(&ic, &it), ERR_INVALID);
    initial_cluster_free(&ic);
    free(spec.d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_read_back_with_the_reader),
        cmocka_unit_test(test_lengths_are_bounded),
        cmocka_unit_test(test_snap_file_reads_back),
        cmocka_unit_test(test_member_dir_matches_etcdutl),
        cmocka_unit_test(test_db_items_sort_by_key_bytes),
        cmocka_unit_test(test_checks_refuse_what_etcd_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
