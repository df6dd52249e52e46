/* strbuf: a growable NUL-terminated string for building request texts (signatures' strings to
 * sign, XML bodies). An allocation failure is sticky (oom) instead of returned at every append,
 * so a builder checks once at the end. Not thread-safe. */
#ifndef ETCDBR_STRBUF_H
#define ETCDBR_STRBUF_H

#include <stddef.h>

typedef struct StrBuf {
    char *d;    /* owned (free); NULL until the first append; NUL-terminated after one */
    size_t n;   /* bytes, without the NUL */
    size_t cap; /* allocated bytes */
    int oom;    /* an append failed for lack of memory: d holds what came before it */
} StrBuf;

/* Appends n bytes of s (a no-op once oom is set). */
void strbuf_add(StrBuf *b, const char *s, size_t n);
/* Appends the string s. */
void strbuf_str(StrBuf *b, const char *s);

#endif
