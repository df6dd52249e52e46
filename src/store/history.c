/* history: see history.h. Records and restore marks are small JSON documents (jansson); the
 * decision is pure so that unit tests can walk its table (tests/unit/test_history.c). */
#include "history.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/names.h"
#include "../format/bbolt.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int history_id_valid(const char *s) {
    if (!s || strlen(s) != HISTORY_ID_LEN) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

int history_new_id(char out[HISTORY_ID_LEN + 1]) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        return err_set(ERR_IO, "getrandom: cannot make a history id");
    snprintf(out, HISTORY_ID_LEN + 1, "%016llx", (unsigned long long)v);
    return 0;
}

static void hex64(uint64_t v, char out[17]) {
    snprintf(out, 17, "%016llx", (unsigned long long)v);
}

/* 1-16 hex digits exactly (no sign, blank or 0x prefix, which strtoull would take). */
static int parse_hex64(const char *s, uint64_t *out) {
    if (!s || !*s || strlen(s) > 16) return -1;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        int d = *p >= '0' && *p <= '9'   ? *p - '0'
                : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                         : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

int history_record_format(const HistoryRecord *r, char **out, size_t *len) {
    char cid[17], mid[17];
    hex64(r->cluster_id, cid);
    hex64(r->member_id, mid);
    json_t *ab = json_array();
    for (size_t i = 0; ab && i < r->n_abandons; i++)
        json_array_append_new(ab, json_pack("{s:s,s:I}", "history", r->abandons[i].history,
                                            "after_revision",
                                            (json_int_t)r->abandons[i].after_revision));
    json_t *o =
        json_pack("{s:i,s:s,s:s,s:s,s:I,s:s,s:b,s:o}", "format", 1, "history", r->id, "cluster_id",
                  cid, "member_id", mid, "created", (json_int_t)r->created_s, "reason", r->reason,
                  "adopts_untagged", r->adopts_untagged, "abandons", ab);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    if (!s) return err_set(ERR_NOMEM, "history record: out of memory");
    *out = s;
    *len = strlen(s);
    return 0;
}

int history_record_parse(const char *json, size_t len, HistoryRecord *out) {
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *o = json_loadb(json, len, 0, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return err_set(ERR_CORRUPT, "history record: not a JSON object (%s)", je.text);
    }
    int rc = 0;
    const char *id = json_string_value(json_object_get(o, "history"));
    const char *cid = json_string_value(json_object_get(o, "cluster_id"));
    const char *mid = json_string_value(json_object_get(o, "member_id"));
    const char *reason = json_string_value(json_object_get(o, "reason"));
    json_t *ab = json_object_get(o, "abandons");
    if (!history_id_valid(id) || parse_hex64(cid, &out->cluster_id) ||
        parse_hex64(mid ? mid : "0", &out->member_id) || (ab && !json_is_array(ab))) {
        rc = err_set(ERR_CORRUPT, "history record: missing or malformed history or cluster_id");
        goto done;
    }
    snprintf(out->id, sizeof out->id, "%s", id);
    snprintf(out->reason, sizeof out->reason, "%s", reason ? reason : "");
    out->created_s = (int64_t)json_integer_value(json_object_get(o, "created"));
    out->adopts_untagged = json_is_true(json_object_get(o, "adopts_untagged"));
    size_t n = ab ? json_array_size(ab) : 0;
    if (n > HISTORY_MAX_ABANDONS) {
        rc = err_set(ERR_CORRUPT, "history record: %zu abandoned histories, at most %d", n,
                     HISTORY_MAX_ABANDONS);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(ab, i);
        const char *h = json_string_value(json_object_get(e, "history"));
        json_t *r = json_object_get(e, "after_revision");
        if (!h || (h[0] && !history_id_valid(h)) || !json_is_integer(r)) {
            rc = err_set(ERR_CORRUPT, "history record: malformed abandons[%zu]", i);
            goto done;
        }
        snprintf(out->abandons[i].history, sizeof out->abandons[i].history, "%s", h);
        out->abandons[i].after_revision = (int64_t)json_integer_value(r);
    }
    out->n_abandons = n;
done:
    json_decref(o);
    return rc;
}

int history_mark_format(const HistoryRestoreMark *m, char *out, size_t cap) {
    int n = snprintf(out, cap,
                     "{\"from_history\":\"%s\",\"new_history\":\"%s\",\"revision\":%lld,"
                     "\"time\":%lld}",
                     m->from_history, m->new_history, (long long)m->revision, (long long)m->time_s);
    if (n < 0 || (size_t)n >= cap) return err_set(ERR_INVALID, "restore mark: buffer too small");
    return 0;
}

int history_mark_parse(const char *json, size_t len, HistoryRestoreMark *out) {
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *o = json_loadb(json, len, 0, &je);
    const char *from = json_string_value(json_object_get(o, "from_history"));
    const char *nh = json_string_value(json_object_get(o, "new_history"));
    json_t *rev = json_object_get(o, "revision");
    json_t *t = json_object_get(o, "time");
    int ok = o && from && (!from[0] || history_id_valid(from)) && history_id_valid(nh) &&
             json_is_integer(rev) && json_is_integer(t);
    if (ok) {
        snprintf(out->from_history, sizeof out->from_history, "%s", from);
        snprintf(out->new_history, sizeof out->new_history, "%s", nh);
        out->revision = (int64_t)json_integer_value(rev);
        out->time_s = (int64_t)json_integer_value(t);
        out->present = 1;
    }
    json_decref(o);
    return ok ? 0 : err_set(ERR_CORRUPT, "restore mark in the db is malformed");
}

int history_mark_from_db_value(const char *val, size_t len, HistoryRestoreMark *out) {
    memset(out, 0, sizeof *out);
    if (len >= 1024) return err_set(ERR_CORRUPT, "restore mark in the db is too long");
    if (history_mark_parse(val, len, out) != 0) {
        log_warn("%s: ignored", err_msg());
        memset(out, 0, sizeof *out);
    }
    return 0;
}

int history_mark_read_db(const char *path, uint64_t size, HistoryRestoreMark *out) {
    memset(out, 0, sizeof *out);
    BboltDb *db = NULL;
    int rc = bbolt_open(path, size, &db);
    if (rc) return rc;
    char buf[1024];
    size_t vlen = 0;
    rc = bbolt_get(db, HISTORY_DB_BUCKET, HISTORY_DB_KEY, strlen(HISTORY_DB_KEY), buf,
                   sizeof buf - 1, &vlen);
    bbolt_close(db);
    if (rc == ERR_NOT_FOUND) return 0;
    if (rc) return rc;
    return history_mark_from_db_value(buf, vlen, out);
}

const HistoryRecord *history_find(const HistoryRecord *recs, size_t n, const char *id) {
    for (size_t i = 0; id && id[0] && i < n; i++)
        if (strcmp(recs[i].id, id) == 0) return &recs[i];
    return NULL;
}

static int tag_cmp(const void *a, const void *b) {
    const HistoryTag *x = *(const HistoryTag *const *)a, *y = *(const HistoryTag *const *)b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->history, y->history);
}

