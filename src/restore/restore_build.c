/* restore_build: see restore_build.h. One builder streams the full snapshot's db and the
 * deltas, in order, into the new db while restore_fetch's threads fetch the next deltas. */
#include "restore_build.h"
#include "restore_stage.h"
#include "cluster.h"
#include "../codec/sha256.h"
#include "../common/array.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/i64map.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/timeutil.h"
#include "../format/bbolt.h"
#include "../format/bbolt_writer.h"
#include "../format/mvcc.h"
#include "../store/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- leases ----------
 * Lease IDs the full snapshot holds (known, with their TTL), those granted after it that the
 * deltas' puts use (added), and the TTLs the deltas record for leases (ttls: from any event up to
 * the target, applied or skipped as an overlap). 16 bytes a lease, about twice over. */

typedef struct {
    int64_t id, ttl;
} LeaseEnt;

static int lease_cmp(const void *a, const void *b) {
    uint64_t x = (uint64_t)((const LeaseEnt *)a)->id, y = (uint64_t)((const LeaseEnt *)b)->id;
    return x < y ? -1 : x > y;
}

/* ---------- the db builder ---------- */

typedef struct {
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
} Extra; /* an item that replaces or joins a bucket's items (sorted by key) */

typedef struct {
    const RestoreConfig *cfg;
    const RestoreBuildInput *in;
    BboltDb *src;
    BboltWriter *w;
    int64_t rev;                  /* revision of the last event written to the key bucket */
    int64_t sub;                  /* events written at rev: the next event's sub-revision */
    int64_t target;               /* last revision to write; INT64_MAX: everything */
    int reached;                  /* an event beyond target was seen: nothing more is written */
    I64Map *known, *added, *ttls; /* lease ID -> TTL (added: -> 0) */
    uint8_t *buf;                 /* marshaled KeyValue of the current event */
    size_t cap;
    RestoreResult *out;
    uint64_t ticks;      /* items written: stop and progress are checked every 4096 */
    int64_t next_log_ms; /* next progress line */
    int64_t start_ms;
    int64_t last_rev;                 /* the revision the deltas go up to (for progress) */
    char history[HISTORY_ID_LEN + 1]; /* of the last object applied ("" = untagged) */
    FsSpaceGuard space;               /* the db file's free-space reserve */
    /* the restored cluster's membership (memberdir.h), written into the db for a member dir of
     * ours; NULL when etcd's tool writes it (--etcdutl-bin) or for a db sink */
    const MemberDbItems *membership;
} Builder;

/* Every item: the db file's free-space reserve (statvfs every 8 MiB of pages, ERR_IO); every 4096
 * items: ERR_CANCELED when stopped, and a progress line every 5 s. */
static int builder_tick(Builder *b) {
    int rc = fs_space_guard_check(&b->space, bbolt_writer_pages(b->w) * 4096u);
    if (rc) return err_wrap(rc, "building the db");
    if (++b->ticks & 4095) return 0;
    if ((rc = restore_stopped(b->cfg->stop))) return rc;
    int64_t now = now_mono_ms();
    if (now < b->next_log_ms) return 0;
    b->next_log_ms = now + restore_progress_every_ms();
    double secs = (double)(now - b->start_ms) / 1000.0;
    double rate = secs > 0 ? (double)b->out->revisions_applied / secs : 0.0;
    if (b->out->revisions_applied)
        log_info("building the db: revision %lld of %lld, %llu revisions from deltas (%.0f/s, "
                 "ETA %.0fs)",
                 (long long)b->rev, (long long)b->last_rev,
                 (unsigned long long)b->out->revisions_applied, rate,
                 rate > 0 && b->last_rev > b->rev ? (double)(b->last_rev - b->rev) / rate : 0.0);
    else
        log_info("building the db: %llu items of the full snapshot copied (%.0f/s)",
                 (unsigned long long)b->ticks, secs > 0 ? (double)b->ticks / secs : 0.0);
    return 0;
}

#define BUCKET_MAX_DEPTH 16 /* nested buckets copied; etcd uses none */

