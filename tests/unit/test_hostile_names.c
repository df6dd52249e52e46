/* test_hostile_names: object names from a store listing are hostile. Seeded random hostile keys
 * are refused by the Local driver's key check (traversal, absolute paths, backslashes, control
 * characters, over-long components and keys); a symlink planted in a Local store folder is never
 * followed by a listing, a write or a removal; snapname_parse refuses hostile snapshot names
 * (overflow, signs, trailing garbage, unknown kinds) and every name it accepts round-trips
 * through snapname_format; the log escapes control characters and invalid UTF-8 so a name
 * cannot forge a log line. The seed is printed; ETCDBR_TEST_SEED replays it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "store/objhttp.h"
#include "store/snapname.h"
#include "store/store.h"
#include "store/store_driver.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 2000

static unsigned seed;

static unsigned rnd(unsigned n) {
    return (unsigned)rand() % n;
}

static char *make_tmpdir(void) {
    char tmpl[] = "/tmp/etcdbr-test-names-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

/* A random key that holds at least one hostile element somewhere among plain components. */
static void hostile_key(char *out, size_t cap) {
    static const char *const bad[] = {"..",   ".",  "",     "a\\b", "\\",       "x\x1b[31m",
                                      "a\nb", "\r", "\x7f", "\x01", "tab\there"};
    char plain[8];
    size_t n = 0;
    unsigned parts = 1 + rnd(4), at = rnd(parts);
    int lead_slash = rnd(4) == 0;
    if (lead_slash) out[n++] = '/';
    for (unsigned i = 0; i < parts; i++) {
        const char *c;
        char longc[NAME_MAX + 8];
        if (i == at && !lead_slash) {
            unsigned k = rnd(sizeof bad / sizeof bad[0] + 1);
            if (k == sizeof bad / sizeof bad[0]) {
                size_t ln = NAME_MAX + 1 + rnd(5);
                memset(longc, 'a', ln);
                longc[ln] = '\0';
                c = longc;
            } else {
                c = bad[k];
            }
        } else {
            snprintf(plain, sizeof plain, "v%u", rnd(100));
            c = plain;
        }
        n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? "/" : "", c);
    }
    out[n < cap ? n : cap - 1] = '\0';
}

static void test_local_key_check_refuses_hostile_keys(void **state) {
    (void)state;
    char key[1024];
    for (int i = 0; i < ROUNDS; i++) {
        hostile_key(key, sizeof key);
        if (store_local_key_valid(key, 0))
            fail_msg("seed %u round %d: key \"%s\" accepted", seed, i, key);
    }
    /* a key longer than PATH_MAX / 2 made of short, valid components */
    char *lk = malloc(PATH_MAX + 2);
    assert_non_null(lk);
    for (size_t i = 0; i < PATH_MAX; i++)
        lk[i] = (i % 8 == 7) ? '/' : 'k';
    lk[PATH_MAX] = '\0';
    assert_false(store_local_key_valid(lk, 0));
    free(lk);
    assert_true(store_local_key_valid("p/v2/Full-00000001-00000002-3", 0));
    assert_true(store_local_key_valid("p/v2/", 1));
}

/* Writes, lists and removals through the Local driver with hostile keys: refused, and nothing
 * appears outside the store folder. */
static void test_local_driver_refuses_hostile_keys(void **state) {
    (void)state;
    char *top = make_tmpdir();
    char *root = fs_join(top, "store/inner");
    StoreDriver *d = NULL;
    assert_int_equal(store_local_driver_new(root, &d), 0);
    char key[1024];
    for (int i = 0; i < 200; i++) {
        hostile_key(key, sizeof key);
        StoreDriverWriter *w = NULL;
        int rc = d->vt->open_write(d, key, &w);
        if (rc != ERR_INVALID) fail_msg("seed %u: write of \"%s\" gave %d", seed, key, rc);
        assert_null(w);
        assert_int_equal(d->vt->remove(d, key), ERR_INVALID);
    }
    /* nothing was created next to the store folder */
    char out[1024];
    snprintf(out, sizeof out, "%s/store", top);
    struct stat st;
    assert_int_not_equal(stat(out, &st) == 0 && !S_ISDIR(st.st_mode), 1);
    snprintf(out, sizeof out, "%s/v0", top);
    assert_int_not_equal(stat(out, &st), 0);
    d->vt->free(d);
    free(root);
    assert_int_equal(fs_remove_tree(top), 0);
    free(top);
}

#define VICTIM_NAME "Full-00000001-00000005-1700000000"

/* A store folder whose v2 directory is a symlink to a folder outside: the listing, a write and
 * the removal of an object named like the victim are refused; the victim survives. */
