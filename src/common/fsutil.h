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

/* fsync(fd), then rename(from, to), then fsync the directory of `to`. 0 or ERR_IO. */
int fs_commit_file(int fd, const char *from, const char *to);

/* Joins a and b with one '/' into a new string (owned; NULL on allocation failure). */
char *fs_join(const char *a, const char *b);

/* Directory part of path as a new string (owned). */
char *fs_dirname(const char *path);

/* Size of a file in bytes, or a negative ERR_*. */
int64_t fs_file_size(const char *path);

#endif
