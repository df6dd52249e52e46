/* restore_plan: see restore_plan.h. */
#include "restore_plan.h"
#include "cluster.h"
#include "../common/err.h"
#include "../common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Leaves out of *n_list every unencrypted object sorted after the store's first encrypted one
 * (snapname_drop_plain_after_encrypted): from there on the store's history is encrypted, and a
 * plain object was written without the keys or planted by someone who has none. Each one left
 * out is named in a warning (the first LEFT_OUT_NAMED; then a count). */
#define LEFT_OUT_NAMED 20
static int leave_out_plain(Snapshot *list, size_t *n_list) {
    size_t kept = *n_list;
    int rc = snapname_drop_plain_after_encrypted(list, *n_list, &kept);
    if (rc) return rc;
    const char *first_enc = "?";
    for (size_t i = 0; i < kept; i++)
        if (list[i].encrypted && !list[i].is_chunk) {
            first_enc = list[i].key;
            break;
        }
    for (size_t i = kept; i < *n_list && i < kept + LEFT_OUT_NAMED; i++)
        log_warn("%s is not encrypted, but the store's history is encrypted from %s on: left out "
                 "of the restore (written without the encryption keys, or planted by someone "
                 "who has none; etcdbrctl verify reports it)",
                 list[i].key, first_enc);
    if (*n_list - kept > LEFT_OUT_NAMED)
        log_warn("%zu more unencrypted objects left out of the restore",
                 *n_list - kept - LEFT_OUT_NAMED);
    *n_list = kept;
    return 0;
}

/* With encryption keys given, says so for every object of the set that is not encrypted (a
 * store that turned encryption on later): it is restored unauthenticated. */
static void warn_plain_with_keys(Store *store, const Snapshot *full, const Snapshot *deltas,
                                 size_t n) {
    if (!store_keyring(store)) return;
    size_t plain = full->encrypted ? 0 : 1;
    for (size_t i = 0; i < n; i++)
        plain += !deltas[i].encrypted;
    if (plain)
        log_warn("encryption keys are given, but %zu object(s) of the set restored are not "
                 "encrypted (from %s: written before the store turned encryption on): they are "
                 "restored unauthenticated",
                 plain, full->encrypted ? deltas[0].key : full->key);
}

/* Says so when the store holds objects of other live histories than the restored set's: they
 * are never combined with it (snapname_set_at), but an operator should know they are there. */
static void warn_other_histories(const Snapshot *list, size_t n, const Snapshot *full) {
    const char *other = NULL;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (list[i].is_chunk || !list[i].history[0] || !full->history[0] ||
            strcmp(list[i].history, full->history) == 0)
            continue;
        other = list[i].history;
        count++;
    }
    if (other)
        log_warn("the store also holds %zu objects of other histories (e.g. %s); restoring "
                 "history %s only (docs/store-history.md)",
                 count, other, full->history);
}

/* Checks that the deltas continue the full snapshot without holes up to `upto` (names only).
 * Deltas that overlap (a copy of one under another time or suffix, or a cut that differs) are
 * warned about: each revision is taken from the first that holds it. */
static int check_contiguity(const Snapshot *full, const Snapshot *deltas, size_t n, int64_t upto) {
    int64_t next = full->last_revision + 1;
    const Snapshot *prev = full;
    for (size_t i = 0; i < n && next <= upto; i++) {
        if (deltas[i].start_revision > next)
            return err_set(ERR_GAP, "revisions %lld-%lld are missing between %s and %s",
                           (long long)next, (long long)(deltas[i].start_revision - 1), prev->key,
                           deltas[i].key);
        if (prev != full && deltas[i].start_revision < next)
            log_warn("deltas %s and %s overlap: revisions %lld-%lld are in both, and are taken "
                     "from the first (the other's copy of them is not compared)",
                     prev->key, deltas[i].key, (long long)deltas[i].start_revision,
                     (long long)(next - 1 < deltas[i].last_revision ? next - 1
                                                                    : deltas[i].last_revision));
        if (deltas[i].last_revision + 1 > next) {
            next = deltas[i].last_revision + 1;
            prev = &deltas[i];
        }
    }
    return 0;
}

