/* test_copier: the copy's selection (the Go tool's "backups" grouping, docs/go-tool.md §3.6, and
 * the
 * --max-backups-to-copy / --max-backup-age limits), the destination names (".final" stripped),
 * the plan against a destination listing, and copier_run between two real Local stores in temp
 * dirs: bytes equal, history record and tags copied, nothing replaced, a rerun copies nothing.
 * A seeded property test checks the grouping over random listings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backup/copier.h"
#include "common/err.h"
#include "common/log.h"
#include "store/history.h"
#include "store/snapname.h"
#include "store/store.h"
#include "store/store_driver.h"
#include "support/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DAY INT64_C(86400)
#define NOW0 INT64_C(1796000000)

typedef struct {
    Snapshot v[512];
    size_t n;
} List;

static Snapshot *add(List *l, SnapKind kind, int64_t start, int64_t last, int64_t created,
                     int chunk, int final) {
    assert_true(l->n < 512);
    Snapshot *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->start_revision = start;
    s->last_revision = last;
    s->created_on = created;
    s->version = 2;
    s->is_chunk = chunk;
    s->is_final = final;
    s->size = -1;
    char name[200];
    assert_int_equal(snapname_format(kind, start, last, created, ".gz", final, name, sizeof name),
                     0);
    char full[240];
    snprintf(full, sizeof full, "%s%s", name, chunk ? "/0000000001" : "");
    snprintf(s->snap_name, sizeof s->snap_name, "%s", full);
    snprintf(s->key, sizeof s->key, "v2/%s", full);
    return s;
}

/* The names of the selected objects, in order, joined by ' ' (kind letter + last revision). */
static void order_text(const List *l, const size_t *order, size_t n, char *out, size_t cap) {
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%c%lld", i ? " " : "",
                              l->v[order[i]].kind == SNAP_FULL ? 'F' : 'd',
                              (long long)l->v[order[i]].last_revision);
}

/* orphan deltas, F10 + 2 deltas (+ a chunk), F30 + 1 delta, F40 with none, 2 deltas after it */
static void build_sample(List *l) {
    l->n = 0;
    add(l, SNAP_INCR, 1, 5, NOW0 - 20 * DAY, 0, 0);
    add(l, SNAP_FULL, 0, 10, NOW0 - 10 * DAY, 0, 0);
    add(l, SNAP_FULL, 0, 10, NOW0 - 10 * DAY, 1, 0); /* chunk of it */
    add(l, SNAP_INCR, 11, 15, NOW0 - 10 * DAY + 60, 0, 0);
    add(l, SNAP_INCR, 16, 20, NOW0 - 10 * DAY + 120, 0, 0);
    add(l, SNAP_FULL, 0, 30, NOW0 - 3 * DAY, 0, 0);
    add(l, SNAP_INCR, 31, 35, NOW0 - 3 * DAY + 60, 0, 0);
    add(l, SNAP_FULL, 0, 40, NOW0 - 60, 0, 1);
    add(l, SNAP_INCR, 41, 45, NOW0 - 30, 0, 0);
    add(l, SNAP_INCR, 46, 50, NOW0 - 10, 0, 0);
    snapname_sort(l->v, l->n);
}

static void select_text(const List *l, int max_backups, int max_age, char *out, size_t cap,
                        size_t *n_backups) {
    size_t order[512], n = 0;
    assert_int_equal(copier_select(l->v, l->n, max_backups, max_age, NOW0, order, &n, n_backups),
                     0);
    order_text(l, order, n, out, cap);
}

static void test_copier_groups_backups_newest_first_and_drops_orphan_deltas(void **st) {
    (void)st;
    List l;
    build_sample(&l);
    char txt[512];
    size_t nb = 0;
    select_text(&l, -1, -1, txt, sizeof txt, &nb);
    assert_string_equal(txt, "F40 d45 d50 F30 d35 F10 d15 d20");
    assert_int_equal(nb, 3);
}

