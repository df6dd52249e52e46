/* fsutil: see fsutil.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#endif
#include "fsutil.h"
#include "err.h"
#include "log.h"
#include "mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static FsFsyncDirHook fsync_dir_hook;
static void *fsync_dir_hook_ctx;

void fs_set_fsync_dir_hook(FsFsyncDirHook hook, void *ctx) {
    fsync_dir_hook = hook;
    fsync_dir_hook_ctx = ctx;
}

/* fsync of the directory that holds path (after path was created or renamed into it). */
static int fsync_parent(const char *path) {
    char *parent = fs_dirname(path);
    if (!parent) return err_set(ERR_NOMEM, "out of memory");
    int rc = fs_fsync_dir(parent);
    free(parent);
    return rc;
}

int fs_mkdir_p(const char *path, unsigned mode) {
    char *p = strdup(path);
    if (!p) return err_set(ERR_NOMEM, "mkdir %s: out of memory", path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, mode) == 0) {
                /* the new entry survives a crash only once its parent is on disk */
                if ((rc = fsync_parent(p))) break;
            } else if (errno != EEXIST) {
                rc = err_set(ERR_IO, "mkdir %s: %s", p, strerror(errno));
                break;
            }
            *s = c;
            if (c == '\0') break;
        }
    }
    free(p);
    if (rc == 0) {
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            rc = err_set(ERR_IO, "mkdir %s: not a directory", path);
    }
    return rc;
}

int fs_fsync_dir(const char *dir) {
    if (fsync_dir_hook) fsync_dir_hook(fsync_dir_hook_ctx, dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return err_set(ERR_IO, "open dir %s: %s", dir, strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0) rc = err_set(ERR_IO, "fsync dir %s: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

static _Thread_local char rm_failed[1024];
static _Thread_local int rm_errno;

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0 && errno != ENOENT) {
        snprintf(rm_failed, sizeof rm_failed, "%s", path);
        rm_errno = errno;
        return 1;
    }
    return 0;
}

int fs_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        return err_set(ERR_IO, "stat %s: %s", path, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0) return err_set(ERR_IO, "unlink %s: %s", path, strerror(errno));
        return 0;
    }
    if (nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS) != 0)
        return err_set(ERR_IO, "remove %s: %s", rm_failed, strerror(rm_errno));
    return 0;
}

int fs_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Opens the directory path into *d: 0 with *d NULL when it does not exist, or ERR_IO. */
static int dir_open_if_any(const char *path, DIR **d) {
    *d = opendir(path);
    if (*d || errno == ENOENT) return 0;
    return err_set(ERR_IO, "open dir %s: %s", path, strerror(errno));
}

