/* fuzz_decrypt: feeds outside bytes to the decrypting reader and to the keyring parser (crypt.h).
 * Input byte 0 selects: bit 7 set = the rest is keyring text (a key file); otherwise the rest is
 * an object decrypted with a fixed keyring (ids k1, k2), read (1 + (b & 0x7f) * 131) bytes at a
 * time. Checks: no read overruns the caller's buffer; an object that decrypts cleanly holds at
 * most its stored bytes minus the header, and encrypting that plaintext again under the same key
 * decrypts to the same bytes; an error is one of the documented codes; a parsed keyring has
 * 1.. keys with valid ids, and a failed parse never quotes a key. */
#include "codec/crypt.h"
#include "common/err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

enum { FUZZ_KEEP = 1 << 20, FUZZ_STORE = (1 << 20) + (1 << 16) };

static const char KEYS[] = "k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"
                           "k2 ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=\n";

typedef struct {
    IoWriter base;
    uint8_t *buf;
    size_t len, limit;
    int overflow;
} FuzzSink;

static int fsink_write(IoWriter *w, const void *buf, size_t len) {
    FuzzSink *s = (FuzzSink *)w;
    if (s->overflow || len > s->limit - s->len) {
        s->overflow = 1;
        return 0;
    }
    memcpy(s->buf + s->len, buf, len);
    s->len += len;
    return 0;
}
static int fsink_finish(IoWriter *w) {
    (void)w;
    return 0;
}
static void fsink_free(IoWriter *w) {
    (void)w;
}
static const IoWriterVt fsink_vt = {fsink_write, fsink_finish, fsink_free};

static void fsink_init(FuzzSink *s, uint8_t *buf, size_t limit) {
    memset(s, 0, sizeof *s);
    s->base.vt = &fsink_vt;
    s->buf = buf;
    s->limit = limit;
}

#define FUZZ_NAME "Full-00000000-00000001-1700000000"

/* Decrypts data into w, cap bytes per read. The reader's result. */
static int fuzz_decrypt(const Keyring *kr, const uint8_t *data, size_t size, size_t cap,
                        IoWriter *w, uint8_t *tmp) {
    IoReader *src = io_mem_reader_new(data, size);
    /* read under a name: version 2 objects authenticate it, version 1 ones ignore it */
    IoReader *r = src ? crypt_reader_new_bound(kr, FUZZ_NAME, src) : NULL;
    int rc = ERR_NOMEM;
    if (r) {
        for (;;) {
            size_t got = 0;
            rc = io_read(r, tmp, cap, &got);
            if (rc < 0 || got == 0) break;
            CHECK(got <= cap);
            io_write(w, tmp, got);
        }
    }
    io_reader_free(r);
    io_reader_free(src);
    return rc;
}

static void fuzz_keyring(const uint8_t *data, size_t size) {
    Keyring *kr = NULL;
    int rc = keyring_parse((const char *)data, size, "fuzz", &kr);
    if (rc) {
        CHECK(rc == ERR_INVALID || rc == ERR_NOMEM);
        CHECK(kr == NULL);
        /* the messages name lines and ids, never a key: no run of 43+ base64 characters with
         * one that an id cannot have ('+', '/', or '=' after it) */
        const char *m = err_msg();
        size_t run = 0;
        int odd = 0;
        for (; *m; m++) {
            int id =
                (*m >= 'A' && *m <= 'Z') || (*m >= 'a' && *m <= 'z') || (*m >= '0' && *m <= '9');
            int b64 = id || *m == '+' || *m == '/';
            if (!b64) {
                CHECK(run < 43 || !(odd || *m == '='));
                run = 0;
                odd = 0;
                continue;
            }
            run++;
            odd |= !id;
        }
        CHECK(run < 43 || !odd);
        return;
    }
    CHECK(keyring_count(kr) >= 1);
    for (size_t i = 0; i < keyring_count(kr); i++) {
        const char *id = keyring_id(kr, i);
        CHECK(id && strlen(id) >= 1 && strlen(id) <= CRYPT_KEY_ID_MAX);
    }
    keyring_free(kr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint8_t *tmp, *keep, *store, *again;
    static Keyring *kr;
    if (size < 1) return 0;
    if (!tmp) {
        tmp = malloc(1 + 127 * 131);
        keep = malloc(FUZZ_KEEP);
        store = malloc(FUZZ_STORE);
        again = malloc(FUZZ_KEEP);
        CHECK(tmp && keep && store && again);
        CHECK(keyring_parse(KEYS, sizeof KEYS - 1, "fuzz", &kr) == 0);
    }
    uint8_t sel = data[0];
    data++;
    size--;
    if (sel & 0x80) {
        fuzz_keyring(data, size);
        return 0;
    }
    size_t cap = 1 + (size_t)(sel & 0x7f) * 131;
    FuzzSink out;
    fsink_init(&out, keep, FUZZ_KEEP);
    int rc = fuzz_decrypt(kr, data, size, cap, &out.base, tmp);
    if (rc) {
        CHECK(rc == ERR_CORRUPT || rc == ERR_INVALID || rc == ERR_UNSUPPORTED || rc == ERR_NOMEM);
        return 0;
    }
    if (out.overflow) return 0;
    CHECK(out.len + 15 + 1 + 32 + 32 + 20 <= size); /* header and one frame at least */

    /* Round trip: the plaintext encrypted again (with k1, the write key) reads back the same. */
    FuzzSink z, back;
    fsink_init(&z, store, FUZZ_STORE);
    IoWriter *w = crypt_writer_new_bound(kr, CRYPT_CHUNK_MIN, FUZZ_NAME, &z.base);
    if (!w) return 0;
    CHECK(io_write(w, keep, out.len) == 0 && io_finish(w) == 0);
    io_writer_free(w);
    if (z.overflow) return 0;
    fsink_init(&back, again, FUZZ_KEEP);
    CHECK(fuzz_decrypt(kr, store, z.len, cap, &back.base, tmp) == 0);
    CHECK(!back.overflow && back.len == out.len && memcmp(back.buf, keep, out.len) == 0);
    return 0;
}
