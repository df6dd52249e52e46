/* store: the snapshot store, a flat key space of immutable objects, behind a driver vtable
 * (store_driver.h). The generic layer owns the prefix ("<store-prefix>/v2/"), listing and name
 * parsing. A write becomes visible only when io_finish + store_writer_commit succeed; abort
 * discards it. Thread-safety: a Store may be used from several threads at once (drivers say so). */
#ifndef ETCDBR_STORE_H
#define ETCDBR_STORE_H

#include "../codec/compress.h"
#include "../codec/crypt.h"
#include "../codec/io.h"
#include "history.h"
#include "snapname.h"

#include <stddef.h>
#include <stdint.h>

typedef struct Store Store;

typedef struct StoreConfig {
    const char *provider;  /* "Local" (or "" = Local), "S3", "ABS", "GCS", "Swift", "OSS", "ECS",
                              "OCS" (the Go tool's names, case-sensitive); see store_providers */
    const char *container; /* Local: directory; relative = relative to $HOME, like the Go tool.
                              NULL/"" = $STORAGE_CONTAINER, else "default.bkp". Object stores:
                              the bucket or container */
    const char *prefix;    /* --store-prefix ("" allowed) */
    const char *temp_dir;  /* --snapstore-temp-directory */
    /* object stores (docs/go-tool.md §1.2, §12); NULL/0 = the provider's default */
    const char *endpoint_override;  /* --store-endpoint-override: scheme://host[:port] */
    const char *region;             /* overrides the credentials' region */
    const char *credentials;        /* a credentials file or directory; NULL = the provider's
                                       environment variable (e.g. AWS_APPLICATION_CREDENTIALS) */
    const char *ca_file;            /* PEM bundle trusted for the endpoint; NULL = system */
    int insecure_skip_verify;       /* do not verify the endpoint's TLS certificate */
    int64_t min_chunk_size;         /* --min-chunk-size: bytes per part (>= 5 MiB) */
    int max_parallel_chunk_uploads; /* --max-parallel-chunk-uploads (>= 1) */
    int64_t timeout_ms;             /* per request; 0 = 180 s (the Go tool's chunk timeout) */
    const char *env_prefix;         /* prefix of every environment variable the driver reads:
                                       NULL/"" (the store), "SOURCE_" (copy's source) or
                                       "SECONDARY_" (the server's secondary store); docs/go-tool.md §12.
                                       ECS's variables take none. */
} StoreConfig;

/* The providers a StoreConfig may name, for messages: "Local (or empty), S3, ..." (static). */
const char *store_providers(void);

/* 0 or ERR_INVALID/ERR_UNSUPPORTED/ERR_IO. Local creates the root directory (0700). */
int store_open(const StoreConfig *cfg, Store **out);
void store_free(Store *s);

/* Gives s the encryption keys (crypt.h; owned by s from now on, freed and wiped by store_free or
 * the next call; NULL removes them). Call before any reader or writer is opened (not
 * thread-safe). With keys, store_name_suffix names new objects ".enc..." and every writer that
 * names its object so (fullsnap_store_stream) encrypts with the first key; snapobj decrypts
 * objects named ".enc" with whichever key their header names. */
void store_set_keyring(Store *s, Keyring *kr);

/* The keys (borrowed; valid until store_set_keyring or store_free), or NULL. Thread-safe. */
const Keyring *store_keyring(const Store *s);

/* The name suffix for a new object of s written with compression, for snapname_format: the
 * compression suffix ("", ".gz", ".zlib", ".Z", ".zst"), after ".enc" when s has keys
 * (".enc", ".enc.gz", ...). Static storage; thread-safe. Every writer of snapshot objects names
 * them with this, so name and contents agree. */
const char *store_name_suffix(const Store *s, CompressKind compression);

/* Human-readable location, e.g. "Local:/home/x/backups/etcd-main" (borrowed). */
const char *store_describe(const Store *s);
/* Where the store is, for the keys of local caches: the description with the endpoint override,
 * credentials, region and variable prefix it was opened with (store_open; else the description).
 * Two stores that differ in any of these never share a cache entry. Borrowed from s. */
const char *store_scope(const Store *s);

/* Bounds of one listing (docs/stores.md): a store with more snapshot objects than this under
 * its prefix (v1 and v2 together; history tags too) fails the listing with an error naming the cap,
 * rather than growing memory without end (a Snapshot entry takes about 2 KiB, so about 100 MB at
 * the cap; at one delta every 20 s that is 11 days of deltas without garbage collection). */
