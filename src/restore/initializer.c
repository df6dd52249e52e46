/* initializer: see initializer.h. The order of operations keeps a working data dir at every
 * step: restore beside the target, verify the result, then swap it in. */
#include "initializer.h"
#include "validator.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Moves dir aside to "<dir>.invalid" (replacing an older one) so nothing is deleted blindly. */
static int move_aside(const char *dir) {
    char aside[4096];
    snprintf(aside, sizeof aside, "%s.invalid", dir);
    int rc = fs_remove_tree(aside);
    if (rc) return rc;
    if (rename(dir, aside) != 0)
        return err_set(ERR_IO, "rename %s -> %s: %s", dir, aside, strerror(errno));
    log_warn("the invalid data dir was kept as %s", aside);
    return 0;
}

static int store_has_full(Store *store, int *has_full) {
    Snapshot *list = NULL;
    size_t n = 0;
    int rc = store_list(store, &list, &n);
    if (rc) return rc;
    *has_full = 0;
    for (size_t i = 0; i < n; i++)
        if (list[i].kind == SNAP_FULL && !list[i].is_chunk) *has_full = 1;
    free(list);
    return 0;
}

/* The learner path: remove this member (rejoin only), move the data dir aside, add this member
 * as a learner. A failure after the removal leaves this member out of the member list: the next
 * attempt sees it absent and only adds it. */
static int join_as_learner(const InitConfig *cfg, InitResult *out, int remove, const char *why) {
    const InitMember *m = cfg->member;
    const char *dd = cfg->restore.data_dir;
    int64_t t0 = now_mono_ms();
    int rc = remove ? m->remove_self(m->ctx) : 0;
    if (rc) return err_wrap(rc, "removing this member from the cluster");
    if (fs_exists(dd) && (rc = move_aside(dd))) return rc;
    rc = m->add_learner(m->ctx);
    out->restore_seconds = (double)(now_mono_ms() - t0) / 1000.0;
    if (rc) return err_wrap(rc, "adding this member to the cluster as a learner");
    out->joined_as_learner = 1;
    snprintf(out->summary, sizeof out->summary,
             "data dir %s: %s; this member was %sadded to the cluster as a learner in %.3fs: etcd "
             "starts with an empty data dir and --initial-cluster-state=existing",
             dd, why, remove ? "removed and " : "", out->restore_seconds);
    return 0;
}

