/* fsutil: see fsutil.h. */
#include "fsutil.h"
#include "err.h"
#include "log.h"

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

int fs_mkdir_p(const char *path, unsigned mode) {
    char *p = strdup(path);
    if (!p) return err_set(ERR_NOMEM, "mkdir %s: out of memory", path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, mode) != 0 && errno != EEXIST) {
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

int fs_dir_nonempty(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        if (errno == ENOENT) return 0;
        return err_set(ERR_IO, "opendir %s: %s", path, strerror(errno));
    }
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            found = 1;
            break;
        }
    }
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

int fs_commit_file(int fd, const char *from, const char *to) {
    if (fsync(fd) != 0) return err_set(ERR_IO, "fsync %s: %s", from, strerror(errno));
    if (rename(from, to) != 0)
        return err_set(ERR_IO, "rename %s -> %s: %s", from, to, strerror(errno));
    char *d = fs_dirname(to);
    if (!d) return err_set(ERR_NOMEM, "out of memory");
    int rc = fs_fsync_dir(d);
    free(d);
    return rc;
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

#define SCRATCH_LOCK "owner.lock"

static void remove_stale_scratch(const char *temp_dir, const char *prefix, const char *who) {
    DIR *d = opendir(temp_dir);
    if (!d) return;
    struct dirent *e;
    size_t plen = strlen(prefix);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) != 0 || strlen(e->d_name) != plen + 6) continue;
        char *dir = fs_join(temp_dir, e->d_name);
        char *lock = dir ? fs_join(dir, SCRATCH_LOCK) : NULL;
        struct stat st;
        int stale = 0;
        if (lock && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
            int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (fd >= 0) {
                stale = flock(fd, LOCK_EX | LOCK_NB) == 0;
                close(fd);
            } else {
                stale = errno == ENOENT && st.st_mtime < time(NULL) - 60;
            }
        }
        if (stale) {
            if (fs_remove_tree(dir) == 0)
                log_info("removed %s, left by an earlier %s that did not finish", dir, who);
            else
                log_warn("cannot remove %s, left by an earlier %s: %s", dir, who, err_msg());
        }
        free(lock);
        free(dir);
    }
    closedir(d);
}

int fs_scratch_create(const char *temp_dir, const char *prefix, const char *who, char **out,
                      int *lock_fd) {
    *out = NULL;
    *lock_fd = -1;
    int rc = fs_mkdir_p(temp_dir, 0700);
    if (rc) return rc;
    remove_stale_scratch(temp_dir, prefix, who);
    size_t n = strlen(prefix) + 7;
    char *name = malloc(n);
    if (name) snprintf(name, n, "%sXXXXXX", prefix);
    char *dir = name ? fs_join(temp_dir, name) : NULL;
    free(name);
    if (!dir) return err_set(ERR_NOMEM, "out of memory");
    if (!mkdtemp(dir)) {
        rc = err_set(ERR_IO, "create a scratch directory in %s: %s", temp_dir, strerror(errno));
        free(dir);
        return rc;
    }
    char *lock = fs_join(dir, SCRATCH_LOCK);
    int fd = lock ? open(lock, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        rc = err_set(ERR_IO, "lock %s: %s", lock ? lock : dir, strerror(errno));
        if (fd >= 0) close(fd);
        free(lock);
        fs_remove_tree(dir);
        free(dir);
        return rc;
    }
    free(lock);
    *lock_fd = fd;
    *out = dir;
    return 0;
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
