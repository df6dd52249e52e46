/* snapshot_file: checks a full snapshot held in a file, as etcd's Snapshot stream gives it (the
 * bbolt db followed by the SHA-256 of it), for every layer that has one: the snapshotter's
 * staged snapshot (backup/fullsnap.c) and the restore's downloaded or local one
 * (restore/restore_fetch.c). */
#ifndef ETCDBR_SNAPSHOT_FILE_H
#define ETCDBR_SNAPSHOT_FILE_H

#include "../codec/io.h"

#include <stdint.h>

/* Verifies a staged full snapshot file at path whose bytes (total of them) all went through
 * checker (a trailer_checker_new writer): etcd's rule (etcdutl snapshot restore) is that a file of
 * size % 512 == 32 is db pages plus a 32-byte SHA-256 trailer, which must match; without one the
 * file is accepted as a bare db only with allow_missing_trailer (--skip-hash-check). Then the db
 * part must open as bbolt (with full_walk, every page is walked: ~0.3 s per 100 MB from disk) and
 * hold etcd's key bucket. *db_len = db bytes; *revision = the etcd revision inside the db.
 * 0 or ERR_CORRUPT (empty, no or wrong trailer, not an etcd db) / ERR_IO. */
int snapshot_file_verify(const char *path, IoWriter *checker, uint64_t total,
                         int allow_missing_trailer, int full_walk, uint64_t *db_len,
                         int64_t *revision);

/* A full snapshot being written to a scratch file through a trailer checker, for a reader that
 * checks the file's hash and then opens its db part (backup/chainproof.c, restore/verifier.c). */
typedef struct {
    char *path;        /* owned */
    int fd;            /* owned; open for writing */
    IoWriter *fdw;     /* owned; writes fd */
    IoWriter *checker; /* owned; trailer_checker_new over fdw: the snapshot's bytes go here */
} SnapshotSpool;

/* Starts *sp on fd, created at path; takes both (snapshot_spool_discard releases them, whatever
 * this returns). 0 or ERR_NOMEM. */
int snapshot_spool_start(SnapshotSpool *sp, char *path, int fd);

/* Frees the writers, closes and removes the file and frees its path. */
void snapshot_spool_discard(SnapshotSpool *sp);

#endif
