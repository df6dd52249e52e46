/* restore_fetch: the second stage of a restore (restorer.h): the set's objects made local. The
 * full snapshot is read where it lies when the store's object is a plain local file (Local),
 * else downloaded, decompressed (and decrypted) into the scratch dir; either way its SHA-256
 * trailer and its db are checked (snapshot_file_verify) and its revision against its name. The
 * deltas are fetched by a pool of threads into spool files (DeltaReader: downloaded,
 * decompressed and their hash checked) at most max_fetchers ahead of the one who takes them,
 * in order. */
#ifndef ETCDBR_RESTORE_FETCH_H
#define ETCDBR_RESTORE_FETCH_H

#include "../backup/delta.h"
#include "../common/progress.h"
#include "../store/snapname.h"
#include "../store/store.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct RestoreFetchConfig {
    Store *store;          /* borrowed */
    const char *scratch;   /* private scratch dir: the full snapshot's copy and the delta spools */
    int max_fetchers;      /* threads, >= 1; also how far they may run ahead */
    int skip_hash_check;   /* a full snapshot without its SHA-256 trailer is accepted */
    atomic_int *stop;      /* borrowed, may be NULL: set to stop (ERR_CANCELED) */
    Progress *progress;    /* borrowed, may be NULL: the download's, fed with every byte read from
                              the store (snapobj_open_read_progress) and every object fetched; ended
                              (progress_end) when the n_objects-th is */
    uint64_t n_objects;    /* objects of the set: the full snapshot and its deltas */
    const char *cache_dir; /* NULL, or where deltas are looked up before a fetch and kept after
                              it (fetch_cache.h; inspect's --cache-dir) */
} RestoreFetchConfig;

/* The full snapshot's db, local. */
typedef struct RestoreFullDb {
    int fd;          /* the store's own file when read in place (owned), else -1 */
    char path[4096]; /* where the db is read: "/proc/self/fd/<fd>" or the copy in the scratch dir */
    int copied;      /* path is our copy (removed by restore_full_db_release) */
    uint64_t db_len; /* bytes of the db (the file without its trailer) */
    int64_t revision; /* the etcd revision in the db (bbolt_etcd_revision) */
} RestoreFullDb;

/* Makes full (an object of c->store) local into *out: read in place, or copied to
 * "<scratch>/snapshot-full.db". Checks its trailer and db, and its revision against its name
 * (the Go tool's untagged full snapshots may hold a few revisions more than their name says,
 * never beyond target_revision when > 0; docs/restore.md). Errors name the object: ERR_CORRUPT
 * (truncated, hash, format, revision against name), ERR_IO (including the scratch dir's
 * free-space reserve), ERR_NOT_FOUND, ERR_CANCELED, ERR_NOMEM. out->fd is -1 on error. */
int restore_fetch_full(const RestoreFetchConfig *c, const Snapshot *full, int64_t target_revision,
                       RestoreFullDb *out);
/* The checks of a full snapshot file already local (fd open on it at offset 0, path a name of
 * the same file): every byte read through the SHA-256 trailer check, then the db
 * (snapshot_file_verify); *db_len, *revision as restore_fetch_full gives them. c's progress and
 * stop are honoured. ERR_CORRUPT, ERR_IO, ERR_CANCELED, ERR_NOMEM; the message does not name the
 * object (callers add it). */
int restore_full_file_check(const RestoreFetchConfig *c, int fd, const char *path, uint64_t *db_len,
                            int64_t *revision);
/* Closes the store's file, or removes our copy; fd -1 after. */
void restore_full_db_release(RestoreFullDb *db);

typedef struct RestoreFetch RestoreFetch;

/* Starts min(n, max_fetchers) threads fetching deltas[0..n) (borrowed, must outlive the pool)
 * into spool files in c->scratch. *out owned (restore_fetch_stop). ERR_NOMEM, ERR_IO (no thread
 * could start). */
int restore_fetch_start(const RestoreFetchConfig *c, const Snapshot *deltas, size_t n,
                        RestoreFetch **out);
/* Waits for delta j (taken in order: 0, 1, ...) and hands over its reader (owned by the caller
 * then: delta_reader_close). The fetch's error, naming the delta (ERR_CORRUPT for a truncated
 * or damaged object, ERR_NOT_FOUND, ERR_IO), or ERR_CANCELED when c->stop is set (checked every
 * 200 ms). */
int restore_fetch_take(RestoreFetch *f, size_t j, DeltaReader **out);
/* Delta j is applied: the threads may fetch one further. */
void restore_fetch_done(RestoreFetch *f, size_t j);
/* Stops the threads, waits for them, closes every reader not taken and frees f. NULL-safe. */
void restore_fetch_stop(RestoreFetch *f);

#endif
