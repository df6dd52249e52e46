/* auth_token: the bearer token of --server-auth-token-file (docs/server.md, "Production
 * setting"). The file holds one token; surrounding whitespace (a trailing newline) is ignored.
 * Every check looks at the file's identity (device, inode, size, modification and change times,
 * following symbolic links, so a Kubernetes Secret's swapped `..data` link counts) and re-reads
 * it when that changed: a rewritten file takes effect at the next request. A file that becomes
 * unreadable, empty or too long after start accepts no token at all (fail closed) until it is
 * fixed, with one warning per change. The token is never logged; the comparison is made on
 * SHA-256 digests in constant time, so neither its content nor its length leaks through
 * timing. Thread-safe: one mutex per AuthToken. The Go tool has no such flag (docs/go-tool.md
 * §2: its API has no authentication). */
#ifndef ETCDBR_AUTH_TOKEN_H
#define ETCDBR_AUTH_TOKEN_H

#include <stddef.h>

/* Largest token file read (bytes, whitespace included); a longer file is refused. */
#define AUTH_TOKEN_MAX_FILE 4096u

typedef struct AuthToken AuthToken;

/* Reads the token file at path (borrowed; copied). 0 and *out (owned by the caller, free with
 * auth_token_free), or: ERR_IO (missing or unreadable, not a regular file), ERR_INVALID (empty
 * after trimming whitespace, longer than AUTH_TOKEN_MAX_FILE, or a token with a control
 * character, a space or a non-ASCII byte inside: RFC 6750's token68 has none). The message names
 * the path, never the token. */
int auth_token_open(const char *path, AuthToken **out);

/* Reads a token file into buf (cap bytes, at least 2) as auth_token_open would take it: trimmed,
 * NUL-terminated, *len its length. Reads at most AUTH_TOKEN_MAX_FILE + 1 bytes; does not block
 * on a FIFO. Errors as auth_token_open. */
int auth_token_read_file(const char *path, char *buf, size_t cap, size_t *len);

/* 1 when the Authorization header value (NULL: none) is "Bearer <token>" (scheme matched
 * without regard to case, spaces after it and at the end ignored) with the file's current
 * token; else 0. Re-reads the file first when it changed. *bad_token (may be NULL) is set to 1
 * when a Bearer token was presented and is wrong (RFC 6750 error="invalid_token"), 0 when none
 * was. */
int auth_token_check(AuthToken *t, const char *authorization, int *bad_token);

/* The current token (re-read when the file changed) into buf (cap bytes), NUL-terminated, for a
 * request this process sends (the follower-to-leader proxy). 0, or ERR_INVALID when the file is
 * currently unusable or the token does not fit (buf is then ""). */
int auth_token_current(AuthToken *t, char *buf, size_t cap);

/* Constant-time equality of a (alen bytes) and b (blen bytes): compares their SHA-256 digests
 * with a loop that does not stop early, so the time depends on neither the content nor where
 * they differ. 1 when equal. Pure. */
int auth_token_equal(const char *a, size_t alen, const char *b, size_t blen);

/* Frees t, wiping the token in memory. NULL-safe. */
void auth_token_free(AuthToken *t);

#endif
