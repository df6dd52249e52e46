/* test_restore_fetch: the fetch stage of a restore (src/restore/restore_fetch.h) on a real
 * Local store holding objects written by the project's own writers
 * (support/restore_fixture.h): a plain full snapshot read where it lies, a compressed one
 * copied into the scratch dir and removed on release, a truncated or damaged full snapshot or
 * delta refused with an error naming the object, a full snapshot whose db does not hold the
 * revision its name says refused, and the pool handing over every delta in order with its
 * events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/restore_fixture.h"
#include "support/testutil.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "restore/restore_fetch.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define T0 1700000000LL

static RestoreFetchConfig config(const RfStore *s, int fetchers) {
    return (RestoreFetchConfig){.store = s->store, .scratch = s->scratch, .max_fetchers = fetchers};
}

/* The store's object named name, looked up in a fresh listing. */
static Snapshot object(RfStore *s, const char *name) {
    Snapshot snap;
    if (store_snapshot_for_name(s->store, name, &snap)) fail_msg("%s: %s", name, err_msg());
    return snap;
}

static void truncate_object(const RfStore *s, const char *name, off_t cut) {
    char path[600];
    rf_object_path(s, name, path, sizeof path);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    off_t end = lseek(fd, 0, SEEK_END);
    assert_int_equal(ftruncate(fd, end - cut), 0);
    close(fd);
}

static void test_fetch_plain_full_read_in_place(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    char name[256];
    rf_put_full(&s, 7, 7, T0, "", NULL, name, sizeof name);
    Snapshot full = object(&s, name);
    RestoreFetchConfig c = config(&s, 1);
    RestoreFullDb db;
    if (restore_fetch_full(&c, &full, 0, &db)) fail_msg("fetch: %s", err_msg());
    assert_true(db.fd >= 0);
    assert_false(db.copied);
    assert_non_null(strstr(db.path, "/proc/self/fd/"));
    assert_int_equal(db.revision, 7);
    restore_full_db_release(&db);
    assert_int_equal(db.fd, -1);
    assert_int_equal(fs_dir_nonempty(s.scratch), 0); /* nothing was copied */
    rf_close(&s);
}

static void test_fetch_compressed_full_copied_and_removed(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    char name[256];
    rf_put_full(&s, 7, 7, T0, ".gz", NULL, name, sizeof name);
    Snapshot full = object(&s, name);
    RestoreFetchConfig c = config(&s, 1);
    RestoreFullDb db;
    if (restore_fetch_full(&c, &full, 0, &db)) fail_msg("fetch: %s", err_msg());
    assert_int_equal(db.fd, -1);
    assert_true(db.copied);
    assert_int_equal(strncmp(db.path, s.scratch, strlen(s.scratch)), 0);
    assert_true(fs_exists(db.path));
    assert_int_equal(db.revision, 7);
    restore_full_db_release(&db);
    assert_false(fs_exists(db.path));
    rf_close(&s);
}

static void test_fetch_truncated_full_fails_naming_it(void **state) {
    (void)state;
    const char *suffixes[] = {"", ".gz"};
    for (size_t i = 0; i < 2; i++) {
        RfStore s;
        rf_open(&s);
        char name[256];
        rf_put_full(&s, 7, 7, T0, suffixes[i], NULL, name, sizeof name);
        truncate_object(&s, name, 100);
        Snapshot full = object(&s, name);
        RestoreFetchConfig c = config(&s, 1);
        RestoreFullDb db;
        int rc = restore_fetch_full(&c, &full, 0, &db);
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(err_msg(), name));
        assert_int_equal(db.fd, -1);
        restore_full_db_release(&db);
        rf_close(&s);
    }
}

static void test_fetch_full_whose_db_is_not_its_name_refused(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    char name[256];
    rf_put_full(&s, 8, 7, T0, "", "00000000000000aa", name, sizeof name); /* says 8, holds 7 */
    Snapshot full = object(&s, name);
    RestoreFetchConfig c = config(&s, 1);
    RestoreFullDb db;
    assert_int_equal(restore_fetch_full(&c, &full, 0, &db), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "does not match the contents"));
    assert_non_null(strstr(err_msg(), name));
    restore_full_db_release(&db);
    rf_close(&s);
}

/* Takes every delta of the pool in order, checking each one's events; -1: all fine, else the
 * index of the first one whose take failed (its rc in *rc). */
static ptrdiff_t take_all(RestoreFetch *f, const Snapshot *d, size_t n, int *rc) {
    for (size_t j = 0; j < n; j++) {
        DeltaReader *r = NULL;
        if ((*rc = restore_fetch_take(f, j, &r))) return (ptrdiff_t)j;
        int64_t want = d[j].start_revision;
        DeltaEvent ev;
        int got = 0;
        while (delta_reader_next(r, &ev, &got) == 0 && got)
            assert_int_equal(ev.mod_revision, want++);
        assert_int_equal(want, d[j].last_revision + 1);
        delta_reader_close(r);
        restore_fetch_done(f, j);
    }
    return -1;
}

static void put_three_deltas(RfStore *s, Snapshot d[3], char names[3][256]) {
    rf_put_delta(s, 6, 8, T0 + 10, NULL, names[0], 256);
    rf_put_delta(s, 9, 12, T0 + 20, NULL, names[1], 256);
    rf_put_delta(s, 13, 13, T0 + 30, NULL, names[2], 256);
    for (int i = 0; i < 3; i++)
        d[i] = object(s, names[i]);
}

