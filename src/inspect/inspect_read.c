/* inspect_read: see inspect_read.h. */
#include "inspect_read.h"
#include "../backup/delta.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../format/bbolt.h"
#include "../format/mvcc.h"
#include "../restore/fetch_cache.h"
#include "../restore/restore_fetch.h"
#include "../restore/restore_plan.h"
#include "../restore/restore_stage.h"
#include "../common/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The state of one pass: a full snapshot and its deltas, for the views of mask. */
typedef struct Pass {
    const InspectConfig *c;
    RecSort *sort;
    InspectResult *out;
    const RestorePlan *plan;
    unsigned mask;                   /* the views this pass serves */
    int64_t upto[INSPECT_MAX_VIEWS]; /* a view's last revision so far */
    int done[INSPECT_MAX_VIEWS];     /* the view has all its revisions */
    int64_t rev, sub;                /* the last revision taken, and the next sub-revision */
    uint32_t object;                 /* index of the object being read */
    const Snapshot *delta;           /* the delta being read */
    int64_t delta_before;            /* the last revision taken before it */
} Pass;

static int add_object(InspectResult *out, const Snapshot *s, uint32_t *idx) {
    Snapshot *p = realloc(out->objects, (out->n_objects + 1) * sizeof *p);
    if (!p) return err_set(ERR_NOMEM, "out of memory");
    out->objects = p;
    p[out->n_objects] = *s;
    *idx = (uint32_t)out->n_objects++;
    return 0;
}

/* The views a record at revision rev (received at time_ns, 0 = in the full snapshot) belongs
 * to, moving each view on; a view reaches its end at a revision beyond it or, for a time, at
 * the first revision received after it. */
static unsigned views_of(Pass *p, int64_t rev, int64_t time_ns) {
    unsigned bits = 0;
    for (size_t v = 0; v < p->c->n_views; v++) {
        const InspectView *w = &p->c->views[v];
        if (!(p->mask & (1u << v)) || p->done[v]) continue;
        if ((w->revision && rev > w->revision) ||
            (w->time_ns && time_ns && rev > p->upto[v] && time_ns > w->time_ns)) {
            p->done[v] = 1;
            continue;
        }
        p->upto[v] = rev;
        bits |= 1u << v;
    }
    return bits;
}

static int add_record(Pass *p, InspectRec *h, const uint8_t *key, const uint8_t *value) {
    if (!keyrange_has(p->c->range, key, h->key_len)) return 0;
    h->object = p->object;
    if (!p->c->keep_values) h->value_len = 0;
    p->out->records++;
    return recsort_add(p->sort, h, key, value);
}

/* The compaction revision of db (etcd's meta bucket: the larger of the finished and the
 * scheduled one, as etcd takes it when it opens the db), 0 when never compacted. */
static int db_compacted_at(BboltDb *db, int64_t *out) {
    const char *names[] = {MVCC_META_FINISHED_COMPACT, MVCC_META_SCHEDULED_COMPACT};
    *out = 0;
    for (size_t i = 0; i < 2; i++) {
        uint8_t v[MVCC_MARK_BYTES];
        size_t vl = 0;
        int rc = bbolt_get(db, MVCC_BUCKET_META, names[i], strlen(names[i]), v, sizeof v, &vl);
        if (rc == ERR_NOT_FOUND) continue;
        int64_t rev = 0;
        if (!rc) rc = vl <= sizeof v ? mvcc_rev_parse(v, vl, &rev, NULL, NULL) : ERR_CORRUPT;
        if (rc) return err_set(ERR_CORRUPT, "the db's %s is not a revision", names[i]);
        if (rev > *out) *out = rev;
    }
    return 0;
}

/* A view inside the full snapshot (its revision below the db's) needs the db to hold that
 * revision: etcd answers no revision below its compaction. */
static int check_compaction(Pass *p, BboltDb *db, int64_t db_rev) {
    int64_t compacted = 0;
    int rc = db_compacted_at(db, &compacted);
    for (size_t v = 0; !rc && v < p->c->n_views; v++) {
        int64_t r = p->c->views[v].revision;
        if (!(p->mask & (1u << v)) || !r || r >= db_rev || r >= compacted) continue;
        p->out->target_refused = 1;
        return err_set(ERR_INVALID,
                       "revision %lld is not in the backups: the oldest full snapshot after it, "
                       "%s, was compacted at revision %lld and holds no state before it",
                       (long long)r, p->plan->full->key, (long long)compacted);
    }
    return rc;
}

