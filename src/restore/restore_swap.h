/* restore_swap: the data dirs a restore writes, and the swap into place (restorer.h). Each
 * member's data dir must be distinct, absent or empty; its parent directory is locked (flock,
 * released when the process ends) so that two restores into one data dir never delete each
 * other's work. The member dir is written into "<data-dir>.part/data-dir" (a directory with
 * our marker, fs_scratch_dir_make) and renamed to the data dir only once every member's is
 * written (fs_rename_durable: the parent fsynced). Nothing a restore did not create is ever
 * deleted: a non-empty data dir is refused, a "<data-dir>.part" without our marker is the
 * operator's and refused, and on failure only our own "<data-dir>.part" dirs are removed. */
#ifndef ETCDBR_RESTORE_SWAP_H
#define ETCDBR_RESTORE_SWAP_H

#include "restorer.h"

#include <stddef.h>

typedef struct RestoreSwap {
    const RestoreMember *ms; /* borrowed: the members, their data dirs */
    size_t n;
    int *lock_fds;    /* per member: its parent's locked fd (shared by members of one parent) */
    int *owns;        /* per member: lock_fds[i] is this member's to close */
    char **parts;     /* per member: "<data-dir>.part" (ours once restore_swap_prepare made it) */
    char **part_data; /* per member: "<data-dir>.part/data-dir", where its member dir is written */
    size_t committed; /* members renamed into place */
} RestoreSwap;

/* Checks and locks the targets of ms[0..n) (borrowed; must outlive s): distinct data dirs,
 * each parent created (0700) and locked, each data dir absent or empty. s is zeroed first;
 * restore_swap_free it also on error. Errors: ERR_INVALID with *refused set (two members given
 * one data dir), ERR_EXISTS (a data dir not empty, naming it; or another restore holds the lock
 * on its parent), ERR_IO, ERR_NOMEM. */
int restore_swap_lock(RestoreSwap *s, const RestoreMember *ms, size_t n, int *refused);

/* Makes each member's "<data-dir>.part" (a left-over one of an earlier restore that was
 * killed, with our marker, is removed first). ERR_EXISTS when one without our marker is there
 * (never touched), ERR_IO, ERR_NOMEM. */
int restore_swap_prepare(RestoreSwap *s);

/* Renames every part_data[i] to its data dir (an empty data dir is removed first), durably,
 * then removes the "<data-dir>.part" dirs (only our marker is left in them; a failure there is
 * a warning). ERR_IO naming the dir; s->committed says how many were renamed. */
int restore_swap_commit(RestoreSwap *s);

/* After a failure (rc, an ERR_*): removes each "<data-dir>.part" this restore made (nothing
 * else), and when some members were already committed says so in the error message (the
 * error stays rc). The locks are kept: restore_swap_free. */
void restore_swap_abort(RestoreSwap *s, int rc);

/* Releases the locks and frees what s holds. NULL-safe on a zeroed s. */
void restore_swap_free(RestoreSwap *s);

#endif