static void test_copier_max_backups_keeps_the_newest_sets(void **st) {
    (void)st;
    List l;
    build_sample(&l);
    char txt[512];
    size_t nb = 0;
    select_text(&l, 1, -1, txt, sizeof txt, &nb);
    assert_string_equal(txt, "F40 d45 d50");
    assert_int_equal(nb, 1);
    select_text(&l, 2, -1, txt, sizeof txt, &nb);
    assert_string_equal(txt, "F40 d45 d50 F30 d35");
    select_text(&l, 0, -1, txt, sizeof txt, &nb);
    assert_string_equal(txt, "");
    assert_int_equal(nb, 0);
}

static void test_copier_max_backup_age_drops_old_full_snapshots(void **st) {
    (void)st;
    List l;
    build_sample(&l);
    char txt[512];
    select_text(&l, -1, 5, txt, sizeof txt, NULL);
    assert_string_equal(txt, "F40 d45 d50 F30 d35");
    select_text(&l, -1, 0, txt, sizeof txt, NULL);
    assert_string_equal(txt, "");
    select_text(&l, 1, 5, txt, sizeof txt, NULL);
    assert_string_equal(txt, "F40 d45 d50");
}

static void test_copier_orders_backups_by_creation_time(void **st) {
    (void)st;
    /* a full with a higher revision but an older time (a clock set back) comes second */
    List l = {.n = 0};
    add(&l, SNAP_FULL, 0, 10, NOW0 - 10, 0, 0);
    add(&l, SNAP_INCR, 11, 12, NOW0 - 9, 0, 0);
    add(&l, SNAP_FULL, 0, 20, NOW0 - 100, 0, 0);
    add(&l, SNAP_INCR, 21, 22, NOW0 - 99, 0, 0);
    snapname_sort(l.v, l.n);
    char txt[256];
    select_text(&l, -1, -1, txt, sizeof txt, NULL);
    assert_string_equal(txt, "F10 d12 F20 d22");
    select_text(&l, 1, -1, txt, sizeof txt, NULL);
    assert_string_equal(txt, "F10 d12");
}

static void test_copier_select_rejects_bad_limits_and_takes_empty_lists(void **st) {
    (void)st;
    List l;
    build_sample(&l);
    size_t order[512], n = 7;
    assert_int_equal(copier_select(l.v, l.n, -2, -1, NOW0, order, &n, NULL), ERR_INVALID);
    assert_int_equal(copier_select(l.v, l.n, -1, -2, NOW0, order, &n, NULL), ERR_INVALID);
    assert_int_equal(copier_select(NULL, 0, -1, -1, NOW0, NULL, &n, NULL), 0);
    assert_int_equal(n, 0);
    /* only deltas: no backup */
    List d = {.n = 0};
    add(&d, SNAP_INCR, 1, 2, NOW0, 0, 0);
    assert_int_equal(copier_select(d.v, d.n, -1, -1, NOW0, order, &n, NULL), 0);
    assert_int_equal(n, 0);
}

static void test_copier_dest_name_strips_final_only(void **st) {
    (void)st;
    List l = {.n = 0};
    Snapshot *f = add(&l, SNAP_FULL, 0, 10, NOW0, 0, 1);
    Snapshot *g = add(&l, SNAP_FULL, 0, 11, NOW0, 0, 0);
    Snapshot *c = add(&l, SNAP_FULL, 0, 12, NOW0, 1, 0);
    char out[256];
    assert_int_equal(copier_dest_name(f, out, sizeof out), 0);
    assert_string_equal(out, "Full-00000000-00000010-1796000000.gz");
    assert_int_equal(copier_dest_name(g, out, sizeof out), 0);
    assert_string_equal(out, "Full-00000000-00000011-1796000000.gz");
    assert_int_equal(copier_dest_name(c, out, sizeof out), ERR_INVALID); /* chunks never */
    assert_int_equal(copier_dest_name(f, out, 10), ERR_INVALID);
}

