/* crypt: see crypt.h; the format is docs/encryption.md. An object is a header (magic, version,
 * algorithm, chunk size, key id, salt, and an HMAC over them made with a key derived from the
 * master key, so a wrong key is told apart from a damaged chunk) followed by frames
 * [u32 final flag | plaintext length][ciphertext][16-byte GCM tag]. Chunk i is sealed with nonce
 * = i and AAD = the whole header, i and the frame word: a chunk moved, dropped, cut short or
 * flagged final where it was not fails to authenticate, and the stream only ends at the frame
 * sealed as final. All integers are big-endian. */
#include "crypt.h"
#include "base64.h"
#include "../common/byteorder.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "etcdbrAE"
#define MAGIC_LEN 8
#define VERSION 1       /* chunks authenticate the header, their position and length word */
#define VERSION_BOUND 2 /* ... and the object's name (crypt_writer_new_bound) */
#define BINDING_LEN_BYTES 2
#define ALG_AES256GCM_HKDF 1
#define SALT_LEN 32
#define CHECK_LEN 32 /* HMAC-SHA256 of the header before it */
#define HDR_FIXED 15 /* magic, version, algorithm, chunk size (4), key id length (1) */
#define HDR_MAX (HDR_FIXED + CRYPT_KEY_ID_MAX + SALT_LEN + CHECK_LEN)
#define TAG_LEN 16
#define WORD_LEN 4
#define FINAL_BIT 0x80000000u
#define NONCE_LEN 12
#define HKDF_INFO "etcdbr object keys v1: AES-256-GCM + HMAC-SHA256 header check"
#define DIAGNOSE_SPAN 16 /* chunk positions tried to name a moved chunk */

typedef struct {
    char id[CRYPT_KEY_ID_MAX + 1];
    uint8_t key[CRYPT_KEY_LEN];
} KeyEntry;

struct Keyring {
    size_t n;
    KeyEntry *keys;
};

/* ---- keyring ---- */

static int id_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* Strict standard base64 (padding optional, canonical, nothing else allowed) into out (cap
 * bytes). *n_out bytes; -1 when malformed or too long. */
static int b64_decode_key(const char *s, size_t len, uint8_t *out, size_t cap, size_t *n_out) {
    return b64_decode(s, len, B64_CANONICAL, out, cap, n_out, NULL);
}

static int key_token_sep(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ';' || c == ',' || c == ':' ||
           c == '"' || c == '\'' || c == '\0';
}

int crypt_text_holds_key(const char *text, size_t len) {
    size_t i = 0;
    while (i < len) {
        while (i < len && key_token_sep(text[i]))
            i++;
        size_t start = i;
        while (i < len && !key_token_sep(text[i]))
            i++;
        uint8_t raw[CRYPT_KEY_LEN];
        size_t n = 0;
        int hit = i > start && b64_decode_key(text + start, i - start, raw, sizeof raw, &n) == 0 &&
                  n == CRYPT_KEY_LEN;
        OPENSSL_cleanse(raw, sizeof raw);
        if (hit) return 1;
    }
    return 0;
}

void keyring_free(Keyring *kr) {
    if (!kr) return;
    if (kr->keys) {
        OPENSSL_cleanse(kr->keys, kr->n * sizeof *kr->keys);
        free(kr->keys);
    }
    free(kr);
}

static int is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r';
}

/* The first index from i on in p[0, len) whose character's is_blank differs from blank (len if
 * none): past a run of blanks (blank = 1) or of field characters (blank = 0). */
static size_t skip_run(const char *p, size_t len, size_t i, int blank) {
    while (i < len && is_blank(p[i]) == blank)
        i++;
    return i;
}

