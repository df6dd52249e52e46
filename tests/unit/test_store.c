/* test_store: snapshot names (format, parse, sort, latest set; docs/go-tool.md §3 and §13 scenario
 * 1), the generic store layer's prefix handling (§15.1, §15.2) and the Local driver on real files,
 * including the Go tool's fixture stores under tests/fixtures/<name>/store. Each test works in
 * its own temp directory under /tmp, removed afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/snapname.h"
#include "store/store.h"
#include "store/store_driver.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------- helpers ---------- */

static char *make_tmpdir(void) {
    char tmpl[] = "/tmp/etcdbr-test-store-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void rm_tmpdir(char *d) {
    if (!d) return;
    assert_int_equal(fs_remove_tree(d), 0);
    free(d);
}

static void write_raw(const char *path, const void *data, size_t len) {
    char *dir = fs_dirname(path);
    assert_int_equal(fs_mkdir_p(dir, 0700), 0);
    free(dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* store_scope (the key of local caches) tells apart two stores that differ only in where they
 * are reached or as whom: endpoint override, credentials, region; the description alone may not. */
static void test_scope_names_endpoint_and_credentials(void **state) {
    (void)state;
    StoreConfig base = {.provider = "Local", .container = "/tmp/scope-c", .prefix = "p"};
    StoreConfig cfgs[4] = {base, base, base, base};
    cfgs[1].endpoint_override = "http://127.0.0.1:1";
    cfgs[2].endpoint_override = "http://127.0.0.1:2";
    cfgs[3].credentials = "/tmp/other-creds";
    Store *s[4] = {0};
    for (int i = 0; i < 4; i++)
        if (store_open(&cfgs[i], &s[i])) fail_msg("store_open: %s", err_msg());
    for (int i = 0; i < 4; i++) {
        assert_string_equal(store_describe(s[i]), store_describe(s[0]));
        for (int j = 0; j < i; j++)
            assert_string_not_equal(store_scope(s[i]), store_scope(s[j]));
    }
    for (int i = 0; i < 4; i++)
        store_free(s[i]);
}

static Store *open_local(const char *container, const char *prefix) {
    StoreConfig cfg = {
        .provider = "Local", .container = container, .prefix = prefix, .temp_dir = "/tmp"};
    Store *s = NULL;
    int rc = store_open(&cfg, &s);
    if (rc != 0) fail_msg("store_open: %s", err_msg());
    return s;
}

static void put_object(Store *s, const char *name, const void *data, size_t len) {
    StoreWriter *w = NULL;
    int rc = store_open_write(s, name, &w);
    if (rc != 0) fail_msg("store_open_write %s: %s", name, err_msg());
    assert_int_equal(io_write(store_writer_io(w), data, len), 0);
    assert_int_equal(io_finish(store_writer_io(w)), 0);
    rc = store_writer_commit(w);
    if (rc != 0) fail_msg("commit %s: %s", name, err_msg());
}

static size_t read_all(Store *s, const Snapshot *snap, char *buf, size_t cap) {
    IoReader *r = NULL;
    int rc = store_open_read(s, snap, &r);
    if (rc != 0) fail_msg("store_open_read %s: %s", snap->key, err_msg());
    size_t got = 0;
    assert_int_equal(io_read_full(r, buf, cap, &got), 0);
    io_reader_free(r);
    return got;
}

/* Number of directory entries (any name, hidden included) in dir; -1 if absent. */
static int count_entries(const char *dir, const char *starting_with) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            (!starting_with || strncmp(e->d_name, starting_with, strlen(starting_with)) == 0))
            n++;
    closedir(d);
    return n;
}

static Snapshot parse_ok(const char *key, const char *prefix) {
    Snapshot s;
    int rc = snapname_parse(key, prefix, &s);
    if (rc != 0) fail_msg("parse %s (prefix \"%s\"): %s", key, prefix, err_msg());
    return s;
}

static void parse_fails(const char *key, const char *prefix, const char *why) {
    Snapshot s;
    int rc = snapname_parse(key, prefix, &s);
    if (rc != ERR_INVALID)
        fail_msg("parse %s (prefix \"%s\") gave %d, want ERR_INVALID", key, prefix, rc);
    if (why && !strstr(err_msg(), why))
        fail_msg("parse %s: message \"%s\" does not say \"%s\"", key, err_msg(), why);
    if (!strstr(err_msg(), key))
        fail_msg("parse %s: message \"%s\" does not name the key", key, err_msg());
}

/* ---------- snapname_format ---------- */

static void test_format_pads_revisions_to_8_digits(void **state) {
    (void)state;
    char buf[128];
    assert_int_equal(snapname_format(SNAP_FULL, 0, 2088, 1518427675, "", 0, buf, sizeof buf), 0);
    assert_string_equal(buf, "Full-00000000-00002088-1518427675");
    assert_int_equal(snapname_format(SNAP_INCR, 30010, 30020, 7, ".gz", 1, buf, sizeof buf), 0);
    assert_string_equal(buf, "Incr-00030010-00030020-7.gz.final");
    assert_int_equal(snapname_format(SNAP_FULL, 0, 30009, 1518427675, NULL, 1, buf, sizeof buf), 0);
    assert_string_equal(buf, "Full-00000000-00030009-1518427675.final");
}

static void test_format_writes_wider_revisions_in_full(void **state) {
    (void)state;
    char buf[128];
    assert_int_equal(snapname_format(SNAP_INCR, 123456789012, 123456789013, 1795974943, ".zst", 0,
                                     buf, sizeof buf),
                     0);
    assert_string_equal(buf, "Incr-123456789012-123456789013-1795974943.zst");
    assert_int_equal(snapname_format(SNAP_INCR, SNAPNAME_REVISION_MAX, SNAPNAME_REVISION_MAX,
                                     SNAPNAME_TIME_MAX, ".Z", 0, buf, sizeof buf),
                     0);
    assert_string_equal(buf, "Incr-9223372036854775806-9223372036854775806-9223372035.Z");
    /* beyond them, revision + 1 or the time in nanoseconds would overflow int64 */
    assert_int_equal(snapname_format(SNAP_INCR, INT64_MAX, INT64_MAX, 1, ".Z", 0, buf, sizeof buf),
                     ERR_INVALID);
}

static void test_format_rejects_bad_input(void **state) {
    (void)state;
    char buf[64];
    assert_int_equal(snapname_format(SNAP_FULL, 0, 5, 1, "", 0, buf, 10), ERR_INVALID);
    assert_string_equal(buf, "");
    assert_int_equal(snapname_format(SNAP_FULL, 6, 5, 1, "", 0, buf, sizeof buf), ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, -1, 5, 1, "", 0, buf, sizeof buf), ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, 0, 5, -1, "", 0, buf, sizeof buf), ERR_INVALID);
    assert_int_equal(snapname_format((SnapKind)7, 0, 5, 1, "", 0, buf, sizeof buf), ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, 0, 5, 1, "gz", 0, buf, sizeof buf), ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, 0, 5, 1, ".g/z", 0, buf, sizeof buf), ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, 0, 5, 1, ".", 0, buf, sizeof buf), ERR_INVALID);
}

static void test_format_then_parse_round_trips(void **state) {
    (void)state;
    const char *sfx[] = {"", ".gz", ".zlib", ".Z", ".zst"};
    const int64_t revs[][2] = {
        {0, 0}, {0, 190}, {191, 202}, {99999999, 100000000}, {123456789012, 123456789012}};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 5; i++)
            for (size_t r = 0; r < 5; r++)
                for (int fin = 0; fin < 2; fin++) {
                    char name[256], key[512];
                    SnapKind kind = k ? SNAP_INCR : SNAP_FULL;
                    assert_int_equal(snapname_format(kind, revs[r][0], revs[r][1], 1795974943,
                                                     sfx[i], fin, name, sizeof name),
                                     0);
                    snprintf(key, sizeof key, "shoot--x/etcd-main/v2/%s", name);
                    Snapshot s = parse_ok(key, "shoot--x/etcd-main");
                    assert_int_equal(s.kind, kind);
                    assert_int_equal(s.start_revision, revs[r][0]);
                    assert_int_equal(s.last_revision, revs[r][1]);
                    assert_int_equal(s.created_on, 1795974943);
                    assert_string_equal(s.compression_suffix, sfx[i]);
                    assert_int_equal(s.is_final, fin);
                    assert_int_equal(s.is_chunk, 0);
                    assert_int_equal(s.version, 2);
                    assert_string_equal(s.snap_name, name);
                    assert_string_equal(s.key, key);
                    assert_string_equal(s.prefix, "shoot--x/etcd-main/v2/");
                    assert_string_equal(s.snap_dir, "");
                    assert_int_equal(s.size, -1);
                }
}

