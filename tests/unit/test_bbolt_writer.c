/* test_bbolt_writer: dbs written by bbolt_writer read back with the reader's cursor (every key,
 * value and nested bucket in order), bbolt_check and the file length (pgid x page size); bad
 * calls give the documented errors and leave no partial file. Random trees come from a seeded
 * PRNG: the seed is printed, ETCDBR_TEST_SEED replays one. The cursor is also checked against
 * bbolt_get on etcd's own fixture snapshot, on a hand-made db with inline buckets, and on
 * corrupted trees. The real bbolt's check runs in tests/integration/test_bbolt_writer_check.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/testutil.h"

#include "common/err.h"
#include "format/bbolt.h"
#include "format/bbolt_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FIXTURE_FULL "tests/fixtures/seed-plain/store/v2/Full-00000000-00000190-1795974921"
#define MAX_KEY 32768

static char tmpdir[256];

/* ---- helpers ---- */

static const char *source_dir(void) {
    const char *d = getenv("ETCDBR_SOURCE_DIR");
    return d && *d ? d : ".";
}

static void tmp_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", tmpdir, name);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static uint64_t file_len(const char *path) {
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

static void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p) {
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static uint16_t rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

typedef struct {
    uint64_t s;
} Rng;

static uint64_t rnd(Rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(Rng *r, uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd(r);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

#define OK(x)                                                                                      \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_) fail_msg("%s: %s: %s", #x, err_name(rc_), err_msg());                             \
    } while (0)

/* ---- an in-memory model of a db: the root's kids are buckets ---- */

typedef struct Node {
    uint8_t *key;
    size_t klen;
    int is_bucket;
    uint8_t *val;
    size_t vlen;
    struct Node *kids;
    size_t n;
    size_t cap;
    uint64_t seq;
} Node;

/* Appends a kid (keys must be added in ascending order); the pointer is valid until the next
 * add to the same parent. */
static Node *node_add(Node *parent, const void *key, size_t klen, int is_bucket) {
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 8;
        parent->kids = realloc(parent->kids, parent->cap * sizeof *parent->kids);
        assert_non_null(parent->kids);
    }
    Node *k = &parent->kids[parent->n++];
    memset(k, 0, sizeof *k);
    k->key = malloc(klen ? klen : 1);
    assert_non_null(k->key);
    memcpy(k->key, key, klen);
    k->klen = klen;
    k->is_bucket = is_bucket;
    return k;
}

static Node *node_add_s(Node *parent, const char *key, int is_bucket) {
    return node_add(parent, key, strlen(key), is_bucket);
}

static void node_put(Node *parent, const void *key, size_t klen, const void *val, size_t vlen) {
    Node *k = node_add(parent, key, klen, 0);
    k->val = malloc(vlen ? vlen : 1);
    assert_non_null(k->val);
    if (vlen) memcpy(k->val, val, vlen);
    k->vlen = vlen;
}

static void node_put_s(Node *parent, const char *key, const char *val) {
    node_put(parent, key, strlen(key), val, strlen(val));
}

static void node_free(Node *n) {
    for (size_t i = 0; i < n->n; i++)
        node_free(&n->kids[i]);
    free(n->kids);
    free(n->key);
    free(n->val);
    memset(n, 0, sizeof *n);
}

static void write_kids(BboltWriter *w, const Node *n) {
    for (size_t i = 0; i < n->n; i++) {
        const Node *k = &n->kids[i];
        if (!k->is_bucket) {
            OK(bbolt_writer_put(w, k->key, k->klen, k->val, k->vlen));
            continue;
        }
        OK(bbolt_writer_begin_bucket(w, k->key, k->klen));
        if (k->seq) OK(bbolt_writer_set_sequence(w, k->seq));
        write_kids(w, k);
        OK(bbolt_writer_end_bucket(w));
    }
}

/* Iterates the bucket at path with the cursor and compares every item with the model. */
static void verify_bucket(BboltDb *db, BboltName *path, size_t depth, const Node *n) {
    BboltCursor *c = NULL;
    BboltItem it;
    int got = 0;
    OK(bbolt_cursor_open(db, path, depth, &c));
    for (size_t i = 0; i < n->n; i++) {
        const Node *k = &n->kids[i];
        OK(bbolt_cursor_next(c, &it, &got));
        if (!got) fail_msg("depth %zu: cursor ended after %zu of %zu items", depth, i, n->n);
        if (it.key_len != k->klen || memcmp(it.key, k->key, k->klen) != 0)
            fail_msg("depth %zu item %zu: key differs (%zu bytes, want %zu)", depth, i, it.key_len,
                     k->klen);
        assert_int_equal(it.is_bucket, k->is_bucket);
        if (k->is_bucket) {
            assert_null(it.value);
            assert_int_equal(it.value_len, 0);
            path[depth] = (BboltName){k->key, k->klen};
            verify_bucket(db, path, depth + 1, k);
        } else {
            if (it.value_len != k->vlen || (k->vlen && memcmp(it.value, k->val, k->vlen) != 0))
                fail_msg("depth %zu item %zu: value differs (%zu bytes, want %zu)", depth, i,
                         it.value_len, k->vlen);
        }
    }
    OK(bbolt_cursor_next(c, &it, &got));
    if (got) fail_msg("depth %zu: cursor has more than the %zu items written", depth, n->n);
    OK(bbolt_cursor_next(c, &it, &got)); /* stays at the end */
    assert_int_equal(got, 0);
    bbolt_cursor_close(c);
}

/* Writes the model with page size ps, reads it back, checks and removes the file. Returns the
 * number of pages. */
static uint64_t round_trip(const Node *root, uint32_t ps, const char *name) {
    char path[512];
    BboltWriter *w = NULL;
    BboltDb *db = NULL;
    BboltName names[16];
    tmp_path(path, sizeof path, name);
    unlink(path);
    OK(bbolt_writer_open(path, ps, &w));
    write_kids(w, root);
    OK(bbolt_writer_finish(w));
    uint64_t pages = bbolt_writer_pages(w), bytes = bbolt_writer_bytes(w);
    bbolt_writer_free(w);
    uint32_t eps = ps ? ps : 4096;
    assert_int_equal(bytes, pages * eps);
    assert_int_equal(file_len(path), bytes);

    OK(bbolt_open(path, 0, &db));
    assert_int_equal(bbolt_page_size(db), eps);
    assert_int_equal(bbolt_txid(db), 1);
    uint64_t checked = 0;
    OK(bbolt_check(db, &checked));
    assert_int_equal(checked, pages); /* every page reachable: none free, none lost */
    verify_bucket(db, names, 0, root);
    bbolt_close(db);
    unlink(path);
    return pages;
}

/* ---- round trips ---- */

static void test_writer_empty_db_round_trips(void **state) {
    (void)state;
    Node root = {0};
    /* metas, an empty root leaf, the freelist */
    assert_int_equal(round_trip(&root, 0, "empty.db"), 4);
    assert_int_equal(round_trip(&root, 1024, "empty.db"), 4);
    assert_int_equal(round_trip(&root, 65536, "empty.db"), 4);
}

static void test_writer_one_empty_bucket_round_trips(void **state) {
    (void)state;
    Node root = {0};
    node_add_s(&root, "empty", 1);
    assert_int_equal(round_trip(&root, 4096, "one.db"), 5);
    node_free(&root);
}

static void test_writer_ten_buckets_round_trip(void **state) {
    (void)state;
    Node root = {0};
    char k[32];
    for (int b = 0; b < 10; b++) {
        snprintf(k, sizeof k, "bucket%02d", b);
        Node *bk = node_add_s(&root, k, 1);
        for (int i = 0; i < b * b * 10; i++) { /* bucket00 stays empty */
            snprintf(k, sizeof k, "key%05d", i);
            node_put_s(bk, k, "value");
        }
    }
    round_trip(&root, 4096, "ten.db");
    round_trip(&root, 1024, "ten.db");
    node_free(&root);
}

static void test_writer_200k_small_keys_round_trip(void **state) {
    (void)state;
    Node root = {0};
    char k[32], v[32];
    Node *bk = node_add_s(&root, "key", 1);
    for (int i = 0; i < 200000; i++) {
        snprintf(k, sizeof k, "k%08d", i);
        snprintf(v, sizeof v, "v%d", i * 7);
        node_put_s(bk, k, v);
    }
    uint64_t p4k = round_trip(&root, 4096, "200k.db");
    uint64_t p1k = round_trip(&root, 1024, "200k.db");
    round_trip(&root, 65536, "200k.db");
    /* leaves filled: about (16 + 9 + 16 + 7) bytes a key */
    assert_true(p4k < 200000ull * 48 / 4096 * 11 / 10 + 10);
    assert_true(p1k > p4k);
    node_free(&root);
}

static void test_writer_keys_up_to_max_size_round_trip(void **state) {
    (void)state;
    static const size_t sizes[] = {4,    5,    17,   100,   1000,  1023,
                                   4095, 4096, 4097, 10000, 32767, MAX_KEY};
    const size_t ns = sizeof sizes / sizeof sizes[0];
    uint8_t *k = malloc(MAX_KEY);
    assert_non_null(k);
    Node root = {0};
    Node *bk = node_add_s(&root, "keys", 1);
    for (uint32_t i = 0; i < 240; i++) { /* a 4-byte counter keeps them ascending */
        size_t n = sizes[i % ns];
        wr32(k, __builtin_bswap32(i));
        memset(k + 4, 'a' + (int)(i % 26), n - 4);
        node_put(bk, k, n, "value", i % 6);
    }
    node_add_s(&root, "z", 1); /* an empty bucket after it */
    /* 1024-byte pages: every branch page holds two keys with overflow pages */
    round_trip(&root, 1024, "keys.db");
    round_trip(&root, 4096, "keys.db");
    round_trip(&root, 65536, "keys.db");
    node_free(&root);
    free(k);
}

static void test_writer_value_sizes_round_trip(void **state) {
    (void)state;
    static const uint32_t pss[] = {1024, 4096};
    Rng r = {7};
    for (size_t p = 0; p < 2; p++) {
        uint32_t ps = pss[p];
        /* key "vNN" is 3 bytes: a value of ps - 16 - 16 - 3 fills a page exactly */
        size_t sizes[] = {0,     1, ps - 35, ps - 34, ps - 33,  ps, ps + 1,        3 * ps,
                          12345, 0, 1572864, 2,       5u << 20, 1,  (5u << 20) + 3};
        Node root = {0};
        Node *bk = node_add_s(&root, "values", 1);
        uint8_t *buf = malloc((5u << 20) + 3);
        assert_non_null(buf);
        char k[8];
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            fill(&r, buf, sizes[i]);
            snprintf(k, sizeof k, "v%02zu", i);
            node_put(bk, k, 3, buf, sizes[i]);
        }
        free(buf);
        round_trip(&root, ps, "values.db");
        node_free(&root);
    }
}

