/* test_codec: sha256 framing and the compression filters (gzip, zlib, Go LZW, zstd).
 * Round trips through odd write and read sizes, the Go-written fixture stores, Go LZW reference
 * vectors (tests/unit/data/lzw, made by Go's compress/lzw), and the truncated/corrupt cases that
 * must give ERR_CORRUPT; gzip in both modes (parallel members, single stream), member by member.
 * Fixtures are found under $ETCDBR_SOURCE_DIR (default "."). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/testutil.h"

#include "codec/compress.h"
#include "codec/filter_group.h"
#include "codec/io.h"
#include "codec/lzw.h"
#include "codec/sha256.h"
#include "common/err.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

/* ---- helpers ---- */

/* Growable in-memory sink; finish() does nothing. */
typedef struct {
    IoWriter base;
    uint8_t *buf;
    size_t len, cap;
    size_t fail_after; /* fail writes once len would pass this (SIZE_MAX = never) */
} MemSink;

static int sink_write(IoWriter *w, const void *buf, size_t len) {
    MemSink *m = (MemSink *)w;
    if (m->len + len > m->fail_after) return err_set(ERR_IO, "sink: disk full (test)");
    if (m->len + len > m->cap) {
        size_t cap = (m->len + len) * 2 + 64;
        uint8_t *p = realloc(m->buf, cap);
        if (!p) return err_set(ERR_NOMEM, "sink: out of memory");
        m->buf = p;
        m->cap = cap;
    }
    if (len) memcpy(m->buf + m->len, buf, len);
    m->len += len;
    return 0;
}
static int sink_finish(IoWriter *w) {
    (void)w;
    return 0;
}
static void sink_free(IoWriter *w) {
    (void)w;
}
static const IoWriterVt sink_vt = {sink_write, sink_finish, sink_free};

static void sink_init(MemSink *m) {
    memset(m, 0, sizeof *m);
    m->base.vt = &sink_vt;
    m->fail_after = SIZE_MAX;
}
static void sink_release(MemSink *m) {
    free(m->buf);
    memset(m, 0, sizeof *m);
}

/* Deterministic pseudo-random bytes (xorshift64). */
static void fill_random(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
}

/* Compressible bytes: JSON-ish lines with counters, like delta payloads. */
static void fill_text(uint8_t *p, size_t n) {
    size_t off = 0;
    for (unsigned i = 0; off < n; i++) {
        char line[96];
        int k =
            snprintf(line, sizeof line, "{\"key\":\"/registry/pods/ns%u/pod-%03u\",\"rev\":%u},",
                     i % 7, i % 500, i);
        for (int j = 0; j < k && off < n; j++)
            p[off++] = (uint8_t)line[j];
    }
}

static const size_t write_sizes[] = {1, 2, 3, 1021, 65539, 7, 131071, 5};
static const size_t read_sizes[] = {1, 5, 4099, 65537, 3, 262144};
#define NSIZES(a) (sizeof(a) / sizeof((a)[0]))

/* Compresses data with kind into out, through odd-size writes if asked. 0 or the first error. */
static int compress_buf(CompressKind kind, const uint8_t *data, size_t len, MemSink *out,
                        int odd_writes) {
    IoWriter *w = compress_writer_new(kind, &out->base);
    assert_non_null(w);
    int rc = 0;
    size_t off = 0;
    for (size_t i = 0; off < len && rc == 0; i++) {
        size_t n = odd_writes ? write_sizes[i % NSIZES(write_sizes)] : len;
        if (n > len - off) n = len - off;
        rc = io_write(w, data + off, n);
        off += n;
    }
    if (rc == 0) rc = io_finish(w);
    io_writer_free(w);
    return rc;
}

/* Reads r through odd sizes into out until the end or an error; the reader's code. */
static int drain_reader(IoReader *r, MemSink *out) {
    uint8_t *tmp = malloc(262144);
    assert_non_null(tmp);
    int rc = 0;
    for (size_t i = 0;; i++) {
        size_t got = 0;
        rc = io_read(r, tmp, read_sizes[i % NSIZES(read_sizes)], &got);
        if (rc < 0 || got == 0) break;
        assert_int_equal(sink_write(&out->base, tmp, got), 0);
    }
    free(tmp);
    return rc;
}

/* Decompresses buf with kind into out through odd-size reads. 0 or the reader's error. */
static int decompress_buf(CompressKind kind, const uint8_t *buf, size_t len, MemSink *out) {
    IoReader *src = io_mem_reader_new(buf, len);
    IoReader *r = decompress_reader_new(kind, src);
    assert_non_null(r);
    int rc = drain_reader(r, out);
    io_reader_free(r);
    io_reader_free(src);
    return rc;
}

static void round_trip(CompressKind kind, const uint8_t *data, size_t len) {
    MemSink z, plain;
    sink_init(&z);
    sink_init(&plain);
    assert_int_equal(compress_buf(kind, data, len, &z, 1), 0);
    int rc = decompress_buf(kind, z.buf, z.len, &plain);
    if (rc != 0) fail_msg("%s: %s", err_name(rc), err_msg());
    assert_int_equal(plain.len, len);
    if (len) assert_memory_equal(plain.buf, data, len);
    /* One big write must give the same stream as many odd ones. */
    MemSink z1;
    sink_init(&z1);
    assert_int_equal(compress_buf(kind, data, len, &z1, 0), 0);
    assert_int_equal(z1.len, z.len);
    assert_memory_equal(z1.buf, z.buf, z.len);
    sink_release(&z1);
    sink_release(&z);
    sink_release(&plain);
}

static void round_trip_all_sizes(CompressKind kind) {
    enum { BIG = 3 * 1024 * 1024 };
    uint8_t *data = malloc(BIG);
    assert_non_null(data);
    round_trip(kind, data, 0);
    round_trip(kind, (const uint8_t *)"hello, etcd", 11);
    fill_random(data, BIG, 1);
    round_trip(kind, data, BIG);
    fill_text(data, BIG);
    round_trip(kind, data, BIG);
    memset(data, 0, BIG);
    round_trip(kind, data, BIG);
    free(data);
}

static char *source_path(const char *rel) {
    const char *root = getenv("ETCDBR_SOURCE_DIR");
    if (!root || !*root) root = ".";
    size_t n = strlen(root) + strlen(rel) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", root, rel);
    return p;
}

/* ---- compression round trips ---- */

static void test_gzip_round_trips_empty_small_and_3mib(void **state) {
    (void)state;
    round_trip_all_sizes(COMPRESS_GZIP);
}
static void test_zlib_round_trips_empty_small_and_3mib(void **state) {
    (void)state;
    round_trip_all_sizes(COMPRESS_ZLIB);
}
static void test_lzw_round_trips_empty_small_and_3mib(void **state) {
    (void)state;
    round_trip_all_sizes(COMPRESS_LZW);
}
static void test_zstd_round_trips_empty_small_and_3mib(void **state) {
    (void)state;
    round_trip_all_sizes(COMPRESS_ZSTD);
}
static void test_none_passes_bytes_through(void **state) {
    (void)state;
    MemSink z;
    sink_init(&z);
    assert_int_equal(compress_buf(COMPRESS_NONE, (const uint8_t *)"abc", 3, &z, 1), 0);
    assert_int_equal(z.len, 3);
    assert_memory_equal(z.buf, "abc", 3);
    sink_release(&z);
    round_trip(COMPRESS_NONE, (const uint8_t *)"hello", 5);
}

/* ---- format details ---- */

