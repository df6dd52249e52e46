/* store_driver: the contract between the generic store layer (store.c) and one storage backend.
 * A driver sees a flat space of keys ("etcd-main/v2/Full-...", '/'-separated, relative to its
 * root or bucket) and knows nothing of snapshot names, prefixes or versions; store.c owns those.
 * Drivers declare what they can do with feature bits instead of stubbing calls. Adding a driver
 * (S3, Azure, GCS, Swift, OSS) means a new store_<name>.c and one constructor below. */
#ifndef ETCDBR_STORE_DRIVER_H
#define ETCDBR_STORE_DRIVER_H

#include "../codec/io.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

/* Feature bits (StoreDriverVt.features). */
enum {
    /* Keys map to a directory tree: a "dir/" level exists on its own and may be left empty after
     * its last object is removed; remove_dir is implemented. Object stores leave this unset. */
    STORE_FEAT_DIRECTORIES = 1u << 0,
    /* Every call may be made from several threads at once on one driver instance. */
    STORE_FEAT_THREAD_SAFE = 1u << 1,
    /* commit refuses atomically (ERR_EXISTS) to replace an object that appeared after open_write;
     * without it the generic layer's stat check before open_write is the only guard. */
    STORE_FEAT_NO_REPLACE = 1u << 2,
};

typedef struct StoreDriver StoreDriver;
typedef struct StoreDriverWriter StoreDriverWriter;

/* Called once per object found by list: key (borrowed, valid during the call) and size in bytes
 * (-1 if the backend does not say). A nonzero return stops the listing and is returned by list. */
typedef int (*StoreDriverListCb)(void *ctx, const char *key, int64_t size);

typedef struct StoreDriverVt {
    const char *name; /* provider name as on the command line: "Local", "S3", ... */
    unsigned features;
    /* Reports every object whose key starts with key_prefix (always "" or ending in '/'), at any
     * depth, in no particular order, paging through the backend as needed. Objects that a
     * write in progress holds (temp files, uncommitted uploads) are not reported. A prefix with
     * nothing under it is success. 0 or ERR_IO (message names the path/endpoint). */
    int (*list)(StoreDriver *d, const char *key_prefix, StoreDriverListCb cb, void *ctx);
    /* Opens key for reading from byte offset (0 = the first; an offset at or past the end gives
     * an empty stream), so an interrupted download resumes instead of restarting. *out owned by
     * the caller (io_reader_free). ERR_NOT_FOUND if absent, ERR_IO otherwise. */
    int (*open_read)(StoreDriver *d, const char *key, uint64_t offset, IoReader **out);
    /* Starts writing key. Nothing is visible under key until commit succeeds. ERR_EXISTS if key
     * already exists (drivers that can tell), ERR_INVALID for a key the backend cannot hold. */
    int (*open_write)(StoreDriver *d, const char *key, StoreDriverWriter **out);
    /* Deletes one object. ERR_NOT_FOUND if absent. */
    int (*remove)(StoreDriver *d, const char *key);
    /* Size of key in bytes into *size. ERR_NOT_FOUND if absent. */
    int (*stat)(StoreDriver *d, const char *key, int64_t *size);
    /* STORE_FEAT_DIRECTORIES only (NULL otherwise): removes the directory dir_key ("a/b", no
     * trailing '/') if it is empty; a missing or non-empty directory is success. */
    int (*remove_dir)(StoreDriver *d, const char *dir_key);
    /* Optional (NULL = nothing to do), called by GC only, never by a listing for a restore:
     * deletes what uploads of this backend leave behind beside an object once that object
     * exists under key_prefix (GCS: the Go tool's chunk objects, docs/go-tool.md §6.1). Best
     * effort: 0, or ERR_IO when the listing failed. */
    int (*sweep_leftovers)(StoreDriver *d, const char *key_prefix);
    /* Optional (NULL = the objects are not local files): opens key's regular file read-only
     * into *fd (owned by the caller). Only for a backend whose objects are created whole (by
     * rename) and never written in place, so the bytes behind *fd never change.
     * ERR_NOT_FOUND if absent, ERR_IO otherwise. */
    int (*open_file)(StoreDriver *d, const char *key, int *fd);
    /* "Local:/abs/root" or "S3:bucket" (borrowed, lives as long as the driver). */
    const char *(*describe)(const StoreDriver *d);
    /* Releases the driver. Called through store_driver_free (NULL-safe). */
    void (*free)(StoreDriver *d);
} StoreDriverVt;

struct StoreDriver {
    const StoreDriverVt *vt;
};

typedef struct StoreDriverWriterVt {
    /* The stream the object's bytes go to (borrowed; valid until commit/abort). */
    IoWriter *(*io)(StoreDriverWriter *w);
    /* Makes the object visible under its key (local: fsync, rename, fsync dir), then frees w in
     * every case. 0, ERR_EXISTS (another writer got there first) or ERR_IO. */
    int (*commit)(StoreDriverWriter *w);
    /* Discards everything written and frees w. */
    void (*abort)(StoreDriverWriter *w);
} StoreDriverWriterVt;

struct StoreDriverWriter {
    const StoreDriverWriterVt *vt;
};

static inline void store_driver_free(StoreDriver *d) {
    if (d) d->vt->free(d);
}

