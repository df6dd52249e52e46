/* i64map: see i64map.h. Invariants: cap is 0 or a power of two >= I64MAP_MIN_CAP; count <=
 * cap / 2, so every probe sequence meets an empty slot (key 0) and lookups terminate. */
#include "i64map.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

#define I64MAP_MIN_CAP 16
/* i64map_clear keeps a table up to this many slots (16 KiB) and frees a larger one. */
#define I64MAP_KEEP_CAP 1024

typedef struct {
    int64_t key; /* 0 = empty */
    int64_t value;
} Slot;

struct I64Map {
    Slot *slots;
    size_t cap; /* 0 or a power of two */
    size_t count;
};

/* splitmix64's finalizer: lease IDs and revisions are far from uniform in their low bits. */
static size_t slot_of(int64_t key, size_t cap) {
    uint64_t x = (uint64_t)key;
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return (size_t)x & (cap - 1);
}

/* The slot holding key, or the empty slot where it would go. cap must be > 0. */
static Slot *probe(Slot *slots, size_t cap, int64_t key) {
    size_t i = slot_of(key, cap);
    while (slots[i].key != 0 && slots[i].key != key)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int grow(I64Map *m) {
    size_t cap = m->cap ? m->cap * 2 : I64MAP_MIN_CAP;
    if (m->cap > SIZE_MAX / 2 / sizeof(Slot))
        return err_set(ERR_NOMEM, "i64map: table of %zu entries cannot grow", m->count);
    Slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return err_set(ERR_NOMEM, "i64map: out of memory for %zu slots", cap);
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != 0) *probe(slots, cap, m->slots[i].key) = m->slots[i];
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int i64map_new(I64Map **out) {
    if (!out) return err_set(ERR_INVALID, "i64map_new: no output");
    *out = calloc(1, sizeof **out);
    return *out ? 0 : err_set(ERR_NOMEM, "i64map: out of memory");
}

void i64map_free(I64Map *m) {
    if (!m) return;
    free(m->slots);
    free(m);
}

int i64map_get(const I64Map *m, int64_t key, int64_t *value_out) {
    if (!m || key == 0 || m->count == 0) return 0;
    const Slot *s = probe(m->slots, m->cap, key);
    if (s->key == 0) return 0;
    if (value_out) *value_out = s->value;
    return 1;
}

int i64map_put(I64Map *m, int64_t key, int64_t value) {
    if (!m) return err_set(ERR_INVALID, "i64map_put: no map");
    if (key == 0) return err_set(ERR_INVALID, "i64map: key 0 is reserved");
    if (m->cap) {
        Slot *s = probe(m->slots, m->cap, key);
        if (s->key == key) {
            s->value = value;
            return 0;
        }
    }
    if ((m->count + 1) * 2 > m->cap) {
        int rc = grow(m);
        if (rc) return rc;
    }
    Slot *s = probe(m->slots, m->cap, key);
    s->key = key;
    s->value = value;
    m->count++;
    return 0;
}

void i64map_clear(I64Map *m) {
    if (!m) return;
    if (m->cap > I64MAP_KEEP_CAP) {
        free(m->slots);
        m->slots = NULL;
        m->cap = 0;
    } else if (m->count) {
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    }
    m->count = 0;
}

size_t i64map_count(const I64Map *m) {
    return m ? m->count : 0;
}

int i64map_next(const I64Map *m, size_t *pos, int64_t *key_out, int64_t *value_out) {
    if (!m || !pos) return 0;
    for (size_t i = *pos; i < m->cap; i++) {
        if (m->slots[i].key == 0) continue;
        if (key_out) *key_out = m->slots[i].key;
        if (value_out) *value_out = m->slots[i].value;
        *pos = i + 1;
        return 1;
    }
    *pos = m->cap;
    return 0;
}