static int name_is(const uint8_t *k, size_t n, const char *name) {
    return n == strlen(name) && memcmp(k, name, n) == 0;
}

/* Copies the bucket at path[0..depth) (the writer is inside it), merging extras (sorted by
 * key; an extra replaces a source item with the same key). */
static int copy_bucket(Builder *b, BboltName *path, size_t depth, const Extra *extras,
                       size_t n_extras) {
    BboltCursor *c = NULL;
    int rc = bbolt_cursor_open(b->src, path, depth, &c);
    size_t x = 0;
    while (!rc) {
        BboltItem it;
        int got = 0;
        if ((rc = bbolt_cursor_next(c, &it, &got))) break;
        while (x < n_extras &&
               (!got || bbolt_key_cmp(extras[x].key, extras[x].key_len, it.key, it.key_len) <= 0)) {
            int same =
                got && bbolt_key_cmp(extras[x].key, extras[x].key_len, it.key, it.key_len) == 0;
            rc = bbolt_writer_put(b->w, extras[x].key, extras[x].key_len, extras[x].value,
                                  extras[x].value_len);
            x++;
            if (rc) goto done;
            if (same) {
                if (it.is_bucket) {
                    rc = err_set(ERR_CORRUPT, "bucket %.*s: \"%.*s\" is a nested bucket",
                                 (int)path[depth - 1].len, (const char *)path[depth - 1].name,
                                 (int)it.key_len, (const char *)it.key);
                    goto done;
                }
                goto next_item;
            }
        }
        if (!got) break;
        if (it.is_bucket) {
            if (depth >= BUCKET_MAX_DEPTH) {
                rc = err_set(ERR_UNSUPPORTED, "buckets nested deeper than %d levels",
                             BUCKET_MAX_DEPTH);
                break;
            }
            path[depth] = (BboltName){it.key, it.key_len};
            if ((rc = bbolt_writer_begin_bucket(b->w, it.key, it.key_len))) break;
            if ((rc = copy_bucket(b, path, depth + 1, NULL, 0))) break;
            rc = bbolt_writer_end_bucket(b->w);
        } else {
            rc = bbolt_writer_put(b->w, it.key, it.key_len, it.value, it.value_len);
            if (!rc) rc = builder_tick(b);
        }
    next_item:;
    }
done:
    bbolt_cursor_close(c);
    if (rc == ERR_INVALID) { /* the writer refused what the source holds (e.g. key order) */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        rc = err_set(ERR_CORRUPT, "full snapshot: %s", msg);
    }
    return rc;
}

/* Reads the IDs (and TTLs) of the full snapshot's leases. */
static int read_known_leases(Builder *b) {
    BboltName path = {MVCC_BUCKET_LEASE, strlen(MVCC_BUCKET_LEASE)};
    BboltCursor *c = NULL;
    int rc = bbolt_cursor_open(b->src, &path, 1, &c);
    if (rc == ERR_NOT_FOUND) return 0; /* no lease was ever granted */
    while (!rc) {
        BboltItem it;
        int got = 0;
        if ((rc = bbolt_cursor_next(c, &it, &got)) || !got) break;
        int64_t id = 0, ttl = 0;
        if (it.is_bucket || (rc = mvcc_lease_unmarshal(it.value, it.value_len, &id, &ttl, NULL))) {
            rc =
                err_set(ERR_CORRUPT, "full snapshot: lease bucket item of %zu bytes is not a lease",
                        it.value_len);
            break;
        }
        if (id) rc = i64map_put(b->known, id, ttl);
    }
    bbolt_cursor_close(c);
    return rc;
}

/* Appends one delta event to the key bucket as etcd's mvcc store wrote it: revision key
 * {mod_revision, sub} (sub = the event's position in its revision), 't' for a delete; the value
 * a KeyValue (the whole event kv for a put; the key only for a delete). */