static void test_writer_nested_buckets_interleaved_with_keys_round_trip(void **state) {
    (void)state;
    Node root = {0};
    char k[32];
    for (int a = 0; a < 3; a++) {
        snprintf(k, sizeof k, "top%d", a);
        Node *top = node_add_s(&root, k, 1);
        top->seq = (uint64_t)a * 1000;
        node_put_s(top, "a-key", "1");
        Node *sub = node_add_s(top, "b-sub", 1);
        node_put_s(sub, "a", "x");
        Node *deep = node_add_s(sub, "b-subsub", 1);
        for (int i = 0; i < 300 * a; i++) {
            snprintf(k, sizeof k, "deep-%05d", i);
            node_put_s(deep, k, "a value in the third level");
        }
        node_add_s(sub, "c-empty", 1);
        node_put_s(sub, "d", "y");
        node_put_s(top, "c-key", "2");
        node_add_s(top, "d-bucket", 1);
        node_put_s(top, "e-key", "");
    }
    round_trip(&root, 4096, "nested.db");
    round_trip(&root, 1024, "nested.db");
    node_free(&root);
}

/* A random tree: up to 3 levels of nesting, keys of random bytes (a counter prefix keeps them
 * ascending), mostly small values, some page-sized and overflow ones. */
static void random_bucket(Rng *r, Node *n, int depth, uint32_t ps, size_t *budget) {
    uint8_t k[4 + 400], *v = malloc(1u << 20);
    assert_non_null(v);
    size_t count = depth == 0 ? rnd(r) % 6 : rnd(r) % 1500;
    unsigned nested = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t kn = rnd(r) % 10 == 0 ? 4 + rnd(r) % 400 : 1 + rnd(r) % 20;
        if (kn < 4) { /* short keys: counter bytes only, so still ascending */
            kn = 4;
        }
        wr32(k, __builtin_bswap32(i));
        fill(r, k + 4, kn - 4);
        if (depth == 0 || (depth < 3 && nested < 3 && rnd(r) % 100 == 0)) {
            nested++;
            Node *b = node_add(n, k, kn, 1);
            b->seq = rnd(r) % 2 ? rnd(r) : 0;
            random_bucket(r, b, depth + 1, ps, budget);
            continue;
        }
        uint64_t c = rnd(r) % 100;
        size_t vn = c < 75 ? rnd(r) % 64 : c < 95 ? rnd(r) % (2 * ps) : rnd(r) % (1u << 20);
        if (vn > *budget) vn = 0;
        *budget -= vn;
        fill(r, v, vn);
        node_put(n, k, kn, v, vn);
    }
    free(v);
}

