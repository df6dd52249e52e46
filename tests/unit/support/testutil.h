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

/* Honest skips. testutil_skip(why) ends the running test as skipped because something it needs is
 * missing here (why: what is missing and how to get it; printed). Under ETCDBR_REQUIRE_TOOLS=1
 * (CI) it fails the test instead. A skip must reach ctest's summary, not count as a pass: end
 * main with `return testutil_exit(cmocka_run_group_tests(...))`, which returns the failure
 * count when a test failed, else TESTUTIL_SKIP_EXIT when one skipped (the unit tests'
 * SKIP_RETURN_CODE in CMakeLists.txt), else 0. Use it instead of cmocka's bare skip(). */
#define TESTUTIL_SKIP_EXIT 77
#define testutil_skip(why)                                                                         \
    do {                                                                                           \
        testutil_note_skip(why);                                                                   \
        skip();                                                                                    \
    } while (0)
void testutil_note_skip(const char *why);
int testutil_exit(int failed);

/* A TCP port on 127.0.0.1 that nothing listens on now (bind to port 0), or -1. */
int free_port(void);

#endif
