/* restorer: see restorer.h. Threads: max_fetchers fetchers download, decompress and verify
 * deltas into spool files (DeltaReader) at most max_fetchers ahead of the applier; one applier
 * replays them in order. Replay is pipelined: each revision's transaction is guarded by a
 * compare that holds only once the previous revision is applied (mod_revision of its last put
 * key, or version 0 of its last deleted key), so a window of transactions can be in flight on
 * one HTTP/2 connection and any that etcd takes out of order fail harmlessly and are resent
 * (see "replay" below). The temporary etcd runs with GOMAXPROCS=1, which keeps etcd's
 * proposals in the order sent. */
#include "restorer.h"
#include "../format/bbolt.h"
#include "../backup/delta.h"
#include "../backup/fullsnap.h"
#include "../codec/compress.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../etcd/etcd_client.h"
#include "../etcd/etcd_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#define TEMP_ETCD_MIN_REQUEST_BYTES (256LL << 20)
#define TEMP_ETCD_MIN_TXN_OPS (1LL << 20)

/* ---------- fetchers ---------- */

typedef struct {
    const RestoreConfig *cfg;
    const Snapshot *deltas; /* borrowed array */
    size_t n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next_job;    /* next delta index to fetch */
    size_t applier_idx; /* deltas before this index are done */
    int abort;
    DeltaReader **readers; /* per delta, NULL until fetched */
    int *rcs;
    char **errs;
    int *ready;
} FetchPool;

static int open_delta(const RestoreConfig *cfg, const Snapshot *snap, DeltaReader **out) {
    CompressKind kind;
    IoReader *raw = NULL, *dec = NULL;
    int rc = compress_from_suffix(snap->compression_suffix, &kind);
    if (rc)
        return err_set(ERR_UNSUPPORTED, "%s: unknown compression suffix \"%s\"", snap->key,
                       snap->compression_suffix);
    rc = store_open_read(cfg->store, snap, &raw);
    if (rc) return err_wrap(rc, "%s", snap->key);
    dec = decompress_reader_new(kind, raw);
    if (!dec) {
        io_reader_free(raw);
        return err_set(ERR_NOMEM, "out of memory");
    }
    rc = delta_reader_open(dec, cfg->temp_dir, out);
    if (rc) err_wrap(rc, "delta %s", snap->key);
    io_reader_free(dec);
    io_reader_free(raw);
    return rc;
}

static void *fetcher_main(void *arg) {
    FetchPool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->abort && p->next_job < p->n &&
               p->next_job >= p->applier_idx + (size_t)p->cfg->max_fetchers)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->abort || p->next_job >= p->n) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        size_t j = p->next_job++;
        pthread_mutex_unlock(&p->mu);

        DeltaReader *r = NULL;
        int rc = open_delta(p->cfg, &p->deltas[j], &r);

        pthread_mutex_lock(&p->mu);
        p->readers[j] = r;
        p->rcs[j] = rc;
        if (rc) p->errs[j] = strdup(err_msg());
        p->ready[j] = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* ---------- replay ----------
 * Revisions are read ahead into a ring of groups (one group = one revision = one txn). Closed
 * groups are sent through a txn pipeline, at most REPLAY_WINDOW in flight, each batch in one
 * write. Every txn is guarded: its compare holds only when the previous revision is applied
 * (mod_revision of that revision's last put key == its revision, or version 0 of its last
 * deleted key), so a txn that etcd proposes too early fails without effect. A success must
 * report exactly the group's revision. After a failure nothing new is sent until every txn in
 * flight has answered (they all depend on the failed one and fail too): only then are the
 * unapplied groups resent from the first one, so no txn is ever in flight twice. */

#define REPLAY_RING 256u               /* groups read ahead (a power of two) */
#define REPLAY_RING_BYTES (8u << 20)   /* ... and their bytes, beyond the first group */
#define REPLAY_WINDOW 64u              /* txns in flight */
#define REPLAY_WINDOW_BYTES (4u << 20) /* ... and their bytes, beyond the first txn */
#define REPLAY_BIG_GROUP (1u << 20)    /* group buffers above this are freed after use */
#define REPLAY_MAX_STALLS 8            /* resend rounds without progress before giving up */

enum { G_OPEN = 1, G_READY, G_FLIGHT, G_DONE };

typedef struct {
    size_t key, value; /* offsets into buf while the group is built */
} OpOff;

