/* lzw: a port of Go's compress/lzw (LSB order, literal width 8); see lzw.h.
 * The encoder mirrors Go's writer code for code (hash table with linear probing, clear code at
 * hi == 4095, width growth when hi reaches 1 << width), so its output matches Go byte for byte.
 * The decoder mirrors Go's reader, including the frozen 12-bit table when no clear code comes. */
#include "lzw.h"
#include "../common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    LZW_LIT_WIDTH = 8,
    LZW_CLEAR = 1 << LZW_LIT_WIDTH, /* 256 */
    LZW_EOF = LZW_CLEAR + 1,        /* 257 */
    LZW_MAX_WIDTH = 12,
    LZW_MAX_CODE = (1 << LZW_MAX_WIDTH) - 1, /* 4095 */
    LZW_TABLE_SIZE = 4 * (1 << LZW_MAX_WIDTH),
    LZW_TABLE_MASK = LZW_TABLE_SIZE - 1,
    LZW_IO_BUF = 16 * 1024,
    LZW_FLUSH = 1 << LZW_MAX_WIDTH,
};

#define LZW_INVALID_CODE 0xffffffffu
#define LZW_DEC_INVALID 0xffffu

/* ---- writer ---- */

typedef struct {
    IoWriter base;
    IoWriter *next;
    uint32_t bits;       /* pending output bits, LSB first */
    unsigned nbits;      /* number of valid bits in bits (< 8 between codes) */
    unsigned width;      /* current code width in bits */
    uint32_t hi;         /* code implied by the next emission */
    uint32_t overflow;   /* hi value at which width grows */
    uint32_t saved_code; /* code being extended across write calls, or LZW_INVALID_CODE */
    IoSticky st;
    size_t out_len;
    uint8_t out[LZW_IO_BUF];
    /* key << 12 | code, key = prefix code << 8 | byte; 0 = empty slot. */
    uint32_t table[LZW_TABLE_SIZE];
} LzwWriter;

static int lzww_flush(LzwWriter *w) {
    if (w->out_len == 0) return 0;
    int rc = io_write(w->next, w->out, w->out_len);
    w->out_len = 0;
    return rc;
}

