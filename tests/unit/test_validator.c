/* test_validator: the data-dir validator and the WAL/snap reader against real etcd 3.4 data dirs
 * (etcd started by this test on 127.0.0.1 free ports in a temp dir, stopped by PID), damaged
 * copies of them, and a Local store with well-named fake backups. Where the question is "would
 * etcd accept this data dir", the test also starts etcd on the copy and checks its answer.
 * etcd tests skip when etcd/etcdctl are not on PATH. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/testutil.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "format/bbolt.h"
#include "restore/validator.h"
#include "format/wal.h"
#include "store/snapname.h"
#include "store/store.h"

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

#define WAL0 "member/wal/0000000000000000-0000000000000000.wal"

typedef struct {
    pid_t pid;
    char url[64];
} Etcd;

typedef struct {
    char dir[256];
    int have_etcd;
    char setup_error[512];
    /* clean: --snapshot-count 50, 120 puts, stopped with SIGTERM (has .snap files) */
    char clean[512];
    int64_t clean_rev;
    /* ahead: --backend-batch-interval 10s, 30 puts, then SIGKILL: the WAL holds entries the db
     * never got */
    char ahead[512];
    int64_t ahead_rev;
    ValidationResult locked; /* validation while that etcd ran */
    /* stale: 10 puts, then 30 lease grants, stopped with SIGTERM: etcd 3.4 saves the consistent
     * index only with a key write, so the lease grants stay past it (the db has them) */
    char stale[512];
    int64_t stale_rev;
    /* mixed: like ahead, killed before the backend commit: puts, a compaction, lease grants, a
     * put with a lease, a txn whose write is in the failure branch, a delete, the lease's
     * revocation (deletes its key), more lease grants */
    char mixed[512];
} Env;

static Env env;

/* ---------------- helpers ---------------- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void path_in(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", env.dir, name);
}

/* A fresh copy of data dir src at <tmp>/<name>; returns its path in out. */
static void copy_dir(const char *src, const char *name, char *out, size_t cap) {
    path_in(out, cap, name);
    char msg[1024];
    if (sh(msg, sizeof msg, "rm -rf '%s' && cp -a '%s' '%s' 2>&1", out, src, out) != 0)
        fail_msg("copy %s: %s", src, msg);
}

static void remove_dir(const char *path) {
    assert_int_equal(fs_remove_tree(path), 0);
}

static void xor_byte(const char *path, uint64_t off, uint8_t mask) {
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
    b ^= mask;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

static void zero_range(const char *path, uint64_t off, size_t n) {
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t *z = calloc(1, n ? n : 1);
    assert_int_equal(pwrite(fd, z, n, (off_t)off), (ssize_t)n);
    free(z);
    close(fd);
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Frame of one record as found in a segment: offset of its length word, bytes of walpb.Record,
 * padding, type. */
typedef struct {
    uint64_t off, rec_bytes, pad;
    int64_t type;
    size_t data_len;
} Frame;

/* Lists the records of a segment (at most cap) with the module's own reader. */
static size_t list_frames(const char *path, Frame *out, size_t cap) {
    WalSegment *s = NULL;
    if (wal_segment_open(path, 1, &s) != 0) fail_msg("open %s: %s", path, err_msg());
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    uint32_t crc = 0;
    size_t n = 0;
    WalRecord r;
    int rc;
    while ((rc = wal_segment_next(s, &crc, &r)) == WAL_NEXT_RECORD && n < cap) {
        uint8_t w[8];
        assert_int_equal(pread(fd, w, 8, (off_t)r.offset), 8);
        uint64_t word = le64(w);
        out[n].off = r.offset;
        out[n].rec_bytes = word & 0x00ffffffffffffffull;
        out[n].pad = (word >> 63) ? (word >> 56) & 7 : 0;
        out[n].type = r.type;
        out[n].data_len = r.len;
        n++;
    }
    if (rc < 0) fail_msg("reading %s: %s", path, err_msg());
    close(fd);
    wal_segment_close(s);
    return n;
}

static void expect_status(const char *dir, ValidationMode mode, Store *store, DataDirStatus want,
                          ValidationResult *res) {
    ValidationResult local;
    ValidationResult *r = res ? res : &local;
    ValidationOptions opts = {200};
    double t0 = now_s();
    assert_int_equal(validate_data_dir_opts(dir, mode, store, &opts, r), 0);
    if (r->status != want)
        fail_msg("%s (%s): got %s, want %s: %s", dir, mode == VALIDATE_FULL ? "full" : "sanity",
                 data_dir_status_name(r->status), data_dir_status_name(want), r->message);
    assert_true(r->message[0] != '\0');
    assert_true(now_s() - t0 < 10.0);
}

/* ---------------- etcd processes ---------------- */

static int etcdctl(const Etcd *e, char *out, size_t cap, const char *fmt, ...) {
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return sh(out, cap, "ETCDCTL_API=3 etcdctl --endpoints=%s --command-timeout=30s %s 2>&1",
              e->url, args);
}

/* Spawns etcd on data_dir (extra: NULL-terminated flags). wait_healthy: wait until it answers;
 * returns 0 when healthy, 1 when it exited (pid reaped, *exit_status set), -1 on timeout. */
static int etcd_spawn(Etcd *e, const char *data_dir, const char *log_name, const char **extra,
                      int *exit_status) {
    int cport = free_port(), pport = free_port();
    while (pport == cport)
        pport = free_port();
    if (cport < 0 || pport < 0) return -1;
    char curl[64], purl[64], cluster[96], log[512];
    snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", cport);
    snprintf(curl, sizeof curl, "http://127.0.0.1:%d", cport);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%d", pport);
    snprintf(cluster, sizeof cluster, "default=%s", purl);
    path_in(log, sizeof log, log_name);
    const char *argv[40] = {"etcd",    "--name",
                            "default", "--data-dir",
                            data_dir,  "--listen-client-urls",
                            curl,      "--advertise-client-urls",
                            curl,      "--listen-peer-urls",
                            purl,      "--initial-advertise-peer-urls",
                            purl,      "--initial-cluster",
                            cluster};
    int argc = 15;
    for (int i = 0; extra && extra[i] && argc < 38; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp("etcd", (char *const *)argv);
        _exit(127);
    }
    e->pid = pid;
    double deadline = now_s() + 30;
    while (now_s() < deadline) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            e->pid = 0;
            if (exit_status) *exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return 1;
        }
        /* short timeouts: gRPC retries a refused connection until the command deadline */
        if (sh(NULL, 0,
               "ETCDCTL_API=3 etcdctl --endpoints=%s --dial-timeout=1s --command-timeout=2s "
               "endpoint health >/dev/null 2>&1",
               e->url) == 0)
            return 0;
        usleep(100 * 1000);
    }
    return -1;
}

/* Stops an etcd this test started, by its PID only. sig: SIGTERM (clean) or SIGKILL. */
static void etcd_stop(Etcd *e, int sig) {
    if (e->pid <= 0) return;
    kill(e->pid, sig);
    double deadline = now_s() + 20;
    int st;
    while (waitpid(e->pid, &st, WNOHANG) == 0) {
        if (now_s() > deadline) {
            kill(e->pid, SIGKILL);
            waitpid(e->pid, &st, 0);
            break;
        }
        usleep(20 * 1000);
    }
    e->pid = 0;
}

static int64_t etcd_revision(const Etcd *e) {
    char out[8192];
    if (etcdctl(e, out, sizeof out, "get x -w json") != 0) return -1;
    const char *p = strstr(out, "\"revision\":");
    return p ? strtoll(p + strlen("\"revision\":"), NULL, 10) : -1;
}

static int etcd_puts(const Etcd *e, int n, const char *prefix) {
    char out[4096];
    return sh(out, sizeof out,
              "for i in $(seq 1 %d); do ETCDCTL_API=3 etcdctl --endpoints=%s put %s$i "
              "value-$i-0123456789 >/dev/null || exit 1; done",
              n, e->url, prefix);
}

static void need_etcd(void) {
    if (!env.have_etcd) testutil_skip("no etcd on PATH (apt-get install etcd-server)");
    if (env.setup_error[0]) fail_msg("setup: %s (logs in %s)", env.setup_error, env.dir);
}

/* Starts etcd on a copy of a data dir and reports what etcd made of it: 0 healthy (revision in
 * *rev), else the exit status. The copy is left for inspection until teardown. */
static int etcd_accepts(const char *data_dir, const char *log_name, int64_t *rev) {
    Etcd e = {0};
    int st = -1;
    int r = etcd_spawn(&e, data_dir, log_name, NULL, &st);
    if (r == 0) {
        *rev = etcd_revision(&e);
        etcd_stop(&e, SIGTERM);
        return 0;
    }
    etcd_stop(&e, SIGKILL);
    return r == 1 ? (st == 0 ? 255 : st) : -1;
}