static void test_gzip_writer_emits_go_header_and_trailer(void **state) {
    (void)state;
    static const uint8_t go_hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    MemSink z;
    sink_init(&z);
    assert_int_equal(compress_buf(COMPRESS_GZIP, (const uint8_t *)"abc", 3, &z, 0), 0);
    assert_true(z.len > 18);
    assert_memory_equal(z.buf, go_hdr, sizeof go_hdr);
    /* CRC-32("abc") = 0x352441c2, ISIZE 3, both little-endian. */
    static const uint8_t tr[8] = {0xc2, 0x41, 0x24, 0x35, 3, 0, 0, 0};
    assert_memory_equal(z.buf + z.len - 8, tr, 8);
    sink_release(&z);
    /* Empty input still gives a whole member, as Go's Close does. */
    sink_init(&z);
    assert_int_equal(compress_buf(COMPRESS_GZIP, NULL, 0, &z, 0), 0);
    assert_memory_equal(z.buf, go_hdr, sizeof go_hdr);
    assert_true(z.len >= 20);
    sink_release(&z);
}

static void test_zlib_writer_emits_default_level_header(void **state) {
    (void)state;
    MemSink z;
    sink_init(&z);
    assert_int_equal(compress_buf(COMPRESS_ZLIB, (const uint8_t *)"abc", 3, &z, 0), 0);
    assert_int_equal(z.buf[0], 0x78);
    assert_int_equal(z.buf[1], 0x9c);
    /* Adler-32("abc") = 0x024d0127, big-endian. */
    static const uint8_t ad[4] = {0x02, 0x4d, 0x01, 0x27};
    assert_memory_equal(z.buf + z.len - 4, ad, 4);
    sink_release(&z);
}

static void test_gzip_reader_accepts_concatenated_members(void **state) {
    (void)state;
    MemSink a, b, out;
    sink_init(&a);
    sink_init(&b);
    sink_init(&out);
    assert_int_equal(compress_buf(COMPRESS_GZIP, (const uint8_t *)"first,", 6, &a, 0), 0);
    assert_int_equal(compress_buf(COMPRESS_GZIP, (const uint8_t *)"second", 6, &b, 0), 0);
    assert_int_equal(sink_write(&a.base, b.buf, b.len), 0);
    assert_int_equal(decompress_buf(COMPRESS_GZIP, a.buf, a.len, &out), 0);
    assert_int_equal(out.len, 12);
    assert_memory_equal(out.buf, "first,second", 12);
    sink_release(&a);
    sink_release(&b);
    sink_release(&out);
}

static void expect_trailing_garbage_rejected(CompressKind kind) {
    MemSink z, out;
    sink_init(&z);
    sink_init(&out);
    assert_int_equal(compress_buf(kind, (const uint8_t *)"payload", 7, &z, 0), 0);
    static const uint8_t junk[3] = {0, 'x', 0x1f};
    for (size_t n = 1; n <= sizeof junk; n++) {
        MemSink g;
        sink_init(&g);
        assert_int_equal(sink_write(&g.base, z.buf, z.len), 0);
        assert_int_equal(sink_write(&g.base, junk, n), 0);
        out.len = 0;
        int rc = decompress_buf(kind, g.buf, g.len, &out);
        if (rc != ERR_CORRUPT)
            fail_msg("kind %d: trailing %zu bytes gave %s", (int)kind, n, err_name(rc));
        sink_release(&g);
    }
    sink_release(&z);
    sink_release(&out);
}

static void test_readers_reject_trailing_garbage(void **state) {
    (void)state;
    expect_trailing_garbage_rejected(COMPRESS_GZIP);
    expect_trailing_garbage_rejected(COMPRESS_ZLIB);
    expect_trailing_garbage_rejected(COMPRESS_LZW);
    expect_trailing_garbage_rejected(COMPRESS_ZSTD);
}

/* Every proper prefix of a valid stream must fail with ERR_CORRUPT, never end quietly. */
static void expect_every_truncation_corrupt(CompressKind kind, size_t len) {
    uint8_t *data = malloc(len);
    assert_non_null(data);
    fill_text(data, len / 2);
    fill_random(data + len / 2, len - len / 2, 3);
    MemSink z, out;
    sink_init(&z);
    sink_init(&out);
    assert_int_equal(compress_buf(kind, data, len, &z, 0), 0);
    for (size_t cut = 0; cut < z.len; cut++) {
        out.len = 0;
        int rc = decompress_buf(kind, z.buf, cut, &out);
        if (rc != ERR_CORRUPT)
            fail_msg("kind %d: %zu of %zu bytes gave %s (%zu bytes out)", (int)kind, cut, z.len,
                     err_name(rc), out.len);
    }
    out.len = 0;
    assert_int_equal(decompress_buf(kind, z.buf, z.len, &out), 0);
    assert_int_equal(out.len, len);
    sink_release(&z);
    sink_release(&out);
    free(data);
}

static void test_truncated_gzip_is_corrupt(void **state) {
    (void)state;
    expect_every_truncation_corrupt(COMPRESS_GZIP, 6000);
}
static void test_truncated_zlib_is_corrupt(void **state) {
    (void)state;
    expect_every_truncation_corrupt(COMPRESS_ZLIB, 6000);
}
static void test_truncated_lzw_is_corrupt(void **state) {
    (void)state;
    expect_every_truncation_corrupt(COMPRESS_LZW, 6000);
}
static void test_truncated_zstd_is_corrupt(void **state) {
    (void)state;
    expect_every_truncation_corrupt(COMPRESS_ZSTD, 6000);
}

static void test_flipped_byte_in_checksummed_streams_is_corrupt(void **state) {
    (void)state;
    const CompressKind kinds[] = {COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_ZSTD};
    uint8_t data[4000];
    fill_text(data, sizeof data);
    for (size_t k = 0; k < 3; k++) {
        MemSink z, out;
        sink_init(&z);
        sink_init(&out);
        assert_int_equal(compress_buf(kinds[k], data, sizeof data, &z, 0), 0);
        /* The last 4 bytes are a checksum in all three formats. */
        z.buf[z.len - 2] ^= 0x10;
        assert_int_equal(decompress_buf(kinds[k], z.buf, z.len, &out), ERR_CORRUPT);
        sink_release(&z);
        sink_release(&out);
    }
}

static void test_lzw_reader_rejects_code_beyond_table(void **state) {
    (void)state;
    /* Clear (256), then code 300 at 9 bits: nothing defines it yet. LSB: 256 | 300 << 9. */
    uint32_t bits = 256u | 300u << 9;
    uint8_t buf[3] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16)};
    MemSink out;
    sink_init(&out);
    assert_int_equal(decompress_buf(COMPRESS_LZW, buf, sizeof buf, &out), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "lzw"));
    sink_release(&out);
}

static void test_empty_input_is_corrupt_for_every_compressed_kind(void **state) {
    (void)state;
    const CompressKind kinds[] = {COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_LZW, COMPRESS_ZSTD};
    for (size_t k = 0; k < 4; k++) {
        MemSink out;
        sink_init(&out);
        assert_int_equal(decompress_buf(kinds[k], (const uint8_t *)"", 0, &out), ERR_CORRUPT);
        sink_release(&out);
    }
    MemSink out;
    sink_init(&out);
    assert_int_equal(decompress_buf(COMPRESS_NONE, (const uint8_t *)"", 0, &out), 0);
    assert_int_equal(out.len, 0);
    sink_release(&out);
}