/* The next entry of d other than "." and "..", or NULL at the end. */
static struct dirent *dir_next(DIR *d) {
    struct dirent *e;
    while ((e = readdir(d)) && (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")))
        ;
    return e;
}

int fs_dir_nonempty(const char *path) {
    DIR *d;
    int rc = dir_open_if_any(path, &d);
    if (rc || !d) return rc;
    int found = dir_next(d) != NULL;
    closedir(d);
    return found;
}

int fs_mkstemp(const char *dir, const char *prefix, char **path_out) {
    size_t n = strlen(dir) + strlen(prefix) + 8;
    char *p = malloc(n);
    if (!p) return err_set(ERR_NOMEM, "mkstemp: out of memory");
    snprintf(p, n, "%s/%sXXXXXX", dir, prefix);
    int fd = mkostemp(p, O_CLOEXEC);
    if (fd < 0) {
        int rc = err_set(ERR_IO, "create temp file %s: %s", p, strerror(errno));
        free(p);
        return rc;
    }
    *path_out = p;
    return fd;
}

int fs_mkstemp_locked(const char *dir, const char *prefix, char **path_out) {
    for (int attempt = 0; attempt < 8; attempt++) {
        char *path = NULL;
        int fd = fs_mkstemp(dir, prefix, &path);
        if (fd < 0) return fd;
        struct stat mine, named;
        int rc;
        while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
            ;
        if (rc != 0) {
            rc = err_set(ERR_IO, "lock temp file %s: %s", path, strerror(errno));
            close(fd);
            unlink(path);
            free(path);
            return rc;
        }
        /* a cleanup that took the lock between mkstemp and flock has removed the name */
        if (fstat(fd, &mine) == 0 && lstat(path, &named) == 0 && mine.st_dev == named.st_dev &&
            mine.st_ino == named.st_ino) {
            *path_out = path;
            return fd;
        }
        close(fd);
        free(path);
    }
    return err_set(ERR_IO, "create temp file in %s: its name kept disappearing", dir);
}

/* "<prefix>" followed by exactly the six characters mkstemp chooses from. */
static int is_temp_name(const char *name, const char *prefix) {
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0 || strlen(name) != pl + 6) return 0;
    for (const char *s = name + pl; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
    }
    return 1;
}

int fs_remove_stale_temp(const char *dir, const char *prefix, FsRemovedCb cb, void *ctx,
                         int *removed) {
    if (removed) *removed = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        return err_set(ERR_IO, "open dir %s: %s", dir, strerror(errno));
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        int rc = err_set(ERR_IO, "open dir %s: %s", dir, strerror(errno));
        close(dfd);
        return rc;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_temp_name(e->d_name, prefix)) continue;
        /* O_NOFOLLOW: a symlink is not ours; O_NONBLOCK: a FIFO named like ours must not hang
         * the open (it is skipped below as not a regular file) */
        int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat held, named;
        if (fstat(fd, &held) == 0 && S_ISREG(held.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            fstatat(dfd, e->d_name, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
            named.st_dev == held.st_dev && named.st_ino == held.st_ino &&
            unlinkat(dfd, e->d_name, 0) == 0) {
            n++;
            if (cb) {
                char *path = fs_join(dir, e->d_name);
                cb(ctx, path ? path : e->d_name, (int64_t)held.st_size);
                free(path);
            }
        }
        close(fd);
    }
    closedir(d);
    if (n > 0) (void)fs_fsync_dir(dir);
    if (removed) *removed = n;
    return 0;
}

int fs_rename_durable(const char *from, const char *to) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) != 0) {
        if (errno == EEXIST)
            return err_set(ERR_EXISTS, "rename %s -> %s: %s already exists", from, to, to);
        if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
            return err_set(ERR_IO, "rename %s -> %s: %s", from, to, strerror(errno));
        /* a file system without RENAME_NOREPLACE: check, then plain rename (small race) */
        if (fs_exists(to))
            return err_set(ERR_EXISTS, "rename %s -> %s: %s already exists", from, to, to);
        if (rename(from, to) != 0)
            return err_set(ERR_IO, "rename %s -> %s: %s", from, to, strerror(errno));
    }
    char *df = fs_dirname(from), *dt = fs_dirname(to);
    int rc = df && dt ? fs_fsync_dir(dt) : err_set(ERR_NOMEM, "out of memory");
    if (!rc && strcmp(df, dt) != 0) rc = fs_fsync_dir(df);
    free(df);
    free(dt);
    return rc;
}

int fs_commit_file(int fd, const char *from, const char *to) {
    if (fsync(fd) != 0) return err_set(ERR_IO, "fsync %s: %s", from, strerror(errno));
    return fs_rename_durable(from, to);
}

/* ---------- directories marked as etcdbr's ---------- */

int fs_mark_dir(const char *dir, const char *marker, const char *text) {
    char *path = fs_join(dir, marker);
    if (!path) return err_set(ERR_NOMEM, "out of memory");
    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = err_set(ERR_IO, "create %s: %s", path, strerror(errno));
        goto done;
    }
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            rc = err_set(ERR_IO, "write %s: %s", path, n < 0 ? strerror(errno) : "short write");
            break;
        }
        off += (size_t)n;
    }
    if (!rc && fsync(fd) != 0) rc = err_set(ERR_IO, "fsync %s: %s", path, strerror(errno));
    close(fd);
    if (!rc) rc = fs_fsync_dir(dir);
done:
    free(path);
    return rc;
}

int fs_dir_has_marker(const char *dir, const char *marker) {
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    char *path = fs_join(dir, marker);
    if (!path) return err_set(ERR_NOMEM, "out of memory");
    int found = lstat(path, &st) == 0 && S_ISREG(st.st_mode);
    free(path);
    return found;
}

