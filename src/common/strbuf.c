/* strbuf: see strbuf.h. */
#include "strbuf.h"
#include "array.h"

#include <stdlib.h>
#include <string.h>

void strbuf_add(StrBuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (array_reserve_bytes(&b->d, &b->cap, b->n + n + 1, 256, "text")) {
        b->oom = 1;
        return;
    }
    memcpy(b->d + b->n, s, n);
    b->n += n;
    b->d[b->n] = '\0';
}

void strbuf_str(StrBuf *b, const char *s) {
    strbuf_add(b, s, strlen(s));
}
