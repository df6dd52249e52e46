/* fullsnap: see fullsnap.h. Memory: one gRPC message plus fixed copy buffers. */
#include "fullsnap.h"
#include "delta.h"
#include "../codec/filter_group.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/phase.h"
#include "../common/progress.h"
#include "../common/timeutil.h"
#include "../format/bbolt.h"
#include "../format/bbolt_stream.h"
#include "../format/snapshot_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FULLSNAP_TMP_PREFIX "etcdbr-full-"

static void log_stale_removed(void *ctx, const char *path, int64_t bytes) {
    (void)ctx;
    log_info("removed %s (%lld bytes), a temp file left by a snapshotter that did not finish", path,
             (long long)bytes);
}

void fullsnap_cleanup_stale(const char *temp_dir) {
    static const char *const prefixes[] = {FULLSNAP_TMP_PREFIX, DELTA_SPOOL_PREFIX};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (fs_remove_stale_temp(temp_dir, prefixes[i], log_stale_removed, NULL, NULL) != 0)
            log_warn("cannot look for stale temp files: %s", err_msg());
}

typedef struct {
    BboltStream *bs; /* the one-pass db check, fed every byte first; NULL when staged */
    IoWriter *checker;
    const uint64_t *count; /* bytes through the checker */
    Progress *progress;
    int64_t ns; /* monotonic ns spent in the checker and everything under it */
} SinkCtx;

/* ERR_CANCELED once the process is stopping (SIGTERM/SIGINT): a full snapshot, however large,
 * ends within moments of the signal with nothing stored (the store write is aborted). */
static int stopping(void) {
    if (!atomic_load(process_stop_flag())) return 0;
    return err_set(ERR_CANCELED, "stopped by a signal (SIGTERM/SIGINT): nothing stored");
}

static int snapshot_sink(void *ctx, const void *buf, size_t len) {
    SinkCtx *s = ctx;
    int rc = stopping();
    if (rc) return rc;
    int64_t t0 = phase_now_ns();
    if (s->bs && (rc = bbolt_stream_feed(s->bs, buf, len)))
        rc = err_wrap(rc, "the stream is not a valid etcd db");
    if (!rc) rc = io_write(s->checker, buf, len);
    s->ns += phase_now_ns() - t0;
    progress_set(s->progress, *s->count);
    return rc;
}

typedef struct {
    Progress *progress; /* may be NULL */
    int cancel_on_stop; /* a full snapshot ends on the signal; a delta (the last one) does not */
} TickCtx;

static int progress_tick(void *ctx, uint64_t n) {
    TickCtx *t = ctx;
    progress_set(t->progress, n);
    return t->cancel_on_stop ? stopping() : 0;
}

/* The sink of an object's filters: passes every byte to the store writer's stream and notes
 * when that stream (the store) failed, as opposed to the source or a filter. */
typedef struct {
    IoWriter base;
    IoWriter *next;    /* store_writer_io of the object's writer (borrowed) */
    int *store_failed; /* set to 1 when next fails (borrowed; may be NULL) */
} StoreSink;

static void note_store_failed(int *store_failed, int rc) {
    if (rc && store_failed) *store_failed = 1;
}

static int store_sink_write(IoWriter *w, const void *buf, size_t len) {
    StoreSink *k = (StoreSink *)w;
    int rc = io_write(k->next, buf, len);
    note_store_failed(k->store_failed, rc);
    return rc;
}

static int store_sink_finish(IoWriter *w) {
    StoreSink *k = (StoreSink *)w;
    int rc = io_finish(k->next);
    note_store_failed(k->store_failed, rc);
    return rc;
}

static void store_sink_free(IoWriter *w) {
    (void)w; /* embedded in ObjOut */
}

static const IoWriterVt store_sink_vt = {store_sink_write, store_sink_finish, store_sink_free};

/* An object being written: the store writer and the filters in front of it, and where its time
 * went (monotonic ns, added to pt's "compress_encrypt" and "upload" when it is committed or
 * aborted). */