static void test_reader_error_repeats_on_next_read(void **state) {
    (void)state;
    IoReader *src = io_mem_reader_new("\x1f\x8b", 2);
    IoReader *r = decompress_reader_new(COMPRESS_GZIP, src);
    uint8_t buf[16];
    size_t got = 1;
    assert_int_equal(io_read(r, buf, sizeof buf, &got), ERR_CORRUPT);
    assert_int_equal(io_read(r, buf, sizeof buf, &got), ERR_CORRUPT);
    assert_int_equal(got, 0);
    io_reader_free(r);
    io_reader_free(src);
}

static void test_writers_pass_on_sink_failure(void **state) {
    (void)state;
    const CompressKind kinds[] = {COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_LZW, COMPRESS_ZSTD};
    enum { N = 1 << 20 };
    uint8_t *data = malloc(N);
    assert_non_null(data);
    fill_random(data, N, 9);
    for (size_t k = 0; k < 4; k++) {
        MemSink z;
        sink_init(&z);
        z.fail_after = 1000;
        IoWriter *w = compress_writer_new(kinds[k], &z.base);
        assert_non_null(w);
        int rc = io_write(w, data, N);
        if (rc == 0) rc = io_finish(w);
        assert_int_equal(rc, ERR_IO);
        /* Sticky: the writer does not pretend later calls work. */
        assert_int_equal(io_finish(w), ERR_IO);
        io_writer_free(w);
        sink_release(&z);
    }
    free(data);
}

static void test_policy_and_suffix_names_map_to_kinds(void **state) {
    (void)state;
    CompressKind k = COMPRESS_NONE;
    assert_int_equal(compress_parse_policy("gzip", &k), 0);
    assert_int_equal(k, COMPRESS_GZIP);
    assert_int_equal(compress_parse_policy("zlib", &k), 0);
    assert_int_equal(k, COMPRESS_ZLIB);
    assert_int_equal(compress_parse_policy("lzw", &k), 0);
    assert_int_equal(k, COMPRESS_LZW);
    assert_int_equal(compress_parse_policy("zstd", &k), 0);
    assert_int_equal(k, COMPRESS_ZSTD);
    assert_int_equal(compress_parse_policy("GZIP", &k), ERR_INVALID);
    assert_int_equal(compress_parse_policy("", &k), ERR_INVALID);

    const CompressKind all[] = {COMPRESS_NONE, COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_LZW,
                                COMPRESS_ZSTD};
    const char *suffixes[] = {"", ".gz", ".zlib", ".Z", ".zst"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(compress_suffix(all[i]), suffixes[i]);
        assert_int_equal(compress_from_suffix(suffixes[i], &k), 0);
        assert_int_equal(k, all[i]);
        if (*suffixes[i]) {
            assert_int_equal(compress_from_suffix(suffixes[i] + 1, &k), 0);
            assert_int_equal(k, all[i]);
        }
    }
    assert_int_equal(compress_from_suffix(".z", &k), ERR_UNSUPPORTED);
    assert_int_equal(compress_from_suffix(".bz2", &k), ERR_UNSUPPORTED);
    assert_int_equal(compress_from_suffix("final", &k), ERR_UNSUPPORTED);
}

/* ---- gzip modes: parallel members and the single zlib stream ---- */

/* Compresses with explicit gzip options, through odd-size writes if asked. */
static int gzip_opts_buf(const GzipWriterOptions *opt, const uint8_t *data, size_t len,
                         MemSink *out, int odd_writes) {
    IoWriter *w = compress_gzip_writer_new(opt, &out->base);
    assert_non_null(w);
    int rc = 0;
    size_t off = 0;
    for (size_t i = 0; off < len && rc == 0; i++) {
        size_t n = odd_writes ? write_sizes[i % NSIZES(write_sizes)] : len;
        if (n > len - off) n = len - off;
        rc = io_write(w, data + off, n);
        off += n;
    }
    if (rc == 0) rc = io_finish(w);
    io_writer_free(w);
    return rc;
}

/* Walks the gzip members of buf with zlib, one member at a time: each must start with Go's
 * header; returns the member count and stores each member's ISIZE (up to max). */
