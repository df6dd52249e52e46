/* restorer: rebuilds a data dir from a store, offline (docs/design.md, restore engine;
 * docs/restore.md). One listing -> the newest full snapshot at or before the target -> its db
 * streamed bucket by bucket into a new bbolt file (format/bbolt_writer), every later delta revision
 * appended to the mvcc "key" bucket exactly as etcd writes it (sub-revisions in event order,
 * tombstones, leases kept) up to the target revision -> the leases the deltas use added to the
 * "lease" bucket and the restored cluster's membership to "members" and "meta" -> the member dir
 * around that db (WAL, snap file: memberdir.h; docs/member-dir.md) in "<data-dir>.part", or with
 * --etcdutl-bin etcd's own restore tool writes it -> fsync -> rename. No etcd runs; memory is
 * bounded by one event and the open path of the tree. An interrupted restore leaves the target
 * absent; a rerun starts clean. */
#ifndef ETCDBR_RESTORER_H
#define ETCDBR_RESTORER_H

#include "../common/phase.h"
#include "../store/store.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>

typedef struct RestoreResult RestoreResult;

/* One member of a whole-cluster restore (RestoreConfig.members). All borrowed. */
typedef struct RestoreMember {
    const char *name;
    const char *data_dir;  /* must be absent or empty; distinct from every other member's */
    const char *peer_urls; /* comma-joined, as in initial_cluster */
} RestoreMember;

typedef struct RestoreConfig {
    Store *store;         /* borrowed */
    const char *data_dir; /* target; must be absent or empty */
    const char *temp_dir; /* --restoration-temp-snapshots-dir (created, removed after) */
    const char *name;     /* member name */
    const char *initial_cluster;
    const char *initial_cluster_token;
    const char *initial_advertise_peer_urls; /* comma-joined */
    int skip_hash_check;
    int max_fetchers;        /* parallel delta downloads, >= 1; also the read-ahead bound */
    const char *etcdutl_bin; /* NULL/"": the member dir is ours (memberdir.h); else this etcdutl
                                (or etcdctl of 3.4) writes it (a fallback) */
    /* point in time: at most one of the two; both 0 = the latest revision in the store */
    int64_t target_revision; /* exactly the state at this revision */
    int64_t target_time_ns;  /* the last revision whose events were recorded at or before this
                                Unix time (ns) */
    int64_t bump_revision;   /* > 0: add this to the final revision (etcdutl --bump-revision) */
    int mark_compacted;      /* with bump_revision: schedule a compaction at the bumped revision */
    int64_t new_lease_ttl;   /* TTL (s) of a lease granted after the full snapshot whose TTL the
                                delta does not record; > 0 */
    int64_t quota_bytes;     /* a db larger than this is reported (etcd's backend quota) */
    /* borrowed, may be NULL: set (by a signal handler) to stop; the restore then ends with
     * ERR_CANCELED, its tool child stopped and everything it created removed */
    atomic_int *stop;
    /* Offline uses (compact): when set, the built db (full snapshot + deltas, no restore mark
     * added, a mark already in the full snapshot copied as it is) is handed to db_sink instead of
     * etcd's restore tool: db_path is a complete bbolt file in the private scratch dir, valid
     * during the call only; full is the set's full snapshot (borrowed). data_dir and the member
     * fields are then unused and nothing is written outside the scratch dir. The sink's nonzero
     * return (an ERR_* with its message set) is restorer_run's. */
    /* A whole cluster from one set (docs/runbook-quorum-loss.md): with n_members > 0, one data
     * dir per entry is written from the one db built (copied for every member after the first;
     * or by etcd's restore tool run once per member with --etcdutl-bin), name, data_dir and
     * initial_advertise_peer_urls above are then unused. All of them are committed (renamed into
     * place) only after every member dir is written; on error none is. */
    const RestoreMember *members; /* borrowed */
    size_t n_members;
    /* Whether the token is checked against the backed-up cluster: when a member ID etcd
     * computes from the member's peer URLs and initial_cluster_token (cluster.h) is a member of
     * the full snapshot's cluster (its db's "members" bucket, written by etcd 3.4+), the token
     * and peer URLs are the old ones, and old members could talk to the new cluster as their
     * own. 0: no check, 1: warn, 2: refuse (ERR_INVALID, target_refused), before the db is
     * built. */
    int check_old_token;
    int (*db_sink)(void *ctx, const char *db_path, const Snapshot *full, const RestoreResult *res);
    void *db_sink_ctx;
} RestoreConfig;

struct RestoreResult {
    int64_t base_revision; /* revision of the full snapshot */
    int64_t revision;      /* final revision of the data dir (after any bump) */
    size_t deltas_applied;
    uint64_t events_applied, revisions_applied;
    uint64_t leases_kept, leases_added; /* from the full snapshot / granted after it */
    uint64_t leases_defaulted;          /* added with new_lease_ttl (no TTL recorded) */
    uint64_t db_bytes;                  /* size of the db built */
    char base_name[256];
    double seconds_total, seconds_build; /* seconds_build: writing the db (full + deltas) */
    int target_refused; /* the error is about the requested target or bump (a usage error) */
    int64_t last_delta_revision; /* last revision of the last delta applied (0 if none) */
    char last_delta_suffix[16];  /* compression suffix of that delta ("" if none) */
    /* Where the time went, ended (phase.h), on failure too, the stages run so far: "plan" (the
     * targets checked and locked, the set chosen), "prepare" (work dirs), "fetch" (the full
     * snapshot made local and checked; the deltas' fetchers started), "build" (the db; it waits
     * for deltas the fetchers have not brought yet), "member_dirs", "swap", or "sink" (a
     * db_sink), then "cleanup". Label: the data dir (none for several members). */
    PhaseTimer phases;
};

/* Restores. Errors: ERR_EXISTS (non-empty data dir, or another restore holds its parent),
 * ERR_NOT_FOUND (no full snapshot in the store at or before the target), ERR_INVALID (target
 * beyond the store's last revision), ERR_GAP (missing revisions between two objects; both
 * named), ERR_CORRUPT (hash, format, revision mismatch), ERR_IO (including etcd's restore tool
 * failing, with --etcdutl-bin), ERR_INVALID with target_refused (--initial-cluster, --name or
 * the peer URLs refused as etcd's tool refuses them: memberdir_check), ERR_CANCELED (cfg->stop was
 * set). On error the data dir is left absent and the private scratch directory removed. Progress is
 * logged at least every 5 s. */
int restorer_run(const RestoreConfig *cfg, RestoreResult *out);

/* --bump-revision bump on top of the restored revision rev: rev + bump must stay below
 * INT64_MAX, so that etcd can still write the revision after it (etcd revisions are int64).
 * bump <= 0: no bump, 0. 0 or ERR_INVALID naming the flag and the largest bump allowed. */
int restorer_check_bump(int64_t rev, int64_t bump);

#endif