/* Wraps a driver in a Store (takes ownership of drv, also on failure) with the given store
 * prefix ("" allowed; cleaned like Go's path.Join: duplicate and trailing '/' dropped, "."
 * components dropped, ".." rejected). Lets tests and new drivers run through the generic layer.
 * 0, ERR_INVALID (bad prefix) or ERR_NOMEM. */
int store_new_with_driver(StoreDriver *drv, const char *prefix, Store **out);

/* The driver of cfg->provider from the registry (store.c; "" = Local), without the generic layer
 * (tools and tests call drivers directly). *out owned (store_driver_free). 0, ERR_INVALID
 * (unknown provider: the message lists the valid ones) or the constructor's error. */
int store_driver_open(const StoreConfig *cfg, StoreDriver **out);

/* The value of the environment variable cfg->env_prefix + name (docs/go-tool.md §12: "SOURCE_" for
 * copy's source, "SECONDARY_" for the server's secondary store) when it is set and not empty,
 * else NULL. Borrowed from the environment. Drivers read every credential, container and
 * endpoint variable through this (ECS's excepted, as in the Go tool); test knobs (ETCDBR_*) are
 * read as they are. */
const char *store_env(const StoreConfig *cfg, const char *name);

/* cfg->env_prefix, "" when NULL (for messages naming the variables read). */
const char *store_env_prefix(const StoreConfig *cfg);

/* A provider's driver constructor: opens the backend cfg names (container, prefix handled by the
 * generic layer; endpoint, credentials, part sizes are the driver's). Drivers are found by
 * provider name in store.c's registry table. 0 or ERR_*. */
typedef int (*StoreDriverOpen)(const StoreConfig *cfg, StoreDriver **out);

/* Local driver: objects are files below root. container: absolute path, or relative to $HOME
 * (like the Go tool); NULL/"" = $STORAGE_CONTAINER, else "default.bkp". Creates the root
 * directory (0700, mkdir -p). Writes go to a ".etcdbr-tmp-XXXXXX" file (0600) in the target
 * directory, made visible with fsync + rename (no replace) + fsync of the directory. Entries
 * whose names start with '.' are never listed. *out owned (store_driver_free).
 * 0, ERR_INVALID (no HOME for a relative container) or ERR_IO. */
int store_local_driver_new(const char *container, StoreDriver **out);

/* 1 when the Local driver accepts key as an object key (allow_trailing_slash: as a list prefix),
 * 0 otherwise: no empty, "." or ".." component, no leading '/', no backslash or control
 * character, no component over NAME_MAX bytes, the key at most PATH_MAX / 2 bytes. Pure. */
int store_local_key_valid(const char *key, int allow_trailing_slash);

/* S3-compatible drivers: cfg->provider "S3" (AWS or any S3 API behind --store-endpoint-override),
 * "ECS" (Dell ECS: ECS_* environment) or "OCS" (OpenShift: OPENSHIFT_APPLICATION_CREDENTIALS*).
 * Credentials as the Go tool reads them (store_s3.h, docs/stores.md). Thread-safe. *out owned.
 * 0, ERR_INVALID (missing bucket, credentials or region), ERR_UNSUPPORTED (web identity) or
 * ERR_NOMEM. No request is sent here. */
int store_s3_driver_new(const StoreConfig *cfg, StoreDriver **out);

/* OpenStack Swift (cfg->provider "Swift"): credentials from OPENSTACK_APPLICATION_CREDENTIALS_JSON,
 * OPENSTACK_APPLICATION_CREDENTIALS or the OS_* environment; tempauth v1 or Keystone v3, chosen
 * by the auth URL (store_swift.h, docs/stores.md). Authenticates and checks the container here.
 * Thread-safe. *out owned. 0, ERR_INVALID (container, credentials), ERR_NOT_FOUND (container)
 * or ERR_IO. */
int store_swift_driver_new(const StoreConfig *cfg, StoreDriver **out);
/* Google Cloud Storage (JSON API): credentials from GOOGLE_APPLICATION_CREDENTIALS (a
 * service-account key; store_gcs.h, docs/stores.md), endpoint from --store-endpoint-override or
 * the storageAPIEndpoint file next to the key (http:// = emulator, no authentication).
 * Thread-safe. *out owned. Checks that the bucket exists (ERR_NOT_FOUND if not). 0,
 * ERR_INVALID, ERR_UNSUPPORTED (external_account), ERR_NOT_FOUND, ERR_IO or ERR_NOMEM. */
int store_gcs_driver_new(const StoreConfig *cfg, StoreDriver **out);
/* The OSS driver for cfg (container = bucket, credentials, ca_file, insecure_skip_verify,
 * min_chunk_size, max_parallel_chunk_uploads, timeout_ms). Credentials: cfg->credentials, else
 * $ALICLOUD_APPLICATION_CREDENTIALS_JSON, else $ALICLOUD_APPLICATION_CREDENTIALS. The endpoint is
 * the credentials' storageEndpoint (https:// when it has no scheme); --store-endpoint-override is
 * ignored with a warning, as the Go tool honours it for S3, GCS and ABS only. No request is sent
 * here. Thread-safe. *out owned (store_driver_free). 0, ERR_INVALID or ERR_NOMEM. */
int store_oss_driver_new(const StoreConfig *cfg, StoreDriver **out);

#endif
