/* test_bbolt: the bbolt reader against real etcd 3.4 data (snapshots saved with etcdctl from an
 * etcd this test starts on 127.0.0.1 and stops by PID), the Go tool's fixture full snapshot, and
 * corrupted copies of both. Revisions must equal etcd's own header revision; corrupt input must
 * give ERR_CORRUPT in bounded time, never a crash. etcd tests skip when etcd is not on PATH. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/testutil.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "format/bbolt.h"
#include "format/bbolt_stream.h"
#include "format/bbolt_writer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FIXTURE_FULL "tests/fixtures/seed-plain/store/v2/Full-00000000-00000190-1795974921"
#define TRAILER 32

typedef struct {
    char dir[256];
    char url[64];
    pid_t pid;
    int have_etcd;
    int start_failed;
    int64_t last_rev;   /* etcd's revision when the big snapshot was saved */
    char big_path[512]; /* stripped snapshot with branch and overflow pages */
    int64_t big_rev;
} Env;

static Env env;
/* set while a test breaks meta page 0 on purpose: the one-pass check needs it (etcd's stream
 * always has both metas valid), so expect_good_db leaves the stream check out */
static int meta0_broken;

/* ---- small helpers ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint16_t t_rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t t_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t t_rd64(const uint8_t *p) {
    return (uint64_t)t_rd32(p) | (uint64_t)t_rd32(p + 4) << 32;
}

static void t_wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void t_wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static const char *source_dir(void) {
    const char *d = getenv("ETCDBR_SOURCE_DIR");
    return d && *d ? d : ".";
}

static void fixture_path(char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", source_dir(), FIXTURE_FULL);
}

static void tmp_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", env.dir, name);
}

/* Copies the first len bytes of src to dst. */
static void copy_prefix(const char *src, const char *dst, size_t len) {
    size_t n;
    uint8_t *buf = read_file(src, &n);
    assert_true(len <= n);
    write_file(dst, buf, len);
    free(buf);
}

static off_t file_size(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

/* Feeds the file at path (db, then anything after it such as etcd's trailer) to a bbolt_stream
 * in pieces of chunk bytes; asserts it gives want_rev and meta's consistent_index as bbolt_get
 * reads it from the file, with db_len bytes of db. */
static void expect_stream_rev(const char *path, uint64_t db_len, size_t chunk, int64_t want_rev) {
    size_t len;
    uint8_t *buf = read_file(path, &len);
    BboltStream *s = NULL;
    assert_int_equal(bbolt_stream_new(&s), 0);
    assert_int_equal(bbolt_stream_want(s, "meta", "consistent_index"), 0);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        int rc = bbolt_stream_feed(s, buf + off, n);
        if (rc) fail_msg("bbolt_stream_feed %s: %s: %s", path, err_name(rc), err_msg());
    }
    int64_t rev = -1;
    int rc = bbolt_stream_finish(s, db_len, &rev);
    if (rc) fail_msg("bbolt_stream_finish %s: %s: %s", path, err_name(rc), err_msg());
    assert_int_equal(rev, want_rev);
    uint8_t v1[64], v2[64];
    size_t n1 = 0, n2 = 0;
    BboltDb *db = NULL;
    assert_int_equal(bbolt_open(path, db_len, &db), 0);
    int r1 = bbolt_get(db, "meta", "consistent_index", 16, v1, sizeof v1, &n1);
    int r2 = bbolt_stream_get(s, "meta", "consistent_index", v2, sizeof v2, &n2);
    assert_int_equal(r1, r2);
    if (r1 == 0) {
        assert_int_equal(n1, n2);
        assert_memory_equal(v1, v2, n1 < sizeof v1 ? n1 : sizeof v1);
    }
    bbolt_close(db);
    bbolt_stream_free(s);
    free(buf);
}

