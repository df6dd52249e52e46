/* bbolt: a read-only reader of etcd's bbolt backend file (member/snap/db or a snapshot file),
 * written from bbolt's on-disk format (go.etcd.io/bbolt: page.go, node.go, db.go meta).
 * Reads with pread, a page at a time: memory is bounded by the tree depth, never the file size.
 * Every offset, count and page id from the file is bounds-checked: corrupt input gives
 * ERR_CORRUPT with a message naming the page, never a crash, hang or huge allocation. */
#ifndef ETCDBR_BBOLT_H
#define ETCDBR_BBOLT_H

#include <stddef.h>
#include <stdint.h>

typedef struct BboltDb BboltDb;

/* Opens path read-only and validates the two meta pages (magic 0xED0CDAED, version 2, FNV-1a
 * checksum); uses the valid one with the higher txid. size_limit: bytes of the file to consider
 * (0 = whole file; a snapshot file with its 32-byte sha256 trailer passes size-32). */
int bbolt_open(const char *path, uint64_t size_limit, BboltDb **out);
void bbolt_close(BboltDb *db);

uint32_t bbolt_page_size(const BboltDb *db);
uint64_t bbolt_txid(const BboltDb *db);

/* etcd's mvcc revision stored in the db: the main revision of the last key of bucket "key"
 * (big-endian int64 in its first 8 bytes), or meta bucket "scheduledCompactRev"/
 * "finishedCompactRev" if larger (etcd restores currentRev = max of these). 1 (etcd's initial
 * revision) for an empty
 * store. ERR_NOT_FOUND if bucket "key" is absent (not an etcd db). */
int bbolt_etcd_revision(BboltDb *db, int64_t *rev_out);

/* Looks key (klen bytes) up in the top-level bucket named `bucket` (e.g. "meta",
 * "consistent_index"). Copies min(value size, cap) bytes to val (may be NULL with cap 0) and
 * sets *vlen (may be NULL) to the full value size. 0, ERR_NOT_FOUND (no such bucket or key, or
 * the key is a nested bucket), ERR_CORRUPT, ERR_INVALID (key longer than bbolt allows). */
int bbolt_get(BboltDb *db, const char *bucket, const void *key, size_t klen, void *val, size_t cap,
              size_t *vlen);

/* Walks every page reachable from the root (buckets, inline buckets, branch and leaf pages,
 * overflow) checking page types, bounds, key order and that no page is reached twice.
 * pages_out (may be NULL) receives the number of pages visited. 0 or ERR_CORRUPT. */
int bbolt_check(BboltDb *db, uint64_t *pages_out);

/* ---- cursor: every item of one bucket in key order ---- */

/* One name of a bucket path: len bytes at name (any bytes, not NUL-terminated). */
typedef struct BboltName {
    const void *name;
    size_t len;
} BboltName;

/* One item of a bucket. key and value are borrowed: valid until the next bbolt_cursor_next or
 * bbolt_cursor_close on the same cursor. */
typedef struct BboltItem {
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value; /* for a nested bucket: NULL */
    size_t value_len;     /* for a nested bucket: 0 */
    int is_bucket;        /* the key names a nested bucket (open it with path + this key) */
} BboltItem;

typedef struct BboltCursor BboltCursor;

/* Opens a cursor over the bucket reached by path[0..depth) from the root (depth 0 = the root
 * bucket, whose items are the top-level buckets). Memory: the pages from the bucket's root to
 * the current leaf (each with its overflow pages, read in one pread), never the file.
 * Errors: ERR_NOT_FOUND (a bucket on the path is missing or is a plain key), ERR_INVALID (a name
 * longer than bbolt's 32768-byte key limit), ERR_CORRUPT, ERR_IO, ERR_NOMEM. *out is owned by
 * the caller (bbolt_cursor_close); it borrows db, which must outlive it. One cursor is not
 * thread-safe; several cursors on one db may run on different threads. */
int bbolt_cursor_open(BboltDb *db, const BboltName *path, size_t depth, BboltCursor **out);

/* Next item in key order: 0 with *got = 1 and *item filled, 0 with *got = 0 at the end (and on
 * every later call). ERR_CORRUPT (message names the page), ERR_IO or ERR_NOMEM; after an error
 * the cursor stays at the end. A bucket whose pages repeat on the path, reference pages outside
 * the db or read more pages than the file holds gives ERR_CORRUPT, never a hang. */
int bbolt_cursor_next(BboltCursor *c, BboltItem *item, int *got);

/* Frees the cursor and its page buffers. NULL-safe. */
void bbolt_cursor_close(BboltCursor *c);

/* bbolt's key order (Go's bytes.Compare): memcmp, then the shorter first. <0, 0, >0. */
int bbolt_key_cmp(const void *a, size_t an, const void *b, size_t bn);

/* FNV-1a 64 of n bytes: the checksum of a meta page (db.go meta.sum64). */
uint64_t bbolt_fnv1a64(const void *data, size_t n);

#endif