typedef struct {
    int64_t rev;
    int state;
    EtcdTxnOp *ops;
    OpOff *offs;
    size_t n_ops, cap_ops;
    uint8_t *buf; /* keys, values and the guard key of the txn */
    size_t len, cap;
    size_t guard_off;
    EtcdTxnReq req; /* set when closed */
} Group;

typedef struct {
    EtcdClient *client;
    EtcdTxnPipeline *pipe;
    int64_t applied; /* every revision up to this one is applied */
    int64_t end;     /* groups hold revisions applied+1 .. end-1 */
    int64_t next;    /* next revision to send */
    Group ring[REPLAY_RING];
    size_t ring_bytes;
    size_t in_flight, flight_bytes;
    int draining;
    int stalls;            /* resend rounds in a row that applied nothing */
    int64_t round_applied; /* applied when the last resend round started */
    /* guard for the next revision: the last event of the previous one */
    int has_guard;
    EtcdOpType guard_type;
    uint8_t *guard_key;
    size_t guard_key_len, guard_cap;
    int64_t guard_rev;
    EtcdTxnDone done[REPLAY_WINDOW];
    uint64_t events, txns, resent, failed_rounds;
    const char *object; /* current delta key, for messages */
} Replay;

static Group *ring_at(Replay *r, int64_t rev) {
    return &r->ring[(uint64_t)rev & (REPLAY_RING - 1)];
}

static void group_release(Replay *r, Group *g) {
    r->ring_bytes -= g->len;
    g->state = 0;
    g->n_ops = 0;
    g->len = 0;
    if (g->cap > REPLAY_BIG_GROUP) {
        free(g->buf);
        g->buf = NULL;
        g->cap = 0;
    }
    if (g->cap_ops > REPLAY_BIG_GROUP / sizeof(EtcdTxnOp)) {
        free(g->ops);
        free(g->offs);
        g->ops = NULL;
        g->offs = NULL;
        g->cap_ops = 0;
    }
}

static void replay_free(Replay *r) {
    for (size_t i = 0; i < REPLAY_RING; i++) {
        free(r->ring[i].ops);
        free(r->ring[i].offs);
        free(r->ring[i].buf);
    }
    free(r->guard_key);
}

/* Appends n bytes to g->buf; returns the offset or (size_t)-1 when out of memory. */
static size_t group_put(Replay *r, Group *g, const uint8_t *p, size_t n) {
    if (g->cap - g->len < n) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap - g->len < n)
            cap *= 2;
        uint8_t *q = realloc(g->buf, cap);
        if (!q) return (size_t)-1;
        g->buf = q;
        g->cap = cap;
    }
    size_t off = g->len;
    if (n) memcpy(g->buf + off, p, n);
    g->len += n;
    r->ring_bytes += n;
    return off;
}

/* Fixes the ops' pointers and the compare, then makes the last event the next guard. */
static int group_close(Replay *r, Group *g) {
    EtcdTxnReq *q = &g->req;
    for (size_t i = 0; i < g->n_ops; i++) {
        g->ops[i].key = g->buf + g->offs[i].key;
        g->ops[i].value = g->ops[i].type == ETCD_OP_PUT ? g->buf + g->offs[i].value : NULL;
    }
    if (q->cmp.kind != ETCD_CMP_NONE) q->cmp.key = g->buf + g->guard_off;
    q->ops = g->ops;
    q->n_ops = g->n_ops;
    const EtcdTxnOp *last = &g->ops[g->n_ops - 1];
    if (r->guard_cap < last->key_len) {
        uint8_t *k = realloc(r->guard_key, last->key_len);
        if (!k) return err_set(ERR_NOMEM, "out of memory");
        r->guard_key = k;
        r->guard_cap = last->key_len;
    }
    if (last->key_len) memcpy(r->guard_key, last->key, last->key_len);
    r->guard_key_len = last->key_len;
    r->guard_type = last->type;
    r->guard_rev = g->rev;
    r->has_guard = 1;
    g->state = G_READY;
    return 0;
}

