/* bbolt_stream: checks an etcd bbolt db and reads what a full snapshot needs from it while its
 * bytes go past once, in file order (etcd's Snapshot stream), without keeping the file: the
 * one-pass full snapshot (docs/snapshot.md). What bbolt_open + bbolt_etcd_revision + bbolt_get do
 * on a file, done on the stream:
 * - meta pages 0 and 1: magic, version, FNV-1a checksum, page size (a power of two in
 *   512..65536), root and freelist below the high-water mark; the valid one with the higher txid
 *   is used, as bbolt does;
 * - size: the db is exactly high-water-mark pages (checked by bbolt_stream_finish);
 * - the root bucket's page (captured when it passes: its id is known from the metas, which come
 *   first), every top-level bucket it names, and the pages on the path to the last key of bucket
 *   "key" (each page's header must name the page, with the right type);
 * - etcd's revision: the last key of bucket "key", raised to meta's compaction revisions.
 * Memory is bounded whatever the db size: a window of BBOLT_STREAM_WINDOW bytes (a page with its
 * overflow), one entry per branch page seen (its last child; at most BBOLT_STREAM_MAX_BRANCHES),
 * the BBOLT_STREAM_LEAF_CANDIDATES leaf pages with the highest revision-shaped last keys, and at
 * most BBOLT_STREAM_MAX_CAPTURES small leaf pages holding a wanted key. A db laid out so that what
 * is needed was not kept (a root bucket spanning several pages, more stale pages than these
 * bounds) gives ERR_UNSUPPORTED at finish, never a wrong answer: the caller then checks the db
 * another way (fullsnap stages it in a file). Not a full walk: pages no path above reaches are
 * not checked; etcd's SHA-256 trailer covers the bytes. Not thread-safe. */
#ifndef ETCDBR_BBOLT_STREAM_H
#define ETCDBR_BBOLT_STREAM_H

#include <stddef.h>
#include <stdint.h>

#define BBOLT_STREAM_WINDOW ((size_t)2 << 20)
#define BBOLT_STREAM_MAX_BRANCHES ((size_t)1 << 18) /* 4 MiB of entries */
#define BBOLT_STREAM_LEAF_CANDIDATES 4096
#define BBOLT_STREAM_MAX_CAPTURES 64
#define BBOLT_STREAM_MAX_WANTS 4
#define BBOLT_STREAM_CAPTURE_MAX ((size_t)64 << 10) /* bytes of one captured page run */

typedef struct BboltStream BboltStream;

/* A new checker. *out owned by the caller (bbolt_stream_free). 0 or ERR_NOMEM. */
int bbolt_stream_new(BboltStream **out);
void bbolt_stream_free(BboltStream *s);

/* Asks for the value of key in the top-level bucket `bucket` (both NUL-terminated, copied; at
 * most 255 bytes each), to be read with bbolt_stream_get after finish. At most
 * BBOLT_STREAM_MAX_WANTS; call before the first feed. 0, ERR_INVALID (too many, too long, or
 * bytes already fed) or ERR_NOMEM. */
int bbolt_stream_want(BboltStream *s, const char *bucket, const char *key);

/* Feeds the next len bytes of the stream. Bytes after the db (etcd's 32-byte trailer) may be fed
 * too: they never complete a page. 0 or ERR_CORRUPT (meta pages invalid: the stream is not a
 * bbolt db), ERR_NOMEM; after an error every later call returns it again. */
int bbolt_stream_feed(BboltStream *s, const void *buf, size_t len);

/* After the last byte: db_len bytes of what was fed are the db. Checks the size against the
 * meta's high-water mark and resolves the root bucket, the revision (*revision, etcd's
 * currentRev as bbolt_etcd_revision reads it) and the wanted keys. 0, ERR_CORRUPT (size, a
 * page on a path, no bucket "key": not an etcd db) or ERR_UNSUPPORTED (a needed page was not
 * kept, see above). */
int bbolt_stream_finish(BboltStream *s, uint64_t db_len, int64_t *revision);

/* After a successful finish: the value of a wanted key, as bbolt_get (min(size, cap) bytes to
 * val, full size to *vlen). 0, ERR_NOT_FOUND (no such bucket or key), ERR_INVALID (not asked
 * for with bbolt_stream_want), ERR_UNSUPPORTED (the bucket's page was not kept). */
int bbolt_stream_get(BboltStream *s, const char *bucket, const char *key, void *val, size_t cap,
                     size_t *vlen);

/* Page size from meta 0 (0 until known) and pages fed so far, for messages and tests. */
uint32_t bbolt_stream_page_size(const BboltStream *s);

#endif