typedef struct {
    StoreWriter *sw;
    StoreSink sink; /* between the filters and the store writer */
    IoFilterGroup *g;
    IoWriter *in;                   /* where the snapshot's plain bytes go (timed_in) */
    IoWriter *timed_in, *timed_out; /* owned: timers before the filters and before the store */
    int64_t in_ns;  /* in the filters' writes and finish, the store's writes under them included */
    int64_t out_ns; /* in the store's writes under the filters */
    int64_t store_ns;  /* in the store outside the filters: open, finish, commit, abort */
    PhaseTimer *pt;    /* borrowed, may be NULL */
    int *store_failed; /* the caller's flag (may be NULL): 1 once a store call failed */
} ObjOut;

/* Adds o's times to its timer and zeroes them. */
static void obj_flush_times(ObjOut *o) {
    phase_add(o->pt, "compress_encrypt", o->in_ns - o->out_ns);
    phase_add(o->pt, "upload", o->out_ns + o->store_ns);
    o->in_ns = o->out_ns = o->store_ns = 0;
}

static void obj_free_timers(ObjOut *o) {
    io_writer_free(o->timed_in);
    io_writer_free(o->timed_out);
    o->timed_in = o->timed_out = o->in = NULL;
}

int fullsnap_snapshot_new(const Store *store, SnapKind kind, int64_t start, int64_t last,
                          CompressKind compression, int is_final, Snapshot *out) {
    char kp[sizeof out->prefix];
    int rc = store_v2_key_prefix(store, kp, sizeof kp);
    if (rc) return rc;
    return snapname_new(kind, start, last, now_unix_s(), store_name_suffix(store, compression),
                        is_final, kp, out);
}

/* Opens snap's object in store with the compressor and, when snap is encrypted (its name says
 * ".enc", store_name_suffix), the encryption bound to its name in front. ERR_EXISTS when the
 * object exists (nothing opened); on any error nothing is open. *store_failed (may be NULL) is
 * set to 1 whenever a call into the store fails, from here to obj_commit (never cleared). */
static int obj_open(Store *store, const Snapshot *snap, CompressKind compression, PhaseTimer *pt,
                    ObjOut *o, int *store_failed) {
    memset(o, 0, sizeof *o);
    o->store_failed = store_failed;
    int64_t t0 = phase_now_ns();
    int rc = store_open_write(store, snap->snap_name, &o->sw);
    phase_add(pt, "upload", phase_now_ns() - t0);
    if (rc != ERR_EXISTS) note_store_failed(store_failed, rc);
    if (rc) return rc;
    o->pt = pt;
    o->sink = (StoreSink){{&store_sink_vt}, store_writer_io(o->sw), store_failed};
    if (snap->encrypted && !store_keyring(store))
        rc = err_set(ERR_INVALID, "%s: an encrypted name, but the store has no encryption key",
                     snap->snap_name);
    if (!rc && !(o->timed_out = io_timer_new(&o->sink.base, &o->out_ns)))
        rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc && !(o->g = io_filter_group_new(o->timed_out)))
        rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = io_filter_group_add_compress(o->g, compression);
    char ident[128]; /* the name is bound into every chunk: under another name it fails */
    if (!rc && snap->encrypted && !(rc = snapname_identity(snap, ident, sizeof ident)))
        rc = io_filter_group_add_encrypt_bound(o->g, store_keyring(store), ident);
    if (!rc) rc = io_filter_group_add_count(o->g, "stored");
    IoWriter *front = rc ? NULL : io_filter_group_io(o->g);
    if (!rc && !front) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc && !(o->timed_in = io_timer_new(front, &o->in_ns)))
        rc = err_set(ERR_NOMEM, "out of memory");
    o->in = o->timed_in;
    if (rc) {
        io_filter_group_free(o->g);
        store_writer_abort(o->sw);
        obj_free_timers(o);
        memset(o, 0, sizeof *o);
    }
    return rc;
}