/* Whether every view of the pass has all its revisions. */
static int pass_done(const Pass *p) {
    for (size_t v = 0; v < p->c->n_views; v++)
        if ((p->mask & (1u << v)) && !p->done[v]) return 0;
    return 1;
}

/* The full snapshot's "key" bucket in revision order, up to the last revision a view asks. */
static int read_full_db(Pass *p, const RestoreFullDb *full) {
    BboltDb *db = NULL;
    BboltCursor *cur = NULL;
    int rc = bbolt_open(full->path, full->db_len, &db);
    if (!rc) rc = check_compaction(p, db, full->revision);
    BboltName path = {MVCC_BUCKET_KEY, strlen(MVCC_BUCKET_KEY)};
    if (!rc) rc = bbolt_cursor_open(db, &path, 1, &cur);
    for (uint64_t n = 0; !rc; n++) {
        BboltItem it;
        int got = 0, tomb = 0;
        if ((rc = bbolt_cursor_next(cur, &it, &got)) || !got) break;
        if ((n & 0xffff) == 0 && (rc = restore_stopped(p->c->stop))) break;
        int64_t main_rev = 0, sub = 0;
        MvccKeyValue kv;
        if (it.is_bucket) continue;
        if ((rc = mvcc_rev_parse(it.key, it.key_len, &main_rev, &sub, &tomb))) break;
        unsigned bits = views_of(p, main_rev, 0);
        if (!bits && pass_done(p)) break; /* every view is before it: the rest is later still */
        if (!it.value_len) continue;      /* a bumped revision (etcdutl): no key */
        if ((rc = mvcc_kv_unmarshal(it.value, it.value_len, &kv))) break;
        if (!kv.key_len || !bits) continue;
        InspectRec h = {.main = main_rev,
                        .sub = sub,
                        .tombstone = (uint8_t)tomb,
                        .views = (uint8_t)bits,
                        .key_len = (uint32_t)kv.key_len};
        if (!tomb) {
            h.create_revision = kv.create_revision;
            h.version = kv.version;
            h.lease = kv.lease;
            h.value_size = kv.value_len;
            h.value_len = (uint32_t)kv.value_len;
        }
        rc = add_record(p, &h, kv.key, kv.value);
    }
    if (rc && rc != ERR_NOMEM && rc != ERR_CANCELED)
        err_wrap(rc, "full snapshot %s", p->plan->full->key);
    bbolt_cursor_close(cur);
    bbolt_close(db);
    return rc;
}

/* One event of p->delta (ctx: the Pass): checked as a restore checks it, taken once per
 * revision; one an earlier delta or the db had is passed over. */
static int read_event(void *ctx, const DeltaEvent *ev) {
    Pass *p = ctx;
    if (ev->mod_revision <= p->delta_before) return 0;
    int rc = delta_event_check(ev);
    if (rc) return err_wrap(rc, "%s", p->delta->key);
    if (ev->mod_revision != p->rev) p->sub = 0; /* the first event of a revision */
    p->rev = ev->mod_revision;
    int64_t sub = p->sub++;
    unsigned bits = views_of(p, ev->mod_revision, ev->time_ns);
    if (!bits) return 0;
    InspectRec h = {.main = ev->mod_revision,
                    .sub = sub,
                    .time_ns = ev->time_ns,
                    .views = (uint8_t)bits,
                    .key_len = (uint32_t)ev->key_len,
                    .tombstone = ev->type == ETCD_OP_DELETE};
    if (!h.tombstone) {
        h.create_revision = ev->create_revision;
        h.version = ev->version;
        h.lease = ev->lease;
        h.value_size = ev->value_len;
        h.value_len = (uint32_t)ev->value_len;
    }
    return add_record(p, &h, ev->key, ev->value);
}

/* Every event of one delta (all of it is read and checked, also past the views' ends). */
static int read_delta(Pass *p, DeltaReader *dr, const Snapshot *snap) {
    p->delta = snap;
    p->delta_before = p->rev;
    return delta_reader_each(dr, snap->key, snap->start_revision, snap->last_revision, read_event,
                             p);
}

/* The deltas' events in order, taken from f (started before the full snapshot was read, so
 * their download overlaps its scan; NULL when there are none). */
