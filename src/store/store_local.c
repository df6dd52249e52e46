/* store_local: the Local driver, objects are files below a root directory (key "a/b" is file
 * "<root>/a/b"). A write goes to a ".etcdbr-tmp-XXXXXX" file in the target directory and becomes
 * visible only by fsync + rename without replace + fsync of the directory, so readers and
 * listings never see partial objects. A symlink inside the store folder is never followed as a
 * directory: keys through one are refused for every operation. The writer holds an flock on its
 * temp file until commit or abort; temp files whose owner died (kill -9) are removed the first time
 * a directory is written to by this driver (only unlocked ".etcdbr-tmp-XXXXXX" regular files, each
 * logged). Names starting with '.' are never listed. Keys with empty, "." or ".." components are
 * refused, so no key reaches outside the root. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#endif
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/fsutil.h"
#include "store_driver.h"

#include <dirent.h>
#include <stddef.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCAL_TMP_PREFIX ".etcdbr-tmp-"
/* v1/Backup-<ts>/<name>/<chunk> is the deepest layout below a listed prefix. */
#define LOCAL_LIST_MAX_DEPTH 3
/* Longest key accepted: the root and the key together must stay below PATH_MAX. */
#define LOCAL_KEY_MAX (PATH_MAX / 2)

typedef struct {
    StoreDriver base;
    char *root;         /* absolute, no trailing '/' unless it is "/" */
    char *describe;     /* "Local:<root>" */
    pthread_mutex_t mu; /* guards swept */
    char **swept;       /* directories already cleared of stale temp files (owned) */
    size_t n_swept;
} LocalDriver;

/* Refuses keys that could name something outside the root, an ambiguous path, or a name that
 * is hostile in a file name or a log line: empty, "." or ".." components, a leading '/', a
 * backslash, control characters (0x01-0x1f, 0x7f), a component longer than NAME_MAX or a key
 * longer than LOCAL_KEY_MAX (limits from <limits.h>, POSIX). A key_prefix for list may end in
 * '/' (allow_trailing_slash). */
static int key_check(const char *key, int allow_trailing_slash) {
    if (key[0] == '/') return -1;
    if (strlen(key) > LOCAL_KEY_MAX) return -1;
    const char *s = key;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || len > NAME_MAX) return -1;
        if (len == 1 && s[0] == '.') return -1;
        if (len == 2 && s[0] == '.' && s[1] == '.') return -1;
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x20 || c == 0x7f || c == '\\') return -1;
        }
        if (!e) return 0;
        s = e + 1;
        if (*s == '\0') return allow_trailing_slash ? 0 : -1;
    }
    return key[0] ? 0 : (allow_trailing_slash ? 0 : -1);
}

int store_local_key_valid(const char *key, int allow_trailing_slash) {
    return key && key_check(key, allow_trailing_slash) == 0;
}

/* "<root>/<rel>" without a trailing '/' (owned), NULL on allocation failure. */
static char *local_path(const LocalDriver *l, const char *rel) {
    size_t rl = strlen(rel);
    while (rl > 0 && rel[rl - 1] == '/')
        rl--;
    int root_is_slash = strcmp(l->root, "/") == 0;
    size_t n = strlen(l->root) + rl + 2;
    char *p = malloc(n);
    if (!p) return NULL;
    if (rl == 0)
        snprintf(p, n, "%s", l->root);
    else
        snprintf(p, n, "%s/%.*s", root_is_slash ? "" : l->root, (int)rl, rel);
    return p;
}

/* Refuses a path below the root whose directories (every component of rel before the last one;
 * all of them when whole) include a symlink: a link planted in the store folder must not take a
 * write, a removal or a listing out of it. The root itself may be a link (the operator's
 * choice). Components that do not exist yet are fine (writes create them). */