/* One line (len bytes, no terminator) into kr; 0, or ERR_INVALID naming what and lineno. */
static int parse_line(Keyring *kr, const char *p, size_t len, const char *what, size_t lineno) {
    size_t i = skip_run(p, len, 0, 1);
    if (i == len || p[i] == '#') return 0;
    size_t id0 = i;
    i = skip_run(p, len, i, 0);
    size_t id_len = i - id0;
    size_t k0 = i = skip_run(p, len, i, 1);
    i = skip_run(p, len, i, 0);
    size_t k_len = i - k0;
    i = skip_run(p, len, i, 1);
    if (k_len == 0)
        return err_set(ERR_INVALID, "%s line %zu: want \"<key-id> <base64 of %d bytes>\"", what,
                       lineno, CRYPT_KEY_LEN);
    if (i != len)
        return err_set(ERR_INVALID,
                       "%s line %zu: more than two fields (want \"<key-id> <base64 of %d "
                       "bytes>\")",
                       what, lineno, CRYPT_KEY_LEN);
    if (id_len > CRYPT_KEY_ID_MAX)
        return err_set(ERR_INVALID, "%s line %zu: key id longer than %d characters", what, lineno,
                       CRYPT_KEY_ID_MAX);
    for (size_t j = 0; j < id_len; j++)
        if (!id_char_ok(p[id0 + j]))
            return err_set(ERR_INVALID,
                           "%s line %zu: key id has characters other than letters, digits, "
                           "'.', '_' and '-'",
                           what, lineno);
    char id[CRYPT_KEY_ID_MAX + 1];
    memcpy(id, p + id0, id_len);
    id[id_len] = '\0';
    for (size_t j = 0; j < kr->n; j++)
        if (strcmp(kr->keys[j].id, id) == 0)
            return err_set(ERR_INVALID, "%s line %zu: key id \"%s\" given twice", what, lineno, id);
    uint8_t raw[CRYPT_KEY_LEN + 3];
    size_t n = 0;
    int bad = b64_decode_key(p + k0, k_len, raw, sizeof raw, &n) != 0 || n != CRYPT_KEY_LEN;
    if (bad) {
        OPENSSL_cleanse(raw, sizeof raw);
        /* not even the id: with the fields swapped by mistake, the "id" is the key */
        return err_set(ERR_INVALID,
                       "%s line %zu: the key is not standard base64 of exactly %d bytes (want "
                       "\"<key-id> <key>\"; make a key with: openssl rand -base64 %d)",
                       what, lineno, CRYPT_KEY_LEN, CRYPT_KEY_LEN);
    }
    KeyEntry *grown = calloc(kr->n + 1, sizeof *grown);
    if (!grown) {
        OPENSSL_cleanse(raw, sizeof raw);
        return err_set(ERR_NOMEM, "keyring: out of memory");
    }
    if (kr->n) {
        memcpy(grown, kr->keys, kr->n * sizeof *grown);
        OPENSSL_cleanse(kr->keys, kr->n * sizeof *kr->keys);
    }
    free(kr->keys);
    kr->keys = grown;
    memcpy(kr->keys[kr->n].id, id, id_len + 1);
    memcpy(kr->keys[kr->n].key, raw, CRYPT_KEY_LEN);
    kr->n++;
    OPENSSL_cleanse(raw, sizeof raw);
    return 0;
}

int keyring_parse(const char *text, size_t len, const char *what, Keyring **out) {
    *out = NULL;
    if (!what) what = "keyring";
    if (len > CRYPT_KEYRING_TEXT_MAX)
        return err_set(ERR_INVALID, "%s: %zu bytes, more than the %d a keyring may have", what, len,
                       CRYPT_KEYRING_TEXT_MAX);
    Keyring *kr = calloc(1, sizeof *kr);
    if (!kr) return err_set(ERR_NOMEM, "keyring: out of memory");
    size_t lineno = 0, start = 0;
    int rc = 0;
    for (size_t i = 0; i <= len && !rc; i++) {
        if (i < len && text[i] != '\n' && text[i] != ';') continue;
        lineno++;
        if (i < len && memchr(text + start, '\0', i - start))
            rc = err_set(ERR_INVALID, "%s line %zu: a NUL byte", what, lineno);
        if (!rc) rc = parse_line(kr, text + start, i - start, what, lineno);
        start = i + 1;
    }
    if (!rc && kr->n == 0)
        rc = err_set(ERR_INVALID, "%s: no key (want lines \"<key-id> <base64 of %d bytes>\")", what,
                     CRYPT_KEY_LEN);
    RETURN_BUILT(rc, out, kr, keyring_free(kr));
}