void history_annotate(Snapshot *snaps, size_t n, const HistoryTag *tag_list, size_t n_tags,
                      HistoryRecord *recs, size_t n_recs) {
    const HistoryTag **tags = n_tags ? malloc(n_tags * sizeof *tags) : NULL;
    size_t nt = 0;
    for (size_t i = 0; tags && i < n_tags; i++)
        tags[nt++] = &tag_list[i];
    if (nt) qsort(tags, nt, sizeof *tags, tag_cmp);
    for (size_t i = 0; i < n; i++) {
        Snapshot *s = &snaps[i];
        s->history[0] = '\0';
        s->abandoned = 0;
        if (s->version != 2 || !nt) continue;
        char name[sizeof s->snap_name];
        snprintf(name, sizeof name, "%s", s->snap_name);
        char *slash = strchr(name, '/'); /* a chunk: its parent's tag */
        if (slash) *slash = '\0';
        size_t lo = 0, hi = nt;
        while (lo < hi) { /* first tag with name >= key */
            size_t mid = (lo + hi) / 2;
            if (strcmp(tags[mid]->name, name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nt && strcmp(tags[lo]->name, name) == 0) {
            snprintf(s->history, sizeof s->history, "%s", tags[lo]->history);
            if (lo + 1 < nt && strcmp(tags[lo + 1]->name, name) == 0 && !s->is_chunk)
                log_warn("snapshot %s is tagged by two histories (%s and %s); counted as %s",
                         s->key, tags[lo]->history, tags[lo + 1]->history, tags[lo]->history);
        }
    }
    free((void *)tags);
    for (size_t j = 0; j < n_recs; j++) {
        recs[j].effective = 0;
        for (size_t i = 0; i < n && !recs[j].effective; i++)
            if (!snaps[i].is_chunk && strcmp(snaps[i].history, recs[j].id) == 0)
                recs[j].effective = 1;
    }
    for (size_t i = 0; i < n; i++) {
        Snapshot *s = &snaps[i];
        for (size_t j = 0; j < n_recs && !s->abandoned; j++) {
            if (!recs[j].effective || strcmp(recs[j].id, s->history) == 0) continue;
            for (size_t k = 0; k < recs[j].n_abandons; k++) {
                const HistoryAbandon *a = &recs[j].abandons[k];
                if (strcmp(a->history, s->history) == 0 && s->last_revision > a->after_revision) {
                    s->abandoned = 1;
                    break;
                }
            }
        }
    }
}

const char *history_action_name(HistoryAction a) {
    static const char *const names[] = {
        [HISTORY_NEW] = "new",       [HISTORY_CONTINUE] = "continue", [HISTORY_ADOPT] = "adopt",
        [HISTORY_FORK] = "fork",     [HISTORY_TAKEOVER] = "takeover", [HISTORY_NEED_DB] = "need-db",
        [HISTORY_REFUSE] = "refuse",
    };
    return NAME_AT(names, a, "?");
}

static void new_record(HistoryDecision *d, const char *id, uint64_t cluster_id, uint64_t member_id,
                       int64_t now, const char *reason) {
    d->write_record = 1;
    snprintf(d->history, sizeof d->history, "%s", id);
    HistoryRecord *r = &d->record;
    memset(r, 0, sizeof *r);
    snprintf(r->id, sizeof r->id, "%s", id);
    r->cluster_id = cluster_id;
    r->member_id = member_id;
    r->created_s = now;
    snprintf(r->reason, sizeof r->reason, "%s", reason);
}

static void describe_history(const char *h, const HistoryRecord *rec, char *out, size_t cap) {
    if (!h[0])
        snprintf(out, cap, "untagged backups (the Go tool's, or etcdbr's before histories)");
    else if (rec)
        snprintf(out, cap, "history %s of etcd cluster %016llx", h,
                 (unsigned long long)rec->cluster_id);
    else
        snprintf(out, cap, "history %s (no record)", h);
}

/* The latest set of a listing as a restore takes it (snapname_latest_set): its newest object and
 * the histories it is made of (its full snapshot's and its deltas'; an untagged full continued by
 * an adopting history has two, "" and the adopter's). */
typedef struct {
    ptrdiff_t last, fi; /* newest object, full snapshot (-1: none) */
    char line[HISTORY_MAX_ABANDONS][HISTORY_ID_LEN + 1];
    size_t n_line;
} LatestLine;

static void latest_line(const Snapshot *snaps, size_t n, LatestLine *l) {
    memset(l, 0, sizeof *l);
    l->last = l->fi = -1;
    size_t nd = 0;
    size_t *idx = n ? malloc(n * sizeof *idx) : NULL;
    if (idx) snapname_latest_set(snaps, n, &l->fi, idx, &nd);
    if (l->fi >= 0) l->last = nd ? (ptrdiff_t)idx[nd - 1] : l->fi;
    for (size_t i = n; l->last < 0 && i-- > 0;) /* no full snapshot (or no memory): newest */
        if (!snaps[i].is_chunk && !snaps[i].abandoned) l->last = (ptrdiff_t)i;
    for (size_t k = 0; l->fi >= 0 && idx && k <= nd; k++) {
        const char *hk = k == 0 ? snaps[l->fi].history : snaps[idx[k - 1]].history;
        int seen = 0;
        for (size_t j = 0; j < l->n_line && !seen; j++)
            seen = strcmp(l->line[j], hk) == 0;
        if (!seen && l->n_line < HISTORY_MAX_ABANDONS)
            snprintf(l->line[l->n_line++], sizeof l->line[0], "%s", hk);
    }
    free(idx);
}

/* What history_decide weighs, gathered once. */
typedef struct {
    const Snapshot *snaps;
    size_t n;
    const Snapshot *ls; /* the newest object of the latest set */
    const HistoryRecord *rec;
    uint64_t cluster_id, member_id;
    int64_t etcd_revision, now;
    const HistoryRestoreMark *mark;
    char who[256]; /* the latest history in words */
} Decide;

/* A restore mark from the latest line (and not yet forked): etcd's db was restored from it, so
 * its objects stored before the restore and after the restored revision belong to an abandoned
 * line. 1 (out set to HISTORY_FORK) when such objects exist or the line cannot continue. */
static int decide_fork(const Decide *d, const LatestLine *l, HistoryDecision *out) {
    const HistoryRestoreMark *mark = d->mark;
    int from_line = 0, new_in_line = 0;
    for (size_t j = 0; mark && mark->present && j < l->n_line; j++) {
        from_line |= strcmp(mark->from_history, l->line[j]) == 0;
        new_in_line |= strcmp(mark->new_history, l->line[j]) == 0;
    }
    if (!from_line || new_in_line) return 0;
    int abandoned_exist = 0;
    for (size_t i = 0; i < d->n && !abandoned_exist; i++) {
        const Snapshot *s = &d->snaps[i];
        if (s->abandoned || s->last_revision <= mark->revision || s->created_on > mark->time_s)
            continue;
        for (size_t j = 0; j < l->n_line && !abandoned_exist; j++)
            abandoned_exist = strcmp(s->history, l->line[j]) == 0;
    }
    int other_cluster = d->rec && d->rec->cluster_id && d->rec->cluster_id != d->cluster_id;
    if (!abandoned_exist && !other_cluster && d->ls->last_revision <= d->etcd_revision) return 0;
    new_record(out, mark->new_history, d->cluster_id, d->member_id, d->now, "fork");
    out->action = HISTORY_FORK;
    for (size_t j = 0; j < l->n_line; j++) {
        HistoryAbandon *a = &out->record.abandons[out->record.n_abandons++];
        memcpy(a->history, l->line[j], sizeof a->history);
        a->after_revision = mark->revision;
        if (!l->line[j][0]) out->record.adopts_untagged = 1;
    }
    snprintf(out->why, sizeof out->why,
             "etcd was restored from %s at revision %lld; its backups after that revision are "
             "abandoned (kept, never restored or collected) and new ones go to history %s",
             d->who, (long long)mark->revision, mark->new_history);
    return 1;
}

/* The latest backups are not this etcd's (conflict, in words): take over (every live history
 * abandoned), refuse, or ask for the db. */
static void decide_conflict(const Decide *d, const char *conflict, int takeover,
                            HistoryDecision *out) {
    if (takeover) {
        out->action = HISTORY_TAKEOVER;
        new_record(out, "", d->cluster_id, d->member_id, d->now, "takeover");
        for (size_t i = 0; i < d->n; i++) { /* every live history: theirs all go */
            const Snapshot *s = &d->snaps[i];
            if (s->is_chunk || s->abandoned) continue;
            int seen = 0;
            for (size_t k = 0; k < out->record.n_abandons && !seen; k++)
                seen = strcmp(out->record.abandons[k].history, s->history) == 0;
            if (seen || out->record.n_abandons == HISTORY_MAX_ABANDONS) continue;
            HistoryAbandon *a = &out->record.abandons[out->record.n_abandons++];
            snprintf(a->history, sizeof a->history, "%s", s->history);
            a->after_revision = 0;
        }
        snprintf(out->why, sizeof out->why,
                 "%s; --abandon-other-histories: a new history starts and every earlier backup "
                 "in the store is abandoned (kept, never restored or collected)",
                 conflict);
        return;
    }
    out->action = d->mark ? HISTORY_REFUSE : HISTORY_NEED_DB;
    if (!d->mark) {
        snprintf(out->why, sizeof out->why, "%s", conflict);
        return;
    }
    snprintf(out->why, sizeof out->why,
             "%s. Refusing to write into this store: restores would mix the two. Back up into a "
             "new --store-prefix, or restart with --abandon-other-histories to keep the other "
             "backups aside and start a new history (docs/store-history.md)",
             conflict);
}

void history_decide(const Snapshot *snaps, size_t n, const HistoryRecord *recs, size_t n_recs,
                    uint64_t cluster_id, uint64_t member_id, int64_t etcd_revision,
                    const HistoryRestoreMark *mark, int takeover, int64_t now,
                    HistoryDecision *out) {
    memset(out, 0, sizeof *out);
    LatestLine l;
    latest_line(snaps, n, &l);
    if (l.last < 0) {
        out->action = HISTORY_NEW;
        new_record(out, "", cluster_id, member_id, now, "new");
        snprintf(out->why, sizeof out->why, "the store holds no backups");
        return;
    }
    Decide d = {snaps,         n,   &snaps[l.last], NULL, cluster_id, member_id,
                etcd_revision, now, mark,           ""};
    const char *h = l.fi >= 0 && snaps[l.fi].history[0] ? snaps[l.fi].history : d.ls->history;
    d.rec = history_find(recs, n_recs, h);
    snprintf(out->latest_history, sizeof out->latest_history, "%s", h);
    out->latest_revision = d.ls->last_revision;
    describe_history(h, d.rec, d.who, sizeof d.who);
    if (l.n_line == 0) snprintf(l.line[l.n_line++], sizeof l.line[0], "%s", h);
    if (decide_fork(&d, &l, out)) return;
    char conflict[512] = "";
    if (d.rec && d.rec->cluster_id && d.rec->cluster_id != cluster_id)
        snprintf(conflict, sizeof conflict,
                 "the store's latest backups (%s, up to revision %lld) belong to another etcd "
                 "cluster than this one (cluster %016llx)",
                 d.who, (long long)d.ls->last_revision, (unsigned long long)cluster_id);
    else if (d.ls->last_revision > etcd_revision)
        snprintf(conflict, sizeof conflict,
                 "the store's latest backups (%s) end at revision %lld, after etcd's current "
                 "revision %lld (cluster %016llx): etcd is another cluster, an older copy, or "
                 "was restored by a tool that did not record it",
                 d.who, (long long)d.ls->last_revision, (long long)etcd_revision,
                 (unsigned long long)cluster_id);
    if (conflict[0]) {
        decide_conflict(&d, conflict, takeover, out);
    } else if (!h[0]) {
        out->action = HISTORY_ADOPT;
        new_record(out, "", cluster_id, member_id, now, "adopt");
        out->record.adopts_untagged = 1;
        snprintf(out->why, sizeof out->why,
                 "the store's latest backups are untagged (up to revision %lld): a new history "
                 "continues them",
                 (long long)d.ls->last_revision);
    } else {
        out->action = HISTORY_CONTINUE;
        snprintf(out->history, sizeof out->history, "%s", h);
        snprintf(out->why, sizeof out->why, "continuing %s (up to revision %lld)", d.who,
                 (long long)d.ls->last_revision);
    }
}
