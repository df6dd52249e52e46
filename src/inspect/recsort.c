/* recsort: see recsort.h. */
#include "recsort.h"
#include "../common/array.h"
#include "../common/err.h"
#include "../common/mem.h"
#include "../format/bbolt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUN_BUF (64u << 10) /* stdio buffer of one run file */
#define MAX_VALUE (1u << 30)

/* A sorted stream: a run file, or (f NULL) the records left in memory. */
typedef struct Src {
    FILE *f;
    uint8_t *buf; /* a run's current record */
    size_t cap;
    size_t next; /* memory: index of the next record in the sorted offsets */
    const uint8_t *cur;
} Src;

struct RecSort {
    const char *dir;
    size_t limit;
    uint8_t *arena; /* records, each at an 8-aligned offset */
    size_t used, acap;
    size_t *offs; /* where each record starts in arena */
    size_t n, ocap;
    FILE *runs[RECSORT_MAX_RUNS];
    size_t n_runs, spills;
    int finished;
    Src srcs[RECSORT_MAX_RUNS + 1];
    size_t n_srcs;
    size_t heap[RECSORT_MAX_RUNS + 1];
    size_t n_heap;
    ptrdiff_t last; /* the source of the record handed out last, -1 none */
};

static size_t rec_bytes(const InspectRec *h) {
    return sizeof *h + (size_t)h->key_len + (size_t)h->value_len;
}

static int rec_cmp(const uint8_t *a, const uint8_t *b) {
    const InspectRec *ha = (const InspectRec *)a, *hb = (const InspectRec *)b;
    int c = bbolt_key_cmp(a + sizeof *ha, ha->key_len, b + sizeof *hb, hb->key_len);
    if (c) return c;
    if (ha->main != hb->main) return ha->main < hb->main ? -1 : 1;
    if (ha->sub != hb->sub) return ha->sub < hb->sub ? -1 : 1;
    return 0;
}

static int off_cmp(const void *a, const void *b, void *arena) {
    return rec_cmp((const uint8_t *)arena + *(const size_t *)a,
                   (const uint8_t *)arena + *(const size_t *)b);
}

int recsort_new(const char *dir, size_t mem_limit, RecSort **out) {
    RecSort *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "out of memory");
    s->dir = dir;
    s->limit = mem_limit ? mem_limit : RECSORT_DEFAULT_MEM;
    s->last = -1;
    *out = s;
    return 0;
}

void recsort_free(RecSort *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_runs; i++)
        fclose(s->runs[i]);
    for (size_t i = 0; i < sizeof s->srcs / sizeof s->srcs[0]; i++)
        free(s->srcs[i].buf);
    FREE_ALL(s->arena, s->offs, s);
}

size_t recsort_spills(const RecSort *s) {
    return s->spills;
}

/* A new unlinked run file in s->dir, buffered. */
static int run_create(RecSort *s, FILE **out) {
    size_t n = strlen(s->dir) + 32;
    char *path = malloc(n);
    if (!path) return err_set(ERR_NOMEM, "out of memory");
    snprintf(path, n, "%s/inspect-run-XXXXXX", s->dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        int rc = err_set(ERR_IO, "create a sort run in %s: %s", s->dir, strerror(errno));
        free(path);
        return rc;
    }
    unlink(path);
    free(path);
    FILE *f = fdopen(fd, "w+b");
    if (!f) {
        close(fd);
        return err_set(ERR_NOMEM, "out of memory");
    }
    setvbuf(f, NULL, _IOFBF, RUN_BUF);
    *out = f;
    return 0;
}

static int run_write(RecSort *s, FILE *f, const uint8_t *rec) {
    if (fwrite(rec, 1, rec_bytes((const InspectRec *)rec), f) != rec_bytes((const InspectRec *)rec))
        return err_set(ERR_IO, "write a sort run in %s: %s", s->dir, strerror(errno));
    return 0;
}

/* Reads the next record of a run into src->buf; src->cur NULL at its end. */
static int src_advance(RecSort *s, Src *src) {
    if (!src->f) {
        src->cur = src->next < s->n ? s->arena + s->offs[src->next++] : NULL;
        return 0;
    }
    InspectRec h;
    size_t got = fread(&h, 1, sizeof h, src->f);
    if (got == 0 && feof(src->f)) {
        src->cur = NULL;
        return 0;
    }
    if (got != sizeof h || h.key_len > RECSORT_MAX_KEY || h.value_len > MAX_VALUE)
        return err_set(ERR_CORRUPT, "a sort run in %s is damaged", s->dir);
    size_t need = rec_bytes(&h);
    if (need > src->cap) {
        uint8_t *p = realloc(src->buf, need);
        if (!p) return err_set(ERR_NOMEM, "out of memory for a %zu-byte record", need);
        src->buf = p;
        src->cap = need;
    }
    memcpy(src->buf, &h, sizeof h);
    if (fread(src->buf + sizeof h, 1, need - sizeof h, src->f) != need - sizeof h)
        return err_set(ERR_CORRUPT, "a sort run in %s is truncated", s->dir);
    src->cur = src->buf;
    return 0;
}

static int src_less(const RecSort *s, size_t a, size_t b) {
    return rec_cmp(s->srcs[a].cur, s->srcs[b].cur) < 0;
}

static void heap_push(RecSort *s, size_t src) {
    size_t i = s->n_heap++;
    s->heap[i] = src;
    while (i > 0 && src_less(s, s->heap[i], s->heap[(i - 1) / 2])) {
        size_t p = (i - 1) / 2, t = s->heap[p];
        s->heap[p] = s->heap[i];
        s->heap[i] = t;
        i = p;
    }
}