static int lzww_emit(LzwWriter *w, uint32_t code) {
    w->bits |= code << w->nbits;
    w->nbits += w->width;
    while (w->nbits >= 8) {
        w->out[w->out_len++] = (uint8_t)w->bits;
        w->bits >>= 8;
        w->nbits -= 8;
        if (w->out_len == sizeof w->out) {
            int rc = lzww_flush(w);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

/* Advances hi after an emitted code. 1 if the table ran out and was reset (a clear code was
 * sent), 0 otherwise, or a negative error from the next writer. */
static int lzww_inc_hi(LzwWriter *w) {
    w->hi++;
    if (w->hi == w->overflow) {
        w->width++;
        w->overflow <<= 1;
    }
    if (w->hi == LZW_MAX_CODE) {
        int rc = lzww_emit(w, LZW_CLEAR);
        if (rc < 0) return rc;
        w->width = LZW_LIT_WIDTH + 1;
        w->hi = LZW_CLEAR + 1;
        w->overflow = LZW_CLEAR << 1;
        memset(w->table, 0, sizeof w->table);
        return 1;
    }
    return 0;
}

static int lzww_write(IoWriter *base, const void *buf, size_t len) {
    LzwWriter *w = (LzwWriter *)base;
    const uint8_t *p = buf;
    int rc = io_sticky_write(&w->st, "lzw");
    if (rc) return rc;
    if (len == 0) return 0;
    uint32_t code = w->saved_code;
    if (code == LZW_INVALID_CODE) {
        /* First write: Go sends a clear code, then the first byte is always a literal. */
        rc = lzww_emit(w, LZW_CLEAR);
        if (rc < 0) goto done;
        code = p[0];
        p++;
        len--;
    }
    for (size_t i = 0; i < len; i++) {
        uint32_t literal = p[i];
        uint32_t key = code << 8 | literal;
        uint32_t hash = ((key >> 12) ^ key) & LZW_TABLE_MASK;
        int hit = 0;
        for (uint32_t h = hash, t = w->table[hash]; t != 0;) {
            if (key == t >> 12) {
                code = t & LZW_MAX_CODE;
                hit = 1;
                break;
            }
            h = (h + 1) & LZW_TABLE_MASK;
            t = w->table[h];
        }
        if (hit) continue;
        rc = lzww_emit(w, code);
        if (rc < 0) goto done;
        code = literal;
        rc = lzww_inc_hi(w);
        if (rc < 0) goto done;
        if (rc == 1) {
            rc = 0;
            continue;
        }
        while (w->table[hash] != 0)
            hash = (hash + 1) & LZW_TABLE_MASK;
        w->table[hash] = (key << 12) | w->hi;
    }
    w->saved_code = code;
done:
    return io_sticky_keep(&w->st, rc);
}

static int lzww_finish(IoWriter *base) {
    LzwWriter *w = (LzwWriter *)base;
    int rc = io_sticky_finish(&w->st, "lzw");
    if (rc) return rc < 0 ? rc : 0;
    if (w->saved_code != LZW_INVALID_CODE) {
        rc = lzww_emit(w, w->saved_code);
        if (rc < 0) goto done;
        rc = lzww_inc_hi(w);
        if (rc < 0) goto done;
    } else {
        /* Empty input: Go still sends the starting clear code. */
        rc = lzww_emit(w, LZW_CLEAR);
        if (rc < 0) goto done;
    }
    rc = lzww_emit(w, LZW_EOF);
    if (rc < 0) goto done;
    if (w->nbits > 0) {
        w->out[w->out_len++] = (uint8_t)w->bits;
        w->bits = 0;
        w->nbits = 0;
    }
    rc = lzww_flush(w);
done:
    io_sticky_keep(&w->st, rc);
    return rc < 0 ? rc : 0;
}

static const IoWriterVt lzww_vt = {lzww_write, lzww_finish, io_writer_free_self};

IoWriter *lzw_writer_new(IoWriter *next) {
    LzwWriter *w = io_writer_alloc(sizeof *w, &lzww_vt, "lzw writer");
    if (!w) return NULL;
    w->next = next;
    w->width = LZW_LIT_WIDTH + 1;
    w->hi = LZW_EOF;
    w->overflow = 1u << (LZW_LIT_WIDTH + 1);
    w->saved_code = LZW_INVALID_CODE;
    return &w->base;
}

/* ---- reader ---- */

typedef enum { LZWR_DECODING = 0, LZWR_DONE, LZWR_FAILED } LzwReaderState;

typedef struct {
    IoReader base;
    IoReader *src;
    LzwReaderState state;
    int err;          /* code to repeat once pending output is drained, when FAILED */
    char errmsg[160]; /* its message */
    uint32_t bits;
    unsigned nbits;
    unsigned width;
    uint16_t hi, overflow, last;
    size_t in_pos, in_len;
    int src_eof;
    size_t pend_pos, pend_len; /* undelivered bytes at the start of output */
    uint8_t in[LZW_IO_BUF];
    uint8_t suffix[1 << LZW_MAX_WIDTH];
    uint16_t prefix[1 << LZW_MAX_WIDTH];
    /* Literals accumulate from the front; a code's expansion is built right to left from the
     * end, then moved down. Flushed at >= 4096 bytes, so one expansion (<= 4096) always fits. */
    uint8_t output[2 * (1 << LZW_MAX_WIDTH)];
} LzwReader;

static int lzwr_fail(LzwReader *r, int code, const char *msg) {
    r->state = LZWR_FAILED;
    r->err = code;
    snprintf(r->errmsg, sizeof r->errmsg, "%s", msg);
    return code;
}

/* Next input byte into *b: 1, 0 at end of input, or a negative error from src. */
static int lzwr_byte(LzwReader *r, uint8_t *b) {
    if (r->in_pos == r->in_len) {
        if (r->src_eof) return 0;
        size_t n = 0;
        int rc = io_read(r->src, r->in, sizeof r->in, &n);
        if (rc < 0) return rc;
        if (n == 0) {
            r->src_eof = 1;
            return 0;
        }
        r->in_pos = 0;
        r->in_len = n;
    }
    *b = r->in[r->in_pos++];
    return 1;
}

/* Reads one code: 1, 0 at end of input before a whole code, or a negative error. */
static int lzwr_code(LzwReader *r, uint16_t *code) {
    while (r->nbits < r->width) {
        uint8_t b = 0;
        int rc = lzwr_byte(r, &b);
        if (rc <= 0) return rc;
        r->bits |= (uint32_t)b << r->nbits;
        r->nbits += 8;
    }
    *code = (uint16_t)(r->bits & ((1u << r->width) - 1));
    r->bits >>= r->width;
    r->nbits -= r->width;
    return 1;
}

/* After the EOF code only the padding bits of its last byte may remain. */
static void lzwr_check_end(LzwReader *r) {
    uint8_t b = 0;
    int rc = lzwr_byte(r, &b);
    if (rc < 0) {
        lzwr_fail(r, rc, err_msg());
    } else if (rc > 0) {
        lzwr_fail(r, ERR_CORRUPT, "lzw: unexpected data after the end-of-stream code");
    } else {
        r->state = LZWR_DONE;
    }
}

/* Decodes into output until LZW_FLUSH bytes are pending or the stream ends or fails. */
static void lzwr_decode(LzwReader *r) {
    size_t o = 0;
    while (r->state == LZWR_DECODING) {
        uint16_t code = 0;
        int rc = lzwr_code(r, &code);
        if (rc < 0) {
            lzwr_fail(r, rc, err_msg());
            break;
        }
        if (rc == 0) {
            lzwr_fail(r, ERR_CORRUPT, "lzw: truncated stream (input ended before the EOF code)");
            break;
        }
        if (code < LZW_CLEAR) {
            r->output[o++] = (uint8_t)code;
            if (r->last != LZW_DEC_INVALID) {
                r->suffix[r->hi] = (uint8_t)code;
                r->prefix[r->hi] = r->last;
            }
        } else if (code == LZW_CLEAR) {
            r->width = LZW_LIT_WIDTH + 1;
            r->hi = LZW_EOF;
            r->overflow = (uint16_t)(1u << r->width);
            r->last = LZW_DEC_INVALID;
            continue;
        } else if (code == LZW_EOF) {
            lzwr_check_end(r);
            break;
        } else if (code <= r->hi) {
            size_t i = sizeof r->output - 1;
            uint16_t c = code;
            if (code == r->hi && r->last != LZW_DEC_INVALID) {
                /* KwKwK: the previous expansion followed by its own first byte. */
                c = r->last;
                while (c >= LZW_CLEAR)
                    c = r->prefix[c];
                r->output[i--] = (uint8_t)c;
                c = r->last;
            }
            while (c >= LZW_CLEAR) {
                r->output[i--] = r->suffix[c];
                c = r->prefix[c];
            }
            r->output[i] = (uint8_t)c;
            size_t n = sizeof r->output - i;
            memmove(r->output + o, r->output + i, n);
            o += n;
            if (r->last != LZW_DEC_INVALID) {
                r->suffix[r->hi] = (uint8_t)c;
                r->prefix[r->hi] = r->last;
            }
        } else {
            lzwr_fail(r, ERR_CORRUPT, "lzw: invalid code (beyond the table)");
            break;
        }
        r->last = code;
        r->hi++;
        if (r->hi >= r->overflow) {
            if (r->width == LZW_MAX_WIDTH) {
                /* Table full and no clear code: keep decoding with a frozen table, as Go does. */
                r->last = LZW_DEC_INVALID;
                r->hi--;
            } else {
                r->width++;
                r->overflow = (uint16_t)(1u << r->width);
            }
        }
        if (o >= LZW_FLUSH) break;
    }
    r->pend_pos = 0;
    r->pend_len = o;
}

static int lzwr_read(IoReader *base, void *buf, size_t cap, size_t *got) {
    LzwReader *r = (LzwReader *)base;
    *got = 0;
    if (cap == 0) return 0;
    for (;;) {
        if (r->pend_pos < r->pend_len) {
            size_t n = r->pend_len - r->pend_pos;
            if (n > cap) n = cap;
            memcpy(buf, r->output + r->pend_pos, n);
            r->pend_pos += n;
            *got = n;
            return 0;
        }
        if (r->state == LZWR_DONE) return 0;
        if (r->state == LZWR_FAILED) return err_set(r->err, "%s", r->errmsg);
        lzwr_decode(r);
    }
}

static const IoReaderVt lzwr_vt = {lzwr_read, io_reader_free_self};

IoReader *lzw_reader_new(IoReader *src) {
    LzwReader *r = io_reader_alloc(sizeof *r, &lzwr_vt, "lzw reader");
    if (!r) return NULL;
    r->src = src;
    r->width = LZW_LIT_WIDTH + 1;
    r->hi = LZW_EOF;
    r->overflow = (uint16_t)(1u << r->width);
    r->last = LZW_DEC_INVALID;
    return &r->base;
}
