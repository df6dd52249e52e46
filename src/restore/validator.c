/* validator: see validator.h. Order follows the Go tool (docs/go-tool.md §9.1): the sanity checks
 * and the revision check first, then the FULL-mode checks only for a data dir that passed them. A
 * shared flock on member/snap/db is held throughout, so an etcd that holds bbolt's exclusive lock
 * is reported (FailToOpenBoltDB) instead of being read while it writes. */
#include "validator.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../format/bbolt.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/names.h"
#include "../common/timeutil.h"
#include "../store/history.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_LOCK_TIMEOUT_MS 120000
#define SAFE_GUARD_MAX 4096 /* a namespace is at most 63 bytes; more is a mismatch anyway */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_status(ValidationResult *out, DataDirStatus st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_status(ValidationResult *out, DataDirStatus st, const char *fmt, ...) {
    va_list ap;
    out->status = st;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
}

/* Appends to the message (for the details of a Valid result). */
static void add_msg(ValidationResult *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add_msg(ValidationResult *out, const char *fmt, ...) {
    size_t used = strlen(out->message);
    if (used + 1 >= sizeof out->message) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message + used, sizeof out->message - used, fmt, ap);
    va_end(ap);
}

/* path.Dir of the data dir, trailing slashes ignored ("/var/etcd/data/new.etcd/" ->
 * "/var/etcd/data"). Owned by the caller; NULL on allocation failure. */
static char *parent_dir(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    while (n > 0 && path[n - 1] != '/')
        n--;
    if (n == 0) return strdup(".");
    while (n > 1 && path[n - 1] == '/')
        n--;
    return strndup(path, n);
}

/* Printable, bounded copy of file content for messages. */
static void printable(char *dst, size_t cap, const char *src, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n && j + 4 < cap; i++)
        dst[j++] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
    if (n > 0 && j + 4 >= cap && cap > 4) {
        dst[j++] = '.';
        dst[j++] = '.';
        dst[j++] = '.';
    }
    dst[j] = '\0';
}

/* Step 1: with $POD_NAMESPACE set, <parent>/safe_guard must hold exactly the namespace; a
 * missing file is created (0600) so the next start on another volume is caught. 0 = go on. */
static int check_safe_guard(const char *data_dir, ValidationResult *out) {
    const char *ns = getenv("POD_NAMESPACE");
    if (!ns || !*ns) return 0;
    int rc = 0, fd = -1;
    char *parent = parent_dir(data_dir), *path = NULL;
    char *buf = malloc(SAFE_GUARD_MAX + 1);
    if (!parent || !buf || !(path = fs_join(parent, "safe_guard"))) {
        set_status(out, DATA_DIR_STATUS_UNKNOWN, "safe_guard check: out of memory");
        rc = 1;
        goto done;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT) {
            set_status(out, DATA_DIR_STATUS_UNKNOWN, "stat %s: %s", path, strerror(errno));
            rc = 1;
            goto done;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        size_t len = strlen(ns);
        if (fd < 0 || write(fd, ns, len) != (ssize_t)len || fsync(fd) != 0) {
            set_status(out, DATA_DIR_STATUS_UNKNOWN, "cannot create %s: %s", path, strerror(errno));
            rc = 1;
            goto done;
        }
        close(fd);
        fd = -1;
    }
    (void)chmod(path, 0600); /* as the Go tool; a failure shows up in the read below */
    fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = 0;
    if (fd >= 0) {
        size_t used = 0;
        for (;;) {
            ssize_t r = read(fd, buf + used, SAFE_GUARD_MAX + 1 - used);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                got = r < 0 ? -1 : (ssize_t)used;
                break;
            }
            used += (size_t)r;
            if (used == SAFE_GUARD_MAX + 1) {
                got = (ssize_t)used;
                break;
            }
        }
    }
    if (fd < 0 || got < 0) {
        set_status(out, DATA_DIR_WRONG_VOLUME_MOUNTED,
                   "cannot read %s to tell whether the right volume is mounted: %s", path,
                   strerror(errno));
        rc = 1;
        goto done;
    }
    if ((size_t)got != strlen(ns) || memcmp(buf, ns, (size_t)got) != 0) {
        char shown[160];
        printable(shown, sizeof shown, buf, (size_t)got);
        set_status(out, DATA_DIR_WRONG_VOLUME_MOUNTED,
                   "wrong volume is mounted: POD_NAMESPACE is \"%s\" but %s holds \"%s\"", ns, path,
                   shown);
        rc = 1;
    }