/* Opens, reads the revision and checks; asserts all succeed and the revision matches. */
static void expect_good_db(const char *path, uint64_t limit, int64_t want_rev) {
    BboltDb *db = NULL;
    int rc = bbolt_open(path, limit, &db);
    if (rc) fail_msg("bbolt_open %s: %s: %s", path, err_name(rc), err_msg());
    int64_t rev = -1;
    rc = bbolt_etcd_revision(db, &rev);
    if (rc) fail_msg("bbolt_etcd_revision %s: %s: %s", path, err_name(rc), err_msg());
    assert_int_equal(rev, want_rev);
    uint64_t pages = 0;
    rc = bbolt_check(db, &pages);
    if (rc) fail_msg("bbolt_check %s: %s: %s", path, err_name(rc), err_msg());
    assert_true(pages >= 3);
    assert_int_equal(bbolt_page_size(db), 4096);
    assert_true(bbolt_txid(db) > 0);
    bbolt_close(db);
    /* the one-pass check of the same bytes agrees (the trailer after a limit fed too) */
    uint64_t db_len =
        limit && limit < (uint64_t)file_size(path) ? limit : (uint64_t)file_size(path);
    db_len -= db_len % 4096;
    if (meta0_broken) return;
    expect_stream_rev(path, db_len, 32768, want_rev);
    expect_stream_rev(path, db_len, 4093, want_rev);
}

/* Runs open, revision and check; each must succeed or give ERR_CORRUPT (ERR_NOT_FOUND for the
 * revision when bucket "key" is gone). Returns 1 if any of them reported corruption. */
static int probe_db(const char *path, uint64_t limit) {
    BboltDb *db = NULL;
    int rc = bbolt_open(path, limit, &db);
    if (rc) {
        if (rc != ERR_CORRUPT) fail_msg("bbolt_open: %s: %s", err_name(rc), err_msg());
        assert_null(db);
        return 1;
    }
    int corrupt = 0;
    int64_t rev = 0;
    rc = bbolt_etcd_revision(db, &rev);
    if (rc && rc != ERR_CORRUPT && rc != ERR_NOT_FOUND)
        fail_msg("bbolt_etcd_revision: %s: %s", err_name(rc), err_msg());
    corrupt |= rc != 0;
    rc = bbolt_check(db, NULL);
    if (rc && rc != ERR_CORRUPT) fail_msg("bbolt_check: %s: %s", err_name(rc), err_msg());
    corrupt |= rc != 0;
    bbolt_close(db);
    return corrupt;
}

static void expect_open_corrupt(const char *path, uint64_t limit) {
    BboltDb *db = NULL;
    double t0 = now_s();
    int rc = bbolt_open(path, limit, &db);
    assert_int_equal(rc, ERR_CORRUPT);
    assert_null(db);
    assert_true(strlen(err_msg()) > 0);
    assert_true(now_s() - t0 < 2.0);
}

static void expect_check_corrupt(const char *path, const char *msg_part) {
    BboltDb *db = NULL;
    int rc = bbolt_open(path, 0, &db);
    if (rc) fail_msg("bbolt_open: %s: %s", err_name(rc), err_msg());
    double t0 = now_s();
    rc = bbolt_check(db, NULL);
    if (rc != ERR_CORRUPT) fail_msg("bbolt_check gave %s, want ERR_CORRUPT", err_name(rc));
    if (msg_part && !strstr(err_msg(), msg_part))
        fail_msg("message \"%s\" lacks \"%s\"", err_msg(), msg_part);
    assert_true(now_s() - t0 < 5.0);
    bbolt_close(db);
}

/* ---- bbolt layout helpers for building corrupt copies ---- */

typedef struct {
    size_t elem_off; /* file offset of the element header */
    size_t key_off;  /* file offset of the key */
    uint32_t flags, ksize, vsize;
} LeafElem;

static uint64_t meta0_root(const uint8_t *db) {
    return t_rd64(db + 16 + 16);
}

/* Finds name in the leaf page `page` (the root bucket of an etcd db is one leaf). */
static int leaf_find(const uint8_t *db, size_t ps, uint64_t page, const char *name, LeafElem *out) {
    const uint8_t *p = db + page * ps;
    assert_int_equal(t_rd16(p + 8), 0x02);
    for (unsigned i = 0; i < t_rd16(p + 10); i++) {
        size_t eo = page * ps + 16 + 16 * (size_t)i;
        const uint8_t *e = db + eo;
        LeafElem le = {eo, eo + t_rd32(e + 4), t_rd32(e), t_rd32(e + 8), t_rd32(e + 12)};
        if (le.ksize == strlen(name) && memcmp(db + le.key_off, name, le.ksize) == 0) {
            *out = le;
            return 1;
        }
    }
    return 0;
}

