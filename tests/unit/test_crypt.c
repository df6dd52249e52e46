/* test_crypt: the AES-256-GCM chunk format (crypt.h, docs/encryption.md) and the keyring.
 * Round trips at many sizes and chunk boundaries, then every fault the format must catch: a
 * flipped byte anywhere (header, chunk, tag), truncation at every length, reordered, dropped and
 * repeated chunks, appended bytes, a wrong key, an unknown key id; key rotation; the keyring's
 * parser (errors name the line, never the key). Data comes from a seeded generator; the seed is
 * printed (ETCDBR_TEST_SEED repeats a run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/testutil.h"

#include "codec/compress.h"
#include "codec/crypt.h"
#include "codec/filter_group.h"
#include "codec/io.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 1024 /* the smallest chunk: many chunks from little data */
#define HDR_LEN(id_len) (15 + (id_len) + 64)
#define FRAME_OVERHEAD 20

/* key bytes 0..31, 32..63, and a third */
static const char K1[] = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
static const char K2[] = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
static const char K3[] = "QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8=";

static unsigned g_seed;

/* ---- helpers ---- */

typedef struct {
    IoWriter base;
    uint8_t *buf;
    size_t len, cap;
} MemSink;

static int sink_write(IoWriter *w, const void *buf, size_t len) {
    MemSink *m = (MemSink *)w;
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
}

static Keyring *ring(const char *text) {
    Keyring *kr = NULL;
    int rc = keyring_parse(text, strlen(text), "test keys", &kr);
    if (rc) fail_msg("keyring_parse: %s", err_msg());
    return kr;
}

static uint8_t *random_bytes(size_t n, unsigned *seed) {
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(rand_r(seed) >> 7);
    return p;
}

/* Encrypts data writing pieces of `step` bytes (0 = all at once). Returns the object. */
static uint8_t *encrypt(const Keyring *kr, size_t chunk, const uint8_t *data, size_t len,
                        size_t step, size_t *out_len) {
    MemSink s;
    sink_init(&s);
    IoWriter *w = crypt_writer_new(kr, chunk, &s.base);
    assert_non_null(w);
    size_t off = 0;
    while (off < len) {
        size_t n = step && step < len - off ? step : len - off;
        assert_int_equal(io_write(w, data + off, n), 0);
        off += n;
    }
    assert_int_equal(io_finish(w), 0);
    io_writer_free(w);
    *out_len = s.len;
    return s.buf ? s.buf : calloc(1, 1);
}

/* Decrypts obj reading `cap` bytes at a time. Returns the reader's result; *plain gets what was
 * given out (malloc'ed), *plain_len its length. */
static int decrypt(const Keyring *kr, const uint8_t *obj, size_t len, size_t cap, uint8_t **plain,
                   size_t *plain_len) {
    IoReader *src = io_mem_reader_new(obj, len);
    IoReader *r = crypt_reader_new(kr, src);
    assert_non_null(r);
    MemSink s;
    sink_init(&s);
    uint8_t *buf = malloc(cap);
    int rc = 0;
    for (;;) {
        size_t got = 0;
        rc = io_read(r, buf, cap, &got);
        if (rc || got == 0) break;
        assert_true(got <= cap);
        sink_write(&s.base, buf, got);
    }
    /* errors stick: the next read says the same */
    if (rc) {
        size_t got = 1;
        assert_int_equal(io_read(r, buf, cap, &got), rc);
        assert_int_equal(got, 0);
    }
    free(buf);
    io_reader_free(r);
    io_reader_free(src);
    *plain = s.buf;
    *plain_len = s.len;
    return rc;
}

static int decrypt_discard(const Keyring *kr, const uint8_t *obj, size_t len) {
    uint8_t *p = NULL;
    size_t n = 0;
    int rc = decrypt(kr, obj, len, 4096, &p, &n);
    free(p);
    return rc;
}

static void expect_fail(const Keyring *kr, const uint8_t *obj, size_t len, int code,
                        const char *needle) {
    int rc = decrypt_discard(kr, obj, len);
    if (rc != code || (needle && !strstr(err_msg(), needle)))
        fail_msg("want %s with \"%s\", got %s: %s", err_name(code), needle ? needle : "",
                 err_name(rc), err_msg());
}

/* Offset of chunk i's frame in an object of full chunks of CHUNK bytes, key id length idl. */
static size_t frame_at(size_t idl, size_t i) {
    return HDR_LEN(idl) + i * (CHUNK + FRAME_OVERHEAD);
}

static int setup(void **state) {
    (void)state;
    const char *env = getenv("ETCDBR_TEST_SEED");
    g_seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    print_message("test_crypt seed %u (ETCDBR_TEST_SEED=%u repeats this run)\n", g_seed, g_seed);
    return 0;
}

/* ---- round trips ---- */

