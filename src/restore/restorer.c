/* restorer: see restorer.h. Threads: max_fetchers fetchers download, decompress and verify
 * deltas into spool files (DeltaReader) at most max_fetchers ahead of the builder; one builder
 * streams the full snapshot's db and the deltas, in order, into the new db. */
#include "restorer.h"
#include "cluster.h"
#include "memberdir.h"
#include "../store/snapobj.h"
#include "../backup/delta.h"
#include "../format/snapshot_file.h"
#include "../codec/compress.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/i64map.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../format/bbolt.h"
#include "../format/bbolt_writer.h"
#include "../format/mvcc.h"
#include "../common/thread.h"

#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int restorer_check_bump(int64_t rev, int64_t bump) {
    if (bump <= 0) return 0;
    if (rev < 0 || bump > INT64_MAX - 1 - rev)
        return err_set(ERR_INVALID,
                       "--bump-revision %lld on top of revision %lld overflows int64 (at most "
                       "%lld here): etcd could write no revision after it",
                       (long long)bump, (long long)rev,
                       rev >= 0 ? (long long)(INT64_MAX - 1 - rev) : 0LL);
    return 0;
}

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
    SnapObjReader *r = NULL;
    int rc = snapobj_open_read(cfg->store, snap, &r);
    if (rc) return rc;
    rc = delta_reader_open(snapobj_reader(r), cfg->temp_dir, out);
    if (rc) err_wrap(rc, "delta %s", snap->key);
    snapobj_close(r);
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

/* ---------- cancellation and progress ---------- */

/* Milliseconds between progress lines: 5000, or ETCDBR_PROGRESS_EVERY_MS (10-600000) for
 * operators who want them more or less often, and for tests. */
static int64_t progress_every_ms(void) {
    static int64_t every;
    if (every) return every;
    const char *e = getenv("ETCDBR_PROGRESS_EVERY_MS");
    long long v = e && *e ? strtoll(e, NULL, 10) : 0;
    every = v >= 10 && v <= 600000 ? v : 5000;
    return every;
}
#define PROGRESS_EVERY_MS progress_every_ms()

static int stopped(const RestoreConfig *cfg) {
    if (cfg->stop && *cfg->stop) return err_set(ERR_CANCELED, "restore stopped by a signal");
    return 0;
}

typedef struct {
    const RestoreConfig *cfg;
    const char *what;
    int64_t next_log_ms;
    int64_t start_ms;
    FsSpaceGuard space; /* the downloaded file's free-space reserve */
} FetchTick;

