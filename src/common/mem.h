/* mem: freeing several heap blocks in one statement. */
#ifndef ETCDBR_COMMON_MEM_H
#define ETCDBR_COMMON_MEM_H

#include <stddef.h>
#include <stdlib.h>

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

#endif
