/* names: the name of an enum value, looked up in a table indexed by the value. A name function is
 * then a designated-initializer table and one line:
 *
 *     static const char *const names[] = {[COMPRESS_GZIP] = "gzip", [COMPRESS_ZLIB] = "zlib"};
 *     return NAME_AT(names, kind, "none");
 *
 * A value outside the table, or one whose slot the table leaves empty, gets the fallback, so a
 * value read from outside (a corrupt field, a cast int) never indexes out of bounds. */
#ifndef ETCDBR_COMMON_NAMES_H
#define ETCDBR_COMMON_NAMES_H

#include <stddef.h>

/* names[i] when 0 <= i < n and that slot is set, else fallback. Returns borrowed storage: the
 * table's or fallback's (static in every caller). Cannot fail. */
static inline const char *name_at(const char *const *names, size_t n, long long i,
                                  const char *fallback) {
    return i >= 0 && (unsigned long long)i < n && names[i] ? names[i] : fallback;
}

/* name_at over a static array of names, its length taken from the array itself. */
#define NAME_AT(table, i, fallback)                                                                \
    name_at((table), sizeof(table) / sizeof((table)[0]), (long long)(i), (fallback))

#endif
