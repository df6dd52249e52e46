/* recsort: the records of one key's revisions that get, diff and history read from a backup set
 * (a full snapshot's key bucket and its deltas' events), sorted by key and then revision with
 * bounded memory: records are gathered in memory up to a byte limit, sorted, and spilled as
 * sorted runs into unlinked files of a scratch dir; the runs are merged on reading (and merged
 * into one run whenever RECSORT_MAX_RUNS are open, so the open files stay few). Keys compare as
 * etcd orders them (bytes, then the shorter first: bbolt_key_cmp), revisions as (main, sub). */
#ifndef ETCDBR_RECSORT_H
#define ETCDBR_RECSORT_H

#include <stddef.h>
#include <stdint.h>

#define RECSORT_MAX_RUNS 64
#define RECSORT_DEFAULT_MEM (64u << 20) /* bytes of records held before a spill */
#define RECSORT_MAX_KEY                                                                            \
    (1u << 20) /* larger keys are refused: etcd's own limit is 1.5 MiB                             \
                  per request, keys are far smaller in practice */

/* One revision of one key. key_len + value_len bytes follow it in the sorter's buffers. */
typedef struct InspectRec {
    int64_t main, sub;       /* the revision: main and sub-revision (event order within main) */
    int64_t create_revision; /* 0 for a delete */
    int64_t version;         /* 0 for a delete */
    int64_t lease;
    int64_t time_ns;     /* when the snapshotter received it (a delta's "time"); 0 = unknown
                            (an entry of a full snapshot's db) */
    uint64_t value_size; /* bytes of the value, also when it is not kept */
    uint32_t key_len;
    uint32_t value_len; /* bytes of the value kept (0 when values are not kept) */
    uint32_t object;    /* index of the object it came from (the caller's table) */
    uint8_t tombstone;  /* a delete */
    uint8_t views;      /* bit v: the record belongs to view v (inspect_read.h) */
    uint8_t pad[2];
} InspectRec;

typedef struct RecSort RecSort;

/* A sorter spilling into dir (borrowed: must outlive it) beyond mem_limit bytes of records (0 =
 * RECSORT_DEFAULT_MEM). *out owned (recsort_free). ERR_NOMEM. */
int recsort_new(const char *dir, size_t mem_limit, RecSort **out);
void recsort_free(RecSort *s); /* NULL-safe; closes (and so deletes) every run */

/* Adds a copy of h with its key and value (value may be NULL when h->value_len is 0). ERR_INVALID
 * (a key over RECSORT_MAX_KEY), ERR_IO (a spill: message names the dir), ERR_NOMEM. Not after
 * recsort_finish. */
int recsort_add(RecSort *s, const InspectRec *h, const uint8_t *key, const uint8_t *value);

/* Ends adding; the records can then be read in order. 0, ERR_IO, ERR_NOMEM. */
int recsort_finish(RecSort *s);

/* The next record in (key, main, sub) order: 0 with *got = 1 and *h, *key, *value borrowed until
 * the next call, or *got = 0 at the end. ERR_IO or ERR_CORRUPT (a run file changed under us). */
int recsort_next(RecSort *s, const InspectRec **h, const uint8_t **key, const uint8_t **value,
                 int *got);

/* Runs spilled so far (for tests and the debug log). */
size_t recsort_spills(const RecSort *s);

#endif