int keyring_load_file(const char *path, Keyring **out, unsigned *mode_out) {
    *out = NULL;
    /* the key text itself given as the file name (mixed up with ETCDBR_ENCRYPTION_KEYS): the
     * messages below must not quote it */
    const char *shown = crypt_text_holds_key(path, strlen(path))
                            ? "<redacted: the value holds a key, not a file name; give the key "
                              "text in ETCDBR_ENCRYPTION_KEYS or in a file>"
                            : path;
    /* O_NONBLOCK: a FIFO without a writer would block open() for ever; it is refused as
     * not a regular file, and regular files ignore the flag */
    int fd;
    struct stat st;
    int rc = fs_open_regular(path, "key file", shown, FS_OPEN_NONBLOCK, &fd, &st);
    if (rc) return rc;
    char *buf = NULL;
    size_t got = 0;
    if (st.st_size > CRYPT_KEYRING_TEXT_MAX) {
        rc = err_set(ERR_INVALID, "key file %s: %lld bytes, more than the %d a keyring may have",
                     shown, (long long)st.st_size, CRYPT_KEYRING_TEXT_MAX);
        goto done;
    }
    if (mode_out) *mode_out = (unsigned)(st.st_mode & 07777);
    buf = malloc(CRYPT_KEYRING_TEXT_MAX + 1);
    if (!buf) {
        rc = err_set(ERR_NOMEM, "key file %s: out of memory", shown);
        goto done;
    }
    for (;;) {
        ssize_t n = read(fd, buf + got, CRYPT_KEYRING_TEXT_MAX + 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = err_set(ERR_IO, "key file %s: %s", shown, strerror(errno));
            goto done;
        }
        if (n == 0) break;
        got += (size_t)n;
        if (got > CRYPT_KEYRING_TEXT_MAX) {
            rc = err_set(ERR_INVALID, "key file %s: more than the %d bytes a keyring may have",
                         shown, CRYPT_KEYRING_TEXT_MAX);
            goto done;
        }
    }
    char what[300];
    snprintf(what, sizeof what, "key file %s", shown);
    rc = keyring_parse(buf, got, what, out);
done:
    if (buf) {
        OPENSSL_cleanse(buf, CRYPT_KEYRING_TEXT_MAX + 1);
        free(buf);
    }
    close(fd);
    return rc;
}

Keyring *keyring_copy(const Keyring *kr) {
    if (!kr) return NULL;
    Keyring *c = calloc(1, sizeof *c);
    if (c && kr->n && !(c->keys = calloc(kr->n, sizeof *c->keys))) {
        free(c);
        c = NULL;
    }
    if (!c) {
        err_set(ERR_NOMEM, "keyring: out of memory");
        return NULL;
    }
    if (kr->n) memcpy(c->keys, kr->keys, kr->n * sizeof *c->keys);
    c->n = kr->n;
    return c;
}

size_t keyring_count(const Keyring *kr) {
    return kr ? kr->n : 0;
}

const char *keyring_id(const Keyring *kr, size_t i) {
    return kr && i < kr->n ? kr->keys[i].id : NULL;
}

static const KeyEntry *keyring_find(const Keyring *kr, const char *id) {
    for (size_t i = 0; kr && i < kr->n; i++)
        if (strcmp(kr->keys[i].id, id) == 0) return &kr->keys[i];
    return NULL;
}

/* ---- shared pieces ---- */

/* The object's keys from the master key and its salt: enc (AES-256-GCM) then mac (HMAC). */
static int derive(const uint8_t master[CRYPT_KEY_LEN], const uint8_t salt[SALT_LEN],
                  uint8_t enc[CRYPT_KEY_LEN], uint8_t mac[CRYPT_KEY_LEN]) {
    uint8_t okm[2 * CRYPT_KEY_LEN];
    int rc = 0;
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)master, CRYPT_KEY_LEN),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, SALT_LEN),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)HKDF_INFO,
                                          sizeof HKDF_INFO - 1),
        OSSL_PARAM_construct_end()};
    if (!kctx || EVP_KDF_derive(kctx, okm, sizeof okm, params) != 1)
        rc = err_set(ERR_UNSUPPORTED, "encryption: OpenSSL cannot derive keys with HKDF-SHA256");
    else {
        memcpy(enc, okm, CRYPT_KEY_LEN);
        memcpy(mac, okm + CRYPT_KEY_LEN, CRYPT_KEY_LEN);
    }
    OPENSSL_cleanse(okm, sizeof okm);
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    return rc;
}

static int header_check(const uint8_t mac[CRYPT_KEY_LEN], const uint8_t *hdr, size_t len,
                        uint8_t out[CHECK_LEN]) {
    unsigned int n = 0;
    if (!HMAC(EVP_sha256(), mac, CRYPT_KEY_LEN, hdr, len, out, &n) || n != CHECK_LEN)
        return err_set(ERR_UNSUPPORTED, "encryption: OpenSSL cannot compute HMAC-SHA256");
    return 0;
}

/* The object's name as bound into a version 2 object's chunks (NULL for version 1). */
typedef struct {
    const char *text;
    size_t len;
} Binding;

static void chunk_nonce_aad(uint64_t index, uint32_t word, uint8_t nonce[NONCE_LEN],
                            uint8_t tail[12]) {
    memset(nonce, 0, 4);
    put_be64(nonce + 4, index);
    put_be64(tail, index);
    put_be32(tail + 8, word);
}