static int no_symlinked_dirs(const LocalDriver *l, const char *rel, int whole, const char *op) {
    size_t rl = strlen(rel), root_len = strcmp(l->root, "/") == 0 ? 0 : strlen(l->root);
    char *p = malloc(root_len + rl + 2);
    if (!p) return err_set(ERR_NOMEM, "local store %s: out of memory", op);
    memcpy(p, l->root, root_len);
    int rc = 0;
    for (size_t i = 0; i < rl && rc == 0; i++) {
        if (rel[i] != '/' && !(whole && i + 1 == rl)) continue;
        size_t end = rel[i] == '/' ? i : i + 1;
        p[root_len] = '/';
        memcpy(p + root_len + 1, rel, end);
        p[root_len + 1 + end] = '\0';
        struct stat st;
        if (lstat(p, &st) != 0) break; /* missing from here on: nothing to follow */
        if (S_ISLNK(st.st_mode))
            rc = err_set(ERR_INVALID,
                         "local store %s: %s is a symlink inside the store folder %s; refusing "
                         "to follow it (remove the link or point the store at its target)",
                         op, p, l->root);
        else if (!S_ISDIR(st.st_mode))
            break; /* the operation itself reports it */
    }
    free(p);
    return rc;
}

/* The error of a failed op on an object's path, errno as the call left it: ERR_NOT_FOUND when
 * the object (or a directory above it) does not exist, else ERR_IO naming the cause. */
static int object_errno(const char *op, const char *path) {
    if (errno == ENOENT || errno == ENOTDIR)
        return err_set(ERR_NOT_FOUND, "%s %s: no such object", op, path);
    return err_set(ERR_IO, "%s %s: %s", op, path, strerror(errno));
}

static int key_to_path(const LocalDriver *l, const char *key, const char *op, char **out) {
    *out = NULL;
    if (key_check(key, 0) != 0)
        return err_set(ERR_INVALID, "local store %s: invalid key \"%s\"", op, key);
    int rc = no_symlinked_dirs(l, key, 0, op);
    if (rc != 0) return rc;
    *out = local_path(l, key);
    if (!*out) return err_set(ERR_NOMEM, "local store %s: out of memory", op);
    return 0;
}

/* ---- list ---- */

typedef struct {
    StoreDriverListCb cb;
    void *ctx;
} WalkCb;

static int walk(const char *dir_path, const char *key_base, int depth, const WalkCb *w) {
    DIR *d = opendir(dir_path);
    if (!d) {
        /* A directory that does not exist (yet, or any more) simply holds no objects. */
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        return err_set(ERR_IO, "list %s: %s", dir_path, strerror(errno));
    }
    int rc = 0;
    char *child = NULL, *key = NULL;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno != 0) rc = err_set(ERR_IO, "list %s: %s", dir_path, strerror(errno));
            break;
        }
        /* ".", "..", our temp files and any other hidden entry are not objects. */
        if (e->d_name[0] == '.') continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) continue; /* removed while we listed */
            rc = err_set(ERR_IO, "stat %s/%s: %s", dir_path, e->d_name, strerror(errno));
            break;
        }
        int is_dir = S_ISDIR(st.st_mode);
        if (S_ISLNK(st.st_mode)) {
            /* A symlinked file is listed as the file; symlinked directories are not followed. */
            if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) {
                log_warn("local store: skipping %s/%s: a symlink to something that is not a "
                         "regular file",
                         dir_path, e->d_name);
                continue;
            }
        }
        if (!is_dir && !S_ISREG(st.st_mode)) {
            log_warn("local store: skipping %s/%s: not a regular file or directory (a FIFO, "
                     "socket or device is never an object)",
                     dir_path, e->d_name);
            continue;
        }
        size_t kn = strlen(key_base) + strlen(e->d_name) + 2;
        size_t pn = strlen(dir_path) + strlen(e->d_name) + 2;
        key = malloc(kn);
        child = malloc(pn);
        if (!key || !child) {
            rc = err_set(ERR_NOMEM, "list %s: out of memory", dir_path);
            break;
        }
        if (is_dir) {
            if (depth < LOCAL_LIST_MAX_DEPTH) {
                snprintf(key, kn, "%s%s/", key_base, e->d_name);
                snprintf(child, pn, "%s/%s", dir_path, e->d_name);
                rc = walk(child, key, depth + 1, w);
            }
        } else {
            snprintf(key, kn, "%s%s", key_base, e->d_name);
            rc = w->cb(w->ctx, key, (int64_t)st.st_size);
        }
        free(key);
        free(child);
        key = child = NULL;
        if (rc != 0) break;
    }
    free(key);
    free(child);
    closedir(d);
    return rc;
}

