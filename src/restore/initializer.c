/* initializer: see initializer.h. The order of operations keeps a working data dir at every
 * step: restore beside the target, verify the result, then swap it in. */
#include "initializer.h"
#include "validator.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define INVALID_MARKER ".etcdbr-invalid"
#define COPY_TS_LEN 16       /* yyyymmddThhmmssZ */
#define COPY_MAX_COUNTER 999 /* copies moved aside within one second */

/* 1 when name is "<base>.invalid.<yyyymmddThhmmssZ>" or that plus ".<n>" (n in 1..999): a copy
 * move_aside made of the data dir named base; *ts = its time text, *n = its counter (0: none). */
static int parse_copy_name(const char *name, const char *base, char ts[COPY_TS_LEN + 1], int *n) {
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".invalid.", 9) != 0) return 0;
    const char *t = name + bl + 9;
    for (int i = 0; i < COPY_TS_LEN; i++) {
        char want = i == 8 ? 'T' : i == 15 ? 'Z' : '0';
        if (want == '0' ? !isdigit((unsigned char)t[i]) : t[i] != want) return 0;
    }
    memcpy(ts, t, COPY_TS_LEN);
    ts[COPY_TS_LEN] = '\0';
    *n = 0;
    t += COPY_TS_LEN;
    if (*t == '\0') return 1;
    if (*t++ != '.' || !isdigit((unsigned char)*t) || *t == '0' || strlen(t) > 3) return 0;
    for (const char *c = t; *c; c++)
        if (!isdigit((unsigned char)*c)) return 0;
    *n = atoi(t);
    return 1;
}

typedef struct {
    char name[256];
    char ts[COPY_TS_LEN + 1];
    int n;
} AsideCopy;

static int copy_cmp(const void *a, const void *b) {
    const AsideCopy *x = a, *y = b;
    int c = strcmp(x->ts, y->ts);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* Keeps at most max copies of dir moved aside (0: all), removing the oldest by the time in their
 * names. Only directories named as move_aside names them AND holding its marker are counted or
 * removed; `keep` (the copy just made) never is, whatever the clock said. Each removal is logged
 * naming the copy. Failures are logged: the bound is best effort, the move aside is done. */
static void prune_copies(const char *dir, const char *keep, int max) {
    if (max <= 0) return;
    char *parent = fs_dirname(dir), *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    DIR *d = parent ? opendir(parent) : NULL;
    AsideCopy *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        AsideCopy c;
        if (strlen(e->d_name) >= sizeof c.name || !parse_copy_name(e->d_name, base, c.ts, &c.n))
            continue;
        char *path = fs_join(parent, e->d_name);
        int ours = path && strcmp(path, keep) != 0 && fs_dir_has_marker(path, INVALID_MARKER) == 1;
        free(path);
        if (!ours) continue;
        if (n == cap) {
            AsideCopy *g = cap < 4096 ? realloc(v, (cap ? cap * 2 : 8) * sizeof *v) : NULL;
            if (!g) break; /* out of memory, or an absurd count: bound what is held */
            v = g;
            cap = cap ? cap * 2 : 8;
        }
        snprintf(c.name, sizeof c.name, "%s", e->d_name);
        v[n++] = c;
    }
    if (d) closedir(d);
    if (n) qsort(v, n, sizeof *v, copy_cmp);
    for (size_t i = 0; n + 1 > (size_t)max && i < n + 1 - (size_t)max; i++) {
        char *path = fs_join(parent, v[i].name);
        if (!path) break;
        log_warn("removing %s, the oldest copy of an invalid data dir: %zu copies of %s are kept "
                 "aside and --max-invalid-copies is %d",
                 path, n + 1 - i, dir, max);
        if (fs_remove_marked_tree(path, INVALID_MARKER))
            log_warn("cannot remove %s: %s", path, err_msg());
        free(path);
    }
    free(v);
    free(parent);
}

/* Moves dir aside to "<dir>.invalid.<UTC yyyymmddThhmmssZ>" (".<n>" added when that exists)
 * and never over an existing path, so nothing is deleted blindly; the move is fsynced and the
 * copy marked as etcdbr's (INVALID_MARKER, saying why). Then at most max copies are kept. */
static int move_aside(const char *data_dir, int max, const char *why) {
    char dir[4096], ts[COPY_TS_LEN + 1], aside[4200];
    size_t len = strlen(data_dir);
    while (len > 1 && data_dir[len - 1] == '/') /* "d/" is "d": its copies go beside it */
        len--;
    if (len >= sizeof dir) return err_set(ERR_INVALID, "data dir %s: path too long", data_dir);
    snprintf(dir, sizeof dir, "%.*s", (int)len, data_dir);
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm) != COPY_TS_LEN)
        return err_set(ERR_IO, "moving %s aside: cannot format the current time", dir);
    int rc = ERR_EXISTS;
    for (int i = 0; rc == ERR_EXISTS && i <= COPY_MAX_COUNTER; i++) {
        if (i)
            snprintf(aside, sizeof aside, "%s.invalid.%s.%d", dir, ts, i);
        else
            snprintf(aside, sizeof aside, "%s.invalid.%s", dir, ts);
        rc = fs_rename_durable(dir, aside);
    }
    if (rc) return err_wrap(rc, "moving the invalid data dir %s aside", dir);
    char note[4400];
    snprintf(note, sizeof note,
             "data dir %s moved aside by etcdbr at %s: %s; copies of it carrying this file may "
             "be removed by etcdbr beyond --max-invalid-copies\n",
             dir, ts, why);
    if (fs_mark_dir(aside, INVALID_MARKER, note))
        log_warn("cannot mark %s as etcdbr's (it is kept, and never removed by etcdbr): %s", aside,
                 err_msg());
    log_warn("the invalid data dir %s was kept as %s", dir, aside);
    prune_copies(dir, aside, max);
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
    if (fs_exists(dd) && (rc = move_aside(dd, cfg->max_invalid_copies, why))) return rc;
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