/* ---------------- stores ---------------- */

static Store *make_store(const char *name) {
    char root[512];
    path_in(root, sizeof root, name);
    fs_remove_tree(root);
    StoreConfig cfg = {
        .provider = "Local", .container = root, .prefix = "etcd-main", .temp_dir = "/tmp"};
    Store *s = NULL;
    if (store_open(&cfg, &s) != 0) fail_msg("store_open %s: %s", root, err_msg());
    return s;
}

/* A backup object: only its name is read by the validator, so the bytes are a placeholder. */
static void put_backup(Store *s, SnapKind kind, int64_t start, int64_t last) {
    char name[256];
    assert_int_equal(
        snapname_format(kind, start, last, 1800000000 + last, "", 0, name, sizeof name), 0);
    StoreWriter *w = NULL;
    if (store_open_write(s, name, &w) != 0) fail_msg("store_open_write %s: %s", name, err_msg());
    assert_int_equal(io_write(store_writer_io(w), "not a real backup", 17), 0);
    assert_int_equal(io_finish(store_writer_io(w)), 0);
    if (store_writer_commit(w) != 0) fail_msg("commit %s: %s", name, err_msg());
}

/* ---------------- setup ---------------- */

static int setup_clean(void) {
    Etcd e = {0};
    const char *extra[] = {"--snapshot-count", "50", NULL};
    path_in(env.clean, sizeof env.clean, "clean");
    if (etcd_spawn(&e, env.clean, "clean.log", extra, NULL) != 0) {
        etcd_stop(&e, SIGKILL);
        snprintf(env.setup_error, sizeof env.setup_error, "etcd (clean) did not start");
        return -1;
    }
    int rc = etcd_puts(&e, 120, "/k/");
    env.clean_rev = etcd_revision(&e);
    etcd_stop(&e, SIGTERM);
    if (rc != 0 || env.clean_rev != 121) {
        snprintf(env.setup_error, sizeof env.setup_error, "puts failed (revision %lld)",
                 (long long)env.clean_rev);
        return -1;
    }
    return 0;
}

/* etcd with a 10 s backend batch interval is killed right after its writes: the db keeps its
 * start-up state while the WAL has every entry. While it runs, the db is locked. */
static int setup_ahead(void) {
    Etcd e = {0};
    const char *extra[] = {"--backend-batch-interval", "10s", "--backend-batch-limit", "100000",
                           NULL};
    path_in(env.ahead, sizeof env.ahead, "ahead");
    if (etcd_spawn(&e, env.ahead, "ahead.log", extra, NULL) != 0) {
        etcd_stop(&e, SIGKILL);
        snprintf(env.setup_error, sizeof env.setup_error, "etcd (ahead) did not start");
        return -1;
    }
    int rc = etcd_puts(&e, 30, "/a/");
    env.ahead_rev = etcd_revision(&e);
    ValidationOptions opts = {300};
    validate_data_dir_opts(env.ahead, VALIDATE_SANITY, NULL, &opts, &env.locked);
    etcd_stop(&e, SIGKILL);
    if (rc != 0 || env.ahead_rev != 31) {
        snprintf(env.setup_error, sizeof env.setup_error, "puts failed (revision %lld)",
                 (long long)env.ahead_rev);
        return -1;
    }
    return 0;
}

/* etcd 3.4 keeps meta/consistent_index at the last entry that wrote a key: lease grants after
 * it are in the db (lease bucket) but past that index, so the WAL shows them as not applied. */
static int setup_stale(void) {
    Etcd e = {0};
    path_in(env.stale, sizeof env.stale, "stale");
    if (etcd_spawn(&e, env.stale, "stale.log", NULL, NULL) != 0) {
        etcd_stop(&e, SIGKILL);
        snprintf(env.setup_error, sizeof env.setup_error, "etcd (stale) did not start");
        return -1;
    }
    char out[4096] = "";
    int rc = etcd_puts(&e, 10, "/s/");
    if (rc == 0)
        rc = sh(out, sizeof out,
                "for i in $(seq 1 30); do ETCDCTL_API=3 etcdctl --endpoints=%s lease grant 600 "
                ">/dev/null || exit 1; done",
                e.url);
    env.stale_rev = etcd_revision(&e);
    etcd_stop(&e, SIGTERM);
    if (rc != 0 || env.stale_rev != 11) {
        snprintf(env.setup_error, sizeof env.setup_error,
                 "stale: puts or lease grants failed (revision %lld): %.200s",
                 (long long)env.stale_rev, out);
        return -1;
    }
    return 0;
}

static int setup_mixed(void) {
    Etcd e = {0};
    const char *extra[] = {"--backend-batch-interval", "10s", "--backend-batch-limit", "100000",
                           NULL};
    path_in(env.mixed, sizeof env.mixed, "mixed");
    if (etcd_spawn(&e, env.mixed, "mixed.log", extra, NULL) != 0) {
        etcd_stop(&e, SIGKILL);
        snprintf(env.setup_error, sizeof env.setup_error, "etcd (mixed) did not start");
        return -1;
    }
    char out[4096] = "";
    int rc = sh(out, sizeof out,
                "set -e; e() { ETCDCTL_API=3 etcdctl --endpoints=%s \"$@\"; }; "
                "for i in 1 2 3; do e put /m/$i v$i >/dev/null; done; "
                "e compaction 3 >/dev/null; "
                "for i in $(seq 1 20); do e lease grant 600 >/dev/null; done; "
                "id=$(e lease grant 600 | awk '{print $2}'); "
                "e put --lease=$id /m/leased x >/dev/null; "
                "printf 'value(\"/m/1\") = \"nope\"\\n\\nget /m/1\\n\\nput /m/txn-failure f\\n\\n' "
                "| e txn | grep -q FAILURE; "
                "e del /m/2 | grep -qx 1; "
                "e lease revoke $id >/dev/null; "
                "for i in $(seq 1 5); do e lease grant 600 >/dev/null; done",
                e.url);
    int64_t rev = etcd_revision(&e);
    etcd_stop(&e, SIGKILL);
    if (rc != 0 || rev != 8) {
        snprintf(env.setup_error, sizeof env.setup_error,
                 "mixed: requests failed (exit %d, revision %lld): %.200s", rc, (long long)rev,
                 out);
        return -1;
    }
    return 0;
}

static int group_setup(void **state) {
    (void)state;
    unsetenv("POD_NAMESPACE");
    snprintf(env.dir, sizeof env.dir, "/tmp/test_validator.XXXXXX");
    if (!mkdtemp(env.dir)) return -1;
    env.have_etcd = system("command -v etcd >/dev/null 2>&1 && "
                           "command -v etcdctl >/dev/null 2>&1") == 0;
    if (env.have_etcd && setup_clean() == 0 && setup_ahead() == 0 && setup_stale() == 0)
        setup_mixed();
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (env.dir[0] && !getenv("ETCDBR_KEEP_TMP")) fs_remove_tree(env.dir);
    return 0;
}

/* ---------------- the clean data dir ---------------- */

static void test_validator_clean_data_dir_is_valid_in_both_modes(void **state) {
    (void)state;
    need_etcd();
    ValidationResult r;
    expect_status(env.clean, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_int_equal(r.db_revision, env.clean_rev);
    assert_true(r.db_pages >= 4);
    assert_true(r.wal_read);
    assert_true(r.consistent_index > 100);
    expect_status(env.clean, VALIDATE_SANITY, NULL, DATA_DIR_VALID, &r);
    assert_int_equal(r.db_revision, env.clean_rev);
    assert_false(r.wal_read); /* sanity mode without a store never reads the WAL */
    assert_int_equal(r.db_pages, 0);
}

/* etcd 3.4 with --snapshot-count 50 after 120 puts: two raft snapshots, the log after the newer
 * one; a clean stop leaves nothing past the consistent index. */
static void test_validator_reads_raft_log_like_etcd(void **state) {
    (void)state;
    need_etcd();
    char member[600];
    snprintf(member, sizeof member, "%s/member", env.clean);
    WalInfo w;
    if (wal_read_dir(member, 0, &w) != 0) fail_msg("wal_read_dir: %s", err_msg());
    assert_true(w.snap_files >= 2);
    assert_int_equal(w.snap_files_skipped, 0);
    assert_true(w.have_snap);
    assert_true(w.snap_index >= 100);
    assert_int_equal(w.snap_term, 2);
    assert_int_equal(w.last_index, w.snap_index + w.entries);
    assert_int_equal(w.last_term, 2);
    assert_int_equal(w.hard_state.commit, w.last_index);
    assert_int_equal(w.segments, 1);
    assert_false(w.torn_tail);
    assert_true(w.normal_entries <= w.entries);

    /* counting after the db's consistent index: nothing is missing from the db */
    ValidationResult r;
    expect_status(env.clean, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_int_equal(r.consistent_index, w.last_index);
    assert_int_equal(r.wal.normal_after, 0);
    assert_int_equal(r.wal.last_index, w.last_index);
}

static void test_validator_missing_data_dir_is_not_exist(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "no-such-dir");
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_NOT_EXIST, NULL);
    expect_status(p, VALIDATE_SANITY, NULL, DATA_DIR_NOT_EXIST, NULL);
}