static int local_list(StoreDriver *d, const char *key_prefix, StoreDriverListCb cb, void *ctx) {
    LocalDriver *l = (LocalDriver *)d;
    size_t kl = strlen(key_prefix);
    if (key_check(key_prefix, 1) != 0 || (kl > 0 && key_prefix[kl - 1] != '/'))
        return err_set(ERR_INVALID, "local store list: invalid key prefix \"%s\"", key_prefix);
    int rc = no_symlinked_dirs(l, key_prefix, 1, "list");
    if (rc != 0) return rc;
    struct stat root_st;
    if (stat(l->root, &root_st) == 0 && !S_ISDIR(root_st.st_mode))
        return err_set(ERR_INVALID, "local store %s is not a directory", l->root);
    char *dir = local_path(l, key_prefix);
    if (!dir) return err_set(ERR_NOMEM, "local store list: out of memory");
    WalkCb w = {cb, ctx};
    rc = walk(dir, key_prefix, 1, &w);
    free(dir);
    return rc;
}

/* ---- read ---- */

typedef struct {
    IoReader base;
    int fd;
    char *path;
} LocalReader;

static int lr_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    LocalReader *lr = (LocalReader *)r;
    return io_fd_read(lr->fd, lr->path, buf, cap, got);
}

static void lr_free(IoReader *r) {
    LocalReader *lr = (LocalReader *)r;
    if (!lr) return;
    if (lr->fd >= 0) close(lr->fd);
    free(lr->path);
    free(lr);
}

static const IoReaderVt lr_vt = {lr_read, lr_free};

static int local_open_read(StoreDriver *d, const char *key, uint64_t offset, IoReader **out) {
    LocalDriver *l = (LocalDriver *)d;
    *out = NULL;
    char *path = NULL;
    int rc = key_to_path(l, key, "read", &path);
    if (rc != 0) return rc;
    LocalReader *lr = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = object_errno("open", path);
        goto done;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = err_set(ERR_IO, "open %s: not a regular file", path);
        goto done;
    }
    if (offset > 0 &&
        lseek(fd, offset > (uint64_t)st.st_size ? st.st_size : (off_t)offset, SEEK_SET) < 0) {
        rc = err_set(ERR_IO, "seek %s to %llu: %s", path, (unsigned long long)offset,
                     strerror(errno));
        goto done;
    }
    lr = calloc(1, sizeof *lr);
    if (!lr) {
        rc = err_set(ERR_NOMEM, "open %s: out of memory", path);
        goto done;
    }
    lr->base.vt = &lr_vt;
    lr->fd = fd;
    lr->path = path;
    fd = -1;
    path = NULL;
    *out = &lr->base;
done:
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

/* ---- write ---- */

/* Written bytes are handed to the disk every LW_WRITEBACK bytes (sync_file_range, which starts
 * writeback and does not wait), so commit's fsync waits for the last stretch only, not for the
 * whole object (a one-pass full snapshot of hundreds of MB). Durability is still commit's fsync. */
#define LW_WRITEBACK ((uint64_t)8 << 20)

typedef struct {
    StoreDriverWriter base;
    IoWriter io;
    int fd;
    int failed;                /* a write failed: commit must not publish a short object */
    uint64_t written, flushed; /* bytes written; bytes handed to writeback */
    char *tmp, *path;
} LocalWriter;

