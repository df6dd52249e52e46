/* snapobj: a snapshot object's plain bytes (the full snapshot's db + trailer, or the delta's
 * JSON + hash), whatever its name says was applied on the way into the store: compression
 * (compress.h, by the name's suffix) and encryption (crypt.h, when the name has ".enc"). Every
 * reader of snapshot contents goes through here (restore, verify, compact), so a new encoding
 * is added in one place.
 *
 *   SnapObjReader *r;
 *   snapobj_open_read(store, snap, &r);
 *   io_copy(snapobj_reader(r), sink, NULL);
 *   snapobj_counts(r, &stored, &plain);
 *   snapobj_close(r);
 *
 * Not thread-safe (one stream, one thread); several readers may be open on one Store. */
#ifndef ETCDBR_SNAPOBJ_H
#define ETCDBR_SNAPOBJ_H

#include "../codec/io.h"
#include "../common/progress.h"
#include "store.h"

#include <stdint.h>

typedef struct SnapObjReader SnapObjReader;

/* How far a snapshot object may inflate (plain bytes after decryption and decompression), by
 * kind: the bound against a decompression bomb (docs/restore.md). A delta holds the events of one
 * delta period (the Go tool's --delta-snapshot-memory-limit caps it at 100 MiB by default), a
 * full snapshot the whole db (etcd's recommended quota is at most 8 GiB). */
#define SNAPOBJ_MAX_DELTA_DEFAULT (1ull << 30) /* 1 GiB, --max-delta-size */
#define SNAPOBJ_MAX_FULL_DEFAULT (64ull << 30) /* 64 GiB, --max-full-size */

/* Sets the limits every later snapobj_open_read applies (bytes; 0 = the default above). Parsed
 * configuration: call it before the threads that read snapshots start. */
void snapobj_set_limits(uint64_t max_delta, uint64_t max_full);

/* Opens snap (borrowed; must outlive the reader) for reading its plain bytes from byte 0.
 * An encrypted object (snap->encrypted) is decrypted with the store's keyring
 * (store_keyring). ERR_UNSUPPORTED (a suffix we cannot decode, named), ERR_INVALID (encrypted
 * and the store has no keys), or the store's error (ERR_NOT_FOUND, ERR_IO), each message naming
 * the object's key. Decryption errors (a wrong or unknown key, altered, truncated, reordered or
 * dropped chunks; crypt.h) come out of the reads. *out owned (snapobj_close). */
int snapobj_open_read(Store *s, const Snapshot *snap, SnapObjReader **out);

/* snapobj_open_read that also adds every byte read from the store (the stored, compressed and
 * encrypted bytes, as a listing's size counts them) to progress (borrowed, may be NULL) as it
 * is read: several readers, on several threads, may add to one. */
int snapobj_open_read_progress(Store *s, const Snapshot *snap, Progress *progress,
                               SnapObjReader **out);

/* The plain bytes (borrowed; valid until snapobj_close). Corrupt or truncated input is an error
 * of its reads (ERR_CORRUPT), never a short stream; so is an object inflating past the limit of
 * its kind (snapobj_set_limits; the message names the flag that raises it; nothing past the
 * limit is given out). Callers name the object in what they report. */
IoReader *snapobj_reader(SnapObjReader *r);

/* After the reader returned the end of the stream: bytes read from the store and plain bytes
 * given out. 0 or ERR_INVALID (not at the end yet). */
int snapobj_counts(const SnapObjReader *r, uint64_t *stored, uint64_t *plain);

/* NULL-safe. */
void snapobj_close(SnapObjReader *r);

#endif
