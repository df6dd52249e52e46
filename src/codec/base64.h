/* base64: the standard alphabet of RFC 4648 section 4 ("A-Z a-z 0-9 + /", '=' padding), decoded
 * under the rules each reader of outside text needs: Go's encoding/base64 StdEncoding for delta
 * snapshot bytes (padding required, '\r' and '\n' ignored, non-zero trailing bits accepted), the
 * Azure key of a credentials file (blanks and line breaks ignored), and the strict canonical
 * form of an encryption key. Pure functions, thread-safe. */
#ifndef ETCDBR_BASE64_H
#define ETCDBR_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* The alphabet's value of every byte: 0..63, or -1 for any other byte ('=' included). */
const int8_t *b64_table(void);

enum {
    B64_PAD_REQUIRED = 1u << 0, /* the text is a multiple of 4 characters, padded with '=' */
    B64_SKIP_CRLF = 1u << 1,    /* '\r' and '\n' are ignored wherever they stand (Go) */
    B64_SKIP_BLANKS = 1u << 2,  /* ' ' and '\t' too */
    B64_CANONICAL = 1u << 3,    /* the bits after the last byte must be zero */
};

/* Why a text is not base64, for messages: the byte offset in the text and a reason. */
typedef struct B64Fault {
    size_t at;       /* offset of the offending character, or the text's length */
    const char *why; /* static text: "invalid character", "data after '='", ... */
} B64Fault;

/* The number of bytes the text [s, s+len) decodes to under flags, into *n; 0, or -1 when it is
 * not base64 under them (*fault, when not NULL, says where and why). No output is written:
 * callers size their buffer with it. */
int b64_decoded_len(const char *s, size_t len, unsigned flags, size_t *n, B64Fault *fault);

/* Decodes [s, s+len) under flags into out (cap bytes), *n the bytes written. 0, or -1 when it is
 * not base64 under them or out is too small (*fault says which). */
int b64_decode(const char *s, size_t len, unsigned flags, uint8_t *out, size_t cap, size_t *n,
               B64Fault *fault);

#endif