static LocalWriter *lw_of_io(IoWriter *io) {
    return (LocalWriter *)((char *)io - offsetof(LocalWriter, io));
}

static int lw_io_write(IoWriter *io, const void *buf, size_t len) {
    LocalWriter *w = lw_of_io(io);
    const char *p = buf;
    if (w->failed) return err_set(ERR_IO, "write %s: an earlier write failed", w->path);
    while (len > 0) {
        ssize_t n = write(w->fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            w->failed = 1;
            return err_set(ERR_IO, "write %s (temp %s): %s", w->path, w->tmp, strerror(errno));
        }
        p += n;
        len -= (size_t)n;
        w->written += (uint64_t)n;
    }
    if (w->written - w->flushed >= LW_WRITEBACK) {
        /* best effort: a file system without it (EINVAL, ENOSYS) just leaves it to fsync */
        (void)sync_file_range(w->fd, (off_t)w->flushed, (off_t)(w->written - w->flushed),
                              SYNC_FILE_RANGE_WRITE);
        w->flushed = w->written;
    }
    return 0;
}

static int lw_io_finish(IoWriter *io) {
    (void)io;
    return 0; /* durability is commit's job */
}

static void lw_io_free(IoWriter *io) {
    (void)io; /* the stream lives inside the LocalWriter; commit/abort release it */
}

static const IoWriterVt lw_io_vt = {lw_io_write, lw_io_finish, lw_io_free};

static void lw_release(LocalWriter *w, int unlink_tmp) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (unlink_tmp && w->tmp) unlink(w->tmp);
    free(w->tmp);
    free(w->path);
    free(w);
}

static IoWriter *lw_io(StoreDriverWriter *dw) {
    return &((LocalWriter *)dw)->io;
}

static int lw_commit(StoreDriverWriter *dw) {
    LocalWriter *w = (LocalWriter *)dw;
    int rc = 0, lock_fd = -1;
    if (w->failed) {
        rc = err_set(ERR_IO, "commit %s: an earlier write failed", w->path);
        goto done;
    }
    if (fsync(w->fd) != 0) {
        rc = err_set(ERR_IO, "fsync %s: %s", w->tmp, strerror(errno));
        goto done;
    }
    /* the duplicate keeps the flock (it belongs to the open file, not the fd) until the rename:
     * an unlocked temp file may be removed as stale by another process */
    lock_fd = dup(w->fd);
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        rc = err_set(ERR_IO, "close %s: %s", w->tmp, strerror(errno));
        goto done;
    }
    /* Snapshots are immutable: never replace an object that appeared since open_write. */
    if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->path, RENAME_NOREPLACE) != 0) {
        if (errno == EEXIST) {
            rc = err_set(ERR_EXISTS, "commit %s: object already exists", w->path);
            goto done;
        }
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
            rc = err_set(ERR_IO, "rename %s -> %s: %s", w->tmp, w->path, strerror(errno));
            goto done;
        }
        /* File system without RENAME_NOREPLACE: check, then plain rename (small race). */
        if (fs_exists(w->path)) {
            rc = err_set(ERR_EXISTS, "commit %s: object already exists", w->path);
            goto done;
        }
        if (rename(w->tmp, w->path) != 0) {
            rc = err_set(ERR_IO, "rename %s -> %s: %s", w->tmp, w->path, strerror(errno));
            goto done;
        }
    }
    free(w->tmp);
    w->tmp = NULL; /* renamed: nothing to unlink any more */
    char *dir = fs_dirname(w->path);
    if (!dir) {
        rc = err_set(ERR_NOMEM, "commit %s: out of memory", w->path);
        goto done;
    }
    rc = fs_fsync_dir(dir);
    free(dir);
done:
    lw_release(w, 1);
    if (lock_fd >= 0) close(lock_fd);
    return rc;
}