static int build_event(Builder *b, const DeltaEvent *ev, const char *object) {
    int64_t rev = ev->mod_revision, sub;
    if (rev == b->rev) {
        sub = b->sub;
    } else if (rev == b->rev + 1) {
        sub = 0;
        b->out->revisions_applied++;
    } else {
        return err_set(ERR_GAP, "%s: revision %lld follows revision %lld: revisions missing",
                       object, (long long)rev, (long long)b->rev);
    }
    int rc = delta_event_check(ev);
    if (rc) return err_wrap(rc, "%s", object);
    MvccKeyValue kv = {.key = ev->key, .key_len = ev->key_len};
    if (ev->type == ETCD_OP_PUT) {
        kv.value = ev->value;
        kv.value_len = ev->value_len;
        kv.create_revision = ev->create_revision;
        kv.mod_revision = rev;
        kv.version = ev->version;
        kv.lease = ev->lease;
    }
    rc = array_reserve_bytes(&b->buf, &b->cap, mvcc_kv_size(&kv), 256, "a revision's key value");
    if (rc) return rc;
    size_t n = mvcc_kv_marshal(&kv, b->buf);
    uint8_t k[MVCC_MARK_BYTES];
    size_t kl = mvcc_rev_key(rev, sub, ev->type == ETCD_OP_DELETE, k);
    rc = bbolt_writer_put(b->w, k, kl, b->buf, n);
    if (rc) return err_wrap(rc, "%s: revision %lld", object, (long long)rev);
    b->rev = rev;
    b->sub = sub + 1;
    b->out->events_applied++;
    if ((rc = builder_tick(b))) return rc;
    if (kv.lease && !i64map_get(b->known, kv.lease, NULL) && !i64map_get(b->added, kv.lease, NULL))
        rc = i64map_put(b->added, kv.lease, 0);
    return rc;
}

/* Appends the events of one delta with revisions after those already written, up to the
 * target. The whole delta is read, also past the target: its events must be what its name says
 * (delta_check_name_event), or nothing of it is trusted. */
typedef struct {
    Builder *b;
    int64_t skip_upto; /* the revision written before the delta */
    const char *object;
} ApplyCtx;

static int apply_event(void *ctx, const DeltaEvent *ev) {
    ApplyCtx *a = ctx;
    Builder *b = a->b;
    if (b->reached || ev->mod_revision > b->target) {
        b->reached = 1;
        return 0; /* beyond the target: only checked */
    }
    /* a recorded TTL counts even on an overlapping (skipped) event */
    int rc;
    if (ev->lease && ev->lease_ttl > 0 && (rc = i64map_put(b->ttls, ev->lease, ev->lease_ttl)))
        return rc;
    if (ev->mod_revision <= a->skip_upto) return 0; /* overlap: each revision once */
    return build_event(b, ev, a->object);
}

static int apply_delta(Builder *b, DeltaReader *dr, const Snapshot *snap) {
    ApplyCtx a = {b, b->rev, snap->key};
    return delta_reader_each(dr, snap->key, snap->start_revision, snap->last_revision, apply_event,
                             &a);
}

/* For --time: the revision before the first event of dr recorded after time_ns, found in a
 * first pass over the spool (then rewound). *found = 0 when every event is at or before it. */
static int find_time_cut(DeltaReader *dr, const Snapshot *snap, int64_t time_ns, int64_t *cut,
                         int *found) {
    *found = 0;
    for (;;) {
        DeltaEvent ev;
        int got = 0;
        int rc = delta_reader_next(dr, &ev, &got);
        if (rc) return err_wrap(rc, "%s", snap->key);
        if (!got) break;
        if (ev.time_ns > time_ns) {
            *cut = ev.mod_revision - 1;
            *found = 1;
            break;
        }
    }
    return delta_reader_rewind(dr);
}

/* Writes the key bucket: the full snapshot's items, then every delta revision up to the
 * target, then the bump revision. */
