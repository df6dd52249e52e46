/* inspect_read: the records a get, diff or history needs, read from the backup sets in place of a
 * restore (docs/inspect.md). Each view is one point of the backups' history (a revision, the
 * last revision recorded at or before a time, or the latest); a view's set is the one a restore
 * to that point would use (restore_plan_make: the newest full snapshot at or before it and the
 * deltas after it, checked contiguous, one history), or, for a revision before every full
 * snapshot's, the oldest full snapshot after it, whose db still holds that revision's state
 * unless it was compacted past it. Views on the same full snapshot share one pass.
 * The full snapshot is made local and checked as a restore does (restore_fetch_full: its SHA-256
 * trailer, its db, its revision against its name), then its "key" bucket is read in revision
 * order with the bbolt reader, stopping at the last revision any view asks for (etcd keeps that
 * bucket ordered by revision, not by key: a key range cannot be sought there); its deltas are
 * fetched by restore_fetch's pool and every event checked as a restore checks it (the name's
 * revisions, delta_event_check); each revision is taken once. Every record in the key range goes
 * to the sorter, marked with the views it belongs to. With a cache dir, a full snapshot that had
 * to be downloaded is kept there once checked ("full-<hash of store and key>.db" and a ".ok"
 * file with its sizes, written after it), and read from there by the next command without a
 * download; deltas are fetched each time. Memory: the sorter's limit plus one event
 * and the open path of the db's tree. */
#ifndef ETCDBR_INSPECT_READ_H
#define ETCDBR_INSPECT_READ_H

#include "keyrange.h"
#include "recsort.h"
#include "../store/snapname.h"
#include "../store/store.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define INSPECT_MAX_VIEWS 2

/* One point of the history. At most one of revision and time_ns; neither = the latest. */
typedef struct InspectView {
    int64_t revision; /* the state at exactly this revision */
    int64_t time_ns;  /* the last revision recorded at or before this Unix time (ns) */
} InspectView;

typedef struct InspectConfig {
    Store *store; /* borrowed */
    const char
        *scratch;     /* private scratch dir (borrowed): the full snapshot's copy, delta spools */
    int max_fetchers; /* delta downloads in parallel, >= 1 */
    atomic_int *stop; /* borrowed, may be NULL: set to stop (ERR_CANCELED) */
    const KeyRange *range;    /* borrowed */
    int keep_values;          /* values go to the sorter (else only their sizes) */
    const InspectView *views; /* borrowed: view i marks records with bit i */
    size_t n_views;           /* 1..INSPECT_MAX_VIEWS */
    const char *cache_dir;    /* NULL, or where full snapshots made local are kept for the next
                                 command (borrowed; scratch must be on its file system) */
    int older_deltas;         /* also every delta before view 0's set, of its history (history:
                                 what older sets hold that a compacted full snapshot lost) */
} InspectConfig;

typedef struct InspectResult {
    int64_t revision[INSPECT_MAX_VIEWS]; /* the revision each view shows */
    Snapshot *objects; /* owned: the objects read, in order; InspectRec.object indexes it */
    size_t n_objects;
    uint64_t records;   /* records given to the sorter */
    int target_refused; /* the error is about a view's revision or time (a usage error) */
} InspectResult;

/* Reads the views' records into sort (recsort_add; the caller finishes it). Errors, each naming
 * the object or the revision: ERR_NOT_FOUND (no full snapshot for a view), ERR_INVALID with
 * target_refused (a revision beyond the backups, or compacted in the only full snapshot that
 * could hold it), ERR_GAP, ERR_CORRUPT, ERR_IO, ERR_CANCELED, ERR_NOMEM. out owned
 * (inspect_result_free, also on error). */
int inspect_read(const InspectConfig *c, RecSort *sort, InspectResult *out);
void inspect_result_free(InspectResult *r);

#endif