static void test_copier_plan_compares_names_without_final(void **st) {
    (void)st;
    List src = {.n = 0}, dst = {.n = 0};
    add(&src, SNAP_FULL, 0, 10, NOW0, 0, 1);  /* final in the source, plain in the destination */
    add(&src, SNAP_FULL, 0, 20, NOW0, 0, 0);  /* plain in the source, final in the destination */
    add(&src, SNAP_INCR, 21, 25, NOW0, 0, 0); /* only a chunk of that name in the destination */
    add(&src, SNAP_INCR, 26, 30, NOW0, 0, 0); /* absent */
    add(&dst, SNAP_FULL, 0, 10, NOW0, 0, 0);
    add(&dst, SNAP_FULL, 0, 20, NOW0, 0, 1);
    add(&dst, SNAP_INCR, 21, 25, NOW0, 1, 0);
    size_t order[] = {0, 1, 2, 3};
    uint8_t need[4];
    assert_int_equal(copier_plan(src.v, order, 4, dst.v, dst.n, need), 0);
    assert_int_equal(need[0], 0);
    assert_int_equal(need[1], 0);
    assert_int_equal(need[2], 1);
    assert_int_equal(need[3], 1);
    assert_int_equal(copier_plan(src.v, order, 4, NULL, 0, need), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(need[i], 1);
}

/* Random listings from a logged seed: every selected object is selected once; each delta follows
 * its full in the order and lies between that full and the next full by revision; with no
 * limits every non-chunk object after the first full is selected, and nothing before it. */
static void test_copier_select_property_over_random_listings(void **st) {
    (void)st;
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("ETCDBR_TEST_SEED");
    if (env && *env) seed = (unsigned)strtoul(env, NULL, 10);
    print_message("seed %u (ETCDBR_TEST_SEED replays)\n", seed);
    srand(seed);
    for (int round = 0; round < 300; round++) {
        List l = {.n = 0};
        int64_t rev = 0, t = NOW0 - 30 * DAY;
        size_t n = (size_t)(rand() % 60);
        for (size_t i = 0; i < n; i++) {
            int r = rand() % 10;
            int64_t step = 1 + rand() % 5;
            t += rand() % (2 * DAY);
            if (r < 3) {
                add(&l, SNAP_FULL, 0, rev + step, t, 0, rand() % 5 == 0);
                if (rand() % 4 == 0) add(&l, SNAP_FULL, 0, rev + step, t, 1, 0);
            } else {
                add(&l, SNAP_INCR, rev + 1, rev + step, t, 0, 0);
            }
            rev += step;
        }
        snapname_sort(l.v, l.n);
        int maxb = rand() % 4 - 1, maxage = rand() % 3 == 0 ? rand() % 20 : -1;
        size_t order[512], no = 0, nb = 0;
        assert_int_equal(copier_select(l.v, l.n, maxb, maxage, NOW0, order, &no, &nb), 0);
        uint8_t seen[512] = {0};
        ptrdiff_t cur_full = -1;
        size_t fulls = 0;
        for (size_t k = 0; k < no; k++) {
            size_t i = order[k];
            assert_false(seen[i]);
            seen[i] = 1;
            assert_false(l.v[i].is_chunk);
            if (l.v[i].kind == SNAP_FULL) {
                cur_full = (ptrdiff_t)i;
                fulls++;
                if (maxage >= 0) assert_true(l.v[i].created_on >= NOW0 - maxage * DAY);
                continue;
            }
            assert_true(cur_full >= 0);
            assert_true(i > (size_t)cur_full);
            for (size_t j = (size_t)cur_full + 1; j < i; j++)
                assert_false(l.v[j].kind == SNAP_FULL && !l.v[j].is_chunk);
        }
        assert_int_equal(fulls, nb);
        if (maxb >= 0) assert_true(nb <= (size_t)maxb);
        if (maxb == -1 && maxage == -1) {
            ptrdiff_t first = -1;
            for (size_t i = 0; i < l.n && first < 0; i++)
                if (l.v[i].kind == SNAP_FULL && !l.v[i].is_chunk) first = (ptrdiff_t)i;
            for (size_t i = 0; i < l.n; i++)
                assert_int_equal(seen[i], first >= 0 && (ptrdiff_t)i >= first && !l.v[i].is_chunk);
        }
    }
}

/* ---------- copier_run over two Local stores ---------- */

static char g_dir[256];

static int setup_dirs(void **st) {
    (void)st;
    snprintf(g_dir, sizeof g_dir, "%s/test_copier.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(g_dir));
    return 0;
}

static int teardown_dirs(void **st) {
    (void)st;
    sh(NULL, 0, "rm -rf '%s'", g_dir);
    return 0;
}

static Store *open_local(const char *sub) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, sub);
    StoreConfig cfg = {.provider = "Local", .container = path, .prefix = "p"};
    Store *s = NULL;
    if (store_open(&cfg, &s)) fail_msg("store_open %s: %s", path, err_msg());
    return s;
}