static size_t gzip_members(const uint8_t *buf, size_t len, uint32_t *isizes, size_t max) {
    static const uint8_t go_hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    size_t off = 0, n = 0;
    uint8_t *scratch = malloc(1 << 16);
    assert_non_null(scratch);
    while (off < len) {
        assert_true(len - off >= 18);
        assert_memory_equal(buf + off, go_hdr, sizeof go_hdr);
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        assert_int_equal(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
        zs.next_in = (Bytef *)(buf + off);
        zs.avail_in = (uInt)(len - off);
        int zr;
        do {
            zs.next_out = scratch;
            zs.avail_out = 1 << 16;
            zr = inflate(&zs, Z_NO_FLUSH);
        } while (zr == Z_OK);
        assert_int_equal(zr, Z_STREAM_END);
        size_t used = (len - off) - zs.avail_in;
        const uint8_t *t = buf + off + used - 4;
        if (n < max)
            isizes[n] =
                (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
        inflateEnd(&zs);
        off += used;
        n++;
    }
    free(scratch);
    return n;
}

static void test_parallel_gzip_round_trips_across_block_boundaries_and_thread_counts(void **state) {
    (void)state;
    enum { BLOCK = 4096, MAXLEN = 40 * BLOCK + 17 };
    const size_t lens[] = {0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK, 7 * BLOCK - 5, MAXLEN};
    const int threads[] = {1, 2, 4};
    uint8_t *data = malloc(MAXLEN);
    assert_non_null(data);
    fill_text(data, MAXLEN / 2);
    fill_random(data + MAXLEN / 2, MAXLEN - MAXLEN / 2, 11);
    for (size_t l = 0; l < NSIZES(lens); l++) {
        MemSink ref;
        sink_init(&ref);
        for (size_t t = 0; t < NSIZES(threads); t++) {
            GzipWriterOptions opt = {GZIP_MODE_PARALLEL, threads[t], BLOCK};
            for (int odd = 0; odd < 2; odd++) {
                MemSink z, plain;
                sink_init(&z);
                sink_init(&plain);
                assert_int_equal(gzip_opts_buf(&opt, data, lens[l], &z, odd), 0);
                /* the same bytes whatever the thread count and write sizes */
                if (ref.len == 0) {
                    assert_int_equal(sink_write(&ref.base, z.buf, z.len), 0);
                } else {
                    assert_int_equal(z.len, ref.len);
                    assert_memory_equal(z.buf, ref.buf, z.len);
                }
                int rc = decompress_buf(COMPRESS_GZIP, z.buf, z.len, &plain);
                if (rc) fail_msg("len %zu: %s: %s", lens[l], err_name(rc), err_msg());
                assert_int_equal(plain.len, lens[l]);
                if (lens[l]) assert_memory_equal(plain.buf, data, lens[l]);
                sink_release(&z);
                sink_release(&plain);
            }
        }
        sink_release(&ref);
    }
    free(data);
}

/* Incompressible 1 MiB blocks are written as stored deflate blocks (the probe, compress.c): the
 * member is the input plus 5 bytes per 65535 and the gzip framing; compressible blocks beside
 * them still shrink; zlib reads every member back exactly. */
static void test_parallel_gzip_stores_incompressible_blocks(void **state) {
    (void)state;
    enum { BLOCK = 1 << 20, LEN = 4 * BLOCK + 12345 };
    uint8_t *data = malloc(LEN);
    assert_non_null(data);
    fill_random(data, 2 * BLOCK, 3);                   /* blocks 0, 1: random */
    fill_text(data + 2 * BLOCK, BLOCK);                /* block 2: text */
    fill_random(data + 3 * BLOCK, LEN - 3 * BLOCK, 4); /* block 3 random, and a short last one */
    GzipWriterOptions opt = {GZIP_MODE_PARALLEL, 2, BLOCK};
    MemSink z, plain;
    sink_init(&z);
    sink_init(&plain);
    assert_int_equal(gzip_opts_buf(&opt, data, LEN, &z, 1), 0);
    uint32_t isizes[8];
    assert_int_equal(gzip_members(z.buf, z.len, isizes, 8), 5);
    /* member sizes: walk the headers again by their ISIZE order */
    size_t stored = BLOCK + 5 * ((BLOCK + 65534) / 65535) + 18;
    assert_true(z.len < 3 * stored + BLOCK / 2 + (LEN - 4 * BLOCK) + 100);
    assert_int_equal(memcmp(z.buf + 10 + 5, data, 65535), 0); /* first member: stored, raw */
    assert_int_equal(decompress_buf(COMPRESS_GZIP, z.buf, z.len, &plain), 0);
    assert_int_equal(plain.len, LEN);
    assert_memory_equal(plain.buf, data, LEN);
    sink_release(&z);
    sink_release(&plain);
    free(data);
}

static void test_parallel_gzip_writes_one_go_member_per_block(void **state) {
    (void)state;
    enum { BLOCK = 4096 };
    const size_t lens[] = {0, 1, BLOCK, BLOCK + 1, 5 * BLOCK + 100};
    uint8_t *data = malloc(6 * BLOCK);
    assert_non_null(data);
    fill_random(data, 6 * BLOCK, 5);
    for (size_t l = 0; l < NSIZES(lens); l++) {
        GzipWriterOptions opt = {GZIP_MODE_PARALLEL, 3, BLOCK};
        MemSink z;
        sink_init(&z);
        assert_int_equal(gzip_opts_buf(&opt, data, lens[l], &z, 1), 0);
        uint32_t isz[16];
        size_t want = lens[l] == 0 ? 1 : (lens[l] + BLOCK - 1) / BLOCK;
        assert_int_equal(gzip_members(z.buf, z.len, isz, 16), want);
        for (size_t m = 0; m < want; m++) {
            size_t exp = m + 1 < want ? BLOCK : lens[l] - m * BLOCK;
            assert_int_equal(isz[m], exp);
        }
        sink_release(&z);
    }
    /* single mode: one member whatever the length (Go's own layout) */
    GzipWriterOptions single = {GZIP_MODE_SINGLE, 4, BLOCK};
    MemSink z;
    sink_init(&z);
    assert_int_equal(gzip_opts_buf(&single, data, 5 * BLOCK + 100, &z, 1), 0);
    uint32_t isz = 0;
    assert_int_equal(gzip_members(z.buf, z.len, &isz, 1), 1);
    assert_int_equal(isz, 5 * BLOCK + 100);
    sink_release(&z);
    free(data);
}

static void test_gzip_defaults_select_the_mode_of_compress_writer_new(void **state) {
    (void)state;
    enum { LEN = 3 * GZIP_BLOCK_DEFAULT + 5 };
    uint8_t *data = malloc(LEN);
    assert_non_null(data);
    fill_text(data, LEN);
    /* built-in default: parallel, 1 MiB members */
    MemSink z;
    sink_init(&z);
    assert_int_equal(compress_buf(COMPRESS_GZIP, data, LEN, &z, 0), 0);
    assert_int_equal(gzip_members(z.buf, z.len, NULL, 0), 4);
    sink_release(&z);
    GzipWriterOptions single = {GZIP_MODE_SINGLE, 0, 0};
    compress_set_gzip_defaults(&single);
    round_trip(COMPRESS_GZIP, data, LEN);
    sink_init(&z);
    assert_int_equal(compress_buf(COMPRESS_GZIP, data, LEN, &z, 0), 0);
    assert_int_equal(gzip_members(z.buf, z.len, NULL, 0), 1);
    sink_release(&z);
    compress_set_gzip_defaults(NULL);
    sink_init(&z);
    assert_int_equal(compress_buf(COMPRESS_GZIP, data, LEN, &z, 0), 0);
    assert_int_equal(gzip_members(z.buf, z.len, NULL, 0), 4);
    sink_release(&z);
    free(data);

    GzipMode m = GZIP_MODE_SINGLE;
    assert_int_equal(compress_parse_gzip_mode("parallel", &m), 0);
    assert_int_equal(m, GZIP_MODE_PARALLEL);
    assert_int_equal(compress_parse_gzip_mode("single", &m), 0);
    assert_int_equal(m, GZIP_MODE_SINGLE);
    assert_int_equal(compress_parse_gzip_mode("Parallel", &m), ERR_INVALID);
    assert_int_equal(compress_parse_gzip_mode(NULL, &m), ERR_INVALID);
    GzipWriterOptions t = {GZIP_MODE_PARALLEL, 0, 0};
    int autos = compress_gzip_threads(&t);
    assert_true(autos >= 1 && autos <= 4);
    t.threads = 3;
    assert_int_equal(compress_gzip_threads(&t), 3);
    t.threads = 1000;
    assert_int_equal(compress_gzip_threads(&t), GZIP_THREADS_MAX);
}

/* Many members: every truncation (at and around each member boundary, and on a stride
 * elsewhere) and a bad CRC or header in a later member are ERR_CORRUPT. */
static void test_gzip_reader_rejects_truncated_or_corrupt_later_member(void **state) {
    (void)state;
    enum { BLOCK = 4096, LEN = 6 * BLOCK + 300 };
    uint8_t *data = malloc(LEN);
    assert_non_null(data);
    fill_text(data, LEN / 2);
    fill_random(data + LEN / 2, LEN - LEN / 2, 21);
    GzipWriterOptions opt = {GZIP_MODE_PARALLEL, 2, BLOCK};
    MemSink z, out;
    sink_init(&z);
    sink_init(&out);
    assert_int_equal(gzip_opts_buf(&opt, data, LEN, &z, 0), 0);
    assert_int_equal(gzip_members(z.buf, z.len, NULL, 0), 7);
    assert_int_equal(decompress_buf(COMPRESS_GZIP, z.buf, z.len, &out), 0);
    assert_int_equal(out.len, LEN);
    assert_memory_equal(out.buf, data, LEN);
    /* member start offsets: find Go's header after each member end */
    size_t starts[8], ns = 0;
    for (size_t off = 0; off + 10 <= z.len && ns < 8; off++)
        if (z.buf[off] == 0x1f && z.buf[off + 1] == 0x8b && z.buf[off + 2] == 8 &&
            z.buf[off + 9] == 0xff && (ns == 0 || off > starts[ns - 1] + 18)) {
            /* a candidate: check it is a member end by decompressing the prefix */
            MemSink tmp;
            sink_init(&tmp);
            if (off == 0 || decompress_buf(COMPRESS_GZIP, z.buf, off, &tmp) == 0)
                starts[ns++] = off;
            sink_release(&tmp);
        }
    assert_int_equal(ns, 7);
    for (size_t cut = 0; cut < z.len; cut++) {
        int near = 0;
        for (size_t s = 0; s < ns; s++)
            if (cut + 24 > starts[s] && cut < starts[s] + 24) near = 1;
        if (!near && cut % 97 != 0) continue;
        /* a cut exactly at a member boundary is a shorter valid stream, as for Go's reader */
        int boundary = 0;
        for (size_t s = 1; s < ns; s++)
            boundary |= cut == starts[s];
        out.len = 0;
        int rc = decompress_buf(COMPRESS_GZIP, z.buf, cut, &out);
        if (boundary) {
            assert_int_equal(rc, 0);
            continue;
        }
        if (rc != ERR_CORRUPT)
            fail_msg("%zu of %zu bytes gave %s (%zu bytes out)", cut, z.len, err_name(rc), out.len);
    }
    /* the CRC of the third member, then the magic of the fourth */
    const size_t flips[] = {starts[3] - 6, starts[3] + 1, starts[4] + 3};
    for (size_t f = 0; f < NSIZES(flips); f++) {
        z.buf[flips[f]] ^= 0x40;
        out.len = 0;
        assert_int_equal(decompress_buf(COMPRESS_GZIP, z.buf, z.len, &out), ERR_CORRUPT);
        z.buf[flips[f]] ^= 0x40;
    }
    sink_release(&z);
    sink_release(&out);
    free(data);
}

/* A sink failing mid-stream with blocks in flight: the error comes back, stays, and freeing the
 * writer (finished or not) stops its threads. */
static void test_parallel_gzip_sink_failure_with_blocks_in_flight(void **state) {
    (void)state;
    enum { BLOCK = 4096, LEN = 64 * BLOCK };
    uint8_t *data = malloc(LEN);
    assert_non_null(data);
    fill_random(data, LEN, 33);
    const size_t fail_at[] = {0, 5000, 100000};
    for (size_t f = 0; f < NSIZES(fail_at); f++) {
        MemSink z;
        sink_init(&z);
        z.fail_after = fail_at[f];
        GzipWriterOptions opt = {GZIP_MODE_PARALLEL, 4, BLOCK};
        IoWriter *w = compress_gzip_writer_new(&opt, &z.base);
        assert_non_null(w);
        int rc = 0;
        for (size_t off = 0; off < LEN && rc == 0; off += 1000)
            rc = io_write(w, data + off, LEN - off < 1000 ? LEN - off : 1000);
        if (rc == 0) rc = io_finish(w);
        assert_int_equal(rc, ERR_IO);
        assert_int_equal(io_write(w, data, 1), ERR_IO);
        assert_int_equal(io_finish(w), ERR_IO);
        io_writer_free(w);
        sink_release(&z);
    }
    /* freed with blocks queued and never finished */
    MemSink z;
    sink_init(&z);
    GzipWriterOptions opt = {GZIP_MODE_PARALLEL, 2, BLOCK};
    IoWriter *w = compress_gzip_writer_new(&opt, &z.base);
    assert_int_equal(io_write(w, data, LEN), 0);
    io_writer_free(w);
    sink_release(&z);
    free(data);
}

/* ---- Go LZW reference vectors ---- */

static void test_lzw_writer_output_is_byte_identical_to_go(void **state) {
    (void)state;
    static const char *names[] = {"empty",        "one-byte",    "tobeornot",
                                  "random-10000", "zeros-20000", "text-30000"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/unit/data/lzw/%s.bin", names[i]);
        char *p = source_path(rel);
        size_t in_len = 0, z_len = 0;
        uint8_t *in = read_file(p, &in_len);
        free(p);
        snprintf(rel, sizeof rel, "tests/unit/data/lzw/%s.Z", names[i]);
        p = source_path(rel);
        uint8_t *want = read_file(p, &z_len);
        free(p);
        for (int odd = 0; odd <= 1; odd++) {
            MemSink z;
            sink_init(&z);
            assert_int_equal(compress_buf(COMPRESS_LZW, in, in_len, &z, odd), 0);
            if (z.len != z_len || memcmp(z.buf, want, z_len) != 0)
                fail_msg("%s: our LZW output (%zu B) differs from Go's (%zu B)", names[i], z.len,
                         z_len);
            sink_release(&z);
        }
        MemSink out;
        sink_init(&out);
        assert_int_equal(decompress_buf(COMPRESS_LZW, want, z_len, &out), 0);
        assert_int_equal(out.len, in_len);
        if (in_len) assert_memory_equal(out.buf, in, in_len);
        sink_release(&out);
        free(in);
        free(want);
    }
}

/* ---- Go-written fixture stores ---- */

/* Decompressed size from the fixture README's table row for object v2/<name>; -1 if absent. */
static long readme_decompressed_size(const char *fixture, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/%s/README.md", fixture);
    char *p = source_path(rel);
    FILE *f = fopen(p, "r");
    if (!f) fail_msg("cannot open %s", p);
    free(p);
    char want[512], line[1024];
    snprintf(want, sizeof want, "| `v2/%s` |", name);
    long size = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, want, strlen(want)) != 0) continue;
        /* Columns: object | bytes | decompressed | ... */
        char *col = line + strlen(want);
        col = strchr(col, '|');
        if (!col) break;
        size = 0;
        for (col++; *col && *col != '|'; col++)
            if (*col >= '0' && *col <= '9') size = size * 10 + (*col - '0');
        break;
    }
    fclose(f);
    return size;
}

