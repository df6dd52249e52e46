/* i64map: a small hash map from int64 keys to int64 values (open addressing, linear probing,
 * power-of-two table grown at 50% load). Key 0 is reserved as the empty-slot marker and can
 * never be stored. No removal of single keys: callers clear the whole map. Not thread safe: one
 * owner at a time. */
#ifndef ETCDBR_I64MAP_H
#define ETCDBR_I64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct I64Map I64Map;

/* An empty map (owned; i64map_free). No table is allocated until the first put.
 * 0 or ERR_NOMEM. */
int i64map_new(I64Map **out);
/* Frees the map and its table. NULL-safe. */
void i64map_free(I64Map *m);

/* 1 if key is present (its value in *value_out, which may be NULL), else 0. Key 0 is never
 * present. */
int i64map_get(const I64Map *m, int64_t key, int64_t *value_out);

/* Sets key to value, inserting it or replacing the value it had. 0, ERR_INVALID for key 0, or
 * ERR_NOMEM when the table cannot grow (the map is then unchanged). */
int i64map_put(I64Map *m, int64_t key, int64_t value);

/* Removes every entry. A small table is kept for reuse; a large one (after a burst) is freed. */
void i64map_clear(I64Map *m);

/* Number of entries. */
size_t i64map_count(const I64Map *m);

/* Iteration in unspecified order: start with *pos = 0; each call returns 1 with the next entry
 * (key and value, either pointer may be NULL) and advances *pos, or 0 after the last one. Values
 * of present keys may be replaced during an iteration; inserting or clearing ends its validity. */
int i64map_next(const I64Map *m, size_t *pos, int64_t *key_out, int64_t *value_out);

#endif
