/* restore_plan: the first stage of a restore (restorer.h): one listing of the store, the set
 * the target asks for (the newest full snapshot at or before it and the deltas after it up to
 * it: snapname_set_at, which never combines two histories), and the checks made before anything
 * is downloaded: the target within the backups, the revision bump within range, the deltas
 * contiguous (docs/restore.md). Also the check of the restored members' identity against the
 * backed-up cluster's (restore_plan_check_token), made once the full snapshot's db is local. */
#ifndef ETCDBR_RESTORE_PLAN_H
#define ETCDBR_RESTORE_PLAN_H

#include "restorer.h"
#include "../format/bbolt.h"
#include "../store/snapname.h"
#include "../store/store.h"

#include <stddef.h>
#include <stdint.h>

/* What the plan is asked for. At most one of revision and time_ns; both 0 = the latest
 * revision in the store. */
typedef struct RestoreTarget {
    Store *store;     /* borrowed */
    int64_t revision; /* exactly the state at this etcd revision */
    int64_t time_ns;  /* the last revision recorded at or before this Unix time (ns) */
    int64_t bump;     /* --bump-revision (> 0: checked against the set's last revision) */
} RestoreTarget;

/* The set to restore. */
typedef struct RestorePlan {
    Snapshot *list; /* owned: the listing, unencrypted objects after the first encrypted one
                       left out (each named in a warning) */
    size_t n_list;
    const Snapshot *full; /* the full snapshot, in list */
    Snapshot *deltas;     /* owned copies: the deltas after full, in order, trimmed to the target */
    size_t n_deltas;
    int64_t store_last;        /* the set's last revision (full's when there is no delta) */
    const Snapshot *next_full; /* in list: the oldest full snapshot after full of its history
                                  (or untagged), NULL if none; the set's deltas end at it */
    int target_refused;        /* the error is about the target or the bump (a usage error) */
} RestorePlan;

/* Lists t->store and plans the set into *out (zeroed first; free with restore_plan_free, also
 * on error). Errors: ERR_NOT_FOUND (no full snapshot at or before the target, naming the store
 * and what was looked for), ERR_INVALID with target_refused (target revision beyond the
 * set's last revision: beyond the store's, or in the revisions between the set's last delta and
 * next_full that no delta holds; bump beyond int64: restorer_check_bump), ERR_GAP (revisions
 * missing between two objects, both named, with the missing range), ERR_NOMEM, or the listing's
 * errors. */
int restore_plan_make(const RestoreTarget *t, RestorePlan *out);
void restore_plan_free(RestorePlan *p); /* NULL-safe; leaves *p zeroed */

/* Whether the restored members' IDs (cluster_member_id of each member's peer URLs and token)
 * are members of the backed-up cluster: db is the full snapshot's db (borrowed), whose
 * "members" bucket (etcd 3.4+) holds member IDs as etcd's types.ID prints them (hex). Such an
 * ID means the token and peer URLs are the old cluster's, and an old member could talk to the
 * restored cluster as its own. mode 0: no check; 1: a warning; 2: ERR_INVALID naming the member
 * and its ID, *refused set. 0 otherwise. */
int restore_plan_check_token(BboltDb *db, const RestoreMember *ms, size_t n_members,
                             const char *token, int mode, int *refused);

#endif