static void check_fixture_store(const char *fixture) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fixtures/%s/store/v2", fixture);
    char *dir = source_path(rel);
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot open %s", dir);
    int objects = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        const char *dot = strchr(e->d_name, '.');
        CompressKind kind = COMPRESS_NONE;
        assert_int_equal(compress_from_suffix(dot ? dot : "", &kind), 0);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        uint8_t *z = read_file(path, &len);

        IoReader *src = io_mem_reader_new(z, len);
        IoReader *r = decompress_reader_new(kind, src);
        uint64_t *count = NULL;
        IoWriter *counter = io_counter_new(NULL, &count);
        IoWriter *tc = trailer_checker_new(counter, 0);
        assert_non_null(r);
        assert_non_null(tc);
        uint64_t copied = 0;
        int rc = io_copy(r, tc, &copied);
        if (rc != 0) fail_msg("%s: %s: %s", e->d_name, err_name(rc), err_msg());
        uint64_t payload = 0;
        rc = trailer_check_result(tc, &payload);
        if (rc != 0) fail_msg("%s: %s", e->d_name, err_msg());
        assert_int_equal(*count, copied);
        assert_int_equal(payload + SHA256_LEN, copied);
        long want = readme_decompressed_size(fixture, e->d_name);
        if (want < 0) fail_msg("%s: no row in the %s README", e->d_name, fixture);
        assert_int_equal(copied, (uint64_t)want);
        if (strncmp(e->d_name, "Full-", 5) == 0) {
            /* etcd's "has hash" rule: bbolt pages are 512-byte multiples. */
            assert_int_equal(copied % 512, SHA256_LEN);
        } else {
            /* A delta's payload is a JSON array. */
            assert_int_equal(payload > 2, 1);
        }
        io_writer_free(tc);
        io_writer_free(counter);
        io_reader_free(r);
        io_reader_free(src);
        free(z);
        objects++;
    }
    closedir(d);
    free(dir);
    assert_int_equal(objects, 5);
}

static void test_go_gzip_fixtures_decompress_with_valid_trailers(void **state) {
    (void)state;
    check_fixture_store("seed-gzip");
}
static void test_go_zlib_fixtures_decompress_with_valid_trailers(void **state) {
    (void)state;
    check_fixture_store("seed-zlib");
}
static void test_go_lzw_fixtures_decompress_with_valid_trailers(void **state) {
    (void)state;
    check_fixture_store("seed-lzw");
}
static void test_go_plain_fixtures_have_valid_trailers(void **state) {
    (void)state;
    check_fixture_store("seed-plain");
}