static int run(const InitConfig *cfg, InitResult *out) {
    memset(out, 0, sizeof *out);
    const char *dd = cfg->restore.data_dir;
    InitMemberState ms = cfg->member ? cfg->member->probe(cfg->member->ctx) : INIT_MEMBER_UNKNOWN;
    if (ms == INIT_MEMBER_ABSENT) /* scale-up: the learner syncs from the leader */
        return join_as_learner(cfg, out, 0, "this member is not in the cluster's member list");
    ValidationResult vr;
    validate_data_dir(dd, cfg->full_mode ? VALIDATE_FULL : VALIDATE_SANITY, cfg->restore.store,
                      &vr);
    out->validation_seconds = vr.seconds;
    log_info("data dir %s: %s (%s validation, %.3fs)%s%s", dd, data_dir_status_name(vr.status),
             cfg->full_mode ? "full" : "sanity", vr.seconds, vr.message[0] ? ": " : "", vr.message);
    switch (vr.status) {
    case DATA_DIR_VALID:
        /* a point-in-time target replaces a valid data dir unless it is at that revision */
        if ((cfg->restore.target_revision && vr.db_revision != cfg->restore.target_revision) ||
            cfg->restore.target_time_ns || cfg->restore.bump_revision > 0) {
            if (!cfg->restore.store)
                return err_set(ERR_INVALID, "a restore target is set but no store is configured");
            log_info("data dir %s is valid at revision %lld, but a restore target is set: "
                     "restoring",
                     dd, (long long)vr.db_revision);
            break;
        }
        out->validation_ok = 1;
        out->revision = vr.db_revision;
        snprintf(out->summary, sizeof out->summary, "data dir %s is valid at revision %lld", dd,
                 (long long)vr.db_revision);
        return 0;
    case DATA_DIR_WRONG_VOLUME_MOUNTED:
    case DATA_DIR_FAIL_TO_OPEN_BOLTDB:
    case DATA_DIR_STATUS_UNKNOWN:
        /* nothing is touched: a wrong volume, a running etcd or an unreadable store */
        return err_set(ERR_INVALID, "data dir %s: %s: %s", dd, data_dir_status_name(vr.status),
                       vr.message);
    default:
        break;
    }
    /* a member of a running multi-member cluster whose others have no quorum: restored from the
     * store (or started empty) under its old member ID, it would take the raft log the old
     * leader replays onto it once quorum returns on top of its own db (a diverging keyspace).
     * Nothing is touched; the caller retries, and the member rejoins as a learner then. */
    if (ms == INIT_MEMBER_NO_QUORUM && vr.status != DATA_DIR_VALID)
        return err_set(ERR_ETCD,
                       "data dir %s is %s, but the other members of this cluster have no quorum: "
                       "not restoring it from the store nor starting etcd empty (the others would "
                       "replay their raft log onto it); once they have quorum again it rejoins as "
                       "a learner; if their data dirs are lost too, follow "
                       "docs/runbook-quorum-loss.md",
                       dd, data_dir_status_name(vr.status));
    /* the others have quorum: resync from them, not the store (a valid data dir with a restore
     * target set is restored as asked) */
    if (ms == INIT_MEMBER_LISTED && vr.status != DATA_DIR_VALID) {
        char why[160];
        snprintf(why, sizeof why, "%s", data_dir_status_name(vr.status));
        return join_as_learner(cfg, out, 1, why);
    }
    int exists = fs_exists(dd);
    if (!cfg->restore.store) {
        if (exists) {
            int rc = move_aside(dd);
            if (rc) return rc;
        }
        snprintf(out->summary, sizeof out->summary,
                 "data dir %s was %s and no store is configured: etcd starts empty", dd,
                 data_dir_status_name(vr.status));
        return 0;
    }
    int has_full = 0;
    int rc = store_has_full(cfg->restore.store, &has_full);
    if (rc) return err_wrap(rc, "listing the store");
    if (!has_full) {
        if (vr.status == DATA_DIR_REVISION_CONSISTENCY_ERROR)
            return err_set(ERR_NOT_FOUND,
                           "data dir %s is behind the store, but the store has no full snapshot to "
                           "restore from",
                           dd);
        if (exists) {
            rc = move_aside(dd);
            if (rc) return rc;
        }
        snprintf(out->summary, sizeof out->summary,
                 "data dir %s was %s and the store %s has no full snapshot: etcd starts empty", dd,
                 data_dir_status_name(vr.status), store_describe(cfg->restore.store));
        return 0;
    }

    log_info("restoring data dir %s from %s (it is %s)", dd, store_describe(cfg->restore.store),
             data_dir_status_name(vr.status));
    char side[4096];
    snprintf(side, sizeof side, "%s.restore", dd);
    rc = fs_remove_tree(side);
    if (rc) return rc;
    RestoreConfig rcfg = cfg->restore;
    rcfg.data_dir = side;
    RestoreResult rr;
    int64_t t0 = now_mono_ms();
    rc = restorer_run(&rcfg, &rr);
    out->restore_seconds = (double)(now_mono_ms() - t0) / 1000.0;
    if (rc) {
        /* nothing was moved: a backup whose contents do not match its name (or any failed
         * restore) never replaces the data dir */
        if (vr.status == DATA_DIR_REVISION_CONSISTENCY_ERROR)
            return err_wrap(rc,
                            "restoring %s, which is valid but at revision %lld, behind the "
                            "store's names (it is kept as it is)",
                            dd, (long long)vr.db_revision);
        return err_wrap(rc, "restoring %s", dd);
    }
    out->restored = 1;

    /* never report success we did not verify: the result must validate on its own */
    ValidationResult check;
    validate_data_dir(side, VALIDATE_FULL, NULL, &check);
    if (check.status != DATA_DIR_VALID) {
        fs_remove_tree(side);
        return err_set(ERR_CORRUPT, "the restored data dir does not validate: %s: %s",
                       data_dir_status_name(check.status), check.message);
    }
    /* the decision "behind the backups" was made from the store's names: it stands only if
     * the verified restore is really newer than the data dir (a backup named newer than it
     * holds never moves a healthy data dir aside) */
    if (vr.status == DATA_DIR_REVISION_CONSISTENCY_ERROR && rr.revision <= vr.db_revision) {
        fs_remove_tree(side);
        return err_set(ERR_CORRUPT,
                       "data dir %s (revision %lld) looked behind the store's backups by their "
                       "names, but the restore of them reaches only revision %lld (full snapshot "
                       "%s): the store's names do not match their contents; the data dir is kept "
                       "as it is",
                       dd, (long long)vr.db_revision, (long long)rr.revision, rr.base_name);
    }
    if (fs_exists(dd)) {
        rc = move_aside(dd);
        if (rc) return rc;
    }
    if (rename(side, dd) != 0)
        return err_set(ERR_IO, "rename %s -> %s: %s", side, dd, strerror(errno));
    char *parent = fs_dirname(dd);
    if (parent) fs_fsync_dir(parent);
    free(parent);
    out->revision = rr.revision;
    snprintf(out->summary, sizeof out->summary,
             "data dir %s was %s; restored from %s to revision %lld (full snapshot %s, %zu deltas) "
             "in %.3fs",
             dd, data_dir_status_name(vr.status), store_describe(cfg->restore.store),
             (long long)rr.revision, rr.base_name, rr.deltas_applied, out->restore_seconds);
    return 0;
}

int initializer_run(const InitConfig *cfg, InitResult *out) {
    /* validation, the has-a-full check and the restore share one listing of the store */
    if (cfg->restore.store) store_pin_listing(cfg->restore.store);
    int rc = run(cfg, out);
    if (cfg->restore.store) store_unpin_listing(cfg->restore.store);
    return rc;
}