static void test_validator_missing_wal_dir_is_inv_struct(void **state) {
    (void)state;
    char p[512], sub[600];
    path_in(p, sizeof p, "nowal");
    snprintf(sub, sizeof sub, "%s/member/snap", p);
    assert_int_equal(fs_mkdir_p(sub, 0700), 0);
    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_INV_STRUCT, &r);
    assert_non_null(strstr(r.message, "member/wal"));
    snprintf(sub, sizeof sub, "%s/member", p);
    remove_dir(sub);
    expect_status(p, VALIDATE_SANITY, NULL, DATA_DIR_INV_STRUCT, NULL);
    remove_dir(p);
}

static void test_validator_missing_db_is_corrupt(void **state) {
    (void)state;
    need_etcd();
    char p[512], db[600];
    copy_dir(env.clean, "nodb", p, sizeof p);
    snprintf(db, sizeof db, "%s/member/snap/db", p);
    assert_int_equal(unlink(db), 0);
    expect_status(p, VALIDATE_SANITY, NULL, DATA_DIR_CORRUPT, NULL);
    remove_dir(p);
}

/* ---------------- damaged db ---------------- */

/* Root page of bucket "key": from the newest meta, through the root bucket's leaf. */
static uint64_t key_bucket_root(const uint8_t *db, size_t len) {
    uint64_t best_txid = 0, root = 0;
    for (int m = 0; m < 2; m++) {
        const uint8_t *meta = db + (size_t)m * 4096 + 16;
        if (le64(meta + 48) >= best_txid) {
            best_txid = le64(meta + 48);
            root = le64(meta + 16);
        }
    }
    assert_true((root + 1) * 4096 <= len);
    const uint8_t *p = db + root * 4096;
    assert_int_equal(p[8], 0x02); /* the root bucket is one leaf page */
    for (unsigned i = 0; i < (unsigned)(p[10] | p[11] << 8); i++) {
        const uint8_t *e = p + 16 + 16 * (size_t)i;
        uint32_t pos = e[4] | e[5] << 8 | e[6] << 16 | (uint32_t)e[7] << 24;
        uint32_t ksize = e[8] | e[9] << 8 | e[10] << 16 | (uint32_t)e[11] << 24;
        if (ksize == 3 && memcmp(e + pos, "key", 3) == 0) return le64(e + pos + ksize);
    }
    fail_msg("no bucket \"key\"");
    return 0;
}

static void test_validator_flipped_db_page_bytes_are_corrupt_in_full_mode(void **state) {
    (void)state;
    need_etcd();
    char p[512], db[600];
    copy_dir(env.clean, "flipdb", p, sizeof p);
    snprintf(db, sizeof db, "%s/member/snap/db", p);
    size_t len;
    uint8_t *buf = read_file(db, &len);
    uint64_t page = key_bucket_root(buf, len);
    assert_true(page >= 2);
    /* first element of the key bucket's root page: its key offset now points far outside */
    uint8_t *elem0 = buf + page * 4096 + 16;
    uint8_t *pos = elem0 + (buf[page * 4096 + 8] == 0x01 ? 0 : 4);
    for (int i = 0; i < 3; i++)
        pos[i] ^= 0xff;
    write_file(db, buf, len);
    free(buf);
    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_CORRUPT, &r);
    assert_non_null(strstr(r.message, "consistency check"));
    assert_non_null(strstr(r.message, "page"));
    /* sanity mode reads only the path to the last key, which the damage is not on */
    expect_status(p, VALIDATE_SANITY, NULL, DATA_DIR_VALID, NULL);
    remove_dir(p);
}

static void test_validator_truncated_db_is_corrupt(void **state) {
    (void)state;
    need_etcd();
    char p[512], db[600];
    copy_dir(env.clean, "truncdb", p, sizeof p);
    snprintf(db, sizeof db, "%s/member/snap/db", p);
    int64_t size = fs_file_size(db);
    assert_true(size > 3 * 4096);
    assert_int_equal(truncate(db, size / 2), 0);
    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_CORRUPT, &r);
    assert_non_null(strstr(r.message, "truncated"));
    expect_status(p, VALIDATE_SANITY, NULL, DATA_DIR_CORRUPT, NULL);
    assert_int_equal(truncate(db, 100), 0);
    expect_status(p, VALIDATE_SANITY, NULL, DATA_DIR_CORRUPT, NULL);
    remove_dir(p);
}

/* ---------------- damaged WAL ---------------- */

/* A torn last record is what a crash mid-write leaves: etcd's decoder reports
 * io.ErrUnexpectedEOF and wal.Repair truncates the last segment there, so etcd starts (the record
 * was never fsynced, hence never acknowledged). The validator accepts it too, reporting where. */
static void test_validator_torn_wal_tail_is_valid_as_etcd_repairs_it(void **state) {
    (void)state;
    need_etcd();
    char p[512], wal[600];
    static Frame fr[4096];
    copy_dir(env.clean, "torn-cut", p, sizeof p);
    snprintf(wal, sizeof wal, "%s/" WAL0, p);
    size_t n = list_frames(wal, fr, 4096);
    assert_true(n > 10);
    const Frame *last = &fr[n - 1];

    /* 1: the file ends inside the last record */
    assert_int_equal(truncate(wal, (off_t)(last->off + 8 + last->rec_bytes / 2)), 0);
    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_true(r.wal.torn_tail);
    assert_int_equal(r.wal.torn_offset, last->off);
    assert_non_null(strstr(r.message, "torn"));
    int64_t rev = -1;
    int st = etcd_accepts(p, "torn-cut.log", &rev);
    if (st != 0) fail_msg("etcd refused the torn WAL (status %d)", st);
    assert_int_equal(rev, env.clean_rev);

    /* 2: the last record's sectors are zeros (the write never reached the disk) */
    copy_dir(env.clean, "torn-zero", p, sizeof p);
    snprintf(wal, sizeof wal, "%s/" WAL0, p);
    zero_range(wal, last->off + 8, (size_t)(last->rec_bytes + last->pad));
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_true(r.wal.torn_tail);
    assert_int_equal(r.wal.torn_offset, last->off);
    st = etcd_accepts(p, "torn-zero.log", &rev);
    if (st != 0) fail_msg("etcd refused the zeroed WAL tail (status %d)", st);
}

/* A changed byte inside the log (no zeroed sector, records after it) is a CRC mismatch that
 * etcd refuses to start with ("failed to read WAL, cannot be repaired"). */
static void test_validator_flipped_wal_byte_mid_log_is_corrupt(void **state) {
    (void)state;
    need_etcd();
    char p[512], wal[600];
    static Frame fr[4096];
    copy_dir(env.clean, "walflip", p, sizeof p);
    snprintf(wal, sizeof wal, "%s/" WAL0, p);
    size_t n = list_frames(wal, fr, 4096);
    size_t pick = n / 2;
    while (pick < n && (fr[pick].type != WAL_REC_ENTRY || fr[pick].data_len < 20))
        pick++;
    assert_true(pick + 5 < n);
    /* the last byte of the record's data (the data field is encoded last) */
    xor_byte(wal, fr[pick].off + 8 + fr[pick].rec_bytes - 1, 0x5a);
    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_CORRUPT, &r);
    assert_non_null(strstr(r.message, "CRC mismatch"));
    char want[64];
    snprintf(want, sizeof want, "offset %llu", (unsigned long long)fr[pick].off);
    assert_non_null(strstr(r.message, want));
    assert_non_null(strstr(r.message, strrchr(WAL0, '/') + 1));
    /* sanity mode does not read the WAL when no store asks for it */
    expect_status(p, VALIDATE_SANITY, NULL, DATA_DIR_VALID, NULL);

    int64_t rev;
    int st = etcd_accepts(p, "walflip.log", &rev);
    if (st == 0) fail_msg("etcd started on a WAL with a bad record");
    assert_true(st > 0);
}

static void test_validator_garbage_and_empty_wal_are_corrupt(void **state) {
    (void)state;
    need_etcd();
    char p[512], wal[600], dir[600];
    copy_dir(env.clean, "walgarbage", p, sizeof p);
    snprintf(wal, sizeof wal, "%s/" WAL0, p);
    uint8_t junk[8192];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)rand();
    write_file(wal, junk, sizeof junk);
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_CORRUPT, NULL);

    assert_int_equal(unlink(wal), 0);
    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_CORRUPT, &r);
    assert_non_null(strstr(r.message, "no WAL files"));

    /* a segment that is a directory */
    assert_int_equal(mkdir(wal, 0700), 0);
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_CORRUPT, NULL);
    snprintf(dir, sizeof dir, "%s", p);
    remove_dir(dir);
}