static void test_round_trip_at_chunk_boundaries_and_odd_io_sizes(void **state) {
    (void)state;
    Keyring *kr = ring("k1 "
                       "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    const size_t chunks[] = {CHUNK, CRYPT_CHUNK_DEFAULT};
    unsigned seed = g_seed;
    for (size_t c = 0; c < 2; c++) {
        size_t ch = chunks[c];
        const size_t sizes[] = {0,          1,      ch - 1,     ch,
                                ch + 1,     2 * ch, 2 * ch + 1, 5 * ch + 17,
                                3 * ch - 1, 7,      ch / 2,     (size_t)(rand_r(&seed) % (4 * ch))};
        const size_t steps[] = {0, 1, 7, 1000, ch + 3};
        const size_t caps[] = {1, 13, 4096, 3 * ch};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            uint8_t *data = random_bytes(n, &seed);
            size_t step = steps[(i + c) % 5];
            if (step == 1 && n > 10000) step = 7; /* keep it quick */
            size_t olen = 0;
            uint8_t *obj = encrypt(kr, ch, data, n, step, &olen);
            /* layout: header + one frame per chunk (an empty object: one empty final chunk) */
            size_t frames = n == 0 ? 1 : (n + ch - 1) / ch;
            assert_int_equal(olen, HDR_LEN(2) + frames * FRAME_OVERHEAD + n);
            uint8_t *plain = NULL;
            size_t plen = 0;
            int rc = decrypt(kr, obj, olen, caps[(i + c) % 4], &plain, &plen);
            if (rc) fail_msg("size %zu chunk %zu: %s", n, ch, err_msg());
            assert_int_equal(plen, n);
            if (n) assert_memory_equal(plain, data, n);
            free(plain);
            free(obj);
            free(data);
        }
    }
    keyring_free(kr);
}

static void test_header_layout_is_documented_one(void **state) {
    (void)state;
    Keyring *kr = ring("key-2026.a AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n");
    size_t olen = 0;
    uint8_t *obj = encrypt(kr, 4096, (const uint8_t *)"hello", 5, 0, &olen);
    assert_memory_equal(obj, "etcdbrAE", 8);
    assert_int_equal(obj[8], 1); /* version */
    assert_int_equal(obj[9], 1); /* AES-256-GCM, HKDF-SHA256 */
    assert_int_equal(obj[10] << 24 | obj[11] << 16 | obj[12] << 8 | obj[13], 4096);
    assert_int_equal(obj[14], 10);
    assert_memory_equal(obj + 15, "key-2026.a", 10);
    size_t f = HDR_LEN(10);
    /* one final frame of 5 bytes: the word, 5 bytes of ciphertext, the tag */
    assert_int_equal(obj[f], 0x80);
    assert_int_equal(obj[f + 3], 5);
    assert_int_equal(olen, f + 4 + 5 + 16);
    assert_true(memcmp(obj + f + 4, "hello", 5) != 0);
    /* a fresh salt per object: the same plaintext never gives the same bytes */
    size_t olen2 = 0;
    uint8_t *obj2 = encrypt(kr, 4096, (const uint8_t *)"hello", 5, 0, &olen2);
    assert_int_equal(olen2, olen);
    assert_true(memcmp(obj + 25, obj2 + 25, 32) != 0);
    assert_true(memcmp(obj + f + 4, obj2 + f + 4, 5) != 0);
    free(obj);
    free(obj2);
    keyring_free(kr);
}

