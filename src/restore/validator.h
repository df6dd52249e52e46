/* validator: decides whether an etcd data directory can be started as it is (docs/go-tool.md §9.1):
 * wrong-volume guard, structure, the bbolt backend (open, revision, consistent index; FULL mode
 * walks every page), the raft log (FULL mode reads every WAL record and the snap files), and the
 * revision against the newest backup in the store. Read-only except the safe_guard file. Unlike
 * the Go tool it never starts etcd: the WAL entries not yet in the db that can write a key are
 * counted instead. */
#ifndef ETCDBR_VALIDATOR_H
#define ETCDBR_VALIDATOR_H

#include "../store/store.h"
#include "../format/wal.h"

#include <stdint.h>

typedef enum { VALIDATE_FULL = 0, VALIDATE_SANITY = 1 } ValidationMode;

/* Same order and values as the Go tool's DataDirStatus (pkg/initializer/validator/types.go). */
typedef enum {
    DATA_DIR_VALID = 0,
    DATA_DIR_WRONG_VOLUME_MOUNTED = 1, /* safe_guard content is not $POD_NAMESPACE */
    DATA_DIR_NOT_EXIST = 2,
    DATA_DIR_INV_STRUCT = 3,     /* member/, member/snap or member/wal missing */
    DATA_DIR_CORRUPT = 4,        /* db, WAL or snap files unusable */
    DATA_DIR_BOLTDB_CORRUPT = 5, /* Go: bbolt panicked; never returned here (we do not panic) */
    DATA_DIR_STATUS_UNKNOWN = 6, /* stat/store error: could not decide */
    DATA_DIR_INVALID_IN_MULTI_NODE = 7, /* the initializer's multi-node post-filter; not returned */
    DATA_DIR_REVISION_CONSISTENCY_ERROR = 8, /* the store holds revisions the data dir lacks */
    DATA_DIR_FAIL_BELOW_REVISION = 9,        /* Go's failBelowRevision check; not returned */
    DATA_DIR_FAIL_TO_OPEN_BOLTDB = 10,       /* member/snap/db stays locked (etcd running) */
} DataDirStatus;

typedef struct ValidationOptions {
    /* How long to wait for the lock on member/snap/db that a running etcd holds (the Go tool
     * waits 120 s). 0 = try once. */
    int lock_timeout_ms;
} ValidationOptions;

typedef struct ValidationResult {
    DataDirStatus status;
    char message[1536];        /* why, naming file, offset, revisions */
    int64_t db_revision;       /* mvcc revision in member/snap/db; 0 if not read */
    uint64_t consistent_index; /* meta/consistent_index; 0 if absent or not read */
    uint64_t db_pages;         /* pages walked by the FULL check */
    int64_t store_revision;    /* latest set's last revision; 0 without store or backups */
    int wal_read;              /* wal below is filled */
    WalInfo wal;
    double seconds; /* wall time of the validation */
} ValidationResult;

/* Validates data_dir (etcd's --data-dir). store (borrowed, may be NULL = no provider) is listed
 * once for its latest set. Environment: POD_NAMESPACE (when set: the safe_guard rule, which may
 * create <parent of data_dir>/safe_guard). Always fills *out; the caller acts on out->status.
 * Returns 0, or ERR_INVALID for NULL arguments. Blocking (file I/O, store listing, lock wait);
 * safe to call from several threads on different data dirs. */
int validate_data_dir(const char *data_dir, ValidationMode mode, Store *store,
                      ValidationResult *out);

/* The same with options (opts NULL = defaults: lock_timeout_ms 120000). */
int validate_data_dir_opts(const char *data_dir, ValidationMode mode, Store *store,
                           const ValidationOptions *opts, ValidationResult *out);

/* Whether a process runs on data_dir: etcd holds an exclusive flock on member/snap/db (bbolt)
 * and a lock (OFD or flock) on its open member/wal/ *.wal files for as long as it runs. Checks
 * without waiting. ERR_EXISTS with a message naming the locked file when one is held; 0 when
 * none is, or the files are missing (nothing to say); never blocks. */
int data_dir_in_use(const char *data_dir);

/* The Go tool's name of a status ("DataDirectoryValid", "WrongVolumeMounted", ...); static. */
const char *data_dir_status_name(DataDirStatus status);

/* "full" / "sanity" <-> ValidationMode; 0 or ERR_INVALID. */
int validation_mode_parse(const char *s, ValidationMode *out);

#endif
