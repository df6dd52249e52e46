/* base64: see base64.h. */
#include "base64.h"

static int8_t table[256];

static void table_fill(void) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 256; i++)
        table[i] = -1;
    for (int i = 0; i < 64; i++)
        table[(unsigned char)a[i]] = (int8_t)i;
}

const int8_t *b64_table(void) {
    static int ready;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) { /* racing threads write the same values */
        table_fill();
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return table;
}

static int skipped(unsigned char ch, unsigned flags) {
    if ((flags & B64_SKIP_CRLF) && (ch == '\r' || ch == '\n')) return 1;
    return (flags & B64_SKIP_BLANKS) && (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n');
}

static int fault(B64Fault *f, size_t at, const char *why) {
    if (f) {
        f->at = at;
        f->why = why;
    }
    return -1;
}

int b64_decoded_len(const char *s, size_t len, unsigned flags, size_t *n, B64Fault *f) {
    const int8_t *t = b64_table();
    size_t m = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (skipped(ch, flags)) continue;
        if (ch == '=')
            pad++;
        else if (pad)
            return fault(f, i, "data after '='");
        else if (t[ch] < 0)
            return fault(f, i, "invalid character");
        m++;
    }
    size_t data = m - pad;
    if (pad > 2 || data % 4 == 1) return fault(f, len, "wrong length");
    if ((flags & B64_PAD_REQUIRED) && m % 4 != 0) return fault(f, len, "not padded");
    if (pad && m % 4 != 0) return fault(f, len, "wrong padding");
    *n = data / 4 * 3 + (data % 4 ? data % 4 - 1 : 0);
    return 0;
}

int b64_decode(const char *s, size_t len, unsigned flags, uint8_t *out, size_t cap, size_t *n,
               B64Fault *f) {
    size_t want;
    if (b64_decoded_len(s, len, flags, &want, f)) return -1;
    if (want > cap) return fault(f, len, "too long");
    const int8_t *t = b64_table();
    uint32_t acc = 0;
    int bits = 0;
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '=') break; /* only padding and skipped bytes follow (checked above) */
        if (skipped(ch, flags)) continue;
        acc = (acc << 6) | (uint32_t)t[ch];
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[w++] = (uint8_t)(acc >> bits);
        }
    }
    if ((flags & B64_CANONICAL) && bits > 0 && (acc & ((1u << bits) - 1)) != 0)
        return fault(f, len, "non-zero trailing bits");
    *n = w;
    return 0;
}