/* Seals or opens one chunk. enc: 1 seal (tag written), 0 open (tag checked; -1 on mismatch). */
/* AAD: the header, then (version 2) the binding's length (2 bytes) and text, then the
 * chunk's index and word. */
static int gcm_chunk(EVP_CIPHER_CTX *ctx, int enc, const uint8_t key[CRYPT_KEY_LEN],
                     const uint8_t *hdr, size_t hdr_len, const Binding *bind, uint64_t index,
                     uint32_t word, const uint8_t *in, size_t len, uint8_t *out,
                     uint8_t tag[TAG_LEN]) {
    uint8_t nonce[NONCE_LEN], tail[12], blen[BINDING_LEN_BYTES];
    int outl = 0, fin = 0;
    chunk_nonce_aad(index, word, nonce, tail);
    if (EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, enc) != 1 ||
        EVP_CipherUpdate(ctx, NULL, &outl, hdr, (int)hdr_len) != 1)
        return -2;
    if (bind->text) {
        blen[0] = (uint8_t)(bind->len >> 8);
        blen[1] = (uint8_t)bind->len;
        if (EVP_CipherUpdate(ctx, NULL, &outl, blen, sizeof blen) != 1 ||
            (bind->len &&
             EVP_CipherUpdate(ctx, NULL, &outl, (const uint8_t *)bind->text, (int)bind->len) != 1))
            return -2;
    }
    if (EVP_CipherUpdate(ctx, NULL, &outl, tail, sizeof tail) != 1) return -2;
    if (len > 0 && EVP_CipherUpdate(ctx, out, &outl, in, (int)len) != 1) return -2;
    if (!enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1) return -2;
    if (EVP_CipherFinal_ex(ctx, out + (len > 0 ? outl : 0), &fin) != 1) return enc ? -2 : -1;
    if (enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1) return -2;
    return 0;
}

/* ---- writer ---- */

typedef struct {
    IoWriter base;
    IoWriter *next;
    const Keyring *kr;
    size_t chunk;
    uint8_t *pt; /* chunk bytes of plaintext being gathered */
    size_t pt_len;
    uint8_t *frame; /* word + ciphertext + tag */
    uint8_t hdr[HDR_MAX];
    size_t hdr_len;
    uint8_t key[CRYPT_KEY_LEN];
    EVP_CIPHER_CTX *ctx;
    uint64_t index;
    int started, finished, failed;
    char *binding; /* owned; NULL: version 1 */
    Binding bind;
} CryptWriter;

static int cw_fail(CryptWriter *w, int rc) {
    w->failed = 1;
    return rc;
}

static int cw_start(CryptWriter *w) {
    const KeyEntry *k = &w->kr->keys[0];
    size_t id_len = strlen(k->id);
    uint8_t *h = w->hdr;
    uint8_t mac[CRYPT_KEY_LEN];
    memcpy(h, MAGIC, MAGIC_LEN);
    h[8] = w->bind.text ? VERSION_BOUND : VERSION;
    h[9] = ALG_AES256GCM_HKDF;
    put_be32(h + 10, (uint32_t)w->chunk);
    h[14] = (uint8_t)id_len;
    memcpy(h + HDR_FIXED, k->id, id_len);
    uint8_t *salt = h + HDR_FIXED + id_len;
    if (RAND_bytes(salt, SALT_LEN) != 1)
        return cw_fail(w, err_set(ERR_IO, "encryption: cannot draw a random salt"));
    int rc = derive(k->key, salt, w->key, mac);
    if (!rc) rc = header_check(mac, h, HDR_FIXED + id_len + SALT_LEN, salt + SALT_LEN);
    OPENSSL_cleanse(mac, sizeof mac);
    if (rc) return cw_fail(w, rc);
    w->hdr_len = HDR_FIXED + id_len + SALT_LEN + CHECK_LEN;
    w->started = 1;
    rc = io_write(w->next, w->hdr, w->hdr_len);
    return rc ? cw_fail(w, rc) : 0;
}

static int cw_emit(CryptWriter *w, int final) {
    uint32_t word = (uint32_t)w->pt_len | (final ? FINAL_BIT : 0);
    put_be32(w->frame, word);
    if (gcm_chunk(w->ctx, 1, w->key, w->hdr, w->hdr_len, &w->bind, w->index, word, w->pt, w->pt_len,
                  w->frame + WORD_LEN, w->frame + WORD_LEN + w->pt_len) != 0)
        return cw_fail(w, err_set(ERR_UNSUPPORTED, "encryption: AES-256-GCM failed in OpenSSL"));
    int rc = io_write(w->next, w->frame, WORD_LEN + w->pt_len + TAG_LEN);
    if (rc) return cw_fail(w, rc);
    OPENSSL_cleanse(w->pt, w->pt_len);
    w->index++;
    w->pt_len = 0;
    return 0;
}

