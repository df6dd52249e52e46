/* fullsnap: see fullsnap.h. Memory: one gRPC message plus fixed copy buffers. */
#include "fullsnap.h"
#include "delta.h"
#include "../codec/filter_group.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/progress.h"
#include "../common/timeutil.h"
#include "../format/bbolt.h"

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
    IoWriter *checker;
    const uint64_t *count; /* bytes through the checker */
    Progress *progress;
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
    rc = io_write(s->checker, buf, len);
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

/* fullsnap_store_stream reporting the bytes read from src to progress (may be NULL); with
 * cancel_on_stop, ERR_CANCELED (nothing stored) once the process is stopping. */
static int store_stream(Store *store, const char *snap_name, CompressKind compression,
                        IoReader *src, uint64_t *stored_bytes, Progress *progress,
                        int cancel_on_stop) {
    StoreWriter *sw = NULL;
    IoFilterGroup *g = NULL;
    int rc = store_open_write(store, snap_name, &sw);
    if (rc == ERR_EXISTS) {
        /* the name fixes kind, revisions and the second: an object already stored under it
         * holds the same revisions (e.g. two full snapshots requested in one second) */
        if (stored_bytes) *stored_bytes = 0;
        return 0;
    }
    if (rc) return rc;
    /* the name decides: ".enc" (store_name_suffix) means compress, then encrypt */
    Snapshot named;
    rc = store_snapshot_for_name(store, snap_name, &named);
    if (!rc && named.encrypted && !store_keyring(store))
        rc = err_set(ERR_INVALID, "%s: an encrypted name, but the store has no encryption key",
                     snap_name);
    if (rc) goto done;
    g = io_filter_group_new(store_writer_io(sw));
    if (!g) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = io_filter_group_add_compress(g, compression);
    char ident[128]; /* the name is bound into every chunk: under another name it fails */
    if (!rc && named.encrypted && !(rc = snapname_identity(&named, ident, sizeof ident)))
        rc = io_filter_group_add_encrypt_bound(g, store_keyring(store), ident);
    if (!rc) rc = io_filter_group_add_count(g, "stored");
    IoWriter *in = rc ? NULL : io_filter_group_io(g);
    if (!rc && !in) rc = err_set(ERR_NOMEM, "out of memory");
    TickCtx tick = {progress, cancel_on_stop};
    if (!rc) rc = io_copy_tick(src, in, NULL, progress_tick, &tick);
    if (!rc) rc = io_filter_group_finish(g);
    if (!rc) rc = io_finish(store_writer_io(sw));
    if (rc) goto done;
    uint64_t n = 0;
    io_filter_group_count(g, "stored", &n);
    if (stored_bytes) *stored_bytes = n;
    io_filter_group_free(g);
    g = NULL;
    rc = store_writer_commit(sw);
    sw = NULL;
    if (rc == ERR_EXISTS) {
        /* another writer stored the same name between our check and our commit: the same
         * revisions in the same second, so it is stored (as the check above decides) */
        if (stored_bytes) *stored_bytes = 0;
        rc = 0;
    }
done:
    io_filter_group_free(g);
    if (sw) store_writer_abort(sw);
    return rc;
}

int fullsnap_store_stream(Store *store, const char *snap_name, CompressKind compression,
                          IoReader *src, uint64_t *stored_bytes) {
    /* the deltas' path: the last delta is stored while the process stops */
    return store_stream(store, snap_name, compression, src, stored_bytes, NULL, 0);
}

int fullsnap_verify_file(const char *path, IoWriter *checker, uint64_t total,
                         int allow_missing_trailer, int full_walk, uint64_t *db_len,
                         int64_t *revision) {
    int rc;
    if (total == 0) return err_set(ERR_CORRUPT, "empty object");
    if (total % 512 == 32) {
        rc = trailer_check_result(checker, db_len);
        if (rc) return rc;
    } else if (allow_missing_trailer) {
        *db_len = total;
    } else {
        return err_set(ERR_CORRUPT,
                       "%llu bytes is not db pages plus a 32-byte sha256 trailer "
                       "(size %% 512 != 32): snapshot missing hash",
                       (unsigned long long)total);
    }
    BboltDb *db = NULL;
    rc = bbolt_open(path, *db_len, &db);
    if (!rc && full_walk) rc = bbolt_check(db, NULL);
    if (!rc) rc = bbolt_etcd_revision(db, revision);
    bbolt_close(db);
    if (rc) return err_wrap(ERR_CORRUPT, "not a valid etcd db");
    return 0;
}

int fullsnap_take(EtcdClient *c, Store *store, const char *temp_dir, CompressKind compression,
                  int is_final, FullSnapshotHook before_store, void *hook_ctx,
                  FullSnapshotResult *out) {
    char *path = NULL;
    IoWriter *fdw = NULL, *checker = NULL;
    IoReader *src = NULL;
    IoWriter *counter = NULL;
    uint64_t *count = NULL;
    uint64_t payload_len = 0;
    Progress *progress = NULL;
    char what[320];
    memset(out, 0, sizeof *out);
    int rc = fs_mkdir_p(temp_dir, 0700);
    if (rc) return rc;
    fullsnap_cleanup_stale(temp_dir);
    /* the size to expect, for the ETA: approximate (the db may grow, the stream adds the 32-byte
     * trailer); without it progress shows bytes and rate only */
    EtcdStatus st;
    uint64_t expect = etcd_status(c, &st) == 0 && st.db_size > 0 ? (uint64_t)st.db_size : 0;
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
    SinkCtx ctx = {checker, count, progress};
    rc = etcd_snapshot(c, snapshot_sink, &ctx);
    progress_finish(progress);
    progress = NULL;
    if (rc) goto done;
    /* no fsync: the staging file is read back at once and removed; the store object is what
     * must be durable */
    progress = progress_start("full snapshot: checking every db page", 0, 0);
    rc = fullsnap_verify_file(path, checker, *count, 0, 1, &payload_len, &out->revision);
    progress_finish(progress);
    progress = NULL;
    if (rc) {
        rc = err_wrap(rc, "full snapshot from %s", etcd_client_endpoint(c));
        goto done;
    }
    out->db_bytes = payload_len;
    rc = snapname_format(SNAP_FULL, 0, out->revision, now_unix_s(),
                         store_name_suffix(store, compression), is_final, out->snap_name,
                         sizeof out->snap_name);
    if (rc) goto done;
    if (before_store &&
        (rc = before_store(hook_ctx, path, payload_len, out->revision, out->snap_name)))
        goto done;
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
             store_keyring(store) ? "compressing, encrypting" : "compressing", out->snap_name);
    progress = progress_start(what, *count, 1);
    rc = store_stream(store, out->snap_name, compression, src, &out->stored_bytes, progress, 1);
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

/* ---------- a db file as a full snapshot (compact) ---------- */

/* Reader over a db file that yields its bytes and then their SHA-256: the full snapshot format
 * etcd's Snapshot stream has (seed-spec §4.1). */
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
    Progress *p = progress_start(what, (uint64_t)st.st_size + SHA256_LEN, 1);
    int rc = store_stream(store, snap_name, compression, &d->base, stored_bytes, p, 1);
    progress_finish(p);
    io_reader_free(&d->base);
    close(fd);
    return rc;
}
