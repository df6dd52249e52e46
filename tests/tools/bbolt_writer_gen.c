/* bbolt_writer_gen: writes a bbolt db with bbolt_writer for tests/integration/
 * test_bbolt_writer_check.sh (which runs the real bbolt's check on it) and for write-speed
 * measurements. Content is a pure function of kind, page size, count and seed, and keys are
 * printable where the integration test reads them back with the bbolt CLI.
 *   bbolt_writer_gen [--page-size N] [--count N] [--seed N] KIND PATH
 * KIND: small | big | many | nested | keysizes | random | bench-big
 * Prints one line: kind, pages, keys, bytes, seconds for the puts and with finish (fsyncs).
 * Exit 0 on success, 1 on a writer error (message on stderr), 2 on usage. */
#include "common/err.h"
#include "format/bbolt_writer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    BboltWriter *w;
    uint32_t ps;
    uint64_t count;
    uint64_t rng;
    uint8_t *buf; /* value scratch, BUF_MAX bytes */
    uint64_t value_bytes;
    uint64_t keys_left;  /* random: keys still allowed */
    uint64_t bytes_left; /* random: value bytes still allowed */
} Gen;

#define BUF_MAX ((size_t)8 << 20)
#define CHECK(x)                                                                                   \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_) return rc_;                                                                       \
    } while (0)