static int read_deltas(Pass *p, RestoreFetch *f) {
    const RestorePlan *pl = p->plan;
    int rc = 0;
    for (size_t j = 0; f && j < pl->n_deltas && !pass_done(p); j++) {
        DeltaReader *dr = NULL;
        if ((rc = restore_fetch_take(f, j, &dr))) break;
        if (!(rc = add_object(p->out, &pl->deltas[j], &p->object)))
            rc = read_delta(p, dr, &pl->deltas[j]);
        delta_reader_close(dr);
        restore_fetch_done(f, j);
        if (rc) break;
    }
    return rc;
}

/* The views' revisions once their pass is read; a revision the deltas do not reach is a gap. */
static int pass_end(Pass *p) {
    for (size_t v = 0; v < p->c->n_views; v++) {
        if (!(p->mask & (1u << v))) continue;
        int64_t want = p->c->views[v].revision;
        if (want && p->upto[v] < want && p->rev < want)
            return err_set(ERR_GAP, "the deltas end at revision %lld, before revision %lld",
                           (long long)p->rev, (long long)want);
        p->out->revision[v] = want ? want : p->upto[v];
    }
    return 0;
}

/* Keeps the checked copy of full (in the scratch dir, on the cache's file system) in the cache. */
static void cache_put(const InspectConfig *c, const Snapshot *full, RestoreFullDb *db) {
    char path[sizeof db->path], extra[64];
    fetch_cache_path(c->cache_dir, c->store, full, path, sizeof path);
    if (rename(db->path, path) != 0) {
        log_warn("could not keep %s in the cache %s: %s", full->key, c->cache_dir, strerror(errno));
        return;
    }
    snprintf(db->path, sizeof db->path, "%s", path);
    db->copied = 0;
    snprintf(extra, sizeof extra, "%llu %lld", (unsigned long long)db->db_len,
             (long long)db->revision);
    fetch_cache_commit(path, full, extra);
}

/* The checks of a full snapshot file that is already local, run on a thread of their own while
 * the scan reads the same file: in the store, the restore's (restore_fetch_full: trailer, db,
 * revision against the name); in the cache, the trailer and db again (restore_full_file_check)
 * and the sizes the cache recorded. */
typedef struct FullCheck {
    RestoreFetchConfig fc;
    const Snapshot *full;
    const char *cached;  /* the cache's file, or NULL: the store's */
    uint64_t cached_len; /* what the cache recorded */
    int64_t cached_rev;
    int rc;
    char msg[1024];
} FullCheck;

static void *full_check_main(void *arg) {
    FullCheck *k = arg;
    RestoreFullDb db = {.fd = -1};
    thread_name_self("inspect-check");
    if (!k->cached) {
        k->rc = restore_fetch_full(&k->fc, k->full, 0, &db);
        restore_full_db_release(&db);
    } else {
        int fd = open(k->cached, O_RDONLY | O_CLOEXEC);
        k->rc = fd < 0 ? err_set(ERR_IO, "open: %s", strerror(errno))
                       : restore_full_file_check(&k->fc, fd, k->cached, &db.db_len, &db.revision);
        if (!k->rc && (db.db_len != k->cached_len || db.revision != k->cached_rev))
            k->rc = err_set(ERR_CORRUPT, "it differs from what the cache recorded");
        if (k->rc)
            err_wrap(k->rc,
                     "the cache's copy %s of full snapshot %s (removed: the next command "
                     "fetches it again)",
                     k->cached, k->full->key);
        if (k->rc) unlink(k->cached);
        if (fd >= 0) close(fd);
    }
    if (k->rc) snprintf(k->msg, sizeof k->msg, "%s", err_msg());
    return NULL;
}

/* The full snapshot file at db->path (db_len, revision given), scanned while k checks it;
 * nothing is answered unless the check passes (records reach the output only after
 * inspect_read returns). */
static int scan_checked(Pass *p, FullCheck *k, const RestoreFullDb *db) {
    pthread_t t;
    int started = thread_start_quiet(&t, full_check_main, k) == 0;
    int rc = started ? read_full_db(p, db) : err_set(ERR_NOMEM, "cannot start a thread");
    if (started) pthread_join(t, NULL);
    if (started && k->rc) rc = err_set(k->rc, "%s", k->msg); /* the check's verdict first */
    if (!rc) p->rev = db->revision;
    return rc;
}

/* A plain full snapshot of a store whose objects are local files (Local) with a SHA-256 trailer
 * by its size, read where it lies. *tried = 0 when the object is not such a file. */