static void put_obj(Store *s, const char *name, const char *history, size_t len, int fill) {
    if (history) assert_int_equal(store_history_tag(s, history, name), 0);
    StoreWriter *w = NULL;
    if (store_open_write(s, name, &w)) fail_msg("write %s: %s", name, err_msg());
    char buf[4096];
    for (size_t o = 0; o < len; o += sizeof buf) {
        size_t k = len - o < sizeof buf ? len - o : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = (char)((o + i) * 31 + (size_t)fill);
        assert_int_equal(io_write(store_writer_io(w), buf, k), 0);
    }
    assert_int_equal(io_finish(store_writer_io(w)), 0);
    assert_int_equal(store_writer_commit(w), 0);
}

static void test_copier_run_copies_bytes_and_history_and_replaces_nothing(void **st) {
    (void)st;
    Store *src = open_local("src"), *dst = open_local("dst");
    HistoryRecord rec;
    memset(&rec, 0, sizeof rec);
    snprintf(rec.id, sizeof rec.id, "0123456789abcdef");
    snprintf(rec.reason, sizeof rec.reason, "new");
    rec.cluster_id = 0x1234;
    rec.created_s = NOW0;
    assert_int_equal(store_history_put_record(src, &rec), 0);
    put_obj(src, "Full-00000000-00000010-1796000000.gz", rec.id, 300000, 1);
    put_obj(src, "Incr-00000011-00000015-1796000001.gz", rec.id, 1000, 2);
    put_obj(src, "Full-00000000-00000020-1796000002.gz.final", rec.id, 5000, 3);
    put_obj(src, "Incr-00000021-00000025-1796000003.gz", NULL, 0, 4); /* untagged, empty */
    /* the destination holds the second delta already, with other bytes: kept as it is */
    put_obj(dst, "Incr-00000011-00000015-1796000001.gz", NULL, 7, 9);

    CopierConfig cc = {
        .source = src, .dest = dst, .max_backups = -1, .max_backup_age_days = -1, .workers = 3};
    CopierResult res;
    assert_int_equal(copier_run(&cc, &res), 0);
    assert_int_equal(res.backups, 2);
    assert_int_equal(res.selected, 4);
    assert_int_equal(res.present, 1);
    assert_int_equal(res.copied, 3);
    assert_int_equal(res.failed, 0);
    assert_int_equal(res.bytes, 305000);

    char out[4096];
    assert_int_equal(sh(out, sizeof out,
                        "cd '%s' && cmp src/p/v2/Full-00000000-00000010-1796000000.gz "
                        "dst/p/v2/Full-00000000-00000010-1796000000.gz && cmp "
                        "src/p/v2/Full-00000000-00000020-1796000002.gz.final "
                        "dst/p/v2/Full-00000000-00000020-1796000002.gz && "
                        "cmp src/p/v2/Incr-00000021-00000025-1796000003.gz "
                        "dst/p/v2/Incr-00000021-00000025-1796000003.gz",
                        g_dir),
                     0);
    /* nothing replaced, nothing named .final */
    assert_int_equal(sh(out, sizeof out,
                        "stat -c %%s '%s/dst/p/v2/Incr-00000011-00000015-1796000001.gz'", g_dir),
                     0);
    assert_string_equal(out, "7\n");
    assert_int_not_equal(sh(out, sizeof out, "ls '%s/dst/p/v2' | grep final", g_dir), 0);

    /* the destination lists the copies under the source's history, record included */
    Snapshot *v = NULL;
    HistoryRecord *recs = NULL;
    size_t n = 0, nr = 0;
    assert_int_equal(store_list_ex(dst, 1, &v, &n, &recs, &nr), 0);
    assert_int_equal(nr, 1);
    assert_string_equal(recs[0].id, rec.id);
    assert_int_equal(recs[0].cluster_id, 0x1234);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        if (v[i].last_revision == 10 || v[i].last_revision == 20)
            assert_string_equal(v[i].history, rec.id);
        else
            assert_string_equal(v[i].history, ""); /* untagged stays untagged */
    }
    free(v);
    free(recs);

    /* a rerun copies nothing; --max-backups-to-copy=1 into a fresh store takes the newest set */
    assert_int_equal(copier_run(&cc, &res), 0);
    assert_int_equal(res.copied, 0);
    assert_int_equal(res.present, 4);
    Store *one = open_local("one");
    cc.dest = one;
    cc.max_backups = 1;
    assert_int_equal(copier_run(&cc, &res), 0);
    assert_int_equal(res.copied, 2);
    assert_int_equal(sh(out, sizeof out, "ls '%s/one/p/v2'", g_dir), 0);
    assert_string_equal(out, "Full-00000000-00000020-1796000002.gz\n"
                             "Incr-00000021-00000025-1796000003.gz\n");
    store_free(one);
    store_free(src);
    store_free(dst);
}