static void lw_abort(StoreDriverWriter *dw) {
    lw_release((LocalWriter *)dw, 1);
}

static const StoreDriverWriterVt lw_vt = {lw_io, lw_commit, lw_abort};

static void log_stale_removed(void *ctx, const char *path, int64_t bytes) {
    (void)ctx;
    log_info("local store: removed %s (%lld bytes), a temp file left by a writer that did not "
             "finish",
             path, (long long)bytes);
}

/* Removes stale temp files from dir the first time this driver writes there. */
static void sweep_once(LocalDriver *l, const char *dir) {
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->n_swept; i++) {
        if (strcmp(l->swept[i], dir) == 0) {
            pthread_mutex_unlock(&l->mu);
            return;
        }
    }
    char **grown = realloc(l->swept, (l->n_swept + 1) * sizeof *grown);
    char *copy = strdup(dir);
    if (grown) l->swept = grown;
    if (grown && copy) {
        l->swept[l->n_swept++] = copy;
        copy = NULL;
    }
    free(copy);
    pthread_mutex_unlock(&l->mu);
    if (fs_remove_stale_temp(dir, LOCAL_TMP_PREFIX, log_stale_removed, NULL, NULL) != 0)
        log_warn("local store: cannot look for stale temp files: %s", err_msg());
}

static int local_open_write(StoreDriver *d, const char *key, StoreDriverWriter **out) {
    LocalDriver *l = (LocalDriver *)d;
    *out = NULL;
    char *path = NULL, *dir = NULL;
    LocalWriter *w = NULL;
    int rc = key_to_path(l, key, "write", &path);
    if (rc != 0) return rc;
    /* The last key component must not be a hidden name: it would never be listed. */
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    if (base[0] == '.') {
        rc = err_set(ERR_INVALID, "local store write: key \"%s\" names a hidden file", key);
        goto done;
    }
    dir = fs_dirname(path);
    if (!dir) {
        rc = err_set(ERR_NOMEM, "local store write: out of memory");
        goto done;
    }
    rc = fs_mkdir_p(dir, 0700);
    if (rc != 0) goto done;
    sweep_once(l, dir);
    if (fs_exists(path)) {
        rc = err_set(ERR_EXISTS, "write %s: object already exists", path);
        goto done;
    }
    w = calloc(1, sizeof *w);
    if (!w) {
        rc = err_set(ERR_NOMEM, "local store write: out of memory");
        goto done;
    }
    w->base.vt = &lw_vt;
    w->io.vt = &lw_io_vt;
    w->fd = -1;
    int fd = fs_mkstemp_locked(dir, LOCAL_TMP_PREFIX, &w->tmp);
    if (fd < 0) {
        rc = fd;
        goto done;
    }
    w->fd = fd;
    w->path = path;
    path = NULL;
    *out = &w->base;
    w = NULL;
done:
    lw_release(w, 1);
    free(path);
    free(dir);
    return rc;
}

/* ---- remove, stat ---- */

/* Removes the object at key (is_dir 0) or the directory at key when it is empty (1: a missing or
 * non-empty one is left, with 0), then fsyncs the parent, best effort: the entry is gone whether
 * or not its removal is durable yet. 0, or ERR_NOT_FOUND/ERR_IO naming the path. */
static int local_remove_entry(StoreDriver *d, const char *key, int is_dir) {
    char *path = NULL;
    int rc = key_to_path((LocalDriver *)d, key, is_dir ? "remove dir" : "remove", &path);
    if (rc != 0) return rc;
    if ((is_dir ? rmdir(path) : unlink(path)) == 0) {
        char *parent = fs_dirname(path);
        if (parent) (void)fs_fsync_dir(parent);
        free(parent);
    } else if (!is_dir) {
        rc = object_errno("remove", path);
    } else if (errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST) {
        rc = err_set(ERR_IO, "rmdir %s: %s", path, strerror(errno));
    }
    free(path);
    return rc;
}