static void test_local_symlinked_dir_not_followed(void **state) {
    (void)state;
    char *top = make_tmpdir();
    char path[1200], root[512], outside[512];
    snprintf(root, sizeof root, "%s/store", top);
    snprintf(outside, sizeof outside, "%s/outside", top);
    assert_int_equal(fs_mkdir_p(root, 0700), 0);
    assert_int_equal(fs_mkdir_p(outside, 0700), 0);
    snprintf(path, sizeof path, "%s/" VICTIM_NAME, outside);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "precious", 8), 8);
    close(fd);
    snprintf(path, sizeof path, "%s/v2", root);
    assert_int_equal(symlink(outside, path), 0);

    StoreConfig cfg = {.provider = "Local", .container = root, .prefix = "", .temp_dir = "/tmp"};
    Store *s = NULL;
    assert_int_equal(store_open(&cfg, &s), 0);
    Snapshot *v = NULL;
    size_t n = 0;
    int rc = store_list(s, &v, &n);
    assert_int_not_equal(rc, 0); /* the link is named in the error, not followed */
    assert_non_null(strstr(err_msg(), "symlink"));
    free(v);
    Snapshot snap;
    assert_int_equal(store_snapshot_for_name(s, VICTIM_NAME, &snap), 0);
    assert_int_not_equal(store_remove(s, &snap), 0);
    StoreWriter *w = NULL;
    assert_int_not_equal(store_open_write(s, "Full-00000001-00000009-1700000001", &w), 0);
    assert_null(w);
    store_free(s);

    snprintf(path, sizeof path, "%s/" VICTIM_NAME, outside);
    size_t len = 0;
    assert_int_equal(fs_exists(path), 1);
    (void)len;
    snprintf(path, sizeof path, "%s/Full-00000001-00000009-1700000001", outside);
    assert_int_equal(fs_exists(path), 0);
    assert_int_equal(fs_remove_tree(top), 0);
    free(top);
}

/* ---------- snapname ---------- */

static void test_snapname_refuses_hostile_names(void **state) {
    (void)state;
    static const char *const bad[] = {
        "v2/Full-00000001-00000002-99999999999999999999",
        "v2/Full-00000001-9223372036854775808-3",
        "v2/Full-+1-2-3",
        "v2/Full-1-+2-3",
        "v2/Full-1-2-+3",
        "v2/Full- 1-2-3",
        "v2/Full-1-2-3 ",
        "v2/Full-1-2-3x",
        "v2/Full-1-2-3.gz/../../x",
        "v2/Full-1-2-3/../../../etc/passwd",
        "v2/../Full-1-2-3",
        "v2/Full-1-2-3.g\\z",
        "v2/Full-1-2-3.g\x1bz",
        "v2/Full-1-2-3.final.final",
        "v2/Full-1-2-3.enc.enc",
        "v2/Full-1-2-3.",
        "v2/Full-1-2-3..gz",
        "v2/Delta-1-2-3",
        "v2/full-1-2-3",
        "v2/FULL-1-2-3",
        "v2/Full-0x1-2-3",
        "v2/Full-1--2-3",
        "v2/Full-1-2--3",
        "v2/Full-2-1-3",
        "v2//Full-1-2-3",
        "/v2/Full-1-2-3",
        "v3/Full-1-2-3",
        "v1/Backup-12/../Full-1-2-3",
        "v1/Backup-x1/Full-1-2-3",
        "v1/Backup-/Full-1-2-3",
        "v2/Full-1-2-3/000000001",
        "v2/Full-1-2-3/00000000001",
        "v2/Full-1-2-3/00000000a1",
        "v2/Full-1-2-3.abcdefghijklmno",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Snapshot s;
        if (snapname_parse(bad[i], "", &s) == 0) fail_msg("accepted \"%s\"", bad[i]);
    }
}

/* Random names mutated from a valid one: whatever parses formats back to a name that parses to
 * the same fields, and a parsed name holds no path or control characters. */