static int cw_write(IoWriter *iw, const void *buf, size_t len) {
    CryptWriter *w = (CryptWriter *)iw;
    const uint8_t *p = buf;
    if (w->failed) return err_set(ERR_INVALID, "encryption: the writer failed before");
    if (w->finished) return err_set(ERR_INVALID, "encryption: write after finish");
    if (len == 0) return 0;
    int rc = w->started ? 0 : cw_start(w);
    while (!rc && len > 0) {
        /* a full chunk goes out only once more bytes follow: the last one is sealed final */
        if (w->pt_len == w->chunk && (rc = cw_emit(w, 0))) break;
        mem_fill(w->pt, w->chunk, &w->pt_len, &p, &len);
    }
    return rc;
}

static int cw_finish(IoWriter *iw) {
    CryptWriter *w = (CryptWriter *)iw;
    if (w->failed) return err_set(ERR_INVALID, "encryption: the writer failed before");
    if (w->finished) return 0;
    int rc = w->started ? 0 : cw_start(w);
    if (!rc) rc = cw_emit(w, 1);
    if (!rc) w->finished = 1;
    return rc;
}

/* Frees what a writer and a reader both own: the plaintext buffer of chunk bytes and the key
 * (both wiped first), the frame buffer, the bound name and the cipher context (any NULL). */
static void crypt_release(uint8_t *pt, size_t chunk, uint8_t *frame, char *binding,
                          EVP_CIPHER_CTX *ctx, uint8_t key[CRYPT_KEY_LEN]) {
    if (pt) {
        OPENSSL_cleanse(pt, chunk);
        free(pt);
    }
    free(frame);
    free(binding);
    EVP_CIPHER_CTX_free(ctx);
    OPENSSL_cleanse(key, CRYPT_KEY_LEN);
}

static void cw_free(IoWriter *iw) {
    CryptWriter *w = (CryptWriter *)iw;
    if (!w) return;
    crypt_release(w->pt, w->chunk, w->frame, w->binding, w->ctx, w->key);
    free(w);
}

static const IoWriterVt cw_vt = {cw_write, cw_finish, cw_free};

IoWriter *crypt_writer_new(const Keyring *kr, size_t chunk_size, IoWriter *next) {
    return crypt_writer_new_bound(kr, chunk_size, NULL, next);
}

IoWriter *crypt_writer_new_bound(const Keyring *kr, size_t chunk_size, const char *binding,
                                 IoWriter *next) {
    if (chunk_size == 0) chunk_size = CRYPT_CHUNK_DEFAULT;
    if (binding && strlen(binding) > CRYPT_BINDING_MAX) {
        err_set(ERR_INVALID, "encryption: name to bind is over %d bytes", CRYPT_BINDING_MAX);
        return NULL;
    }
    if (!kr || kr->n == 0) {
        err_set(ERR_INVALID, "encryption: no key to encrypt with");
        return NULL;
    }
    if (chunk_size < CRYPT_CHUNK_MIN || chunk_size > CRYPT_CHUNK_MAX) {
        err_set(ERR_INVALID, "encryption: chunk size %zu outside %d..%d", chunk_size,
                CRYPT_CHUNK_MIN, CRYPT_CHUNK_MAX);
        return NULL;
    }
    CryptWriter *w = calloc(1, sizeof *w);
    if (!w) goto nomem;
    w->base.vt = &cw_vt;
    w->next = next;
    w->kr = kr;
    w->chunk = chunk_size;
    w->pt = malloc(chunk_size);
    w->frame = malloc(WORD_LEN + chunk_size + TAG_LEN);
    w->ctx = EVP_CIPHER_CTX_new();
    if (!w->pt || !w->frame || !w->ctx) goto nomem;
    if (binding) {
        if (!(w->binding = strdup(binding))) goto nomem;
        w->bind = (Binding){w->binding, strlen(w->binding)};
    }
    return &w->base;
nomem:
    cw_free(w ? &w->base : NULL);
    err_set(ERR_NOMEM, "encryption: out of memory");
    return NULL;
}

/* ---- reader ---- */

enum { R_HEADER, R_CHUNKS, R_DONE, R_FAILED };