/* Handles one reply. */
static int replay_done(Replay *r, const EtcdTxnDone *d) {
    int64_t rev = (int64_t)d->tag;
    Group *g = ring_at(r, rev);
    if (rev <= r->applied || rev >= r->end || g->rev != rev || g->state != G_FLIGHT)
        return err_set(ERR_CORRUPT, "replaying %s: unexpected reply for revision %lld", r->object,
                       (long long)rev);
    r->in_flight--;
    r->flight_bytes -= g->len;
    if (d->succeeded) {
        if (d->revision != rev)
            return err_set(ERR_CORRUPT, "replaying %s: revision %lld was applied as revision %lld",
                           r->object, (long long)rev, (long long)d->revision);
        g->state = G_DONE;
        return 0;
    }
    /* etcd was at d->revision when the compare failed: at rev - 1 the guard itself is wrong */
    if (d->revision == rev - 1)
        return err_set(ERR_CORRUPT,
                       "replaying %s: revision %lld does not apply: the restored keyspace "
                       "differs from the one the delta was taken from",
                       r->object, (long long)rev);
    if (d->revision >= rev)
        return err_set(ERR_CORRUPT,
                       "replaying %s: etcd reached revision %lld without revision %lld: another "
                       "writer on the restore etcd?",
                       r->object, (long long)d->revision, (long long)rev);
    g->state = G_READY; /* proposed before its predecessor: sent again after the drain */
    r->resent++;
    if (!r->draining) r->failed_rounds++;
    r->draining = 1;
    return 0;
}

/* Sends what the window allows, then takes replies (waiting for some when block). */
static int replay_pump(Replay *r, int block) {
    while (!r->draining && r->next < r->end && r->in_flight < REPLAY_WINDOW) {
        Group *g = ring_at(r, r->next);
        if (g->state != G_READY) break; /* the open group */
        if (r->in_flight && r->flight_bytes + g->len > REPLAY_WINDOW_BYTES) break;
        int rc = etcd_txn_pipeline_submit(r->pipe, &g->req, (uint64_t)g->rev);
        if (rc) return err_wrap(rc, "replaying %s", r->object);
        g->state = G_FLIGHT;
        r->in_flight++;
        r->flight_bytes += g->len;
        r->next++;
    }
    if (etcd_txn_pipeline_pending(r->pipe) == 0) return 0;
    size_t n = 0;
    int rc = etcd_txn_pipeline_wait(r->pipe, block ? -1 : 0, r->done, REPLAY_WINDOW, &n);
    if (rc) return err_wrap(rc, "replaying %s", r->object);
    for (size_t i = 0; i < n; i++)
        if ((rc = replay_done(r, &r->done[i]))) return rc;
    while (r->applied + 1 < r->end) {
        Group *g = ring_at(r, r->applied + 1);
        if (g->state != G_DONE) break;
        group_release(r, g);
        r->applied++;
        r->txns++;
    }
    if (r->draining && r->in_flight == 0) {
        /* every txn after the first failed one failed too (each needs its predecessor) */
        for (int64_t v = r->applied + 1; v < r->next; v++)
            if (ring_at(r, v)->state == G_DONE)
                return err_set(ERR_CORRUPT,
                               "replaying %s: revision %lld applied before revision %lld",
                               r->object, (long long)v, (long long)(r->applied + 1));
        /* defensive: a round that applies nothing is already caught by replay_done */
        r->stalls = r->applied == r->round_applied ? r->stalls + 1 : 0;
        r->round_applied = r->applied;
        if (r->stalls > REPLAY_MAX_STALLS)
            return err_set(ERR_CORRUPT,
                           "replaying %s: revision %lld does not apply: the restored keyspace "
                           "differs from the one the delta was taken from",
                           r->object, (long long)(r->applied + 1));
        r->draining = 0;
        r->next = r->applied + 1;
    }
    return 0;
}

static int ring_full(const Replay *r) {
    int64_t n = r->end - r->applied - 1;
    return n >= (int64_t)REPLAY_RING || (n > 0 && r->ring_bytes >= REPLAY_RING_BYTES);
}