/* etcd skips a .snap file it cannot read (renaming it .broken) and starts from the previous
 * snapshot, which the WAL still covers: valid, with the skip reported. */
static void test_validator_bad_newest_snap_file_falls_back_like_etcd(void **state) {
    (void)state;
    need_etcd();
    char p[512], member[600];
    copy_dir(env.clean, "snapflip", p, sizeof p);
    snprintf(member, sizeof member, "%s/member", p);
    WalInfo before;
    assert_int_equal(wal_read_dir(member, 0, &before), 0);
    char snap[800];
    snprintf(snap, sizeof snap, "%s/snap/%s", member, before.snap_file);
    xor_byte(snap, (uint64_t)fs_file_size(snap) / 2, 0x01);
    WalSnapMeta m;
    assert_int_equal(wal_snap_read(snap, &m), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "crc mismatch"));

    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_int_equal(r.wal.snap_files_skipped, 1);
    assert_true(r.wal.snap_index < before.snap_index);
    assert_int_equal(r.wal.last_index, before.last_index);
    assert_int_equal(r.wal.entries, before.entries + (before.snap_index - r.wal.snap_index));
    int64_t rev = -1;
    int st = etcd_accepts(p, "snapflip.log", &rev);
    if (st != 0) fail_msg("etcd refused to start (status %d)", st);
    assert_int_equal(rev, env.clean_rev);
}

/* ---------------- wrong volume ---------------- */

