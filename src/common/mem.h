/* mem: freeing several heap blocks in one statement; the end of a constructor. */
#ifndef ETCDBR_COMMON_MEM_H
#define ETCDBR_COMMON_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Frees each of the n pointers in ptrs (any may be NULL). For destructors whose fields are
 * plain heap blocks with no destructor of their own. */
static inline void mem_free_each(void *const *ptrs, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
}

/* FREE_ALL(a, b, c): free(a); free(b); free(c); in one statement (pointers of any object type). */
#define FREE_ALL(...)                                                                              \
    mem_free_each((void *const[]){__VA_ARGS__},                                                    \
                  sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* Copies from *src (*left bytes) into buf (cap bytes, the first *len of them full) as much as fits,
 * and advances *src, *left and *len by what it copied; returns that count (0 when buf is full).
 * For writers that gather their input into blocks of a fixed size. */
static inline size_t mem_fill(uint8_t *buf, size_t cap, size_t *len, const uint8_t **src,
                              size_t *left) {
    size_t n = cap - *len;
    if (n > *left) n = *left;
    memcpy(buf + *len, *src, n);
    *len += n;
    *src += n;
    *left -= n;
    return n;
}

/* RETURN_BUILT(rc, out, value, cleanup): the end of a constructor that built an object in steps.
 * When rc (an ERR_* code) is non-zero, runs the statement `cleanup` (which frees what was built)
 * and returns rc; else stores value in *out, handing ownership to the caller, and returns 0. */
#define RETURN_BUILT(rc, out, value, cleanup)                                                      \
    do {                                                                                           \
        int built_rc_ = (rc);                                                                      \
        if (built_rc_) {                                                                           \
            cleanup;                                                                               \
            return built_rc_;                                                                      \
        }                                                                                          \
        *(out) = (value);                                                                          \
        return 0;                                                                                  \
    } while (0)

#endif