/* Finishes the filters and the writer's stream; *stored_bytes (may be NULL) = bytes written. */
static int obj_finish(ObjOut *o, uint64_t *stored_bytes) {
    int64_t t0 = phase_now_ns();
    int rc = io_filter_group_finish(o->g);
    int64_t t1 = phase_now_ns();
    o->in_ns += t1 - t0;
    if (!rc) rc = io_finish(&o->sink.base);
    o->store_ns += phase_now_ns() - t1;
    uint64_t n = 0;
    io_filter_group_count(o->g, "stored", &n);
    if (stored_bytes) *stored_bytes = n;
    return rc;
}

/* Commits (the object becomes visible) and releases o. An object another writer stored under
 * the same name meanwhile counts as stored (*stored_bytes = 0). */
static int obj_commit(ObjOut *o, uint64_t *stored_bytes) {
    io_filter_group_free(o->g);
    o->g = NULL;
    obj_free_timers(o);
    int64_t t0 = phase_now_ns();
    int rc = store_writer_commit(o->sw);
    o->store_ns += phase_now_ns() - t0;
    obj_flush_times(o);
    o->sw = NULL;
    if (rc != ERR_EXISTS) note_store_failed(o->store_failed, rc);
    if (rc == ERR_EXISTS) {
        /* the same revisions in the same second (the name fixes both): stored */
        if (stored_bytes) *stored_bytes = 0;
        rc = 0;
    }
    return rc;
}

/* Discards whatever o holds (nothing becomes visible). NULL members are fine. */
static void obj_abort(ObjOut *o) {
    io_filter_group_free(o->g);
    obj_free_timers(o);
    int64_t t0 = phase_now_ns();
    if (o->sw) store_writer_abort(o->sw);
    o->store_ns += phase_now_ns() - t0;
    obj_flush_times(o);
    memset(o, 0, sizeof *o);
}

/* fullsnap_store_stream reporting the bytes read from src to progress (may be NULL); with
 * cancel_on_stop, ERR_CANCELED (nothing stored) once the process is stopping. Its time goes to pt
 * (may be NULL): reading src to the phase src_phase, the rest as obj_flush_times says. */
static int store_stream(Store *store, const Snapshot *snap, CompressKind compression, IoReader *src,
                        uint64_t *stored_bytes, Progress *progress, int cancel_on_stop,
                        PhaseTimer *pt, const char *src_phase, int *store_failed) {
    ObjOut o;
    int rc = obj_open(store, snap, compression, pt, &o, store_failed);
    if (rc == ERR_EXISTS) {
        /* the name fixes kind, revisions and the second: an object already stored under it
         * holds the same revisions (e.g. two full snapshots requested in one second) */
        if (stored_bytes) *stored_bytes = 0;
        return 0;
    }
    if (rc) return rc;
    TickCtx tick = {progress, cancel_on_stop};
    int64_t t0 = phase_now_ns();
    rc = io_copy_tick(src, o.in, NULL, progress_tick, &tick);
    phase_add(pt, src_phase, phase_now_ns() - t0 - o.in_ns);
    if (!rc) rc = obj_finish(&o, stored_bytes);
    if (!rc) return obj_commit(&o, stored_bytes);
    obj_abort(&o);
    return rc;
}

int fullsnap_store_stream(Store *store, const Snapshot *snap, CompressKind compression,
                          IoReader *src, uint64_t *stored_bytes, int *store_failed) {
    return fullsnap_store_stream_timed(store, snap, compression, src, stored_bytes, NULL, NULL,
                                       store_failed);
}

int fullsnap_store_stream_timed(Store *store, const Snapshot *snap, CompressKind compression,
                                IoReader *src, uint64_t *stored_bytes, PhaseTimer *pt,
                                const char *src_phase, int *store_failed) {
    /* the deltas' path: the last delta is stored while the process stops */
    if (store_failed) *store_failed = 0;
    return store_stream(store, snap, compression, src, stored_bytes, NULL, 0, pt,
                        src_phase ? src_phase : "read_source", store_failed);
}