/* Recompressing what Go's LZW writer compressed must give Go's exact bytes back. */
static void test_lzw_recompression_of_go_fixtures_is_byte_identical(void **state) {
    (void)state;
    char *dir = source_path("tests/fixtures/seed-lzw/store/v2");
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot open %s", dir);
    struct dirent *e;
    int objects = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        uint8_t *z = read_file(path, &len);
        MemSink plain, again;
        sink_init(&plain);
        sink_init(&again);
        assert_int_equal(decompress_buf(COMPRESS_LZW, z, len, &plain), 0);
        assert_int_equal(compress_buf(COMPRESS_LZW, plain.buf, plain.len, &again, 1), 0);
        if (again.len != len || memcmp(again.buf, z, len) != 0)
            fail_msg("%s: recompressed %zu B differs from Go's %zu B", e->d_name, again.len, len);
        sink_release(&plain);
        sink_release(&again);
        free(z);
        objects++;
    }
    closedir(d);
    free(dir);
    assert_int_equal(objects, 5);
}

/* ---- sha256 and trailers ---- */

static void test_sha256_matches_known_digest(void **state) {
    (void)state;
    /* FIPS 180-2 example: SHA-256("abc"). */
    static const uint8_t abc[SHA256_LEN] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
                                            0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                                            0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
                                            0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    uint8_t out[SHA256_LEN];
    Sha256 *s = sha256_new();
    assert_non_null(s);
    sha256_update(s, "a", 1);
    sha256_update(s, "bc", 2);
    sha256_final(s, out);
    assert_memory_equal(out, abc, SHA256_LEN);
    /* final resets for reuse. */
    sha256_update(s, "abc", 3);
    sha256_final(s, out);
    assert_memory_equal(out, abc, SHA256_LEN);
    sha256_free(s);
    sha256_free(NULL);
}

static void test_sha256_writer_passes_bytes_and_reports_running_digest(void **state) {
    (void)state;
    MemSink m;
    sink_init(&m);
    IoWriter *w = sha256_writer_new(&m.base);
    assert_non_null(w);
    assert_int_equal(io_write(w, "ab", 2), 0);
    uint8_t mid[SHA256_LEN], ref[SHA256_LEN], out[SHA256_LEN];
    sha256_writer_digest(w, mid);
    assert_int_equal(io_write(w, "c", 1), 0);
    assert_int_equal(io_finish(w), 0);
    sha256_writer_digest(w, out);
    Sha256 *s = sha256_new();
    sha256_update(s, "ab", 2);
    sha256_final(s, ref);
    assert_memory_equal(mid, ref, SHA256_LEN);
    sha256_update(s, "abc", 3);
    sha256_final(s, ref);
    assert_memory_equal(out, ref, SHA256_LEN);
    sha256_free(s);
    assert_int_equal(m.len, 3);
    assert_memory_equal(m.buf, "abc", 3);
    io_writer_free(w);
    sink_release(&m);
}

/* payload || sha256(payload) in a fresh buffer of *len bytes. */
static uint8_t *make_framed(size_t payload_len, size_t *len) {
    uint8_t *buf = malloc(payload_len + SHA256_LEN);
    assert_non_null(buf);
    fill_random(buf, payload_len, payload_len + 17);
    Sha256 *s = sha256_new();
    sha256_update(s, buf, payload_len);
    sha256_final(s, buf + payload_len);
    sha256_free(s);
    *len = payload_len + SHA256_LEN;
    return buf;
}

/* Feeds buf through a trailer checker with writes cycling over step sizes; returns the result. */
static int run_trailer_check(const uint8_t *buf, size_t len, int strip, MemSink *out,
                             uint64_t *payload) {
    IoWriter *t = trailer_checker_new(out ? &out->base : NULL, strip);
    assert_non_null(t);
    static const size_t steps[] = {1, 31, 32, 33, 2, 64, 4097, 3};
    size_t off = 0;
    for (size_t i = 0; off < len; i++) {
        size_t n = steps[i % NSIZES(steps)];
        if (n > len - off) n = len - off;
        assert_int_equal(io_write(t, buf + off, n), 0);
        off += n;
    }
    assert_int_equal(io_finish(t), 0);
    int rc = trailer_check_result(t, payload);
    io_writer_free(t);
    return rc;
}

static void test_trailer_checker_accepts_good_trailer(void **state) {
    (void)state;
    const size_t sizes[] = {1, 2, 31, 32, 33, 64, 1000, 180224};
    for (size_t i = 0; i < NSIZES(sizes); i++) {
        size_t len = 0;
        uint8_t *buf = make_framed(sizes[i], &len);
        MemSink all, stripped;
        sink_init(&all);
        sink_init(&stripped);
        uint64_t payload = 0;
        assert_int_equal(run_trailer_check(buf, len, 0, &all, &payload), 0);
        assert_int_equal(payload, sizes[i]);
        assert_int_equal(all.len, len);
        assert_memory_equal(all.buf, buf, len);
        assert_int_equal(run_trailer_check(buf, len, 1, &stripped, &payload), 0);
        assert_int_equal(stripped.len, sizes[i]);
        assert_memory_equal(stripped.buf, buf, sizes[i]);
        assert_int_equal(run_trailer_check(buf, len, 1, NULL, NULL), 0);
        sink_release(&all);
        sink_release(&stripped);
        free(buf);
    }
}

static void test_trailer_checker_rejects_flipped_byte(void **state) {
    (void)state;
    size_t len = 0;
    uint8_t *buf = make_framed(1000, &len);
    const size_t where[] = {0, 500, 999, 1000, 1015, len - 1};
    for (size_t i = 0; i < NSIZES(where); i++) {
        buf[where[i]] ^= 0x01;
        assert_int_equal(run_trailer_check(buf, len, 0, NULL, NULL), ERR_CORRUPT);
        buf[where[i]] ^= 0x01;
    }
    assert_int_equal(run_trailer_check(buf, len, 0, NULL, NULL), 0);
    /* A missing last byte shifts the trailer: also a mismatch. */
    assert_int_equal(run_trailer_check(buf, len - 1, 0, NULL, NULL), ERR_CORRUPT);
    free(buf);
}

static void test_trailer_checker_rejects_too_short_input(void **state) {
    (void)state;
    uint8_t buf[SHA256_LEN];
    Sha256 *s = sha256_new();
    sha256_final(s, buf); /* the digest of nothing: still no payload */
    sha256_free(s);
    uint64_t payload = 99;
    assert_int_equal(run_trailer_check(buf, 0, 0, NULL, &payload), ERR_CORRUPT);
    assert_int_equal(payload, 0);
    assert_int_equal(run_trailer_check(buf, 10, 0, NULL, NULL), ERR_CORRUPT);
    assert_int_equal(run_trailer_check(buf, SHA256_LEN, 0, NULL, NULL), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "trailer"));
}

/* A read group (stored count, decompression, plain SHA-256 and count) reads back, for every
 * compression, what a write group wrote, in small reads, with the same digest and counts; a
 * corrupt stream's error comes out of the reads; results are not final before the end; misuse is
 * refused. */
