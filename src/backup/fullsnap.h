/* fullsnap: one full snapshot, streamed and verified before it is visible (docs/design.md data
 * paths): gRPC Snapshot stream -> sha256 trailer and streaming db checks -> compress (-> encrypt)
 * -> the store's uncommitted object, committed only when every check passed. The object is named
 * with the revision inside the db (checked equal to the one read before the stream). */
#ifndef ETCDBR_FULLSNAP_H
#define ETCDBR_FULLSNAP_H

#include "../codec/compress.h"
#include "../common/phase.h"
#include "../etcd/etcd_client.h"
#include "../store/store.h"

#include <stdint.h>

typedef struct FullSnapshotResult {
    Snapshot snap;         /* the object written (fullsnap_snapshot_new): its name, key, etcd
                              revision inside the db (last_revision), creation second */
    uint64_t db_bytes;     /* db size without the trailer */
    uint64_t stored_bytes; /* bytes written to the store (after compression) */
    int store_failed;      /* on failure, 1 when a call into the store failed (opening, writing,
                              finishing or committing the object): the store, not etcd, the
                              checks or the temp dir, is what failed; the hook's own store calls
                              are the hook's to tell */
    /* Where the time went, begun when fullsnap_take was called (not ended: the caller ends it,
     * phase_timer_end); on failure too. The thread's time in each stage of the stream:
     * "prepare" (etcd's Status, naming, opening the object), "etcd_read" (waiting for etcd's
     * stream), "check" (SHA-256 trailer and db checks), "compress_encrypt", "upload" (the
     * store's writes, finish and commit; parts sent by uploader threads count while the stream
     * waits for them), "history" (the hook), and on the staged path "read_staged". Stages of a
     * stream overlap; each counts the time the thread spent in it. Retried attempts add to the
     * same phases. */
    PhaseTimer phases;
} FullSnapshotResult;

/* The Snapshot of a new object of store (snapname_new): kind, start and last revisions and
 * is_final as given, created now (Unix seconds), named with store_name_suffix(store, compression)
 * (".enc" first when the store has keys), under the key prefix the store gives v2 objects
 * (store_v2_key_prefix). Its
 * snap_name is formatted once, here; writers take the struct, never the name back. 0 or
 * ERR_INVALID (revisions or time out of snapname_format's range). */
int fullsnap_snapshot_new(const Store *store, SnapKind kind, int64_t start, int64_t last,
                          CompressKind compression, int is_final, Snapshot *out);

/* Removes the temp files snapshotters killed earlier left in temp_dir (--snapstore-temp-directory):
 * "etcdbr-full-XXXXXX" staging files and "delta-spool-XXXXXX" spool files (regular files only,
 * only when no live process holds their flock; each removal is logged with its size). Failures
 * are logged and otherwise ignored. Called by fullsnap_take; call it also when a command starts. */
void fullsnap_cleanup_stale(const char *temp_dir);

/* Called once the snapshot is checked and named, before it becomes visible in the store: mark is
 * the restore mark read from its db (mark->present = 0 when it has none; history.h), db_bytes the
 * db's size without the trailer, snap the object (borrowed for the call; its last_revision is
 * the revision inside the db). In the one-pass path every byte is
 * already written to the store's uncommitted object (a Local temp file, an S3 multipart upload);
 * in the staged path nothing is yet. A nonzero return (an ERR_* with its message set) stops the
 * snapshot with nothing stored (the object is aborted). */
typedef int (*FullSnapshotHook)(void *ctx, const HistoryRestoreMark *mark, uint64_t db_bytes,
                                const Snapshot *snap);

/* Takes a full snapshot of the etcd behind c into store, in one pass (docs/snapshot.md): etcd's
 * Snapshot stream goes through the SHA-256 trailer check and the streaming db check
 * (bbolt_stream.h), the compressor and the encryption straight into the store's uncommitted
 * object, named with etcd's revision read just before the stream; it is committed only when the
 * trailer and the checks pass and the db holds exactly that revision, aborted otherwise. The
 * stream moves at the pace of the slower of etcd and the store: a store write that blocks holds
 * the gRPC stream (HTTP/2 flow control) until it moves, bounded by the store's own timeouts and
 * the stream's snapshot_timeout_ms. When a write landed between the revision read and the stream
 * (the db's revision differs), the object is aborted and the snapshot taken again, at most
 * 3 times; then, or when the streaming check cannot decide (ERR_UNSUPPORTED from bbolt_stream),
 * or the name already exists, it is staged in a file in temp_dir, checked there with a walk of
 * every page and then stored (the file is locked while it exists, see fullsnap_cleanup_stale).
 * Progress (bytes, rate, ETA against etcd's Status dbSize) is reported while it runs, see
 * progress.h. is_final appends ".final" to the name. before_store (may be NULL) is called with
 * hook_ctx before the commit. On any failure nothing is visible in the store; ERR_CANCELED
 * (nothing stored) once the process is stopping. Errors: ERR_ETCD (stream), ERR_CORRUPT
 * (trailer, size or db check), ERR_IO (temp dir, disk full), the hook's error, store errors. */
int fullsnap_take(EtcdClient *c, Store *store, const char *temp_dir, CompressKind compression,
                  int is_final, FullSnapshotHook before_store, void *hook_ctx,
                  FullSnapshotResult *out);

/* Copies src (borrowed, uncompressed payload) through the compressor, then, when snap is
 * encrypted (its name says ".enc", store_name_suffix), through the store's encryption key bound
 * to its identity, into a new store object named snap->snap_name (snap as from
 * fullsnap_snapshot_new; borrowed); commits only if every byte was written. ERR_INVALID for an
 * encrypted name on a store without keys. *stored_bytes may be NULL. An object that
 * already exists under that name counts as stored (*stored_bytes = 0): a name fixes kind,
 * revisions and creation second, so it holds the same revisions. A stopping process (SIGTERM)
 * does not end it: the snapshotter stores its last delta this way while it stops.
 * *store_failed (may be NULL) is 1 after a failure of a call into the store (as
 * FullSnapshotResult.store_failed), 0 when src, a filter or nothing failed. */
int fullsnap_store_stream(Store *store, const Snapshot *snap, CompressKind compression,
                          IoReader *src, uint64_t *stored_bytes, int *store_failed);

/* fullsnap_store_stream, adding its time to pt (may be NULL): reading src to src_phase (NULL:
 * "read_source"), the filters to "compress_encrypt", the store's open, writes, finish and commit
 * to "upload"; *store_failed as fullsnap_store_stream's. */
int fullsnap_store_stream_timed(Store *store, const Snapshot *snap, CompressKind compression,
                                IoReader *src, uint64_t *stored_bytes, PhaseTimer *pt,
                                const char *src_phase, int *store_failed);

/* Stores the bbolt db at db_path as the full snapshot snap_name (a name from snapname_format,
 * described once with store_snapshot_for_name): its bytes then their SHA-256
 * (the format of etcd's Snapshot stream, docs/go-tool.md §4.1), through the compressor, in one
 * pass, progress reported as `what` (progress.h). Same commit rules and errors as
 * fullsnap_store_stream, plus ERR_IO reading the file, and ERR_CANCELED (nothing stored) once the
 * process is stopping (process_stop_flag). */
int fullsnap_store_db_file(Store *store, const char *snap_name, CompressKind compression,
                           const char *db_path, const char *what, uint64_t *stored_bytes);

#endif
