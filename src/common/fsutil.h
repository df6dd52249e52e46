/* fsutil: file-system helpers with the durability rules the stores and restore rely on:
 * a file is made visible only complete (temp file, fsync, rename, fsync of the directory). */
#ifndef ETCDBR_FSUTIL_H
#define ETCDBR_FSUTIL_H

#include <stddef.h>
#include <stdint.h>

/* mkdir -p with mode for created directories. 0 or ERR_IO. */
int fs_mkdir_p(const char *path, unsigned mode);

/* fsync of a directory (after a rename or unlink inside it). 0 or ERR_IO. */
int fs_fsync_dir(const char *dir);

/* rm -rf; absent path is success. 0 or ERR_IO naming the entry that failed. */
int fs_remove_tree(const char *path);

/* 1 if path exists (any type), 0 if not. */
int fs_exists(const char *path);

/* 1 if path is a directory with at least one entry, 0 if absent or empty, ERR_IO otherwise. */
int fs_dir_nonempty(const char *path);

/* Creates and opens a new unique file "<dir>/<prefix>XXXXXX" (mode 0600). *path_out is owned
 * by the caller (free()). Returns the fd or a negative ERR_*. */
int fs_mkstemp(const char *dir, const char *prefix, char **path_out);

/* fs_mkstemp whose file is held under an exclusive flock for as long as the fd stays open, so
 * fs_remove_stale_temp in any process leaves it alone (the kernel drops the lock when the owner
 * exits or is killed). The lock is taken before returning and the path is checked to still name
 * the file (a cleanup may remove a fresh, not yet locked file; then another name is tried). Use
 * it for every temp file a crash could leave behind. Returns the fd or a negative ERR_*. */
int fs_mkstemp_locked(const char *dir, const char *prefix, char **path_out);

/* The free space a spool or restore file must leave on its file system, so that a hostile or
 * oversized snapshot object cannot fill the disk that etcd or the system also write to:
 * max(bytes, percent % of the file system's size). Defaults FS_RESERVE_BYTES_DEFAULT and
 * FS_RESERVE_PERCENT_DEFAULT; the flags --min-free-disk-bytes and --min-free-disk-percent set it
 * (0 and 0: no reserve). Parsed configuration: call it before the threads that write start. */
#define FS_RESERVE_BYTES_DEFAULT (1ull << 30) /* 1 GiB */
#define FS_RESERVE_PERCENT_DEFAULT 5
void fs_set_free_reserve(uint64_t bytes, int percent);

/* 0 if dir's file system has the reserve plus `more` bytes free (statvfs f_bavail: what this
 * process may use). ERR_IO when it has not (the message names dir, the bytes free, the reserve
 * and the flags that set it; callers wrap the object's name) or statvfs fails. */
int fs_check_free_reserve(const char *dir, uint64_t more);

/* Checks the reserve while a file in dir grows: call fs_space_guard_check with the bytes written
 * so far after each write; statvfs runs once per FS_GUARD_EVERY bytes (and at the first call),
 * asking for FS_GUARD_EVERY more, so no write runs below the reserve. dir borrowed. */
#define FS_GUARD_EVERY (8u << 20) /* 8 MiB */
typedef struct {
    const char *dir;
    uint64_t next_check; /* bytes written at which to check again; start at 0 */
} FsSpaceGuard;
int fs_space_guard_check(FsSpaceGuard *g, uint64_t written);

/* Called by fs_remove_stale_temp for each removed file (bytes: its size). */
typedef void (*FsRemovedCb)(void *ctx, const char *path, int64_t bytes);

/* Removes temp files an earlier process left in dir when it was killed: only regular files named
 * exactly "<prefix>XXXXXX" (the six characters mkstemp puts there) and only when no live process
 * holds their flock (see fs_mkstemp_locked). Never follows symlinks, never recurses, never
 * touches anything else. A missing dir is no error. *removed (may be NULL) = files removed.
 * 0 or ERR_IO when dir cannot be read; a file that cannot be removed is skipped. */
int fs_remove_stale_temp(const char *dir, const char *prefix, FsRemovedCb cb, void *ctx,
                         int *removed);

/* fsync(fd), then rename(from, to), then fsync the directory of `to`. 0 or ERR_IO. */
int fs_commit_file(int fd, const char *from, const char *to);

/* Joins a and b with one '/' into a new string (owned; NULL on allocation failure). */
char *fs_join(const char *a, const char *b);

/* A private scratch directory "<temp_dir>/<prefix>XXXXXX" (temp_dir created 0700 when missing and
 * never removed: it may hold the user's files), locked for this process by an exclusive flock
 * on its "owner.lock" (*lock_fd: close it after removing the directory). First removes the
 * scratch directories of this prefix that owners killed before they could clean up: only exact
 * names, only when no live process holds their lock (the kernel drops it when the owner dies),
 * one without a lock file once it is a minute old; each removal is logged naming `who` (e.g.
 * "restore"). *out owned. 0 or ERR_IO / ERR_NOMEM. */
int fs_scratch_create(const char *temp_dir, const char *prefix, const char *who, char **out,
                      int *lock_fd);

/* Directory part of path as a new string (owned). */
char *fs_dirname(const char *path);

/* Size of a file in bytes, or a negative ERR_*. */
int64_t fs_file_size(const char *path);

#endif