static void test_writer_refuses_bad_arguments(void **state) {
    (void)state;
    MemSink s;
    sink_init(&s);
    assert_null(crypt_writer_new(NULL, 0, &s.base));
    assert_non_null(strstr(err_msg(), "no key"));
    Keyring *kr = ring("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    assert_null(crypt_writer_new(kr, CRYPT_CHUNK_MIN - 1, &s.base));
    assert_null(crypt_writer_new(kr, CRYPT_CHUNK_MAX + 1, &s.base));
    IoWriter *w = crypt_writer_new(kr, CRYPT_CHUNK_MAX, &s.base);
    assert_non_null(w);
    assert_int_equal(io_finish(w), 0);
    assert_int_equal(io_write(w, "x", 1), ERR_INVALID);
    io_writer_free(w);
    free(s.buf);
    keyring_free(kr);
}

/* ---- faults ---- */

/* An object of 3 full chunks and a short final one (id "k1"). */
static uint8_t *four_chunk_object(const Keyring *kr, uint8_t **data, size_t *n, size_t *olen) {
    unsigned seed = g_seed + 1;
    *n = 3 * CHUNK + 300;
    *data = random_bytes(*n, &seed);
    return encrypt(kr, CHUNK, *data, *n, 0, olen);
}

static void test_every_flipped_byte_is_detected(void **state) {
    (void)state;
    Keyring *kr = ring("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    uint8_t *data, *obj;
    size_t n, olen;
    obj = four_chunk_object(kr, &data, &n, &olen);
    unsigned seed = g_seed + 2;
    for (size_t pos = 0; pos < olen; pos++) {
        uint8_t bit = (uint8_t)(1u << (rand_r(&seed) % 8));
        obj[pos] ^= bit;
        uint8_t *plain = NULL;
        size_t plen = 0;
        int rc = decrypt(kr, obj, olen, 4096, &plain, &plen);
        if (rc == 0) fail_msg("flipping bit 0x%02x of byte %zu went unnoticed", bit, pos);
        /* what was given out before the error is authenticated plaintext: a prefix, whole
         * chunks only */
        assert_true(plen <= n && plen % CHUNK == 0);
        if (plen) assert_memory_equal(plain, data, plen);
        if (pos >= HDR_LEN(2)) {
            size_t chunk = (pos - HDR_LEN(2)) / (CHUNK + FRAME_OVERHEAD);
            char want[32];
            snprintf(want, sizeof want, "chunk %zu", chunk);
            if (rc != ERR_CORRUPT || !strstr(err_msg(), want))
                fail_msg("byte %zu (in chunk %zu): %s: %s", pos, chunk, err_name(rc), err_msg());
        } else if (pos >= 17 && pos < HDR_LEN(2)) {
            /* salt or header check: the header does not authenticate */
            if (rc != ERR_CORRUPT || !strstr(err_msg(), "wrong key or not ours: key id \"k1\""))
                fail_msg("header byte %zu: %s: %s", pos, err_name(rc), err_msg());
        } else {
            assert_true(rc == ERR_CORRUPT || rc == ERR_UNSUPPORTED || rc == ERR_INVALID);
        }
        free(plain);
        obj[pos] ^= bit;
    }
    assert_int_equal(decrypt_discard(kr, obj, olen), 0);
    free(obj);
    free(data);
    keyring_free(kr);
}

static void test_truncation_at_every_length_is_detected(void **state) {
    (void)state;
    Keyring *kr = ring("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    uint8_t *data, *obj;
    size_t n, olen;
    obj = four_chunk_object(kr, &data, &n, &olen);
    for (size_t cut = 0; cut < olen; cut++) {
        int rc = decrypt_discard(kr, obj, cut);
        if (rc != ERR_CORRUPT) fail_msg("cut at %zu: %s: %s", cut, err_name(rc), err_msg());
    }
    /* the precise messages: empty, inside the header, at a chunk boundary, inside a chunk */
    expect_fail(kr, obj, 0, ERR_CORRUPT, "the object is empty");
    expect_fail(kr, obj, 20, ERR_CORRUPT, "header: truncated");
    expect_fail(kr, obj, HDR_LEN(2), ERR_CORRUPT, "ends after its header");
    for (size_t i = 1; i <= 3; i++) {
        char want[96];
        snprintf(want, sizeof want, "ends after chunk %zu (stored byte %zu) without its final",
                 i - 1, frame_at(2, i));
        expect_fail(kr, obj, frame_at(2, i), ERR_CORRUPT, want);
        snprintf(want, sizeof want, "truncated: chunk %zu at stored byte %zu ends after", i,
                 frame_at(2, i));
        expect_fail(kr, obj, frame_at(2, i) + 100, ERR_CORRUPT, want);
        expect_fail(kr, obj, frame_at(2, i) + 2, ERR_CORRUPT, "of its length word");
    }
    expect_fail(kr, obj, olen - 1, ERR_CORRUPT, "chunk 3 at stored byte");
    free(obj);
    free(data);
    keyring_free(kr);
}

static void test_reordered_dropped_repeated_chunks_are_named(void **state) {
    (void)state;
    Keyring *kr = ring("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    uint8_t *data, *obj;
    size_t n, olen;
    obj = four_chunk_object(kr, &data, &n, &olen);
    const size_t fl = CHUNK + FRAME_OVERHEAD;
    uint8_t *t = malloc(olen + fl);

    /* swap chunks 1 and 2 */
    memcpy(t, obj, olen);
    memcpy(t + frame_at(2, 1), obj + frame_at(2, 2), fl);
    memcpy(t + frame_at(2, 2), obj + frame_at(2, 1), fl);
    expect_fail(kr, t, olen, ERR_CORRUPT, "chunk 1 (stored bytes");
    expect_fail(kr, t, olen, ERR_CORRUPT,
                "is the object's chunk 2: chunks were dropped or reordered");

    /* drop chunk 1 */
    memcpy(t, obj, frame_at(2, 1));
    memcpy(t + frame_at(2, 1), obj + frame_at(2, 2), olen - frame_at(2, 2));
    expect_fail(kr, t, olen - fl, ERR_CORRUPT, "chunk 1 (stored bytes");
    expect_fail(kr, t, olen - fl, ERR_CORRUPT, "is the object's chunk 2");

    /* drop chunk 0 */
    memcpy(t, obj, frame_at(2, 0));
    memcpy(t + frame_at(2, 0), obj + frame_at(2, 1), olen - frame_at(2, 1));
    expect_fail(kr, t, olen - fl, ERR_CORRUPT, "chunk 0 (stored bytes");

    /* chunk 1 repeated in place of chunk 2 */
    memcpy(t, obj, olen);
    memcpy(t + frame_at(2, 2), obj + frame_at(2, 1), fl);
    expect_fail(kr, t, olen, ERR_CORRUPT, "chunk 2 (stored bytes");
    expect_fail(kr, t, olen, ERR_CORRUPT, "is the object's chunk 1: chunks were reordered");

    /* the final chunk dropped: looks like a clean cut after chunk 2 */
    expect_fail(kr, obj, frame_at(2, 3), ERR_CORRUPT, "without its final chunk");

    /* the final flag moved: chunk 2 marked final (word altered) */
    memcpy(t, obj, frame_at(2, 3));
    t[frame_at(2, 2)] |= 0x80;
    expect_fail(kr, t, frame_at(2, 3), ERR_CORRUPT, "chunk 2");

    /* a chunk from another object with the same key: not this object's */
    size_t olen2 = 0;
    uint8_t *other = encrypt(kr, CHUNK, data, n, 0, &olen2);
    memcpy(t, obj, olen);
    memcpy(t + frame_at(2, 1), other + frame_at(2, 1), fl);
    expect_fail(kr, t, olen, ERR_CORRUPT, "chunk 1 (stored bytes");
    expect_fail(kr, t, olen, ERR_CORRUPT, "does not authenticate");

    /* bytes appended after the final chunk */
    memcpy(t, obj, olen);
    t[olen] = 0;
    char want[80];
    snprintf(want, sizeof want, "bytes after the final chunk 3, from stored byte %zu", olen);
    expect_fail(kr, t, olen + 1, ERR_CORRUPT, want);
    memcpy(t + olen, obj + frame_at(2, 3), olen - frame_at(2, 3));
    expect_fail(kr, t, olen + olen - frame_at(2, 3), ERR_CORRUPT, "after the final chunk");

    free(other);
    free(t);
    free(obj);
    free(data);
    keyring_free(kr);
}

static void test_wrong_key_unknown_id_and_foreign_bytes(void **state) {
    (void)state;
    char text[256];
    snprintf(text, sizeof text, "k1 %s\n", K1);
    Keyring *kr = ring(text);
    snprintf(text, sizeof text, "k1 %s\n", K2);
    Keyring *wrong = ring(text);
    snprintf(text, sizeof text, "k2 %s\nk3 %s\n", K2, K3);
    Keyring *other = ring(text);
    size_t olen = 0;
    uint8_t *obj = encrypt(kr, CHUNK, (const uint8_t *)"value", 5, 0, &olen);
    expect_fail(wrong, obj, olen, ERR_CORRUPT, "wrong key or not ours: key id \"k1\"");
    expect_fail(other, obj, olen, ERR_INVALID, "key id \"k1\"");
    expect_fail(other, obj, olen, ERR_INVALID, "(k2, k3)");
    expect_fail(NULL, obj, olen, ERR_INVALID, "none");
    /* no key material in any message */
    assert_null(strstr(err_msg(), K1));
    /* a gzip object, plain text: not ours */
    expect_fail(kr, (const uint8_t *)"\x1f\x8b\x08\x00", 4, ERR_CORRUPT, "not an encrypted object");
    expect_fail(kr, (const uint8_t *)"{\"events\":[]} and more text", 27, ERR_CORRUPT,
                "magic is missing");
    /* a newer version / algorithm */
    obj[8] = 3;
    expect_fail(kr, obj, olen, ERR_UNSUPPORTED, "format version 3");
    obj[8] = 1;
    obj[9] = 7;
    expect_fail(kr, obj, olen, ERR_UNSUPPORTED, "algorithm 7");
    obj[9] = 1;
    /* a chunk size over the bound a reader accepts: refused before allocating it */
    obj[10] = 0x7f;
    expect_fail(kr, obj, olen, ERR_CORRUPT, "chunk size");
    free(obj);
    keyring_free(kr);
    keyring_free(wrong);
    keyring_free(other);
}

/* Reads everything from r (freed) into *plain (malloc'ed); the reader's result. */
static int read_all(IoReader *r, uint8_t **plain, size_t *plain_len) {
    MemSink s;
    sink_init(&s);
    uint8_t buf[777];
    int rc;
    for (;;) {
        size_t got = 0;
        rc = io_read(r, buf, sizeof buf, &got);
        if (rc || got == 0) break;
        sink_write(&s.base, buf, got);
    }
    io_reader_free(r);
    *plain = s.buf ? s.buf : calloc(1, 1);
    *plain_len = s.len;
    return rc;
}

/* Decrypts obj read under the name binding (NULL: none). */
static int decrypt_bound(const Keyring *kr, const char *binding, const uint8_t *obj, size_t len,
                         uint8_t **plain, size_t *plain_len) {
    IoReader *src = io_mem_reader_new(obj, len);
    IoReader *r = crypt_reader_new_bound(kr, binding, src);
    assert_non_null(r);
    int rc = read_all(r, plain, plain_len);
    io_reader_free(src);
    return rc;
}

/* Format version 2 binds the object's name into every chunk: it decrypts only under that name
 * (an object swapped with or renamed to another fails, naming the name), a reader without a
 * name refuses it, and a version 1 object (written before names were bound) still decrypts
 * under any name. Data and names from the seed. */
static void test_name_binding_and_old_format(void **state) {
    (void)state;
    Keyring *kr = ring("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    unsigned seed = g_seed ^ 0x5eedu;
    for (int round = 0; round < 8; round++) {
        size_t len = (size_t)(rand_r(&seed) % (5 * CHUNK));
        uint8_t *data = random_bytes(len, &seed);
        char name[64], other[64];
        long long start = rand_r(&seed) % 1000, last = start + rand_r(&seed) % 1000;
        snprintf(name, sizeof name, "Incr-%08lld-%08lld-%d", start, last, 1700000000 + round);
        /* the other name differs in one field: kind, a revision or the time */
        switch (round % 4) {
        case 0:
            snprintf(other, sizeof other, "Full-%08lld-%08lld-%d", start, last, 1700000000 + round);
            break;
        case 1:
            snprintf(other, sizeof other, "Incr-%08lld-%08lld-%d", start + 1, last + 1,
                     1700000000 + round);
            break;
        case 2:
            snprintf(other, sizeof other, "Incr-%08lld-%08lld-%d", start, last + 1,
                     1700000000 + round);
            break;
        default:
            snprintf(other, sizeof other, "Incr-%08lld-%08lld-%d", start, last, 1700000001 + round);
        }
        MemSink s;
        sink_init(&s);
        IoWriter *w = crypt_writer_new_bound(kr, CHUNK, name, &s.base);
        assert_non_null(w);
        if (len) assert_int_equal(io_write(w, data, len), 0);
        assert_int_equal(io_finish(w), 0);
        io_writer_free(w);
        assert_int_equal(s.buf[8], 2); /* format version 2 */

        uint8_t *plain = NULL;
        size_t plain_len = 0;
        assert_int_equal(decrypt_bound(kr, name, s.buf, s.len, &plain, &plain_len), 0);
        assert_int_equal(plain_len, len);
        assert_true(len == 0 || memcmp(plain, data, len) == 0);
        free(plain);
        assert_int_equal(decrypt_bound(kr, other, s.buf, s.len, &plain, &plain_len), ERR_CORRUPT);
        assert_int_equal(plain_len, 0);
        assert_non_null(strstr(err_msg(), "does not authenticate under the name"));
        assert_non_null(strstr(err_msg(), other));
        free(plain);
        assert_int_equal(decrypt_bound(kr, NULL, s.buf, s.len, &plain, &plain_len), ERR_INVALID);
        free(plain);
        /* downgraded to version 1 to skip the name: the header check fails */
        s.buf[8] = 1;
        assert_int_equal(decrypt_bound(kr, name, s.buf, s.len, &plain, &plain_len), ERR_CORRUPT);
        assert_non_null(strstr(err_msg(), "header check failed"));
        free(plain);
        free(s.buf);

        /* version 1 (no name bound) reads under any name, and without one */
        size_t olen = 0;
        uint8_t *old = encrypt(kr, CHUNK, data, len, 0, &olen);
        assert_int_equal(old[8], 1);
        assert_int_equal(decrypt_bound(kr, other, old, olen, &plain, &plain_len), 0);
        assert_int_equal(plain_len, len);
        assert_true(len == 0 || memcmp(plain, data, len) == 0);
        free(plain);
        assert_int_equal(decrypt_bound(kr, NULL, old, olen, &plain, &plain_len), 0);
        free(plain);
        free(old);
        free(data);
    }
    /* the filter group passes the name on */
    MemSink s;
    sink_init(&s);
    IoFilterGroup *g = io_filter_group_new(&s.base);
    assert_int_equal(io_filter_group_add_encrypt_bound(g, kr, "Full-00000000-00000007-1"), 0);
    assert_int_equal(io_write(io_filter_group_io(g), "etcd", 4), 0);
    assert_int_equal(io_filter_group_finish(g), 0);
    io_filter_group_free(g);
    assert_int_equal(s.buf[8], 2);
    IoReader *src = io_mem_reader_new(s.buf, s.len);
    g = io_filter_group_new_reader(src);
    assert_int_equal(io_filter_group_add_decrypt_bound(g, kr, "Full-00000000-00000008-1"), 0);
    uint8_t buf[64];
    size_t got = 0;
    assert_int_equal(io_read(io_filter_group_reader(g), buf, sizeof buf, &got), ERR_CORRUPT);
    io_filter_group_free(g);
    io_reader_free(src);
    free(s.buf);
    keyring_free(kr);
}

static void test_rotation_old_objects_still_decrypt(void **state) {
    (void)state;
    char text[256];
    snprintf(text, sizeof text, "old %s\n", K1);
    Keyring *before = ring(text);
    snprintf(text, sizeof text, "# rotated 2026-12\nnew %s\nold %s\n", K2, K1);
    Keyring *after = ring(text);
    assert_string_equal(keyring_id(after, 0), "new");
    assert_int_equal(keyring_count(after), 2);
    size_t l_old = 0, l_new = 0;
    uint8_t *o_old = encrypt(before, CHUNK, (const uint8_t *)"written before", 14, 0, &l_old);
    uint8_t *o_new = encrypt(after, CHUNK, (const uint8_t *)"written after", 13, 0, &l_new);
    assert_memory_equal(o_new + 15, "new", 3);
    uint8_t *p = NULL;
    size_t pl = 0;
    assert_int_equal(decrypt(after, o_old, l_old, 64, &p, &pl), 0);
    assert_int_equal(pl, 14);
    assert_memory_equal(p, "written before", 14);
    free(p);
    assert_int_equal(decrypt(after, o_new, l_new, 64, &p, &pl), 0);
    assert_memory_equal(p, "written after", 13);
    free(p);
    /* the old keyring alone cannot read what the new key wrote, and says which key it needs */
    expect_fail(before, o_new, l_new, ERR_INVALID, "key id \"new\"");
    /* a copy reads the same */
    Keyring *copy = keyring_copy(after);
    assert_int_equal(keyring_count(copy), 2);
    assert_string_equal(keyring_id(copy, 1), "old");
    assert_int_equal(decrypt(copy, o_old, l_old, 64, &p, &pl), 0);
    free(p);
    keyring_free(copy);
    assert_null(keyring_copy(NULL));
    free(o_old);
    free(o_new);
    keyring_free(before);
    keyring_free(after);
}

/* ---- filter group ---- */

static void test_filter_group_compress_encrypt_round_trip(void **state) {
    (void)state;
    Keyring *kr = ring("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    const CompressKind kinds[] = {COMPRESS_NONE, COMPRESS_GZIP, COMPRESS_ZLIB, COMPRESS_LZW,
                                  COMPRESS_ZSTD};
    unsigned seed = g_seed + 3;
    size_t n = 200000;
    uint8_t *data = random_bytes(n, &seed);
    for (size_t i = 0; i < n; i += 3)
        data[i] = 'a'; /* compressible */
    for (size_t k = 0; k < 5; k++) {
        MemSink s;
        sink_init(&s);
        IoFilterGroup *g = io_filter_group_new(&s.base);
        assert_int_equal(io_filter_group_add_count(g, "plain"), 0);
        assert_int_equal(io_filter_group_add_compress(g, kinds[k]), 0);
        assert_int_equal(io_filter_group_add_encrypt(g, kr), 0);
        assert_int_equal(io_filter_group_add_count(g, "stored"), 0);
        assert_int_equal(io_write(io_filter_group_io(g), data, n), 0);
        assert_int_equal(io_filter_group_finish(g), 0);
        uint64_t stored = 0;
        assert_int_equal(io_filter_group_count(g, "stored", &stored), 0);
        assert_int_equal(stored, s.len);
        io_filter_group_free(g);
        assert_memory_equal(s.buf, "etcdbrAE", 8);

        IoReader *src = io_mem_reader_new(s.buf, s.len);
        g = io_filter_group_new_reader(src);
        assert_int_equal(io_filter_group_add_decrypt(g, kr), 0);
        assert_int_equal(io_filter_group_add_decompress(g, kinds[k]), 0);
        assert_int_equal(io_filter_group_add_count(g, "plain"), 0);
        uint8_t *back = malloc(n + 1);
        size_t got = 0;
        assert_int_equal(io_read_full(io_filter_group_reader(g), back, n + 1, &got), 0);
        assert_int_equal(got, n);
        assert_memory_equal(back, data, n);
        free(back);
        io_filter_group_free(g);
        io_reader_free(src);
        free(s.buf);
    }
    /* wrong kinds of group, no key */
    MemSink s;
    sink_init(&s);
    IoFilterGroup *g = io_filter_group_new(&s.base);
    assert_int_equal(io_filter_group_add_decrypt(g, kr), ERR_INVALID);
    assert_int_equal(io_filter_group_add_encrypt(g, NULL), ERR_INVALID);
    io_filter_group_free(g);
    IoReader *src = io_mem_reader_new("", 0);
    g = io_filter_group_new_reader(src);
    assert_int_equal(io_filter_group_add_encrypt(g, kr), ERR_INVALID);
    assert_int_equal(io_filter_group_add_decrypt(g, NULL), ERR_INVALID);
    io_filter_group_free(g);
    io_reader_free(src);
    free(data);
    keyring_free(kr);
}

/* ---- memory ---- */

/* A source of n pattern bytes, generated as read. */
typedef struct {
    IoReader base;
    uint64_t n, pos;
} PatternReader;

static uint8_t pattern_at(uint64_t i) {
    return (uint8_t)(i * 31 + (i >> 11));
}

static int pattern_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    PatternReader *p = (PatternReader *)r;
    size_t k = p->n - p->pos < cap ? (size_t)(p->n - p->pos) : cap;
    for (size_t i = 0; i < k; i++)
        ((uint8_t *)buf)[i] = pattern_at(p->pos + i);
    p->pos += k;
    *got = k;
    return 0;
}
static void pattern_free(IoReader *r) {
    (void)r;
}
static const IoReaderVt pattern_vt = {pattern_read, pattern_free};

/* A sink that checks the pattern and counts. */
typedef struct {
    IoWriter base;
    uint64_t pos;
    int bad;
} PatternCheck;

static int check_write(IoWriter *w, const void *buf, size_t len) {
    PatternCheck *c = (PatternCheck *)w;
    for (size_t i = 0; i < len; i++)
        if (((const uint8_t *)buf)[i] != pattern_at(c->pos + i)) c->bad = 1;
    c->pos += len;
    return 0;
}
static const IoWriterVt check_vt = {check_write, sink_finish, sink_free};

static long max_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* 96 MiB through the writer into a file and back through the reader: the peak RSS grows by no
 * more than a few chunks (holding the object would add 96 MiB). */
static void test_memory_is_bounded_by_the_chunk(void **state) {
    (void)state;
    const uint64_t n = 96ull << 20;
    Keyring *kr = ring("k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
    char path[] = "/tmp/etcdbr-test-crypt-mem-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    long before = max_rss_kib();
    PatternReader src = {{&pattern_vt}, n, 0};
    IoWriter *fdw = io_fd_writer_new(fd);
    IoWriter *w = crypt_writer_new(kr, CRYPT_CHUNK_MAX, fdw);
    assert_non_null(w);
    assert_int_equal(io_copy(&src.base, w, NULL), 0);
    assert_int_equal(io_finish(w), 0);
    io_writer_free(w);
    io_writer_free(fdw);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    IoReader *fdr = io_fd_reader_new(fd);
    IoReader *r = crypt_reader_new(kr, fdr);
    PatternCheck chk = {{&check_vt}, 0, 0};
    assert_int_equal(io_copy(r, &chk.base, NULL), 0);
    io_reader_free(r);
    io_reader_free(fdr);
    close(fd);
    long grew = max_rss_kib() - before;
    print_message("96 MiB encrypted and decrypted in 1 MiB chunks: peak RSS grew by %ld KiB\n",
                  grew);
    assert_int_equal(chk.pos, n);
    assert_false(chk.bad);
    assert_true(grew < 16 * 1024);
    keyring_free(kr);
}

/* ---- keyring ---- */

static void expect_parse_fail(const char *text, const char *needle) {
    Keyring *kr = NULL;
    int rc = keyring_parse(text, strlen(text), "key file /k", &kr);
    assert_null(kr);
    if (rc != ERR_INVALID || !strstr(err_msg(), needle))
        fail_msg("parse of a bad keyring: want \"%s\", got %s: %s", needle, err_name(rc),
                 err_msg());
    /* never the key itself, nor a part of it */
    assert_null(strstr(err_msg(), "AAECAwQF"));
    assert_null(strstr(err_msg(), "ICEiIyQl"));
}

static void test_keyring_parses_comments_blanks_and_separators(void **state) {
    (void)state;
    char text[512];
    snprintf(text, sizeof text,
             "# keys for etcd-main\n\n  \t\nnew\t%s  \r\n   # old one below\nold %s\n", K2, K1);
    Keyring *kr = ring(text);
    assert_int_equal(keyring_count(kr), 2);
    assert_string_equal(keyring_id(kr, 0), "new");
    assert_string_equal(keyring_id(kr, 1), "old");
    assert_null(keyring_id(kr, 2));
    keyring_free(kr);
    /* one line for an environment variable; unpadded base64 too */
    snprintf(text, sizeof text, "a.b_c-1 %s;z %.43s", K1, K2);
    kr = ring(text);
    assert_int_equal(keyring_count(kr), 2);
    assert_string_equal(keyring_id(kr, 1), "z");
    keyring_free(kr);
}

static void test_keyring_errors_name_the_line_never_the_key(void **state) {
    (void)state;
    char text[512];
    snprintf(text, sizeof text, "# c\nk1 %s\nk2\n", K1);
    expect_parse_fail(text, "key file /k line 3: want \"<key-id> <base64 of 32 bytes>\"");
    snprintf(text, sizeof text, "k1 %s extra\n", K1);
    expect_parse_fail(text, "line 1: more than two fields");
    snprintf(text, sizeof text, "k1 %s\nk2 %s\nk1 %s\n", K1, K2, K2);
    expect_parse_fail(text, "line 3: key id \"k1\" given twice");
    snprintf(text, sizeof text, "k1 %.40s\n", K1); /* 30 bytes */
    expect_parse_fail(text, "line 1: the key is not standard base64 of exactly 32");
    snprintf(text, sizeof text, "k1 %s%s\n", K1, "AAAA"); /* 35 bytes and bad padding */
    expect_parse_fail(text, "line 1: the key is not");
    snprintf(text, sizeof text, "k1 %.42s*=\n", K1);
    expect_parse_fail(text, "not standard base64");
    /* fields swapped: the key (unpadded: a valid id) is not quoted back */
    snprintf(text, sizeof text, "%.43s k1\n", K1);
    expect_parse_fail(text, "line 1: the key is not standard base64");
    snprintf(text, sizeof text, "k/1 %s\n", K1);
    expect_parse_fail(text, "line 1: key id has characters other than");
    expect_parse_fail("# nothing\n\n", "no key");
    expect_parse_fail("", "no key");
    char longid[200];
    memset(longid, 'a', 65);
    snprintf(longid + 65, sizeof longid - 65, " %s", K1);
    expect_parse_fail(longid, "longer than 64");
}

/* --encryption-key-file (or ETCDBR_ENCRYPTION_KEY_FILE) given the key text instead of a path,
 * as an operator may when mixing it up with ETCDBR_ENCRYPTION_KEYS: the failure must not quote
 * the value back into the log (docs/encryption.md: keys never go into logs or error messages). */
static void test_key_text_given_as_the_file_name_is_not_quoted(void **state) {
    (void)state;
    char text[256];
    Keyring *kr = NULL;
    snprintf(text, sizeof text, "k1 %s", K1);
    assert_int_equal(keyring_load_file(text, &kr, NULL), ERR_NOT_FOUND);
    assert_null(strstr(err_msg(), K1));
    assert_non_null(strstr(err_msg(), "ETCDBR_ENCRYPTION_KEYS"));
    /* the key alone, unpadded, and two keys separated by ';' */
    assert_int_equal(keyring_load_file(K2, &kr, NULL), ERR_NOT_FOUND);
    assert_null(strstr(err_msg(), "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8"));
    snprintf(text, sizeof text, "k1 %.43s;k2 %s", K1, K2);
    assert_int_equal(keyring_load_file(text, &kr, NULL), ERR_NOT_FOUND);
    assert_null(strstr(err_msg(), "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"));
    assert_null(strstr(err_msg(), "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8"));
    /* a real path that is missing is still named */
    assert_int_equal(keyring_load_file("/nonexistent-etcdbr/keys", &kr, NULL), ERR_NOT_FOUND);
    assert_non_null(strstr(err_msg(), "/nonexistent-etcdbr/keys"));
    assert_true(crypt_text_holds_key(text, strlen(text)));
    assert_true(crypt_text_holds_key(K3, strlen(K3)));
    assert_false(crypt_text_holds_key("/etc/etcdbr/keys", 16));
    assert_false(crypt_text_holds_key(K3, 40)); /* 30 bytes: not a key */
    assert_false(crypt_text_holds_key("", 0));
}

/* A FIFO (or another non-regular file) given as the key file is refused at once; open() of a
 * FIFO without a writer used to block for ever. SIGALRM ends the test if it blocks. */
static void test_keyring_file_fifo_is_refused_without_blocking(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-test-crypt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    Keyring *kr = NULL;
    alarm(5);
    assert_int_equal(keyring_load_file(path, &kr, NULL), ERR_INVALID);
    alarm(0);
    assert_non_null(strstr(err_msg(), "not a regular file"));
    assert_null(kr);
    unlink(path);
    rmdir(dir);
}

static void test_keyring_file_reports_mode_and_missing_file(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-test-crypt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/keys", dir);
    char text[128];
    snprintf(text, sizeof text, "k1 %s\n", K1);
    write_file(path, text, strlen(text));
    assert_int_equal(chmod(path, 0640), 0);
    Keyring *kr = NULL;
    unsigned mode = 0;
    assert_int_equal(keyring_load_file(path, &kr, &mode), 0);
    assert_int_equal(mode, 0640);
    assert_int_equal(keyring_count(kr), 1);
    keyring_free(kr);
    snprintf(text, sizeof text, "k1 %s\nbad line here\n", K1);
    write_file(path, text, strlen(text));
    assert_int_equal(keyring_load_file(path, &kr, NULL), ERR_INVALID);
    assert_non_null(strstr(err_msg(), path));
    assert_non_null(strstr(err_msg(), "line 2"));
    unlink(path);
    assert_int_equal(keyring_load_file(path, &kr, NULL), ERR_NOT_FOUND);
    assert_int_equal(keyring_load_file(dir, &kr, NULL), ERR_INVALID);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_at_chunk_boundaries_and_odd_io_sizes),
        cmocka_unit_test(test_header_layout_is_documented_one),
        cmocka_unit_test(test_writer_refuses_bad_arguments),
        cmocka_unit_test(test_every_flipped_byte_is_detected),
        cmocka_unit_test(test_truncation_at_every_length_is_detected),
        cmocka_unit_test(test_reordered_dropped_repeated_chunks_are_named),
        cmocka_unit_test(test_wrong_key_unknown_id_and_foreign_bytes),
        cmocka_unit_test(test_rotation_old_objects_still_decrypt),
        cmocka_unit_test(test_name_binding_and_old_format),
        cmocka_unit_test(test_filter_group_compress_encrypt_round_trip),
        cmocka_unit_test(test_memory_is_bounded_by_the_chunk),
        cmocka_unit_test(test_keyring_parses_comments_blanks_and_separators),
        cmocka_unit_test(test_keyring_errors_name_the_line_never_the_key),
        cmocka_unit_test(test_keyring_file_reports_mode_and_missing_file),
        cmocka_unit_test(test_keyring_file_fifo_is_refused_without_blocking),
        cmocka_unit_test(test_key_text_given_as_the_file_name_is_not_quoted),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