/* ---------- snapname_parse: §13 scenario 1 ---------- */

static void test_parse_v2_plain(void **state) {
    (void)state;
    Snapshot s = parse_ok("v2/Full-00000000-00002088-1518427675", "");
    assert_int_equal(s.version, 2);
    assert_int_equal(s.kind, SNAP_FULL);
    assert_int_equal(s.start_revision, 0);
    assert_int_equal(s.last_revision, 2088);
    assert_int_equal(s.created_on, 1518427675);
    assert_string_equal(s.compression_suffix, "");
    assert_int_equal(s.is_final, 0);
    assert_string_equal(s.prefix, "v2/");
    assert_string_equal(s.snap_name, "Full-00000000-00002088-1518427675");
}

static void test_parse_v1_backup_layout(void **state) {
    (void)state;
    Snapshot s = parse_ok("etcd-main/v1/Backup-1518427675/Incr-00030010-00030020-1518427700.gz",
                          "etcd-main");
    assert_int_equal(s.version, 1);
    assert_int_equal(s.kind, SNAP_INCR);
    assert_int_equal(s.start_revision, 30010);
    assert_int_equal(s.last_revision, 30020);
    assert_string_equal(s.compression_suffix, ".gz");
    assert_string_equal(s.snap_dir, "Backup-1518427675");
    assert_string_equal(s.prefix, "etcd-main/v1/");
    assert_string_equal(s.snap_name, "Incr-00030010-00030020-1518427700.gz");
    assert_int_equal(s.is_chunk, 0);
}

static void test_parse_suffix_combinations(void **state) {
    (void)state;
    Snapshot s = parse_ok("v2/Full-00000000-00030009-1518427675.gz", "");
    assert_string_equal(s.compression_suffix, ".gz");
    assert_int_equal(s.is_final, 0);
    s = parse_ok("v2/Full-00000000-00030009-1518427675.final", "");
    assert_string_equal(s.compression_suffix, "");
    assert_int_equal(s.is_final, 1);
    s = parse_ok("v2/Full-00000000-00030009-1518427675.gz.final", "");
    assert_string_equal(s.compression_suffix, ".gz");
    assert_int_equal(s.is_final, 1);
    /* unknown compressions are kept; decompression refuses them later */
    s = parse_ok("v2/Full-00000000-00030009-1518427675.bz2", "");
    assert_string_equal(s.compression_suffix, ".bz2");
    assert_int_equal(s.encrypted, 0);
}

/* ".enc" first, then the compression, then ".final": the Go tool takes "enc" for an unknown
 * compression and refuses the object instead of misreading it (docs/encryption.md). */
static void test_parse_encrypted_names(void **state) {
    (void)state;
    Snapshot s = parse_ok("v2/Full-00000000-00000100-1700000000.enc.gz", "");
    assert_int_equal(s.encrypted, 1);
    assert_string_equal(s.compression_suffix, ".gz");
    assert_int_equal(s.is_final, 0);
    s = parse_ok("v2/Full-00000000-00000100-1700000000.enc", "");
    assert_int_equal(s.encrypted, 1);
    assert_string_equal(s.compression_suffix, "");
    s = parse_ok("v2/Full-00000000-00000100-1700000000.enc.gz.final", "");
    assert_int_equal(s.encrypted, 1);
    assert_string_equal(s.compression_suffix, ".gz");
    assert_int_equal(s.is_final, 1);
    s = parse_ok("v2/Incr-00000101-00000200-1700000000.enc.final", "");
    assert_int_equal(s.encrypted, 1);
    assert_string_equal(s.compression_suffix, "");
    assert_int_equal(s.is_final, 1);
    s = parse_ok("v2/Full-00000000-00000100-1700000000.enc.zst/0000000002", "");
    assert_int_equal(s.encrypted, 1);
    assert_int_equal(s.is_chunk, 1);
    /* every name without ".enc" reads as before */
    s = parse_ok("v2/Full-00000000-00000100-1700000000.gz.final", "");
    assert_int_equal(s.encrypted, 0);

    char sfx[32], name[256];
    assert_int_equal(snapname_suffix(1, ".zlib", sfx, sizeof sfx), 0);
    assert_string_equal(sfx, ".enc.zlib");
    assert_int_equal(snapname_suffix(0, ".zlib", sfx, sizeof sfx), 0);
    assert_string_equal(sfx, ".zlib");
    assert_int_equal(snapname_suffix(1, NULL, sfx, sizeof sfx), 0);
    assert_string_equal(sfx, ".enc");
    assert_int_equal(snapname_suffix(1, ".gz", sfx, 4), ERR_INVALID);
    assert_int_equal(
        snapname_format(SNAP_FULL, 0, 100, 1700000000, ".enc.gz", 1, name, sizeof name), 0);
    assert_string_equal(name, "Full-00000000-00000100-1700000000.enc.gz.final");
    assert_int_equal(snapname_format(SNAP_FULL, 0, 100, 1700000000, ".enc", 0, name, sizeof name),
                     0);
    assert_string_equal(name, "Full-00000000-00000100-1700000000.enc");
    assert_int_equal(snapname_format(SNAP_FULL, 0, 1, 1, ".gz.enc", 0, name, sizeof name),
                     ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, 0, 1, 1, ".enc.enc", 0, name, sizeof name),
                     ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, 0, 1, 1, ".enc.", 0, name, sizeof name),
                     ERR_INVALID);
    assert_int_equal(snapname_format(SNAP_FULL, 0, 1, 1, ".encx", 0, name, sizeof name), 0);
}

/* store_name_suffix: ".enc" first exactly when the store has keys; the compression as before. */
static void test_store_name_suffix_follows_keyring(void **state) {
    (void)state;
    assert_string_equal(store_name_suffix(NULL, COMPRESS_GZIP), ".gz");
    char *dir = make_tmpdir();
    StoreConfig cfg = {.provider = "Local", .container = dir, .prefix = "p"};
    Store *st = NULL;
    assert_int_equal(store_open(&cfg, &st), 0);
    const CompressKind kinds[] = {COMPRESS_NONE, COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_LZW,
                                  COMPRESS_ZSTD};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(store_name_suffix(st, kinds[i]), compress_suffix(kinds[i]));
    }
    assert_null(store_keyring(st));
    static const char text[] = "k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n";
    Keyring *kr = NULL;
    assert_int_equal(keyring_parse(text, sizeof text - 1, "test", &kr), 0);
    store_set_keyring(st, kr);
    assert_ptr_equal(store_keyring(st), kr);
    for (size_t i = 0; i < 5; i++) {
        char want[32];
        snprintf(want, sizeof want, ".enc%s", compress_suffix(kinds[i]));
        assert_string_equal(store_name_suffix(st, kinds[i]), want);
    }
    store_free(st);
    rm_tmpdir(dir);
}

static void test_parse_chunks(void **state) {
    (void)state;
    Snapshot s = parse_ok("etcd/v2/Full-00000000-00000005-1700000000.gz/0000000001", "etcd");
    assert_int_equal(s.is_chunk, 1);
    assert_int_equal(s.version, 2);
    assert_int_equal(s.last_revision, 5);
    assert_string_equal(s.compression_suffix, ".gz");
    assert_string_equal(s.snap_name, "Full-00000000-00000005-1700000000.gz/0000000001");
    s = parse_ok("v1/Backup-1700000000/Incr-00000006-00000009-1700000001/0000000012", "");
    assert_int_equal(s.is_chunk, 1);
    assert_int_equal(s.version, 1);
    assert_string_equal(s.snap_dir, "Backup-1700000000");
    parse_fails("v2/Full-00000000-00000005-1700000000/1", "", "chunk");
    parse_fails("v2/Full-00000000-00000005-1700000000/000000000a", "", "chunk");
    parse_fails("v2/Full-00000000-00000005-1700000000/0000000001/0000000001", "", "components");
}