int fs_remove_marked_tree(const char *dir, const char *marker) {
    DIR *d;
    int rc = dir_open_if_any(dir, &d);
    if (rc || !d) return rc;
    struct dirent *e;
    while (!rc && (e = dir_next(d)) != NULL) {
        if (!strcmp(e->d_name, marker)) continue;
        char *path = fs_join(dir, e->d_name);
        rc = path ? fs_remove_tree(path) : err_set(ERR_NOMEM, "out of memory");
        free(path);
    }
    closedir(d);
    if (rc) return rc;
    rc = fs_remove_tree(dir); /* the marker and the directory */
    if (!rc) rc = fsync_parent(dir);
    return rc;
}

int fs_scratch_dir_make(const char *path, const char *text) {
    if (mkdir(path, 0700) != 0) {
        if (errno == EEXIST)
            return err_set(ERR_EXISTS, "create scratch directory %s: it already exists", path);
        return err_set(ERR_IO, "create scratch directory %s: %s", path, strerror(errno));
    }
    /* marked before anything is fsynced: a crash leaves it unmarked only while it is empty */
    int rc = fs_mark_dir(path, FS_SCRATCH_MARKER, text);
    if (!rc) rc = fsync_parent(path);
    return rc;
}

int fs_scratch_dir_remove(const char *path, const char *what) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return 0;
        return err_set(ERR_IO, "stat %s: %s", path, strerror(errno));
    }
    int ours = fs_dir_has_marker(path, FS_SCRATCH_MARKER);
    if (ours < 0) return ours;
    /* an empty directory holds nothing to lose (ours, when killed before marking it): rmdir
     * removes it only while it is empty */
    if (!ours && S_ISDIR(st.st_mode) && rmdir(path) == 0) return fsync_parent(path);
    if (!ours)
        return err_set(ERR_EXISTS,
                       "%s exists but was not made by etcdbr (it is not a directory holding "
                       "etcdbr's %s marker file): it is the path etcdbr uses for %s, and it is "
                       "never removed; move it away (e.g. mv %s %s.keep) or remove it yourself, "
                       "then retry",
                       path, FS_SCRATCH_MARKER, what, path, path);
    return fs_remove_marked_tree(path, FS_SCRATCH_MARKER);
}

char *fs_join(const char *a, const char *b) {
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (*b == '/')
        b++;
    size_t n = la + strlen(b) + 2;
    char *p = malloc(n);
    if (!p) return NULL;
    if (la == 0)
        snprintf(p, n, "%s", b);
    else if (*b == '\0')
        snprintf(p, n, "%.*s", (int)la, a);
    else
        snprintf(p, n, "%.*s/%s", (int)la, a, b);
    return p;
}

char *fs_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

int64_t fs_file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return err_set(ERR_IO, "stat %s: %s", path, strerror(errno));
    return (int64_t)st.st_size;
}

/* ---------- scratch directories ---------- */

/* Each scratch directory's lock file: the directory is live while a process holds its flock
 * (the kernel drops it when the owner dies). Not the directory itself: a restore into a data dir
 * inside the scratch directory (verify's restore test) flocks the data dir's parent. */
#define SCRATCH_LOCK "owner.lock"

/* 1 when the scratch directory dir (named like ours) was left by an owner that is gone: no live
 * process holds the flock of its lock file, or it has none. A live owner between mkdtemp and
 * locking is seen as gone too: it notices the removal and starts over (scratch_lock_and_mark). */
static int scratch_is_stale(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
    char *lock = fs_join(dir, SCRATCH_LOCK);
    if (!lock) return 0;
    int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    free(lock);
    if (fd < 0) return errno == ENOENT;
    int stale = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    return stale;
}

/* Removes one stale scratch directory: with its content when it holds our marker or lock file,
 * with rmdir (which takes nothing with it) when it is empty (its owner died right after
 * mkdtemp). An unmarked directory with content is the operator's: never touched. */
static void remove_stale_dir(const char *dir, const char *who) {
    int ours =
        fs_dir_has_marker(dir, FS_SCRATCH_MARKER) == 1 || fs_dir_has_marker(dir, SCRATCH_LOCK) == 1;
    int rc = ours              ? fs_remove_marked_tree(dir, FS_SCRATCH_MARKER)
             : rmdir(dir) == 0 ? fsync_parent(dir)
                               : -1;
    if (rc == 0)
        log_info("removed %s, left by an earlier %s that did not finish", dir, who);
    else if (ours)
        log_warn("cannot remove %s, left by an earlier %s: %s", dir, who, err_msg());
}

