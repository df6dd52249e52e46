/* restore_fetch: see restore_fetch.h. */
#include "restore_fetch.h"
#include "fetch_cache.h"
#include "restore_stage.h"
#include "../store/snapobj.h"
#include "../format/snapshot_file.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/thread.h"
#include "../common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct RestoreFetch {
    RestoreFetchConfig c;
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
    pthread_t *threads;
    size_t n_threads;
};

/* One more object of the set is local: the download ends with the last one. */
static void fetched_one(const RestoreFetchConfig *c) {
    if (c->progress && progress_item_done(c->progress) == c->n_objects) progress_end(c->progress);
}

/* The delta from the cache (fetch_cache.h) into *out: 1, or 0 when it is not there or its copy
 * fails its hash (then removed: the caller fetches it). */
static int open_cached_delta(const RestoreFetchConfig *c, const Snapshot *snap, const char *path,
                             DeltaReader **out) {
    char extra[8];
    if (!fetch_cache_lookup(path, snap, extra, sizeof extra)) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    IoReader *r = fd >= 0 ? io_fd_reader_new(fd) : NULL;
    int rc = r ? delta_reader_open(r, c->scratch, out) : ERR_IO;
    io_reader_free(r);
    if (fd >= 0) close(fd);
    if (rc) {
        log_warn("delta %s: the cache's copy %s is not usable (%s): fetching it again", snap->key,
                 path, r ? err_msg() : "cannot open it");
        unlink(path);
    }
    return rc == 0;
}

/* Keeps the verified payload of r in the cache at path (best effort). */
static void cache_delta(const RestoreFetchConfig *c, const Snapshot *snap, const char *path,
                        const DeltaReader *r) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/.delta-XXXXXX", c->cache_dir);
    int fd = mkstemp(tmp);
    int rc = fd < 0 ? ERR_IO : delta_reader_copy_payload(r, fd);
    if (fd >= 0 && close(fd)) rc = ERR_IO;
    if (!rc && rename(tmp, path) == 0) {
        fetch_cache_commit(path, snap, "");
        return;
    }
    log_warn("could not keep delta %s in the cache %s", snap->key, c->cache_dir);
    if (fd >= 0) unlink(tmp);
}

static int open_delta(const RestoreFetchConfig *c, const Snapshot *snap, DeltaReader **out) {
    char cached[4200];
    if (c->cache_dir) {
        fetch_cache_path(c->cache_dir, c->store, snap, cached, sizeof cached);
        if (open_cached_delta(c, snap, cached, out)) {
            fetched_one(c);
            return 0;
        }
    }
    SnapObjReader *r = NULL;
    int rc = snapobj_open_read_progress(c->store, snap, c->progress, &r);
    if (rc) return rc;
    rc = delta_reader_open(snapobj_reader(r), c->scratch, out);
    if (rc)
        err_wrap(rc, "delta %s", snap->key);
    else
        fetched_one(c);
    snapobj_close(r);
    if (!rc && c->cache_dir && fetch_cache_wants(snap)) cache_delta(c, snap, cached, *out);
    return rc;
}

static void *fetcher_main(void *arg) {
    RestoreFetch *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->abort && p->next_job < p->n &&
               p->next_job >= p->applier_idx + (size_t)p->c.max_fetchers)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->abort || p->next_job >= p->n) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        size_t j = p->next_job++;
        pthread_mutex_unlock(&p->mu);

        DeltaReader *r = NULL;
        int rc = open_delta(&p->c, &p->deltas[j], &r);

        pthread_mutex_lock(&p->mu);
        p->readers[j] = r;
        p->rcs[j] = rc;
        if (rc) p->errs[j] = strdup(err_msg());
        p->ready[j] = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

typedef struct {
    const RestoreFetchConfig *c;
    FsSpaceGuard space; /* the downloaded file's free-space reserve */
    Progress *count;    /* a file read where it lies: its bytes are counted here, else NULL */
    uint64_t counted;   /* bytes already added to count */
} FetchTick;

static int fetch_tick(void *ctx, uint64_t n) {
    FetchTick *t = ctx;
    int rc = restore_stopped(t->c->stop);
    if (rc) return rc;
    if ((rc = fs_space_guard_check(&t->space, n))) return rc;
    progress_add(t->count, n - t->counted);
    t->counted = n;
    return 0;
}

/* Downloads, decompresses and verifies the full snapshot into path (snapshot_file_verify) in dir,
 * keeping dir's free-space reserve (fs_check_free_reserve);
 * *db_len = bytes before the trailer (or the whole file when skip_hash_check and there is none),
 * *revision = the etcd revision inside the db. */