/* Root page of bucket "key" (0 when inline). */
static uint64_t key_bucket_root(const uint8_t *db, size_t ps) {
    LeafElem le;
    assert_true(leaf_find(db, ps, meta0_root(db), "key", &le));
    return t_rd64(db + le.key_off + le.ksize);
}

/* ---- etcd process ---- */

static int etcdctl(char *out, size_t cap, const char *args) {
    return sh(out, cap, "ETCDCTL_API=3 etcdctl --endpoints=%s --command-timeout=60s %s 2>&1",
              env.url, args);
}

static int etcd_start(void) {
    int cport = free_port(), pport = free_port();
    while (pport == cport)
        pport = free_port();
    if (cport < 0 || pport < 0) return -1;
    char curl[64], purl[64], cluster[96], data[320], log[320];
    snprintf(env.url, sizeof env.url, "http://127.0.0.1:%d", cport);
    snprintf(curl, sizeof curl, "http://127.0.0.1:%d", cport);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", pport);
    snprintf(cluster, sizeof cluster, "default=%s", purl);
    tmp_path(data, sizeof data, "etcd-data");
    tmp_path(log, sizeof log, "etcd.log");
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execlp("etcd", "etcd", "--name", "default", "--data-dir", data, "--listen-client-urls",
               curl, "--advertise-client-urls", curl, "--listen-peer-urls", purl,
               "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster, "--max-txn-ops",
               "2000", "--unsafe-no-fsync", (char *)NULL);
        _exit(127);
    }
    env.pid = pid;
    double deadline = now_s() + 60;
    while (now_s() < deadline) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            env.pid = 0;
            return -1;
        }
        if (etcdctl(NULL, 0, "endpoint health") == 0) return 0;
        usleep(100 * 1000);
    }
    return -1;
}

/* Stops the etcd this test started (by its PID only). */
static void etcd_stop(void) {
    if (env.pid <= 0) return;
    kill(env.pid, SIGTERM);
    double deadline = now_s() + 15;
    int st;
    while (waitpid(env.pid, &st, WNOHANG) == 0) {
        if (now_s() > deadline) {
            kill(env.pid, SIGKILL);
            waitpid(env.pid, &st, 0);
            break;
        }
        usleep(50 * 1000);
    }
    env.pid = 0;
}

static void need_etcd(void) {
    if (!env.have_etcd) testutil_skip("no etcd on PATH (apt-get install etcd-server)");
    if (env.start_failed) fail_msg("etcd did not start (log in %s/etcd.log)", env.dir);
    if (env.pid <= 0) testutil_skip("etcd was stopped by the live-db test, which ran first");
}

static int64_t etcd_revision(void) {
    char out[8192];
    int rc = etcdctl(out, sizeof out, "endpoint status -w json");
    if (rc != 0) fail_msg("etcdctl endpoint status: %s", out);
    const char *p = strstr(out, "\"revision\":");
    assert_non_null(p);
    return strtoll(p + strlen("\"revision\":"), NULL, 10);
}

/* Saves a snapshot with etcdctl into env.dir/name (db + 32-byte sha256 trailer). */
static void snapshot_save(const char *name, char *path, size_t cap) {
    char out[8192], args[600];
    tmp_path(path, cap, name);
    snprintf(args, sizeof args, "snapshot save %s", path);
    if (etcdctl(out, sizeof out, args) != 0) fail_msg("etcdctl snapshot save: %s", out);
    assert_int_equal(file_size(path) % 4096, TRAILER);
}

/* Saves a snapshot and asserts the reader gives etcd's revision and a clean check. */
static void snapshot_matches_etcd(const char *name) {
    char path[512];
    int64_t want = etcd_revision();
    snapshot_save(name, path, sizeof path);
    expect_good_db(path, (uint64_t)file_size(path) - TRAILER, want);
    env.last_rev = want;
}

static void etcd_put(const char *key, const char *value) {
    char out[4096], args[1024];
    snprintf(args, sizeof args, "put '%s' '%s'", key, value);
    if (etcdctl(out, sizeof out, args) != 0) fail_msg("etcdctl put %s: %s", key, out);
}

/* ---- group setup ---- */