static void test_snapname_mutations_round_trip(void **state) {
    (void)state;
    static const char alphabet[] = "0123456789-./\\+ FulIncrgzenc\x1b\n\x7f";
    char key[160], name[256], sfx[32];
    for (int i = 0; i < ROUNDS * 5; i++) {
        int n = snprintf(key, sizeof key, "v2/%s-%08u-%08u-%u%s", rnd(2) ? "Full" : "Incr",
                         rnd(1000), 1000 + rnd(1000), rnd(2000000000),
                         (const char *[]){"", ".gz", ".enc.zlib", ".final", ".enc"}[rnd(5)]);
        for (unsigned m = rnd(4); m > 0; m--) {
            size_t at = 3 + rnd((unsigned)(n - 3));
            char c = alphabet[rnd(sizeof alphabet - 1)];
            switch (rnd(3)) {
            case 0:
                key[at] = c;
                break;
            case 1:
                if (n + 1 < (int)sizeof key) {
                    memmove(key + at + 1, key + at, (size_t)(n - (int)at) + 1);
                    key[at] = c;
                    n++;
                }
                break;
            default:
                memmove(key + at, key + at + 1, (size_t)(n - (int)at));
                n--;
            }
        }
        Snapshot s, t;
        if (snapname_parse(key, "", &s) != 0) continue;
        for (const char *p = s.snap_name; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == '\\' || *p == 0x7f || *p == ' ')
                fail_msg("seed %u: \"%s\" parsed with a hostile character", seed, key);
        if (strstr(s.snap_name, "..")) fail_msg("seed %u: \"%s\" parsed with \"..\"", seed, key);
        assert_int_equal(snapname_suffix(s.encrypted, s.compression_suffix, sfx, sizeof sfx), 0);
        assert_int_equal(snapname_format(s.kind, s.start_revision, s.last_revision, s.created_on,
                                         sfx, s.is_final, name, sizeof name),
                         0);
        char key2[300];
        snprintf(key2, sizeof key2, "v2/%s", name);
        if (snapname_parse(key2, "", &t) != 0)
            fail_msg("seed %u: \"%s\" formatted as \"%s\", which does not parse", seed, key, name);
        assert_int_equal(t.kind, s.kind);
        assert_int_equal(t.start_revision, s.start_revision);
        assert_int_equal(t.last_revision, s.last_revision);
        assert_int_equal(t.created_on, s.created_on);
        assert_int_equal(t.encrypted, s.encrypted);
        assert_int_equal(t.is_final, s.is_final);
        assert_string_equal(t.compression_suffix, s.compression_suffix);
    }
}

/* A listed name with a raw NUL would be cut short into another, valid name: refused. */
static void test_xml_name_with_nul_refused(void **state) {
    (void)state;
    static const char name[] = "v2/Full-00000001-00000005-1700000000\0/../../evil";
    assert_null(objhttp_xml_text(name, sizeof name - 1));
    assert_null(objhttp_xml_text("v2/a&#0;b", 9));
    char *ok = objhttp_xml_text("v2/a&amp;b", 10);
    assert_string_equal(ok, "v2/a&b");
    free(ok);
}

/* ---------- log ---------- */

/* Logs msg with stderr redirected to a file; returns the bytes written (owned). */
static char *logged(const char *msg) {
    char tmpl[] = "/tmp/etcdbr-test-names-log-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    log_warn("skipping object %s", msg);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    char *buf = calloc(1, 65536);
    assert_non_null(buf);
    assert_true(pread(fd, buf, 65535, 0) > 0);
    close(fd);
    unlink(tmpl);
    return buf;
}

static void test_log_escapes_hostile_names(void **state) {
    (void)state;
    for (int json = 0; json <= 1; json++) {
        log_setup(LOG_INFO, json);
        static const char *const names[] = {"v2/Full-1\n time=\"x\" level=error msg=\"forged\"",
                                            "v2/\x1b[2J\x1b[31mred",
                                            "v2/del\x7f\x7f",
                                            "v2/c1\xc2\x9b"
                                            "31m",
                                            "v2/bad\xff\xfe utf8",
                                            "v2/cr\rhome",
                                            "v2/ok-\xc3\xa9\xe2\x82\xac"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            char *line = logged(names[i]);
            size_t len = strlen(line);
            assert_true(len > 0 && line[len - 1] == '\n');
            for (size_t k = 0; k + 1 < len; k++) {
                unsigned char c = (unsigned char)line[k];
                if (c < 0x20 || c == 0x7f || c == 0x9b || c == 0xff)
                    fail_msg("json=%d: raw byte 0x%02x at %zu in the line for name %zu: %s", json,
                             c, k, i, line);
            }
            free(line);
        }
        char *ok = logged("v2/ok-\xc3\xa9");
        assert_non_null(strstr(ok, "ok-\xc3\xa9")); /* valid UTF-8 is kept as is */
        free(ok);
    }
    log_setup(LOG_INFO, 0);
}

int main(void) {
    const char *env = getenv("ETCDBR_TEST_SEED");
    seed = env && env[0] ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    fprintf(stderr, "test_hostile_names: seed %u (ETCDBR_TEST_SEED=%u replays it)\n", seed, seed);
    srand(seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_key_check_refuses_hostile_keys),
        cmocka_unit_test(test_local_driver_refuses_hostile_keys),
        cmocka_unit_test(test_local_symlinked_dir_not_followed),
        cmocka_unit_test(test_snapname_refuses_hostile_names),
        cmocka_unit_test(test_snapname_mutations_round_trip),
        cmocka_unit_test(test_xml_name_with_nul_refused),
        cmocka_unit_test(test_log_escapes_hostile_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