static void test_filter_group_reads_back_what_a_write_group_wrote(void **state) {
    (void)state;
    size_t len = 200000;
    uint8_t *data = malloc(len), *back = malloc(len + 1);
    assert_non_null(data);
    assert_non_null(back);
    fill_text(data, len);
    const CompressKind kinds[] = {COMPRESS_NONE, COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_ZSTD};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        MemSink sink;
        sink_init(&sink);
        IoFilterGroup *w = io_filter_group_new(&sink.base);
        assert_int_equal(io_filter_group_add_sha256(w, "plain"), 0);
        assert_int_equal(io_filter_group_add_compress(w, kinds[k]), 0);
        assert_int_equal(io_filter_group_add_decompress(w, kinds[k]), ERR_INVALID);
        assert_int_equal(io_write(io_filter_group_io(w), data, len), 0);
        assert_int_equal(io_filter_group_finish(w), 0);
        uint8_t wrote[SHA256_LEN], read[SHA256_LEN];
        assert_int_equal(io_filter_group_sha256(w, "plain", wrote), 0);

        IoReader *src = io_mem_reader_new(sink.buf, sink.len);
        IoFilterGroup *g = io_filter_group_new_reader(src);
        assert_int_equal(io_filter_group_add_count(g, "stored"), 0);
        assert_int_equal(io_filter_group_add_compress(g, kinds[k]), ERR_INVALID);
        assert_int_equal(io_filter_group_add_decompress(g, kinds[k]), 0);
        assert_int_equal(io_filter_group_add_sha256(g, "plain"), 0);
        assert_int_equal(io_filter_group_add_count(g, "plain-bytes"), 0);
        assert_null(io_filter_group_io(g));
        IoReader *r = io_filter_group_reader(g);
        assert_non_null(r);
        assert_int_equal(io_filter_group_add_count(g, "late"), ERR_INVALID);
        size_t off = 0, got = 0;
        uint64_t n = 0;
        assert_int_equal(io_read(r, back, 1000, &got), 0);
        off += got;
        assert_int_equal(io_filter_group_count(g, "plain-bytes", &n), ERR_INVALID);
        assert_int_equal(io_filter_group_finish(g), ERR_INVALID);
        do {
            assert_int_equal(
                io_read(r, back + off, len + 1 - off < 777 ? len + 1 - off : 777, &got), 0);
            off += got;
        } while (got);
        assert_int_equal(off, len);
        assert_memory_equal(back, data, len);
        assert_int_equal(io_filter_group_finish(g), 0);
        assert_int_equal(io_filter_group_count(g, "plain-bytes", &n), 0);
        assert_int_equal(n, len);
        assert_int_equal(io_filter_group_count(g, "stored", &n), 0);
        assert_int_equal(n, sink.len);
        assert_int_equal(io_filter_group_sha256(g, "plain", read), 0);
        assert_memory_equal(read, wrote, SHA256_LEN);
        io_filter_group_free(g);
        io_reader_free(src);

        if (kinds[k] != COMPRESS_NONE) { /* a flipped byte mid-stream: an error from the reads */
            sink.buf[sink.len / 2] ^= 0x5a;
            src = io_mem_reader_new(sink.buf, sink.len);
            g = io_filter_group_new_reader(src);
            assert_int_equal(io_filter_group_add_decompress(g, kinds[k]), 0);
            assert_int_equal(io_filter_group_add_sha256(g, "plain"), 0);
            r = io_filter_group_reader(g);
            int rc = 0;
            off = 0;
            do {
                rc = io_read(r, back, len + 1, &got);
                off += got;
            } while (!rc && got);
            uint8_t d[SHA256_LEN];
            /* either decoding fails, or the digest of what came out differs */
            assert_true(rc != 0 || (io_filter_group_sha256(g, "plain", d) == 0 &&
                                    memcmp(d, wrote, SHA256_LEN) != 0));
            io_filter_group_free(g);
            io_reader_free(src);
        }
        io_filter_group_free(w);
        sink_release(&sink);
    }
    free(data);
    free(back);
}

/* A filter group (plain SHA-256, gzip, stored-byte count) gives the same bytes as the
 * hand-wired chain, the plain digest, the count of what reached the sink, and refuses misuse. */
static void test_filter_group_hashes_compresses_and_counts_in_order(void **state) {
    (void)state;
    size_t len = 300000;
    uint8_t *data = malloc(len);
    assert_non_null(data);
    fill_text(data, len);
    MemSink sink;
    sink_init(&sink);
    IoFilterGroup *g = io_filter_group_new(&sink.base);
    assert_non_null(g);
    assert_int_equal(io_filter_group_add_sha256(g, "plain"), 0);
    assert_int_equal(io_filter_group_add_compress(g, COMPRESS_GZIP), 0);
    assert_int_equal(io_filter_group_add_count(g, "stored"), 0);
    assert_int_equal(io_filter_group_add_count(g, "stored"), ERR_INVALID); /* duplicate name */
    IoWriter *w = io_filter_group_io(g);
    assert_non_null(w);
    assert_int_equal(io_filter_group_add_count(g, "late"), ERR_INVALID); /* after the build */
    assert_int_equal(io_write(w, data, len / 3), 0);
    assert_int_equal(io_write(w, data + len / 3, len - len / 3), 0);
    uint64_t n = 0;
    assert_int_equal(io_filter_group_count(g, "stored", &n), ERR_INVALID); /* not finished */
    assert_int_equal(io_filter_group_finish(g), 0);
    assert_int_equal(io_filter_group_count(g, "stored", &n), 0);
    assert_int_equal(n, sink.len);
    assert_true(sink.len < len);                                            /* compressed */
    assert_int_equal(io_filter_group_count(g, "plain", &n), ERR_NOT_FOUND); /* a sha256 */
    assert_int_equal(io_filter_group_count(g, "nope", &n), ERR_NOT_FOUND);
    uint8_t got[SHA256_LEN], want[SHA256_LEN];
    assert_int_equal(io_filter_group_sha256(g, "plain", got), 0);
    Sha256 *h = sha256_new();
    sha256_update(h, data, len);
    sha256_final(h, want);
    sha256_free(h);
    assert_memory_equal(got, want, SHA256_LEN);
    MemSink plain;
    sink_init(&plain);
    assert_int_equal(decompress_buf(COMPRESS_GZIP, sink.buf, sink.len, &plain), 0);
    assert_int_equal(plain.len, len);
    assert_memory_equal(plain.buf, data, len);
    MemSink direct; /* the same bytes as the hand-wired compressor */
    sink_init(&direct);
    assert_int_equal(compress_buf(COMPRESS_GZIP, data, len, &direct, 0), 0);
    assert_int_equal(direct.len, sink.len);
    assert_memory_equal(direct.buf, sink.buf, sink.len);
    io_filter_group_free(g);
    sink_release(&sink);
    sink_release(&plain);
    sink_release(&direct);
    free(data);
}

/* ---- the plain-size limit (decompression bombs) ---- */

static const CompressKind all_kinds[] = {COMPRESS_NONE, COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_LZW,
                                         COMPRESS_ZSTD};

static uint64_t codec_seed(void) {
    const char *s = getenv("ETCDBR_TEST_SEED");
    uint64_t seed = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    fprintf(stderr, "test_codec: seed %" PRIu64 " (ETCDBR_TEST_SEED=%" PRIu64 " replays it)\n",
            seed, seed);
    return seed;
}