done:
    if (fd >= 0) close(fd);
    FREE_ALL(parent, path, buf);
    return rc;
}

/* 0 = exists, 1 = missing (ENOENT), -1 = other error (errno kept). */
static int path_state(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) return 0;
    return errno == ENOENT ? 1 : -1;
}

/* Steps 2-3: the data dir and member/, member/snap, member/wal exist. 0 = go on. */
static int check_structure(const char *data_dir, const char *member, ValidationResult *out) {
    int s = path_state(data_dir);
    if (s == 1) {
        set_status(out, DATA_DIR_NOT_EXIST, "data directory %s does not exist", data_dir);
        return 1;
    }
    if (s < 0) {
        set_status(out, DATA_DIR_STATUS_UNKNOWN, "stat %s: %s", data_dir, strerror(errno));
        return 1;
    }
    const char *subs[] = {"", "/snap", "/wal"};
    for (int i = 0; i < 3; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s%s", member, subs[i]);
        s = path_state(path);
        if (s == 1) {
            set_status(out, DATA_DIR_INV_STRUCT, "invalid data directory structure: %s is missing",
                       path);
            return 1;
        }
        if (s < 0) {
            set_status(out, DATA_DIR_STATUS_UNKNOWN, "stat %s: %s", path, strerror(errno));
            return 1;
        }
    }
    return 0;
}

/* Takes a shared flock on the db, waiting up to timeout_ms while etcd (bbolt's exclusive lock)
 * holds it. Returns the locked fd, or -1 with the status set. */
static int lock_db(const char *db_path, int timeout_ms, ValidationResult *out) {
    int fd = open(db_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            set_status(out, DATA_DIR_CORRUPT, "backend db %s is missing", db_path);
        else
            set_status(out, DATA_DIR_CORRUPT, "cannot open backend db %s: %s", db_path,
                       strerror(errno));
        return -1;
    }
    double deadline = now_s() + timeout_ms / 1000.0;
    WaitNote note;
    wait_note_start(&note);
    for (;;) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) return fd;
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) {
            set_status(out, DATA_DIR_STATUS_UNKNOWN, "flock %s: %s", db_path, strerror(errno));
            break;
        }
        if (now_s() >= deadline) {
            set_status(out, DATA_DIR_FAIL_TO_OPEN_BOLTDB,
                       "backend db %s is still locked by another process (a running etcd?) "
                       "after %d ms",
                       db_path, timeout_ms);
            break;
        }
        if (process_stopping()) {
            set_status(out, DATA_DIR_STATUS_UNKNOWN,
                       "stopping (SIGTERM/SIGINT) while waiting for the lock on backend db %s",
                       db_path);
            break;
        }
        wait_note_check(&note,
                        "the lock on backend db %s (held by another process: a running "
                        "etcd?), up to %d ms",
                        db_path, timeout_ms);
        usleep(50 * 1000);
    }
    close(fd);
    return -1;
}

/* 1 when another process holds a lock on path: a flock (bbolt, and etcd's fallback) or an
 * OFD/POSIX record lock (etcd's fileutil.LockFile on Linux). Never waits. */
static int file_locked(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    int locked = 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) locked = 1;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (!locked && fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) locked = 1;
        fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (!locked && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK) locked = 1;
    }
    close(fd); /* drops our probe flock, if taken */
    return locked;
}

int data_dir_in_use(const char *data_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/member/snap/db", data_dir);
    int locked = file_locked(path);
    if (!locked) {
        char wal[4096];
        snprintf(wal, sizeof wal, "%s/member/wal", data_dir);
        DIR *d = opendir(wal);
        struct dirent *e;
        int seen = 0; /* bounded: a WAL dir holds a handful of files */
        while (d && !locked && (e = readdir(d)) != NULL && seen++ < 4096) {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 4, ".wal") != 0) continue;
            int w = snprintf(path, sizeof path, "%s/%s", wal, e->d_name);
            if (w > 0 && (size_t)w < sizeof path) locked = file_locked(path);
        }
        if (d) closedir(d);
    }
    if (!locked) return 0;
    return err_set(ERR_EXISTS,
                   "data dir %s is in use: another process holds the lock on %s (a running "
                   "etcd?); stop it before initializing the data dir",
                   data_dir, path);
}

