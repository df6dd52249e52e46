/* test_auth_token: the bearer token of --server-auth-token-file (docs/server.md, "Production
 * setting"): the bounded, trimmed file read and its refusals, the Authorization header's
 * parsing, the constant-time comparison, rotation (the file rewritten, also with a token of the
 * same length at once, replaced through a renamed file, removed: fail closed) and checks from
 * several threads while the file changes. The HTTP side runs against a real server in
 * tests/integration/test_server_tls_auth.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/auth_token.h"
#include "common/err.h"
#include "support/testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/test_auth_token.XXXXXX";

static void path_of(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

static void put(const char *name, const char *text) {
    char p[256];
    path_of(p, sizeof p, name);
    write_file(p, text, strlen(text));
}

static int read_err(const char *name, char *buf, size_t cap) {
    char p[256];
    path_of(p, sizeof p, name);
    size_t n = 0;
    return auth_token_read_file(p, buf, cap, &n);
}

static void test_file_is_trimmed_and_bounded(void **state) {
    (void)state;
    char buf[AUTH_TOKEN_MAX_FILE + 1], p[256];
    size_t n = 0;
    put("t", "  s3cr3t-Token_~+/=\n\n");
    path_of(p, sizeof p, "t");
    assert_int_equal(auth_token_read_file(p, buf, sizeof buf, &n), 0);
    assert_string_equal(buf, "s3cr3t-Token_~+/=");
    assert_int_equal(n, strlen("s3cr3t-Token_~+/="));
    /* exactly the bound, a newline included, is read; one byte more is refused */
    char *big = malloc(AUTH_TOKEN_MAX_FILE + 2);
    assert_non_null(big);
    memset(big, 'a', AUTH_TOKEN_MAX_FILE - 1);
    strcpy(big + AUTH_TOKEN_MAX_FILE - 1, "\n");
    put("max", big);
    assert_int_equal(read_err("max", buf, sizeof buf), 0);
    assert_int_equal(strlen(buf), AUTH_TOKEN_MAX_FILE - 1);
    memset(big, 'a', AUTH_TOKEN_MAX_FILE + 1);
    big[AUTH_TOKEN_MAX_FILE + 1] = '\0';
    put("over", big);
    assert_int_equal(read_err("over", buf, sizeof buf), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "longer than 4096"));
    free(big);
    /* a buffer too small for the token */
    assert_int_equal(read_err("t", buf, 8), ERR_INVALID);
    assert_string_equal(buf, "");
}

static void test_empty_missing_or_odd_files_are_refused(void **state) {
    (void)state;
    char buf[64];
    put("empty", "");
    assert_int_equal(read_err("empty", buf, sizeof buf), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "is empty"));
    put("blank", " \n\t\n");
    assert_int_equal(read_err("blank", buf, sizeof buf), ERR_INVALID);
    assert_int_equal(read_err("missing", buf, sizeof buf), ERR_IO);
    put("two", "alpha beta\n");
    assert_int_equal(read_err("two", buf, sizeof buf), ERR_INVALID);
    assert_null(strstr(err_msg(), "alpha")); /* the message never shows the token */
    put("ctl", "ab\x01"
               "cd");
    assert_int_equal(read_err("ctl", buf, sizeof buf), ERR_INVALID);
    put("utf8", "caf\xc3\xa9");
    assert_int_equal(read_err("utf8", buf, sizeof buf), ERR_INVALID);
    /* a directory and a FIFO without a writer: refused at once, not read or waited on */
    assert_int_equal(auth_token_read_file(dir, buf, sizeof buf, &(size_t){0}), ERR_IO);
    char fifo[256];
    path_of(fifo, sizeof fifo, "fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(read_err("fifo", buf, sizeof buf), ERR_IO);
    AuthToken *t = NULL;
    char p[256];
    path_of(p, sizeof p, "empty");
    assert_int_equal(auth_token_open(p, &t), ERR_INVALID);
    assert_null(t);
    path_of(p, sizeof p, "missing");
    assert_int_equal(auth_token_open(p, &t), ERR_IO);
    assert_null(t);
}

static void test_equal_is_exact(void **state) {
    (void)state;
    assert_true(auth_token_equal("abc", 3, "abc", 3));
    assert_false(auth_token_equal("abc", 3, "abd", 3));
    assert_false(auth_token_equal("abc", 3, "abcd", 4));
    assert_false(auth_token_equal("abc", 3, "ab", 2));
    assert_false(auth_token_equal("", 0, "a", 1));
    assert_true(auth_token_equal("", 0, "", 0));
    /* the length given counts, not the NUL */
    assert_false(auth_token_equal("abc\0x", 5, "abc", 3));
}