static uint64_t rng_next(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Checks one stream of plain length len against limit: whole and equal when it fits; otherwise
 * ERR_CORRUPT naming the limit and the flag, nothing past the limit given out, and the error
 * sticky. */
static void check_limit(CompressKind kind, const uint8_t *data, size_t len, const MemSink *z,
                        uint64_t limit) {
    IoReader *src = io_mem_reader_new(z->buf, z->len);
    DecompressLimit lim = {limit, "--test-limit"};
    IoReader *r = decompress_reader_new_limited(kind, src, &lim);
    assert_non_null(r);
    MemSink out;
    sink_init(&out);
    int rc = drain_reader(r, &out);
    if (len <= limit) {
        assert_int_equal(rc, 0);
        assert_int_equal(out.len, len);
        if (len) assert_memory_equal(out.buf, data, len);
    } else {
        assert_int_equal(rc, ERR_CORRUPT);
        assert_true(out.len <= limit);
        char want[64];
        snprintf(want, sizeof want, "more than %" PRIu64 " bytes", limit);
        assert_non_null(strstr(err_msg(), want));
        assert_non_null(strstr(err_msg(), "(--test-limit raises it)"));
        uint8_t b[16];
        size_t got = 99;
        assert_int_equal(io_read(r, b, sizeof b, &got), ERR_CORRUPT); /* sticky */
        assert_int_equal(got, 0);
    }
    sink_release(&out);
    io_reader_free(r);
    io_reader_free(src);
}

/* Every kind, plain sizes and compression ratios from a logged seed (runs of zeros of random
 * share between random bytes), limits just below, at and above the plain size and random ones. */
static void test_decompress_limit_every_kind_seeded(void **state) {
    (void)state;
    uint64_t x = codec_seed() | 1;
    for (int round = 0; round < 12; round++) {
        size_t len = (size_t)(rng_next(&x) % (3u << 20));
        uint8_t *data = calloc(1, len + 1);
        assert_non_null(data);
        unsigned zero_share = (unsigned)(rng_next(&x) % 101); /* percent of zero runs */
        for (size_t off = 0; off < len;) {
            size_t run = 1 + (size_t)(rng_next(&x) % 65536);
            if (run > len - off) run = len - off;
            if (rng_next(&x) % 100 >= zero_share) fill_random(data + off, run, rng_next(&x));
            off += run;
        }
        for (size_t k = 0; k < NSIZES(all_kinds); k++) {
            MemSink z;
            sink_init(&z);
            assert_int_equal(compress_buf(all_kinds[k], data, len, &z, 0), 0);
            uint64_t limits[] = {len ? len - 1 : 1, len, (uint64_t)len + 1,
                                 1 + rng_next(&x) % (len + 1), len + 1 + rng_next(&x) % 4096};
            for (size_t l = 0; l < NSIZES(limits); l++)
                if (limits[l]) check_limit(all_kinds[k], data, len, &z, limits[l]);
            sink_release(&z);
        }
        free(data);
    }
}

/* A bomb (a small stream of zeros inflating far past the limit) stops at the limit: every kind,
 * every limit given out at most, read through a filter group as snapobj builds it. */
static void test_decompression_bomb_stops_at_the_limit_in_a_filter_group(void **state) {
    (void)state;
    size_t len = 48u << 20;
    uint8_t *zeros = calloc(1, len);
    assert_non_null(zeros);
    for (size_t k = 0; k < NSIZES(all_kinds); k++) {
        MemSink z;
        sink_init(&z);
        assert_int_equal(compress_buf(all_kinds[k], zeros, len, &z, 0), 0);
        if (all_kinds[k] != COMPRESS_NONE) assert_true(z.len < len / 500); /* a bomb */
        IoReader *src = io_mem_reader_new(z.buf, z.len);
        IoFilterGroup *g = io_filter_group_new_reader(src);
        DecompressLimit lim = {1u << 20, "--max-delta-size"};
        assert_int_equal(io_filter_group_add_decompress_limited(g, all_kinds[k], &lim), 0);
        assert_int_equal(io_filter_group_add_count(g, "plain"), 0);
        MemSink out;
        sink_init(&out);
        assert_int_equal(drain_reader(io_filter_group_reader(g), &out), ERR_CORRUPT);
        assert_true(out.len <= (1u << 20));
        assert_non_null(strstr(err_msg(), "--max-delta-size"));
        sink_release(&out);
        io_filter_group_free(g);
        io_reader_free(src);
        sink_release(&z);
    }
    free(zeros);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decompress_limit_every_kind_seeded),
        cmocka_unit_test(test_decompression_bomb_stops_at_the_limit_in_a_filter_group),
        cmocka_unit_test(test_gzip_round_trips_empty_small_and_3mib),
        cmocka_unit_test(test_zlib_round_trips_empty_small_and_3mib),
        cmocka_unit_test(test_lzw_round_trips_empty_small_and_3mib),
        cmocka_unit_test(test_zstd_round_trips_empty_small_and_3mib),
        cmocka_unit_test(test_none_passes_bytes_through),
        cmocka_unit_test(test_gzip_writer_emits_go_header_and_trailer),
        cmocka_unit_test(test_zlib_writer_emits_default_level_header),
        cmocka_unit_test(test_gzip_reader_accepts_concatenated_members),
        cmocka_unit_test(test_readers_reject_trailing_garbage),
        cmocka_unit_test(test_truncated_gzip_is_corrupt),
        cmocka_unit_test(test_truncated_zlib_is_corrupt),
        cmocka_unit_test(test_truncated_lzw_is_corrupt),
        cmocka_unit_test(test_truncated_zstd_is_corrupt),
        cmocka_unit_test(test_flipped_byte_in_checksummed_streams_is_corrupt),
        cmocka_unit_test(test_lzw_reader_rejects_code_beyond_table),
        cmocka_unit_test(test_empty_input_is_corrupt_for_every_compressed_kind),
        cmocka_unit_test(test_reader_error_repeats_on_next_read),
        cmocka_unit_test(test_writers_pass_on_sink_failure),
        cmocka_unit_test(test_policy_and_suffix_names_map_to_kinds),
        cmocka_unit_test(test_parallel_gzip_round_trips_across_block_boundaries_and_thread_counts),
        cmocka_unit_test(test_parallel_gzip_writes_one_go_member_per_block),
        cmocka_unit_test(test_parallel_gzip_stores_incompressible_blocks),
        cmocka_unit_test(test_gzip_defaults_select_the_mode_of_compress_writer_new),
        cmocka_unit_test(test_gzip_reader_rejects_truncated_or_corrupt_later_member),
        cmocka_unit_test(test_parallel_gzip_sink_failure_with_blocks_in_flight),
        cmocka_unit_test(test_lzw_writer_output_is_byte_identical_to_go),
        cmocka_unit_test(test_go_gzip_fixtures_decompress_with_valid_trailers),
        cmocka_unit_test(test_go_zlib_fixtures_decompress_with_valid_trailers),
        cmocka_unit_test(test_go_lzw_fixtures_decompress_with_valid_trailers),
        cmocka_unit_test(test_go_plain_fixtures_have_valid_trailers),
        cmocka_unit_test(test_lzw_recompression_of_go_fixtures_is_byte_identical),
        cmocka_unit_test(test_sha256_matches_known_digest),
        cmocka_unit_test(test_sha256_writer_passes_bytes_and_reports_running_digest),
        cmocka_unit_test(test_trailer_checker_accepts_good_trailer),
        cmocka_unit_test(test_trailer_checker_rejects_flipped_byte),
        cmocka_unit_test(test_trailer_checker_rejects_too_short_input),
        cmocka_unit_test(test_filter_group_hashes_compresses_and_counts_in_order),
        cmocka_unit_test(test_filter_group_reads_back_what_a_write_group_wrote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