typedef struct {
    IoReader base;
    IoReader *src;
    const Keyring *kr;
    uint8_t hdr[HDR_MAX];
    size_t hdr_len;
    char key_id[CRYPT_KEY_ID_MAX + 1];
    uint8_t key[CRYPT_KEY_LEN];
    size_t chunk;
    uint8_t *frame; /* ciphertext + tag of the chunk being read */
    uint8_t *pt;    /* authenticated plaintext handed out */
    size_t pt_len, pt_pos;
    uint64_t index; /* the next chunk's position */
    uint64_t off;   /* stored bytes consumed */
    EVP_CIPHER_CTX *ctx;
    int state;
    int fail_rc;
    char fail_msg[2048]; /* as err.c keeps: a message naming a long object is kept whole */
    char *binding;       /* owned; NULL: the caller gave no name */
    Binding bind;        /* what the chunks authenticate: the name for version 2, none for 1 */
} CryptReader;

static int cr_fail(CryptReader *r, int rc) {
    r->state = R_FAILED;
    r->fail_rc = rc;
    snprintf(r->fail_msg, sizeof r->fail_msg, "%s", err_msg());
    return rc;
}

/* Reads exactly n bytes unless the stream ends first; *got says how many came. */
static int cr_read_n(CryptReader *r, uint8_t *buf, size_t n, size_t *got) {
    return io_read_full(r->src, buf, n, got);
}

static int cr_header(CryptReader *r) {
    uint8_t *h = r->hdr;
    size_t got = 0;
    int rc = cr_read_n(r, h, HDR_FIXED, &got);
    if (rc) return rc;
    if (got < MAGIC_LEN || memcmp(h, MAGIC, MAGIC_LEN) != 0)
        return err_set(ERR_CORRUPT, "not an encrypted object of etcdbr: %s",
                       got == 0          ? "the object is empty"
                       : got < MAGIC_LEN ? "shorter than the header's magic"
                                         : "the header's magic is missing");
    if (got < HDR_FIXED)
        return err_set(ERR_CORRUPT, "encryption header: truncated after %zu bytes", got);
    if (h[8] != VERSION && h[8] != VERSION_BOUND)
        return err_set(ERR_UNSUPPORTED,
                       "encryption header: format version %u (this build reads versions %d and "
                       "%d)",
                       h[8], VERSION, VERSION_BOUND);
    if (h[8] == VERSION_BOUND && !r->binding)
        return err_set(ERR_INVALID,
                       "encryption header: the object is bound to its name (version %d), but "
                       "the reader was given no name",
                       VERSION_BOUND);
    if (h[8] == VERSION_BOUND) r->bind = (Binding){r->binding, strlen(r->binding)};
    if (h[9] != ALG_AES256GCM_HKDF)
        return err_set(ERR_UNSUPPORTED,
                       "encryption header: algorithm %u (this build knows 1, AES-256-GCM)", h[9]);
    uint32_t chunk = get_be32(h + 10);
    if (chunk < CRYPT_CHUNK_MIN || chunk > CRYPT_CHUNK_MAX)
        return err_set(ERR_CORRUPT, "encryption header: chunk size %u outside %d..%d", chunk,
                       CRYPT_CHUNK_MIN, CRYPT_CHUNK_MAX);
    size_t id_len = h[14];
    if (id_len == 0 || id_len > CRYPT_KEY_ID_MAX)
        return err_set(ERR_CORRUPT, "encryption header: key id length %zu outside 1..%d", id_len,
                       CRYPT_KEY_ID_MAX);
    size_t rest = id_len + SALT_LEN + CHECK_LEN;
    rc = cr_read_n(r, h + HDR_FIXED, rest, &got);
    if (rc) return rc;
    if (got < rest)
        return err_set(ERR_CORRUPT, "encryption header: truncated after %zu of its %zu bytes",
                       HDR_FIXED + got, HDR_FIXED + rest);
    for (size_t i = 0; i < id_len; i++)
        if (!id_char_ok((char)h[HDR_FIXED + i]))
            return err_set(ERR_CORRUPT, "encryption header: the key id has a byte 0x%02x",
                           h[HDR_FIXED + i]);
    memcpy(r->key_id, h + HDR_FIXED, id_len);
    r->key_id[id_len] = '\0';
    r->hdr_len = HDR_FIXED + rest;
    r->off = r->hdr_len;
    const KeyEntry *k = keyring_find(r->kr, r->key_id);
    if (!k) {
        char ids[256] = "";
        size_t used = 0;
        for (size_t i = 0; r->kr && i < r->kr->n && used < sizeof ids; i++) {
            int n =
                snprintf(ids + used, sizeof ids - used, "%s%s", i ? ", " : "", r->kr->keys[i].id);
            if (n < 0) break;
            used += (size_t)n;
        }
        return err_set(ERR_INVALID,
                       "encrypted with key id \"%s\", which is not among the keys given (%s)",
                       r->key_id, ids[0] ? ids : "none");
    }
    uint8_t mac[CRYPT_KEY_LEN], check[CHECK_LEN];
    const uint8_t *salt = h + HDR_FIXED + id_len;
    rc = derive(k->key, salt, r->key, mac);
    if (!rc) rc = header_check(mac, h, HDR_FIXED + id_len + SALT_LEN, check);
    OPENSSL_cleanse(mac, sizeof mac);
    if (rc) return rc;
    if (CRYPTO_memcmp(check, salt + SALT_LEN, CHECK_LEN) != 0)
        return err_set(ERR_CORRUPT,
                       "encryption header check failed: wrong key or not ours: key id \"%s\" "
                       "(the key given under that id is not the one that wrote the object, or "
                       "the header was altered)",
                       r->key_id);
    r->chunk = chunk;
    r->frame = malloc(chunk + TAG_LEN);
    r->pt = malloc(chunk);
    if (!r->frame || !r->pt) return err_set(ERR_NOMEM, "decryption: out of memory");
    r->state = R_CHUNKS;
    return 0;
}