static int build_key_bucket(Builder *b, BboltName *path) {
    int rc = copy_bucket(b, path, 1, NULL, 0);
    if (rc) return err_wrap(rc, "copying the full snapshot's key bucket");
    const RestoreConfig *cfg = b->cfg;
    const RestoreBuildInput *in = b->in;
    for (size_t j = 0; j < in->n_deltas && !b->reached && b->rev < b->target; j++) {
        const Snapshot *snap = &in->deltas[j];
        DeltaReader *dr = NULL;
        if ((rc = restore_fetch_take(in->fetch, j, &dr))) return rc;
        /* a delta named after the point in time may hold events before it: find the cut */
        if (cfg->target_time_ns && (snap->created_on + 1) * 1000000000LL > cfg->target_time_ns) {
            int64_t cut = 0;
            int found = 0;
            rc = find_time_cut(dr, snap, cfg->target_time_ns, &cut, &found);
            if (!rc && found) b->target = cut > b->rev ? cut : b->rev;
        }
        if (!rc) rc = apply_delta(b, dr, snap);
        delta_reader_close(dr);
        if (rc) return rc;
        b->out->deltas_applied++;
        snprintf(b->history, sizeof b->history, "%s", snap->history);
        log_debug("applied %s: at revision %lld", snap->snap_name, (long long)b->rev);
        restore_fetch_done(in->fetch, j);
    }
    if (cfg->target_revision && b->rev != cfg->target_revision)
        return err_set(ERR_GAP, "the deltas end at revision %lld, before the target %lld",
                       (long long)b->rev, (long long)cfg->target_revision);
    if (cfg->bump_revision > 0) { /* as etcdutl's unsafeBumpRevision: an empty value */
        if ((rc = restorer_check_bump(b->rev, cfg->bump_revision))) return rc;
        uint8_t k[MVCC_MARK_BYTES];
        size_t kl = mvcc_rev_key(b->rev + cfg->bump_revision, 0, 0, k);
        if ((rc = bbolt_writer_put(b->w, k, kl, NULL, 0))) return rc;
    }
    return 0;
}

/* The lease bucket: the full snapshot's leases plus those granted after it. */
static int build_lease_bucket(Builder *b, BboltName *path, int in_source) {
    size_t n = i64map_count(b->added);
    LeaseEnt *sorted = calloc(n ? n : 1, sizeof *sorted);
    uint8_t *keys = calloc(n ? n : 1, 8 + MVCC_LEASE_MAX);
    Extra *ex = calloc(n ? n : 1, sizeof *ex);
    int rc = 0;
    if (!sorted || !keys || !ex) {
        rc = err_set(ERR_NOMEM, "out of memory for %zu leases", n);
        goto done;
    }
    size_t pos = 0, k = 0;
    int64_t id, unused;
    while (k < n && i64map_next(b->added, &pos, &id, &unused))
        sorted[k++] = (LeaseEnt){id, 0};
    qsort(sorted, k, sizeof *sorted, lease_cmp);
    size_t defaulted = 0;
    for (size_t i = 0; i < k; i++) {
        int64_t ttl = 0;
        if (!i64map_get(b->ttls, sorted[i].id, &ttl) || ttl <= 0) {
            ttl = b->cfg->new_lease_ttl;
            defaulted++;
            log_info("lease %016llx was granted after the full snapshot and its delta does not "
                     "record its TTL: created with --new-lease-ttl %llds",
                     (unsigned long long)sorted[i].id, (long long)ttl);
        }
        uint8_t *key = keys + i * (8 + MVCC_LEASE_MAX);
        mvcc_lease_key(sorted[i].id, key);
        ex[i] = (Extra){key, 8, key + 8, mvcc_lease_marshal(sorted[i].id, ttl, 0, key + 8)};
    }
    if (in_source) {
        rc = copy_bucket(b, path, 1, ex, k);
    } else {
        for (size_t i = 0; i < k && !rc; i++)
            rc = bbolt_writer_put(b->w, ex[i].key, ex[i].key_len, ex[i].value, ex[i].value_len);
    }
    b->out->leases_added = k;
    b->out->leases_defaulted = defaulted;
done:
    FREE_ALL(sorted, keys, ex);
    return rc;
}