static void remove_stale_scratch(const char *temp_dir, const char *prefix, const char *who) {
    DIR *d = opendir(temp_dir);
    if (!d) return;
    struct dirent *e;
    size_t plen = strlen(prefix);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) != plen + 6) continue;
        char *dir = fs_join(temp_dir, e->d_name);
        if (dir && scratch_is_stale(dir)) remove_stale_dir(dir, who);
        free(dir);
    }
    closedir(d);
}

/* In the directory dir that mkdtemp just made: creates and flocks its lock file (*lock_fd), then
 * marks it. The lock is taken first, so that a kill at any point leaves a directory that the
 * next owner removes at once. 1 (nothing held) when a concurrent cleanup removed dir or its lock
 * file before the lock was held: the caller starts over with a new name. */
static int scratch_lock_and_mark(const char *dir, const char *who, int *lock_fd) {
    char *lock = fs_join(dir, SCRATCH_LOCK);
    if (!lock) return err_set(ERR_NOMEM, "out of memory");
    int rc = 0, fd = open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct stat mine, named;
    if (fd < 0 && errno == ENOENT)
        rc = 1;
    else if (fd < 0 || flock(fd, LOCK_EX) != 0)
        rc = err_set(ERR_IO, "lock %s: %s", lock, strerror(errno));
    else if (fstat(fd, &mine) != 0 || lstat(lock, &named) != 0 || mine.st_ino != named.st_ino ||
             mine.st_dev != named.st_dev)
        rc = 1;
    free(lock);
    if (!rc) {
        char note[160];
        snprintf(note, sizeof note, "scratch directory of an etcdbr %s (removed when it ends)\n",
                 who);
        rc = fs_mark_dir(dir, FS_SCRATCH_MARKER, note);
    }
    if (rc && fd >= 0) close(fd);
    if (!rc) *lock_fd = fd;
    return rc;
}

int fs_scratch_create(const char *temp_dir, const char *prefix, const char *who, char **out,
                      int *lock_fd, int *made_temp_dir) {
    *out = NULL;
    *lock_fd = -1;
    struct stat st;
    int made = lstat(temp_dir, &st) != 0 && errno == ENOENT;
    if (made_temp_dir) *made_temp_dir = made;
    int rc = fs_mkdir_p(temp_dir, 0700);
    if (rc) return rc;
    remove_stale_scratch(temp_dir, prefix, who);
    size_t n = strlen(prefix) + 7;
    char *name = malloc(n);
    if (name) snprintf(name, n, "%sXXXXXX", prefix);
    char *dir = name ? fs_join(temp_dir, name) : NULL;
    free(name);
    if (!dir) return err_set(ERR_NOMEM, "out of memory");
    /* a concurrent cleanup may take a directory before its lock is held: a few new names */
    rc = 1;
    for (int attempt = 0; rc == 1 && attempt < 8; attempt++) {
        memcpy(dir + strlen(dir) - 6, "XXXXXX", 6);
        if (!mkdtemp(dir)) {
            /* another etcdbr that made temp_dir removed it, empty, as it ended: make it again */
            if (errno == ENOENT && attempt < 7 && fs_mkdir_p(temp_dir, 0700) == 0) continue;
            rc = err_set(ERR_IO, "create a scratch directory in %s: %s", temp_dir, strerror(errno));
            break;
        }
        if ((rc = scratch_lock_and_mark(dir, who, lock_fd)) < 0)
            (void)fs_remove_tree(dir); /* made just now by mkdtemp: ours */
    }
    if (rc == 1)
        rc = err_set(ERR_IO,
                     "create a scratch directory in %s: removed 8 times by concurrent "
                     "cleanups before it could be locked",
                     temp_dir);
    RETURN_BUILT(rc, out, dir, free(dir));
}

void fs_scratch_temp_dir_release(const char *temp_dir, int made_temp_dir) {
    if (made_temp_dir && rmdir(temp_dir) == 0) (void)fsync_parent(temp_dir);
}

