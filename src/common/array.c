/* array: see array.h. */
#include "array.h"
#include "err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int array_reserve(void *v_ptr, size_t *cap, size_t n, size_t elem, size_t first, const char *what) {
    if (n < *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : first;
    void *v;
    memcpy(&v, v_ptr, sizeof v); /* the array's pointer, whatever its element type */
    void *nv = realloc(v, ncap * elem);
    if (!nv) return err_set(ERR_NOMEM, "%s: out of memory", what);
    memcpy(v_ptr, &nv, sizeof nv);
    *cap = ncap;
    return 0;
}

int array_reserve_bytes(void *buf_ptr, size_t *cap, size_t need, size_t first, const char *what) {
    if (need <= *cap) return 0;
    if (need > SIZE_MAX / 2)
        return err_set(ERR_NOMEM, "%s: out of memory for %zu bytes", what, need);
    size_t ncap = *cap ? *cap : first ? first : 1;
    while (ncap < need)
        ncap *= 2;
    void *b;
    memcpy(&b, buf_ptr, sizeof b); /* the buffer's pointer, whatever its byte type */
    void *nb = realloc(b, ncap);
    if (!nb) return err_set(ERR_NOMEM, "%s: out of memory for %zu bytes", what, need);
    memcpy(buf_ptr, &nb, sizeof nb);
    *cap = ncap;
    return 0;
}