/* After chunk r->index failed to authenticate: whether it is another chunk of this object, to
 * say "reordered" or "dropped" instead of only "altered". Costs a few decryptions, only on
 * failure. */
static int cr_diagnose(CryptReader *r, uint32_t word, size_t len, uint64_t *found) {
    uint64_t lo = r->index > DIAGNOSE_SPAN ? r->index - DIAGNOSE_SPAN : 0;
    for (uint64_t j = lo; j <= r->index + DIAGNOSE_SPAN; j++) {
        if (j == r->index) continue;
        for (int flip = 0; flip < 2; flip++) {
            uint32_t w = flip ? word ^ FINAL_BIT : word;
            if ((w & ~FINAL_BIT) != len) continue;
            if (!(w & FINAL_BIT) && len != r->chunk) continue;
            if (gcm_chunk(r->ctx, 0, r->key, r->hdr, r->hdr_len, &r->bind, j, w, r->frame, len,
                          r->pt, r->frame + len) == 0) {
                *found = j;
                return 1;
            }
        }
    }
    return 0;
}

static int cr_next_chunk(CryptReader *r) {
    uint8_t wb[WORD_LEN];
    size_t got = 0;
    uint64_t at = r->off;
    int rc = cr_read_n(r, wb, WORD_LEN, &got);
    if (rc) return rc;
    if (got == 0) {
        if (r->index == 0)
            return err_set(ERR_CORRUPT,
                           "truncated: the object ends after its header (stored byte %llu), "
                           "before chunk 0",
                           (unsigned long long)at);
        return err_set(ERR_CORRUPT,
                       "truncated: the object ends after chunk %llu (stored byte %llu) without "
                       "its final chunk",
                       (unsigned long long)(r->index - 1), (unsigned long long)at);
    }
    if (got < WORD_LEN)
        return err_set(ERR_CORRUPT,
                       "truncated: chunk %llu at stored byte %llu ends after %zu bytes of its "
                       "length word",
                       (unsigned long long)r->index, (unsigned long long)at, got);
    uint32_t word = get_be32(wb);
    int final = (word & FINAL_BIT) != 0;
    size_t len = word & ~FINAL_BIT;
    if (len > r->chunk)
        return err_set(ERR_CORRUPT,
                       "chunk %llu at stored byte %llu: length %zu is over the chunk size %zu "
                       "(altered)",
                       (unsigned long long)r->index, (unsigned long long)at, len, r->chunk);
    if (!final && len != r->chunk)
        return err_set(ERR_CORRUPT,
                       "chunk %llu at stored byte %llu: a non-final chunk of %zu bytes, not the "
                       "chunk size %zu (altered)",
                       (unsigned long long)r->index, (unsigned long long)at, len, r->chunk);
    rc = cr_read_n(r, r->frame, len + TAG_LEN, &got);
    if (rc) return rc;
    if (got < len + TAG_LEN)
        return err_set(ERR_CORRUPT,
                       "truncated: chunk %llu at stored byte %llu ends after %zu of its %zu "
                       "bytes",
                       (unsigned long long)r->index, (unsigned long long)at, WORD_LEN + got,
                       WORD_LEN + len + TAG_LEN);
    uint64_t end = at + WORD_LEN + len + TAG_LEN;
    int ok = gcm_chunk(r->ctx, 0, r->key, r->hdr, r->hdr_len, &r->bind, r->index, word, r->frame,
                       len, r->pt, r->frame + len);
    if (ok == -2) return err_set(ERR_UNSUPPORTED, "decryption: AES-256-GCM failed in OpenSSL");
    if (ok != 0) {
        uint64_t j = 0;
        int moved = cr_diagnose(r, word, len, &j);
        OPENSSL_cleanse(r->pt, r->chunk);
        if (moved && j > r->index)
            return err_set(ERR_CORRUPT,
                           "chunk %llu (stored bytes %llu-%llu) is the object's chunk %llu: "
                           "chunks were dropped or reordered",
                           (unsigned long long)r->index, (unsigned long long)at,
                           (unsigned long long)(end - 1), (unsigned long long)j);
        if (moved)
            return err_set(ERR_CORRUPT,
                           "chunk %llu (stored bytes %llu-%llu) is the object's chunk %llu: "
                           "chunks were reordered or repeated",
                           (unsigned long long)r->index, (unsigned long long)at,
                           (unsigned long long)(end - 1), (unsigned long long)j);
        if (r->bind.text)
            return err_set(ERR_CORRUPT,
                           "chunk %llu (stored bytes %llu-%llu) does not authenticate under the "
                           "name %s: the object was stored under another object's name "
                           "(swapped or renamed), or its bytes or length word were altered",
                           (unsigned long long)r->index, (unsigned long long)at,
                           (unsigned long long)(end - 1), r->bind.text);
        return err_set(ERR_CORRUPT,
                       "chunk %llu (stored bytes %llu-%llu) does not authenticate: its bytes "
                       "or length word were altered, or it is another object's chunk",
                       (unsigned long long)r->index, (unsigned long long)at,
                       (unsigned long long)(end - 1));
    }
    r->off = end;
    if (final) {
        uint8_t extra;
        rc = cr_read_n(r, &extra, 1, &got);
        if (rc) return rc;
        if (got) {
            OPENSSL_cleanse(r->pt, len);
            return err_set(ERR_CORRUPT, "bytes after the final chunk %llu, from stored byte %llu",
                           (unsigned long long)r->index, (unsigned long long)end);
        }
        r->state = R_DONE;
    }
    r->index++;
    r->pt_len = len;
    r->pt_pos = 0;
    return 0;
}