static DataDirStatus status_of(int rc) {
    return rc == ERR_NOMEM ? DATA_DIR_STATUS_UNKNOWN : DATA_DIR_CORRUPT;
}

/* Reads the WAL once (into out->wal); 0 = read, 1 = status set. */
static int read_wal(const char *member, ValidationResult *out) {
    if (out->wal_read) return 0;
    int rc = wal_read_dir(member, out->consistent_index, &out->wal);
    if (rc) {
        set_status(out, status_of(rc), "raft log unusable: %s", err_msg());
        return 1;
    }
    out->wal_read = 1;
    return 0;
}

/* The latest set's revision: the last delta's LastRevision, else the full's; 0 without. */
static int store_latest_revision(Store *store, int64_t *rev) {
    Snapshot *snaps = NULL;
    size_t n = 0, n_deltas = 0, *deltas = NULL;
    ptrdiff_t full = -1;
    *rev = 0;
    int rc = store_list(store, &snaps, &n);
    if (rc) return rc;
    /* what a restore would leave out counts for nothing (restorer: leave_out_plain) */
    if ((rc = snapname_drop_plain_after_encrypted(snaps, n, &n))) goto done;
    if (n == 0) goto done;
    if (!(deltas = malloc(n * sizeof *deltas))) {
        rc = err_set(ERR_NOMEM, "out of memory listing %s", store_describe(store));
        goto done;
    }
    snapname_latest_set(snaps, n, &full, deltas, &n_deltas);
    if (n_deltas > 0)
        *rev = snaps[deltas[n_deltas - 1]].last_revision;
    else if (full >= 0)
        *rev = snaps[full].last_revision;
done:
    free(deltas);
    free(snaps);
    return rc;
}

/* Steps 7-8: a data dir behind the newest backup would lose that backup's changes if started.
 * The Go tool starts an embedded etcd to replay the WAL and polls the revision; we bound what a
 * replay can reach instead. The db holds every entry up to meta/consistent_index (etcd writes
 * that index in the same backend transaction as the entry's effects; 3.4 only in mvcc write
 * transactions, so the entries after it include every lease grant since the last put). Each
 * later raft entry is one request, and applying one request runs at most one mvcc write
 * transaction, which raises the revision by at most one. Only requests that can write a key
 * count (wal_classify_request: put, delete range, a txn with a put or delete, lease revoke, and
 * whatever does not decode); lease grants, compaction, auth, v2 requests, empty leader entries
 * and conf changes raise nothing, and counting them let a stale data dir pass. So replay reaches
 * at most db revision + writes_after. Below the store's revision the dir is certainly stale; at
 * or above it, it may well not be, and we keep it. 0 = go on, 1 = status set. */
/* A data dir restored on purpose to an older revision than the store's latest (the runbook's
 * "pick an older set", --revision/--time): its db carries etcdbr's restore mark (history.h) at a
 * revision the db has reached, and every backup after the db's revision was stored before that
 * restore ran, so the operator chose not to have it. Such a dir is not stale; restoring the latest
 * set over it would undo the choice (and members restored at different moments would differ).
 * Backups stored after the restore (etcd ran since, and someone backed it up further) still make
 * it stale. 1 = restored on purpose (message in *why), 0 = not. */
static int restored_on_purpose(BboltDb *db, Store *store, int64_t db_revision, char *why,
                               size_t cap) {
    char buf[1024];
    size_t vlen = 0;
    if (bbolt_get(db, HISTORY_DB_BUCKET, HISTORY_DB_KEY, strlen(HISTORY_DB_KEY), buf,
                  sizeof buf - 1, &vlen) != 0 ||
        vlen >= sizeof buf)
        return 0;
    buf[vlen] = '\0';
    HistoryRestoreMark m;
    if (history_mark_parse(buf, vlen, &m) != 0 || !m.present || db_revision < m.revision) return 0;
    Snapshot *snaps = NULL;
    size_t n = 0;
    if (store_list(store, &snaps, &n) != 0) return 0;
    int later = 0;
    for (size_t i = 0; i < n && !later; i++)
        later = !snaps[i].is_chunk && snaps[i].last_revision > db_revision &&
                snaps[i].created_on > m.time_s;
    free(snaps);
    if (later) return 0;
    snprintf(why, cap,
             "restored on purpose to revision %lld (restore mark: from %s%s, at %lld); the newer "
             "backups were all stored before that restore",
             (long long)m.revision, m.from_history[0] ? "history " : "untagged backups",
             m.from_history, (long long)m.time_s);
    return 1;
}