static int group_setup(void **state) {
    (void)state;
    snprintf(env.dir, sizeof env.dir, "/tmp/test_bbolt.XXXXXX");
    if (!mkdtemp(env.dir)) return -1;
    env.have_etcd = system("command -v etcd >/dev/null 2>&1 && "
                           "command -v etcdctl >/dev/null 2>&1") == 0;
    if (env.have_etcd && etcd_start() != 0) {
        env.start_failed = 1;
        etcd_stop();
    }
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    etcd_stop();
    if (env.dir[0]) fs_remove_tree(env.dir);
    return 0;
}

/* ---- real etcd ---- */

static void test_bbolt_fresh_etcd_revision_is_one(void **state) {
    (void)state;
    need_etcd();
    assert_int_equal(etcd_revision(), 1);
    snapshot_matches_etcd("fresh.db");
}

static void test_bbolt_revision_after_100_puts(void **state) {
    (void)state;
    need_etcd();
    int64_t before = etcd_revision();
    for (int i = 0; i < 100; i++) {
        char key[64], val[64];
        snprintf(key, sizeof key, "/registry/pods/ns1/pod-%03d", i);
        snprintf(val, sizeof val, "{\"pod\":%d}", i);
        etcd_put(key, val);
    }
    assert_int_equal(etcd_revision(), before + 100);
    snapshot_matches_etcd("puts.db");
}

static void test_bbolt_revision_counts_delete_tombstone(void **state) {
    (void)state;
    need_etcd();
    char out[4096];
    etcd_put("/registry/doomed", "x");
    assert_int_equal(etcdctl(out, sizeof out, "del /registry/doomed"), 0);
    snapshot_matches_etcd("tombstone.db");
}

static void test_bbolt_revision_survives_compaction_of_last_delete(void **state) {
    (void)state;
    need_etcd();
    char out[4096], args[64];
    etcd_put("/registry/doomed2", "y");
    assert_int_equal(etcdctl(out, sizeof out, "del /registry/doomed2"), 0);
    int64_t rev = etcd_revision();
    snprintf(args, sizeof args, "compaction --physical %lld", (long long)rev);
    if (etcdctl(out, sizeof out, args) != 0) fail_msg("etcdctl compaction: %s", out);
    /* the tombstone at rev is compacted away: only meta/finishedCompactRev still says rev */
    snapshot_matches_etcd("compacted.db");
    assert_int_equal(env.last_rev, rev);
}

static void test_bbolt_snapshot_trailer_excluded_by_size_limit(void **state) {
    (void)state;
    need_etcd();
    char path[512], stripped[512];
    int64_t want = etcd_revision();
    snapshot_save("trailer.db", path, sizeof path);
    off_t size = file_size(path);
    expect_good_db(path, (uint64_t)size - TRAILER, want);
    /* the trailer is less than a page, so it is also ignored without a limit */
    expect_good_db(path, 0, want);
    /* a limit beyond the file is the whole file */
    expect_good_db(path, (uint64_t)size + 4096, want);
    tmp_path(stripped, sizeof stripped, "stripped.db");
    copy_prefix(path, stripped, (size_t)size - TRAILER);
    expect_good_db(stripped, 0, want);
    /* a limit that cuts the db short is truncation */
    expect_open_corrupt(path, (uint64_t)size - TRAILER - 4096);
}

