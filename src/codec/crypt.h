/* crypt: client-side encryption of snapshot objects, AES-256-GCM (OpenSSL EVP) in framed chunks
 * (format byte by byte in docs/encryption.md), and the keyring it draws keys from.
 * Invariants: a reader gives out only plaintext whose chunk authenticated; it ends the stream
 * only after the chunk marked final, so truncation, reordering, dropped chunks and appended bytes
 * are ERR_CORRUPT, never a short or altered stream. Memory is one chunk (at most
 * CRYPT_CHUNK_MAX) plus its ciphertext, whatever the object's size. Every object gets a fresh
 * random salt and so its own key (HKDF-SHA256): nonces (the chunk counter) never repeat under one
 * key. Key bytes are wiped (OPENSSL_cleanse) when freed and never appear in messages. */
#ifndef ETCDBR_CRYPT_H
#define ETCDBR_CRYPT_H

#include "io.h"

#include <stddef.h>

#define CRYPT_KEY_LEN 32             /* AES-256 master key, bytes */
#define CRYPT_KEY_ID_MAX 64          /* key id characters: [A-Za-z0-9._-], 1..64 */
#define CRYPT_CHUNK_MIN 1024         /* plaintext bytes per chunk a reader accepts, lower bound */
#define CRYPT_CHUNK_MAX 1048576      /* ... upper bound: bounds a reader's memory (1 MiB) */
#define CRYPT_CHUNK_DEFAULT 65536    /* what writers use (64 KiB: 20 bytes of framing each) */
#define CRYPT_KEYRING_TEXT_MAX 65536 /* bytes of a key file or of the keys' variable */

/* Keys by id. The first key encrypts new objects; every key decrypts (rotation: put the new key
 * first, keep the old ones for reading). Immutable after loading, so readable from several
 * threads at once. */
typedef struct Keyring Keyring;

/* Parses keyring text: one key per line, "<key-id> <base64 of 32 bytes>" separated by spaces or
 * tabs; blank lines and lines starting with '#' (after optional blanks) are skipped; ';' also
 * ends a line (for a one-line environment variable). what names the source in messages (e.g.
 * "key file /etc/etcdbr/keys", "ETCDBR_ENCRYPTION_KEYS"). ERR_INVALID naming what and the line
 * number (never the key): a malformed line, a bad id, a key that is not base64 of exactly 32
 * bytes, a duplicate id, no key at all, text over CRYPT_KEYRING_TEXT_MAX. *out owned
 * (keyring_free). text is only read; the caller wipes it. */
int keyring_parse(const char *text, size_t len, const char *what, Keyring **out);

/* keyring_parse of the file at path (a regular file of at most CRYPT_KEYRING_TEXT_MAX bytes;
 * its bytes are wiped after parsing). *mode_out (may be NULL) receives the file's permission
 * bits so the caller can warn when group or others may read it (mode & 077). ERR_NOT_FOUND,
 * ERR_IO or ERR_INVALID naming the path. */
int keyring_load_file(const char *path, Keyring **out, unsigned *mode_out);

/* 1 when text (len bytes; not NUL-terminated) holds key material: a token (separated by
 * blanks, line ends, ';', ',', ':' or quotes) that is standard base64 of exactly CRYPT_KEY_LEN
 * bytes, as a key line's second field is. For messages and logs that would quote a value which
 * should be a file name (--encryption-key-file) but may be the keys themselves. */
int crypt_text_holds_key(const char *text, size_t len);

/* Number of keys (>= 1 for a parsed keyring). */
size_t keyring_count(const Keyring *kr);
/* The id of key i (0 = the write key), borrowed; NULL when i is out of range. */
const char *keyring_id(const Keyring *kr, size_t i);

/* A copy of kr (owned; keyring_free), e.g. to give a second Store the same keys (a Store owns
 * its keyring: store_set_keyring). NULL when kr is NULL or on ENOMEM. */
Keyring *keyring_copy(const Keyring *kr);

/* Wipes the key bytes and frees. NULL-safe. */
void keyring_free(Keyring *kr);

/* Writer encrypting into next (borrowed) with kr's first key (kr borrowed; must outlive the
 * writer), chunk_size plaintext bytes per chunk (CRYPT_CHUNK_MIN..CRYPT_CHUNK_MAX; 0 =
 * CRYPT_CHUNK_DEFAULT). The header goes out with the first write or finish; finish writes the
 * final chunk (an empty object is a header and one empty final chunk). Writes return ERR_IO if
 * the random salt cannot be drawn, or next's error. NULL on ENOMEM or an invalid argument (no
 * key, chunk size out of range; err_msg says which). */
IoWriter *crypt_writer_new(const Keyring *kr, size_t chunk_size, IoWriter *next);

/* Reader decrypting src (borrowed) with whichever key of kr (borrowed) the object's header
 * names. Reads return: ERR_CORRUPT (not an encrypted object of ours, a header or chunk that
 * does not authenticate, a truncated object, bytes after the final chunk; the message names the
 * chunk, its stored byte offset and what is wrong; a wrong key reads "wrong key or not ours: key
 * id X"), ERR_INVALID (a key id kr does not hold, named: a configuration problem; also when kr
 * is NULL), ERR_UNSUPPORTED (a newer format version or algorithm), or src's error. NULL on
 * ENOMEM. */
IoReader *crypt_reader_new(const Keyring *kr, IoReader *src);

/* Bytes of a name bound into an object (crypt_writer_new_bound), at most. */
#define CRYPT_BINDING_MAX 1024

/* Like crypt_writer_new, but writes format version 2: every chunk also authenticates binding
 * (borrowed, copied; at most CRYPT_BINDING_MAX bytes), the part of the object's name that
 * identifies it (snapname_identity: kind, revisions, time; not the store prefix), so that the
 * object fails to decrypt under any other name. binding NULL = crypt_writer_new (version 1). */
IoWriter *crypt_writer_new_bound(const Keyring *kr, size_t chunk_size, const char *binding,
                                 IoWriter *next);

/* Like crypt_reader_new, given the name the object is read under (binding as for the writer;
 * copied). A version 2 object authenticates only under the name it was written with
 * (ERR_CORRUPT naming it otherwise); a version 1 object (written before names were bound)
 * reads as before, the name unused. A version 2 object read with binding NULL is ERR_INVALID.
 * NULL on ENOMEM or a binding over CRYPT_BINDING_MAX. */
IoReader *crypt_reader_new_bound(const Keyring *kr, const char *binding, IoReader *src);

#endif
