/* sha256: SHA-256 (OpenSSL EVP) as a pass-through writer, and the "trailer" framing of etcd
 * snapshots and Go-tool deltas: payload followed by the 32-byte raw SHA-256 of the payload. */
#ifndef ETCDBR_SHA256_H
#define ETCDBR_SHA256_H

#include "io.h"
#include <stdint.h>

#define SHA256_LEN 32

typedef struct Sha256 Sha256;

Sha256 *sha256_new(void);
void sha256_update(Sha256 *s, const void *buf, size_t len);
/* Writes the digest to out and resets s for reuse. */
void sha256_final(Sha256 *s, uint8_t out[SHA256_LEN]);
void sha256_free(Sha256 *s);

/* Writer that hashes every byte and passes it to next (borrowed, may be NULL).
 * sha256_writer_digest() gives the digest of everything written so far. */
IoWriter *sha256_writer_new(IoWriter *next);
void sha256_writer_digest(IoWriter *w, uint8_t out[SHA256_LEN]);

/* Trailer checker: a writer that passes everything to next (may be NULL) but holds back the
 * last 32 bytes, hashing the rest. trailer_check_result() after all bytes are written returns
 * 0 if the held-back bytes equal the SHA-256 of the bytes before them, ERR_CORRUPT otherwise
 * (also when fewer than 33 bytes were written). *payload_len receives the length before the
 * trailer. Note: next receives the trailer too (so a full snapshot file stays byte-identical to
 * `etcdctl snapshot save`), unless strip is nonzero. */
IoWriter *trailer_checker_new(IoWriter *next, int strip);
int trailer_check_result(IoWriter *w, uint64_t *payload_len);

#endif