static void test_parse_rejects_bad_names(void **state) {
    (void)state;
    parse_fails("v2/Full-00000000-00000005-1700000000-extra", "", "4");
    parse_fails("v2/Full-00000000-1700000000", "", "4");
    parse_fails("v2/Full-0000000x-00000005-1700000000", "", "start revision");
    parse_fails("v2/Full-00000000-0000000y-1700000000", "", "last revision");
    parse_fails("v2/Full-00000000-00000005-17000000z0", "", "creation time");
    parse_fails("v2/Full-00000000-00000005-.gz", "", "empty");
    parse_fails("v2/Incr-00000009-00000005-1700000000", "", "start revision 9 > last revision 5");
    parse_fails("v2/Delta-00000000-00000005-1700000000", "", "unknown kind");
    parse_fails("v2/full-00000000-00000005-1700000000", "", "unknown kind");
    parse_fails("v2/Full-abc", "", "4");
    /* signs, empty, overflow */
    parse_fails("v2/Full-+0000000-00000005-1700000000", "", "start revision");
    parse_fails("v2/Full--1-00000005-1700000000", "", NULL);
    parse_fails("v2/Full--00000005-1700000000", "", NULL);
    parse_fails("v2/Full-00000000-9223372036854775808-1700000000", "", "last revision");
    parse_fails("v2/Full-00000000-00000005-99999999999999999999", "", "creation time");
    /* empty or misplaced '.' parts */
    parse_fails("v2/Full-00000000-00000005-123..gz", "", "empty");
    parse_fails("v2/Full-00000000-00000005-123.", "", "empty");
    parse_fails("v2/Full-00000000-00000005-123.gz.", "", "empty");
    parse_fails("v2/Full-00000000-00000005-123.final.gz", "", "final");
    parse_fails("v2/Full-00000000-00000005-123.tar.gz", "", "compression suffix");
    parse_fails("v2/Full-00000000-00000005-123.final.final", "", "twice");
    parse_fails("v2/Full-00000000-00000005-123.gz.gz.final", "", "more than one compression");
    parse_fails("v2/Full-00000000-00000005-123.enc.gz.gz.final", "", "too many");
    /* ".enc" only first, once (docs/encryption.md) */
    parse_fails("v2/Full-00000000-00000005-123.gz.enc", "", "more than one compression");
    parse_fails("v2/Full-00000000-00000005-123.enc.enc", "", "twice");
    parse_fails("v2/Full-00000000-00000005-123.final.enc", "", "final");
    parse_fails("v2/Full-00000000-00000005-123.g_z", "", "letters and digits");
    parse_fails("v2/Full-00000000-00000005-123.abcdefghijklmnop", "", "too long");
    parse_fails("v2/", "", "empty");
    parse_fails("v2//Full-00000000-00000005-1700000000", "", "empty");
}

static void test_parse_rejects_v1_backup_dir_as_name(void **state) {
    (void)state;
    parse_fails("etcd-main/v1/Backup-1518427675", "etcd-main", "backup directory");
    parse_fails("etcd-main/v1/Backup-1518427675/", "etcd-main", "empty");
    parse_fails("etcd-main/v1/Backup-abc/Full-00000000-00000005-1700000000", "etcd-main",
                "Backup-<unix seconds>");
    parse_fails("etcd-main/v1/Full-00000000-00000005-1700000000", "etcd-main", "backup directory");
    parse_fails("v1/Backup-1/Backup-2/Full-00000000-00000005-1700000000", "", "chunk");
}

static void test_parse_rejects_missing_version(void **state) {
    (void)state;
    parse_fails("Full-00000000-00000005-1700000000", "", "version");
    parse_fails("etcd-main/Full-00000000-00000005-1700000000", "etcd-main", "version");
    parse_fails("etcd-main/v3/Full-00000000-00000005-1700000000", "etcd-main", "version");
    /* the version must be right under the prefix, not anywhere in the key */
    parse_fails("etcd-main/x/v2/Full-00000000-00000005-1700000000", "etcd-main", "version");
    parse_fails("README.txt", "", "version");
    parse_fails("", "", "version");
}

/* §15.1: the Go parser finds the last "v1/" anywhere, so "shoot--dev1/..." hid every snapshot. */
static void test_parse_prefix_containing_v1_finds_v2(void **state) {
    (void)state;
    Snapshot s = parse_ok("shoot--dev1/etcd-main/v2/Full-00000000-00000190-1795974943.gz",
                          "shoot--dev1/etcd-main");
    assert_int_equal(s.version, 2);
    assert_int_equal(s.is_chunk, 0);
    assert_int_equal(s.kind, SNAP_FULL);
    assert_string_equal(s.prefix, "shoot--dev1/etcd-main/v2/");
    s = parse_ok("backup-v1/v2/Incr-00000191-00000202-1795974945", "backup-v1/");
    assert_int_equal(s.version, 2);
    assert_int_equal(s.kind, SNAP_INCR);
    s = parse_ok("v1/v2/Incr-00000191-00000202-1795974945", "v1");
    assert_int_equal(s.version, 2);
}

/* §15.2: prefix "etcd-main" must not claim "etcd-main-x/..." objects. */
static void test_parse_prefix_is_a_path_component(void **state) {
    (void)state;
    parse_fails("etcd-main-x/v2/Full-00000000-00000190-1795974943", "etcd-main", "store prefix");
    parse_fails("etcd-mainv2/Full-00000000-00000190-1795974943", "etcd-main", "store prefix");
    parse_fails("other/v2/Full-00000000-00000190-1795974943", "etcd-main", "store prefix");
    /* an empty prefix only takes top-level version directories */
    parse_fails("etcd-main/v2/Full-00000000-00000190-1795974943", "", "version");
}

static void test_parse_rejects_too_long_key(void **state) {
    (void)state;
    char key[1100];
    memset(key, 'a', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    Snapshot s;
    assert_int_equal(snapname_parse(key, "", &s), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "longer than"));
}

/* ---------- sort and latest set ---------- */

static Snapshot mk(SnapKind kind, int64_t start, int64_t last, int64_t ts, int chunk) {
    char name[256], key[300];
    assert_int_equal(snapname_format(kind, start, last, ts, ".gz", 0, name, sizeof name), 0);
    snprintf(key, sizeof key, "p/v2/%s%s", name, chunk ? "/0000000001" : "");
    return parse_ok(key, "p");
}

static void test_sort_is_numeric_by_last_revision(void **state) {
    (void)state;
    Snapshot v[4];
    v[0] = mk(SNAP_INCR, 0, 123456789012, 10, 0);
    v[1] = mk(SNAP_INCR, 0, 99999999, 20, 0);
    v[2] = mk(SNAP_INCR, 5, 100000000, 5, 0);
    v[3] = mk(SNAP_FULL, 0, 4, 30, 0);
    snapname_sort(v, 4);
    assert_int_equal(v[0].last_revision, 4);
    assert_int_equal(v[1].last_revision, 99999999);
    assert_int_equal(v[2].last_revision, 100000000);
    assert_int_equal(v[3].last_revision, 123456789012);
    /* a string sort would put "123456789012" before "99999999" */
    assert_true(strcmp(v[3].snap_name, v[1].snap_name) < 0);
}