#define STORE_LIST_MAX_SNAPSHOTS 50000
/* History records read by one listing (one small GET each). */
#define STORE_LIST_MAX_HISTORIES 10000

/* Lists every parseable snapshot (v1 and v2, chunks included with is_chunk set), sorted by
 * snapname_sort, each annotated with its history (history.h); objects a newer history abandoned
 * are left out. Objects that are not snapshots are skipped, counted and logged at warn level once
 * per listing (their number and the first one's name). *out is malloc'ed
 * (owned by caller; free()); NULL when *n_out is 0. */
int store_list(Store *s, Snapshot **out, size_t *n_out);

/* store_list with options: include_abandoned keeps abandoned objects (marked); *recs (may be
 * NULL) receives the history records (malloc'ed, *n_recs entries; a record that cannot be read
 * or parsed is logged and left out). One listing of the snapshots plus one of the history tags. */
int store_list_ex(Store *s, int include_abandoned, Snapshot **out, size_t *n_out,
                  HistoryRecord **recs, size_t *n_recs);

/* While pinned, store_list and store_list_ex answer from one listing, made at the first call
 * after the pin (a copy each time): a restore or an initialization that asks several times lists
 * the store once (three paginated listings on S3 before). Pins nest; the listing is dropped
 * when the last pin goes or when anything is written or removed through this Store.
 * Thread-safe. */
void store_pin_listing(Store *s);
void store_unpin_listing(Store *s);

/* Writes history r's record (<prefix>/etcdbr/history/<id>/record.json). An existing record of
 * the same id is success (records are written once, before the history's first object). */
int store_history_put_record(Store *s, const HistoryRecord *r);

/* Tags snap_name (a v2 name as for store_open_write) as an object of history: an empty object
 * <prefix>/etcdbr/history/<history>/<snap_name>. Written before the object itself, so an object
 * of ours is never untagged; an existing tag is success. */
int store_history_tag(Store *s, const char *history, const char *snap_name);

/* Removes the tag of snap (after the object itself was removed). A missing tag is success. */
int store_history_untag(Store *s, const Snapshot *snap);

/* Opens an object for reading (raw bytes, still compressed). *out owned (io_reader_free). */
int store_open_read(Store *s, const Snapshot *snap, IoReader **out);

/* The object of snap as a local file, opened read-only into *fd (owned by the caller), for a
 * store whose objects are local files that are never written in place (Local): a reader can
 * use it where it lies instead of copying it. ERR_UNSUPPORTED for other stores, ERR_NOT_FOUND,
 * ERR_IO. */
int store_open_file(Store *s, const Snapshot *snap, int *fd);

/* store_open_read from byte offset (to resume an interrupted download). */
int store_open_read_at(Store *s, const Snapshot *snap, uint64_t offset, IoReader **out);

typedef struct StoreWriter StoreWriter;

/* Starts writing the v2 object snap_name ("Full-..." as from snapname_format). Bytes go to
 * store_writer_io(); nothing is visible until store_writer_commit. */
int store_open_write(Store *s, const char *snap_name, StoreWriter **out);
IoWriter *store_writer_io(StoreWriter *w);
/* Makes the object visible (local: fsync, rename, fsync dir) and frees w. */
int store_writer_commit(StoreWriter *w);
/* Discards the object and frees w. NULL-safe. */
void store_writer_abort(StoreWriter *w);

/* Where s keeps its v2 objects: "v2/" or "<store prefix>/v2/" (the prefix as cleaned from
 * --store-prefix), as Snapshot.prefix holds it, into out (cap bytes). 0, or ERR_INVALID when it
 * does not fit. */
int store_v2_key_prefix(const Store *s, char *out, size_t cap);

/* Describes the v2 object snap_name would be stored as (key, prefix, revisions, suffix) without
 * touching the store. 0 or ERR_INVALID when snap_name is not a snapshot name. */
int store_snapshot_for_name(const Store *s, const char *snap_name, Snapshot *out);

/* Whether snap's object is in the store: 0 with *size its bytes, ERR_NOT_FOUND, or ERR_IO. */
int store_snapshot_stat(Store *s, const Snapshot *snap, int64_t *size);

/* GC's housekeeping: lets the driver delete what its uploads leave behind under the store's
 * v2/ prefix once their object exists (store_driver.h sweep_leftovers; GCS chunk objects). 0 when
 * the driver has nothing to sweep; errors are the listing's. */
int store_sweep_leftovers(Store *s);

/* Removes one snapshot object. */
int store_remove(Store *s, const Snapshot *snap);

#endif