static uint64_t test_seed(void) {
    const char *s = getenv("ETCDBR_TEST_SEED");
    if (s && *s) return strtoull(s, NULL, 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
}

static void test_writer_random_trees_round_trip(void **state) {
    (void)state;
    static const uint32_t pss[] = {1024, 2048, 4096, 16384, 65536};
    uint64_t seed = test_seed();
    print_message("random trees: seed %" PRIu64 " (replay with ETCDBR_TEST_SEED=%" PRIu64 ")\n",
                  seed, seed);
    Rng r = {seed};
    for (int round = 0; round < 12; round++) {
        uint32_t ps = pss[rnd(&r) % 5];
        size_t budget = 24u << 20;
        Node root = {0};
        random_bucket(&r, &root, 0, ps, &budget);
        round_trip(&root, ps, "random.db");
        node_free(&root);
    }
}

/* ---- the bytes on disk ---- */

static void test_writer_meta_pages_and_bucket_sequences_follow_bbolt(void **state) {
    (void)state;
    char path[512];
    BboltWriter *w = NULL;
    tmp_path(path, sizeof path, "meta.db");
    unlink(path);
    OK(bbolt_writer_open(path, 1024, &w));
    OK(bbolt_writer_begin_bucket(w, "a", 1));
    OK(bbolt_writer_set_sequence(w, 7));
    OK(bbolt_writer_put(w, "k", 1, "v", 1));
    OK(bbolt_writer_end_bucket(w));
    OK(bbolt_writer_begin_bucket(w, "b", 1));
    OK(bbolt_writer_set_sequence(w, UINT64_MAX));
    OK(bbolt_writer_end_bucket(w));
    OK(bbolt_writer_finish(w));
    assert_int_equal(bbolt_writer_keys(w), 1);
    uint64_t pages = bbolt_writer_pages(w);
    bbolt_writer_free(w);
    assert_true(exists(path)); /* a finished db is kept */

    size_t n;
    uint8_t *f = read_file(path, &n);
    assert_int_equal(n, pages * 1024);
    uint64_t root = 0, freelist = 0;
    for (uint64_t i = 0; i < 2; i++) {
        const uint8_t *pg = f + i * 1024, *m = pg + 16;
        assert_int_equal(rd64(pg), i);
        assert_int_equal(rd16(pg + 8), 0x04);
        assert_int_equal(rd32(m), 0xED0CDAEDu);
        assert_int_equal(rd32(m + 4), 2);
        assert_int_equal(rd32(m + 8), 1024);
        assert_int_equal(rd32(m + 12), 0);
        assert_int_equal(rd64(m + 24), 0);     /* root bucket sequence */
        assert_int_equal(rd64(m + 40), pages); /* high-water mark */
        assert_int_equal(rd64(m + 48), i);     /* txid */
        uint64_t h = 0xcbf29ce484222325ull;
        for (int b = 0; b < 56; b++)
            h = (h ^ m[b]) * 0x100000001b3ull;
        assert_int_equal(rd64(m + 56), h);
        root = rd64(m + 16);
        freelist = rd64(m + 32);
    }
    assert_int_equal(freelist, pages - 1);
    const uint8_t *fl = f + freelist * 1024;
    assert_int_equal(rd16(fl + 8), 0x10);
    assert_int_equal(rd16(fl + 10), 0);
    const uint8_t *rp = f + root * 1024;
    assert_int_equal(rd16(rp + 8), 0x02);
    assert_int_equal(rd16(rp + 10), 2);
    uint64_t seqs[2] = {7, UINT64_MAX};
    for (int i = 0; i < 2; i++) {
        const uint8_t *e = rp + 16 + 16 * i;
        assert_int_equal(rd32(e), 1); /* bucket flag */
        assert_int_equal(rd32(e + 8), 1);
        assert_int_equal(rd32(e + 12), 16);
        const uint8_t *val = e + rd32(e + 4) + 1;
        assert_int_equal(rd64(val + 8), seqs[i]);
        uint64_t broot = rd64(val);
        assert_true(broot >= 2 && broot < pages - 1); /* never inline */
    }
    free(f);
    unlink(path);
}

/* ---- bad calls ---- */

static void open_writer(const char *name, char *path, size_t cap, BboltWriter **w) {
    tmp_path(path, cap, name);
    unlink(path);
    OK(bbolt_writer_open(path, 1024, w));
}

static void expect_rc(int rc, int want, const char *msg_part) {
    if (rc != want) fail_msg("got %s (%s), want %s", err_name(rc), err_msg(), err_name(want));
    if (msg_part && !strstr(err_msg(), msg_part))
        fail_msg("message \"%s\" lacks \"%s\"", err_msg(), msg_part);
}

static void test_writer_rejects_keys_out_of_order_naming_the_bucket(void **state) {
    (void)state;
    char path[512];
    BboltWriter *w = NULL;
    open_writer("order.db", path, sizeof path, &w);
    OK(bbolt_writer_begin_bucket(w, "outer", 5));
    OK(bbolt_writer_begin_bucket(w, "in\x01", 3));
    OK(bbolt_writer_put(w, "b", 1, "1", 1));
    expect_rc(bbolt_writer_put(w, "a", 1, "1", 1), ERR_INVALID, "bucket \"outer/in\\x01\"");
    expect_rc(bbolt_writer_put(w, "b", 1, "1", 1), ERR_INVALID, "repeats");
    expect_rc(bbolt_writer_begin_bucket(w, "b", 1), ERR_INVALID, "repeats");
    OK(bbolt_writer_put(w, "ba", 2, "1", 1)); /* a longer key with the same prefix is after */
    OK(bbolt_writer_end_bucket(w));
    /* the nested bucket's name takes its place in outer's key order */
    expect_rc(bbolt_writer_put(w, "in\x01", 3, "1", 1), ERR_INVALID, "bucket \"outer\"");
    expect_rc(bbolt_writer_put(w, "a", 1, "1", 1), ERR_INVALID, "sorts before");
    OK(bbolt_writer_put(w, "in\x02", 3, "1", 1));
    OK(bbolt_writer_end_bucket(w));
    expect_rc(bbolt_writer_begin_bucket(w, "outer", 5), ERR_INVALID, "the root bucket");
    expect_rc(bbolt_writer_begin_bucket(w, "a", 1), ERR_INVALID, "the root bucket");
    assert_true(exists(path));
    bbolt_writer_free(w); /* not finished: the partial file goes */
    assert_false(exists(path));
}

static void test_writer_rejected_calls_leave_the_writer_usable(void **state) {
    (void)state;
    Node root = {0};
    Node *b = node_add_s(&root, "b", 1);
    node_put_s(b, "k1", "v1");
    node_put_s(b, "k2", "v2");
    char path[512];
    BboltWriter *w = NULL;
    BboltDb *db = NULL;
    BboltName names[2];
    open_writer("usable.db", path, sizeof path, &w);
    OK(bbolt_writer_begin_bucket(w, "b", 1));
    OK(bbolt_writer_put(w, "k1", 2, "v1", 2));
    expect_rc(bbolt_writer_put(w, "k0", 2, "v0", 2), ERR_INVALID, NULL);
    expect_rc(bbolt_writer_put(w, "", 0, "v", 1), ERR_INVALID, "empty key");
    OK(bbolt_writer_put(w, "k2", 2, "v2", 2));
    expect_rc(bbolt_writer_finish(w), ERR_INVALID, "still open");
    OK(bbolt_writer_end_bucket(w));
    OK(bbolt_writer_finish(w));
    expect_rc(bbolt_writer_put(w, "k3", 2, "v", 1), ERR_INVALID, "finished");
    expect_rc(bbolt_writer_finish(w), ERR_INVALID, "finished");
    bbolt_writer_free(w);
    OK(bbolt_open(path, 0, &db));
    OK(bbolt_check(db, NULL));
    verify_bucket(db, names, 0, &root);
    bbolt_close(db);
    unlink(path);
    node_free(&root);
}

static void test_writer_rejects_calls_without_an_open_bucket(void **state) {
    (void)state;
    char path[512];
    BboltWriter *w = NULL;
    open_writer("nobucket.db", path, sizeof path, &w);
    expect_rc(bbolt_writer_put(w, "k", 1, "v", 1), ERR_INVALID, "no bucket open");
    expect_rc(bbolt_writer_end_bucket(w), ERR_INVALID, "no bucket open");
    expect_rc(bbolt_writer_set_sequence(w, 1), ERR_INVALID, "no bucket open");
    bbolt_writer_free(w);
    assert_false(exists(path));
}

static void test_writer_rejects_finish_with_a_bucket_open(void **state) {
    (void)state;
    char path[512];
    BboltWriter *w = NULL;
    open_writer("open.db", path, sizeof path, &w);
    OK(bbolt_writer_begin_bucket(w, "a", 1));
    OK(bbolt_writer_begin_bucket(w, "b", 1));
    OK(bbolt_writer_put(w, "k", 1, "v", 1));
    OK(bbolt_writer_end_bucket(w));
    expect_rc(bbolt_writer_finish(w), ERR_INVALID, "bucket \"a\" still open");
    bbolt_writer_free(w);
    assert_false(exists(path));
}

static void test_writer_rejects_an_existing_path_and_leaves_it_alone(void **state) {
    (void)state;
    char path[512];
    BboltWriter *w = NULL;
    tmp_path(path, sizeof path, "exists.db");
    write_file(path, "precious", 8);
    expect_rc(bbolt_writer_open(path, 0, &w), ERR_EXISTS, path);
    assert_null(w);
    size_t n;
    uint8_t *f = read_file(path, &n);
    assert_int_equal(n, 8);
    assert_memory_equal(f, "precious", 8);
    free(f);
    unlink(path);
}

static void test_writer_rejects_bad_sizes(void **state) {
    (void)state;
    char path[512];
    BboltWriter *w = NULL;
    static const uint32_t bad_ps[] = {512, 1000, 3000, 131072, 1};
    tmp_path(path, sizeof path, "sizes.db");
    unlink(path);
    for (size_t i = 0; i < sizeof bad_ps / sizeof bad_ps[0]; i++) {
        expect_rc(bbolt_writer_open(path, bad_ps[i], &w), ERR_INVALID, "page size");
        assert_null(w);
        assert_false(exists(path));
    }
    uint8_t *big = calloc(1, MAX_KEY + 1);
    assert_non_null(big);
    OK(bbolt_writer_open(path, 0, &w));
    expect_rc(bbolt_writer_begin_bucket(w, "", 0), ERR_INVALID, "empty bucket name");
    expect_rc(bbolt_writer_begin_bucket(w, big, MAX_KEY + 1), ERR_INVALID, "32769");
    OK(bbolt_writer_begin_bucket(w, "b", 1));
    expect_rc(bbolt_writer_put(w, big, MAX_KEY + 1, "v", 1), ERR_INVALID, "32769");
    /* checked before the value is read: the pointer stands for a value that large */
    expect_rc(bbolt_writer_put(w, "k", 1, big, ((size_t)1 << 31) - 1), ERR_INVALID, "2147483647");
    OK(bbolt_writer_put(w, big, MAX_KEY, "v", 1)); /* exactly the limit is fine */
    bbolt_writer_free(w);
    assert_false(exists(path));
    free(big);
}

/* A write error (file size limit) fails the writer for good and free removes the file. Runs
 * in a child: the limit is per process. */
static void test_writer_write_error_fails_the_writer_and_removes_the_file(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "efbig.db");
    unlink(path);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {1 << 20, 1 << 20};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(10);
        BboltWriter *w = NULL;
        uint8_t *v = calloc(1, 3u << 20);
        if (!v || bbolt_writer_open(path, 0, &w) != 0) _exit(11);
        if (bbolt_writer_begin_bucket(w, "b", 1) != 0) _exit(12);
        int rc = bbolt_writer_put(w, "k", 1, v, 3u << 20);
        if (rc == 0) rc = bbolt_writer_end_bucket(w);
        if (rc == 0) rc = bbolt_writer_finish(w);
        if (rc != ERR_IO) _exit(13);
        if (!strstr(err_msg(), path)) _exit(14);
        if (bbolt_writer_put(w, "l", 1, "v", 1) != ERR_INVALID) _exit(15);
        if (bbolt_writer_finish(w) != ERR_INVALID) _exit(16);
        bbolt_writer_free(w);
        free(v);
        _exit(exists(path) ? 17 : 0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_false(exists(path));
}

/* ---- the cursor on dbs bbolt_writer did not write ---- */

static void test_cursor_missing_bucket_or_plain_key_is_not_found(void **state) {
    (void)state;
    Node root = {0};
    Node *a = node_add_s(&root, "a", 1);
    node_put_s(a, "k", "v");
    node_add_s(a, "sub", 1);
    char path[512];
    BboltWriter *w = NULL;
    BboltDb *db = NULL;
    BboltCursor *c = NULL;
    open_writer("paths.db", path, sizeof path, &w);
    write_kids(w, &root);
    OK(bbolt_writer_finish(w));
    bbolt_writer_free(w);
    OK(bbolt_open(path, 0, &db));
    BboltName p1[] = {{"nope", 4}};
    expect_rc(bbolt_cursor_open(db, p1, 1, &c), ERR_NOT_FOUND, "no such bucket");
    assert_null(c);
    BboltName p2[] = {{"a", 1}, {"k", 1}};
    expect_rc(bbolt_cursor_open(db, p2, 2, &c), ERR_NOT_FOUND, "plain key");
    BboltName p3[] = {{"a", 1}, {"sub", 3}, {"x", 1}};
    expect_rc(bbolt_cursor_open(db, p3, 3, &c), ERR_NOT_FOUND, "\"x\"");
    BboltName p4[] = {{"a", 1}, {"", 0}};
    expect_rc(bbolt_cursor_open(db, p4, 2, &c), ERR_NOT_FOUND, NULL);
    OK(bbolt_cursor_open(db, p3, 2, &c)); /* a/sub: empty */
    BboltItem it;
    int got = 1;
    OK(bbolt_cursor_next(c, &it, &got));
    assert_int_equal(got, 0);
    bbolt_cursor_close(c);
    bbolt_cursor_close(NULL);
    bbolt_close(db);
    unlink(path);
    node_free(&root);
}

/* Lays out a leaf page at p (len bytes available) with n elements; returns its size. */
static size_t leaf_page(uint8_t *p, uint64_t id, int n, const char *const *keys,
                        const uint8_t *const *vals, const size_t *vlens, const uint32_t *flags) {
    size_t off = 16 + 16 * (size_t)n;
    wr64(p, id);
    wr16(p + 8, 0x02);
    wr16(p + 10, (uint16_t)n);
    for (int i = 0; i < n; i++) {
        uint8_t *e = p + 16 + 16 * i;
        size_t kn = strlen(keys[i]);
        wr32(e, flags[i]);
        wr32(e + 4, (uint32_t)(off - (16 + 16 * (size_t)i)));
        wr32(e + 8, (uint32_t)kn);
        wr32(e + 12, (uint32_t)vlens[i]);
        memcpy(p + off, keys[i], kn);
        memcpy(p + off + kn, vals[i], vlens[i]);
        off += kn + vlens[i];
    }
    return off;
}

/* A db with inline buckets (as bbolt writes small ones): root leaf {"inl": inline bucket
 * {"a": "1", "bb": "22", "sub": inline empty bucket}}. */
static void write_inline_db(const char *path) {
    enum { PS = 4096 };
    uint8_t *f = calloc(4, PS);
    assert_non_null(f);
    uint8_t sub[32] = {0}, inl[512] = {0};
    wr16(sub + 16 + 8, 0x02); /* {root 0, seq 0} + an empty leaf page */
    const char *ik[] = {"a", "bb", "sub"};
    const uint8_t *iv[] = {(const uint8_t *)"1", (const uint8_t *)"22", sub};
    size_t ivl[] = {1, 2, sizeof sub};
    uint32_t ifl[] = {0, 0, 1};
    wr64(inl + 8, 5); /* {root 0, seq 5} */
    size_t inl_len = 16 + leaf_page(inl + 16, 0, 3, ik, iv, ivl, ifl);
    const char *rk[] = {"inl"};
    const uint8_t *rv[] = {inl};
    uint32_t rfl[] = {1};
    leaf_page(f + 2 * PS, 2, 1, rk, rv, &inl_len, rfl);
    wr64(f + 3 * PS, 3);
    wr16(f + 3 * PS + 8, 0x10);
    for (int i = 0; i < 2; i++) {
        uint8_t *m = f + i * PS + 16;
        wr64(f + i * PS, (uint64_t)i);
        wr16(f + i * PS + 8, 0x04);
        wr32(m, 0xED0CDAEDu);
        wr32(m + 4, 2);
        wr32(m + 8, PS);
        wr64(m + 16, 2);
        wr64(m + 32, 3);
        wr64(m + 40, 4);
        wr64(m + 48, (uint64_t)i + 10);
        uint64_t h = 0xcbf29ce484222325ull;
        for (int b = 0; b < 56; b++)
            h = (h ^ m[b]) * 0x100000001b3ull;
        wr64(m + 56, h);
    }
    write_file(path, f, 4 * PS);
    free(f);
}

static void test_cursor_reads_inline_buckets(void **state) {
    (void)state;
    char path[512];
    BboltDb *db = NULL;
    BboltName names[4];
    tmp_path(path, sizeof path, "inline.db");
    write_inline_db(path);
    OK(bbolt_open(path, 0, &db));
    OK(bbolt_check(db, NULL));
    Node root = {0};
    Node *inl = node_add_s(&root, "inl", 1);
    node_put_s(inl, "a", "1");
    node_put_s(inl, "bb", "22");
    node_add_s(inl, "sub", 1);
    verify_bucket(db, names, 0, &root);
    bbolt_close(db);
    unlink(path);
    node_free(&root);
}

/* etcd's own db (the Go tool's fixture snapshot): every bucket iterates in ascending order and
 * every plain value equals what bbolt_get finds. */
static void test_cursor_agrees_with_bbolt_get_on_an_etcd_snapshot(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", source_dir(), FIXTURE_FULL);
    BboltDb *db = NULL;
    BboltCursor *root = NULL, *c = NULL;
    BboltItem it, b;
    int got = 0;
    size_t keys = 0, buckets = 0;
    OK(bbolt_open(path, file_len(path) - 32, &db));
    OK(bbolt_cursor_open(db, NULL, 0, &root));
    for (;;) {
        OK(bbolt_cursor_next(root, &b, &got));
        if (!got) break;
        assert_true(b.is_bucket);
        char name[64] = {0};
        assert_true(b.key_len < sizeof name);
        memcpy(name, b.key, b.key_len);
        BboltName p[] = {{b.key, b.key_len}};
        OK(bbolt_cursor_open(db, p, 1, &c));
        uint8_t prev[512];
        size_t prev_len = 0;
        for (size_t i = 0;; i++) {
            OK(bbolt_cursor_next(c, &it, &got));
            if (!got) break;
            assert_true(it.key_len <= sizeof prev);
            if (i > 0) {
                int cmp = memcmp(prev, it.key, prev_len < it.key_len ? prev_len : it.key_len);
                assert_true(cmp < 0 || (cmp == 0 && prev_len < it.key_len));
            }
            memcpy(prev, it.key, it.key_len);
            prev_len = it.key_len;
            if (it.is_bucket) continue;
            uint8_t *v = malloc(it.value_len + 1);
            size_t vlen = 0;
            assert_non_null(v);
            OK(bbolt_get(db, name, it.key, it.key_len, v, it.value_len, &vlen));
            assert_int_equal(vlen, it.value_len);
            assert_memory_equal(v, it.value, vlen);
            free(v);
            keys++;
        }
        bbolt_cursor_close(c);
        buckets++;
    }
    bbolt_cursor_close(root);
    bbolt_close(db);
    print_message("fixture: %zu buckets, %zu keys\n", buckets, keys);
    assert_true(buckets >= 5);
    assert_true(keys > 190); /* 190 revisions of keys, plus meta and members */
}

/* Branch page damage: a child that is an ancestor, outside the db, or not a tree page gives
 * ERR_CORRUPT naming the page, in bounded time. */
static void test_cursor_reports_corrupt_branch_children(void **state) {
    (void)state;
    char path[512], bad[512];
    Node root = {0};
    Node *bk = node_add_s(&root, "b", 1);
    char k[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(k, sizeof k, "key%06d", i);
        node_put_s(bk, k, "value");
    }
    BboltWriter *w = NULL;
    open_writer("branch.db", path, sizeof path, &w);
    write_kids(w, &root);
    OK(bbolt_writer_finish(w));
    bbolt_writer_free(w);
    node_free(&root);
    size_t n;
    uint8_t *f = read_file(path, &n);
    /* the bucket's root: the value of root leaf element 0 */
    const uint8_t *rootp = f + rd64(f + 1024 + 32) * 1024;
    uint64_t broot = rd64(rootp + 16 + rd32(rootp + 20) + 1);
    uint8_t *bp = f + broot * 1024;
    assert_int_equal(rd16(bp + 8), 0x01); /* a branch */
    uint8_t *child = f + rd64(bp + 16 + 8) * 1024;
    assert_int_equal(rd16(child + 8), 0x01); /* three levels: its child is a branch too */
    struct {
        uint8_t *elem;
        uint64_t to;
        const char *msg;
    } cases[] = {
        {bp + 16 + 16 + 8, broot, "already on the path"},           /* 2nd child: the root itself */
        {child + 16 + 8, broot, "already on the path"},             /* grandchild: the root */
        {child + 16 + 8, rd64(bp + 16 + 8), "already on the path"}, /* itself */
        {bp + 16 + 8, n / 1024 + 5, "outside the data pages"},
        {bp + 16 + 8, n / 1024 - 1, "want branch or leaf"}, /* the freelist page */
    };
    tmp_path(bad, sizeof bad, "branch-bad.db");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t saved = rd64(cases[i].elem);
        wr64(cases[i].elem, cases[i].to);
        write_file(bad, f, n);
        wr64(cases[i].elem, saved);
        BboltDb *db = NULL;
        BboltCursor *c = NULL;
        BboltItem it;
        int got = 0, rc = 0;
        size_t items = 0;
        OK(bbolt_open(bad, 0, &db));
        BboltName p[] = {{"b", 1}};
        OK(bbolt_cursor_open(db, p, 1, &c));
        while ((rc = bbolt_cursor_next(c, &it, &got)) == 0 && got)
            items++;
        expect_rc(rc, ERR_CORRUPT, cases[i].msg);
        assert_non_null(strstr(err_msg(), "page "));
        assert_true(items < 20000);
        OK(bbolt_cursor_next(c, &it, &got)); /* then stays at the end */
        assert_int_equal(got, 0);
        bbolt_cursor_close(c);
        bbolt_close(db);
    }
    free(f);
    unlink(bad);
    unlink(path);
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/etcdbr-bbw.XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return sh(NULL, 0, "%s", cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_empty_db_round_trips),
        cmocka_unit_test(test_writer_one_empty_bucket_round_trips),
        cmocka_unit_test(test_writer_ten_buckets_round_trip),
        cmocka_unit_test(test_writer_200k_small_keys_round_trip),
        cmocka_unit_test(test_writer_keys_up_to_max_size_round_trip),
        cmocka_unit_test(test_writer_value_sizes_round_trip),
        cmocka_unit_test(test_writer_nested_buckets_interleaved_with_keys_round_trip),
        cmocka_unit_test(test_writer_random_trees_round_trip),
        cmocka_unit_test(test_writer_meta_pages_and_bucket_sequences_follow_bbolt),
        cmocka_unit_test(test_writer_rejects_keys_out_of_order_naming_the_bucket),
        cmocka_unit_test(test_writer_rejected_calls_leave_the_writer_usable),
        cmocka_unit_test(test_writer_rejects_calls_without_an_open_bucket),
        cmocka_unit_test(test_writer_rejects_finish_with_a_bucket_open),
        cmocka_unit_test(test_writer_rejects_an_existing_path_and_leaves_it_alone),
        cmocka_unit_test(test_writer_rejects_bad_sizes),
        cmocka_unit_test(test_writer_write_error_fails_the_writer_and_removes_the_file),
        cmocka_unit_test(test_cursor_missing_bucket_or_plain_key_is_not_found),
        cmocka_unit_test(test_cursor_reads_inline_buckets),
        cmocka_unit_test(test_cursor_agrees_with_bbolt_get_on_an_etcd_snapshot),
        cmocka_unit_test(test_cursor_reports_corrupt_branch_children),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
