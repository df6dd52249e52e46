/* array: see array.h. */
#include "array.h"
#include "err.h"

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
