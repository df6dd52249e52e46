/* snapshot_file: see snapshot_file.h. */
#include "snapshot_file.h"
#include "bbolt.h"
#include "../codec/sha256.h"
#include "../common/err.h"

#include <stdlib.h>
#include <unistd.h>

int snapshot_file_verify(const char *path, IoWriter *checker, uint64_t total,
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

int snapshot_spool_start(SnapshotSpool *sp, char *path, int fd) {
    sp->path = path;
    sp->fd = fd;
    sp->fdw = io_fd_writer_new(fd);
    sp->checker = sp->fdw ? trailer_checker_new(sp->fdw, 0) : NULL;
    return sp->checker ? 0 : err_set(ERR_NOMEM, "out of memory");
}

void snapshot_spool_discard(SnapshotSpool *sp) {
    io_writer_free(sp->checker);
    io_writer_free(sp->fdw);
    close(sp->fd);
    unlink(sp->path);
    free(sp->path);
}