static int fetch_tick(void *ctx, uint64_t n) {
    FetchTick *t = ctx;
    int rc = stopped(t->cfg);
    if (rc) return rc;
    if ((rc = fs_space_guard_check(&t->space, n))) return rc;
    int64_t now = now_mono_ms();
    if (now >= t->next_log_ms) {
        double secs = (double)(now - t->start_ms) / 1000.0;
        log_info("downloading %s: %.1f MiB so far, %.1f MiB/s", t->what, (double)n / 1048576.0,
                 secs > 0 ? (double)n / 1048576.0 / secs : 0.0);
        t->next_log_ms = now + PROGRESS_EVERY_MS;
    }
    return 0;
}

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
    if ((rc = stopped(b->cfg))) return rc;
    int64_t now = now_mono_ms();
    if (now < b->next_log_ms) return 0;
    b->next_log_ms = now + PROGRESS_EVERY_MS;
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
    size_t need = mvcc_kv_size(&kv);
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
            cap *= 2;
        uint8_t *p = realloc(b->buf, cap);
        if (!p) return err_set(ERR_NOMEM, "out of memory for a %zu-byte key", need);
        b->buf = p;
        b->cap = cap;
    }
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
static int apply_delta(Builder *b, DeltaReader *dr, const Snapshot *snap) {
    int64_t skip_upto = b->rev, prev = 0;
    for (;;) {
        DeltaEvent ev;
        int got = 0;
        int rc = delta_reader_next(dr, &ev, &got);
        if (rc) return err_wrap(rc, "%s", snap->key);
        if (!got) break;
        if ((rc = delta_check_name_event(snap->key, snap->start_revision, snap->last_revision, prev,
                                         ev.mod_revision)))
            return rc;
        prev = ev.mod_revision;
        if (b->reached || ev.mod_revision > b->target) {
            b->reached = 1;
            continue; /* beyond the target: only checked */
        }
        /* a recorded TTL counts even on an overlapping (skipped) event */
        if (ev.lease && ev.lease_ttl > 0 && (rc = i64map_put(b->ttls, ev.lease, ev.lease_ttl)))
            return rc;
        if (ev.mod_revision <= skip_upto) continue; /* overlap: each revision once */
        if ((rc = build_event(b, &ev, snap->key))) return rc;
    }
    return delta_check_name_end(snap->key, snap->last_revision, prev);
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
/* ---------- helpers ---------- */

static int run_tool(char *const argv[], const char *log_path, atomic_int *stop) {
    pid_t pid = fork();
    if (pid < 0) return err_set(ERR_IO, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed restore leaves no tool running */
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
    int st, forwarded = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        if (stop && *stop && !forwarded) { /* the tool stops with us */
            kill(pid, SIGTERM);
            forwarded = 1;
        }
    }
    if (forwarded) return err_set(ERR_CANCELED, "restore stopped by a signal during %s", argv[0]);
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

static int fsync_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    int fd = open(path, (flag == FTW_D || flag == FTW_DP) ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return 1;
    int rc = fsync(fd);
    close(fd);
    return rc != 0;
}

/* Downloads, decompresses and verifies the full snapshot into path (snapshot_file_verify) in dir,
 * keeping dir's free-space reserve (fs_check_free_reserve);
 * *db_len = bytes before the trailer (or the whole file when skip_hash_check and there is none),
 * *revision = the etcd revision inside the db. */
static int fetch_full(const RestoreConfig *cfg, const Snapshot *snap, const char *dir,
                      const char *path, uint64_t *db_len, int64_t *revision) {
    SnapObjReader *r = NULL;
    IoWriter *fdw = NULL, *checker = NULL;
    uint64_t stored = 0, count = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(ERR_IO, "create %s: %s", path, strerror(errno));
    /* store bytes -> decoded (snapobj) -> the SHA-256 trailer checked */
    int rc = snapobj_open_read(cfg->store, snap, &r);
    if (rc) goto done;
    fdw = io_fd_writer_new(fd);
    checker = fdw ? trailer_checker_new(fdw, 0) : NULL;
    if (!checker) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    FetchTick tick = {cfg, snap->key, now_mono_ms() + PROGRESS_EVERY_MS, now_mono_ms(), {dir, 0}};
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
static int use_local_full(const RestoreConfig *cfg, const Snapshot *snap, int *fd,
                          char proc_path[64], uint64_t *db_len, int64_t *revision) {
    *fd = -1;
    if (snap->encrypted || snap->compression_suffix[0])
        return err_set(ERR_UNSUPPORTED, "not a plain object");
    int rc = store_open_file(cfg->store, snap, fd);
    if (rc) return rc == ERR_NOT_FOUND ? err_wrap(rc, "full snapshot %s", snap->key) : rc;
    snprintf(proc_path, 64, "/proc/self/fd/%d", *fd);
    IoReader *r = io_fd_reader_new(*fd);
    IoWriter *sink = io_counter_new(NULL, NULL);
    IoWriter *checker = sink ? trailer_checker_new(sink, 0) : NULL;
    uint64_t count = 0;
    if (access(proc_path, R_OK) != 0) { /* no /proc: copy instead */
        rc = err_set(ERR_UNSUPPORTED, "%s: %s", proc_path, strerror(errno));
    } else if (!r || !checker) {
        rc = err_set(ERR_NOMEM, "out of memory");
    } else {
        log_info("full snapshot %s: a plain file in the store, read where it lies", snap->key);
        FetchTick tick = {cfg,
                          snap->key,
                          now_mono_ms() + PROGRESS_EVERY_MS,
                          now_mono_ms(),
                          {NULL, UINT64_MAX}}; /* nothing written: no free-space check */
        rc = io_copy_tick(r, checker, &count, fetch_tick, &tick);
        if (!rc)
            rc = snapshot_file_verify(proc_path, checker, count, cfg->skip_hash_check, 0, db_len,
                                      revision);
        if (rc && rc != ERR_NOMEM) err_wrap(rc, "full snapshot %s", snap->key);
    }
    io_writer_free(checker);
    io_writer_free(sink);
    io_reader_free(r);
    if (rc) {
        close(*fd);
        *fd = -1;
    }
    return rc;
}

/* Checks that the deltas continue the full snapshot without holes up to `upto` (names only). */
static int check_contiguity(const Snapshot *full, const Snapshot *deltas, size_t n, int64_t upto) {
    int64_t next = full->last_revision + 1;
    const Snapshot *prev = full;
    for (size_t i = 0; i < n && next <= upto; i++) {
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

/* Waits for delta j of the pool and takes its reader (owned by the caller then). */
static int pool_take(FetchPool *pool, size_t j, DeltaReader **out) {
    pthread_mutex_lock(&pool->mu);
    while (!pool->ready[j]) {
        if (pool->cfg->stop && *pool->cfg->stop) {
            pthread_mutex_unlock(&pool->mu);
            return stopped(pool->cfg);
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

static void pool_done(FetchPool *pool, size_t j) {
    pthread_mutex_lock(&pool->mu);
    pool->applier_idx = j + 1;
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
}

/* Writes the key bucket: the full snapshot's items, then every delta revision up to the
 * target, then the bump revision. */
static int build_key_bucket(Builder *b, FetchPool *pool, BboltName *path) {
    int rc = copy_bucket(b, path, 1, NULL, 0);
    if (rc) return err_wrap(rc, "copying the full snapshot's key bucket");
    const RestoreConfig *cfg = b->cfg;
    for (size_t j = 0; j < pool->n && !b->reached && b->rev < b->target; j++) {
        const Snapshot *snap = &pool->deltas[j];
        DeltaReader *dr = NULL;
        if ((rc = pool_take(pool, j, &dr))) return rc;
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
        pool_done(pool, j);
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
    free(sorted);
    free(keys);
    free(ex);
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
    if (!rc)
        log_info("restore mark: from %s%s at revision %lld; a fork of this data dir backs up as "
                 "history %s",
                 m.from_history[0] ? "history " : "untagged backups", m.from_history,
                 (long long)m.revision, m.new_history);
    return rc;
}

/* A top-level bucket by name: key, lease and meta are built, the restore mark written, the
 * others copied. */
static int build_bucket(Builder *b, FetchPool *pool, const uint8_t *name, size_t len,
                        int in_source) {
    BboltName path[BUCKET_MAX_DEPTH + 1] = {{name, len}};
    int rc = bbolt_writer_begin_bucket(b->w, name, len);
    if (rc) return rc;
    if (name_is(name, len, MVCC_BUCKET_KEY))
        rc = build_key_bucket(b, pool, path);
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
static int build_db(Builder *b, FetchPool *pool, const char *path) {
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
            if (bucket_wanted(b, nm) &&
                (rc = build_bucket(b, pool, (const uint8_t *)nm, strlen(nm), 0)))
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
        if ((rc = build_bucket(b, pool, it.key, it.key_len, 1))) goto done;
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
static void warn_plain_with_keys(const RestoreConfig *cfg, const Snapshot *full,
                                 const Snapshot *deltas, size_t n) {
    if (!store_keyring(cfg->store)) return;
    size_t plain = full->encrypted ? 0 : 1;
    for (size_t i = 0; i < n; i++)
        plain += !deltas[i].encrypted;
    if (plain)
        log_warn("encryption keys are given, but %zu object(s) of the set restored are not "
                 "encrypted (from %s: written before the store turned encryption on): they are "
                 "restored unauthenticated",
                 plain, full->encrypted ? deltas[0].key : full->key);
}

/* The full snapshot's contents against its name: the db's revision (bbolt_etcd_revision, the
 * last revision in the key bucket) must be the last revision its name gives. One exception,
 * the Go tool's own naming: it reads the revision just before it streams the snapshot
 * (etcd-io/etcd#9037), so an untagged full snapshot may hold a few later revisions (its next
 * delta repeats them; restore applies each revision once); never one older, never one of ours
 * (named from the db), never beyond a target revision. 0 or ERR_CORRUPT naming the object. */
static int check_full_revision(const RestoreConfig *cfg, const Snapshot *full, int64_t db_rev) {
    if (db_rev == full->last_revision) return 0;
    if (db_rev < full->last_revision || full->history[0])
        return err_set(ERR_CORRUPT,
                       "full snapshot %s holds the db at revision %lld, but its name says %lld: "
                       "the name does not match the contents; refusing to restore from it",
                       full->key, (long long)db_rev, (long long)full->last_revision);
    if (cfg->target_revision && db_rev > cfg->target_revision)
        return err_set(ERR_CORRUPT,
                       "full snapshot %s holds the db at revision %lld, beyond the target "
                       "revision %lld though its name says %lld",
                       full->key, (long long)db_rev, (long long)cfg->target_revision,
                       (long long)full->last_revision);
    log_warn("full snapshot %s holds the db at revision %lld, %lld after the %lld its name says "
             "(the Go tool names a full snapshot by a revision read just before its stream): the "
             "deltas' events up to %lld are applied once",
             full->key, (long long)db_rev, (long long)(db_rev - full->last_revision),
             (long long)full->last_revision, (long long)db_rev);
    return 0;
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

#define SCRATCH_PREFIX "etcdbr-restore."

/* A private scratch directory inside temp_dir, locked for this process (fs_scratch_create). */
/* cfg->check_old_token: whether a member ID of the restored cluster is one of the backed-up
 * cluster's (its "members" bucket; keys are IDs in hex as etcd's types.ID prints them). */
static int check_old_token(const RestoreConfig *cfg, const RestoreMember *ms, size_t nm,
                           BboltDb *db, RestoreResult *out) {
    for (size_t i = 0; i < nm; i++) {
        uint64_t id = cluster_member_id(ms[i].peer_urls, cfg->initial_cluster_token);
        char key[17];
        int kl = snprintf(key, sizeof key, "%llx", (unsigned long long)id);
        if (bbolt_get(db, "members", key, (size_t)kl, NULL, 0, NULL) != 0) continue;
        const char *what =
            "member %s would get ID %s, a member ID of the backed-up cluster: "
            "--initial-cluster-token \"%s\" and its peer URLs are the old cluster's, so a "
            "member of the old cluster could talk to the restored one as its own. Give the "
            "restored cluster a new token (e.g. --initial-cluster-token=%s-restored-YYYYMMDD), "
            "the same on every member and in every member's etcd flags";
        if (cfg->check_old_token >= 2) {
            out->target_refused = 1;
            return err_set(ERR_INVALID, what, ms[i].name, key, cfg->initial_cluster_token,
                           cfg->initial_cluster_token);
        }
        log_warn(what, ms[i].name, key, cfg->initial_cluster_token, cfg->initial_cluster_token);
        return 0;
    }
    return 0;
}

/* Opens (and flocks) the parent directory of data_dir into *fd, unless an earlier member's
 * parent (fds[0..i)) is the same directory: then *fd is that one and *owned 0. */
static int lock_parent(const char *data_dir, const int *fds, size_t i, int *fd, int *owned) {
    *fd = -1;
    *owned = 0;
    char *parent = fs_dirname(data_dir);
    int rc = parent ? fs_mkdir_p(parent, 0700) : err_set(ERR_NOMEM, "out of memory");
    if (rc) goto done;
    int f = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f < 0) {
        rc = err_set(ERR_IO, "open %s: %s", parent, strerror(errno));
        goto done;
    }
    struct stat st, other;
    if (fstat(f, &st) == 0)
        for (size_t j = 0; j < i; j++)
            if (fds[j] >= 0 && fstat(fds[j], &other) == 0 && other.st_dev == st.st_dev &&
                other.st_ino == st.st_ino) {
                close(f);
                *fd = fds[j];
                goto done;
            }
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        rc = err_set(ERR_EXISTS,
                     "another restore into %s is running (it holds the lock on that "
                     "directory); not starting a second one",
                     parent);
        close(f);
        goto done;
    }
    *fd = f;
    *owned = 1;
done:
    free(parent);
    return rc;
}

/* "<data-dir>.part": etcd's restore tool writes the member dir into "<data-dir>.part/data-dir"
 * (the tool wants a new directory; the marker stays outside the data dir), which is then renamed
 * to data_dir. A "<data-dir>.part" left by an earlier restore that was killed is removed; one
 * without our marker is the operator's and is never touched (ERR_EXISTS naming it). The caller
 * holds the lock on the parent directory. *part and *data owned; both NULL on error. */
static int make_part(const char *data_dir, char **part, char **data) {
    *part = *data = NULL;
    size_t n = strlen(data_dir) + sizeof ".part";
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.part", data_dir);
    char *d = p ? fs_join(p, "data-dir") : NULL;
    int rc = d ? 0 : err_set(ERR_NOMEM, "out of memory");
    if (!rc && fs_exists(p) && (rc = fs_scratch_dir_remove(p, "a restore's work in progress")) == 0)
        log_info("removed %s, left by an earlier restore that did not finish", p);
    if (!rc) {
        char note[4200];
        snprintf(note, sizeof note,
                 "work in progress of an etcdbr restore into %s; removed when the restore ends "
                 "(or by the next one, when this one was killed)\n",
                 data_dir);
        rc = fs_scratch_dir_make(p, note);
        if (rc == ERR_EXISTS) /* appeared since: another process, not under our lock */
            rc = err_set(rc, "%s appeared while a restore was starting; not touching it", p);
    }
    if (rc) {
        free(p);
        free(d);
        return rc;
    }
    *part = p;
    *data = d;
    return 0;
}

/* For a member dir of ours (no --etcdutl-bin, no db sink): --initial-cluster parsed (*ic) and
 * checked for every member written as etcd's tool checks it, and the db items of its membership
 * (*items). Before anything is downloaded; a refusal is a usage error (target_refused). */
static int plan_member_dirs(const RestoreConfig *cfg, const RestoreMember *ms, size_t nm,
                            InitialCluster *ic, MemberDbItems *items, RestoreResult *out) {
    const char *token = cfg->initial_cluster_token ? cfg->initial_cluster_token : "";
    int rc = initial_cluster_parse(cfg->initial_cluster ? cfg->initial_cluster : "", token, ic);
    for (size_t i = 0; !rc && i < nm; i++) {
        const char *urls = ms[i].peer_urls && *ms[i].peer_urls ? ms[i].peer_urls : NULL;
        rc = memberdir_check(ic, ms[i].name, urls);
    }
    if (!rc) rc = memberdir_db_items(ic, items);
    if (rc == ERR_INVALID) out->target_refused = 1;
    return rc;
}

/* Our member dirs: member 0's db was built in place (db_path); every other member gets a copy
 * of it, then each its WAL and snap file (memberdir.h), everything fsynced. */
static int write_member_dirs(const RestoreConfig *cfg, const RestoreMember *ms, size_t nm,
                             char **part_data, const InitialCluster *ic, const char *db_path) {
    int rc = 0;
    for (size_t i = 0; i < nm && !rc; i++) {
        if ((rc = stopped(cfg))) break;
        if (i > 0 && !(rc = memberdir_make_dirs(part_data[i])))
            rc = memberdir_copy_db(db_path, part_data[i]);
        if (!rc) rc = memberdir_write_raft(part_data[i], ic, ms[i].name);
        if (rc && nm > 1) rc = err_wrap(rc, "member %s", ms[i].name);
        if (!rc && nm > 1)
            log_info("member %s: member dir written to %s (peer URLs %s)", ms[i].name, part_data[i],
                     ms[i].peer_urls);
    }
    return rc;
}

/* --etcdutl-bin (a fallback, off by default): etcd's own tool writes each member dir from the
 * db at db_path (which it copies), its output in tool_log; every member dir fsynced after. */
static int run_restore_tool(const RestoreConfig *cfg, const RestoreMember *ms, size_t nm,
                            char **parts, char **part_data, const char *db_path,
                            const char *tool_log) {
    for (size_t i = 0; i < nm; i++) {
        char *argv[20];
        int a = 0, rc;
        argv[a++] = (char *)cfg->etcdutl_bin;
        argv[a++] = "snapshot";
        argv[a++] = "restore";
        argv[a++] = (char *)db_path; /* the tool copies it; every member gets the same db */
        argv[a++] = "--name";
        argv[a++] = (char *)ms[i].name;
        argv[a++] = "--initial-cluster";
        argv[a++] = (char *)cfg->initial_cluster;
        argv[a++] = "--initial-cluster-token";
        argv[a++] = (char *)cfg->initial_cluster_token;
        argv[a++] = "--initial-advertise-peer-urls";
        argv[a++] = (char *)ms[i].peer_urls;
        argv[a++] = "--data-dir";
        argv[a++] = part_data[i];
        /* our db has no sha256 trailer; a full snapshot's trailer was checked by fetch_full (the
         * tool then only cuts it off) */
        argv[a++] = "--skip-hash-check";
        argv[a] = NULL;
        if ((rc = stopped(cfg))) return rc;
        rc = run_tool(argv, tool_log, cfg->stop);
        if (!rc) rc = stopped(cfg); /* a signal during the tool: not committed yet, so clean up */
        if (rc) return nm > 1 ? err_wrap(rc, "member %s", ms[i].name) : rc;
        if (nftw(parts[i], fsync_cb, 32, FTW_PHYS) != 0)
            return err_set(ERR_IO, "fsync %s: %s", parts[i], strerror(errno));
        if (nm > 1)
            log_info("member %s: member dir written to %s by %s (peer URLs %s)", ms[i].name,
                     part_data[i], cfg->etcdutl_bin, ms[i].peer_urls);
    }
    return 0;
}

static int make_scratch(const char *temp_dir, char **out, int *lock_fd, int *made_temp_dir) {
    return fs_scratch_create(temp_dir, SCRATCH_PREFIX, "restore", out, lock_fd, made_temp_dir);
}

/* One restore's state, stage by stage (restorer_run). */
typedef struct {
    const RestoreConfig *cfg;
    RestoreResult *out;
    /* targets: the members' data dirs, their parents' locks and "<data-dir>.part" dirs */
    RestoreMember single;
    const RestoreMember *ms;
    size_t nm, committed;
    int own_dirs; /* the member dirs are ours (not etcd's tool's, not a db sink) */
    int *lock_fds, *owns;
    char **parts, **part_data;
    InitialCluster ic;
    MemberDbItems items;
    /* plan: the set */
    Snapshot *list, *deltas;
    size_t n_list, n_deltas;
    size_t *delta_idx;
    const Snapshot *full;
    int64_t store_last; /* the set's last revision */
    /* scratch */
    char *scratch, *full_path, *db_path, *db_dir, *tool_log;
    int scratch_lock, made_temp_dir;
    /* fetch */
    RestoreConfig fetch_cfg;
    FetchPool pool;
    pthread_t *threads;
    size_t n_threads;
    int full_fd;        /* the store's own file of the full snapshot (use_local_full) */
    char full_proc[64]; /* its /proc/self/fd path */
    uint64_t db_len;
    /* build */
    Builder b;
    int64_t final_rev;
} RestoreRun;

static int run_init(RestoreRun *r, const RestoreConfig *cfg, RestoreResult *out) {
    memset(r, 0, sizeof *r);
    memset(out, 0, sizeof *out);
    r->cfg = cfg;
    r->out = out;
    r->full_fd = r->scratch_lock = -1;
    pthread_mutex_init(&r->pool.mu, NULL);
    cond_init_monotonic(&r->pool.cv); /* timed waits on the monotonic clock */
    /* the member dirs are ours unless --etcdutl-bin asks for etcd's tool (or a sink takes the
     * db) */
    r->own_dirs = !cfg->db_sink && !(cfg->etcdutl_bin && *cfg->etcdutl_bin);
    r->single = (RestoreMember){cfg->name, cfg->data_dir, cfg->initial_advertise_peer_urls};
    r->ms = cfg->n_members ? cfg->members : &r->single;
    r->nm = cfg->db_sink ? 0 : cfg->n_members ? cfg->n_members : 1;
    r->lock_fds = malloc((r->nm + 1) * sizeof *r->lock_fds);
    r->owns = calloc(r->nm + 1, sizeof *r->owns);
    r->parts = calloc(r->nm + 1, sizeof *r->parts);
    r->part_data = calloc(r->nm + 1, sizeof *r->part_data);
    for (size_t i = 0; r->lock_fds && i <= r->nm; i++)
        r->lock_fds[i] = -1;
    if (!r->lock_fds || !r->owns || !r->parts || !r->part_data)
        return err_set(ERR_NOMEM, "out of memory");
    return 0;
}

/* Stage 1, the targets: the flags agree, each data dir is distinct and empty, its parent locked
 * for this restore (two restores into one data dir would delete each other's <data-dir>.part;
 * the flock is released when the process ends), and our member dirs' identities planned. */
static int stage_targets(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    if (cfg->target_revision && cfg->target_time_ns) {
        r->out->target_refused = 1;
        return err_set(ERR_INVALID, "a target revision and a target time exclude each other");
    }
    if (cfg->mark_compacted && cfg->bump_revision <= 0) {
        r->out->target_refused = 1;
        return err_set(ERR_INVALID, "marking compacted needs a revision bump (as etcdutl)");
    }
    for (size_t i = 0; i < r->nm; i++) {
        const RestoreMember *m = &r->ms[i];
        for (size_t j = 0; j < i; j++)
            if (strcmp(m->data_dir, r->ms[j].data_dir) == 0) {
                r->out->target_refused = 1;
                return err_set(ERR_INVALID, "members %s and %s are given the same data dir %s",
                               r->ms[j].name, m->name, m->data_dir);
            }
        int rc = lock_parent(m->data_dir, r->lock_fds, i, &r->lock_fds[i], &r->owns[i]);
        if (rc) return rc;
        rc = fs_dir_nonempty(m->data_dir);
        if (rc < 0) return rc;
        if (rc > 0)
            return err_set(ERR_EXISTS,
                           "data dir %s is not empty; refusing to restore over it (nothing is "
                           "ever deleted: move it aside, e.g. mv %s %s.old)",
                           m->data_dir, m->data_dir, m->data_dir);
    }
    if (r->own_dirs) return plan_member_dirs(cfg, r->ms, r->nm, &r->ic, &r->items, r->out);
    return 0;
}

/* The full snapshot of the set the target asks for, into *full_i (-1: none); its deltas' indexes
 * into r->delta_idx, r->n_deltas. ERR_NOT_FOUND with a message naming what was looked for. */
static int choose_full(RestoreRun *r, ptrdiff_t *full_i) {
    const RestoreConfig *cfg = r->cfg;
    /* --time: a full snapshot named at second t was taken before t+1 */
    int64_t max_created = cfg->target_time_ns ? cfg->target_time_ns / 1000000000LL - 1 : 0;
    snapname_set_at(r->list, r->n_list, cfg->target_revision, max_created, full_i, r->delta_idx,
                    &r->n_deltas);
    if (*full_i < 0 && cfg->target_time_ns) { /* one taken within the second of the time */
        max_created = cfg->target_time_ns / 1000000000LL;
        snapname_set_at(r->list, r->n_list, 0, max_created, full_i, r->delta_idx, &r->n_deltas);
        if (*full_i >= 0)
            log_warn("the only full snapshot before the target time was named in its second: "
                     "its revision may include writes up to a second after it");
    }
    if (*full_i >= 0) return 0;
    if (cfg->target_revision || cfg->target_time_ns)
        return err_set(ERR_NOT_FOUND,
                       "no full snapshot in store %s at or before the target %s (%zu snapshot "
                       "objects)",
                       store_describe(cfg->store), cfg->target_revision ? "revision" : "time",
                       r->n_list);
    return err_set(ERR_NOT_FOUND,
                   "no full snapshot in store %s (%zu snapshot objects, %zu of them deltas; "
                   "snapshots are looked for under <container>/<store-prefix>/v2/ and v1/: check "
                   "--store-container and --store-prefix)",
                   store_describe(cfg->store), r->n_list, r->n_deltas);
}

/* Stage 2, the plan: one listing, the set (the newest full snapshot at or before the target and
 * the deltas after it up to the target), checked before anything is downloaded: the target
 * within the backups, the revision bump within range, the deltas contiguous. */
static int stage_plan(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    int rc = store_list(cfg->store, &r->list, &r->n_list);
    if (!rc) rc = leave_out_plain(r->list, &r->n_list);
    if (rc) return rc;
    r->delta_idx = calloc(r->n_list ? r->n_list : 1, sizeof *r->delta_idx);
    if (!r->delta_idx) return err_set(ERR_NOMEM, "out of memory");
    ptrdiff_t full_i;
    if ((rc = choose_full(r, &full_i))) return rc;
    const Snapshot *full = r->full = &r->list[full_i];
    warn_other_histories(r->list, r->n_list, full);
    r->deltas = calloc(r->n_deltas ? r->n_deltas : 1, sizeof *r->deltas);
    if (!r->deltas) return err_set(ERR_NOMEM, "out of memory");
    size_t kept = 0;
    for (size_t i = 0; i < r->n_deltas; i++) {
        const Snapshot *d = &r->list[r->delta_idx[i]];
        if (d->last_revision <= full->last_revision) continue; /* inside the full snapshot */
        if (cfg->target_revision && d->start_revision > cfg->target_revision) break;
        r->deltas[kept++] = *d;
    }
    r->n_deltas = kept;
    warn_plain_with_keys(cfg, full, r->deltas, r->n_deltas);
    int64_t last = r->n_deltas ? r->deltas[r->n_deltas - 1].last_revision : full->last_revision;
    r->store_last = last < full->last_revision ? full->last_revision : last;
    if ((rc = restorer_check_bump(cfg->target_revision ? cfg->target_revision : r->store_last,
                                  cfg->bump_revision))) {
        r->out->target_refused = 1;
        return rc;
    }
    if (cfg->target_revision > r->store_last) {
        r->out->target_refused = 1;
        return err_set(ERR_INVALID,
                       "target revision %lld is beyond the store's backups, which end at "
                       "revision %lld",
                       (long long)cfg->target_revision, (long long)r->store_last);
    }
    int64_t upto = cfg->target_revision ? cfg->target_revision : INT64_MAX;
    if ((rc = check_contiguity(full, r->deltas, r->n_deltas, upto))) return rc;
    snprintf(r->out->base_name, sizeof r->out->base_name, "%s", full->snap_name);
    log_info("restoring from %s: full snapshot %s and %zu delta snapshots, up to %s %lld",
             store_describe(cfg->store), full->key, r->n_deltas,
             cfg->target_revision ? "the target revision" : "revision",
             (long long)(cfg->target_revision ? cfg->target_revision : r->store_last));
    if (r->n_deltas) {
        const Snapshot *ld = &r->deltas[r->n_deltas - 1];
        r->out->last_delta_revision = ld->last_revision;
        snprintf(r->out->last_delta_suffix, sizeof r->out->last_delta_suffix, "%s",
                 ld->compression_suffix);
    }
    return 0;
}

/* Stage 3, the work dirs: each member's "<data-dir>.part", the private scratch dir, and the db's
 * place (ours: built in place in the first member's member/snap). */
static int stage_prepare(RestoreRun *r) {
    int rc;
    for (size_t i = 0; i < r->nm; i++)
        if ((rc = make_part(r->ms[i].data_dir, &r->parts[i], &r->part_data[i]))) return rc;
    if ((rc = make_scratch(r->cfg->temp_dir, &r->scratch, &r->scratch_lock, &r->made_temp_dir)))
        return rc;
    r->full_path = fs_join(r->scratch, "snapshot-full.db");
    if (r->own_dirs && (rc = memberdir_make_dirs(r->part_data[0]))) return rc;
    r->db_path =
        r->own_dirs ? memberdir_db_path(r->part_data[0]) : fs_join(r->scratch, "restored.db");
    r->db_dir = r->db_path ? fs_dirname(r->db_path) : NULL;
    r->tool_log = fs_join(r->scratch, "snapshot-restore.log");
    if (!r->full_path || !r->db_path || !r->db_dir || !r->tool_log)
        return err_set(ERR_NOMEM, "out of memory");
    return 0;
}

/* Stage 4, the fetch: the full snapshot read in place (Local) or downloaded and checked, while
 * up to --max-fetchers threads fetch the deltas ahead of the build. */
static int stage_fetch(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    FetchPool *pool = &r->pool;
    r->fetch_cfg = *cfg;
    r->fetch_cfg.temp_dir = r->scratch;
    pool->cfg = &r->fetch_cfg;
    pool->readers = calloc(r->n_deltas + 1, sizeof *pool->readers);
    pool->rcs = calloc(r->n_deltas + 1, sizeof *pool->rcs);
    pool->errs = calloc(r->n_deltas + 1, sizeof *pool->errs);
    pool->ready = calloc(r->n_deltas + 1, sizeof *pool->ready);
    if (!pool->readers || !pool->rcs || !pool->errs || !pool->ready)
        return err_set(ERR_NOMEM, "out of memory");
    int rc =
        use_local_full(cfg, r->full, &r->full_fd, r->full_proc, &r->db_len, &r->out->base_revision);
    if (rc == ERR_UNSUPPORTED)
        rc = fetch_full(cfg, r->full, r->scratch, r->full_path, &r->db_len, &r->out->base_revision);
    if (!rc) rc = check_full_revision(cfg, r->full, r->out->base_revision);
    if (rc) return rc;
    pool->deltas = r->deltas;
    pool->n = r->n_deltas;
    size_t want = pool->n < (size_t)cfg->max_fetchers ? pool->n : (size_t)cfg->max_fetchers;
    r->threads = calloc(want + 1, sizeof *r->threads);
    for (size_t i = 0; r->threads && i < want; i++)
        if (pthread_create(&r->threads[i], NULL, fetcher_main, pool) == 0) r->n_threads++;
    if (want && !r->n_threads) return err_set(ERR_IO, "cannot start fetcher threads");
    return 0;
}

/* Stage 5, the db: the full snapshot's db streamed into a new one with every delta revision
 * appended (build_db). The db is always rebuilt, even with nothing to add to the full snapshot:
 * it carries the restore mark (history.h) that lets the restored etcd be backed up into this
 * store. */
static int stage_build(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    RestoreResult *out = r->out;
    Builder *b = &r->b;
    int64_t tb = now_mono_ms();
    b->cfg = cfg;
    b->space = (FsSpaceGuard){r->db_dir, 0};
    b->membership = r->own_dirs ? &r->items : NULL;
    b->out = out;
    b->start_ms = tb;
    b->next_log_ms = tb + PROGRESS_EVERY_MS;
    b->last_rev = cfg->target_revision ? cfg->target_revision : r->store_last;
    b->rev = out->base_revision;
    b->sub = INT64_MAX; /* nothing may continue the full snapshot's last revision */
    b->target = cfg->target_revision ? cfg->target_revision : INT64_MAX;
    int rc;
    if ((rc = i64map_new(&b->known)) || (rc = i64map_new(&b->added)) || (rc = i64map_new(&b->ttls)))
        return rc;
    snprintf(b->history, sizeof b->history, "%s", r->full->history);
    rc = bbolt_open(r->full_fd >= 0 ? r->full_proc : r->full_path, r->db_len, &b->src);
    if (rc) return rc;
    if (cfg->check_old_token && (rc = check_old_token(cfg, r->ms, r->nm, b->src, out))) return rc;
    rc = build_db(b, &r->pool, r->db_path);
    bbolt_close(b->src);
    b->src = NULL;
    if (r->full_fd >= 0) {
        close(r->full_fd);
        r->full_fd = -1;
    } else {
        unlink(r->full_path);
    }
    if (rc) return rc;
    r->final_rev = b->rev + (cfg->bump_revision > 0 ? cfg->bump_revision : 0);
    if (cfg->quota_bytes > 0 && out->db_bytes > (uint64_t)cfg->quota_bytes)
        log_warn("the restored db is %llu bytes, above --embedded-etcd-quota-bytes %lld: start "
                 "etcd with a --quota-backend-bytes at least that large",
                 (unsigned long long)out->db_bytes, (long long)cfg->quota_bytes);
    out->seconds_build = (double)(now_mono_ms() - tb) / 1000.0;
    log_info("db built: revision %lld (%llu revisions from %zu deltas on full snapshot revision "
             "%lld%s), %llu leases kept, %llu added (%llu with --new-lease-ttl), %.1f MiB in %.3fs",
             (long long)r->final_rev, (unsigned long long)out->revisions_applied,
             out->deltas_applied, (long long)out->base_revision,
             cfg->bump_revision > 0 ? ", bumped" : "", (unsigned long long)out->leases_kept,
             (unsigned long long)out->leases_added, (unsigned long long)out->leases_defaulted,
             (double)out->db_bytes / 1048576.0, out->seconds_build);
    return 0;
}

/* Stage 6, the member dirs around the db (ours, or etcd's tool with --etcdutl-bin), then the
 * swap: every "<data-dir>.part" renamed into place once all are written. An empty target dir
 * (allowed) is replaced; nothing else ever is: the target was checked empty under the lock on
 * its parent, and the parent (and the .part dir) are fsynced, so each rename is durable. */
static int stage_member_dirs_and_swap(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    int rc = r->own_dirs ? write_member_dirs(cfg, r->ms, r->nm, r->part_data, &r->ic, r->db_path)
                         : run_restore_tool(cfg, r->ms, r->nm, r->parts, r->part_data, r->db_path,
                                            r->tool_log);
    if (rc) return rc;
    if (!r->own_dirs) unlink(r->db_path);
    for (size_t i = 0; i < r->nm; i++, r->committed++) {
        const char *dir = r->ms[i].data_dir;
        if (fs_exists(dir) && rmdir(dir) != 0)
            return err_set(ERR_IO, "remove empty %s: %s", dir, strerror(errno));
        if ((rc = fs_rename_durable(r->part_data[i], dir))) return rc;
    }
    for (size_t i = 0; i < r->nm; i++) /* only our marker is left in each */
        if (fs_scratch_dir_remove(r->parts[i], "a restore's work in progress"))
            log_warn("restored, but %s", err_msg());
    r->out->revision = r->final_rev;
    return 0;
}

/* Stops the fetchers and frees what r holds; on failure (rc) removes every "<data-dir>.part"
 * this restore made and says which data dirs were already committed. */
static void run_finish(RestoreRun *r, int rc) {
    FetchPool *pool = &r->pool;
    pthread_mutex_lock(&pool->mu);
    pool->abort = 1;
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    for (size_t i = 0; i < r->n_threads; i++)
        pthread_join(r->threads[i], NULL);
    for (size_t i = 0; pool->readers && i < pool->n; i++) {
        delta_reader_close(pool->readers[i]);
        free(pool->errs[i]);
    }
    bbolt_close(r->b.src);
    free(r->b.buf);
    i64map_free(r->b.known);
    i64map_free(r->b.added);
    i64map_free(r->b.ttls);
    if (rc && r->parts) {
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", err_msg());
        for (size_t i = 0; i < r->nm; i++) /* ours (made by make_part); committed: marker only */
            if (r->parts[i] && r->lock_fds[i] >= 0)
                fs_scratch_dir_remove(r->parts[i], "a restore's work in progress");
        if (r->committed) /* a rename or fsync failed after others were committed */
            err_set(rc, "%s (the data dirs of the first %zu members were already written)", msg,
                    r->committed);
        else
            err_set(rc, "%s", msg);
    }
    if (r->scratch && (rc == 0 || !getenv("ETCDBR_KEEP_TEMP")) &&
        fs_remove_marked_tree(r->scratch, FS_SCRATCH_MARKER) == 0)
        fs_scratch_temp_dir_release(r->cfg->temp_dir, r->made_temp_dir);
    if (r->scratch_lock >= 0) close(r->scratch_lock);
    for (size_t i = 0; r->lock_fds && r->owns && i < r->nm; i++)
        if (r->owns[i]) close(r->lock_fds[i]);
    free(r->threads);
    free(pool->readers);
    free(pool->rcs);
    free(pool->errs);
    free(pool->ready);
    for (size_t i = 0; r->parts && i < r->nm; i++) {
        free(r->parts[i]);
        free(r->part_data[i]);
    }
    free(r->parts);
    free(r->part_data);
    free(r->lock_fds);
    free(r->owns);
    free(r->scratch);
    if (r->full_fd >= 0) close(r->full_fd);
    free(r->full_path);
    free(r->db_path);
    free(r->db_dir);
    free(r->tool_log);
    initial_cluster_free(&r->ic);
    memberdir_db_items_free(&r->items);
    free(r->deltas);
    free(r->delta_idx);
    free(r->list);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
}

int restorer_run(const RestoreConfig *cfg, RestoreResult *out) {
    int64_t t0 = now_mono_ms();
    RestoreRun r;
    int rc = run_init(&r, cfg, out);
    if (!rc) rc = stage_targets(&r);
    if (!rc) rc = stage_plan(&r);
    if (!rc) rc = stage_prepare(&r);
    if (!rc) rc = stage_fetch(&r);
    if (!rc) rc = stage_build(&r);
    if (!rc && cfg->db_sink) { /* compact: the db goes to the sink, no member dirs */
        out->revision = r.final_rev;
        if ((rc = stopped(cfg)) == 0) rc = cfg->db_sink(cfg->db_sink_ctx, r.db_path, r.full, out);
    } else if (!rc) {
        rc = stage_member_dirs_and_swap(&r);
    }
    run_finish(&r, rc);
    out->seconds_total = (double)(now_mono_ms() - t0) / 1000.0;
    return rc;
}