static int read_full_in_place(Pass *p, const RestoreFetchConfig *fc, int *tried) {
    const Snapshot *full = p->plan->full;
    int fd = -1;
    struct stat st;
    *tried = 0;
    if (full->encrypted || full->compression_suffix[0] || store_open_file(fc->store, full, &fd))
        return 0;
    if (fstat(fd, &st) || st.st_size <= 32 || st.st_size % 512 != 32) {
        close(fd);
        return 0;
    }
    RestoreFullDb db = {.fd = fd, .db_len = (uint64_t)st.st_size - 32};
    snprintf(db.path, sizeof db.path, "/proc/self/fd/%d", fd);
    BboltDb *bdb = NULL;
    int rc = bbolt_open(db.path, db.db_len, &bdb);
    if (!rc) rc = bbolt_etcd_revision(bdb, &db.revision);
    bbolt_close(bdb);
    if (rc) { /* not a db where it lies: the restore's own path says why */
        close(fd);
        return 0;
    }
    *tried = 1;
    FullCheck k = {.fc = *fc, .full = full};
    rc = scan_checked(p, &k, &db);
    /* the scan and the hash check read the file apart: a file written meanwhile (its size, mtime
     * or ctime moved) may have given the scan bytes the check never saw */
    struct stat after;
    if (!rc &&
        (fstat(fd, &after) || after.st_size != st.st_size ||
         after.st_mtim.tv_sec != st.st_mtim.tv_sec || after.st_mtim.tv_nsec != st.st_mtim.tv_nsec ||
         after.st_ctim.tv_sec != st.st_ctim.tv_sec || after.st_ctim.tv_nsec != st.st_ctim.tv_nsec))
        rc = err_set(ERR_CORRUPT,
                     "full snapshot %s changed while it was read (written to in the store): "
                     "nothing read from it is used; run the command again",
                     full->key);
    close(fd);
    return rc;
}

/* The cache's copy of full (fetch_cache.h), checked again while it is scanned. *tried = 0 when
 * the cache does not have it. */
static int read_full_cached(Pass *p, const RestoreFetchConfig *fc, int *tried) {
    const Snapshot *full = p->plan->full;
    RestoreFullDb db = {.fd = -1};
    char extra[64];
    unsigned long long len = 0;
    long long rev = 0;
    fetch_cache_path(p->c->cache_dir, fc->store, full, db.path, sizeof db.path);
    *tried = fetch_cache_lookup(db.path, full, extra, sizeof extra) &&
             sscanf(extra, "%llu %lld", &len, &rev) == 2;
    if (!*tried) return 0;
    log_info("full snapshot %s: read from the cache %s", full->key, db.path);
    db.db_len = len;
    db.revision = rev;
    FullCheck k = {
        .fc = *fc, .full = full, .cached = db.path, .cached_len = len, .cached_rev = rev};
    return scan_checked(p, &k, &db);
}

static int read_pass(const InspectConfig *c, const RestorePlan *plan, unsigned mask, RecSort *sort,
                     InspectResult *out) {
    Pass p = {.c = c, .sort = sort, .out = out, .plan = plan, .mask = mask};
    RestoreFetchConfig fc = {.store = c->store,
                             .scratch = c->scratch,
                             .max_fetchers = c->max_fetchers,
                             .stop = c->stop,
                             .cache_dir = c->cache_dir};
    RestoreFullDb full = {.fd = -1};
    RestoreFetch *f = NULL;
    int rc = add_object(out, plan->full, &p.object), done = 0;
    if (!rc && plan->n_deltas) rc = restore_fetch_start(&fc, plan->deltas, plan->n_deltas, &f);
    if (!rc) rc = read_full_in_place(&p, &fc, &done);
    if (!rc && !done && c->cache_dir) rc = read_full_cached(&p, &fc, &done);
    if (!rc && !done) {
        rc = restore_fetch_full(&fc, plan->full, 0, &full);
        if (!rc && c->cache_dir && full.copied && fetch_cache_wants(plan->full))
            cache_put(c, plan->full, &full);
        if (!rc) rc = read_full_db(&p, &full);
        p.rev = full.revision;
        restore_full_db_release(&full);
    }
    for (size_t v = 0; !rc && v < c->n_views; v++) { /* at the db's revision or before */
        int64_t r = c->views[v].revision;
        p.upto[v] = r && r < p.rev ? r : p.rev;
    }
    if (!rc) rc = read_deltas(&p, f);
    restore_fetch_stop(f);
    if (!rc) rc = pass_end(&p);
    return rc;
}