static void test_sort_ignores_creation_time_except_for_ties(void **state) {
    (void)state;
    Snapshot v[6];
    v[0] = mk(SNAP_INCR, 11, 20, 1000, 0);
    v[1] = mk(SNAP_INCR, 21, 30, 10, 0);
    v[2] = mk(SNAP_INCR, 0, 10, 500, 1); /* chunk, tie with v3/v4 */
    v[3] = mk(SNAP_FULL, 0, 10, 700, 0); /* tie: later time */
    v[4] = mk(SNAP_INCR, 1, 10, 600, 0); /* tie: earlier time */
    v[5] = mk(SNAP_FULL, 0, 10, 600, 0); /* same time as v4: key decides ("Full" < "Incr") */
    snapname_sort(v, 6);
    assert_int_equal(v[0].kind, SNAP_FULL);
    assert_int_equal(v[0].created_on, 600);
    assert_int_equal(v[1].kind, SNAP_INCR);
    assert_int_equal(v[1].created_on, 600);
    assert_int_equal(v[2].created_on, 700);
    assert_int_equal(v[3].is_chunk, 1);
    assert_int_equal(v[4].last_revision, 20);
    assert_int_equal(v[5].last_revision, 30);
    /* total order: sorting a permutation gives the same sequence */
    Snapshot w[6] = {v[5], v[3], v[1], v[0], v[4], v[2]};
    snapname_sort(w, 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(w[i].key, v[i].key);
}

static void test_latest_set_takes_deltas_after_newest_full(void **state) {
    (void)state;
    Snapshot v[8];
    v[0] = mk(SNAP_FULL, 0, 100, 1, 0);
    v[1] = mk(SNAP_INCR, 101, 110, 2, 0);
    v[2] = mk(SNAP_FULL, 0, 110, 3, 0);
    v[3] = mk(SNAP_FULL, 0, 110, 3, 1); /* chunk of the full: ignored */
    v[4] = mk(SNAP_INCR, 111, 120, 4, 0);
    v[5] = mk(SNAP_INCR, 121, 130, 5, 1); /* chunk of a delta: ignored */
    v[6] = mk(SNAP_INCR, 121, 130, 5, 0);
    v[7] = mk(SNAP_INCR, 131, 140, 6, 0);
    snapname_sort(v, 8);
    ptrdiff_t full = -2;
    size_t idx[8], nd = 99;
    snapname_latest_set(v, 8, &full, idx, &nd);
    assert_true(full >= 0);
    assert_int_equal(v[full].kind, SNAP_FULL);
    assert_int_equal(v[full].last_revision, 110);
    assert_int_equal(v[full].is_chunk, 0);
    assert_int_equal(nd, 3);
    assert_int_equal(v[idx[0]].last_revision, 120);
    assert_int_equal(v[idx[1]].last_revision, 130);
    assert_int_equal(v[idx[1]].is_chunk, 0);
    assert_int_equal(v[idx[2]].last_revision, 140);
}

static void test_latest_set_full_only_and_newest_full_last(void **state) {
    (void)state;
    Snapshot v[3];
    v[0] = mk(SNAP_INCR, 1, 50, 1, 0);
    v[1] = mk(SNAP_FULL, 0, 60, 2, 0);
    v[2] = mk(SNAP_FULL, 0, 70, 3, 1); /* newest "full" is only a chunk */
    snapname_sort(v, 3);
    ptrdiff_t full;
    size_t idx[3], nd;
    snapname_latest_set(v, 3, &full, idx, &nd);
    assert_int_equal(full, 1);
    assert_int_equal(v[full].last_revision, 60);
    assert_int_equal(nd, 0);
}

static void test_latest_set_without_full_returns_all_deltas(void **state) {
    (void)state;
    Snapshot v[4];
    v[0] = mk(SNAP_INCR, 21, 30, 3, 0);
    v[1] = mk(SNAP_INCR, 1, 10, 1, 0);
    v[2] = mk(SNAP_FULL, 0, 15, 9, 1); /* chunk only */
    v[3] = mk(SNAP_INCR, 11, 20, 2, 0);
    snapname_sort(v, 4);
    ptrdiff_t full;
    size_t idx[4], nd;
    snapname_latest_set(v, 4, &full, idx, &nd);
    assert_int_equal(full, -1);
    assert_int_equal(nd, 3);
    assert_int_equal(v[idx[0]].last_revision, 10);
    assert_int_equal(v[idx[1]].last_revision, 20);
    assert_int_equal(v[idx[2]].last_revision, 30);
    snapname_latest_set(NULL, 0, &full, idx, &nd);
    assert_int_equal(full, -1);
    assert_int_equal(nd, 0);
}

/* ---------- latest set with histories (history.h) ---------- */

#define HA "aaaaaaaaaaaaaaaa"
#define HB "bbbbbbbbbbbbbbbb"

static Snapshot mk_h(SnapKind kind, int64_t start, int64_t last, int64_t ts, const char *hist) {
    Snapshot s = mk(kind, start, last, ts, 0);
    snprintf(s.history, sizeof s.history, "%s", hist);
    return s;
}

/* The last revisions of the set, e.g. "F100 110 130" (F = the full, then the deltas). */
static void set_str(const Snapshot *v, ptrdiff_t full, const size_t *idx, size_t nd, char *out,
                    size_t cap) {
    size_t o =
        (size_t)snprintf(out, cap, "F%lld", full >= 0 ? (long long)v[full].last_revision : -1LL);
    for (size_t k = 0; k < nd; k++)
        o += (size_t)snprintf(out + o, cap - o, " %lld", (long long)v[idx[k]].last_revision);
}

static void test_latest_set_leaves_out_deltas_of_another_history_after_a_tagged_full(void **state) {
    (void)state;
    Snapshot v[6];
    v[0] = mk_h(SNAP_FULL, 0, 90, 1, HB);
    v[1] = mk_h(SNAP_FULL, 0, 100, 2, HA);
    v[2] = mk_h(SNAP_INCR, 101, 110, 3, HA);
    v[3] = mk_h(SNAP_INCR, 91, 120, 4, HB); /* the other history's line goes on */
    v[4] = mk_h(SNAP_INCR, 111, 130, 5, HA);
    v[5] = mk_h(SNAP_INCR, 121, 140, 6, HB);
    snapname_sort(v, 6);
    ptrdiff_t full;
    size_t idx[6], nd;
    char got[128];
    snapname_latest_set(v, 6, &full, idx, &nd);
    set_str(v, full, idx, nd, got, sizeof got);
    assert_string_equal(got, "F100 110 130");
    assert_string_equal(v[full].history, HA);
    /* a point in time before HA's full: HB's full and only HB's deltas */
    snapname_set_at(v, 6, 95, SNAPNAME_ANY_TIME, &full, idx, &nd);
    set_str(v, full, idx, nd, got, sizeof got);
    assert_string_equal(got, "F90 120 140");
}

static void test_latest_set_takes_untagged_deltas_after_a_tagged_full(void **state) {
    (void)state;
    Snapshot v[4];
    v[0] = mk_h(SNAP_FULL, 0, 100, 1, HA);
    v[1] = mk_h(SNAP_INCR, 101, 110, 2, "");
    v[2] = mk_h(SNAP_INCR, 111, 120, 3, HB);
    v[3] = mk_h(SNAP_INCR, 111, 130, 4, "");
    snapname_sort(v, 4);
    ptrdiff_t full;
    size_t idx[4], nd;
    char got[128];
    snapname_latest_set(v, 4, &full, idx, &nd);
    set_str(v, full, idx, nd, got, sizeof got);
    assert_string_equal(got, "F100 110 130");
}

static void test_latest_set_takes_every_delta_after_an_untagged_full(void **state) {
    (void)state;
    Snapshot v[5];
    v[0] = mk_h(SNAP_FULL, 0, 90, 1, HB);
    v[1] = mk_h(SNAP_FULL, 0, 100, 2, "");
    v[2] = mk_h(SNAP_INCR, 101, 110, 3, HA);
    v[3] = mk_h(SNAP_INCR, 111, 120, 4, "");
    v[4] = mk_h(SNAP_INCR, 121, 130, 5, HB);
    snapname_sort(v, 5);
    ptrdiff_t full;
    size_t idx[5], nd;
    char got[128];
    snapname_latest_set(v, 5, &full, idx, &nd);
    set_str(v, full, idx, nd, got, sizeof got);
    assert_string_equal(got, "F100 110 120 130");
    assert_string_equal(v[full].history, "");
}

/* ---------- Local store ---------- */

static void test_local_write_commit_list_read_back(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "etcd-main");
    char want[200000];
    for (size_t i = 0; i < sizeof want; i++)
        want[i] = (char)(i * 31 + 7);
    char name[128];
    assert_int_equal(snapname_format(SNAP_FULL, 0, 190, 1795974943, ".gz", 0, name, sizeof name),
                     0);
    put_object(s, name, want, sizeof want);

    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/etcd-main/v2/%s", dir, name);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(path, sizeof path, "%s/etcd-main/v2", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(count_entries(path, NULL), 1);

    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].size, (int64_t)sizeof want);
    assert_int_equal(v[0].last_revision, 190);
    assert_string_equal(v[0].snap_name, name);
    char *got = malloc(sizeof want + 10);
    assert_int_equal(read_all(s, &v[0], got, sizeof want + 10), sizeof want);
    assert_memory_equal(got, want, sizeof want);
    free(got);

    char desc[PATH_MAX];
    snprintf(desc, sizeof desc, "Local:%s/etcd-main", dir);
    assert_string_equal(store_describe(s), desc);

    assert_int_equal(store_remove(s, &v[0]), 0);
    assert_int_equal(store_remove(s, &v[0]), ERR_NOT_FOUND);
    free(v);
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 0);
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_abort_leaves_nothing(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "");
    StoreWriter *w = NULL;
    assert_int_equal(store_open_write(s, "Full-00000000-00000005-1700000000", &w), 0);
    assert_int_equal(io_write(store_writer_io(w), "hello", 5), 0);
    store_writer_abort(w);
    store_writer_abort(NULL);
    char v2[PATH_MAX];
    snprintf(v2, sizeof v2, "%s/v2", dir);
    assert_int_equal(count_entries(v2, NULL), 0);
    Snapshot *v = NULL;
    size_t n = 9;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 0);
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_write_in_progress_is_not_listed(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "");
    StoreWriter *w = NULL;
    assert_int_equal(store_open_write(s, "Incr-00000001-00000005-1700000000.gz", &w), 0);
    assert_int_equal(io_write(store_writer_io(w), "partial", 7), 0);
    char v2[PATH_MAX];
    snprintf(v2, sizeof v2, "%s/v2", dir);
    assert_int_equal(count_entries(v2, ".etcdbr-tmp-"), 1);
    Snapshot *v = NULL;
    size_t n = 9;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 0);
    free(v);
    assert_int_equal(store_writer_commit(w), 0);
    assert_int_equal(count_entries(v2, ".etcdbr-tmp-"), 0);
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].size, 7);
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_refuses_overwrite(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "p");
    const char *name = "Full-00000000-00000005-1700000000";
    put_object(s, name, "first", 5);
    StoreWriter *w = NULL;
    assert_int_equal(store_open_write(s, name, &w), ERR_EXISTS);
    assert_null(w);
    assert_non_null(strstr(err_msg(), name));

    /* two writers racing for one name: the second commit loses and leaves no temp file */
    const char *name2 = "Incr-00000006-00000009-1700000001";
    StoreWriter *a = NULL, *b = NULL;
    assert_int_equal(store_open_write(s, name2, &a), 0);
    assert_int_equal(store_open_write(s, name2, &b), 0);
    assert_int_equal(io_write(store_writer_io(a), "AAAA", 4), 0);
    assert_int_equal(io_write(store_writer_io(b), "BB", 2), 0);
    assert_int_equal(store_writer_commit(a), 0);
    assert_int_equal(store_writer_commit(b), ERR_EXISTS);
    char v2[PATH_MAX];
    snprintf(v2, sizeof v2, "%s/p/v2", dir);
    assert_int_equal(count_entries(v2, NULL), 2);

    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 2);
    char buf[16];
    assert_int_equal(read_all(s, &v[0], buf, sizeof buf), 5);
    assert_memory_equal(buf, "first", 5);
    assert_int_equal(read_all(s, &v[1], buf, sizeof buf), 4);
    assert_memory_equal(buf, "AAAA", 4);
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_write_rejects_names_that_would_not_list(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "p");
    StoreWriter *w = NULL;
    const char *bad[] = {"",
                         "README.txt",
                         "Full-abc",
                         "../Full-00000000-00000005-1700000000",
                         "x/Full-00000000-00000005-1700000000",
                         "Full-00000000-00000005-1700000000..gz"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(store_open_write(s, bad[i], &w), ERR_INVALID);
        assert_null(w);
    }
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_skips_foreign_files(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "");
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/v2/README.txt", dir);
    write_raw(p, "hi", 2);
    snprintf(p, sizeof p, "%s/v2/Full-abc", dir);
    write_raw(p, "x", 1);
    snprintf(p, sizeof p, "%s/v2/.hidden-Full-00000000-00000001-1", dir);
    write_raw(p, "x", 1);
    snprintf(p, sizeof p, "%s/v2/.etcdbr-tmp-abcdef", dir);
    write_raw(p, "x", 1);
    snprintf(p, sizeof p, "%s/README.md", dir); /* outside v1/v2: never even looked at */
    write_raw(p, "x", 1);
    snprintf(p, sizeof p, "%s/v2/Full-00000000-00000009-1700000000.gz", dir);
    write_raw(p, "", 0); /* 0 bytes but a valid name: listed, callers decide */
    snprintf(p, sizeof p, "%s/v2/Incr-00000010-00000012-1700000001.gz/0000000001", dir);
    write_raw(p, "chunk", 5);
    snprintf(p, sizeof p, "%s/v1/Backup-1700000000/Full-00000000-00000003-1700000000", dir);
    write_raw(p, "old", 3);
    snprintf(p, sizeof p, "%s/v1/notes.txt", dir);
    write_raw(p, "x", 1);
    snprintf(p, sizeof p, "%s/v1/Backup-1700000000/a/b/c/Full-00000000-00000004-1", dir);
    write_raw(p, "deep", 4); /* below the deepest layout: not reached */
    snprintf(p, sizeof p, "%s/v2/emptydir", dir);
    assert_int_equal(fs_mkdir_p(p, 0700), 0);

    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(v[0].last_revision, 3);
    assert_int_equal(v[0].version, 1);
    assert_int_equal(v[0].size, 3);
    assert_int_equal(v[1].last_revision, 9);
    assert_int_equal(v[1].size, 0);
    assert_int_equal(v[2].last_revision, 12);
    assert_int_equal(v[2].is_chunk, 1);
    assert_int_equal(v[2].size, 5);

    /* removing the chunk prunes its now-empty directory; removing the v1 object its Backup dir */
    assert_int_equal(store_remove(s, &v[2]), 0);
    snprintf(p, sizeof p, "%s/v2/Incr-00000010-00000012-1700000001.gz", dir);
    assert_false(fs_exists(p));
    assert_int_equal(store_remove(s, &v[0]), 0);
    snprintf(p, sizeof p, "%s/v1/Backup-1700000000", dir);
    assert_true(fs_exists(p)); /* still holds the deep junk: not removed */
    free(v);
    /* the foreign files are still there: listing never deletes */
    snprintf(p, sizeof p, "%s/v2/README.txt", dir);
    assert_true(fs_exists(p));
    snprintf(p, sizeof p, "%s/v2/Full-abc", dir);
    assert_true(fs_exists(p));
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_remove_v1_prunes_empty_backup_dir(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "etcd-main");
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/etcd-main/v1/Backup-1700000000/Full-00000000-00000003-1700000000",
             dir);
    write_raw(p, "full", 4);
    snprintf(p, sizeof p, "%s/etcd-main/v1/Backup-1700000000/Incr-00000004-00000005-1700000001",
             dir);
    write_raw(p, "incr", 4);
    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 2);
    snprintf(p, sizeof p, "%s/etcd-main/v1/Backup-1700000000", dir);
    assert_int_equal(store_remove(s, &v[1]), 0);
    assert_true(fs_exists(p));
    assert_int_equal(store_remove(s, &v[0]), 0);
    assert_false(fs_exists(p));
    snprintf(p, sizeof p, "%s/etcd-main/v1", dir);
    assert_true(fs_exists(p)); /* the version directory stays */
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

