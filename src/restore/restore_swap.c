/* restore_swap: see restore_swap.h. */
#include "restore_swap.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PART_WHAT "a restore's work in progress"

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
    if (!rc && fs_exists(p) && (rc = fs_scratch_dir_remove(p, PART_WHAT)) == 0)
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

/* Whether data dir i is distinct from those before it; ERR_INVALID naming both members. */
static int check_distinct(const RestoreSwap *s, size_t i, int *refused) {
    for (size_t j = 0; j < i; j++)
        if (strcmp(s->ms[i].data_dir, s->ms[j].data_dir) == 0) {
            *refused = 1;
            return err_set(ERR_INVALID, "members %s and %s are given the same data dir %s",
                           s->ms[j].name, s->ms[i].name, s->ms[i].data_dir);
        }
    return 0;
}

int restore_swap_lock(RestoreSwap *s, const RestoreMember *ms, size_t n, int *refused) {
    memset(s, 0, sizeof *s);
    s->ms = ms;
    s->lock_fds = malloc((n + 1) * sizeof *s->lock_fds);
    s->owns = calloc(n + 1, sizeof *s->owns);
    s->parts = calloc(n + 1, sizeof *s->parts);
    s->part_data = calloc(n + 1, sizeof *s->part_data);
    for (size_t i = 0; s->lock_fds && i <= n; i++)
        s->lock_fds[i] = -1;
    if (!s->lock_fds || !s->owns || !s->parts || !s->part_data)
        return err_set(ERR_NOMEM, "out of memory");
    s->n = n;
    for (size_t i = 0; i < n; i++) {
        const RestoreMember *m = &ms[i];
        int rc = check_distinct(s, i, refused);
        if (!rc) rc = lock_parent(m->data_dir, s->lock_fds, i, &s->lock_fds[i], &s->owns[i]);
        if (rc) return rc;
        rc = fs_dir_nonempty(m->data_dir);
        if (rc < 0) return rc;
        if (rc > 0)
            return err_set(ERR_EXISTS,
                           "data dir %s is not empty; refusing to restore over it (nothing is "
                           "ever deleted: move it aside, e.g. mv %s %s.old)",
                           m->data_dir, m->data_dir, m->data_dir);
    }
    return 0;
}

int restore_swap_prepare(RestoreSwap *s) {
    for (size_t i = 0; i < s->n; i++) {
        int rc = make_part(s->ms[i].data_dir, &s->parts[i], &s->part_data[i]);
        if (rc) return rc;
    }
    return 0;
}

int restore_swap_commit(RestoreSwap *s) {
    for (; s->committed < s->n; s->committed++) {
        const char *dir = s->ms[s->committed].data_dir;
        if (fs_exists(dir) && rmdir(dir) != 0)
            return err_set(ERR_IO, "remove empty %s: %s", dir, strerror(errno));
        int rc = fs_rename_durable(s->part_data[s->committed], dir);
        if (rc) return rc;
    }
    for (size_t i = 0; i < s->n; i++) /* only our marker is left in each */
        if (fs_scratch_dir_remove(s->parts[i], PART_WHAT)) log_warn("restored, but %s", err_msg());
    return 0;
}

void restore_swap_abort(RestoreSwap *s, int rc) {
    if (!rc || !s->parts) return;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", err_msg());
    for (size_t i = 0; i < s->n; i++) /* ours (made by make_part); committed: marker only */
        if (s->parts[i] && s->lock_fds[i] >= 0) fs_scratch_dir_remove(s->parts[i], PART_WHAT);
    if (s->committed) /* a rename or fsync failed after others were committed */
        err_set(rc, "%s (the data dirs of the first %zu members were already written)", msg,
                s->committed);
    else
        err_set(rc, "%s", msg);
}

void restore_swap_free(RestoreSwap *s) {
    for (size_t i = 0; s->lock_fds && s->owns && i < s->n; i++)
        if (s->owns[i]) close(s->lock_fds[i]);
    for (size_t i = 0; s->parts && s->part_data && i < s->n; i++) {
        free(s->parts[i]);
        free(s->part_data[i]);
    }
    FREE_ALL(s->parts, s->part_data, s->lock_fds, s->owns);
    memset(s, 0, sizeof *s);
}