/* The plan of view v: a restore's; or, for a revision no set reaches with its deltas (before
 * every full snapshot, or between a set's last delta and the next full snapshot), the oldest
 * full snapshot after it alone: its db holds the revision unless compacted since
 * (check_compaction). */
static int plan_view(const InspectConfig *c, const InspectView *w, RestorePlan *pl, int *refused) {
    RestoreTarget t = {c->store, w->revision, w->time_ns, 0};
    int rc = restore_plan_make(&t, pl);
    *refused = pl->target_refused;
    if (!w->revision) return rc;
    const Snapshot *best = NULL;
    if (rc == ERR_INVALID && pl->target_refused && pl->next_full &&
        w->revision < pl->next_full->last_revision)
        best = pl->next_full; /* between the set's last delta and the next full snapshot */
    for (size_t i = 0; rc == ERR_NOT_FOUND && i < pl->n_list; i++) {
        const Snapshot *s = &pl->list[i];
        if (s->kind == SNAP_FULL && !s->is_chunk && s->last_revision >= w->revision &&
            (!best || s->last_revision < best->last_revision))
            best = s;
    }
    if (!best) return rc;
    pl->full = best;
    pl->n_deltas = 0;
    pl->next_full = NULL;
    pl->store_last = best->last_revision;
    pl->target_refused = *refused = 0;
    return 0;
}

/* Every delta of the store before view 0's set, of its history or untagged (history's
 * older_deltas): the events older sets hold that the set's full snapshot, compacted since, may
 * no longer have. Each is read and checked whole, as in a set; a revision comes once. */
static int read_older_deltas(const InspectConfig *c, const RestorePlan *pl, RecSort *sort,
                             InspectResult *out) {
    Snapshot *older = calloc(pl->n_list ? pl->n_list : 1, sizeof *older);
    if (!older) return err_set(ERR_NOMEM, "out of memory");
    size_t n = 0;
    const char *hist = pl->full->history;
    for (size_t i = 0; i < pl->n_list; i++) {
        const Snapshot *s = &pl->list[i];
        if (s->kind == SNAP_INCR && !s->is_chunk && s->last_revision <= pl->full->last_revision &&
            (!s->history[0] || !hist[0] || !strcmp(s->history, hist)))
            older[n++] = *s;
    }
    RestorePlan sub = {.full = pl->full, .deltas = older, .n_deltas = n};
    Pass p = {.c = c, .sort = sort, .out = out, .plan = &sub, .mask = 1};
    RestoreFetchConfig fc = {.store = c->store,
                             .scratch = c->scratch,
                             .max_fetchers = c->max_fetchers,
                             .stop = c->stop,
                             .cache_dir = c->cache_dir};
    RestoreFetch *f = NULL;
    int rc = n ? restore_fetch_start(&fc, older, n, &f) : 0;
    if (!rc) rc = read_deltas(&p, f);
    restore_fetch_stop(f);
    free(older);
    return rc;
}

int inspect_read(const InspectConfig *c, RecSort *sort, InspectResult *out) {
    memset(out, 0, sizeof *out);
    RestorePlan plans[INSPECT_MAX_VIEWS] = {0};
    int rc = c->n_views < 1 || c->n_views > INSPECT_MAX_VIEWS
                 ? err_set(ERR_INVALID, "%zu views", c->n_views)
                 : 0;
    for (size_t v = 0; !rc && v < c->n_views; v++)
        rc = plan_view(c, &c->views[v], &plans[v], &out->target_refused);
    /* views on one full snapshot share a pass, with the plan that reaches furthest */
    unsigned left = (1u << c->n_views) - 1;
    for (size_t v = 0; !rc && v < c->n_views; v++) {
        if (!(left & (1u << v))) continue;
        unsigned mask = 0;
        size_t widest = v;
        for (size_t u = v; u < c->n_views; u++) {
            if (!(left & (1u << u)) || strcmp(plans[u].full->key, plans[v].full->key)) continue;
            mask |= 1u << u;
            if (plans[u].n_deltas > plans[widest].n_deltas) widest = u;
        }
        left &= ~mask;
        rc = read_pass(c, &plans[widest], mask, sort, out);
    }
    if (!rc && c->older_deltas) rc = read_older_deltas(c, &plans[0], sort, out);
    for (size_t v = 0; v < c->n_views; v++)
        restore_plan_free(&plans[v]);
    return rc;
}

void inspect_result_free(InspectResult *r) {
    if (!r) return;
    free(r->objects);
    memset(r, 0, sizeof *r);
}