static int check_revision(const char *member, BboltDb *db, Store *store, ValidationResult *out) {
    int64_t rev = 0;
    int rc = store_latest_revision(store, &rev);
    if (rc) {
        set_status(out, DATA_DIR_STATUS_UNKNOWN, "cannot list backups in %s: %s",
                   store_describe(store), err_msg());
        return 1;
    }
    out->store_revision = rev;
    if (rev == 0 || out->db_revision >= rev) return 0;
    char why[400];
    if (restored_on_purpose(db, store, out->db_revision, why, sizeof why)) {
        log_info(
            "data dir at revision %lld is behind the latest backup (revision %lld) but was %s: "
            "kept",
            (long long)out->db_revision, (long long)rev, why);
        return 0;
    }
    if (read_wal(member, out)) return 1;
    uint64_t extra = out->wal.writes_after;
    int64_t reach = extra > (uint64_t)(INT64_MAX - out->db_revision)
                        ? INT64_MAX
                        : out->db_revision + (int64_t)extra;
    if (reach >= rev) return 0;
    set_status(out, DATA_DIR_REVISION_CONSISTENCY_ERROR,
               "data directory is behind the backups: db revision %lld plus at most %llu "
               "revisions from the WAL entries past consistent index %llu that can write a key "
               "(%llu of %llu entries with data; %llu undecodable) reaches %lld, the latest "
               "backup in %s is at revision %lld",
               (long long)out->db_revision, (unsigned long long)extra,
               (unsigned long long)out->consistent_index, (unsigned long long)extra,
               (unsigned long long)out->wal.normal_after,
               (unsigned long long)out->wal.undecodable_after, (long long)reach,
               store_describe(store), (long long)rev);
    return 1;
}

static void describe_valid(ValidationMode mode, ValidationResult *out) {
    set_status(out, DATA_DIR_VALID, "data directory valid (%s): db revision %lld",
               mode == VALIDATE_FULL ? "full" : "sanity", (long long)out->db_revision);
    if (out->db_pages) add_msg(out, ", %llu db pages checked", (unsigned long long)out->db_pages);
    if (out->wal_read) {
        const WalInfo *w = &out->wal;
        add_msg(out,
                ", raft log from snapshot %llu/%llu to entry %llu term %llu (%llu entries, %llu "
                "normal entries with data past consistent index %llu, %llu of them can write a "
                "key)",
                (unsigned long long)w->snap_index, (unsigned long long)w->snap_term,
                (unsigned long long)w->last_index, (unsigned long long)w->last_term,
                (unsigned long long)w->entries, (unsigned long long)w->normal_after,
                (unsigned long long)out->consistent_index, (unsigned long long)w->writes_after);
        if (w->torn_tail)
            add_msg(out,
                    ", torn last record in %s at offset %llu (never acknowledged; etcd truncates "
                    "it on start)",
                    w->torn_file, (unsigned long long)w->torn_offset);
        if (w->snap_files_skipped)
            add_msg(out, ", %u of %u snap files skipped as etcd would", w->snap_files_skipped,
                    w->snap_files);
    }
    if (out->store_revision > out->db_revision)
        add_msg(out,
                ", latest backup revision %lld is above the db's but within reach of the WAL "
                "entries etcd replays on start",
                (long long)out->store_revision);
    else if (out->store_revision)
        add_msg(out, ", latest backup revision %lld", (long long)out->store_revision);
    else
        add_msg(out, ", no backup to compare with");
}