static int replay_add_event(Replay *r, const DeltaEvent *ev) {
    int64_t rev = ev->mod_revision;
    Group *g = r->end - 1 > r->applied ? ring_at(r, r->end - 1) : NULL;
    if (!g || g->state != G_OPEN || g->rev != rev) {
        if (rev != r->end)
            return err_set(ERR_GAP, "%s: revision %lld follows revision %lld: revisions missing",
                           r->object, (long long)rev, (long long)(r->end - 1));
        if (g && g->state == G_OPEN) {
            int rc = group_close(r, g);
            if (rc) return rc;
        }
        while (ring_full(r)) {
            int rc = replay_pump(r, 1);
            if (rc) return rc;
        }
        g = ring_at(r, rev);
        g->rev = rev;
        g->state = G_OPEN;
        g->n_ops = 0;
        g->len = 0;
        memset(&g->req, 0, sizeof g->req);
        if (r->has_guard) {
            EtcdCompare *c = &g->req.cmp;
            c->kind = r->guard_type == ETCD_OP_PUT ? ETCD_CMP_MOD_EQUAL : ETCD_CMP_VERSION_EQUAL;
            c->key_len = r->guard_key_len;
            c->value = r->guard_type == ETCD_OP_PUT ? r->guard_rev : 0;
            g->guard_off = group_put(r, g, r->guard_key, r->guard_key_len);
            if (g->guard_off == (size_t)-1) return err_set(ERR_NOMEM, "out of memory");
        }
        r->end++;
    }
    if (g->n_ops == g->cap_ops) {
        size_t cap = g->cap_ops ? g->cap_ops * 2 : 4;
        EtcdTxnOp *ops = realloc(g->ops, cap * sizeof *ops);
        if (ops) g->ops = ops;
        OpOff *offs = realloc(g->offs, cap * sizeof *offs);
        if (offs) g->offs = offs;
        if (!ops || !offs) return err_set(ERR_NOMEM, "out of memory");
        g->cap_ops = cap;
    }
    EtcdTxnOp *op = &g->ops[g->n_ops];
    OpOff *off = &g->offs[g->n_ops];
    memset(op, 0, sizeof *op);
    op->type = ev->type;
    op->key_len = ev->key_len;
    off->key = group_put(r, g, ev->key, ev->key_len);
    off->value = 0;
    if (ev->type == ETCD_OP_PUT) {
        off->value = group_put(r, g, ev->value, ev->value_len);
        op->value_len = ev->value_len;
    }
    /* leases are dropped, as the Go tool does: the lease grant is not in the backup */
    if (off->key == (size_t)-1 || off->value == (size_t)-1)
        return err_set(ERR_NOMEM, "out of memory");
    g->n_ops++;
    r->events++;
    return 0;
}

/* Closes the last group and waits until every revision read so far is applied. */
static int replay_finish(Replay *r) {
    if (r->end - 1 > r->applied) {
        Group *g = ring_at(r, r->end - 1);
        if (g->state == G_OPEN) {
            int rc = group_close(r, g);
            if (rc) return rc;
        }
    }
    while (r->applied + 1 < r->end) {
        int rc = replay_pump(r, 1);
        if (rc) return rc;
    }
    return 0;
}

static int apply_delta(Replay *r, DeltaReader *dr, const Snapshot *snap) {
    r->object = snap->key;
    int64_t last_seen = 0;
    for (;;) {
        DeltaEvent ev;
        int got = 0;
        int rc = delta_reader_next(dr, &ev, &got);
        if (rc) return err_wrap(rc, "%s", snap->key);
        if (!got) break;
        last_seen = ev.mod_revision;
        /* the name says which revisions the delta holds; an event outside them is not what
         * the writer stored */
        if (ev.mod_revision < snap->start_revision || ev.mod_revision > snap->last_revision)
            return err_set(ERR_CORRUPT,
                           "%s: holds an event at revision %lld, outside its name's "
                           "revisions %lld-%lld",
                           snap->key, (long long)ev.mod_revision, (long long)snap->start_revision,
                           (long long)snap->last_revision);
        if (ev.mod_revision <= r->applied) continue; /* overlap: apply each revision once */
        rc = replay_add_event(r, &ev);
        if (rc) return rc;
    }
    int rc = replay_finish(r);
    if (rc) return rc;
    if (last_seen != snap->last_revision)
        return err_set(ERR_CORRUPT, "%s: last event is at revision %lld, the name says %lld",
                       snap->key, (long long)last_seen, (long long)snap->last_revision);
    if (r->applied != snap->last_revision)
        return err_set(ERR_CORRUPT, "%s: etcd is at revision %lld after replay, expected %lld",
                       snap->key, (long long)r->applied, (long long)snap->last_revision);
    return 0;
}

/* ---------- helpers ---------- */