static uint64_t rnd(Gen *g) { /* splitmix64 */
    uint64_t z = (g->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(Gen *g, uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd(g);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int put(Gen *g, const void *k, size_t kn, const void *v, size_t vn) {
    g->value_bytes += vn;
    return bbolt_writer_put(g->w, k, kn, v, vn);
}

static int put_s(Gen *g, const char *k, const char *v) {
    return put(g, k, strlen(k), v, strlen(v));
}

static int begin_s(Gen *g, const char *name) {
    return bbolt_writer_begin_bucket(g->w, name, strlen(name));
}

/* three buckets of 1000 printable keys: key-%06d -> value-%d */
static int gen_small(Gen *g) {
    const char *names[] = {"alpha", "beta", "gamma"};
    char k[32], v[32];
    for (int b = 0; b < 3; b++) {
        CHECK(begin_s(g, names[b]));
        for (int i = 0; i < 1000; i++) {
            snprintf(k, sizeof k, "key-%06d", i);
            snprintf(v, sizeof v, "value-%d", i * (b + 1));
            CHECK(put_s(g, k, v));
        }
        CHECK(bbolt_writer_end_bucket(g->w));
    }
    return 0;
}

/* values of 0, 1, about a page and overflow sizes up to 5 MiB */
static int gen_big(Gen *g) {
    size_t sizes[] = {0,         1,         g->ps - 40,     g->ps - 39,      g->ps,
                      g->ps + 1, 3 * g->ps, 65536,          1572864,         5u << 20,
                      12345,     2,         (5u << 20) + 7, 100 * g->ps + 3, 0};
    char k[32];
    CHECK(begin_s(g, "big"));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        fill(g, g->buf, sizes[i]);
        snprintf(k, sizeof k, "v%03zu", i);
        CHECK(put(g, k, strlen(k), g->buf, sizes[i]));
    }
    return bbolt_writer_end_bucket(g->w);
}

/* etcd-like: bucket "key" with count revision keys (8-byte big-endian main, '_', 8-byte sub)
 * and 64-byte values, bucket "meta" with two keys */
static int gen_many(Gen *g) {
    uint8_t k[17], v[64];
    CHECK(begin_s(g, "key"));
    for (uint64_t i = 0; i < g->count; i++) {
        uint64_t rev = i + 2;
        for (int b = 0; b < 8; b++) {
            k[b] = (uint8_t)(rev >> (56 - 8 * b));
            k[9 + b] = 0;
        }
        k[8] = '_';
        fill(g, v, sizeof v);
        CHECK(put(g, k, sizeof k, v, sizeof v));
    }
    CHECK(bbolt_writer_end_bucket(g->w));
    CHECK(begin_s(g, "meta"));
    CHECK(put_s(g, "consistent_index", "\x00\x00\x00\x00\x00\x00\x00\x07"));
    CHECK(put_s(g, "term", "\x00\x00\x00\x00\x00\x00\x00\x02"));
    return bbolt_writer_end_bucket(g->w);
}

/* buckets three levels deep, interleaved with plain keys, sequences set */
static int gen_nested(Gen *g) {
    char k[32];
    for (int a = 0; a < 3; a++) {
        snprintf(k, sizeof k, "top%d", a);
        CHECK(begin_s(g, k));
        CHECK(bbolt_writer_set_sequence(g->w, (uint64_t)a * 1000));
        CHECK(put_s(g, "a-key", "1"));
        CHECK(begin_s(g, "b-sub"));
        CHECK(put_s(g, "a", "x"));
        CHECK(begin_s(g, "b-subsub"));
        for (int i = 0; i < 500; i++) {
            snprintf(k, sizeof k, "deep-%05d", i);
            CHECK(put_s(g, k, "deep value"));
        }
        CHECK(bbolt_writer_end_bucket(g->w));
        CHECK(begin_s(g, "c-empty"));
        CHECK(bbolt_writer_end_bucket(g->w));
        CHECK(put_s(g, "d", "y"));
        CHECK(bbolt_writer_end_bucket(g->w));
        CHECK(put_s(g, "c-key", "2"));
        CHECK(bbolt_writer_end_bucket(g->w));
    }
    return 0;
}

/* keys of 1 to 32768 bytes: small pages get branch pages with overflow */
static int gen_keysizes(Gen *g) {
    static uint8_t k[32768];
    size_t sizes[] = {4, 5, 100, 1000, 4095, 4096, 4097, 10000, 32767, 32768};
    CHECK(begin_s(g, "keys"));
    for (uint32_t i = 0; i < 300; i++) {
        size_t n = sizes[i % 10];
        k[0] = (uint8_t)(i >> 24), k[1] = (uint8_t)(i >> 16), k[2] = (uint8_t)(i >> 8);
        k[3] = (uint8_t)i;
        memset(k + 4, 'k', n - 4);
        CHECK(put(g, k, n, "v", i % 3));
    }
    return bbolt_writer_end_bucket(g->w);
}

/* a seeded random tree, at most 3 levels of nested buckets, at most 100000 keys and 64 MiB of
 * values in all: keys are a 4-byte counter then random bytes, so they ascend */
static int gen_random_bucket(Gen *g, int depth) {
    uint8_t k[4 + 300];
    uint64_t n = depth == 0 ? 1 + rnd(g) % 8 : rnd(g) % 3000;
    unsigned nested = 0;
    for (uint32_t i = 0; i < n && g->keys_left > 0; i++) {
        size_t kn = 4 + (rnd(g) % 8 == 0 ? rnd(g) % 300 : rnd(g) % 24);
        k[0] = (uint8_t)(i >> 24), k[1] = (uint8_t)(i >> 16), k[2] = (uint8_t)(i >> 8);
        k[3] = (uint8_t)i;
        fill(g, k + 4, kn - 4);
        if (depth == 0 || (depth < 3 && nested < 4 && rnd(g) % 200 == 0)) {
            nested++;
            CHECK(bbolt_writer_begin_bucket(g->w, k, kn));
            if (rnd(g) % 2) CHECK(bbolt_writer_set_sequence(g->w, rnd(g)));
            CHECK(gen_random_bucket(g, depth + 1));
            CHECK(bbolt_writer_end_bucket(g->w));
            continue;
        }
        uint64_t r = rnd(g) % 100;
        size_t vn = r < 70   ? rnd(g) % 100
                    : r < 90 ? rnd(g) % (2 * g->ps)
                    : r < 99 ? rnd(g) % 65536
                             : rnd(g) % (2u << 20);
        if (vn > g->bytes_left) vn = rnd(g) % 100;
        g->bytes_left -= vn < g->bytes_left ? vn : g->bytes_left;
        g->keys_left--;
        fill(g, g->buf, vn);
        CHECK(put(g, k, kn, g->buf, vn));
    }
    return 0;
}

/* count values of 5 MiB in one bucket (write speed for big values) */
static int gen_bench_big(Gen *g) {
    size_t vn = 5u << 20;
    char k[32];
    fill(g, g->buf, vn);
    CHECK(begin_s(g, "big"));
    for (uint64_t i = 0; i < g->count; i++) {
        snprintf(k, sizeof k, "v%08" PRIu64, i);
        g->buf[0] = (uint8_t)i;
        CHECK(put(g, k, strlen(k), g->buf, vn));
    }
    return bbolt_writer_end_bucket(g->w);
}

static int usage(void) {
    fprintf(stderr, "usage: bbolt_writer_gen [--page-size N] [--count N] [--seed N] "
                    "small|big|many|nested|keysizes|random|bench-big PATH\n");
    return 2;
}

int main(int argc, char **argv) {
    Gen g = {.ps = 4096, .count = 0, .rng = 1, .keys_left = 100000, .bytes_left = 64u << 20};
    int i = 1, rc;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        unsigned long long v = strtoull(argv[i + 1], NULL, 0);
        if (strcmp(argv[i], "--page-size") == 0)
            g.ps = (uint32_t)v;
        else if (strcmp(argv[i], "--count") == 0)
            g.count = v;
        else if (strcmp(argv[i], "--seed") == 0)
            g.rng = v;
        else
            return usage();
    }
    if (argc - i != 2) return usage();
    const char *kind = argv[i], *path = argv[i + 1];
    int (*fn)(Gen *) = NULL;
    if (strcmp(kind, "small") == 0) fn = gen_small;
    if (strcmp(kind, "big") == 0) fn = gen_big;
    if (strcmp(kind, "many") == 0) fn = gen_many;
    if (strcmp(kind, "nested") == 0) fn = gen_nested;
    if (strcmp(kind, "keysizes") == 0) fn = gen_keysizes;
    if (strcmp(kind, "bench-big") == 0) fn = gen_bench_big;
    if (strcmp(kind, "many") == 0 && g.count == 0) g.count = 1000000;
    if (strcmp(kind, "bench-big") == 0 && g.count == 0) g.count = 100;
    if (!fn && strcmp(kind, "random") != 0) return usage();
    uint64_t seed = g.rng;
    g.buf = malloc(BUF_MAX);
    if (!g.buf) return 1;
    double t0 = now_s(), t1 = 0;
    rc = bbolt_writer_open(path, g.ps, &g.w);
    if (!rc) rc = fn ? fn(&g) : gen_random_bucket(&g, 0);
    t1 = now_s();
    if (!rc) rc = bbolt_writer_finish(g.w);
    double t2 = now_s();
    if (rc) {
        fprintf(stderr, "bbolt_writer_gen %s %s: %s: %s\n", kind, path, err_name(rc), err_msg());
    } else {
        double mb = (double)bbolt_writer_bytes(g.w) / 1e6;
        printf("kind=%s seed=%" PRIu64 " page_size=%u pages=%" PRIu64 " keys=%" PRIu64
               " bytes=%" PRIu64 " value_bytes=%" PRIu64
               " put_s=%.3f total_s=%.3f keys_per_s=%.0f mb_per_s=%.1f mb_per_s_with_fsync=%.1f\n",
               kind, seed, g.ps, bbolt_writer_pages(g.w), bbolt_writer_keys(g.w),
               bbolt_writer_bytes(g.w), g.value_bytes, t1 - t0, t2 - t0,
               (double)bbolt_writer_keys(g.w) / (t1 - t0), mb / (t1 - t0), mb / (t2 - t0));
    }
    bbolt_writer_free(g.w);
    free(g.buf);
    return rc ? 1 : 0;
}
