/* testutil: small helpers shared by the cmocka unit tests (files and shell commands). They fail
 * the running test with a cmocka assertion instead of returning errors. */
#ifndef ETCDBR_TESTUTIL_H
#define ETCDBR_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* The whole file at path; *len set. malloc'ed (caller frees). Fails the test if unreadable. */
uint8_t *read_file(const char *path, size_t *len);

/* Writes len bytes of buf to path (created or truncated). Fails the test on error. */
void write_file(const char *path, const void *buf, size_t len);

/* Runs a shell command (printf format), capturing stdout and stderr into out (cap bytes, may be
 * NULL: discarded). Returns its exit status, or -1 if it could not run or was killed. */
int sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A TCP port on 127.0.0.1 that nothing listens on now (bind to port 0), or -1. */
int free_port(void);

#endif