/* The two-pass full snapshot: the stream staged in a file in temp_dir, checked there (every db
 * page walked), then compressed into the store. What fullsnap_take falls back to when the
 * one-pass check cannot decide (bbolt_stream.h) or etcd's revision keeps moving. expect: etcd's
 * dbSize for the progress (0 = unknown). */
static int take_staged(EtcdClient *c, Store *store, const char *temp_dir, CompressKind compression,
                       int is_final, FullSnapshotHook before_store, void *hook_ctx, uint64_t expect,
                       PhaseTimer *pt, FullSnapshotResult *out) {
    char *path = NULL;
    IoWriter *fdw = NULL, *checker = NULL;
    IoReader *src = NULL;
    IoWriter *counter = NULL;
    uint64_t *count = NULL;
    uint64_t payload_len = 0;
    Progress *progress = NULL;
    char what[320];
    int rc;
    memset(out, 0, sizeof *out);
    /* locked for its whole life: a cleanup in another process leaves it alone */
    int fd = fs_mkstemp_locked(temp_dir, FULLSNAP_TMP_PREFIX, &path);
    if (fd < 0) return fd;

    fdw = io_fd_writer_new(fd);
    counter = fdw ? io_counter_new(fdw, &count) : NULL;
    checker = counter ? trailer_checker_new(counter, 0) : NULL;
    if (!checker) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    snprintf(what, sizeof what, "full snapshot: receiving from %s", etcd_client_endpoint(c));
    progress = progress_start(what, expect, 1);
    SinkCtx ctx = {NULL, checker, count, progress, 0};
    int64_t tm = phase_now_ns();
    rc = etcd_snapshot(c, snapshot_sink, &ctx);
    phase_lap(pt, "etcd_read", &tm);
    progress_finish(progress);
    progress = NULL;
    if (rc) goto done;
    /* no fsync: the staging file is read back at once and removed; the store object is what
     * must be durable */
    progress = progress_start("full snapshot: checking every db page", 0, 0);
    int64_t revision = 0;
    rc = snapshot_file_verify(path, checker, *count, 0, 1, &payload_len, &revision);
    phase_lap(pt, "check", &tm);
    progress_finish(progress);
    progress = NULL;
    if (rc) {
        rc = err_wrap(rc, "full snapshot from %s", etcd_client_endpoint(c));
        goto done;
    }
    out->db_bytes = payload_len;
    rc = fullsnap_snapshot_new(store, SNAP_FULL, 0, revision, compression, is_final, &out->snap);
    if (rc) goto done;
    if (before_store) {
        HistoryRestoreMark mark;
        int64_t h0 = phase_now_ns();
        rc = history_mark_read_db(path, payload_len, &mark);
        if (rc) rc = err_wrap(rc, "reading the restore mark of the snapshot");
        if (!rc) rc = before_store(hook_ctx, &mark, payload_len, &out->snap);
        phase_lap(pt, "history", &h0);
        if (rc) goto done;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        rc = err_set(ERR_IO, "seek %s: %m", path);
        goto done;
    }
    src = io_fd_reader_new(fd);
    if (!src) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    snprintf(what, sizeof what, "full snapshot: %s and storing %s",
             store_keyring(store) ? "compressing, encrypting" : "compressing", out->snap.snap_name);
    progress = progress_start(what, *count, 1);
    rc = store_stream(store, &out->snap, compression, src, &out->stored_bytes, progress, 1, pt,
                      "read_staged", &out->store_failed);
done:
    progress_finish(progress);
    io_reader_free(src);
    io_writer_free(checker);
    io_writer_free(counter);
    io_writer_free(fdw);
    unlink(path); /* while still locked: no cleanup can take it for stale meanwhile */
    close(fd);
    free(path);
    return rc;
}

/* ---------- the one-pass full snapshot ---------- */

