/* restore_build: the third stage of a restore (restorer.h): the full snapshot's db streamed
 * bucket by bucket into a new bbolt file (format/bbolt_writer), every later delta revision
 * appended to the mvcc "key" bucket exactly as etcd writes it (sub-revisions in event order,
 * tombstones, leases kept) up to the target revision, the leases the deltas use added to the
 * "lease" bucket, the restore mark (history.h) written, and for a member dir of ours the
 * restored cluster's membership put into "members" and "meta" (memberdir.h; etcdutl's
 * snapshot restore does the same: docs/member-dir.md). The db is always rebuilt, even with
 * nothing to add to the full snapshot: the restore mark lets the restored etcd be backed up
 * into the same store. Memory is bounded by one event and the open path of the tree. */
#ifndef ETCDBR_RESTORE_BUILD_H
#define ETCDBR_RESTORE_BUILD_H

#include "memberdir.h"
#include "restore_fetch.h"
#include "restorer.h"

#include <stdint.h>

/* What the build reads and writes. All borrowed. */
typedef struct RestoreBuildInput {
    const char *src_path;   /* the full snapshot's db (restore_fetch_full's path) */
    uint64_t src_len;       /* its bytes without the trailer */
    const Snapshot *full;   /* the set's full snapshot (its history goes into the mark) */
    int64_t base_revision;  /* the revision in src (restore_fetch_full) */
    const Snapshot *deltas; /* the set's deltas, in order (restore_plan) */
    size_t n_deltas;
    RestoreFetch *fetch;   /* their readers, taken in order (restore_fetch_start) */
    int64_t last_revision; /* the revision the deltas go up to (for progress lines only) */
    const char *db_path;   /* the new db; created (O_EXCL); its directory's free-space reserve
                              is kept */
    const MemberDbItems *membership; /* NULL, or the restored cluster's membership, written
                                        into the db (a member dir of ours; then fsynced) */
} RestoreBuildInput;

/* Builds the db at in->db_path from cfg's point of its restore: target_revision or
 * target_time_ns, bump_revision and mark_compacted, new_lease_ttl (s, for leases whose TTL no
 * delta records), initial_cluster and its token (the history of a multi-member restore),
 * db_sink (no restore mark), stop, quota_bytes (a warning). Fills out's deltas_applied,
 * events_applied, revisions_applied, leases_*, db_bytes and seconds_build; *final_rev = the
 * db's last revision after the bump. Errors: ERR_GAP (a revision missing inside or between
 * deltas, or the deltas end before the target revision; the object named), ERR_CORRUPT (the
 * full snapshot is no etcd db, or an event or delta does not match its name), ERR_INVALID (the
 * bump overflows), ERR_IO (including the free-space reserve), ERR_CANCELED, ERR_NOMEM, and the
 * fetch's errors. A failed build leaves a partial db at db_path for the caller to remove. */
int restore_build_db(const RestoreConfig *cfg, const RestoreBuildInput *in, RestoreResult *out,
                     int64_t *final_rev);

#endif