static void validate(const char *data_dir, ValidationMode mode, Store *store,
                     const ValidationOptions *opts, ValidationResult *out) {
    char member[4096], db_path[4200];
    BboltDb *db = NULL;
    int lock_fd = -1, rc;
    size_t dl = strlen(data_dir);
    while (dl > 1 && data_dir[dl - 1] == '/')
        dl--;
    if (dl + 16 >= sizeof member) {
        set_status(out, DATA_DIR_STATUS_UNKNOWN, "data directory path too long");
        return;
    }
    snprintf(member, sizeof member, "%.*s/member", (int)dl, data_dir);
    snprintf(db_path, sizeof db_path, "%s/snap/db", member);

    if (check_safe_guard(data_dir, out)) goto done;
    if (check_structure(data_dir, member, out)) goto done;
    if ((lock_fd = lock_db(db_path, opts->lock_timeout_ms, out)) < 0) goto done;

    if ((rc = bbolt_open(db_path, 0, &db))) {
        set_status(out, status_of(rc), "backend db unusable: %s", err_msg());
        goto done;
    }
    if ((rc = bbolt_etcd_revision(db, &out->db_revision))) {
        set_status(out, status_of(rc), "cannot read the revision of the backend db: %s", err_msg());
        goto done;
    }
    uint8_t ci[8];
    size_t ci_len = 0;
    rc = bbolt_get(db, "meta", "consistent_index", 16, ci, sizeof ci, &ci_len);
    if (rc == 0 && ci_len >= 8) {
        for (int i = 0; i < 8; i++)
            out->consistent_index = out->consistent_index << 8 | ci[i];
    } else if (rc == 0 || rc != ERR_NOT_FOUND) {
        set_status(out, status_of(rc), "cannot read meta/consistent_index of %s: %s", db_path,
                   rc ? err_msg() : "value shorter than 8 bytes");
        goto done;
    }

    if (store && check_revision(member, db, store, out)) goto done;

    if (mode == VALIDATE_FULL) {
        if ((rc = bbolt_check(db, &out->db_pages))) {
            set_status(out, status_of(rc), "backend db failed its consistency check: %s",
                       err_msg());
            goto done;
        }
        if (read_wal(member, out)) goto done;
    }
    describe_valid(mode, out);
done:
    bbolt_close(db);
    if (lock_fd >= 0) close(lock_fd);
}

int validate_data_dir_opts(const char *data_dir, ValidationMode mode, Store *store,
                           const ValidationOptions *opts, ValidationResult *out) {
    if (!out) return err_set(ERR_INVALID, "validate_data_dir: no result");
    memset(out, 0, sizeof *out);
    if (!data_dir || !*data_dir) {
        set_status(out, DATA_DIR_STATUS_UNKNOWN, "no data directory given");
        return err_set(ERR_INVALID, "validate_data_dir: no data directory");
    }
    if (mode != VALIDATE_FULL && mode != VALIDATE_SANITY) {
        set_status(out, DATA_DIR_STATUS_UNKNOWN, "unknown validation mode %d", (int)mode);
        return err_set(ERR_INVALID, "validate_data_dir: unknown mode %d", (int)mode);
    }
    ValidationOptions def = {DEFAULT_LOCK_TIMEOUT_MS};
    double t0 = now_s();
    validate(data_dir, mode, store, opts ? opts : &def, out);
    out->seconds = now_s() - t0;
    return 0;
}

int validate_data_dir(const char *data_dir, ValidationMode mode, Store *store,
                      ValidationResult *out) {
    return validate_data_dir_opts(data_dir, mode, store, NULL, out);
}

const char *data_dir_status_name(DataDirStatus status) {
    static const char *const names[] = {
        [DATA_DIR_VALID] = "DataDirectoryValid",
        [DATA_DIR_WRONG_VOLUME_MOUNTED] = "WrongVolumeMounted",
        [DATA_DIR_NOT_EXIST] = "DataDirectoryNotExist",
        [DATA_DIR_INV_STRUCT] = "DataDirectoryInvStruct",
        [DATA_DIR_CORRUPT] = "DataDirectoryCorrupt",
        [DATA_DIR_BOLTDB_CORRUPT] = "BoltDBCorrupt",
        [DATA_DIR_STATUS_UNKNOWN] = "DataDirectoryStatusUnknown",
        [DATA_DIR_INVALID_IN_MULTI_NODE] = "DataDirStatusInvalidInMultiNode",
        [DATA_DIR_REVISION_CONSISTENCY_ERROR] = "RevisionConsistencyError",
        [DATA_DIR_FAIL_BELOW_REVISION] = "FailBelowRevisionConsistencyError",
        [DATA_DIR_FAIL_TO_OPEN_BOLTDB] = "FailToOpenBoltDBError",
    };
    return NAME_AT(names, status, "Unknown");
}

int validation_mode_parse(const char *s, ValidationMode *out) {
    if (s && strcmp(s, "full") == 0) {
        *out = VALIDATE_FULL;
        return 0;
    }
    if (s && strcmp(s, "sanity") == 0) {
        *out = VALIDATE_SANITY;
        return 0;
    }
    return err_set(ERR_INVALID, "validation mode \"%s\": want full or sanity", s ? s : "");
}
