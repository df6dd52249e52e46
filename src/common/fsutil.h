/* fsutil: file-system helpers with the durability rules the stores and restore rely on:
 * a file is made visible only complete (temp file, fsync, rename, fsync of the directory). */
#ifndef ETCDBR_FSUTIL_H
#define ETCDBR_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* mkdir -p with mode for created directories; the parent of each directory it creates is
 * fsynced, so the whole path survives a crash once this returns. 0, ERR_IO or ERR_NOMEM. */
int fs_mkdir_p(const char *path, unsigned mode);

/* fsync of a directory (after a rename or unlink inside it). 0 or ERR_IO. */
int fs_fsync_dir(const char *dir);

/* Tests only: hook(ctx, dir) is called by every fs_fsync_dir before it fsyncs (NULL: none). Not
 * thread-safe: set it while no other thread uses fsutil. */
typedef void (*FsFsyncDirHook)(void *ctx, const char *dir);
void fs_set_fsync_dir_hook(FsFsyncDirHook hook, void *ctx);

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

/* rename(from, to) without ever replacing `to` (RENAME_NOREPLACE; where the file system lacks
 * it, an existence check first), then fsync of the directory of `to` and, when it differs, of
 * `from`'s. 0, ERR_EXISTS (`to` exists; nothing renamed), ERR_IO or ERR_NOMEM. */
int fs_rename_durable(const char *from, const char *to);

/* fsync(fd), then fs_rename_durable(from, to). 0, ERR_EXISTS or ERR_IO. */
int fs_commit_file(int fd, const char *from, const char *to);

/* The marker file etcdbr writes into every scratch directory it creates beside a data dir
 * ("<data-dir>.part", "<data-dir>.restore"): only a directory holding it is ever removed. */
#define FS_SCRATCH_MARKER ".etcdbr-scratch"

/* Writes the file "<dir>/<marker>" (0600, replaced if present, never through a symlink) with
 * text (a note for the operator: who made the directory and why), fsyncs it and dir.
 * 0, ERR_IO or ERR_NOMEM. */
int fs_mark_dir(const char *dir, const char *marker, const char *text);

/* 1 if dir is a directory (not a symlink) holding a regular file named marker, 0 if not (also
 * when dir is absent), ERR_NOMEM. */
int fs_dir_has_marker(const char *dir, const char *marker);

/* Removes the directory dir and everything below it, the file `marker` inside it last, so that
 * an interrupted removal still leaves it marked (and removable by the next one); then fsyncs
 * its parent. An absent dir is success. 0, ERR_IO naming the entry that failed, or ERR_NOMEM.
 * The caller checks first that dir is its own (fs_dir_has_marker). */
int fs_remove_marked_tree(const char *dir, const char *marker);

/* Creates the scratch directory path (0700; it must not exist: ERR_EXISTS), fsyncs its parent
 * and writes FS_SCRATCH_MARKER with text into it (fs_mark_dir). 0, ERR_EXISTS or ERR_IO. */
int fs_scratch_dir_make(const char *path, const char *text);

/* Removes a scratch directory made by fs_scratch_dir_make (and everything below it), then
 * fsyncs its parent. An absent path is success, and so is an empty directory (rmdir: nothing is
 * lost; it is what a crash between mkdir and the marker leaves). Anything else at path (a file,
 * a symlink, a directory without FS_SCRATCH_MARKER: the operator's, or another tool's) is never
 * touched:
 * ERR_EXISTS with a message naming path, `what` etcdbr uses it for (e.g. "the restore of
 * /var/etcd/data") and what to do. 0, ERR_EXISTS or ERR_IO. */
int fs_scratch_dir_remove(const char *path, const char *what);

/* Joins a and b with one '/' into a new string (owned; NULL on allocation failure). */
char *fs_join(const char *a, const char *b);

/* A private scratch directory "<temp_dir>/<prefix>XXXXXX" (temp_dir created 0700 when missing and
 * never removed: it may hold the user's files), locked for this process by an exclusive flock on
 * its "owner.lock", taken right after mkdtemp (*lock_fd: close it after removing the directory),
 * then marked with FS_SCRATCH_MARKER. First removes the scratch directories of this prefix that
 * owners killed before they could clean up: exact names only, only when no live process holds
 * their lock (the kernel drops it when the owner dies) or they have no lock file; with their
 * content when they hold the marker or the lock file, with rmdir when empty (a kill right after
 * mkdtemp); an unmarked directory with content is never touched. A creator whose directory a
 * concurrent cleanup took before it was locked starts over with a new name. Each removal is
 * logged naming `who` (e.g. "restore"). *made_temp_dir (when not NULL) is 1 when temp_dir did
 * not exist and was made here: pass it to fs_scratch_temp_dir_release after removing the scratch
 * directory, so that a default relative temp_dir (--restoration-temp-snapshots-dir's
 * "default.restoration.tmp") is not left behind in the working directory. *out owned. 0 or
 * ERR_IO / ERR_NOMEM. */
int fs_scratch_create(const char *temp_dir, const char *prefix, const char *who, char **out,
                      int *lock_fd, int *made_temp_dir);

/* Removes temp_dir when fs_scratch_create made it (made_temp_dir) and it is empty now (rmdir:
 * another process's scratch directory or the user's files in it keep it). Best effort. */
void fs_scratch_temp_dir_release(const char *temp_dir, int made_temp_dir);

/* Directory part of path as a new string (owned). */
char *fs_dirname(const char *path);

/* Whether bin can be executed as execvp(3) would run it: a name with a '/' as that path, else
 * the first match in $PATH (default "/usr/local/bin:/usr/bin:/bin"). 0 when it is a regular file
 * we may execute; ERR_NOT_FOUND (no such file, none in $PATH) or ERR_INVALID (not a regular
 * file, not executable, an empty name), the message naming the path or $PATH. */
int fs_check_executable(const char *bin);

/* fs_open_regular's flags. */
enum {
    FS_OPEN_BLOCK_OK = 1,      /* a block device is accepted as well as a regular file */
    FS_OPEN_NONBLOCK = 2,      /* O_NONBLOCK: a FIFO without a writer does not block the open */
    FS_NOT_REGULAR_CORRUPT = 4 /* what is not a regular file is ERR_CORRUPT, not ERR_INVALID */
};

/* Opens path read-only (O_CLOEXEC | O_NOCTTY) and fstats it, refusing what is not a regular
 * file. what (or NULL) and shown name the file in messages ("key file <shown>: ..."; without what
 * "open <shown>: ...", "stat <shown>: ..."). 0 with *fd_out (the caller closes it) and *st_out;
 * else ERR_NOT_FOUND (no such file), ERR_IO (open or stat failed), ERR_INVALID or, with
 * FS_NOT_REGULAR_CORRUPT, ERR_CORRUPT (not a regular file), and nothing stays open. */
int fs_open_regular(const char *path, const char *what, const char *shown, unsigned flags,
                    int *fd_out, struct stat *st_out);

/* Size of a file in bytes, or a negative ERR_*. */
int64_t fs_file_size(const char *path);

#endif