static void test_copier_waits_for_a_final_full_among_the_four_newest(void **st) {
    (void)st;
    Store *src = open_local("wsrc"), *dst = open_local("wdst");
    put_obj(src, "Full-00000000-00000010-1796000000.gz.final", NULL, 10, 1);
    for (int i = 0; i < 4; i++) {
        char name[128];
        snprintf(name, sizeof name, "Full-00000000-%08d-%d.gz", 20 + i, 1796000010 + i);
        put_obj(src, name, NULL, 10, 2);
    }
    /* the final one is the 5th newest: not enough, the wait ends at its timeout */
    CopierConfig cc = {.source = src,
                       .dest = dst,
                       .max_backups = 1,
                       .max_backup_age_days = -1,
                       .workers = 1,
                       .wait_final = 1,
                       .wait_final_timeout_ms = 300,
                       .wait_final_poll_ms = 50};
    CopierResult res;
    assert_int_equal(copier_run(&cc, &res), 0);
    assert_int_equal(res.final_wait_timed_out, 1);
    assert_true(res.seconds >= 0.3);
    assert_int_equal(res.copied, 1); /* then it copies what is there */
    /* a final one among the 4 newest: no waiting */
    put_obj(src, "Full-00000000-00000030-1796000020.gz.final", NULL, 10, 3);
    cc.wait_final_timeout_ms = 60000;
    assert_int_equal(copier_run(&cc, &res), 0);
    assert_int_equal(res.final_wait_timed_out, 0);
    assert_true(res.seconds < 30);
    assert_int_equal(res.copied, 1);
    /* a stop during the wait is ERR_CANCELED, nothing copied */
    Store *empty = open_local("wempty");
    atomic_int stop = 0;
    cc.source = empty;
    cc.stop = &stop;
    cc.wait_final_timeout_ms = 0; /* for ever */
    stop = 1;
    assert_int_equal(copier_run(&cc, &res), ERR_CANCELED);
    store_free(empty);
    store_free(src);
    store_free(dst);
}

/* A fake source: a Local driver whose open_read fails (ERR_IO) for keys containing "Incr-". */
typedef struct FakeFailRead {
    StoreDriver base;
    StoreDriver *inner;
    StoreDriverVt vt;
} FakeFailRead;