static void test_fetch_pool_hands_over_deltas_in_order(void **state) {
    (void)state;
    for (int fetchers = 1; fetchers <= 3; fetchers += 2) {
        RfStore s;
        rf_open(&s);
        Snapshot d[3];
        char names[3][256];
        put_three_deltas(&s, d, names);
        RestoreFetchConfig c = config(&s, fetchers);
        RestoreFetch *f = NULL;
        assert_int_equal(restore_fetch_start(&c, d, 3, &f), 0);
        int rc = 0;
        assert_int_equal(take_all(f, d, 3, &rc), -1);
        restore_fetch_stop(f);
        rf_close(&s);
    }
}

typedef struct {
    int n;
    char last[512];
} Lines;

static int64_t fixed_clock(void *ctx) {
    (void)ctx;
    return 1000;
}

static void keep_line(void *ctx, const char *line, int tty) {
    (void)tty;
    Lines *l = ctx;
    l->n++;
    snprintf(l->last, sizeof l->last, "%s", line);
}

/* The download's progress gets every byte read from the store (the listed, stored sizes: the
 * whole compressed object, or the plain file read where it lies) and its summary once, when the
 * last of the set's objects is in. */
static void test_fetch_feeds_the_download_progress(void **state) {
    (void)state;
    const char *suffixes[] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        RfStore s;
        rf_open(&s);
        char name[256], names[3][256];
        rf_put_full(&s, 5, 5, T0, suffixes[i], NULL, name, sizeof name);
        Snapshot full = object(&s, name), d[3];
        put_three_deltas(&s, d, names);
        /* the sizes a listing gives (store_snapshot_for_name leaves them unknown) */
        assert_int_equal(store_snapshot_stat(s.store, &full, &full.size), 0);
        uint64_t total = (uint64_t)full.size;
        for (int k = 0; k < 3; k++) {
            assert_int_equal(store_snapshot_stat(s.store, &d[k], &d[k].size), 0);
            total += (uint64_t)d[k].size;
        }
        Lines lines = {0};
        ProgressOptions o = {.what = "downloading",
                             .total = total,
                             .total_kind = PROGRESS_TOTAL_EXACT,
                             .counts_bytes = 1,
                             .now_ms = fixed_clock,
                             .emit = keep_line,
                             .emit_ctx = &lines};
        Progress *p = progress_start_opts(&o);
        progress_set_items(p, 0, 4);
        RestoreFetchConfig c = config(&s, 2);
        c.progress = p;
        c.n_objects = 4;
        RestoreFullDb db;
        if (restore_fetch_full(&c, &full, 0, &db)) fail_msg("fetch: %s", err_msg());
        assert_int_equal(lines.n, 0); /* 1 of 4 objects: not done */
        RestoreFetch *f = NULL;
        assert_int_equal(restore_fetch_start(&c, d, 3, &f), 0);
        int rc = 0;
        assert_int_equal(take_all(f, d, 3, &rc), -1);
        restore_fetch_stop(f);
        restore_full_db_release(&db);
        assert_int_equal(lines.n, 1);
        char amount[64], want[160];
        progress_format_bytes(amount, sizeof amount, total);
        snprintf(want, sizeof want, "downloading: done, %s of %s in 0s", amount, amount);
        if (strncmp(lines.last, want, strlen(want)) != 0 || !strstr(lines.last, "4 of 4 objects"))
            fail_msg("%s: summary \"%s\", want \"%s...4 of 4 objects\"", suffixes[i], lines.last,
                     want);
        progress_finish(p);
        rf_close(&s);
    }
}

static void test_fetch_damaged_delta_fails_naming_it(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    Snapshot d[3];
    char names[3][256], path[600];
    put_three_deltas(&s, d, names);
    rf_object_path(&s, names[1], path, sizeof path);
    int fd = open(path, O_RDWR); /* a byte of its JSON changed: the hash no longer matches */
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, 5), 1);
    close(fd);
    truncate_object(&s, names[2], 10); /* and the last one cut short */
    RestoreFetchConfig c = config(&s, 2);
    RestoreFetch *f = NULL;
    assert_int_equal(restore_fetch_start(&c, d, 3, &f), 0);
    int rc = 0;
    assert_int_equal(take_all(f, d, 3, &rc), 1);
    assert_int_equal(rc, ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), names[1]));
    DeltaReader *r = NULL;
    assert_int_equal(restore_fetch_take(f, 2, &r), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), names[2]));
    restore_fetch_stop(f); /* closes what was not taken */
    rf_close(&s);
}

static void test_fetch_take_ends_when_stopped(void **state) {
    (void)state;
    RfStore s;
    rf_open(&s);
    Snapshot d[3];
    char names[3][256];
    put_three_deltas(&s, d, names);
    atomic_int stop = 1;
    RestoreFetchConfig c = config(&s, 1);
    c.stop = &stop;
    RestoreFetch *f = NULL;
    assert_int_equal(restore_fetch_start(&c, d, 3, &f), 0);
    DeltaReader *r = NULL;
    int rc = restore_fetch_take(f, 2, &r); /* never fetched: one thread, one ahead of 0 */
    assert_int_equal(rc, ERR_CANCELED);
    restore_fetch_stop(f);
    rf_close(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_plain_full_read_in_place),
        cmocka_unit_test(test_fetch_feeds_the_download_progress),
        cmocka_unit_test(test_fetch_compressed_full_copied_and_removed),
        cmocka_unit_test(test_fetch_truncated_full_fails_naming_it),
        cmocka_unit_test(test_fetch_full_whose_db_is_not_its_name_refused),
        cmocka_unit_test(test_fetch_pool_hands_over_deltas_in_order),
        cmocka_unit_test(test_fetch_damaged_delta_fails_naming_it),
        cmocka_unit_test(test_fetch_take_ends_when_stopped),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