static int local_remove(StoreDriver *d, const char *key) {
    return local_remove_entry(d, key, 0);
}

static int local_stat(StoreDriver *d, const char *key, int64_t *size) {
    LocalDriver *l = (LocalDriver *)d;
    char *path = NULL;
    int rc = key_to_path(l, key, "stat", &path);
    if (rc != 0) return rc;
    struct stat st;
    if (stat(path, &st) != 0) {
        rc = object_errno("stat", path);
    } else if (!S_ISREG(st.st_mode)) {
        rc = err_set(ERR_IO, "stat %s: not a regular file", path);
    } else {
        *size = (int64_t)st.st_size;
    }
    free(path);
    return rc;
}

static int local_remove_dir(StoreDriver *d, const char *dir_key) {
    return local_remove_entry(d, dir_key, 1);
}

static const char *local_describe(const StoreDriver *d) {
    return ((const LocalDriver *)d)->describe;
}

static void local_free(StoreDriver *d) {
    LocalDriver *l = (LocalDriver *)d;
    if (!l) return;
    for (size_t i = 0; i < l->n_swept; i++)
        free(l->swept[i]);
    pthread_mutex_destroy(&l->mu);
    FREE_ALL(l->root, l->describe, l->swept, l);
}

/* StoreDriverVt.open_file: a committed object is only ever created by rename (lw_commit). */
static int local_open_file(StoreDriver *d, const char *key, int *fd) {
    IoReader *r = NULL;
    *fd = -1;
    int rc = local_open_read(d, key, 0, &r);
    if (rc) return rc;
    LocalReader *lr = (LocalReader *)r;
    *fd = lr->fd; /* taken over */
    lr->fd = -1;
    lr_free(r);
    return 0;
}

static const StoreDriverVt local_vt = {
    .name = "Local",
    .features = STORE_FEAT_DIRECTORIES | STORE_FEAT_THREAD_SAFE | STORE_FEAT_NO_REPLACE,
    .list = local_list,
    .open_read = local_open_read,
    .open_file = local_open_file,
    .open_write = local_open_write,
    .remove = local_remove,
    .stat = local_stat,
    .remove_dir = local_remove_dir,
    .describe = local_describe,
    .free = local_free,
};

int store_local_driver_new(const char *container, StoreDriver **out) {
    *out = NULL;
    int rc = 0;
    LocalDriver *l = NULL;
    if (!container || !container[0]) {
        const char *env = getenv("STORAGE_CONTAINER");
        container = (env && env[0]) ? env : "default.bkp";
    }
    l = calloc(1, sizeof *l);
    if (!l) return err_set(ERR_NOMEM, "local store: out of memory");
    l->base.vt = &local_vt;
    pthread_mutex_init(&l->mu, NULL);
    if (container[0] == '/') {
        l->root = strdup(container);
    } else {
        const char *home = getenv("HOME");
        if (!home || home[0] != '/') {
            rc = err_set(ERR_INVALID,
                         "local store: container \"%s\" is relative to $HOME, but HOME is not "
                         "set to an absolute path; give an absolute container path",
                         container);
            goto done;
        }
        l->root = fs_join(home, container);
    }
    if (!l->root) {
        rc = err_set(ERR_NOMEM, "local store: out of memory");
        goto done;
    }
    size_t n = strlen(l->root);
    while (n > 1 && l->root[n - 1] == '/')
        l->root[--n] = '\0';
    size_t dn = n + sizeof "Local:";
    l->describe = malloc(dn);
    if (!l->describe) {
        rc = err_set(ERR_NOMEM, "local store: out of memory");
        goto done;
    }
    snprintf(l->describe, dn, "Local:%s", l->root);
    /* the root is not created here: writes create their directories (0700), and a restore from
     * a mistyped path must not leave an empty store behind */
done:
    RETURN_BUILT(rc, out, &l->base, local_free(&l->base));
}