static int cr_read(IoReader *ir, void *buf, size_t cap, size_t *got) {
    CryptReader *r = (CryptReader *)ir;
    *got = 0;
    if (r->state == R_FAILED) return err_set(r->fail_rc, "%s", r->fail_msg);
    if (cap == 0) return 0;
    if (r->state == R_HEADER) {
        int rc = cr_header(r);
        if (rc) return cr_fail(r, rc);
    }
    while (r->pt_pos == r->pt_len) {
        if (r->state == R_DONE) return 0;
        int rc = cr_next_chunk(r);
        if (rc) return cr_fail(r, rc);
    }
    size_t n = r->pt_len - r->pt_pos;
    if (n > cap) n = cap;
    memcpy(buf, r->pt + r->pt_pos, n);
    r->pt_pos += n;
    *got = n;
    return 0;
}

static void cr_free(IoReader *ir) {
    CryptReader *r = (CryptReader *)ir;
    if (!r) return;
    crypt_release(r->pt, r->chunk, r->frame, r->binding, r->ctx, r->key);
    free(r);
}

static const IoReaderVt cr_vt = {cr_read, cr_free};

IoReader *crypt_reader_new(const Keyring *kr, IoReader *src) {
    return crypt_reader_new_bound(kr, NULL, src);
}

IoReader *crypt_reader_new_bound(const Keyring *kr, const char *binding, IoReader *src) {
    if (binding && strlen(binding) > CRYPT_BINDING_MAX) {
        err_set(ERR_INVALID, "decryption: name to bind is over %d bytes", CRYPT_BINDING_MAX);
        return NULL;
    }
    CryptReader *r = calloc(1, sizeof *r);
    if (!r || !(r->ctx = EVP_CIPHER_CTX_new()) || (binding && !(r->binding = strdup(binding)))) {
        if (r) EVP_CIPHER_CTX_free(r->ctx);
        free(r);
        err_set(ERR_NOMEM, "decryption: out of memory");
        return NULL;
    }
    r->base.vt = &cr_vt;
    r->src = src;
    r->kr = kr;
    r->state = R_HEADER;
    return &r->base;
}
