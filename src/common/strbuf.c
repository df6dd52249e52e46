/* strbuf: see strbuf.h. */
#include "strbuf.h"

#include <stdlib.h>
#include <string.h>

void strbuf_add(StrBuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1)
            c *= 2;
        char *nd = realloc(b->d, c);
        if (!nd) {
            b->oom = 1;
            return;
        }
        b->d = nd;
        b->cap = c;
    }
    memcpy(b->d + b->n, s, n);
    b->n += n;
    b->d[b->n] = '\0';
}

void strbuf_str(StrBuf *b, const char *s) {
    strbuf_add(b, s, strlen(s));
}