/* State of one one-pass attempt. */
typedef struct {
    ObjOut o;
    BboltStream *bs;
    IoWriter *counter, *checker;
    uint64_t *count;
    int retry;    /* the db's revision is not the one the name was given: take it again */
    int fallback; /* the stream's check cannot decide: take it staged */
    int exists;   /* another writer stored the name (same revision, same second): staged too */
} OnePass;

static int onepass_open(OnePass *p, Store *store, const Snapshot *snap, CompressKind compression,
                        PhaseTimer *pt, int *store_failed) {
    int rc = obj_open(store, snap, compression, pt, &p->o, store_failed);
    if (rc == ERR_EXISTS) p->fallback = p->exists = 1; /* the staged path decides that */
    if (rc) return rc;
    rc = bbolt_stream_new(&p->bs);
    if (!rc) rc = bbolt_stream_want(p->bs, HISTORY_DB_BUCKET, HISTORY_DB_KEY);
    if (rc) return rc;
    /* the sink feeds bs every byte before the checker passes it on to the object */
    p->counter = io_counter_new(p->o.in, &p->count);
    /* the trailer goes into the object too: a full snapshot object is etcd's stream as it is */
    p->checker = p->counter ? trailer_checker_new(p->counter, 0) : NULL;
    return p->checker ? 0 : err_set(ERR_NOMEM, "out of memory");
}

static void onepass_free(OnePass *p) {
    obj_abort(&p->o); /* nothing left to abort after a commit */
    io_writer_free(p->checker);
    io_writer_free(p->counter);
    bbolt_stream_free(p->bs);
}

/* After the stream: the trailer, the db's checks and revision (== rev0), its restore mark. */
static int onepass_check(OnePass *p, int64_t rev0, uint64_t *db_len, HistoryRestoreMark *mark) {
    uint64_t total = *p->count;
    if (total % 512 != 32)
        return err_set(ERR_CORRUPT,
                       "%llu bytes is not db pages plus a 32-byte sha256 trailer "
                       "(size %% 512 != 32): snapshot missing hash",
                       (unsigned long long)total);
    int rc = trailer_check_result(p->checker, db_len);
    int64_t rev = 0;
    if (!rc) rc = bbolt_stream_finish(p->bs, *db_len, &rev);
    char val[1024];
    size_t vlen = 0;
    memset(mark, 0, sizeof *mark);
    if (!rc) {
        rc = bbolt_stream_get(p->bs, HISTORY_DB_BUCKET, HISTORY_DB_KEY, val, sizeof val, &vlen);
        if (rc == ERR_NOT_FOUND)
            rc = 0;
        else if (!rc)
            rc = history_mark_from_db_value(val, vlen, mark);
    }
    if (rc == ERR_UNSUPPORTED) p->fallback = 1;
    if (rc)
        return err_wrap(rc == ERR_UNSUPPORTED || rc == ERR_NOMEM ? rc : ERR_CORRUPT,
                        "not a valid etcd db");
    if (rev != rev0) {
        p->retry = 1;
        return err_set(ERR_CONFLICT,
                       "the db holds revision %lld, not etcd's revision %lld read before the "
                       "stream (a write came between)",
                       (long long)rev, (long long)rev0);
    }
    return 0;
}

/* One attempt: etcd's stream through the checks into the store object named with rev0 (etcd's
 * revision just before the stream), committed only once the trailer, the db checks and the
 * db's revision == rev0 pass and the hook agreed; aborted otherwise. */
/* pt's phases of the stream itself: stream_ns in etcd_snapshot, of which sink_ns in the sink;
 * of that, what did not reach the filters (p->o.in_ns, counted by the object) is the checks. */
static void onepass_stream_times(PhaseTimer *pt, const OnePass *p, int64_t stream_ns,
                                 int64_t sink_ns) {
    phase_add(pt, "etcd_read", stream_ns - sink_ns);
    phase_add(pt, "check", sink_ns - p->o.in_ns);
}