/* The full snapshot of the set the target asks for, into *full_i (-1: none); its deltas'
 * indexes into delta_idx, *n_deltas. ERR_NOT_FOUND with a message naming what was looked for. */
static int choose_full(const RestoreTarget *t, const RestorePlan *p, ptrdiff_t *full_i,
                       size_t *delta_idx, size_t *n_deltas) {
    /* --time: a full snapshot named at second t was taken before t+1 */
    int64_t sec = t->time_ns / 1000000000LL;
    snapname_set_at(p->list, p->n_list, t->revision, t->time_ns ? sec - 1 : SNAPNAME_ANY_TIME,
                    full_i, delta_idx, n_deltas);
    if (*full_i < 0 && t->time_ns) { /* one taken within the second of the time */
        snapname_set_at(p->list, p->n_list, 0, sec, full_i, delta_idx, n_deltas);
        if (*full_i >= 0)
            log_warn("the only full snapshot before the target time was named in its second: "
                     "its revision may include writes up to a second after it");
    }
    if (*full_i >= 0) return 0;
    if (t->revision || t->time_ns)
        return err_set(ERR_NOT_FOUND,
                       "no full snapshot in store %s at or before the target %s (%zu snapshot "
                       "objects)",
                       store_describe(t->store), t->revision ? "revision" : "time", p->n_list);
    return err_set(ERR_NOT_FOUND,
                   "no full snapshot in store %s (%zu snapshot objects, %zu of them deltas; "
                   "snapshots are looked for under <container>/<store-prefix>/v2/ and v1/: check "
                   "--store-container and --store-prefix)",
                   store_describe(t->store), p->n_list, *n_deltas);
}

/* The oldest full snapshot after p->full of its history (or untagged, as the Go tool's are),
 * into p->next_full (NULL if none): revisions from it on are its set's. */
static void find_next_full(RestorePlan *p) {
    const Snapshot *full = p->full;
    p->next_full = NULL;
    for (size_t i = 0; i < p->n_list; i++) {
        const Snapshot *s = &p->list[i];
        if (s->is_chunk || s->kind != SNAP_FULL || s->last_revision <= full->last_revision)
            continue;
        if (s->history[0] && full->history[0] && strcmp(s->history, full->history) != 0) continue;
        if (!p->next_full || s->last_revision < p->next_full->last_revision) p->next_full = s;
    }
}

/* The deltas of the set (delta_idx into p->list) after the full snapshot, up to the target and
 * to the next full snapshot (a delta starting after it is the next set's, which a time target
 * before that full snapshot never reaches), copied into p->deltas. A time target in the second
 * the next full snapshot is named in may be after it (names are whole seconds): then the deltas
 * that continue ours without a gap past it are taken too, their events filtered by time. */
static int take_deltas(const RestoreTarget *t, RestorePlan *p, const size_t *delta_idx, size_t n) {
    p->deltas = calloc(n ? n : 1, sizeof *p->deltas);
    if (!p->deltas) return err_set(ERR_NOMEM, "out of memory");
    int64_t end = p->next_full ? p->next_full->last_revision : INT64_MAX;
    int past_next =
        p->next_full && t->time_ns > 0 && p->next_full->created_on == t->time_ns / 1000000000LL;
    int64_t reached = p->full->last_revision;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const Snapshot *d = &p->list[delta_idx[i]];
        if (d->last_revision <= p->full->last_revision) continue; /* inside the full snapshot */
        if (t->revision && d->start_revision > t->revision) break;
        if (d->start_revision > end && !(past_next && d->start_revision <= reached + 1)) break;
        p->deltas[kept++] = *d;
        if (d->last_revision > reached) reached = d->last_revision;
    }
    p->n_deltas = kept;
    return 0;
}

/* The target is past the set's last revision: refused, naming where the backups end. */
static int refuse_beyond(const RestoreTarget *t, RestorePlan *p) {
    const Snapshot *last = p->n_deltas ? &p->deltas[p->n_deltas - 1] : p->full;
    p->target_refused = 1;
    if (p->next_full && t->revision < p->next_full->last_revision)
        return err_set(ERR_INVALID,
                       "target revision %lld is in no delta: the set of %s ends at revision %lld "
                       "(%s) and the next full snapshot, %s, is at revision %lld; restore to "
                       "either, or read revision %lld with etcdbrctl get (docs/inspect.md)",
                       (long long)t->revision, p->full->key, (long long)p->store_last, last->key,
                       p->next_full->key, (long long)p->next_full->last_revision,
                       (long long)t->revision);
    return err_set(ERR_INVALID,
                   "target revision %lld is beyond the store's backups, which end at revision %lld",
                   (long long)t->revision, (long long)p->store_last);
}