/* The meta bucket: with --mark-compacted, scheduledCompactRev = the bumped revision; for a
 * member dir of ours, consistent_index and term as etcdutl's updateCIndex leaves them (extras in
 * key order: consistent_index < scheduledCompactRev < term). */
static int build_meta_bucket(Builder *b, BboltName *path, int in_source) {
    uint8_t v[MVCC_MARK_BYTES];
    Extra ex[3];
    size_t n = 0;
    const MemberDbItems *m = b->membership;
    if (m)
        ex[n++] = (Extra){(const uint8_t *)MEMBERDIR_META_CINDEX, strlen(MEMBERDIR_META_CINDEX),
                          m->cindex, 8};
    if (b->cfg->mark_compacted)
        ex[n++] = (Extra){(const uint8_t *)MVCC_META_SCHEDULED_COMPACT,
                          strlen(MVCC_META_SCHEDULED_COMPACT), v,
                          mvcc_rev_key(b->rev + b->cfg->bump_revision, 0, 0, v)};
    if (m)
        ex[n++] =
            (Extra){(const uint8_t *)MEMBERDIR_META_TERM, strlen(MEMBERDIR_META_TERM), m->term, 8};
    if (in_source) return copy_bucket(b, path, 1, ex, n);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = bbolt_writer_put(b->w, ex[i].key, ex[i].key_len, ex[i].value, ex[i].value_len);
    return rc;
}

/* The "members" bucket of a member dir of ours: the restored cluster's members only (etcdutl's
 * TrimMembershipFromBackend, then AddMember for each). */
static int build_members_bucket(Builder *b) {
    const MemberDbItems *m = b->membership;
    int rc = 0;
    for (size_t i = 0; i < m->n_members && !rc; i++)
        rc = bbolt_writer_put(b->w, m->members[i].key, m->members[i].key_len, m->members[i].value,
                              m->members[i].value_len);
    return rc;
}

/* The new history of a restore of a cluster of several members: every member's db must carry
 * the same one, also when each member is restored by its own run (the runbook's per-member
 * restore), or a sidecar on another member later would see a history it never forked. Derived
 * from what those runs share and a new cluster differs in: the history and revision restored, the
 * bump, and etcd's cluster ID of --initial-cluster with its token (cluster.h). 0 = a random id
 * is used (one member, or no parsable --initial-cluster). */
static int cluster_history_id(const Builder *b, char out[HISTORY_ID_LEN + 1]) {
    const RestoreConfig *c = b->cfg;
    if (!c->initial_cluster || !*c->initial_cluster) return 0;
    InitialCluster ic;
    if (initial_cluster_parse(c->initial_cluster,
                              c->initial_cluster_token ? c->initial_cluster_token : "", &ic))
        return 0;
    int several = ic.n > 1;
    uint64_t cid = ic.cluster_id;
    initial_cluster_free(&ic);
    if (!several) return 0;
    char text[256];
    int len = snprintf(text, sizeof text, "etcdbr restore mark|%s|%lld|%lld|%016llx", b->history,
                       (long long)b->rev, (long long)c->bump_revision, (unsigned long long)cid);
    Sha256 *h = sha256_new();
    if (!h) return 0;
    uint8_t d[SHA256_LEN];
    sha256_update(h, text, (size_t)len);
    sha256_final(h, d);
    sha256_free(h);
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    return 1;
}

/* The restore mark (history.h): which history and revision the db was restored from, so that
 * a snapshotter of the restored etcd continues or forks that history instead of refusing it. A
 * mark in the source db (restored before) is replaced. */
static int build_mark_bucket(Builder *b) {
    HistoryRestoreMark m = {.present = 1, .revision = b->rev, .time_s = now_unix_s()};
    snprintf(m.from_history, sizeof m.from_history, "%s", b->history);
    char json[512];
    int rc = cluster_history_id(b, m.new_history) ? 0 : history_new_id(m.new_history);
    if (!rc) rc = history_mark_format(&m, json, sizeof json);
    if (!rc)
        rc = bbolt_writer_put(b->w, (const uint8_t *)HISTORY_DB_KEY, strlen(HISTORY_DB_KEY),
                              (const uint8_t *)json, strlen(json));
    if (!rc) /* the operator's summary is the restorer's "restore done" line; this is for support */
        log_debug("the db records its origin (history.h): backups %s%s at revision %lld; the "
                  "sidecar of the restored etcd continues them, or backs up as history %s "
                  "when they moved on past this revision",
                  m.from_history[0] ? "of history " : "without a history tag", m.from_history,
                  (long long)m.revision, m.new_history);
    return rc;
}

