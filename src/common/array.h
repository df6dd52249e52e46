/* array: growth of a heap array kept as a pointer, a count and a capacity. */
#ifndef ETCDBR_COMMON_ARRAY_H
#define ETCDBR_COMMON_ARRAY_H

#include <stddef.h>

/* Makes room for element n of the array *v_ptr points at (v_ptr: the address of the array's
 * pointer, of any object type; elem bytes per element; *cap elements allocated). When n < *cap
 * it does nothing; else it reallocates to twice *cap (first when *cap is 0) and updates *v_ptr and
 * *cap. The caller bounds n (and checks n * elem cannot overflow). The array stays the caller's.
 * 0, or ERR_NOMEM ("<what>: out of memory") with the array unchanged. */
int array_reserve(void *v_ptr, size_t *cap, size_t n, size_t elem, size_t first, const char *what);

/* Makes room for need bytes in the byte buffer *buf_ptr points at (buf_ptr: the address of a
 * uint8_t * or char *; *cap bytes allocated). When need <= *cap it does nothing; else it doubles
 * *cap (from first when *cap is 0) until it holds need, reallocates (the bytes are kept) and
 * updates *buf_ptr and *cap. The buffer stays the caller's. 0, or ERR_NOMEM ("<what>: out of
 * memory for <need> bytes") with the buffer unchanged, also when need is over SIZE_MAX / 2. */
int array_reserve_bytes(void *buf_ptr, size_t *cap, size_t need, size_t first, const char *what);

#endif