/* §15.1 through the whole store: a prefix containing "v1/" still lists its v2 snapshots. */
static void test_local_prefix_containing_v1_lists_v2_objects(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "shoot--dev1/etcd-main");
    put_object(s, "Full-00000000-00000190-1795974943.gz", "f", 1);
    put_object(s, "Incr-00000191-00000202-1795974945.gz", "i", 1);
    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(v[0].kind, SNAP_FULL);
    assert_int_equal(v[0].version, 2);
    assert_int_equal(v[0].is_chunk, 0);
    assert_string_equal(v[0].key, "shoot--dev1/etcd-main/v2/Full-00000000-00000190-1795974943.gz");
    assert_int_equal(v[1].kind, SNAP_INCR);
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

/* §15.2: stores with prefixes "etcd-main" and "etcd-main-x" in one container stay apart. */
static void test_local_prefixes_sharing_a_string_prefix_stay_apart(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *a = open_local(dir, "etcd-main");
    Store *b = open_local(dir, "/etcd-main-x//");
    put_object(a, "Full-00000000-00000010-1700000000", "a", 1);
    put_object(b, "Full-00000000-00000020-1700000000", "b", 1);
    put_object(b, "Incr-00000021-00000030-1700000001", "b", 1);
    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(a, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].last_revision, 10);
    free(v);
    assert_int_equal(store_list(b, &v, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].key, "etcd-main-x/v2/Full-00000000-00000020-1700000000");
    free(v);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/etcd-main-x/v2/Full-00000000-00000020-1700000000", dir);
    assert_true(fs_exists(p));
    store_free(a);
    store_free(b);
    rm_tmpdir(dir);
}

