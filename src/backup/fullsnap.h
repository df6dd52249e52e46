/* fullsnap: one full snapshot, streamed and verified before it is stored (DESIGN.md data paths):
 * gRPC Snapshot stream -> temp file (sha256 trailer checked on the fly) -> size % 512 == 32 ->
 * the db opens and yields its revision -> compress -> store write, visible only when complete.
 * The object is named with the revision inside the db, never one read before the stream. */
#ifndef ETCDBR_FULLSNAP_H
#define ETCDBR_FULLSNAP_H

#include "../codec/compress.h"
#include "../etcd/etcd_client.h"
#include "../store/store.h"

#include <stdint.h>

typedef struct FullSnapshotResult {
    int64_t revision;      /* etcd revision inside the db */
    uint64_t db_bytes;     /* db size without the trailer */
    uint64_t stored_bytes; /* bytes written to the store (after compression) */
    char snap_name[256];   /* object name written */
} FullSnapshotResult;

/* Removes the temp files snapshotters killed earlier left in temp_dir (--snapstore-temp-directory):
 * "etcdbr-full-XXXXXX" staging files and "delta-spool-XXXXXX" spool files (regular files only,
 * only when no live process holds their flock; each removal is logged with its size). Failures
 * are logged and otherwise ignored. Called by fullsnap_take; call it also when a command starts. */
void fullsnap_cleanup_stale(const char *temp_dir);

/* Called once the staged snapshot is verified and named, before anything is written to the
 * store: db_path holds db_bytes of db (then the trailer), revision is the one inside it. A
 * nonzero return (an ERR_* with its message set) stops the snapshot with nothing stored. */
typedef int (*FullSnapshotHook)(void *ctx, const char *db_path, uint64_t db_bytes, int64_t revision,
                                const char *snap_name);

/* Takes a full snapshot of the etcd behind c into store. temp_dir holds the staging file
 * (removed before returning; locked while it exists, see fullsnap_cleanup_stale). Progress
 * (bytes, rate, ETA against etcd's Status dbSize) is reported while it runs, see progress.h.
 * is_final appends ".final" to the name. before_store (may be NULL) is called with hook_ctx
 * before the store write. On any failure nothing is visible in the store. Errors: ERR_ETCD
 * (stream), ERR_CORRUPT (trailer, size or db check), ERR_IO (temp dir, disk full), the hook's
 * error, store errors. */
int fullsnap_take(EtcdClient *c, Store *store, const char *temp_dir, CompressKind compression,
                  int is_final, FullSnapshotHook before_store, void *hook_ctx,
                  FullSnapshotResult *out);

/* Verifies a staged full snapshot file at path whose bytes (total of them) all went through
 * checker (a trailer_checker_new writer): etcd's rule (etcdutl snapshot restore) is that a file of
 * size % 512 == 32 is db pages plus a 32-byte SHA-256 trailer, which must match; without one the
 * file is accepted as a bare db only with allow_missing_trailer (--skip-hash-check). Then the db
 * part must open as bbolt (with full_walk, every page is walked: ~0.3 s per 100 MB from disk) and
 * hold etcd's key bucket. *db_len = db bytes; *revision = the etcd revision inside the db.
 * 0 or ERR_CORRUPT (empty, no or wrong trailer, not an etcd db) / ERR_IO. */
int fullsnap_verify_file(const char *path, IoWriter *checker, uint64_t total,
                         int allow_missing_trailer, int full_walk, uint64_t *db_len,
                         int64_t *revision);

/* Copies src (borrowed, uncompressed payload) through the compressor, then, when snap_name says
 * ".enc" (store_name_suffix), through the store's encryption key, into a new store object
 * snap_name; commits only if every byte was written. ERR_INVALID for an encrypted name on a
 * store without keys. *stored_bytes may be NULL. An object that
 * already exists under snap_name counts as stored (*stored_bytes = 0): a name fixes kind,
 * revisions and creation second, so it holds the same revisions. A stopping process (SIGTERM)
 * does not end it: the snapshotter stores its last delta this way while it stops. */
int fullsnap_store_stream(Store *store, const char *snap_name, CompressKind compression,
                          IoReader *src, uint64_t *stored_bytes);

/* Stores the bbolt db at db_path as the full snapshot snap_name: its bytes then their SHA-256
 * (the format of etcd's Snapshot stream, seed-spec §4.1), through the compressor, in one pass,
 * progress reported as `what` (progress.h). Same commit rules and errors as
 * fullsnap_store_stream, plus ERR_IO reading the file, and ERR_CANCELED (nothing stored) once the
 * process is stopping (process_stop_flag). */
int fullsnap_store_db_file(Store *store, const char *snap_name, CompressKind compression,
                           const char *db_path, const char *what, uint64_t *stored_bytes);

#endif
