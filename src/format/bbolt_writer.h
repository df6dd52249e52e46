/* bbolt_writer: writes a new bbolt db file (etcd's backend format, go.etcd.io/bbolt v1.3/v1.4)
 * in one pass from keys given in order: a bulk load, not a B+tree with updates. Memory is
 * O(bucket nesting x tree depth x page size), whatever the number of keys; the caller's values
 * are written from its memory. Pages are appended to the file through a 1 MiB write buffer.
 *
 * On-disk layout produced (all integers little-endian, as bbolt on amd64/arm64):
 *   page 0, 1   meta pages (db.go meta, page.go page header, flags 0x04), written last: magic
 *               0xED0CDAED, version 2, page size, flags 0, root bucket {root pgid, sequence 0},
 *               freelist pgid, pgid = number of pages in the file, txid, FNV-1a 64 checksum of
 *               the 56 meta bytes before it. Meta 0 has txid 0 and meta 1 txid 1 (page id =
 *               txid % 2, as db.go meta.write), both describing the same tree; bbolt uses the
 *               newer (txid 1), and the next transaction bbolt commits gets txid 2 and
 *               overwrites meta 0, exactly as after bbolt's own DB.init.
 *   pages 2..   the buckets' tree pages in the order they fill (node.go write: page header, then
 *               the 16-byte branch or leaf elements, then their keys and values; pos relative to
 *               each element). A nested bucket's pages come before the leaf of its parent
 *               that holds its element; a page's parent branch pages come after it.
 *   last page   an empty freelist page (flags 0x10, count 0; freelist.go write).
 * The file is exactly pgid x page size bytes; every page below pgid is reachable (no free
 * pages), which is what tx_check.go's Check requires.
 *
 * Trees (bucket.go, node.go): leaf pages are filled up to the page size; an element that does
 * not fit in an empty page becomes a page of its own with overflow pages. Branch levels are built
 * bottom-up as pages fill; a branch element's key is the first key of its child page; a branch
 * page takes at least two elements (with overflow pages if their keys need them), so every
 * level has fewer pages than the one below it. A level holding one page is the root; a top
 * branch with a single element is dropped and its child is the root. Every bucket, empty ones
 * included, is written with its own root page (never inline): bucket value = {root pgid u64,
 * sequence u64}, leaf element flag 0x01. bbolt reads such buckets and may inline small ones on
 * its next write.
 *
 * Errors: a rejected call (ERR_INVALID for a bad argument or order) changes nothing and the
 * writer stays usable; after any other error (ERR_IO, ERR_NOMEM) the file is incomplete and
 * every later call gives ERR_INVALID: free the writer, which removes the file. The writer does
 * not fsync the file's directory: a caller that renames the file into place does that.
 * A writer is used by one thread at a time. */
#ifndef ETCDBR_BBOLT_WRITER_H
#define ETCDBR_BBOLT_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct BboltWriter BboltWriter;

/* Creates path (O_CREAT|O_EXCL, mode 0600) and starts an empty db. page_size: bytes of a
 * page; 0 = 4096, else a power of two in [1024, 65536]. Errors: ERR_EXISTS (path exists),
 * ERR_IO, ERR_INVALID (page size), ERR_NOMEM. *out is owned: bbolt_writer_free. */
int bbolt_writer_open(const char *path, uint32_t page_size, BboltWriter **out);

/* Opens a nested bucket named name[0..len) inside the current bucket (the root bucket when
 * none is open); it becomes the current bucket. Its name takes its place in the parent's key
 * order now (later keys of the parent must sort after it). ERR_INVALID: empty name, longer
 * than 32768 bytes, or not above the parent's previous key (message names the bucket);
 * ERR_NOMEM. */
int bbolt_writer_begin_bucket(BboltWriter *w, const void *name, size_t len);

/* Adds key -> value (value may be NULL when value_len is 0) to the current (innermost open)
 * bucket; both are copied or written before the call returns. ERR_INVALID: no bucket open, empty
 * key, key over 32768 bytes (bbolt MaxKeySize), value over (1<<31)-2 bytes (MaxValueSize), key
 * not strictly above the bucket's previous key or nested-bucket name (bytes compared with memcmp,
 * then length); the message names the bucket. ERR_IO, ERR_NOMEM. */
int bbolt_writer_put(BboltWriter *w, const void *key, size_t key_len, const void *value,
                     size_t value_len);

/* Closes the innermost open bucket: writes its remaining pages and adds its element (root page
 * id and sequence) to its parent. ERR_INVALID if no bucket is open; ERR_IO, ERR_NOMEM. */
int bbolt_writer_end_bucket(BboltWriter *w);

/* Sets the sequence (bbolt's Bucket.NextSequence counter) of the innermost open bucket;
 * default 0. ERR_INVALID if no bucket is open. */
int bbolt_writer_set_sequence(BboltWriter *w, uint64_t seq);

/* Completes the db: every bucket must have been ended (ERR_INVALID otherwise, nothing written).
 * Writes the root bucket's pages and the freelist page, fdatasyncs, writes both meta pages,
 * fsyncs. After a successful finish the file is a complete db and bbolt_writer_free keeps it;
 * later calls other than the counters and free give ERR_INVALID. ERR_IO, ERR_NOMEM. */
int bbolt_writer_finish(BboltWriter *w);

/* sync 0: finish writes without fdatasync/fsync, for an intermediate file that another program
 * copies and syncs itself (the restore's db before etcd's restore tool copies it). Default 1.
 * 0, or ERR_INVALID for a NULL writer. */
int bbolt_writer_set_sync(BboltWriter *w, int sync);

/* Closes and frees. If finish did not succeed, the partial file is removed (it is ours: the
 * writer created it with O_EXCL). NULL-safe. */
void bbolt_writer_free(BboltWriter *w);

/* Counters for logs and benchmarks. pages: pages allocated so far, the two meta pages
 * included (after finish: the meta pgid, i.e. the number of pages in the file); keys: plain
 * keys put (bucket names not counted); bytes: pages x page size (after finish: the file
 * length). */
uint64_t bbolt_writer_pages(const BboltWriter *w);
uint64_t bbolt_writer_keys(const BboltWriter *w);
uint64_t bbolt_writer_bytes(const BboltWriter *w);

#endif