static const char *source_dir(void) {
    const char *d = getenv("ETCDBR_SOURCE_DIR");
    return d && d[0] ? d : ".";
}

static void check_fixture(const char *fixture, int want_version, const char *want_suffix) {
    char rel[PATH_MAX], abs[PATH_MAX];
    snprintf(rel, sizeof rel, "%s/tests/fixtures/%s/store", source_dir(), fixture);
    if (!realpath(rel, abs)) fail_msg("fixture %s not found (set ETCDBR_SOURCE_DIR)", rel);
    Store *s = open_local(abs, "");
    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 5);
    ptrdiff_t full;
    size_t idx[5], nd;
    snapname_latest_set(v, n, &full, idx, &nd);
    assert_int_equal(full, 0);
    assert_int_equal(nd, 4);
    const int64_t want[5][2] = {{0, 190}, {191, 202}, {203, 207}, {208, 210}, {211, 216}};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(v[i].kind, i == 0 ? SNAP_FULL : SNAP_INCR);
        assert_int_equal(v[i].start_revision, want[i][0]);
        assert_int_equal(v[i].last_revision, want[i][1]);
        assert_int_equal(v[i].version, want_version);
        assert_string_equal(v[i].compression_suffix, want_suffix);
        assert_int_equal(v[i].is_chunk, 0);
        assert_int_equal(v[i].is_final, 0);
        assert_true(v[i].size > 0);
        if (i > 0) assert_int_equal(idx[i - 1], i);
    }
    /* read one object back byte for byte */
    char path[PATH_MAX + sizeof v[4].key];
    snprintf(path, sizeof path, "%s/%s", abs, v[4].key);
    int64_t size = fs_file_size(path);
    assert_int_equal(size, v[4].size);
    char *buf = malloc((size_t)size + 1), *raw = malloc((size_t)size + 1);
    assert_int_equal(read_all(s, &v[4], buf, (size_t)size + 1), (size_t)size);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(raw, 1, (size_t)size + 1, f), (size_t)size);
    fclose(f);
    assert_memory_equal(buf, raw, (size_t)size);
    free(buf);
    free(raw);
    free(v);
    store_free(s);
}

static void test_local_lists_go_fixtures(void **state) {
    (void)state;
    check_fixture("seed-plain", 2, "");
    check_fixture("seed-gzip", 2, ".gz");
    check_fixture("seed-zlib", 2, ".zlib");
    check_fixture("seed-lzw", 2, ".Z");
    check_fixture("seed-v1-mixed", 1, ".gz");
}

static void test_local_relative_container_is_under_home(void **state) {
    (void)state;
    char *home = make_tmpdir();
    char *old = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char *old_sc = getenv("STORAGE_CONTAINER") ? strdup(getenv("STORAGE_CONTAINER")) : NULL;
    setenv("HOME", home, 1);

    Store *s = open_local("backups/etcd", "etcd-main");
    char want[PATH_MAX];
    snprintf(want, sizeof want, "Local:%s/backups/etcd/etcd-main", home);
    assert_string_equal(store_describe(s), want);
    snprintf(want, sizeof want, "%s/backups/etcd", home);
    struct stat st;
    /* opening does not create the root; the first write does, private */
    assert_int_equal(stat(want, &st), -1);
    put_object(s, "Full-00000000-00000001-1700000000", "x", 1);
    assert_int_equal(stat(want, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(want, sizeof want, "%s/backups/etcd/etcd-main/v2/Full-00000000-00000001-1700000000",
             home);
    assert_true(fs_exists(want));
    store_free(s);

    /* no container: $STORAGE_CONTAINER, else "default.bkp" */
    unsetenv("STORAGE_CONTAINER");
    s = open_local(NULL, "");
    snprintf(want, sizeof want, "Local:%s/default.bkp", home);
    assert_string_equal(store_describe(s), want);
    store_free(s);
    setenv("STORAGE_CONTAINER", "from-env", 1);
    s = open_local("", "");
    snprintf(want, sizeof want, "Local:%s/from-env", home);
    assert_string_equal(store_describe(s), want);
    store_free(s);

    /* no usable HOME for a relative container */
    unsetenv("HOME");
    StoreConfig cfg = {.provider = "Local", .container = "rel", .prefix = "", .temp_dir = NULL};
    Store *bad = NULL;
    assert_int_equal(store_open(&cfg, &bad), ERR_INVALID);
    assert_null(bad);
    assert_non_null(strstr(err_msg(), "HOME"));

    if (old) setenv("HOME", old, 1);
    if (old_sc)
        setenv("STORAGE_CONTAINER", old_sc, 1);
    else
        unsetenv("STORAGE_CONTAINER");
    free(old);
    free(old_sc);
    rm_tmpdir(home);
}

static void test_store_open_rejects_bad_config(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = NULL;
    /* every provider the Go tool knows has a driver now (OSS was the last): an unknown name is
     * refused, naming it */
    StoreConfig cfg = {
        .provider = "Dropbox", .container = "bucket", .prefix = "p", .temp_dir = NULL};
    assert_int_equal(store_open(&cfg, &s), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "Dropbox"));
    cfg.provider = "";
    cfg.container = dir;
    cfg.prefix = "a/../b";
    assert_int_equal(store_open(&cfg, &s), ERR_INVALID);
    assert_null(s);
    cfg.prefix = "./a//b/";
    assert_int_equal(store_open(&cfg, &s), 0);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "Local:%s/a/b", dir);
    assert_string_equal(store_describe(s), want);
    store_free(s);
    store_free(NULL);
    rm_tmpdir(dir);
}

/* ---------- history records and tags in a Local store ---------- */

/* Writes name into s after tagging it with hist ("" = untagged), as the snapshotter does. */
static void put_tagged(Store *s, const char *hist, const char *name) {
    if (hist[0]) assert_int_equal(store_history_tag(s, hist, name), 0);
    put_object(s, name, name, strlen(name));
}

static HistoryRecord mk_rec(const char *id, uint64_t cluster, const char *reason) {
    HistoryRecord r;
    memset(&r, 0, sizeof r);
    snprintf(r.id, sizeof r.id, "%s", id);
    r.cluster_id = cluster;
    r.member_id = 7;
    r.created_s = 1700000000;
    snprintf(r.reason, sizeof r.reason, "%s", reason);
    return r;
}

static const Snapshot *by_name(const Snapshot *v, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].snap_name, name) == 0) return &v[i];
    return NULL;
}

#define HF100 "Full-00000000-00000100-1700000000.gz"
#define HI150 "Incr-00000101-00000150-1700000100.gz"
#define HI200 "Incr-00000151-00000200-1700000200.gz"
#define HF150 "Full-00000000-00000150-1700000500.gz"
#define HI170 "Incr-00000151-00000170-1700000600.gz"
#define HF50 "Full-00000000-00000050-1600000000.gz"