static void test_bbolt_large_db_with_branch_and_overflow_pages(void **state) {
    (void)state;
    need_etcd();
    char out[4096], path[512];
    for (int t = 0; t < 10; t++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=%s txn >/dev/null", env.url);
        FILE *p = popen(cmd, "w");
        assert_non_null(p);
        fputs("\n", p); /* no compares */
        for (int i = 0; i < 2000; i++)
            fprintf(p, "put /registry/large/t%02d/key-%05d value-%d-%d-padding-padding\n", t, i, t,
                    i);
        fputs("\n\n", p); /* end of success ops, no failure ops */
        assert_int_equal(pclose(p), 0);
    }
    /* a 100 KiB value (overflow pages) as the last write, read from stdin */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ETCDCTL_API=3 etcdctl --endpoints=%s put /registry/big >/dev/null",
             env.url);
    FILE *p = popen(cmd, "w");
    assert_non_null(p);
    for (int i = 0; i < 100 * 1024; i++)
        fputc('a' + (i * 7919) % 26, p);
    assert_int_equal(pclose(p), 0);
    assert_int_equal(
        etcdctl(out, sizeof out, "get /registry/large/t09/key-01999 --print-value-only"), 0);
    assert_non_null(strstr(out, "value-9-1999"));

    snapshot_matches_etcd("large.db");
    tmp_path(path, sizeof path, "large.db");
    size_t len;
    uint8_t *db = read_file(path, &len);
    len -= TRAILER;
    /* bucket "key" now has a branch root, and the big value sits on a leaf with overflow */
    uint64_t kroot = key_bucket_root(db, 4096);
    assert_true(kroot >= 2);
    assert_int_equal(t_rd16(db + kroot * 4096 + 8), 0x01);
    int overflow_leaf = 0;
    for (uint64_t id = 2; id < len / 4096;) {
        const uint8_t *pg = db + id * 4096;
        uint32_t ovf = t_rd32(pg + 12);
        if (t_rd64(pg) == id && t_rd16(pg + 8) == 0x02 && ovf >= 25) overflow_leaf = 1;
        id += t_rd64(pg) == id && ovf < len / 4096 ? 1 + ovf : 1;
    }
    assert_true(overflow_leaf);
    tmp_path(env.big_path, sizeof env.big_path, "large-stripped.db");
    write_file(env.big_path, db, len);
    env.big_rev = env.last_rev;
    free(db);
    expect_good_db(env.big_path, 0, env.big_rev);
}

static void test_bbolt_live_db_after_etcd_stops(void **state) {
    (void)state;
    need_etcd();
    int64_t want = etcd_revision();
    etcd_stop();
    char path[512];
    tmp_path(path, sizeof path, "etcd-data/member/snap/db");
    expect_good_db(path, 0, want);
}

/* ---- Go tool fixture ---- */

static void test_bbolt_fixture_full_snapshot_is_revision_190(void **state) {
    (void)state;
    char path[512];
    fixture_path(path, sizeof path);
    off_t size = file_size(path);
    assert_int_equal(size % 4096, TRAILER);
    expect_good_db(path, (uint64_t)size - TRAILER, 190);
}

static void test_bbolt_missing_file_is_not_found(void **state) {
    (void)state;
    char path[512];
    BboltDb *db = NULL;
    tmp_path(path, sizeof path, "no-such.db");
    assert_int_equal(bbolt_open(path, 0, &db), ERR_NOT_FOUND);
    assert_null(db);
    bbolt_close(NULL);
}

/* ---- one-pass check of a db bbolt_writer wrote (every bucket on its own pages) ---- */

static void rev_key(uint8_t *k, uint64_t main, uint64_t sub) {
    for (int i = 0; i < 8; i++) {
        k[i] = (uint8_t)(main >> (56 - 8 * i));
        k[9 + i] = (uint8_t)(sub >> (56 - 8 * i));
    }
    k[8] = '_';
}