static int take_onepass(EtcdClient *c, Store *store, CompressKind compression, int is_final,
                        FullSnapshotHook before_store, void *hook_ctx, int64_t rev0,
                        uint64_t expect, OnePass *p, PhaseTimer *pt, FullSnapshotResult *out) {
    char what[320];
    uint64_t db_len = 0;
    HistoryRestoreMark mark;
    Snapshot snap;
    int64_t t = phase_now_ns();
    int rc = fullsnap_snapshot_new(store, SNAP_FULL, 0, rev0, compression, is_final, &snap);
    if (!rc) rc = onepass_open(p, store, &snap, compression, pt, &out->store_failed);
    phase_lap(pt, "prepare", &t);
    if (rc) return rc;
    /* one line for receiving, checking, compressing and storing: they happen together */
    snprintf(what, sizeof what, "full snapshot: receiving from %s", etcd_client_endpoint(c));
    Progress *progress = progress_start(what, expect, 1);
    SinkCtx ctx = {p->bs, p->checker, p->count, progress, 0};
    rc = etcd_snapshot(c, snapshot_sink, &ctx);
    progress_finish(progress);
    int64_t now = phase_now_ns();
    onepass_stream_times(pt, p, now - t, ctx.ns);
    t = now;
    if (!rc) rc = onepass_check(p, rev0, &db_len, &mark);
    phase_lap(pt, "check", &t);
    if (rc) return err_wrap(rc, "full snapshot from %s", etcd_client_endpoint(c));
    rc = obj_finish(&p->o, &out->stored_bytes);
    if (rc) return rc;
    out->snap = snap;
    out->db_bytes = db_len;
    /* the hook (history, tag) runs before the object becomes visible, as in the staged path */
    t = phase_now_ns();
    if (before_store) rc = before_store(hook_ctx, &mark, db_len, &out->snap);
    phase_lap(pt, "history", &t);
    if (rc) return rc;
    return obj_commit(&p->o, &out->stored_bytes);
}

/* One-pass attempts before the staged path: a try whose db holds another revision than the one
 * read before it (a write came between) is aborted and taken again; an etcd that keeps moving
 * that fast gets the staged path, which names the object after reading the db. */
#define ONEPASS_TRIES 3

static int take(EtcdClient *c, Store *store, const char *temp_dir, CompressKind compression,
                int is_final, FullSnapshotHook before_store, void *hook_ctx, PhaseTimer *pt,
                FullSnapshotResult *out) {
    int64_t t = phase_now_ns();
    int rc = fs_mkdir_p(temp_dir, 0700);
    if (rc) return rc;
    fullsnap_cleanup_stale(temp_dir);
    for (int attempt = 1;; attempt++) {
        /* etcd's revision names the object before the stream (the db then must hold exactly
         * it); dbSize is for the ETA (approximate: the stream adds the 32-byte trailer) */
        EtcdStatus st;
        int have = etcd_status(c, &st) == 0 && st.revision > 0;
        phase_lap(pt, "prepare", &t);
        uint64_t expect = have && st.db_size > 0 ? (uint64_t)st.db_size : 0;
        /* ETCDBR_FULL_SNAPSHOT_STAGED=1: the staged path always (benchmarks compare the two,
         * tests cover the fallback) */
        const char *env = getenv("ETCDBR_FULL_SNAPSHOT_STAGED"), *why = NULL;
        if (env && !strcmp(env, "1"))
            why = "ETCDBR_FULL_SNAPSHOT_STAGED=1";
        else if (!have)
            why = "no revision from etcd's Status";
        else if (attempt > ONEPASS_TRIES)
            why = "etcd's revision moved during every try";
        if (why) {
            log_info("full snapshot: %s: staging it in %s", why, temp_dir);
            return take_staged(c, store, temp_dir, compression, is_final, before_store, hook_ctx,
                               expect, pt, out);
        }
        OnePass p;
        memset(&p, 0, sizeof p);
        memset(out, 0, sizeof *out);
        rc = take_onepass(c, store, compression, is_final, before_store, hook_ctx, st.revision,
                          expect, &p, pt, out);
        onepass_free(&p);
        t = phase_now_ns();
        if (p.fallback) {
            if (p.exists) /* not an error: two snapshotters took one revision in one second */
                log_info("full snapshot: another snapshotter stored revision %lld this second: "
                         "staging it in %s instead",
                         (long long)st.revision, temp_dir);
            else
                log_info("full snapshot: %s: staging it in %s instead", err_msg(), temp_dir);
            return take_staged(c, store, temp_dir, compression, is_final, before_store, hook_ctx,
                               expect, pt, out);
        }
        if (!p.retry) return rc;
        memset(out, 0, sizeof *out);
        log_info("full snapshot: nothing stored, taken again: %s", err_msg());
    }
}

