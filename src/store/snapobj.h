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
#include "store.h"

#include <stdint.h>

typedef struct SnapObjReader SnapObjReader;

/* Opens snap (borrowed; must outlive the reader) for reading its plain bytes from byte 0.
 * An encrypted object (snap->encrypted) is decrypted with the store's keyring
 * (store_keyring). ERR_UNSUPPORTED (a suffix we cannot decode, named), ERR_INVALID (encrypted
 * and the store has no keys), or the store's error (ERR_NOT_FOUND, ERR_IO), each message naming
 * the object's key. Decryption errors (a wrong or unknown key, altered, truncated, reordered or
 * dropped chunks; crypt.h) come out of the reads. *out owned (snapobj_close). */
int snapobj_open_read(Store *s, const Snapshot *snap, SnapObjReader **out);

/* The plain bytes (borrowed; valid until snapobj_close). Corrupt or truncated input is an error
 * of its reads (ERR_CORRUPT), never a short stream. */
IoReader *snapobj_reader(SnapObjReader *r);

/* After the reader returned the end of the stream: bytes read from the store and plain bytes
 * given out. 0 or ERR_INVALID (not at the end yet). */
int snapobj_counts(const SnapObjReader *r, uint64_t *stored, uint64_t *plain);

/* NULL-safe. */
void snapobj_close(SnapObjReader *r);

#endif