static size_t heap_pop(RecSort *s) {
    size_t top = s->heap[0], i = 0;
    s->heap[0] = s->heap[--s->n_heap];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n_heap && src_less(s, s->heap[l], s->heap[m])) m = l;
        if (r < s->n_heap && src_less(s, s->heap[r], s->heap[m])) m = r;
        if (m == i) break;
        size_t t = s->heap[m];
        s->heap[m] = s->heap[i];
        s->heap[i] = t;
        i = m;
    }
    return top;
}

/* Sources over every run (rewound) and, with memory, the sorted records in memory; the heap
 * filled with those that hold a record. */
static int merge_start(RecSort *s, int memory) {
    s->n_srcs = s->n_heap = 0;
    s->last = -1;
    for (size_t i = 0; i <= s->n_runs; i++) {
        if (i == s->n_runs && !memory) break;
        Src *src = &s->srcs[s->n_srcs];
        src->f = i < s->n_runs ? s->runs[i] : NULL;
        src->next = 0;
        if (src->f && (fflush(src->f) != 0 || fseek(src->f, 0, SEEK_SET) != 0))
            return err_set(ERR_IO, "rewind a sort run in %s: %s", s->dir, strerror(errno));
        int rc = src_advance(s, src);
        if (rc) return rc;
        if (src->cur) heap_push(s, s->n_srcs);
        s->n_srcs++;
    }
    return 0;
}

static int merge_next(RecSort *s, const uint8_t **rec) {
    if (s->last >= 0) {
        Src *src = &s->srcs[s->last];
        int rc = src_advance(s, src);
        if (rc) return rc;
        if (src->cur) heap_push(s, (size_t)s->last);
        s->last = -1;
    }
    if (!s->n_heap) {
        *rec = NULL;
        return 0;
    }
    s->last = (ptrdiff_t)heap_pop(s);
    *rec = s->srcs[s->last].cur;
    return 0;
}

/* Merges every run into one new run (when RECSORT_MAX_RUNS are open). */
static int merge_runs(RecSort *s) {
    FILE *merged = NULL;
    int rc = run_create(s, &merged);
    if (!rc) rc = merge_start(s, 0);
    for (const uint8_t *rec = NULL; !rc;) {
        if ((rc = merge_next(s, &rec)) || !rec) break;
        rc = run_write(s, merged, rec);
    }
    if (rc) {
        if (merged) fclose(merged);
        return rc;
    }
    for (size_t i = 0; i < s->n_runs; i++)
        fclose(s->runs[i]);
    s->runs[0] = merged;
    s->n_runs = 1;
    return 0;
}

static void sort_memory(RecSort *s) {
    if (s->n > 1) qsort_r(s->offs, s->n, sizeof *s->offs, off_cmp, s->arena);
}

/* Writes the records in memory as a sorted run and empties memory. */
static int spill(RecSort *s) {
    if (s->n_runs == RECSORT_MAX_RUNS) {
        int rc = merge_runs(s);
        if (rc) return rc;
    }
    sort_memory(s);
    FILE *f = NULL;
    int rc = run_create(s, &f);
    for (size_t i = 0; !rc && i < s->n; i++)
        rc = run_write(s, f, s->arena + s->offs[i]);
    if (rc) {
        if (f) fclose(f);
        return rc;
    }
    s->runs[s->n_runs++] = f;
    s->spills++;
    s->n = s->used = 0;
    return 0;
}

int recsort_add(RecSort *s, const InspectRec *h, const uint8_t *key, const uint8_t *value) {
    if (h->key_len > RECSORT_MAX_KEY)
        return err_set(ERR_INVALID, "a key of %u bytes is over the %u-byte limit", h->key_len,
                       RECSORT_MAX_KEY);
    if (h->value_len > MAX_VALUE)
        return err_set(ERR_INVALID, "a value of %u bytes is over the %u-byte limit", h->value_len,
                       MAX_VALUE);
    size_t need = (rec_bytes(h) + 7) & ~(size_t)7;
    int rc;
    if (s->n && s->used + need > s->limit && (rc = spill(s))) return rc;
    if ((rc = array_reserve_bytes(&s->arena, &s->acap, s->used + need, 4096, "sorted records")) ||
        (rc = array_reserve(&s->offs, &s->ocap, s->n, sizeof *s->offs, 1024, "sorted records")))
        return rc;
    uint8_t *at = s->arena + s->used;
    memcpy(at, h, sizeof *h);
    if (h->key_len) memcpy(at + sizeof *h, key, h->key_len);
    if (h->value_len) memcpy(at + sizeof *h + h->key_len, value, h->value_len);
    s->offs[s->n++] = s->used;
    s->used += need;
    return 0;
}

int recsort_finish(RecSort *s) {
    sort_memory(s);
    s->finished = 1;
    return merge_start(s, 1);
}

int recsort_next(RecSort *s, const InspectRec **h, const uint8_t **key, const uint8_t **value,
                 int *got) {
    const uint8_t *rec = NULL;
    *got = 0;
    int rc = s->finished ? merge_next(s, &rec) : err_set(ERR_INVALID, "records not finished");
    if (rc || !rec) return rc;
    *h = (const InspectRec *)rec;
    *key = rec + sizeof **h;
    *value = rec + sizeof **h + (*h)->key_len;
    *got = 1;
    return 0;
}
