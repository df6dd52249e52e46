/* store: the snapshot store, a flat key space of immutable objects, behind a driver vtable
 * (store_driver.h). The generic layer owns the prefix ("<store-prefix>/v2/"), listing and name
 * parsing. A write becomes visible only when io_finish + store_writer_commit succeed; abort
 * discards it. Thread-safety: a Store may be used from several threads at once (drivers say so). */
#ifndef ETCDBR_STORE_H
#define ETCDBR_STORE_H

#include "../codec/io.h"
#include "snapname.h"

#include <stddef.h>
#include <stdint.h>

typedef struct Store Store;

typedef struct StoreConfig {
    const char *provider;  /* "Local" (or "" = Local); others: ERR_UNSUPPORTED for now */
    const char *container; /* Local: directory; relative = relative to $HOME, like the Go tool.
                              NULL/"" = $STORAGE_CONTAINER, else "default.bkp" */
    const char *prefix;    /* --store-prefix ("" allowed) */
    const char *temp_dir;  /* --snapstore-temp-directory */
} StoreConfig;

/* 0 or ERR_INVALID/ERR_UNSUPPORTED/ERR_IO. Local creates the root directory (0700). */
int store_open(const StoreConfig *cfg, Store **out);
void store_free(Store *s);

/* Human-readable location, e.g. "Local:/home/x/backups/etcd-main" (borrowed). */
const char *store_describe(const Store *s);

/* Lists every parseable snapshot (v1 and v2, chunks included with is_chunk set), sorted by
 * snapname_sort. Unparseable objects are logged at warn level and skipped. *out is malloc'ed
 * (owned by caller; free()); NULL when *n_out is 0. */
int store_list(Store *s, Snapshot **out, size_t *n_out);

/* Opens an object for reading (raw bytes, still compressed). *out owned (io_reader_free). */
int store_open_read(Store *s, const Snapshot *snap, IoReader **out);

typedef struct StoreWriter StoreWriter;

/* Starts writing the v2 object snap_name ("Full-..." as from snapname_format). Bytes go to
 * store_writer_io(); nothing is visible until store_writer_commit. */
int store_open_write(Store *s, const char *snap_name, StoreWriter **out);
IoWriter *store_writer_io(StoreWriter *w);
/* Makes the object visible (local: fsync, rename, fsync dir) and frees w. */
int store_writer_commit(StoreWriter *w);
/* Discards the object and frees w. NULL-safe. */
void store_writer_abort(StoreWriter *w);

/* Describes the v2 object snap_name would be stored as (key, prefix, revisions, suffix) without
 * touching the store. 0 or ERR_INVALID when snap_name is not a snapshot name. */
int store_snapshot_for_name(const Store *s, const char *snap_name, Snapshot *out);

/* Removes one snapshot object. */
int store_remove(Store *s, const Snapshot *snap);

#endif