static int run_tool(char *const argv[], const char *log_path) {
    pid_t pid = fork();
    if (pid < 0) return err_set(ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("ETCDCTL_API", "3", 1);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    char tail[600] = "";
    int fd = open(log_path, O_RDONLY);
    if (fd >= 0) {
        off_t end = lseek(fd, 0, SEEK_END);
        off_t from = end > (off_t)sizeof tail - 1 ? end - (off_t)sizeof tail + 1 : 0;
        ssize_t n = pread(fd, tail, sizeof tail - 1, from);
        tail[n > 0 ? n : 0] = '\0';
        close(fd);
        for (char *p = tail; *p; p++)
            if (*p == '\n') *p = ' ';
    }
    return err_set(ERR_IO, "%s snapshot restore failed (exit %d): %s", argv[0],
                   WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), tail);
}

static int in_path(const char *name) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    char *copy = strdup(path);
    int found = 0;
    for (char *d = strtok(copy, ":"); d && !found; d = strtok(NULL, ":")) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", d, name);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

static int fsync_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    int fd = open(path, (flag == FTW_D || flag == FTW_DP) ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return 1;
    int rc = fsync(fd);
    close(fd);
    return rc != 0;
}

/* Downloads, decompresses and verifies the full snapshot into path (fullsnap_verify_file);
 * *db_len = bytes before the trailer (or the whole file when skip_hash_check and there is none),
 * *revision = the etcd revision inside the db. */
static int fetch_full(const RestoreConfig *cfg, const Snapshot *snap, const char *path,
                      uint64_t *db_len, int64_t *revision) {
    CompressKind kind;
    IoReader *raw = NULL, *dec = NULL;
    IoWriter *fdw = NULL, *checker = NULL;
    uint64_t *count = NULL;
    IoWriter *counter = NULL;
    int fd = -1;
    int rc = compress_from_suffix(snap->compression_suffix, &kind);
    if (rc)
        return err_set(ERR_UNSUPPORTED, "%s: unknown compression suffix \"%s\"", snap->key,
                       snap->compression_suffix);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(ERR_IO, "create %s: %s", path, strerror(errno));
    rc = store_open_read(cfg->store, snap, &raw);
    if (rc) goto done;
    dec = decompress_reader_new(kind, raw);
    fdw = io_fd_writer_new(fd);
    counter = fdw ? io_counter_new(fdw, &count) : NULL;
    checker = counter ? trailer_checker_new(counter, 0) : NULL;
    if (!dec || !checker) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    rc = io_copy(dec, checker, NULL);
    if (rc) goto done;
    rc = fullsnap_verify_file(path, checker, *count, cfg->skip_hash_check, 0, db_len, revision);
    if (rc) goto done;
    /* no fsync: etcd's restore reads it at once; the data dir is fsynced before the rename */
done:
    if (rc && rc != ERR_NOMEM) err_wrap(rc, "full snapshot %s", snap->key);
    io_writer_free(checker);
    io_writer_free(counter);
    io_writer_free(fdw);
    io_reader_free(dec);
    io_reader_free(raw);
    if (fd >= 0) close(fd);
    return rc;
}

/* Checks that the deltas continue the full snapshot without holes (names only). */
static int check_contiguity(const Snapshot *full, const Snapshot *deltas, size_t n) {
    int64_t next = full->last_revision + 1;
    const Snapshot *prev = full;
    for (size_t i = 0; i < n; i++) {
        if (deltas[i].start_revision > next)
            return err_set(ERR_GAP, "revisions %lld-%lld are missing between %s and %s",
                           (long long)next, (long long)(deltas[i].start_revision - 1), prev->key,
                           deltas[i].key);
        if (deltas[i].last_revision + 1 > next) {
            next = deltas[i].last_revision + 1;
            prev = &deltas[i];
        }
    }
    return 0;
}