static int fetch_full(const RestoreFetchConfig *cfg, const Snapshot *snap, const char *dir,
                      const char *path, uint64_t *db_len, int64_t *revision) {
    SnapObjReader *r = NULL;
    IoWriter *fdw = NULL, *checker = NULL;
    uint64_t stored = 0, count = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(ERR_IO, "create %s: %s", path, strerror(errno));
    /* store bytes -> decoded (snapobj) -> the SHA-256 trailer checked */
    int rc = snapobj_open_read_progress(cfg->store, snap, cfg->progress, &r);
    if (rc) goto done;
    fdw = io_fd_writer_new(fd);
    checker = fdw ? trailer_checker_new(fdw, 0) : NULL;
    if (!checker) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    FetchTick tick = {cfg, {dir, 0}, NULL, 0};
    rc = fs_check_free_reserve(dir, 0);
    if (!rc) rc = io_copy_tick(snapobj_reader(r), checker, NULL, fetch_tick, &tick);
    if (!rc) rc = snapobj_counts(r, &stored, &count);
    if (rc) goto done;
    rc = snapshot_file_verify(path, checker, count, cfg->skip_hash_check, 0, db_len, revision);
    if (rc) goto done;
    /* no fsync: etcd's restore reads it at once; the data dir is fsynced before the rename */
done:
    if (rc && rc != ERR_NOMEM) err_wrap(rc, "full snapshot %s", snap->key);
    io_writer_free(checker);
    io_writer_free(fdw);
    snapobj_close(r);
    close(fd);
    return rc;
}

/* A plain (uncompressed, unencrypted) full snapshot in a store whose objects are local files
 * (Local) is read where it lies: its SHA-256 trailer checked in one read, then the builder opens
 * it again through *proc_path ("/proc/self/fd/N" of *fd, owned by the caller: the same file,
 * whatever happens to its name meanwhile) instead of a copy in the scratch dir. That saves
 * writing the whole db once more (docs/restore.md). ERR_UNSUPPORTED when the object is not such
 * a file (the caller copies it as before); otherwise fetch_full's results and errors. */
int restore_full_file_check(const RestoreFetchConfig *cfg, int fd, const char *path,
                            uint64_t *db_len, int64_t *revision) {
    IoReader *r = io_fd_reader_new(fd);
    IoWriter *sink = io_counter_new(NULL, NULL);
    IoWriter *checker = sink ? trailer_checker_new(sink, 0) : NULL;
    uint64_t count = 0;
    int rc = 0;
    if (!r || !checker) {
        rc = err_set(ERR_NOMEM, "out of memory");
    } else {
        /* nothing written: no free-space check */
        FetchTick tick = {cfg, {NULL, UINT64_MAX}, cfg->progress, 0};
        rc = io_copy_tick(r, checker, &count, fetch_tick, &tick);
        if (!rc)
            rc = snapshot_file_verify(path, checker, count, cfg->skip_hash_check, 0, db_len,
                                      revision);
    }
    io_writer_free(checker);
    io_writer_free(sink);
    io_reader_free(r);
    return rc;
}