static void test_bbolt_stream_reads_written_db(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "written.db");
    unlink(path);
    BboltWriter *w = NULL;
    assert_int_equal(bbolt_writer_open(path, 4096, &w), 0);
    uint8_t k[17], v[3000];
    memset(v, 'v', sizeof v);
    assert_int_equal(bbolt_writer_begin_bucket(w, "key", 3), 0);
    for (uint64_t r = 2; r <= 5001; r++) { /* branch pages, and big values on their own pages */
        rev_key(k, r, 0);
        assert_int_equal(bbolt_writer_put(w, k, sizeof k, v, r % 97 == 0 ? sizeof v : 40), 0);
    }
    assert_int_equal(bbolt_writer_end_bucket(w), 0);
    assert_int_equal(bbolt_writer_begin_bucket(w, "meta", 4), 0);
    assert_int_equal(bbolt_writer_put(w, "consistent_index", 16, "\0\0\0\0\0\0\0\7", 8), 0);
    rev_key(k, 6000, 0);
    assert_int_equal(bbolt_writer_put(w, "finishedCompactRev", 18, k, sizeof k), 0);
    assert_int_equal(bbolt_writer_end_bucket(w), 0);
    const char *mark = "{\"history\":\"h1\"}";
    assert_int_equal(bbolt_writer_begin_bucket(w, "restored_by_etcdbr", 18), 0);
    assert_int_equal(bbolt_writer_put(w, "mark", 4, mark, strlen(mark)), 0);
    assert_int_equal(bbolt_writer_end_bucket(w), 0);
    assert_int_equal(bbolt_writer_finish(w), 0);
    bbolt_writer_free(w);

    size_t len;
    uint8_t *buf = read_file(path, &len);
    BboltStream *s = NULL;
    assert_int_equal(bbolt_stream_new(&s), 0);
    assert_int_equal(bbolt_stream_want(s, "restored_by_etcdbr", "mark"), 0);
    assert_int_equal(bbolt_stream_want(s, "restored_by_etcdbr", "none"), 0);
    for (size_t off = 0; off < len; off += 1000)
        assert_int_equal(bbolt_stream_feed(s, buf + off, len - off < 1000 ? len - off : 1000), 0);
    int64_t rev = 0;
    assert_int_equal(bbolt_stream_finish(s, len, &rev), 0);
    assert_int_equal(rev, 6000); /* the compaction revision is above the last key (5001) */
    char got[64];
    size_t n = 0;
    assert_int_equal(bbolt_stream_get(s, "restored_by_etcdbr", "mark", got, sizeof got, &n), 0);
    assert_int_equal(n, strlen(mark));
    assert_memory_equal(got, mark, n);
    assert_int_equal(bbolt_stream_get(s, "restored_by_etcdbr", "none", got, sizeof got, &n),
                     ERR_NOT_FOUND);
    assert_int_equal(bbolt_stream_get(s, "meta", "term", got, sizeof got, &n), ERR_INVALID);
    bbolt_stream_free(s);

    /* a size other than the meta's pages is refused; so is a damaged meta 0 */
    assert_int_equal(bbolt_stream_new(&s), 0);
    assert_int_equal(bbolt_stream_feed(s, buf, len - 4096), 0);
    assert_int_equal(bbolt_stream_finish(s, len - 4096, &rev), ERR_CORRUPT);
    bbolt_stream_free(s);
    buf[16 + 20] ^= 1;
    assert_int_equal(bbolt_stream_new(&s), 0);
    assert_int_equal(bbolt_stream_feed(s, buf, len), ERR_CORRUPT);
    assert_int_equal(bbolt_stream_feed(s, buf, 1), ERR_CORRUPT);
    bbolt_stream_free(s);
    free(buf);
}

/* ---- corruption (fixture copies; no etcd needed) ---- */

/* The fixture db without its trailer, in memory; caller frees. */
static uint8_t *fixture_db(size_t *len) {
    char path[512];
    fixture_path(path, sizeof path);
    uint8_t *db = read_file(path, len);
    *len -= TRAILER;
    return db;
}

static void test_bbolt_bad_meta_falls_back_to_other_meta(void **state) {
    (void)state;
    size_t len;
    uint8_t *db = fixture_db(&len);
    char path[512];
    tmp_path(path, sizeof path, "meta.db");
    uint64_t txid0 = t_rd64(db + 16 + 48), txid1 = t_rd64(db + 4096 + 16 + 48);
    assert_true(txid0 > txid1);

    db[16 + 20] ^= 0x5a; /* meta 0 root: checksum mismatch */
    write_file(path, db, len);
    meta0_broken = 1;
    BboltDb *b = NULL;
    assert_int_equal(bbolt_open(path, 0, &b), 0);
    assert_int_equal(bbolt_txid(b), txid1);
    bbolt_close(b);
    expect_good_db(path, 0, 190);
    meta0_broken = 0;

    db[16 + 20] ^= 0x5a;
    db[4096 + 16] ^= 0xff; /* meta 1 magic */
    write_file(path, db, len);
    assert_int_equal(bbolt_open(path, 0, &b), 0);
    assert_int_equal(bbolt_txid(b), txid0);
    bbolt_close(b);
    expect_good_db(path, 0, 190);

    db[16 + 4] ^= 0x01; /* meta 0 version too: nothing valid */
    write_file(path, db, len);
    expect_open_corrupt(path, 0);
    assert_non_null(strstr(err_msg(), "meta"));
    free(db);
}