/* HA: F100 I150 I200; HB (a fork at 150): F150 I170; untagged: F50. */
static void fill_histories(Store *s) {
    assert_int_equal(store_history_put_record(s, &(HistoryRecord){0}), ERR_INVALID);
    HistoryRecord a = mk_rec(HA, 0xc1, "new");
    HistoryRecord b = mk_rec(HB, 0xc1, "fork");
    b.n_abandons = 1;
    snprintf(b.abandons[0].history, sizeof b.abandons[0].history, "%s", HA);
    b.abandons[0].after_revision = 150;
    assert_int_equal(store_history_put_record(s, &a), 0);
    assert_int_equal(store_history_put_record(s, &b), 0);
    put_tagged(s, "", HF50);
    put_tagged(s, HA, HF100);
    put_tagged(s, HA, HI150);
    put_tagged(s, HA, HI200);
    put_tagged(s, HB, HF150);
    put_tagged(s, HB, HI170);
}

static void test_local_list_ex_annotates_histories_and_drops_abandoned(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "etcd-main");
    fill_histories(s);

    Snapshot *v = NULL;
    size_t n = 0;
    HistoryRecord *recs = NULL;
    size_t nr = 0;
    assert_int_equal(store_list_ex(s, 1, &v, &n, &recs, &nr), 0);
    assert_int_equal(n, 6);
    assert_string_equal(by_name(v, n, HF50)->history, "");
    assert_string_equal(by_name(v, n, HF100)->history, HA);
    assert_string_equal(by_name(v, n, HI150)->history, HA);
    assert_string_equal(by_name(v, n, HI200)->history, HA);
    assert_string_equal(by_name(v, n, HF150)->history, HB);
    assert_string_equal(by_name(v, n, HI170)->history, HB);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i].abandoned, strcmp(v[i].snap_name, HI200) == 0);
    assert_int_equal(nr, 2);
    const HistoryRecord *ra = history_find(recs, nr, HA), *rb = history_find(recs, nr, HB);
    assert_non_null(ra);
    assert_non_null(rb);
    assert_int_equal(ra->cluster_id, 0xc1);
    assert_int_equal(ra->member_id, 7);
    assert_string_equal(ra->reason, "new");
    assert_int_equal(ra->n_abandons, 0);
    assert_int_equal(ra->effective, 1);
    assert_string_equal(rb->reason, "fork");
    assert_int_equal(rb->n_abandons, 1);
    assert_string_equal(rb->abandons[0].history, HA);
    assert_int_equal(rb->abandons[0].after_revision, 150);
    assert_int_equal(rb->effective, 1);
    free(v);
    free(recs);

    /* without include_abandoned (and as store_list): HA's I200 is left out */
    for (int k = 0; k < 2; k++) {
        v = NULL;
        n = 0;
        if (k == 0)
            assert_int_equal(store_list_ex(s, 0, &v, &n, NULL, NULL), 0);
        else
            assert_int_equal(store_list(s, &v, &n), 0);
        assert_int_equal(n, 5);
        assert_null(by_name(v, n, HI200));
        assert_non_null(by_name(v, n, HI150));
        for (size_t i = 0; i < n; i++)
            assert_int_equal(v[i].abandoned, 0);
        free(v);
    }
    /* the abandoned object is kept in the store */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/etcd-main/v2/" HI200, dir);
    assert_true(fs_exists(p));
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_history_untag_removes_the_tag(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "etcd-main");
    put_tagged(s, HA, HF100);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/etcd-main/etcdbr/history/" HA "/" HF100, dir);
    assert_true(fs_exists(p));
    Snapshot *v = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].history, HA);
    assert_int_equal(store_history_untag(s, &v[0]), 0);
    assert_false(fs_exists(p));
    assert_int_equal(store_history_untag(s, &v[0]), 0); /* already gone: success */
    free(v);
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].history, "");
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_history_tags_and_records_are_not_snapshots(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, ""); /* tags at etcdbr/history/..., beside v1/ and v2/ */
    HistoryRecord a = mk_rec(HA, 0xc1, "new");
    assert_int_equal(store_history_put_record(s, &a), 0);
    assert_int_equal(store_history_tag(s, HA, HF100), 0);
    assert_int_equal(store_history_tag(s, HA, HI150), 0); /* a tag without its object (yet) */
    assert_int_equal(store_history_tag(s, HA, HF100), 0); /* an existing tag is success */
    assert_int_equal(store_history_tag(s, "nothex", HF100), ERR_INVALID);
    assert_int_equal(store_history_tag(s, HA, "a/b"), ERR_INVALID);
    /* an existing record is success and is not replaced */
    HistoryRecord again = mk_rec(HA, 0xc2, "takeover");
    assert_int_equal(store_history_put_record(s, &again), 0);
    Snapshot *v = NULL;
    size_t n = 0;
    HistoryRecord *recs = NULL;
    size_t nr = 0;
    assert_int_equal(store_list_ex(s, 1, &v, &n, &recs, &nr), 0);
    assert_int_equal(n, 0);
    assert_null(v);
    assert_int_equal(nr, 1);
    assert_int_equal(recs[0].cluster_id, 0xc1);
    assert_string_equal(recs[0].reason, "new");
    assert_int_equal(recs[0].effective, 0); /* no object stored yet */
    free(recs);
    put_object(s, HF100, "x", 1);
    assert_int_equal(store_list(s, &v, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].key, "v2/" HF100);
    assert_string_equal(v[0].history, HA);
    free(v);
    store_free(s);
    rm_tmpdir(dir);
}

static void test_local_list_ex_skips_a_malformed_record(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    Store *s = open_local(dir, "etcd-main");
    fill_histories(s);
    char p[PATH_MAX];
    /* HB's record overwritten with junk: its abandons no longer apply */
    snprintf(p, sizeof p, "%s/etcd-main/etcdbr/history/" HB "/record.json", dir);
    write_raw(p, "{\"history\":", 11);
    /* a record in the wrong directory names another history */
    snprintf(p, sizeof p, "%s/etcd-main/etcdbr/history/cccccccccccccccc/record.json", dir);
    HistoryRecord a = mk_rec(HA, 0xc2, "new");
    char *json = NULL;
    size_t len = 0;
    assert_int_equal(history_record_format(&a, &json, &len), 0);
    write_raw(p, json, len);
    free(json);
    Snapshot *v = NULL;
    size_t n = 0;
    HistoryRecord *recs = NULL;
    size_t nr = 0;
    assert_int_equal(store_list_ex(s, 1, &v, &n, &recs, &nr), 0);
    assert_int_equal(n, 6);
    assert_int_equal(nr, 1);
    assert_string_equal(recs[0].id, HA);
    assert_int_equal(recs[0].cluster_id, 0xc1);
    /* the tags still count */
    assert_string_equal(by_name(v, n, HF150)->history, HB);
    assert_string_equal(by_name(v, n, HI200)->history, HA);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i].abandoned, 0);
    free(v);
    free(recs);
    store_free(s);
    rm_tmpdir(dir);
}

/* A Local driver behind a wrapper that counts list calls and declares itself not thread-safe;
 * it fails the test if two calls are ever inside it at once (the generic layer must serialize a
 * driver without STORE_FEAT_THREAD_SAFE). */
typedef struct {
    StoreDriver base;
    StoreDriver *inner;
    StoreDriverVt vt;
    atomic_int inside, lists, overlaps;
} CountDrv;