static int ff_list(StoreDriver *d, const char *p, StoreDriverListCb cb, void *ctx) {
    StoreDriver *in = ((FakeFailRead *)d)->inner;
    return in->vt->list(in, p, cb, ctx);
}
static int ff_open_read(StoreDriver *d, const char *key, uint64_t off, IoReader **out) {
    StoreDriver *in = ((FakeFailRead *)d)->inner;
    if (strstr(key, "v2/Incr-")) return err_set(ERR_IO, "GET %s: injected failure", key);
    return in->vt->open_read(in, key, off, out);
}
static int ff_stat(StoreDriver *d, const char *key, int64_t *size) {
    StoreDriver *in = ((FakeFailRead *)d)->inner;
    return in->vt->stat(in, key, size);
}
static const char *ff_describe(const StoreDriver *d) {
    const StoreDriver *in = ((const FakeFailRead *)d)->inner;
    return in->vt->describe(in);
}
static void ff_free(StoreDriver *d) {
    FakeFailRead *f = (FakeFailRead *)d;
    store_driver_free(f->inner);
    free(f);
}

static Store *open_fake_fail_read(const char *sub) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, sub);
    StoreDriver *local = NULL;
    assert_int_equal(store_local_driver_new(path, &local), 0);
    FakeFailRead *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->inner = local;
    f->vt = *local->vt;
    f->vt.list = ff_list;
    f->vt.open_read = ff_open_read;
    f->vt.stat = ff_stat;
    f->vt.describe = ff_describe;
    f->vt.free = ff_free;
    f->vt.open_write = NULL;
    f->vt.remove = NULL;
    f->vt.remove_dir = NULL;
    f->base.vt = &f->vt;
    Store *s = NULL;
    assert_int_equal(store_new_with_driver(&f->base, "p", &s), 0);
    return s;
}

static void test_copier_run_reports_every_failure(void **st) {
    (void)st;
    Store *w = open_local("fsrc"), *dst = open_local("fdst");
    put_obj(w, "Full-00000000-00000010-1796000000.gz", NULL, 100, 1);
    put_obj(w, "Incr-00000011-00000015-1796000001.gz", NULL, 100, 2);
    put_obj(w, "Incr-00000016-00000020-1796000002.gz", NULL, 100, 3);
    store_free(w);
    Store *src = open_fake_fail_read("fsrc");
    CopierConfig cc = {
        .source = src, .dest = dst, .max_backups = -1, .max_backup_age_days = -1, .workers = 2};
    CopierResult res;
    int rc = copier_run(&cc, &res);
    assert_int_not_equal(rc, 0);
    assert_int_equal(res.copied, 1);
    assert_int_equal(res.failed, 2);
    assert_non_null(strstr(err_msg(), "2 of 3 objects failed"));
    assert_non_null(strstr(err_msg(), "Incr-00000011"));
    assert_non_null(strstr(err_msg(), "Incr-00000016"));
    store_free(src);
    store_free(dst);
}

int main(void) {
    log_setup(LOG_ERROR, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copier_groups_backups_newest_first_and_drops_orphan_deltas),
        cmocka_unit_test(test_copier_max_backups_keeps_the_newest_sets),
        cmocka_unit_test(test_copier_max_backup_age_drops_old_full_snapshots),
        cmocka_unit_test(test_copier_orders_backups_by_creation_time),
        cmocka_unit_test(test_copier_select_rejects_bad_limits_and_takes_empty_lists),
        cmocka_unit_test(test_copier_dest_name_strips_final_only),
        cmocka_unit_test(test_copier_plan_compares_names_without_final),
        cmocka_unit_test(test_copier_select_property_over_random_listings),
        cmocka_unit_test(test_copier_run_copies_bytes_and_history_and_replaces_nothing),
        cmocka_unit_test(test_copier_run_reports_every_failure),
        cmocka_unit_test(test_copier_waits_for_a_final_full_among_the_four_newest),
    };
    return cmocka_run_group_tests(tests, setup_dirs, teardown_dirs);
}
