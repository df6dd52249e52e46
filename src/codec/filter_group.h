/* filter_group: a named chain of write filters in front of a sink, modelled on pgBackRest's
 * IoFilterGroup: filters are added in processing order (the first added sees the bytes first),
 * the chain is built from the sink back at the first write, io_filter_group_finish finishes them
 * all in order (each flushes into the next), and results are read by name afterwards: a byte
 * count, a SHA-256. Compression, hashing and encryption of snapshot objects go through one
 * group instead of hand-wired chains (an encrypted object: compress, then encrypt; reading it
 * back: decrypt, then decompress).
 *
 *   IoFilterGroup *g = io_filter_group_new(store_io);
 *   io_filter_group_add_sha256(g, "plain-sha256");
 *   io_filter_group_add_compress(g, COMPRESS_GZIP);
 *   io_filter_group_add_count(g, "stored-bytes");
 *   io_copy(src, io_filter_group_io(g), NULL); io_filter_group_finish(g);
 *   io_filter_group_count(g, "stored-bytes", &n);
 *
 * A read group is the same on the way back: filters over a source, applied in the order added
 * (the first added sees the source's bytes first), results readable once the group's reader has
 * returned the end of the stream:
 *
 *   IoFilterGroup *g = io_filter_group_new_reader(store_reader);
 *   io_filter_group_add_count(g, "stored-bytes");
 *   io_filter_group_add_decompress(g, COMPRESS_GZIP);
 *   io_filter_group_add_count(g, "plain-bytes");
 *   io_copy(io_filter_group_reader(g), file, NULL);
 *   io_filter_group_count(g, "plain-bytes", &n);
 *
 * Not thread-safe (one stream, one thread). */
#ifndef ETCDBR_FILTER_GROUP_H
#define ETCDBR_FILTER_GROUP_H

#include "compress.h"
#include "crypt.h"
#include "io.h"
#include "sha256.h"

#include <stdint.h>

typedef struct IoFilterGroup IoFilterGroup;

/* A group writing into sink (borrowed; the group never finishes or frees it). NULL on ENOMEM. */
IoFilterGroup *io_filter_group_new(IoWriter *sink);

/* A group reading from src (borrowed; the group never frees it). NULL on ENOMEM. */
IoFilterGroup *io_filter_group_new_reader(IoReader *src);

/* Filters, in processing order; only before the first use. name (copied, unique within the
 * group) is how results are read. Count and SHA-256 work in both kinds of group, compression in
 * a write group, decompression in a read group. 0, ERR_INVALID (after the first use, a duplicate
 * name, more than 8 filters, the wrong kind of group) or ERR_NOMEM. Encryption in a write group,
 * decryption in a read group. */
int io_filter_group_add_count(IoFilterGroup *g, const char *name);
int io_filter_group_add_sha256(IoFilterGroup *g, const char *name);
int io_filter_group_add_compress(IoFilterGroup *g, CompressKind kind);
int io_filter_group_add_decompress(IoFilterGroup *g, CompressKind kind);
/* Decompression giving out at most lim->max_plain bytes (decompress_reader_new_limited; lim
 * copied, its flag borrowed and must outlive the group; NULL: DECOMPRESS_MAX_DEFAULT, as
 * io_filter_group_add_decompress). */
int io_filter_group_add_decompress_limited(IoFilterGroup *g, CompressKind kind,
                                           const DecompressLimit *lim);
/* Encryption (write group) with kr's first key and decryption (read group) with whichever key
 * of kr the object names (crypt.h; kr borrowed, must outlive the group). Named "encrypt" and
 * "decrypt". ERR_INVALID also when kr is NULL or empty. Decryption errors (ERR_CORRUPT: altered,
 * truncated, reordered or dropped chunks, a wrong key; ERR_INVALID: a key id kr lacks) come out
 * of the group reader's reads. */
int io_filter_group_add_encrypt(IoFilterGroup *g, const Keyring *kr);
int io_filter_group_add_decrypt(IoFilterGroup *g, const Keyring *kr);
/* The same, with the object's name bound into every chunk (crypt_writer_new_bound,
 * crypt_reader_new_bound; binding copied, 1..CRYPT_BINDING_MAX bytes, else ERR_INVALID): the
 * writer writes format version 2; the reader reads version 2 only under that name and version 1
 * as before. */
int io_filter_group_add_encrypt_bound(IoFilterGroup *g, const Keyring *kr, const char *binding);
int io_filter_group_add_decrypt_bound(IoFilterGroup *g, const Keyring *kr, const char *binding);

/* Write group: the stream to write into (borrowed; valid until io_filter_group_free). The chain
 * is built at the first call; NULL if building it failed (ENOMEM) or g is a read group. */
IoWriter *io_filter_group_io(IoFilterGroup *g);

/* Read group: the stream to read from (borrowed; valid until io_filter_group_free; do not free
 * it). Built at the first call; NULL if building failed (ENOMEM) or g is a write group. Errors of
 * any filter (a corrupt compressed stream, a failing store read) come out of its reads. */
IoReader *io_filter_group_reader(IoFilterGroup *g);

/* Write group: finishes every filter in processing order (not the sink). 0 or the first
 * filter's error. Read group: 0 once the reader returned the end of the stream, else
 * ERR_INVALID (results are not final). */
int io_filter_group_finish(IoFilterGroup *g);

/* Results after io_filter_group_finish (write) or the end of the stream (read): the bytes a count
 * filter saw, a SHA-256 filter's digest (of the bytes it saw).
 * 0, or ERR_NOT_FOUND (no such filter of that kind) / ERR_INVALID (not finished). */
int io_filter_group_count(const IoFilterGroup *g, const char *name, uint64_t *out);
int io_filter_group_sha256(const IoFilterGroup *g, const char *name, uint8_t out[SHA256_LEN]);

void io_filter_group_free(IoFilterGroup *g);

#endif