static void cd_enter(CountDrv *c) {
    if (atomic_fetch_add(&c->inside, 1) != 0) atomic_fetch_add(&c->overlaps, 1);
    usleep(200); /* widen the window in which an overlap would be seen */
}
static void cd_leave(CountDrv *c) {
    atomic_fetch_sub(&c->inside, 1);
}
static int cd_list(StoreDriver *d, const char *p, StoreDriverListCb cb, void *ctx) {
    CountDrv *c = (CountDrv *)d;
    cd_enter(c);
    atomic_fetch_add(&c->lists, 1);
    int rc = c->inner->vt->list(c->inner, p, cb, ctx);
    cd_leave(c);
    return rc;
}
static int cd_open_read(StoreDriver *d, const char *key, uint64_t off, IoReader **out) {
    CountDrv *c = (CountDrv *)d;
    cd_enter(c);
    int rc = c->inner->vt->open_read(c->inner, key, off, out);
    cd_leave(c);
    return rc;
}
static int cd_open_write(StoreDriver *d, const char *key, StoreDriverWriter **out) {
    CountDrv *c = (CountDrv *)d;
    cd_enter(c);
    int rc = c->inner->vt->open_write(c->inner, key, out);
    cd_leave(c);
    return rc;
}
static int cd_remove(StoreDriver *d, const char *key) {
    CountDrv *c = (CountDrv *)d;
    cd_enter(c);
    int rc = c->inner->vt->remove(c->inner, key);
    cd_leave(c);
    return rc;
}
static int cd_stat(StoreDriver *d, const char *key, int64_t *size) {
    CountDrv *c = (CountDrv *)d;
    cd_enter(c);
    int rc = c->inner->vt->stat(c->inner, key, size);
    cd_leave(c);
    return rc;
}
static const char *cd_describe(const StoreDriver *d) {
    const CountDrv *c = (const CountDrv *)d;
    return c->inner->vt->describe(c->inner);
}
static void cd_free(StoreDriver *d) {
    CountDrv *c = (CountDrv *)d;
    store_driver_free(c->inner);
    free(c);
}

static Store *open_counting(const char *dir, CountDrv **out) {
    StoreDriver *local = NULL;
    assert_int_equal(store_local_driver_new(dir, &local), 0);
    CountDrv *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->inner = local;
    c->vt = *local->vt;
    c->vt.features = 0; /* not thread-safe, no directories */
    c->vt.remove_dir = NULL;
    c->vt.list = cd_list;
    c->vt.open_read = cd_open_read;
    c->vt.open_write = cd_open_write;
    c->vt.remove = cd_remove;
    c->vt.stat = cd_stat;
    c->vt.describe = cd_describe;
    c->vt.free = cd_free;
    c->base.vt = &c->vt;
    Store *s = NULL;
    assert_int_equal(store_new_with_driver(&c->base, "p", &s), 0);
    *out = c;
    return s;
}

/* Pinned, several listings cost one (its driver list calls: v2/, v1/ and the history tags); a
 * write drops the pinned listing; unpinned, every call lists. */
static void test_pinned_listing_lists_the_store_once(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    CountDrv *c = NULL;
    Store *s = open_counting(dir, &c);
    put_object(s, "Full-00000000-00000010-1700000000", "a", 1);
    put_object(s, "Incr-00000011-00000012-1700000001", "b", 1);
    Snapshot *l = NULL;
    size_t n = 0;
    assert_int_equal(store_list(s, &l, &n), 0);
    free(l);
    int per_listing = atomic_load(&c->lists);
    assert_true(per_listing >= 2);
    store_pin_listing(s);
    atomic_store(&c->lists, 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(store_list(s, &l, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(l[1].snap_name, "Incr-00000011-00000012-1700000001");
        free(l);
    }
    HistoryRecord *recs = NULL;
    size_t nr = 0;
    assert_int_equal(store_list_ex(s, 1, &l, &n, &recs, &nr), 0);
    assert_int_equal(n, 2);
    free(l);
    free(recs);
    assert_int_equal(atomic_load(&c->lists), per_listing);
    put_object(s, "Incr-00000013-00000014-1700000002", "c", 1); /* drops the pinned listing */
    assert_int_equal(store_list(s, &l, &n), 0);
    assert_int_equal(n, 3);
    free(l);
    assert_int_equal(atomic_load(&c->lists), 2 * per_listing);
    store_unpin_listing(s);
    atomic_store(&c->lists, 0);
    assert_int_equal(store_list(s, &l, &n), 0);
    free(l);
    assert_int_equal(store_list(s, &l, &n), 0);
    free(l);
    assert_int_equal(atomic_load(&c->lists), 2 * per_listing);
    store_free(s);
    fs_remove_tree(dir);
    free(dir);
}

static void *list_many(void *arg) {
    Store *s = arg;
    for (int i = 0; i < 20; i++) {
        Snapshot *l = NULL;
        size_t n = 0;
        if (store_list(s, &l, &n) != 0 || n != 2) return (void *)1;
        free(l);
    }
    return NULL;
}

/* A driver without STORE_FEAT_THREAD_SAFE is never entered by two threads at once. */
static void test_driver_without_thread_safe_bit_is_serialized(void **state) {
    (void)state;
    char *dir = make_tmpdir();
    CountDrv *c = NULL;
    Store *s = open_counting(dir, &c);
    put_object(s, "Full-00000000-00000010-1700000000", "a", 1);
    put_object(s, "Incr-00000011-00000012-1700000001", "b", 1);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, list_many, s), 0);
    for (int i = 0; i < 4; i++) {
        void *ret = NULL;
        pthread_join(t[i], &ret);
        assert_null(ret);
    }
    assert_int_equal(atomic_load(&c->overlaps), 0);
    assert_true(atomic_load(&c->lists) >= 4 * 20 * 2);
    store_free(s);
    fs_remove_tree(dir);
    free(dir);
}

int main(void) {
    log_setup(LOG_ERROR, 0); /* the foreign-file tests would otherwise print skip warnings */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope_names_endpoint_and_credentials),
        cmocka_unit_test(test_format_pads_revisions_to_8_digits),
        cmocka_unit_test(test_format_writes_wider_revisions_in_full),
        cmocka_unit_test(test_format_rejects_bad_input),
        cmocka_unit_test(test_format_then_parse_round_trips),
        cmocka_unit_test(test_parse_v2_plain),
        cmocka_unit_test(test_parse_v1_backup_layout),
        cmocka_unit_test(test_parse_suffix_combinations),
        cmocka_unit_test(test_parse_encrypted_names),
        cmocka_unit_test(test_store_name_suffix_follows_keyring),
        cmocka_unit_test(test_parse_chunks),
        cmocka_unit_test(test_parse_rejects_bad_names),
        cmocka_unit_test(test_parse_rejects_v1_backup_dir_as_name),
        cmocka_unit_test(test_parse_rejects_missing_version),
        cmocka_unit_test(test_parse_prefix_containing_v1_finds_v2),
        cmocka_unit_test(test_parse_prefix_is_a_path_component),
        cmocka_unit_test(test_parse_rejects_too_long_key),
        cmocka_unit_test(test_sort_is_numeric_by_last_revision),
        cmocka_unit_test(test_sort_ignores_creation_time_except_for_ties),
        cmocka_unit_test(test_latest_set_takes_deltas_after_newest_full),
        cmocka_unit_test(test_latest_set_full_only_and_newest_full_last),
        cmocka_unit_test(test_latest_set_without_full_returns_all_deltas),
        cmocka_unit_test(test_latest_set_leaves_out_deltas_of_another_history_after_a_tagged_full),
        cmocka_unit_test(test_latest_set_takes_untagged_deltas_after_a_tagged_full),
        cmocka_unit_test(test_latest_set_takes_every_delta_after_an_untagged_full),
        cmocka_unit_test(test_local_write_commit_list_read_back),
        cmocka_unit_test(test_local_abort_leaves_nothing),
        cmocka_unit_test(test_local_write_in_progress_is_not_listed),
        cmocka_unit_test(test_local_refuses_overwrite),
        cmocka_unit_test(test_local_write_rejects_names_that_would_not_list),
        cmocka_unit_test(test_local_skips_foreign_files),
        cmocka_unit_test(test_local_remove_v1_prunes_empty_backup_dir),
        cmocka_unit_test(test_local_prefix_containing_v1_lists_v2_objects),
        cmocka_unit_test(test_local_prefixes_sharing_a_string_prefix_stay_apart),
        cmocka_unit_test(test_local_lists_go_fixtures),
        cmocka_unit_test(test_local_relative_container_is_under_home),
        cmocka_unit_test(test_store_open_rejects_bad_config),
        cmocka_unit_test(test_local_list_ex_annotates_histories_and_drops_abandoned),
        cmocka_unit_test(test_local_history_untag_removes_the_tag),
        cmocka_unit_test(test_local_history_tags_and_records_are_not_snapshots),
        cmocka_unit_test(test_local_list_ex_skips_a_malformed_record),
        cmocka_unit_test(test_pinned_listing_lists_the_store_once),
        cmocka_unit_test(test_driver_without_thread_safe_bit_is_serialized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