int restorer_run(const RestoreConfig *cfg, RestoreResult *out) {
    int64_t t0 = now_mono_ms();
    Snapshot *list = NULL, *deltas = NULL;
    size_t n_list = 0, n_deltas = 0;
    size_t *delta_idx = NULL;
    char *part = NULL, *full_path = NULL, *tool_log = NULL, *etcd_log = NULL;
    EtcdProc *proc = NULL;
    EtcdClient *client = NULL;
    FetchPool pool;
    pthread_t *threads = NULL;
    size_t n_threads = 0;
    Replay replay;
    int rc;
    memset(out, 0, sizeof *out);
    memset(&pool, 0, sizeof pool);
    memset(&replay, 0, sizeof replay);
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.cv, NULL);
    int lock_fd = -1;

    /* One restore at a time per parent directory: two restores into one data dir would delete
     * each other's <data-dir>.part (flock on the parent; released when the process ends). */
    char *parent = fs_dirname(cfg->data_dir);
    rc = parent ? fs_mkdir_p(parent, 0700) : err_set(ERR_NOMEM, "out of memory");
    if (!rc) {
        lock_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock_fd < 0)
            rc = err_set(ERR_IO, "open %s: %s", parent, strerror(errno));
        else if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
            rc = err_set(ERR_EXISTS,
                         "another restore into %s is running (it holds the lock on that "
                         "directory); not starting a second one",
                         parent);
            close(lock_fd);
            lock_fd = -1;
        }
    }
    free(parent);
    if (rc) goto done;

    rc = fs_dir_nonempty(cfg->data_dir);
    if (rc < 0) goto done;
    if (rc > 0) {
        rc = err_set(ERR_EXISTS, "data dir %s is not empty; refusing to restore over it",
                     cfg->data_dir);
        goto done;
    }
    rc = store_list(cfg->store, &list, &n_list);
    if (rc) goto done;
    delta_idx = calloc(n_list ? n_list : 1, sizeof *delta_idx);
    if (!delta_idx) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    ptrdiff_t full_i;
    snapname_latest_set(list, n_list, &full_i, delta_idx, &n_deltas);
    if (full_i < 0) {
        rc = err_set(ERR_NOT_FOUND,
                     "no full snapshot in store %s (%zu snapshot objects, %zu of them deltas; "
                     "snapshots are looked for under <container>/<store-prefix>/v2/ and v1/: check "
                     "--store-container and --store-prefix)",
                     store_describe(cfg->store), n_list, n_deltas);
        goto done;
    }
    const Snapshot *full = &list[full_i];
    deltas = calloc(n_deltas ? n_deltas : 1, sizeof *deltas);
    if (!deltas) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_deltas; i++)
        deltas[i] = list[delta_idx[i]];
    rc = check_contiguity(full, deltas, n_deltas);
    if (rc) goto done;
    snprintf(out->base_name, sizeof out->base_name, "%s", full->snap_name);
    log_info("restoring from %s: full snapshot %s and %zu delta snapshots up to revision %lld",
             store_describe(cfg->store), full->key, n_deltas,
             (long long)(n_deltas ? deltas[n_deltas - 1].last_revision : full->last_revision));

    part = malloc(strlen(cfg->data_dir) + 6);
    if (!part) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    sprintf(part, "%s.part", cfg->data_dir);
    if ((rc = fs_remove_tree(part)) || (rc = fs_remove_tree(cfg->temp_dir)) ||
        (rc = fs_mkdir_p(cfg->temp_dir, 0700)))
        goto done;
    full_path = fs_join(cfg->temp_dir, "snapshot-full.db");
    tool_log = fs_join(cfg->temp_dir, "snapshot-restore.log");
    etcd_log = fs_join(cfg->temp_dir, "etcd.log");
    if (!full_path || !tool_log || !etcd_log) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }

    /* deltas are fetched while the full snapshot is restored */
    pool.cfg = cfg;
    pool.deltas = deltas;
    pool.n = n_deltas;
    pool.readers = calloc(n_deltas + 1, sizeof *pool.readers);
    pool.rcs = calloc(n_deltas + 1, sizeof *pool.rcs);
    pool.errs = calloc(n_deltas + 1, sizeof *pool.errs);
    pool.ready = calloc(n_deltas + 1, sizeof *pool.ready);
    if (!pool.readers || !pool.rcs || !pool.errs || !pool.ready) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }

    uint64_t db_len = 0;
    rc = fetch_full(cfg, full, full_path, &db_len, &out->base_revision);
    if (rc) goto done;
    /* skip deltas the full snapshot already contains */
    size_t first = 0;
    while (first < n_deltas && deltas[first].last_revision <= out->base_revision)
        first++;
    pool.deltas = deltas + first;
    pool.n = n_deltas - first;
    size_t want = pool.n < (size_t)cfg->max_fetchers ? pool.n : (size_t)cfg->max_fetchers;
    threads = calloc(want + 1, sizeof *threads);
    for (size_t i = 0; threads && i < want; i++) {
        if (pthread_create(&threads[i], NULL, fetcher_main, &pool) == 0) n_threads++;
    }
    if (want && !n_threads) {
        rc = err_set(ERR_IO, "cannot start fetcher threads");
        goto done;
    }

    const char *tool = cfg->etcdutl_bin && *cfg->etcdutl_bin ? cfg->etcdutl_bin
                       : in_path("etcdutl")                  ? "etcdutl"
                                                             : "etcdctl";
    char *argv[20];
    int a = 0;
    argv[a++] = (char *)tool;
    argv[a++] = "snapshot";
    argv[a++] = "restore";
    argv[a++] = full_path;
    argv[a++] = "--name";
    argv[a++] = (char *)cfg->name;
    argv[a++] = "--initial-cluster";
    argv[a++] = (char *)cfg->initial_cluster;
    argv[a++] = "--initial-cluster-token";
    argv[a++] = (char *)cfg->initial_cluster_token;
    argv[a++] = "--initial-advertise-peer-urls";
    argv[a++] = (char *)cfg->initial_advertise_peer_urls;
    argv[a++] = "--data-dir";
    argv[a++] = part;
    if (db_len == (uint64_t)fs_file_size(full_path)) argv[a++] = "--skip-hash-check";
    argv[a] = NULL;
    rc = run_tool(argv, tool_log);
    if (rc) goto done;
    unlink(full_path);
    log_info("full snapshot %s restored into %s at revision %lld with %s", full->snap_name, part,
             (long long)out->base_revision, tool);

    int64_t final_rev = out->base_revision;
    if (pool.n) {
        int64_t tr = now_mono_ms();
        EtcdProcConfig pc = {
            .etcd_bin = cfg->etcd_bin && *cfg->etcd_bin ? cfg->etcd_bin : NULL,
            .data_dir = part,
            .name = cfg->name,
            .quota_bytes = cfg->quota_bytes,
            .max_request_bytes = cfg->max_request_bytes > TEMP_ETCD_MIN_REQUEST_BYTES
                                     ? cfg->max_request_bytes
                                     : TEMP_ETCD_MIN_REQUEST_BYTES,
            .max_txn_ops =
                cfg->max_txn_ops > TEMP_ETCD_MIN_TXN_OPS ? cfg->max_txn_ops : TEMP_ETCD_MIN_TXN_OPS,
            .unsafe_no_fsync = 1,
            /* Measured on 2 cores (bench/run.sh's replay): one P keeps etcd's proposals in
             * the order the streams arrive (with two, a third of the pipelined txns overtook
             * their predecessor and were resent) at half the CPU per txn; GC at 3x the live
             * heap instead of 2x: +25% txn/s; a backend commit every 10 ms instead of 100: +30%
             * (etcd then has fewer uncommitted writes to look through and copy); a raft
             * snapshot every 10000 entries keeps fewer entries in etcd's memory. GOMAXPROCS
             * and GOGC in the environment win. */
            .gomaxprocs = 1,
            .gogc = 200,
            .snapshot_count = 10000,
            .backend_batch_interval_ms = 10,
            .log_path = etcd_log,
            .ready_timeout_ms = 60000,
        };
        rc = etcd_proc_start(&pc, &proc);
        if (rc) goto done;
        const char *ep = etcd_proc_client_url(proc);
        EtcdConfig ec = {.endpoints = &ep, .n_endpoints = 1, .connection_timeout_ms = 120000};
        rc = etcd_client_new(&ec, &client);
        if (rc) goto done;
        int64_t cur = 0;
        rc = etcd_get_revision(client, &cur);
        if (rc) goto done;
        if (cur != out->base_revision) {
            rc = err_set(ERR_CORRUPT, "restored member is at revision %lld, the db said %lld",
                         (long long)cur, (long long)out->base_revision);
            goto done;
        }
        rc = etcd_txn_pipeline_open(client, 1, &replay.pipe);
        if (rc) goto done;
        replay.client = client;
        replay.applied = cur;
        replay.end = replay.next = cur + 1;
        for (size_t j = 0; j < pool.n; j++) {
            pthread_mutex_lock(&pool.mu);
            while (!pool.ready[j])
                pthread_cond_wait(&pool.cv, &pool.mu);
            DeltaReader *dr = pool.readers[j];
            pool.readers[j] = NULL;
            int frc = pool.rcs[j];
            pthread_mutex_unlock(&pool.mu);
            if (frc) {
                rc = err_set(frc, "%s", pool.errs[j] ? pool.errs[j] : "fetch failed");
                goto done;
            }
            rc = apply_delta(&replay, dr, &pool.deltas[j]);
            delta_reader_close(dr);
            if (rc) goto done;
            out->deltas_applied++;
            log_debug("applied %s: etcd at revision %lld", pool.deltas[j].snap_name,
                      (long long)replay.applied);
            pthread_mutex_lock(&pool.mu);
            pool.applier_idx = j + 1;
            pthread_cond_broadcast(&pool.cv);
            pthread_mutex_unlock(&pool.mu);
        }
        int64_t fin = 0;
        rc = etcd_get_revision(client, &fin);
        if (rc) goto done;
        int64_t want_rev = pool.deltas[pool.n - 1].last_revision;
        if (fin != want_rev) {
            rc = err_set(ERR_CORRUPT,
                         "restored etcd is at revision %lld, the last delta %s ends at %lld",
                         (long long)fin, pool.deltas[pool.n - 1].key, (long long)want_rev);
            goto done;
        }
        final_rev = fin;
        out->events_applied = replay.events;
        out->txns_applied = replay.txns;
        log_info("replayed %llu revisions; %llu txns were proposed before their predecessor "
                 "and sent again (%llu rounds)",
                 (unsigned long long)replay.txns, (unsigned long long)replay.resent,
                 (unsigned long long)replay.failed_rounds);
        etcd_txn_pipeline_close(replay.pipe);
        replay.pipe = NULL;
        etcd_client_free(client);
        client = NULL;
        rc = etcd_proc_stop(proc);
        proc = NULL;
        if (rc) {
            err_wrap(rc, "stopping the restore etcd");
            goto done;
        }
        out->seconds_replay = (double)(now_mono_ms() - tr) / 1000.0;
    }
    if (nftw(part, fsync_cb, 32, FTW_PHYS) != 0) {
        rc = err_set(ERR_IO, "fsync %s: %s", part, strerror(errno));
        goto done;
    }
    /* an empty target dir (allowed) is replaced */
    if (fs_exists(cfg->data_dir) && rmdir(cfg->data_dir) != 0) {
        rc = err_set(ERR_IO, "remove empty %s: %s", cfg->data_dir, strerror(errno));
        goto done;
    }
    if (rename(part, cfg->data_dir) != 0) {
        rc = err_set(ERR_IO, "rename %s -> %s: %s", part, cfg->data_dir, strerror(errno));
        goto done;
    }
    if (fsync(lock_fd) != 0) { /* lock_fd is the parent directory: makes the rename durable */
        rc = err_set(ERR_IO, "fsync directory of %s: %s", cfg->data_dir, strerror(errno));
        goto done;
    }
    out->revision = final_rev;