static void test_bbolt_corrupt_root_leaf_is_reported(void **state) {
    (void)state;
    size_t len;
    uint8_t *db = fixture_db(&len);
    char path[512], want[64];
    tmp_path(path, sizeof path, "leaf.db");
    uint64_t root = meta0_root(db);
    snprintf(want, sizeof want, "page %llu", (unsigned long long)root);
    LeafElem le;
    assert_true(leaf_find(db, 4096, root, "key", &le));

    /* key length past the page end */
    uint32_t old = t_rd32(db + le.elem_off + 8);
    t_wr32(db + le.elem_off + 8, 0xFFFFFF00u);
    write_file(path, db, len);
    expect_check_corrupt(path, want);
    assert_int_equal(probe_db(path, 0), 1);
    t_wr32(db + le.elem_off + 8, old);

    /* keys out of order */
    uint8_t c = db[le.key_off];
    db[le.key_off] = 0x01;
    write_file(path, db, len);
    expect_check_corrupt(path, "order");
    db[le.key_off] = c;

    /* the root bucket page is not a leaf or branch */
    db[root * 4096 + 8] = 0x10;
    write_file(path, db, len);
    expect_check_corrupt(path, want);
    assert_int_equal(probe_db(path, 0), 1);
    db[root * 4096 + 8] = 0x02;

    /* page header names another page */
    db[root * 4096] ^= 0x01;
    write_file(path, db, len);
    expect_check_corrupt(path, "header names");
    free(db);
}

static void test_bbolt_revision_not_found_without_key_bucket(void **state) {
    (void)state;
    size_t len;
    uint8_t *db = fixture_db(&len);
    char path[512];
    tmp_path(path, sizeof path, "nokey.db");
    LeafElem le;
    assert_true(leaf_find(db, 4096, meta0_root(db), "key", &le));
    db[le.key_off + 2] = 'z'; /* "kez" keeps the order */
    write_file(path, db, len);
    BboltDb *b = NULL;
    assert_int_equal(bbolt_open(path, 0, &b), 0);
    int64_t rev = 0;
    assert_int_equal(bbolt_etcd_revision(b, &rev), ERR_NOT_FOUND);
    assert_int_equal(bbolt_check(b, NULL), 0);
    bbolt_close(b);
    free(db);
}

static void test_bbolt_truncated_random_and_zero_files_are_corrupt(void **state) {
    (void)state;
    size_t len;
    uint8_t *db = fixture_db(&len);
    char path[512];
    tmp_path(path, sizeof path, "trunc.db");
    size_t sizes[] = {len / 2, 4096, 8192, 100, 0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        write_file(path, db, sizes[i]);
        expect_open_corrupt(path, 0);
    }
    uint8_t *junk = malloc(len);
    assert_non_null(junk);
    srand(12345);
    for (size_t i = 0; i < len; i++)
        junk[i] = (uint8_t)rand();
    write_file(path, junk, len);
    expect_open_corrupt(path, 0);
    memset(junk, 0, len);
    write_file(path, junk, len);
    expect_open_corrupt(path, 0);
    free(junk);
    free(db);
}

/* Random byte flips in data pages: every outcome must be success or ERR_CORRUPT. */
static void test_bbolt_random_page_damage_never_crashes(void **state) {
    (void)state;
    size_t len;
    uint8_t *db = fixture_db(&len);
    char path[512];
    tmp_path(path, sizeof path, "fuzz.db");
    write_file(path, db, len);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    size_t pages = len / 4096;
    unsigned seed = 424242, corrupt = 0, runs = 400;
    double t0 = now_s();
    for (unsigned r = 0; r < runs; r++) {
        size_t page = 2 + (size_t)rand_r(&seed) % (pages - 2);
        int n = 1 + rand_r(&seed) % 8;
        size_t offs[8];
        for (int i = 0; i < n; i++) {
            /* mostly the header and element array, where damage changes structure */
            size_t span = rand_r(&seed) % 2 ? 256 : 4096;
            offs[i] = page * 4096 + (size_t)rand_r(&seed) % span;
            uint8_t v = (uint8_t)(db[offs[i]] ^ (1 + rand_r(&seed) % 255));
            assert_int_equal(pwrite(fd, &v, 1, (off_t)offs[i]), 1);
        }
        corrupt += (unsigned)probe_db(path, 0);
        for (int i = 0; i < n; i++)
            assert_int_equal(pwrite(fd, &db[offs[i]], 1, (off_t)offs[i]), 1);
    }
    close(fd);
    assert_true(corrupt > 0);
    assert_true(now_s() - t0 < 60.0);
    print_message("%u of %u damaged copies reported corrupt\n", corrupt, runs);
    free(db);
}

