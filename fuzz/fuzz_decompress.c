/* fuzz_decompress: feeds outside bytes to every decompressor and to the sha256 trailer checker.
 * Input byte 0 selects: kind = b % 5 (none, gzip, zlib, lzw, zstd), bit 3 = strip the trailer,
 * bits 4-7 = read size. The rest is the compressed object. Whatever decodes cleanly (up to 1 MiB)
 * is compressed again with the same kind and must decode to the same bytes, or we abort. The
 * reader is limited to FUZZ_MAX_OUT plain bytes (decompress_reader_new_limited): a reader giving
 * out more aborts; corpus/decompress/bomb-* are small streams inflating far past it. */
#include "codec/compress.h"
#include "codec/sha256.h"
#include "common/err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    FUZZ_KEEP = 1 << 20,      /* output kept for the round-trip check */
    FUZZ_MAX_OUT = 16 << 20,  /* the codec's limit (decompression bombs): the reader stops there */
    FUZZ_MAX_STORE = 4 << 20, /* room for the recompressed copy */
};

/* Bounded memory sink: keeps up to limit bytes, counts the rest. */
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

/* Decodes src with kind into w, reading cap bytes at a time. 0, or the reader's error. */
static int fuzz_decode(CompressKind kind, const uint8_t *data, size_t size, size_t cap, IoWriter *w,
                       uint8_t *tmp) {
    IoReader *src = io_mem_reader_new(data, size);
    DecompressLimit lim = {FUZZ_MAX_OUT, "--fuzz-limit"};
    IoReader *r = src ? decompress_reader_new_limited(kind, src, &lim) : NULL;
    int rc = 0;
    size_t total = 0;
    if (!r) {
        rc = ERR_NOMEM;
        goto done;
    }
    for (;;) {
        size_t got = 0;
        rc = io_read(r, tmp, cap, &got);
        if (rc < 0 || got == 0) break;
        if (got > cap) abort(); /* a reader must never overrun the caller's buffer */
        total += got;
        if (total > FUZZ_MAX_OUT) abort(); /* the codec's limit let a bomb through */
        rc = io_write(w, tmp, got);
        if (rc < 0) break;
    }
done:
    io_reader_free(r);
    io_reader_free(src);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Allocated once and reused: the buffers are large and every run needs them. */
    static uint8_t *tmp, *keep, *store, *again;
    FuzzSink out, z, back;
    IoWriter *tc = NULL;
    IoWriter *zw = NULL;
    uint64_t payload = 0;
    if (size < 1) return 0;
    if (!tmp) {
        tmp = malloc(16 * 977 + 1);
        keep = malloc(FUZZ_KEEP);
        store = malloc(FUZZ_MAX_STORE);
        again = malloc(FUZZ_KEEP);
        if (!tmp || !keep || !store || !again) abort();
    }
    uint8_t sel = data[0];
    CompressKind kind = (CompressKind)(sel % 5);
    int strip = (sel >> 3) & 1;
    size_t cap = 1 + (size_t)(sel >> 4) * 977;
    data++;
    size--;

    fsink_init(&out, keep, FUZZ_KEEP);
    tc = trailer_checker_new(&out.base, strip);
    if (!tc) goto done;
    int rc = fuzz_decode(kind, data, size, cap, tc, tmp);
    int trc = trailer_check_result(tc, &payload);
    if (trc != 0 && trc != ERR_CORRUPT) abort();
    if (rc != 0 || out.overflow) goto done;
    if (trc == 0 && strip && out.len != payload) abort();

    /* Round trip: what we decoded must survive our own writer and reader unchanged. */
    fsink_init(&z, store, FUZZ_MAX_STORE);
    zw = compress_writer_new(kind, &z.base);
    if (!zw) goto done;
    if (io_write(zw, keep, out.len) != 0 || io_finish(zw) != 0) abort();
    if (z.overflow) goto done;
    fsink_init(&back, again, FUZZ_KEEP);
    if (fuzz_decode(kind, store, z.len, cap, &back.base, tmp) != 0) abort();
    if (back.overflow || back.len != out.len || memcmp(back.buf, keep, out.len) != 0) abort();

done:
    io_writer_free(zw);
    io_writer_free(tc);
    return 0;
}