int fullsnap_take(EtcdClient *c, Store *store, const char *temp_dir, CompressKind compression,
                  int is_final, FullSnapshotHook before_store, void *hook_ctx,
                  FullSnapshotResult *out) {
    memset(out, 0, sizeof *out);
    PhaseTimer pt;
    phase_timer_begin(&pt);
    static const char *const order[] = {"prepare",          "etcd_read", "check",
                                        "compress_encrypt", "upload",    "history"};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) /* listed in this order */
        phase_add(&pt, order[i], 0);
    int rc = take(c, store, temp_dir, compression, is_final, before_store, hook_ctx, &pt, out);
    out->phases = pt;
    return rc;
}

/* ---------- a db file as a full snapshot (compact) ---------- */

/* Reader over a db file that yields its bytes and then their SHA-256: the full snapshot format
 * etcd's Snapshot stream has (docs/go-tool.md §4.1). */
typedef struct {
    IoReader base;
    int fd;
    Sha256 *sha;
    uint8_t digest[SHA256_LEN];
    size_t digest_off; /* bytes of the digest given out; SHA256_LEN + 1 before the end */
} DbTrailerReader;

static int db_trailer_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    DbTrailerReader *d = (DbTrailerReader *)r;
    *got = 0;
    if (d->digest_off > SHA256_LEN) {
        ssize_t n;
        do {
            n = read(d->fd, buf, cap);
        } while (n < 0 && errno == EINTR);
        if (n < 0) return err_set(ERR_IO, "read db: %s", strerror(errno));
        if (n > 0) {
            sha256_update(d->sha, buf, (size_t)n);
            *got = (size_t)n;
            return 0;
        }
        sha256_final(d->sha, d->digest);
        d->digest_off = 0;
    }
    size_t left = SHA256_LEN - d->digest_off;
    size_t n = left < cap ? left : cap;
    memcpy(buf, d->digest + d->digest_off, n);
    d->digest_off += n;
    *got = n;
    return 0;
}

static void db_trailer_free(IoReader *r) {
    DbTrailerReader *d = (DbTrailerReader *)r;
    sha256_free(d->sha);
    free(d);
}

static const IoReaderVt db_trailer_vt = {db_trailer_read, db_trailer_free};

int fullsnap_store_db_file(Store *store, const char *snap_name, CompressKind compression,
                           const char *db_path, const char *what, uint64_t *stored_bytes) {
    struct stat st;
    int fd = open(db_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(ERR_IO, "open %s: %s", db_path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(ERR_IO, "stat %s: %s", db_path, strerror(e));
    }
    DbTrailerReader *d = calloc(1, sizeof *d);
    if (d) d->sha = sha256_new();
    if (!d || !d->sha) {
        if (d) free(d);
        close(fd);
        return err_set(ERR_NOMEM, "out of memory");
    }
    d->base.vt = &db_trailer_vt;
    d->fd = fd;
    d->digest_off = SHA256_LEN + 1;
    Snapshot snap;
    int rc = store_snapshot_for_name(store, snap_name, &snap);
    Progress *p = rc ? NULL : progress_start(what, (uint64_t)st.st_size + SHA256_LEN, 1);
    if (!rc)
        rc =
            store_stream(store, &snap, compression, &d->base, stored_bytes, p, 1, NULL, NULL, NULL);
    progress_finish(p);
    io_reader_free(&d->base);
    close(fd);
    return rc;
}