static AuthToken *open_token(const char *name, const char *text) {
    put(name, text);
    char p[256];
    path_of(p, sizeof p, name);
    AuthToken *t = NULL;
    assert_int_equal(auth_token_open(p, &t), 0);
    return t;
}

static void test_header_parsing(void **state) {
    (void)state;
    AuthToken *t = open_token("h", "tok123\n");
    int bad = -1;
    assert_true(auth_token_check(t, "Bearer tok123", &bad));
    assert_int_equal(bad, 0);
    assert_true(auth_token_check(t, "bearer   tok123  ", &bad));
    assert_true(auth_token_check(t, "BEARER\ttok123", NULL));
    assert_false(auth_token_check(t, NULL, &bad));
    assert_int_equal(bad, 0);
    assert_false(auth_token_check(t, "Basic dG9rMTIz", &bad));
    assert_int_equal(bad, 0);
    assert_false(auth_token_check(t, "Bearer", &bad));
    assert_false(auth_token_check(t, "Bearer ", &bad));
    assert_int_equal(bad, 0);
    assert_false(auth_token_check(t, "Bearertok123", &bad));
    assert_false(auth_token_check(t, "Bearer tok1234", &bad));
    assert_int_equal(bad, 1);
    assert_false(auth_token_check(t, "Bearer tok12", &bad));
    assert_int_equal(bad, 1);
    assert_false(auth_token_check(t, "Bearer TOK123", &bad));
    assert_false(auth_token_check(t, "Bearer tok123 tok123", &bad));
    char cur[64];
    assert_int_equal(auth_token_current(t, cur, sizeof cur), 0);
    assert_string_equal(cur, "tok123");
    assert_int_equal(auth_token_current(t, cur, 4), ERR_INVALID);
    auth_token_free(t);
}

static void test_rotation_and_fail_closed(void **state) {
    (void)state;
    AuthToken *t = open_token("r", "first-token\n");
    assert_true(auth_token_check(t, "Bearer first-token", NULL));
    /* rewritten in place at once with a token of the same length: the times may not move */
    put("r", "other-token\n");
    assert_true(auth_token_check(t, "Bearer other-token", NULL));
    assert_false(auth_token_check(t, "Bearer first-token", NULL));
    /* replaced by rename, as a Secret volume swaps its files */
    put("r.new", "third\n");
    char a[256], b[256];
    path_of(a, sizeof a, "r.new");
    path_of(b, sizeof b, "r");
    assert_int_equal(rename(a, b), 0);
    assert_true(auth_token_check(t, "Bearer third", NULL));
    assert_false(auth_token_check(t, "Bearer other-token", NULL));
    /* removed or emptied: no token is accepted, not even the last one */
    assert_int_equal(unlink(b), 0);
    assert_false(auth_token_check(t, "Bearer third", NULL));
    char cur[64];
    assert_int_equal(auth_token_current(t, cur, sizeof cur), ERR_INVALID);
    put("r", "");
    assert_false(auth_token_check(t, "Bearer third", NULL));
    assert_false(auth_token_check(t, "Bearer ", NULL));
    put("r", "back\n");
    assert_true(auth_token_check(t, "Bearer back", NULL));
    auth_token_free(t);
}

typedef struct {
    AuthToken *t;
    int ok, refused;
} Checker;

static void *checker_main(void *arg) {
    Checker *c = arg;
    for (int i = 0; i < 2000; i++) {
        if (auth_token_check(c->t, i % 2 ? "Bearer aaaa" : "Bearer bbbb", NULL))
            c->ok++;
        else
            c->refused++;
    }
    return NULL;
}

/* several threads check while the file is rewritten: each check sees one whole token (the two
 * tokens alternate, so exactly one of a pair can match), run under TSan in CI */
static void test_threads_while_rotating(void **state) {
    (void)state;
    AuthToken *t = open_token("m", "aaaa\n");
    Checker c[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (Checker){t, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, checker_main, &c[i]), 0);
    }
    for (int i = 0; i < 200; i++)
        put("m", i % 2 ? "aaaa\n" : "bbbb\n");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(c[i].ok + c[i].refused, 2000);
        assert_true(c[i].refused > 0); /* one of each pair is always wrong */
    }
    put("m", "bbbb\n");
    assert_true(auth_token_check(t, "Bearer bbbb", NULL));
    auth_token_free(t);
}

static int setup(void **state) {
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return sh(NULL, 0, "rm -rf '%s'", dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_is_trimmed_and_bounded),
        cmocka_unit_test(test_empty_missing_or_odd_files_are_refused),
        cmocka_unit_test(test_equal_is_exact),
        cmocka_unit_test(test_header_parsing),
        cmocka_unit_test(test_rotation_and_fail_closed),
        cmocka_unit_test(test_threads_while_rotating),
    };
    return testutil_exit(cmocka_run_group_tests(tests, setup, teardown));
}
