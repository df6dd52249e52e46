/* sha256: SHA-256 over OpenSSL EVP, a hashing pass-through writer and the trailer checker.
 * The trailer checker keeps only the newest 32 bytes in memory (a small buffer shifted in place),
 * so checking a snapshot of any size costs O(1) memory. */
#include "sha256.h"
#include "../common/err.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

struct Sha256 {
    EVP_MD_CTX *ctx;
};

Sha256 *sha256_new(void) {
    Sha256 *s = calloc(1, sizeof *s);
    if (!s) goto fail;
    s->ctx = EVP_MD_CTX_new();
    if (!s->ctx || EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1) goto fail;
    return s;
fail:
    sha256_free(s);
    err_set(ERR_NOMEM, "sha256: cannot create digest context");
    return NULL;
}

void sha256_update(Sha256 *s, const void *buf, size_t len) {
    /* EVP_DigestUpdate on an initialised SHA-256 context only fails on misuse. */
    if (len > 0) EVP_DigestUpdate(s->ctx, buf, len);
}

void sha256_final(Sha256 *s, uint8_t out[SHA256_LEN]) {
    unsigned int n = 0;
    EVP_DigestFinal_ex(s->ctx, out, &n);
    EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL);
}

/* Digest of the bytes hashed so far without disturbing s. 0 or ERR_NOMEM. */
static int sha256_peek(const Sha256 *s, uint8_t out[SHA256_LEN]) {
    EVP_MD_CTX *tmp = EVP_MD_CTX_new();
    int rc = 0;
    unsigned int n = 0;
    if (!tmp || EVP_MD_CTX_copy_ex(tmp, s->ctx) != 1 || EVP_DigestFinal_ex(tmp, out, &n) != 1) {
        rc = err_set(ERR_NOMEM, "sha256: cannot copy digest context");
        memset(out, 0, SHA256_LEN);
    }
    EVP_MD_CTX_free(tmp);
    return rc;
}

void sha256_free(Sha256 *s) {
    if (!s) return;
    EVP_MD_CTX_free(s->ctx);
    free(s);
}

/* ---- hashing pass-through writer ---- */

/* The part both hashing filters share, first in each: the stream, next (borrowed, may be NULL)
 * and the running hash (owned). */
typedef struct {
    IoWriter base;
    IoWriter *next;
    Sha256 *sha;
} Sha256Writer;

static void shaw_free(IoWriter *w) {
    Sha256Writer *s = (Sha256Writer *)w;
    sha256_free(s->sha);
    free(s);
}

/* Allocates a zeroed filter of size bytes starting with a Sha256Writer, with vt, next and a new
 * hash. NULL with the error set. */
static void *sha_filter_new(size_t size, const IoWriterVt *vt, const char *what, IoWriter *next) {
    Sha256Writer *s = io_writer_alloc(size, vt, what);
    if (!s) return NULL;
    s->next = next;
    s->sha = sha256_new();
    if (!s->sha) {
        free(s);
        return NULL;
    }
    return s;
}

static int shaw_write(IoWriter *w, const void *buf, size_t len) {
    Sha256Writer *s = (Sha256Writer *)w;
    sha256_update(s->sha, buf, len);
    return s->next ? io_write(s->next, buf, len) : 0;
}

static const IoWriterVt shaw_vt = {shaw_write, io_finish_nothing, shaw_free};

IoWriter *sha256_writer_new(IoWriter *next) {
    Sha256Writer *s = sha_filter_new(sizeof *s, &shaw_vt, "sha256 writer", next);
    return s ? &s->base : NULL;
}

void sha256_writer_digest(IoWriter *w, uint8_t out[SHA256_LEN]) {
    Sha256Writer *s = (Sha256Writer *)w;
    sha256_peek(s->sha, out);
}

/* ---- trailer checker ---- */

typedef struct {
    Sha256Writer hw; /* first: the stream, next and the hash of the released bytes */
    int strip;
    uint64_t total;           /* bytes written so far, trailer candidate included */
    uint8_t held[SHA256_LEN]; /* the newest min(total, 32) bytes, oldest first */
    size_t held_len;
} TrailerChecker;

/* Hashes bytes that are now known not to be part of the trailer; forwards them when stripping. */
static int tc_release(TrailerChecker *t, const uint8_t *p, size_t n) {
    if (n == 0) return 0;
    sha256_update(t->hw.sha, p, n);
    return (t->strip && t->hw.next) ? io_write(t->hw.next, p, n) : 0;
}

static int tc_write(IoWriter *w, const void *buf, size_t len) {
    TrailerChecker *t = (TrailerChecker *)w;
    const uint8_t *p = buf;
    int rc = 0;
    if (len == 0) return 0;
    /* Without stripping, next sees every byte at once: no need to delay it. */
    if (!t->strip && t->hw.next) {
        rc = io_write(t->hw.next, buf, len);
        if (rc < 0) return rc;
    }
    t->total += len;
    size_t all = t->held_len + len;
    if (all <= SHA256_LEN) {
        memcpy(t->held + t->held_len, p, len);
        t->held_len = all;
        return 0;
    }
    size_t release = all - SHA256_LEN;
    size_t from_held = release < t->held_len ? release : t->held_len;
    rc = tc_release(t, t->held, from_held);
    if (rc < 0) return rc;
    rc = tc_release(t, p, release - from_held);
    if (rc < 0) return rc;
    /* New held bytes: what is left of the old ones, then the tail of buf. */
    size_t keep_old = t->held_len - from_held;
    memmove(t->held, t->held + from_held, keep_old);
    memcpy(t->held + keep_old, p + len - (SHA256_LEN - keep_old), SHA256_LEN - keep_old);
    t->held_len = SHA256_LEN;
    return 0;
}

static const IoWriterVt tc_vt = {tc_write, io_finish_nothing, shaw_free};

IoWriter *trailer_checker_new(IoWriter *next, int strip) {
    TrailerChecker *t = sha_filter_new(sizeof *t, &tc_vt, "trailer checker", next);
    if (!t) return NULL;
    t->strip = strip;
    return &t->hw.base;
}

int trailer_check_result(IoWriter *w, uint64_t *payload_len) {
    TrailerChecker *t = (TrailerChecker *)w;
    uint8_t digest[SHA256_LEN];
    if (payload_len) *payload_len = t->total > SHA256_LEN ? t->total - SHA256_LEN : 0;
    if (t->total <= SHA256_LEN)
        return err_set(ERR_CORRUPT,
                       "sha256 trailer: only %llu bytes, need a payload and a 32-byte trailer",
                       (unsigned long long)t->total);
    int rc = sha256_peek(t->hw.sha, digest);
    if (rc < 0) return rc;
    if (memcmp(digest, t->held, SHA256_LEN) != 0)
        return err_set(ERR_CORRUPT,
                       "sha256 trailer does not match the %llu payload bytes before it",
                       (unsigned long long)(t->total - SHA256_LEN));
    return 0;
}