done:
    pthread_mutex_lock(&pool.mu);
    pool.abort = 1;
    pthread_cond_broadcast(&pool.cv);
    pthread_mutex_unlock(&pool.mu);
    for (size_t i = 0; i < n_threads; i++)
        pthread_join(threads[i], NULL);
    for (size_t i = 0; pool.readers && i < pool.n; i++) {
        delta_reader_close(pool.readers[i]);
        free(pool.errs[i]);
    }
    etcd_txn_pipeline_close(replay.pipe);
    replay_free(&replay);
    etcd_client_free(client);
    if (proc) etcd_proc_stop(proc);
    if (rc && part && lock_fd >= 0) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", err_msg());
        fs_remove_tree(part);
        err_set(rc, "%s", msg);
    }
    if (lock_fd >= 0 && cfg->temp_dir && (rc == 0 || !getenv("ETCDBR_KEEP_TEMP")))
        fs_remove_tree(cfg->temp_dir);
    if (lock_fd >= 0) close(lock_fd);
    free(threads);
    free(pool.readers);
    free(pool.rcs);
    free(pool.errs);
    free(pool.ready);
    free(part);
    free(full_path);
    free(tool_log);
    free(etcd_log);
    free(deltas);
    free(delta_idx);
    free(list);
    pthread_mutex_destroy(&pool.mu);
    pthread_cond_destroy(&pool.cv);
    out->seconds_total = (double)(now_mono_ms() - t0) / 1000.0;
    return rc;
}