/* A time target after the set's last object, when the next full snapshot is later still: the
 * revisions between them are in no delta, so the restore ends at the set's last revision. */
static void warn_time_in_gap(const RestoreTarget *t, const RestorePlan *p) {
    const Snapshot *last = p->n_deltas ? &p->deltas[p->n_deltas - 1] : p->full;
    if (!t->time_ns || !p->next_full || p->store_last >= p->next_full->last_revision) return;
    if (last->created_on > t->time_ns / 1000000000LL) return;
    log_warn("the target time is after %s, the last object of the set of %s (revision %lld); "
             "revisions %lld-%lld are in no delta, only in the next full snapshot %s, named in "
             "or after the target time's second (names are whole seconds, so it counts as after "
             "it): restoring revision %lld, the last one recorded before it",
             last->key, p->full->key, (long long)p->store_last, (long long)(p->store_last + 1),
             (long long)p->next_full->last_revision, p->next_full->key, (long long)p->store_last);
}

int restore_plan_make(const RestoreTarget *t, RestorePlan *p) {
    memset(p, 0, sizeof *p);
    int rc = store_list(t->store, &p->list, &p->n_list);
    if (!rc) rc = leave_out_plain(p->list, &p->n_list);
    if (rc) return rc;
    size_t *delta_idx = calloc(p->n_list ? p->n_list : 1, sizeof *delta_idx);
    if (!delta_idx) return err_set(ERR_NOMEM, "out of memory");
    ptrdiff_t full_i;
    size_t n_idx = 0;
    rc = choose_full(t, p, &full_i, delta_idx, &n_idx);
    if (!rc) {
        p->full = &p->list[full_i];
        warn_other_histories(p->list, p->n_list, p->full);
        find_next_full(p);
        rc = take_deltas(t, p, delta_idx, n_idx);
    }
    free(delta_idx);
    if (rc) return rc;
    const Snapshot *full = p->full;
    warn_plain_with_keys(t->store, full, p->deltas, p->n_deltas);
    int64_t last = p->n_deltas ? p->deltas[p->n_deltas - 1].last_revision : full->last_revision;
    p->store_last = last < full->last_revision ? full->last_revision : last;
    if ((rc = restorer_check_bump(t->revision ? t->revision : p->store_last, t->bump))) {
        p->target_refused = 1;
        return rc;
    }
    if (t->revision > p->store_last) return refuse_beyond(t, p);
    warn_time_in_gap(t, p);
    return check_contiguity(full, p->deltas, p->n_deltas, t->revision ? t->revision : INT64_MAX);
}

void restore_plan_free(RestorePlan *p) {
    if (!p) return;
    free(p->deltas);
    free(p->list);
    memset(p, 0, sizeof *p);
}

int restore_plan_check_token(BboltDb *db, const RestoreMember *ms, size_t nm, const char *token,
                             int mode, int *refused) {
    for (size_t i = 0; mode && i < nm; i++) {
        uint64_t id = cluster_member_id(ms[i].peer_urls, token);
        char key[17];
        int kl = snprintf(key, sizeof key, "%llx", (unsigned long long)id);
        if (bbolt_get(db, "members", key, (size_t)kl, NULL, 0, NULL) != 0) continue;
        const char *what =
            "member %s would get ID %s, a member ID of the backed-up cluster: "
            "--initial-cluster-token \"%s\" and its peer URLs are the old cluster's, so a "
            "member of the old cluster could talk to the restored one as its own. Give the "
            "restored cluster a new token (e.g. --initial-cluster-token=%s-restored-YYYYMMDD), "
            "the same on every member and in every member's etcd flags";
        if (mode >= 2) {
            *refused = 1;
            return err_set(ERR_INVALID, what, ms[i].name, key, token, token);
        }
        log_warn(what, ms[i].name, key, token, token);
        return 0;
    }
    return 0;
}