static void test_validator_safe_guard_mismatch_is_wrong_volume(void **state) {
    (void)state;
    char parent[512], data[600], guard[600];
    path_in(parent, sizeof parent, "volume");
    snprintf(data, sizeof data, "%s/new.etcd", parent);
    snprintf(guard, sizeof guard, "%s/safe_guard", parent);
    char sub[700];
    snprintf(sub, sizeof sub, "%s/member/wal", data);
    assert_int_equal(fs_mkdir_p(sub, 0700), 0);
    snprintf(sub, sizeof sub, "%s/member/snap", data);
    assert_int_equal(fs_mkdir_p(sub, 0700), 0);

    /* first start: the file is created for this namespace, then the checks go on (no db) */
    setenv("POD_NAMESPACE", "shoot--dev--one", 1);
    expect_status(data, VALIDATE_SANITY, NULL, DATA_DIR_CORRUPT, NULL);
    size_t len;
    uint8_t *content = read_file(guard, &len);
    assert_int_equal(len, strlen("shoot--dev--one"));
    assert_memory_equal(content, "shoot--dev--one", len);
    free(content);
    struct stat st;
    assert_int_equal(stat(guard, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    /* another namespace finds this volume: refuse before touching anything */
    setenv("POD_NAMESPACE", "shoot--dev--two", 1);
    ValidationResult r;
    expect_status(data, VALIDATE_FULL, NULL, DATA_DIR_WRONG_VOLUME_MOUNTED, &r);
    assert_non_null(strstr(r.message, "shoot--dev--one"));
    /* also when the data dir itself is gone (the volume is what matters) */
    remove_dir(data);
    expect_status(data, VALIDATE_FULL, NULL, DATA_DIR_WRONG_VOLUME_MOUNTED, NULL);

    /* the Go tool compares exactly: a trailing newline is a different namespace */
    write_file(guard, "shoot--dev--two\n", 16);
    expect_status(data, VALIDATE_FULL, NULL, DATA_DIR_WRONG_VOLUME_MOUNTED, NULL);
    write_file(guard, "shoot--dev--two", 15);
    expect_status(data, VALIDATE_FULL, NULL, DATA_DIR_NOT_EXIST, NULL);
    unsetenv("POD_NAMESPACE");
    expect_status(data, VALIDATE_FULL, NULL, DATA_DIR_NOT_EXIST, NULL);
    remove_dir(parent);
}

/* ---------------- revisions against the store ---------------- */

static void test_validator_store_ahead_of_data_dir_is_revision_error(void **state) {
    (void)state;
    need_etcd();
    ValidationResult r;

    /* no backups: nothing to compare with */
    Store *s = make_store("store-clean");
    expect_status(env.clean, VALIDATE_SANITY, s, DATA_DIR_VALID, &r);
    assert_int_equal(r.store_revision, 0);

    /* a full backup at the data dir's revision, and an older one: fine */
    put_backup(s, SNAP_FULL, 0, 50);
    put_backup(s, SNAP_FULL, 0, env.clean_rev);
    expect_status(env.clean, VALIDATE_SANITY, s, DATA_DIR_VALID, &r);
    assert_int_equal(r.store_revision, env.clean_rev);
    expect_status(env.clean, VALIDATE_FULL, s, DATA_DIR_VALID, &r);

    /* a delta past it: the data dir would lose those changes */
    put_backup(s, SNAP_INCR, env.clean_rev + 1, env.clean_rev + 40);
    expect_status(env.clean, VALIDATE_SANITY, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, &r);
    assert_int_equal(r.store_revision, env.clean_rev + 40);
    assert_int_equal(r.db_revision, env.clean_rev);
    assert_true(r.wal_read);
    assert_non_null(strstr(r.message, "behind"));
    expect_status(env.clean, VALIDATE_FULL, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, NULL);
    store_free(s);

    /* the latest set is chosen by revision: a newer full with no deltas */
    s = make_store("store-full");
    put_backup(s, SNAP_FULL, 0, env.clean_rev + 1);
    expect_status(env.clean, VALIDATE_SANITY, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, &r);
    assert_int_equal(r.store_revision, env.clean_rev + 1);
    store_free(s);
}

/* The kill -9 data dir: the db is at revision 1 with no consistent index, the WAL holds every
 * put. Counting the entries past the consistent index shows etcd can reach the backup's
 * revision (it does: restarted on a copy it reports it), one revision more it cannot. */
static void test_validator_wal_entries_past_consistent_index_count_as_revisions(void **state) {
    (void)state;
    need_etcd();
    ValidationResult r;
    expect_status(env.ahead, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    if (r.db_revision >= env.ahead_rev)
        fail_msg("etcd committed its backend before the kill (db revision %lld); the WAL-ahead "
                 "case did not happen",
                 (long long)r.db_revision);
    assert_true(r.wal.normal_after >= (uint64_t)(env.ahead_rev - r.db_revision));
    /* every put writes a key; etcd 3.4's v2 publish and cluster version entries do not */
    assert_int_equal(r.wal.writes_after, (uint64_t)(env.ahead_rev - r.db_revision));
    assert_int_equal(r.wal.undecodable_after, 0);
    assert_true(r.wal.last_index > r.consistent_index);

    Store *s = make_store("store-ahead");
    put_backup(s, SNAP_FULL, 0, 1);
    put_backup(s, SNAP_INCR, 2, env.ahead_rev);
    expect_status(env.ahead, VALIDATE_SANITY, s, DATA_DIR_VALID, &r);
    assert_int_equal(r.store_revision, env.ahead_rev);
    assert_true(r.wal_read);
    assert_non_null(strstr(r.message, "within reach"));
    expect_status(env.ahead, VALIDATE_FULL, s, DATA_DIR_VALID, NULL);

    int64_t reach = r.db_revision + (int64_t)r.wal.writes_after;
    put_backup(s, SNAP_INCR, env.ahead_rev + 1, reach + 1);
    expect_status(env.ahead, VALIDATE_SANITY, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, &r);
    expect_status(env.ahead, VALIDATE_FULL, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, NULL);
    store_free(s);

    char p[512];
    copy_dir(env.ahead, "ahead-restart", p, sizeof p);
    int64_t rev = -1;
    int st = etcd_accepts(p, "ahead-restart.log", &rev);
    if (st != 0) fail_msg("etcd refused the killed data dir (status %d)", st);
    assert_int_equal(rev, env.ahead_rev);
}

/* The issue-7 stale data dir: the store is 20 revisions ahead of the db, and 30 lease grants sit
 * past the consistent index. They cannot raise the revision (etcd restarted on a copy stays at
 * the db's), so they must not vouch for the missing revisions. */
static void test_validator_lease_grants_past_consistent_index_do_not_count(void **state) {
    (void)state;
    need_etcd();
    ValidationResult r;
    expect_status(env.stale, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_int_equal(r.db_revision, env.stale_rev);
    if (r.wal.normal_after < 30)
        fail_msg("only %llu entries with data past consistent index %llu: this etcd saved the "
                 "index with the lease grants, the case under test did not happen",
                 (unsigned long long)r.wal.normal_after, (unsigned long long)r.consistent_index);
    assert_int_equal(r.wal.writes_after, 0);
    assert_int_equal(r.wal.undecodable_after, 0);
    assert_non_null(strstr(r.message, "0 of them can write a key"));

    /* a backup at the db's revision: fine */
    Store *s = make_store("store-stale");
    put_backup(s, SNAP_FULL, 0, env.stale_rev);
    expect_status(env.stale, VALIDATE_SANITY, s, DATA_DIR_VALID, &r);
    /* 20 revisions more in the store: stale, in both modes */
    put_backup(s, SNAP_INCR, env.stale_rev + 1, env.stale_rev + 20);
    expect_status(env.stale, VALIDATE_SANITY, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, &r);
    assert_int_equal(r.store_revision, env.stale_rev + 20);
    assert_non_null(strstr(r.message, "behind"));
    assert_non_null(strstr(r.message, "at most 0 revisions"));
    expect_status(env.stale, VALIDATE_FULL, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, NULL);
    store_free(s);
    /* a single revision more is already out of reach */
    s = make_store("store-stale-1");
    put_backup(s, SNAP_FULL, 0, env.stale_rev + 1);
    expect_status(env.stale, VALIDATE_SANITY, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, NULL);
    store_free(s);

    char p[512];
    copy_dir(env.stale, "stale-restart", p, sizeof p);
    int64_t rev = -1;
    int st = etcd_accepts(p, "stale-restart.log", &rev);
    if (st != 0) fail_msg("etcd refused the stale data dir (status %d)", st);
    assert_int_equal(rev, env.stale_rev);
}

/* Killed before the backend commit with every kind of request past the consistent index: the
 * count is exactly what etcd's replay adds (the put with a lease, the txn whose put is in its
 * failure branch, the delete, the revocation deleting the leased key), not the compaction or
 * the 26 lease grants. */
static void test_validator_counts_only_wal_entries_that_write_a_key(void **state) {
    (void)state;
    need_etcd();
    ValidationResult r;
    expect_status(env.mixed, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    char p[512];
    copy_dir(env.mixed, "mixed-restart", p, sizeof p);
    int64_t rev = -1;
    int st = etcd_accepts(p, "mixed-restart.log", &rev);
    if (st != 0) fail_msg("etcd refused the killed data dir (status %d)", st);
    assert_int_equal(rev, 8);
    if (r.db_revision >= rev)
        fail_msg("etcd committed its backend before the kill (db revision %lld)",
                 (long long)r.db_revision);
    assert_int_equal(r.db_revision + (int64_t)r.wal.writes_after, rev);
    assert_true(r.wal.normal_after >= r.wal.writes_after + 26);
    assert_int_equal(r.wal.undecodable_after, 0);

    Store *s = make_store("store-mixed");
    put_backup(s, SNAP_FULL, 0, r.db_revision);
    put_backup(s, SNAP_INCR, r.db_revision + 1, rev);
    expect_status(env.mixed, VALIDATE_SANITY, s, DATA_DIR_VALID, &r);
    assert_non_null(strstr(r.message, "within reach"));
    put_backup(s, SNAP_INCR, rev + 1, rev + 1);
    expect_status(env.mixed, VALIDATE_FULL, s, DATA_DIR_REVISION_CONSISTENCY_ERROR, NULL);
    store_free(s);
}

static size_t put_varint(uint8_t *out, uint64_t v) {
    size_t k = 0;
    do {
        out[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return k;
}

/* Re-encodes a WAL segment the way etcd's encoder writes it (walpb.Record{type, crc, data},
 * 8-byte alignment) with a fresh CRC chain, after the entry record at edit_off (if any) had its
 * raftpb.Entry data overwritten with `fill` bytes; append (if not NULL) is the raftpb.Entry of
 * one more entry record at the end. */
static void rewrite_segment(const char *path, uint64_t edit_off, uint8_t fill,
                            const uint8_t *append, size_t append_len) {
    WalSegment *s = NULL;
    if (wal_segment_open(path, 1, &s) != 0) fail_msg("open %s: %s", path, err_msg());
    size_t cap = 1 << 16, n = 0;
    uint8_t *out = malloc(cap), *rec = NULL;
    assert_non_null(out);
    uint32_t chain = 0, new_chain = 0;
    WalRecord r;
    int rc = 0, edited = 0;
    int ended = 0; /* the segment must not be read past its end */
    for (;;) {
        if (ended || (rc = wal_segment_next(s, &chain, &r)) != WAL_NEXT_RECORD) {
            ended = 1;
            if (rc < 0 || !append) break;
            r.type = WAL_REC_ENTRY; /* the appended entry */
            r.data = append;
            r.len = append_len;
            r.offset = UINT64_MAX - 1;
            append = NULL;
        }
        uint8_t *data = malloc(r.len + 1);
        assert_non_null(data);
        if (r.len) memcpy(data, r.data, r.len);
        if (r.type == WAL_REC_ENTRY && r.offset == edit_off) {
            WalEntry e;
            assert_int_equal(wal_decode_entry(r.data, r.len, &e), 0);
            assert_true(e.data_len > 0);
            memset(data + (e.data - r.data), fill, e.data_len);
            edited = 1;
        }
        if (r.type != WAL_REC_CRC) new_chain = wal_crc32c(new_chain, data, r.len);
        rec = realloc(rec, r.len + 32);
        assert_non_null(rec);
        size_t k = 0;
        rec[k++] = 0x08;
        k += put_varint(rec + k, (uint64_t)r.type);
        rec[k++] = 0x10;
        k += put_varint(rec + k, new_chain);
        if (r.len) {
            rec[k++] = 0x1a;
            k += put_varint(rec + k, r.len);
            memcpy(rec + k, data, r.len);
            k += r.len;
        }
        free(data);
        size_t pad = (8 - k % 8) % 8;
        if (n + 8 + k + pad > cap) {
            cap = (n + 8 + k + pad) * 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
        put_le64(out + n, k | (pad ? (uint64_t)(0x80 | pad) << 56 : 0));
        memcpy(out + n + 8, rec, k);
        memset(out + n + 8 + k, 0, pad);
        n += 8 + k + pad;
    }
    if (rc < 0) fail_msg("reading %s: %s", path, err_msg());
    wal_segment_close(s);
    assert_true(edit_off == UINT64_MAX || edited);
    write_file(path, out, n);
    free(out);
    free(rec);
}

/* An entry past the consistent index whose data is neither an InternalRaftRequest nor a v2
 * Request (one of the stale dir's lease grants overwritten, CRCs redone) counts as a write:
 * the bound rises by one, and exactly one. */
static void test_validator_undecodable_wal_entry_counts_as_a_write(void **state) {
    (void)state;
    need_etcd();
    ValidationResult r;
    expect_status(env.stale, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    uint64_t ci = r.consistent_index;
    char p[512], wal[600];
    copy_dir(env.stale, "stale-undecodable", p, sizeof p);
    snprintf(wal, sizeof wal, "%s/" WAL0, p);

    /* the re-encoding alone changes nothing */
    rewrite_segment(wal, UINT64_MAX, 0, NULL, 0);
    ValidationResult same;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_VALID, &same);
    assert_int_equal(same.wal.last_index, r.wal.last_index);
    assert_int_equal(same.wal.normal_after, r.wal.normal_after);
    assert_int_equal(same.wal.writes_after, 0);

    /* the last lease grant past the consistent index */
    static Frame fr[4096];
    size_t n = list_frames(wal, fr, 4096);
    uint64_t pick = UINT64_MAX;
    WalSegment *s = NULL;
    assert_int_equal(wal_segment_open(wal, 1, &s), 0);
    uint32_t chain = 0;
    WalRecord rec;
    while (wal_segment_next(s, &chain, &rec) == WAL_NEXT_RECORD) {
        WalEntry e;
        if (rec.type != WAL_REC_ENTRY || wal_decode_entry(rec.data, rec.len, &e) != 0) continue;
        if (e.type == 0 && e.index > ci && e.data_len > 0 &&
            wal_classify_request(e.data, e.data_len) == WAL_REQ_NO_WRITE)
            pick = rec.offset;
    }
    wal_segment_close(s);
    assert_true(n > 30 && pick != UINT64_MAX);
    rewrite_segment(wal, pick, 0x07, NULL, 0); /* tag 0x07: field 0, wire type 7 */

    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_int_equal(r.wal.normal_after, same.wal.normal_after);
    assert_int_equal(r.wal.writes_after, 1);
    assert_int_equal(r.wal.undecodable_after, 1);
    Store *st = make_store("store-undecodable");
    put_backup(st, SNAP_FULL, 0, env.stale_rev);
    put_backup(st, SNAP_INCR, env.stale_rev + 1, env.stale_rev + 1);
    expect_status(p, VALIDATE_SANITY, st, DATA_DIR_VALID, &r);
    assert_non_null(strstr(r.message, "within reach"));
    put_backup(st, SNAP_INCR, env.stale_rev + 2, env.stale_rev + 2);
    expect_status(p, VALIDATE_SANITY, st, DATA_DIR_REVISION_CONSISTENCY_ERROR, &r);
    assert_non_null(strstr(r.message, "1 undecodable"));
    store_free(st);
    remove_dir(p);
}

/* A new leader's entry at an index the log already has replaces that entry and every later one
 * (raft's uncommitted tail; etcd's ReadAll does the same): here the lease revocation and the 5
 * lease grants after it give way to one more lease grant, and the count of writes follows. */
static void test_validator_overwritten_wal_entries_are_not_counted(void **state) {
    (void)state;
    need_etcd();
    ValidationResult before;
    expect_status(env.mixed, VALIDATE_FULL, NULL, DATA_DIR_VALID, &before);
    char p[512], wal[600];
    copy_dir(env.mixed, "mixed-overwrite", p, sizeof p);
    snprintf(wal, sizeof wal, "%s/" WAL0, p);

    /* the last write past the consistent index (the revocation) and a lease grant's payload */
    WalSegment *s = NULL;
    assert_int_equal(wal_segment_open(wal, 1, &s), 0);
    uint32_t chain = 0;
    WalRecord rec;
    uint64_t last_write = 0, term = 0;
    uint8_t grant[256];
    size_t grant_n = 0;
    while (wal_segment_next(s, &chain, &rec) == WAL_NEXT_RECORD) {
        WalEntry e;
        if (rec.type != WAL_REC_ENTRY || wal_decode_entry(rec.data, rec.len, &e) != 0) continue;
        if (e.type != 0 || e.index <= before.consistent_index || e.data_len == 0) continue;
        WalRequestKind k = wal_classify_request(e.data, e.data_len);
        if (k == WAL_REQ_WRITE) {
            last_write = e.index;
            term = e.term;
        } else if (k == WAL_REQ_NO_WRITE && e.data_len <= sizeof grant && grant_n == 0) {
            memcpy(grant, e.data, e.data_len);
            grant_n = e.data_len;
        }
    }
    wal_segment_close(s);
    assert_true(last_write > 0 && grant_n > 0);
    assert_int_equal(before.wal.last_index, last_write + 5);

    uint8_t ent[300];
    size_t k = 0;
    ent[k++] = 0x10; /* term */
    k += put_varint(ent + k, term + 1);
    ent[k++] = 0x18; /* index */
    k += put_varint(ent + k, last_write);
    ent[k++] = 0x22; /* data */
    k += put_varint(ent + k, grant_n);
    memcpy(ent + k, grant, grant_n);
    k += grant_n;
    rewrite_segment(wal, UINT64_MAX, 0, ent, k);

    ValidationResult r;
    expect_status(p, VALIDATE_FULL, NULL, DATA_DIR_VALID, &r);
    assert_int_equal(r.wal.last_index, last_write);
    assert_int_equal(r.wal.last_term, term + 1);
    assert_int_equal(r.wal.entries, before.wal.entries - 5);
    assert_int_equal(r.wal.normal_after, before.wal.normal_after - 5);
    assert_int_equal(r.wal.writes_after, before.wal.writes_after - 1);
    remove_dir(p);
}

static void test_validator_db_locked_by_running_etcd_fails_to_open(void **state) {
    (void)state;
    need_etcd();
    if (env.locked.status != DATA_DIR_FAIL_TO_OPEN_BOLTDB)
        fail_msg("got %s: %s", data_dir_status_name(env.locked.status), env.locked.message);
    assert_non_null(strstr(env.locked.message, "locked"));
    assert_true(env.locked.seconds >= 0.25 && env.locked.seconds < 5);
}

/* ---------------- reader units ---------------- */

static void test_bbolt_get_reads_meta_keys(void **state) {
    (void)state;
    need_etcd();
    char db_path[600];
    snprintf(db_path, sizeof db_path, "%s/member/snap/db", env.clean);
    BboltDb *db = NULL;
    assert_int_equal(bbolt_open(db_path, 0, &db), 0);
    uint8_t v[16];
    size_t n = 0;
    assert_int_equal(bbolt_get(db, "meta", "consistent_index", 16, v, sizeof v, &n), 0);
    assert_int_equal(n, 8);
    uint64_t ci = 0;
    for (int i = 0; i < 8; i++)
        ci = ci << 8 | v[i];
    assert_true(ci > 100);
    /* a short buffer gets a prefix and the full size */
    memset(v, 0xee, sizeof v);
    assert_int_equal(bbolt_get(db, "meta", "consistent_index", 16, v, 3, &n), 0);
    assert_int_equal(n, 8);
    assert_int_equal(v[3], 0xee);
    assert_int_equal(bbolt_get(db, "meta", "consistent_index", 16, NULL, 0, NULL), 0);
    assert_int_equal(bbolt_get(db, "meta", "consistent_inde", 15, v, sizeof v, &n), ERR_NOT_FOUND);
    assert_int_equal(bbolt_get(db, "meta", "", 0, v, sizeof v, &n), ERR_NOT_FOUND);
    assert_int_equal(bbolt_get(db, "no-such-bucket", "k", 1, v, sizeof v, &n), ERR_NOT_FOUND);
    assert_non_null(strstr(err_msg(), "no-such-bucket"));
    /* binary keys: the first key of bucket "key" is revision 2 (main 2, sub 0) */
    uint8_t k[17] = {0, 0, 0, 0, 0, 0, 0, 2, '_', 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(bbolt_get(db, "key", k, sizeof k, NULL, 0, &n), 0);
    assert_true(n > 10); /* an mvccpb.KeyValue */
    bbolt_close(db);
}

static void test_validator_status_names_and_modes(void **state) {
    (void)state;
    assert_string_equal(data_dir_status_name(DATA_DIR_VALID), "DataDirectoryValid");
    assert_string_equal(data_dir_status_name(DATA_DIR_REVISION_CONSISTENCY_ERROR),
                        "RevisionConsistencyError");
    assert_string_equal(data_dir_status_name(DATA_DIR_FAIL_TO_OPEN_BOLTDB),
                        "FailToOpenBoltDBError");
    assert_int_equal(DATA_DIR_FAIL_TO_OPEN_BOLTDB, 10); /* Go's iota order */
    ValidationMode m;
    assert_int_equal(validation_mode_parse("full", &m), 0);
    assert_int_equal(m, VALIDATE_FULL);
    assert_int_equal(validation_mode_parse("sanity", &m), 0);
    assert_int_equal(m, VALIDATE_SANITY);
    assert_int_equal(validation_mode_parse("Full", &m), ERR_INVALID);
    ValidationResult r;
    assert_int_equal(validate_data_dir(NULL, VALIDATE_FULL, NULL, &r), ERR_INVALID);
    assert_int_equal(r.status, DATA_DIR_STATUS_UNKNOWN);
}

static void test_wal_crc32c_matches_castagnoli_and_chains(void **state) {
    (void)state;
    assert_int_equal(wal_crc32c(0, "123456789", 9), 0xE3069283u);
    uint8_t buf[1000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = wal_crc32c(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut += 37)
        assert_int_equal(wal_crc32c(wal_crc32c(0, buf, cut), buf + cut, sizeof buf - cut), whole);
    assert_int_equal(wal_crc32c(0x1234, NULL, 0), 0x1234);
    /* the table code (CPUs without SSE4.2) agrees at every length and alignment */
    assert_int_equal(wal_crc32c_portable(0, "123456789", 9), 0xE3069283u);
    for (size_t start = 0; start < 9; start++)
        for (size_t len = 0; start + len <= sizeof buf; len += 13)
            assert_int_equal(wal_crc32c_portable(0x5eed, buf + start, len),
                             wal_crc32c(0x5eed, buf + start, len));
}

static void test_wal_decoders_follow_gogoproto(void **state) {
    (void)state;
    WalEntry e;
    /* Type=0 Term=2 Index=300 Data="ab" */
    const uint8_t ok[] = {0x08, 0x00, 0x10, 0x02, 0x18, 0xac, 0x02, 0x22, 0x02, 'a', 'b'};
    assert_int_equal(wal_decode_entry(ok, sizeof ok, &e), 0);
    assert_int_equal(e.term, 2);
    assert_int_equal(e.index, 300);
    assert_int_equal(e.data_len, 2);
    assert_memory_equal(e.data, "ab", 2);
    /* unknown fields are skipped; the last value wins */
    const uint8_t unk[] = {0x18, 0x01, 0x2d, 1, 2, 3, 4, 0x18, 0x05};
    assert_int_equal(wal_decode_entry(unk, sizeof unk, &e), 0);
    assert_int_equal(e.index, 5);
    const uint8_t bad_wire[] = {0x1a, 0x00}; /* index as bytes */
    assert_int_equal(wal_decode_entry(bad_wire, sizeof bad_wire, &e), ERR_CORRUPT);
    const uint8_t long_data[] = {0x22, 0x05, 'a'};
    assert_int_equal(wal_decode_entry(long_data, sizeof long_data, &e), ERR_CORRUPT);
    const uint8_t overflow[] = {0x10, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(wal_decode_entry(overflow, sizeof overflow, &e), ERR_CORRUPT);
    const uint8_t field0[] = {0x00, 0x00};
    assert_int_equal(wal_decode_entry(field0, sizeof field0, &e), ERR_CORRUPT);
    const uint8_t group[] = {0x2b};
    assert_int_equal(wal_decode_entry(group, sizeof group, &e), ERR_CORRUPT);

    WalHardState hs;
    const uint8_t st[] = {0x08, 0x03, 0x10, 0x07, 0x18, 0x09};
    assert_int_equal(wal_decode_hardstate(st, sizeof st, &hs), 0);
    assert_int_equal(hs.term, 3);
    assert_int_equal(hs.vote, 7);
    assert_int_equal(hs.commit, 9);

    uint64_t idx, term;
    /* index=10 term=2 conf_state={voters: packed [1, 2]} */
    const uint8_t sn[] = {0x08, 0x0a, 0x10, 0x02, 0x1a, 0x04, 0x0a, 0x02, 0x01, 0x02};
    assert_int_equal(wal_decode_snapshot(sn, sizeof sn, &idx, &term), 0);
    assert_int_equal(idx, 10);
    assert_int_equal(term, 2);
    const uint8_t sn_bad[] = {0x08, 0x0a, 0x1a, 0x02, 0x0a, 0x05};
    assert_int_equal(wal_decode_snapshot(sn_bad, sizeof sn_bad, &idx, &term), ERR_CORRUPT);
}

/* ---------------- entry payload classification ---------------- */

typedef struct {
    uint8_t b[4096];
    size_t n;
} Msg;

static void msg_raw(Msg *m, const void *p, size_t n) {
    assert_true(m->n + n <= sizeof m->b);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void msg_varint(Msg *m, uint64_t v) {
    uint8_t t[10];
    msg_raw(m, t, put_varint(t, v));
}

static void msg_tag(Msg *m, uint32_t field, unsigned wire) {
    msg_varint(m, (uint64_t)field << 3 | wire);
}

/* field (bytes) = sub */
static void msg_sub(Msg *m, uint32_t field, const Msg *sub) {
    msg_tag(m, field, 2);
    msg_varint(m, sub->n);
    msg_raw(m, sub->b, sub->n);
}

static void msg_str(Msg *m, uint32_t field, const char *str) {
    msg_tag(m, field, 2);
    msg_varint(m, strlen(str));
    msg_raw(m, str, strlen(str));
}

static void msg_u(Msg *m, uint32_t field, uint64_t v) {
    msg_tag(m, field, 0);
    msg_varint(m, v);
}

/* InternalRaftRequest{header={ID}, <field>=sub} */
static WalRequestKind classify_irr(uint32_t field, const Msg *sub) {
    Msg m = {0}, h = {0};
    msg_u(&h, 1, 42);
    msg_sub(&m, 100, &h);
    msg_sub(&m, field, sub);
    return wal_classify_request(m.b, m.n);
}

/* RequestOp{<kind>=...}: 1 range, 2 put, 3 delete range (key "k"), 4 txn = *txn */
static void op(Msg *ops_owner, uint32_t branch, uint32_t kind, const Msg *txn) {
    Msg o = {0}, body = {0};
    if (kind == 4)
        body = *txn;
    else
        msg_str(&body, 1, "k");
    msg_sub(&o, kind, &body);
    msg_sub(ops_owner, branch, &o);
}

/* etcdserverpb field numbers (raft_internal.proto, rpc.proto, etcdserver.proto) decide whether an
 * entry can raise the revision; whatever does not decode counts. */
static void test_wal_classify_request_by_etcdserverpb_field(void **state) {
    (void)state;
    Msg kv = {0}, empty = {0}, id = {0};
    msg_str(&kv, 1, "k");
    msg_str(&kv, 2, "v");
    msg_u(&id, 1, 5);
    assert_int_equal(wal_classify_request(NULL, 0), WAL_REQ_EMPTY);

    /* the requests that write a key */
    assert_int_equal(classify_irr(4, &kv), WAL_REQ_WRITE);    /* put */
    assert_int_equal(classify_irr(5, &kv), WAL_REQ_WRITE);    /* delete_range */
    assert_int_equal(classify_irr(9, &id), WAL_REQ_WRITE);    /* lease_revoke */
    assert_int_equal(classify_irr(4, &empty), WAL_REQ_WRITE); /* an empty put still writes */
    /* and those that do not */
    assert_int_equal(classify_irr(3, &kv), WAL_REQ_NO_WRITE);       /* range */
    assert_int_equal(classify_irr(7, &id), WAL_REQ_NO_WRITE);       /* compaction */
    assert_int_equal(classify_irr(8, &id), WAL_REQ_NO_WRITE);       /* lease_grant */
    assert_int_equal(classify_irr(10, &id), WAL_REQ_NO_WRITE);      /* alarm */
    assert_int_equal(classify_irr(11, &id), WAL_REQ_NO_WRITE);      /* lease_checkpoint */
    assert_int_equal(classify_irr(1000, &empty), WAL_REQ_NO_WRITE); /* auth_enable */
    assert_int_equal(classify_irr(1100, &kv), WAL_REQ_NO_WRITE);    /* auth_user_add */
    assert_int_equal(classify_irr(1300, &kv), WAL_REQ_NO_WRITE);    /* cluster_version_set */
    assert_int_equal(classify_irr(1301, &kv), WAL_REQ_NO_WRITE);    /* cluster_member_attr_set */
    assert_int_equal(classify_irr(9900, &empty), WAL_REQ_NO_WRITE); /* downgrade_version_test */
    assert_int_equal(classify_irr(77, &kv), WAL_REQ_NO_WRITE);      /* unknown: skipped */
    Msg only_id = {0};
    msg_u(&only_id, 1, 9);
    assert_int_equal(wal_classify_request(only_id.b, only_id.n), WAL_REQ_NO_WRITE);

    /* txns: a put or delete in any branch at any depth */
    Msg t = {0}, cmp = {0};
    msg_str(&cmp, 3, "k");
    msg_sub(&t, 1, &cmp);
    op(&t, 2, 1, NULL);
    op(&t, 3, 1, NULL);
    assert_int_equal(classify_irr(6, &t), WAL_REQ_NO_WRITE); /* ranges only */
    Msg tf = t;
    op(&tf, 3, 2, NULL);
    assert_int_equal(classify_irr(6, &tf), WAL_REQ_WRITE); /* put in the failure branch */
    Msg ts = t;
    op(&ts, 2, 3, NULL);
    assert_int_equal(classify_irr(6, &ts), WAL_REQ_WRITE); /* delete in the success branch */
    Msg inner = {0}, outer = t;
    op(&inner, 2, 1, NULL);
    op(&inner, 3, 2, NULL);
    op(&outer, 2, 4, &inner);
    op(&outer, 3, 1, NULL);
    assert_int_equal(classify_irr(6, &outer), WAL_REQ_WRITE); /* put in a nested txn */
    /* read-only txns nested 20 deep are read; 40 deep is more than is followed: a write */
    Msg deep = t;
    for (int d = 0; d < 40; d++) {
        Msg up = {0};
        op(&up, 2, 4, &deep);
        deep = up;
        if (d == 19) assert_int_equal(classify_irr(6, &deep), WAL_REQ_NO_WRITE);
    }
    assert_int_equal(classify_irr(6, &deep), WAL_REQ_WRITE);
    /* a txn whose op runs past its end, or with an op of the wrong wire type: a write */
    const uint8_t cut[] = {0x12, 0x05, 0x0a};
    Msg bad = {0};
    msg_raw(&bad, cut, sizeof cut);
    assert_int_equal(classify_irr(6, &bad), WAL_REQ_WRITE);
    Msg badw = {0};
    msg_u(&badw, 2, 1);
    assert_int_equal(classify_irr(6, &badw), WAL_REQ_WRITE);

    /* v2 requests: etcd 3.4 proposes them unwrapped (its member publish and cluster version);
     * Dir (5, a varint) makes that fail as an InternalRaftRequest, whose field 5 is bytes */
    Msg v2 = {0};
    msg_u(&v2, 1, 7);
    msg_str(&v2, 2, "PUT");
    msg_str(&v2, 3, "/0/members/8e9e05c52164694d/attributes");
    msg_str(&v2, 4, "{\"name\":\"default\"}");
    msg_u(&v2, 5, 0);
    msg_str(&v2, 6, "");
    for (uint32_t f = 7; f <= 16; f++)
        if (f != 8 && f != 17) msg_u(&v2, f, 0);
    assert_int_equal(wal_classify_request(v2.b, v2.n), WAL_REQ_V2);
    /* wrapped in InternalRaftRequest.v2 (3.5): the v2 store only, whatever else is set */
    Msg w = {0};
    msg_sub(&w, 2, &v2);
    assert_int_equal(wal_classify_request(w.b, w.n), WAL_REQ_V2);
    msg_sub(&w, 4, &kv);
    assert_int_equal(wal_classify_request(w.b, w.n), WAL_REQ_V2);

    /* gogoproto skips unknown fields, groups included */
    Msg g = {0}, put = {0};
    msg_tag(&g, 20, 3);
    msg_u(&g, 1, 1);
    msg_tag(&g, 21, 3);
    msg_tag(&g, 21, 4);
    msg_tag(&g, 20, 4);
    msg_sub(&g, 8, &id);
    assert_int_equal(wal_classify_request(g.b, g.n), WAL_REQ_NO_WRITE);
    put = g;
    msg_sub(&put, 4, &kv);
    assert_int_equal(wal_classify_request(put.b, put.n), WAL_REQ_WRITE);

    /* neither message: counted */
    const uint8_t zero_field[] = {0x07, 0x07, 0x07};
    const uint8_t cut_varint[] = {0x08, 0xff};
    const uint8_t put_as_varint[] = {0x20, 0x01}; /* Val (4) is bytes in a v2 Request too */
    const uint8_t end_group[] = {0x0c};
    const uint8_t open_group[] = {0xa3, 0x01, 0x08, 0x01};
    const uint8_t *junk[] = {zero_field, cut_varint, put_as_varint, end_group, open_group};
    const size_t junk_n[] = {sizeof zero_field, sizeof cut_varint, sizeof put_as_varint,
                             sizeof end_group, sizeof open_group};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        assert_int_equal(wal_classify_request(junk[i], junk_n[i]), WAL_REQ_UNDECODABLE);
    }
    Msg lg_bad = {0};
    msg_tag(&lg_bad, 3, 0); /* range as a varint; Path (3) is bytes in a v2 Request too */
    msg_varint(&lg_bad, 1);
    assert_int_equal(wal_classify_request(lg_bad.b, lg_bad.n), WAL_REQ_UNDECODABLE);

    assert_true(wal_request_may_write(WAL_REQ_WRITE));
    assert_true(wal_request_may_write(WAL_REQ_UNDECODABLE));
    assert_false(wal_request_may_write(WAL_REQ_NO_WRITE));
    assert_false(wal_request_may_write(WAL_REQ_V2));
    assert_false(wal_request_may_write(WAL_REQ_EMPTY));
    assert_string_equal(wal_request_kind_name(WAL_REQ_UNDECODABLE), "undecodable");
    assert_string_equal(wal_request_kind_name(WAL_REQ_NO_WRITE), "no-write");
}

/* Builds one framed record: walpb.Record{type, crc, data} with etcd's padding. */
static size_t frame_record(uint8_t *out, int64_t type, uint32_t crc, const void *data, size_t n) {
    uint8_t rec[256];
    size_t k = 0;
    rec[k++] = 0x08;
    rec[k++] = (uint8_t)type;
    rec[k++] = 0x10;
    for (uint32_t v = crc;; v >>= 7) {
        rec[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f) break;
    }
    rec[k++] = 0x1a;
    rec[k++] = (uint8_t)n;
    memcpy(rec + k, data, n);
    k += n;
    size_t pad = (8 - k % 8) % 8;
    uint64_t word = k | (pad ? (uint64_t)(0x80 | pad) << 56 : 0);
    put_le64(out, word);
    memcpy(out + 8, rec, k);
    memset(out + 8 + k, 0, pad);
    return 8 + k + pad;
}

static void test_wal_segment_bounds_record_sizes(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "huge.wal");
    uint8_t head[512];
    size_t n = frame_record(head, WAL_REC_CRC, 0, "", 0);
    uint8_t md[] = {1, 2, 3};
    uint32_t crc = wal_crc32c(0, md, sizeof md);
    n += frame_record(head + n, WAL_REC_METADATA, crc, md, sizeof md);
    size_t good = n;
    /* a 65 MiB record inside a (sparse) file that is big enough: refused by the cap */
    put_le64(head + n, (uint64_t)65 << 20);
    n += 8;
    write_file(path, head, n);
    assert_int_equal(truncate(path, (off_t)(70u << 20)), 0);
    WalSegment *s = NULL;
    assert_int_equal(wal_segment_open(path, 1, &s), 0);
    WalRecord r;
    uint32_t chain = 0;
    assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_RECORD);
    assert_int_equal(r.type, WAL_REC_CRC);
    assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_RECORD);
    assert_int_equal(r.type, WAL_REC_METADATA);
    assert_int_equal(r.len, 3);
    assert_int_equal(wal_segment_valid_offset(s), good);
    assert_int_equal(wal_segment_next(s, &chain, &r), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "cap"));
    wal_segment_close(s);

    /* the same length word in a small file: cut short (torn), whatever the segment */
    assert_int_equal(truncate(path, (off_t)(n + 100)), 0);
    for (int last = 0; last < 2; last++) {
        assert_int_equal(wal_segment_open(path, last, &s), 0);
        chain = 0;
        assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_RECORD);
        assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_RECORD);
        assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_TORN);
        assert_non_null(strstr(err_msg(), "past the end"));
        wal_segment_close(s);
    }

    /* a zero length word ends the segment (preallocated space) */
    assert_int_equal(truncate(path, (off_t)good), 0);
    assert_int_equal(truncate(path, (off_t)good + 4096), 0);
    assert_int_equal(wal_segment_open(path, 1, &s), 0);
    chain = 0;
    assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_RECORD);
    assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_RECORD);
    assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_END);
    wal_segment_close(s);

    /* a bad CRC: corrupt, or torn when the last segment has a zeroed sector in the record */
    uint8_t bad[512];
    size_t bn = frame_record(bad, WAL_REC_CRC, 0, "", 0);
    bn += frame_record(bad + bn, WAL_REC_METADATA, crc ^ 1, md, sizeof md);
    write_file(path, bad, bn);
    assert_int_equal(wal_segment_open(path, 1, &s), 0);
    chain = 0;
    assert_int_equal(wal_segment_next(s, &chain, &r), WAL_NEXT_RECORD);
    assert_int_equal(wal_segment_next(s, &chain, &r), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "CRC mismatch"));
    wal_segment_close(s);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validator_clean_data_dir_is_valid_in_both_modes),
        cmocka_unit_test(test_validator_reads_raft_log_like_etcd),
        cmocka_unit_test(test_validator_missing_data_dir_is_not_exist),
        cmocka_unit_test(test_validator_missing_wal_dir_is_inv_struct),
        cmocka_unit_test(test_validator_missing_db_is_corrupt),
        cmocka_unit_test(test_validator_flipped_db_page_bytes_are_corrupt_in_full_mode),
        cmocka_unit_test(test_validator_truncated_db_is_corrupt),
        cmocka_unit_test(test_validator_torn_wal_tail_is_valid_as_etcd_repairs_it),
        cmocka_unit_test(test_validator_flipped_wal_byte_mid_log_is_corrupt),
        cmocka_unit_test(test_validator_garbage_and_empty_wal_are_corrupt),
        cmocka_unit_test(test_validator_bad_newest_snap_file_falls_back_like_etcd),
        cmocka_unit_test(test_validator_safe_guard_mismatch_is_wrong_volume),
        cmocka_unit_test(test_validator_store_ahead_of_data_dir_is_revision_error),
        cmocka_unit_test(test_validator_wal_entries_past_consistent_index_count_as_revisions),
        cmocka_unit_test(test_validator_lease_grants_past_consistent_index_do_not_count),
        cmocka_unit_test(test_validator_counts_only_wal_entries_that_write_a_key),
        cmocka_unit_test(test_validator_undecodable_wal_entry_counts_as_a_write),
        cmocka_unit_test(test_validator_overwritten_wal_entries_are_not_counted),
        cmocka_unit_test(test_validator_db_locked_by_running_etcd_fails_to_open),
        cmocka_unit_test(test_bbolt_get_reads_meta_keys),
        cmocka_unit_test(test_validator_status_names_and_modes),
        cmocka_unit_test(test_wal_crc32c_matches_castagnoli_and_chains),
        cmocka_unit_test(test_wal_decoders_follow_gogoproto),
        cmocka_unit_test(test_wal_segment_bounds_record_sizes),
        cmocka_unit_test(test_wal_classify_request_by_etcdserverpb_field),
    };
    return testutil_exit(
        cmocka_run_group_tests_name("validator", tests, group_setup, group_teardown));
}