/* ---- corruption of the large db (branch pages) ---- */

static void test_bbolt_corrupt_branch_pages_are_reported(void **state) {
    (void)state;
    if (!env.big_path[0]) testutil_skip("the large-db test, which writes this db, did not run");
    size_t len;
    uint8_t *db = read_file(env.big_path, &len);
    char path[512], want[64];
    tmp_path(path, sizeof path, "branch.db");
    uint64_t br = key_bucket_root(db, 4096);
    uint8_t *bp = db + br * 4096;
    assert_int_equal(t_rd16(bp + 8), 0x01);
    unsigned count = t_rd16(bp + 10);
    assert_true(count >= 2);
    snprintf(want, sizeof want, "page %llu", (unsigned long long)br);
    uint8_t *last_child = bp + 16 + 16 * (count - 1) + 8;
    uint64_t child = t_rd64(last_child);

    /* child pointer to a meta page */
    t_wr64(last_child, 1);
    write_file(path, db, len);
    expect_check_corrupt(path, want);
    assert_int_equal(probe_db(path, 0), 1);

    /* child pointer back to the branch itself: a cycle */
    t_wr64(last_child, br);
    write_file(path, db, len);
    double t0 = now_s();
    expect_check_corrupt(path, "twice");
    assert_int_equal(probe_db(path, 0), 1);
    assert_true(now_s() - t0 < 5.0);

    /* child pointer past the end of the db */
    t_wr64(last_child, UINT64_MAX - 3);
    write_file(path, db, len);
    expect_check_corrupt(path, "outside");
    assert_int_equal(probe_db(path, 0), 1);
    t_wr64(last_child, child);

    /* two branch elements pointing at the same child */
    uint64_t first = t_rd64(bp + 16 + 8);
    t_wr64(bp + 16 + 16 + 8, first);
    write_file(path, db, len);
    expect_check_corrupt(path, "twice");
    free(db);
    db = read_file(env.big_path, &len);
    bp = db + br * 4096;

    /* branch keys out of order (revision keys start with zero bytes: zero the whole key) */
    uint8_t *e1 = bp + 16 + 16;
    memset(e1 + t_rd32(e1), 0, t_rd32(e1 + 4));
    write_file(path, db, len);
    expect_check_corrupt(path, "order");
    free(db);

    /* the untouched copy is still fine */
    expect_good_db(env.big_path, 0, env.big_rev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bbolt_fresh_etcd_revision_is_one),
        cmocka_unit_test(test_bbolt_revision_after_100_puts),
        cmocka_unit_test(test_bbolt_revision_counts_delete_tombstone),
        cmocka_unit_test(test_bbolt_revision_survives_compaction_of_last_delete),
        cmocka_unit_test(test_bbolt_snapshot_trailer_excluded_by_size_limit),
        cmocka_unit_test(test_bbolt_large_db_with_branch_and_overflow_pages),
        cmocka_unit_test(test_bbolt_live_db_after_etcd_stops),
        cmocka_unit_test(test_bbolt_fixture_full_snapshot_is_revision_190),
        cmocka_unit_test(test_bbolt_missing_file_is_not_found),
        cmocka_unit_test(test_bbolt_bad_meta_falls_back_to_other_meta),
        cmocka_unit_test(test_bbolt_stream_reads_written_db),
        cmocka_unit_test(test_bbolt_corrupt_root_leaf_is_reported),
        cmocka_unit_test(test_bbolt_revision_not_found_without_key_bucket),
        cmocka_unit_test(test_bbolt_truncated_random_and_zero_files_are_corrupt),
        cmocka_unit_test(test_bbolt_random_page_damage_never_crashes),
        cmocka_unit_test(test_bbolt_corrupt_branch_pages_are_reported),
    };
    return testutil_exit(cmocka_run_group_tests_name("bbolt", tests, group_setup, group_teardown));
}