/* A top-level bucket by name: key, lease and meta are built, the restore mark written, the
 * others copied. */
static int build_bucket(Builder *b, const uint8_t *name, size_t len, int in_source) {
    BboltName path[BUCKET_MAX_DEPTH + 1] = {{name, len}};
    int rc = bbolt_writer_begin_bucket(b->w, name, len);
    if (rc) return rc;
    if (name_is(name, len, MVCC_BUCKET_KEY))
        rc = build_key_bucket(b, path);
    else if (name_is(name, len, MVCC_BUCKET_LEASE))
        rc = build_lease_bucket(b, path, in_source);
    else if (name_is(name, len, MVCC_BUCKET_META))
        rc = build_meta_bucket(b, path, in_source);
    else if (b->membership && name_is(name, len, "members"))
        rc = build_members_bucket(b);
    else if (b->membership && name_is(name, len, "members_removed"))
        rc = 0; /* emptied */
    else if (name_is(name, len, HISTORY_DB_BUCKET) && !b->cfg->db_sink)
        rc = build_mark_bucket(b);
    else
        rc = copy_bucket(b, path, 1, NULL, 0);
    if (rc) return err_wrap(rc, "bucket %.*s", (int)len, (const char *)name);
    return bbolt_writer_end_bucket(b->w);
}

/* Buckets the result needs even when the full snapshot lacks them, in key order, and whether
 * this restore needs each: lease (leases added), meta (a mark or a member dir of ours),
 * the membership buckets (a member dir of ours: etcd's SetBackend creates them), the mark. */
static const char *const needed[] = {"cluster",         MVCC_BUCKET_LEASE, "members",
                                     "members_removed", MVCC_BUCKET_META,  HISTORY_DB_BUCKET};
#define N_NEEDED (sizeof needed / sizeof *needed)

static int bucket_wanted(const Builder *b, const char *nm) {
    if (strcmp(nm, MVCC_BUCKET_LEASE) == 0) return i64map_count(b->added) > 0;
    if (strcmp(nm, MVCC_BUCKET_META) == 0) return b->cfg->mark_compacted || b->membership;
    if (strcmp(nm, HISTORY_DB_BUCKET) == 0) return !b->cfg->db_sink;
    return b->membership != NULL;
}

/* Streams the full snapshot's db (src) into a new db at path with the deltas applied. */
static int build_db(Builder *b, const char *path) {
    int rc = read_known_leases(b);
    if (rc) return rc;
    b->out->leases_kept = i64map_count(b->known);
    if ((rc = bbolt_writer_open(path, 0, &b->w))) return rc;
    /* a db etcd's restore tool copies (and syncs) or a sink reads at once needs no sync; a
     * member dir's db is fsynced here */
    bbolt_writer_set_sync(b->w, b->membership != NULL);
    size_t next_needed = 0;
    BboltCursor *c = NULL;
    if ((rc = bbolt_cursor_open(b->src, NULL, 0, &c))) goto done;
    int saw_key = 0;
    for (;;) {
        BboltItem it;
        int got = 0;
        if ((rc = bbolt_cursor_next(c, &it, &got))) goto done;
        while (next_needed < N_NEEDED &&
               (!got || bbolt_key_cmp((const uint8_t *)needed[next_needed],
                                      strlen(needed[next_needed]), it.key, it.key_len) < 0)) {
            const char *nm = needed[next_needed++];
            if (bucket_wanted(b, nm) && (rc = build_bucket(b, (const uint8_t *)nm, strlen(nm), 0)))
                goto done;
        }
        if (!got) break;
        if (!it.is_bucket) {
            rc = err_set(ERR_CORRUPT, "full snapshot: a plain key in the root bucket");
            goto done;
        }
        for (size_t i = next_needed; i < N_NEEDED; i++)
            if (name_is(it.key, it.key_len, needed[i])) next_needed = i + 1;
        if (name_is(it.key, it.key_len, MVCC_BUCKET_KEY)) saw_key = 1;
        if ((rc = build_bucket(b, it.key, it.key_len, 1))) goto done;
    }
    if (!saw_key) {
        rc = err_set(ERR_CORRUPT, "full snapshot: no \"key\" bucket: not an etcd db");
        goto done;
    }
    rc = bbolt_writer_finish(b->w);
done:
    bbolt_cursor_close(c);
    b->out->db_bytes = b->w ? bbolt_writer_pages(b->w) * 4096u : 0;
    bbolt_writer_free(b->w);
    b->w = NULL;
    return rc;
}