/* Restores the store's latest set into the scratch directory "<data-dir>.restore" (marked as
 * etcdbr's: the restore writes "<data-dir>.restore/data-dir"), validates the result, moves the
 * data dir aside and renames the result into its place (durably). A "<data-dir>.restore" left
 * by an initialization that was killed is removed first; one without the marker is never
 * touched (ERR_EXISTS naming it). status: the data dir's validation status, for the summary. */
static int restore_beside(const InitConfig *cfg, InitResult *out, const ValidationResult *vr) {
    const char *dd = cfg->restore.data_dir;
    const char *status = data_dir_status_name(vr->status);
    char side[4096], side_data[4200], what[4200], note[4400];
    snprintf(side, sizeof side, "%s.restore", dd);
    snprintf(side_data, sizeof side_data, "%s/data-dir", side);
    snprintf(what, sizeof what, "the initialization's restore of %s", dd);
    int rc = 0;
    if (fs_exists(side)) {
        if ((rc = fs_scratch_dir_remove(side, what))) return rc;
        log_info("removed %s, left by an earlier initialization that did not finish", side);
    }
    snprintf(note, sizeof note,
             "work in progress of etcdbr's initialization of %s: its restore from the store; "
             "removed when it ends (or by the next one, when this one was killed)\n",
             dd);
    if ((rc = fs_scratch_dir_make(side, note))) return rc;
    RestoreConfig rcfg = cfg->restore;
    rcfg.data_dir = side_data;
    RestoreResult rr;
    int64_t t0 = now_mono_ms();
    rc = restorer_run(&rcfg, &rr);
    out->restore_seconds = (double)(now_mono_ms() - t0) / 1000.0;
    out->restore_phases = rr.phases;
    if (rc) {
        /* nothing was moved: a backup whose contents do not match its name (or any failed
         * restore) never replaces the data dir */
        if (vr->status == DATA_DIR_REVISION_CONSISTENCY_ERROR)
            rc = err_wrap(rc,
                          "restoring %s, which is valid but at revision %lld, behind the "
                          "store's names (it is kept as it is)",
                          dd, (long long)vr->db_revision);
        else
            rc = err_wrap(rc, "restoring %s", dd);
        goto fail;
    }
    out->restored = 1;
    /* never report success we did not verify: the result must validate on its own */
    ValidationResult check;
    validate_data_dir(side_data, VALIDATE_FULL, NULL, &check);
    if (check.status != DATA_DIR_VALID) {
        rc = err_set(ERR_CORRUPT, "the restored data dir does not validate: %s: %s",
                     data_dir_status_name(check.status), check.message);
        goto fail;
    }
    /* the decision "behind the backups" was made from the store's names: it stands only if
     * the verified restore is really newer than the data dir (a backup named newer than it
     * holds never moves a healthy data dir aside) */
    if (vr->status == DATA_DIR_REVISION_CONSISTENCY_ERROR && rr.revision <= vr->db_revision) {
        rc = err_set(ERR_CORRUPT,
                     "data dir %s (revision %lld) looked behind the store's backups by their "
                     "names, but the restore of them reaches only revision %lld (full snapshot "
                     "%s): the store's names do not match their contents; the data dir is kept "
                     "as it is",
                     dd, (long long)vr->db_revision, (long long)rr.revision, rr.base_name);
        goto fail;
    }
    if (fs_exists(dd) && (rc = move_aside(dd, cfg->max_invalid_copies, status))) goto fail;
    if ((rc = fs_rename_durable(side_data, dd))) goto fail;
    if (fs_scratch_dir_remove(side, what)) log_warn("restored, but %s", err_msg());
    out->revision = rr.revision;
    snprintf(out->summary, sizeof out->summary,
             "data dir %s was %s; restored from %s to revision %lld (full snapshot %s, %zu deltas) "
             "in %.3fs",
             dd, status, store_describe(cfg->restore.store), (long long)rr.revision, rr.base_name,
             rr.deltas_applied, out->restore_seconds);
    return 0;
fail:;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", err_msg());
    fs_scratch_dir_remove(side, what); /* ours: made above */
    return err_set(rc, "%s", msg);
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
            int rc = move_aside(dd, cfg->max_invalid_copies, data_dir_status_name(vr.status));
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
            rc = move_aside(dd, cfg->max_invalid_copies, data_dir_status_name(vr.status));
            if (rc) return rc;
        }
        snprintf(out->summary, sizeof out->summary,
                 "data dir %s was %s and the store %s has no full snapshot: etcd starts empty", dd,
                 data_dir_status_name(vr.status), store_describe(cfg->restore.store));
        return 0;
    }

    log_info("restoring data dir %s from %s (it is %s)", dd, store_describe(cfg->restore.store),
             data_dir_status_name(vr.status));
    return restore_beside(cfg, out, &vr);
}

int initializer_run(const InitConfig *cfg, InitResult *out) {
    /* validation, the has-a-full check and the restore share one listing of the store */
    if (cfg->restore.store) store_pin_listing(cfg->restore.store);
    int rc = run(cfg, out);
    if (cfg->restore.store) store_unpin_listing(cfg->restore.store);
    return rc;
}