static int use_local_full(const RestoreFetchConfig *cfg, const Snapshot *snap, int *fd,
                          char *proc_path, size_t cap, uint64_t *db_len, int64_t *revision) {
    *fd = -1;
    if (snap->encrypted || snap->compression_suffix[0])
        return err_set(ERR_UNSUPPORTED, "not a plain object");
    int rc = store_open_file(cfg->store, snap, fd);
    if (rc) return rc == ERR_NOT_FOUND ? err_wrap(rc, "full snapshot %s", snap->key) : rc;
    snprintf(proc_path, cap, "/proc/self/fd/%d", *fd);
    if (access(proc_path, R_OK) != 0) { /* no /proc: copy instead */
        rc = err_set(ERR_UNSUPPORTED, "%s: %s", proc_path, strerror(errno));
    } else {
        log_info("full snapshot %s: a plain file in the store, read where it lies", snap->key);
        rc = restore_full_file_check(cfg, *fd, proc_path, db_len, revision);
        if (rc && rc != ERR_NOMEM) err_wrap(rc, "full snapshot %s", snap->key);
    }
    if (rc) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

/* The full snapshot's contents against its name: the db's revision (bbolt_etcd_revision, the
 * last revision in the key bucket) must be the last revision its name gives. One exception,
 * the Go tool's own naming: it reads the revision just before it streams the snapshot
 * (etcd-io/etcd#9037), so an untagged full snapshot may hold a few later revisions (its next
 * delta repeats them; restore applies each revision once); never one older, never one of ours
 * (named from the db), never beyond a target revision. 0 or ERR_CORRUPT naming the object. */
static int check_full_revision(int64_t target_revision, const Snapshot *full, int64_t db_rev) {
    if (db_rev == full->last_revision) return 0;
    if (db_rev < full->last_revision || full->history[0])
        return err_set(ERR_CORRUPT,
                       "full snapshot %s holds the db at revision %lld, but its name says %lld: "
                       "the name does not match the contents; refusing to restore from it",
                       full->key, (long long)db_rev, (long long)full->last_revision);
    if (target_revision && db_rev > target_revision)
        return err_set(ERR_CORRUPT,
                       "full snapshot %s holds the db at revision %lld, beyond the target "
                       "revision %lld though its name says %lld",
                       full->key, (long long)db_rev, (long long)target_revision,
                       (long long)full->last_revision);
    log_warn("full snapshot %s holds the db at revision %lld, %lld after the %lld its name says "
             "(the Go tool names a full snapshot by a revision read just before its stream): the "
             "deltas' events up to %lld are applied once",
             full->key, (long long)db_rev, (long long)(db_rev - full->last_revision),
             (long long)full->last_revision, (long long)db_rev);
    return 0;
}

int restore_fetch_full(const RestoreFetchConfig *c, const Snapshot *full, int64_t target_revision,
                       RestoreFullDb *out) {
    memset(out, 0, sizeof *out);
    int rc = use_local_full(c, full, &out->fd, out->path, sizeof out->path, &out->db_len,
                            &out->revision);
    if (rc == ERR_UNSUPPORTED) {
        int n = snprintf(out->path, sizeof out->path, "%s/snapshot-full.db", c->scratch);
        if (n < 0 || (size_t)n >= sizeof out->path)
            return err_set(ERR_INVALID, "scratch dir %s: path too long", c->scratch);
        out->copied = 1;
        rc = fetch_full(c, full, c->scratch, out->path, &out->db_len, &out->revision);
    }
    if (!rc) rc = check_full_revision(target_revision, full, out->revision);
    if (!rc) fetched_one(c);
    return rc;
}

void restore_full_db_release(RestoreFullDb *db) {
    if (db->fd >= 0)
        close(db->fd);
    else if (db->copied)
        unlink(db->path);
    db->fd = -1;
    db->copied = 0;
}

int restore_fetch_start(const RestoreFetchConfig *c, const Snapshot *deltas, size_t n,
                        RestoreFetch **out) {
    *out = NULL;
    RestoreFetch *p = calloc(1, sizeof *p);
    if (!p) return err_set(ERR_NOMEM, "out of memory");
    p->c = *c;
    p->deltas = deltas;
    p->n = n;
    pthread_mutex_init(&p->mu, NULL);
    cond_init_monotonic(&p->cv); /* timed waits on the monotonic clock */
    *out = p;
    p->readers = calloc(n + 1, sizeof *p->readers);
    p->rcs = calloc(n + 1, sizeof *p->rcs);
    p->errs = calloc(n + 1, sizeof *p->errs);
    p->ready = calloc(n + 1, sizeof *p->ready);
    if (!p->readers || !p->rcs || !p->errs || !p->ready) return err_set(ERR_NOMEM, "out of memory");
    size_t want = n < (size_t)c->max_fetchers ? n : (size_t)c->max_fetchers;
    p->threads = calloc(want + 1, sizeof *p->threads);
    for (size_t i = 0; p->threads && i < want; i++)
        if (pthread_create(&p->threads[i], NULL, fetcher_main, p) == 0) p->n_threads++;
    if (want && !p->n_threads) return err_set(ERR_IO, "cannot start fetcher threads");
    return 0;
}

int restore_fetch_take(RestoreFetch *pool, size_t j, DeltaReader **out) {
    pthread_mutex_lock(&pool->mu);
    while (!pool->ready[j]) {
        if (pool->c.stop && *pool->c.stop) {
            pthread_mutex_unlock(&pool->mu);
            return restore_stopped(pool->c.stop);
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&pool->cv, &pool->mu, &ts);
    }
    *out = pool->readers[j];
    pool->readers[j] = NULL;
    int rc = pool->rcs[j];
    pthread_mutex_unlock(&pool->mu);
    if (rc) return err_set(rc, "%s", pool->errs[j] ? pool->errs[j] : "fetch failed");
    return 0;
}

void restore_fetch_done(RestoreFetch *pool, size_t j) {
    pthread_mutex_lock(&pool->mu);
    pool->applier_idx = j + 1;
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
}

void restore_fetch_stop(RestoreFetch *pool) {
    if (!pool) return;
    cond_raise(&pool->mu, &pool->cv, &pool->abort);
    for (size_t i = 0; i < pool->n_threads; i++)
        pthread_join(pool->threads[i], NULL);
    for (size_t i = 0; pool->readers && pool->errs && i < pool->n; i++) {
        delta_reader_close(pool->readers[i]);
        free(pool->errs[i]);
    }
    FREE_ALL(pool->threads, pool->readers, pool->rcs, pool->errs, pool->ready);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    free(pool);
}