/* The builder's start: at the full snapshot's revision, the lease maps empty. */
static int builder_init(Builder *b, const RestoreConfig *cfg, const RestoreBuildInput *in,
                        RestoreResult *out, char *db_dir) {
    int64_t now = now_mono_ms();
    memset(b, 0, sizeof *b);
    b->cfg = cfg;
    b->in = in;
    b->space = (FsSpaceGuard){db_dir, 0};
    b->membership = in->membership;
    b->out = out;
    b->start_ms = now;
    b->next_log_ms = now + restore_progress_every_ms();
    b->last_rev = in->last_revision;
    b->rev = in->base_revision;
    b->sub = INT64_MAX; /* nothing may continue the full snapshot's last revision */
    b->target = cfg->target_revision ? cfg->target_revision : INT64_MAX;
    snprintf(b->history, sizeof b->history, "%s", in->full->history);
    int rc;
    if ((rc = i64map_new(&b->known)) || (rc = i64map_new(&b->added)) || (rc = i64map_new(&b->ttls)))
        return rc;
    return bbolt_open(in->src_path, in->src_len, &b->src);
}

static void builder_free(Builder *b) {
    bbolt_close(b->src);
    free(b->buf);
    i64map_free(b->known);
    i64map_free(b->added);
    i64map_free(b->ttls);
}

int restore_build_db(const RestoreConfig *cfg, const RestoreBuildInput *in, RestoreResult *out,
                     int64_t *final_rev) {
    int64_t tb = now_mono_ms();
    char *db_dir = fs_dirname(in->db_path);
    if (!db_dir) return err_set(ERR_NOMEM, "out of memory");
    Builder b;
    int rc = builder_init(&b, cfg, in, out, db_dir);
    if (!rc) rc = build_db(&b, in->db_path);
    int64_t rev = b.rev;
    builder_free(&b);
    free(db_dir);
    if (rc) return rc;
    *final_rev = rev + (cfg->bump_revision > 0 ? cfg->bump_revision : 0);
    if (cfg->quota_bytes > 0 && out->db_bytes > (uint64_t)cfg->quota_bytes)
        log_warn("the restored db is %llu bytes, above --embedded-etcd-quota-bytes %lld: start "
                 "etcd with a --quota-backend-bytes at least that large",
                 (unsigned long long)out->db_bytes, (long long)cfg->quota_bytes);
    out->seconds_build = (double)(now_mono_ms() - tb) / 1000.0;
    log_info("db built: revision %lld (%llu revisions from %zu deltas on full snapshot revision "
             "%lld%s), %llu leases kept, %llu added (%llu with --new-lease-ttl), %.1f MiB in %.3fs",
             (long long)*final_rev, (unsigned long long)out->revisions_applied, out->deltas_applied,
             (long long)out->base_revision, cfg->bump_revision > 0 ? ", bumped" : "",
             (unsigned long long)out->leases_kept, (unsigned long long)out->leases_added,
             (unsigned long long)out->leases_defaulted, (double)out->db_bytes / 1048576.0,
             out->seconds_build);
    return 0;
}