/* ---------- free-space reserve ---------- */

static _Atomic uint64_t reserve_bytes = FS_RESERVE_BYTES_DEFAULT;
static atomic_int reserve_percent = FS_RESERVE_PERCENT_DEFAULT;

void fs_set_free_reserve(uint64_t bytes, int percent) {
    atomic_store(&reserve_bytes, bytes);
    atomic_store(&reserve_percent, percent < 0 ? 0 : percent > 100 ? 100 : percent);
}

int fs_check_free_reserve(const char *dir, uint64_t more) {
    uint64_t bytes = atomic_load(&reserve_bytes);
    int percent = atomic_load(&reserve_percent);
    if (!bytes && !percent) return 0;
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0)
        return err_set(ERR_IO, "free space of %s: %s", dir, strerror(errno));
    uint64_t frsize = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
    /* block counts times block size: at most 2^64 bytes on any file system Linux mounts */
    uint64_t size = (uint64_t)sv.f_blocks * frsize, avail = (uint64_t)sv.f_bavail * frsize;
    uint64_t by_percent = size / 100 * (uint64_t)percent;
    uint64_t reserve = bytes > by_percent ? bytes : by_percent;
    if (avail >= reserve && avail - reserve >= more) return 0;
    return err_set(ERR_IO,
                   "%s: %" PRIu64 " bytes free on its file system, not enough for %" PRIu64
                   " more while keeping the reserve of %" PRIu64 " bytes free (the larger of "
                   "--min-free-disk-bytes=%" PRIu64 " and --min-free-disk-percent=%d of %" PRIu64
                   " bytes): free space there, or lower them",
                   dir, avail, more, reserve, bytes, percent, size);
}

int fs_space_guard_check(FsSpaceGuard *g, uint64_t written) {
    if (written < g->next_check) return 0;
    g->next_check = written + FS_GUARD_EVERY;
    return fs_check_free_reserve(g->dir, FS_GUARD_EVERY);
}

/* 0 when path is a regular file we may execute, else the error (err_set) naming it. */
static int check_exec_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(errno == ENOENT || errno == ENOTDIR ? ERR_NOT_FOUND : ERR_INVALID, "%s: %s",
                       path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return err_set(ERR_INVALID, "%s: not a regular file", path);
    if (access(path, X_OK) != 0)
        return err_set(ERR_INVALID, "%s: not executable (%s)", path, strerror(errno));
    return 0;
}

int fs_check_executable(const char *bin) {
    if (!bin || !*bin) return err_set(ERR_INVALID, "an empty program name");
    if (strchr(bin, '/')) return check_exec_path(bin);
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char full[4096];
        /* an empty element is the current directory, as execvp takes it */
        int n = snprintf(full, sizeof full, "%.*s%s%s", (int)len, p, len ? "/" : "", bin);
        if (n > 0 && (size_t)n < sizeof full && check_exec_path(full) == 0) return 0;
        if (!end) break;
        p = end + 1;
    }
    return err_set(ERR_NOT_FOUND, "%s: not found in $PATH (%s)", bin, path);
}

int fs_open_regular(const char *path, const char *what, const char *shown, unsigned flags,
                    int *fd_out, struct stat *st_out) {
    const char *pre = what ? what : "", *sep = what ? " " : "";
    *fd_out = -1;
    int fd =
        open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (flags & FS_OPEN_NONBLOCK ? O_NONBLOCK : 0));
    if (fd < 0)
        return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "%s%s%s: %s", what ? pre : "open ",
                       sep, shown, strerror(errno));
    if (fstat(fd, st_out) != 0) {
        int e = errno;
        close(fd);
        return err_set(ERR_IO, "%s%s%s: %s", what ? pre : "stat ", sep, shown, strerror(e));
    }
    if (!S_ISREG(st_out->st_mode) && !(flags & FS_OPEN_BLOCK_OK && S_ISBLK(st_out->st_mode))) {
        close(fd);
        return err_set(flags & FS_NOT_REGULAR_CORRUPT ? ERR_CORRUPT : ERR_INVALID,
                       "%s%s%s: not a regular file", pre, sep, shown);
    }
    *fd_out = fd;
    return 0;
}
