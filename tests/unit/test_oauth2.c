/* test_oauth2: the token answers of workload identity and metadata-server credentials (oauth2.h):
 * malformed, missing fields, tokens and lifetimes out of bounds (huge, negative, overflowing,
 * strings), OAuth2 and Google error bodies; RFC 3339 expiry times and the impersonation answer;
 * the token file bound; the cache's refresh time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "store/oauth2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse(const char *json, char **t, int64_t *ex) {
    return oauth2_token_parse(json, strlen(json), "access_token", "expires_in", t, ex);
}

static void test_token_answer_bounds(void **st) {
    (void)st;
    char *t = NULL;
    int64_t ex = 0;
    assert_int_equal(parse("{\"access_token\":\"a\",\"expires_in\":3599}", &t, &ex), 0);
    assert_string_equal(t, "a");
    assert_int_equal(ex, 3599);
    free(t);
    /* Entra ID v1 sends the lifetime as a string */
    assert_int_equal(parse("{\"access_token\":\"a\",\"expires_in\":\"3599\"}", &t, &ex), 0);
    assert_int_equal(ex, 3599);
    free(t);
    /* absent: an hour; huge: cut to a day, no overflow in the refresh time */
    assert_int_equal(parse("{\"access_token\":\"a\"}", &t, &ex), 0);
    assert_int_equal(ex, 3600);
    free(t);
    assert_int_equal(parse("{\"access_token\":\"a\",\"expires_in\":9223372036854775807}", &t, &ex),
                     0);
    assert_int_equal(ex, OAUTH2_MAX_LIFETIME);
    free(t);
    assert_int_equal(
        parse("{\"access_token\":\"a\",\"expires_in\":\"999999999999999999\"}", &t, &ex), 0);
    assert_int_equal(ex, OAUTH2_MAX_LIFETIME);
    free(t);
    /* refused: zero, negative, fractions, too many digits, signs, other types */
    const char *bad[] = {"0",
                         "-5",
                         "1.5",
                         "\"99999999999999999999\"",
                         "\"-1\"",
                         "\"\"",
                         "\"12a\"",
                         "true",
                         "null",
                         "[1]",
                         "-9223372036854775808",
                         "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char j[128];
        snprintf(j, sizeof j, "{\"access_token\":\"secret-tok\",\"expires_in\":%s}", bad[i]);
        assert_int_equal(parse(j, &t, &ex), ERR_CORRUPT);
        assert_null(t);
        assert_null(strstr(err_msg(), "secret-tok"));
    }
    /* malformed answers and missing or empty tokens */
    assert_int_equal(parse("not json", &t, &ex), ERR_CORRUPT);
    assert_int_equal(parse("[\"access_token\"]", &t, &ex), ERR_CORRUPT);
    assert_int_equal(parse("{\"access_token\":\"\"}", &t, &ex), ERR_CORRUPT);
    assert_int_equal(parse("{\"access_token\":42}", &t, &ex), ERR_CORRUPT);
    assert_int_equal(parse("{\"token\":\"x\"}", &t, &ex), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "no access_token"));
    assert_int_equal(
        oauth2_token_parse("{\"access_token\":\"abc\"}", 10, "access_token", "expires_in", &t, &ex),
        ERR_CORRUPT); /* cut short */
    /* a token over the bound */
    size_t big = OAUTH2_TOKEN_MAX + 1;
    char *j = malloc(big + 64);
    assert_non_null(j);
    int n = snprintf(j, 64, "{\"access_token\":\"");
    memset(j + n, 'x', big);
    strcpy(j + n + big, "\"}");
    assert_int_equal(parse(j, &t, &ex), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "more than the 16384 accepted"));
    free(j);
    /* the errors an endpoint answers, in the message */
    assert_int_equal(parse("{\"error\":\"invalid_client\",\"error_description\":\"AADSTS7000215: "
                           "Invalid client secret.\"}",
                           &t, &ex),
                     ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "invalid_client: AADSTS7000215"));
    char why[64];
    const char *g = "{\"error\":{\"code\":403,\"message\":\"Permission denied\",\"status\":"
                    "\"PERMISSION_DENIED\"}}";
    oauth2_error_text(g, strlen(g), why, sizeof why);
    assert_string_equal(why, "PERMISSION_DENIED: Permission denied");
    oauth2_error_text("junk", 4, why, sizeof why);
    assert_string_equal(why, "");
}

static void test_rfc3339_and_impersonation_answer(void **st) {
    (void)st;
    int64_t u = 0;
    assert_int_equal(oauth2_rfc3339("1970-01-01T00:00:00Z", &u), 0);
    assert_int_equal(u, 0);
    assert_int_equal(oauth2_rfc3339("2024-02-29T12:34:56Z", &u), 0);
    assert_int_equal(u, 1709210096);
    assert_int_equal(oauth2_rfc3339("2024-02-29T12:34:56.123456789Z", &u), 0);
    assert_int_equal(u, 1709210096);
    assert_int_equal(oauth2_rfc3339("2024-02-29T14:34:56+02:00", &u), 0);
    assert_int_equal(u, 1709210096);
    assert_int_equal(oauth2_rfc3339("9999-12-31T23:59:59Z", &u), 0);
    const char *bad[] = {"",
                         "2024-02-29",
                         "2024-13-01T00:00:00Z",
                         "2024-02-30T00:00:00Z",
                         "1969-12-31T23:59:59Z",
                         "2024-02-29T24:00:00Z",
                         "2024-02-29T12:34:56",
                         "2024-02-29T12:34:56.Z",
                         "2024-02-29T12:34:56Zjunk",
                         "2024-02-29T12:34:56+2:00",
                         "+12024-01-01T00:00:00Z",
                         "2024-02-29T12:34:56.1234567890Z"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(oauth2_rfc3339(bad[i], &u), ERR_CORRUPT);
    char *t = NULL;
    int64_t ex = 0;
    const char *ok = "{\"accessToken\":\"ya29.imp\",\"expireTime\":\"2024-02-29T13:34:56Z\"}";
    assert_int_equal(
        oauth2_answer_parse(ok, strlen(ok), "accessToken", NULL, "expireTime", 1709210096, &t, &ex),
        0);
    assert_string_equal(t, "ya29.imp");
    assert_int_equal(ex, 3600);
    free(t);
    /* past, missing, malformed expiry; a year ahead is cut to a day */
    assert_int_equal(
        oauth2_answer_parse(ok, strlen(ok), "accessToken", NULL, "expireTime", 1709213696, &t, &ex),
        ERR_CORRUPT);
    assert_null(t);
    const char *none = "{\"accessToken\":\"ya29.imp\"}";
    assert_int_equal(
        oauth2_answer_parse(none, strlen(none), "accessToken", NULL, "expireTime", 0, &t, &ex),
        ERR_CORRUPT);
    assert_null(t);
    const char *far = "{\"accessToken\":\"x\",\"expireTime\":\"9999-12-31T23:59:59Z\"}";
    assert_int_equal(
        oauth2_answer_parse(far, strlen(far), "accessToken", NULL, "expireTime", 0, &t, &ex), 0);
    assert_int_equal(ex, OAUTH2_MAX_LIFETIME);
    free(t);
}

static void test_token_file_bounded_and_reread(void **st) {
    (void)st;
    char dir[] = "/tmp/test_oauth2.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/token", dir);
    FILE *f = fopen(path, "w");
    fputs("eyJ.one.sig\r\n", f);
    fclose(f);
    char *t = NULL;
    assert_int_equal(oauth2_read_token_file(path, "test", &t), 0);
    assert_string_equal(t, "eyJ.one.sig");
    free(t);
    f = fopen(path, "w"); /* rotated: the next read sees the new content */
    fputs("eyJ.two.sig", f);
    fclose(f);
    assert_int_equal(oauth2_read_token_file(path, "test", &t), 0);
    assert_string_equal(t, "eyJ.two.sig");
    free(t);
    f = fopen(path, "w");
    for (int i = 0; i <= OAUTH2_TOKEN_FILE_MAX; i++)
        fputc('a', f);
    fclose(f);
    assert_int_equal(oauth2_read_token_file(path, "test", &t), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "larger than 65536 bytes"));
    assert_null(t);
    f = fopen(path, "w");
    fputs(" \n", f);
    fclose(f);
    assert_int_equal(oauth2_read_token_file(path, "test", &t), ERR_INVALID);
    f = fopen(path, "w");
    fwrite("a\0b", 1, 3, f);
    fclose(f);
    assert_int_equal(oauth2_read_token_file(path, "test", &t), ERR_INVALID);
    unlink(path);
    assert_int_equal(oauth2_read_token_file(path, "test", &t), ERR_IO);
    assert_non_null(strstr(err_msg(), path));
    rmdir(dir);
}

static void test_cache_refresh_time(void **st) {
    (void)st;
    Oauth2Cached c = {0};
    assert_int_equal(oauth2_cached_fresh(&c), 0);
    oauth2_cached_set(&c, strdup("t1"), 3600);
    assert_int_equal(oauth2_cached_fresh(&c), 1);
    assert_true(c.refresh_at - oauth2_mono_s() <= 3540 && c.refresh_at - oauth2_mono_s() >= 3539);
    long g = c.gen;
    oauth2_cached_set(&c, strdup("t2"), 1);
    oauth2_cached_drop(&c, g); /* an older token: no effect */
    assert_non_null(c.token);
    oauth2_cached_drop(&c, c.gen);
    assert_null(c.token);
    assert_int_equal(oauth2_cached_fresh(&c), 0);
    oauth2_cached_set(&c, strdup("t3"), INT64_MAX); /* bounded, no overflow */
    assert_true(c.refresh_at > oauth2_mono_s() && c.refresh_at <= oauth2_mono_s() + 86400);
    oauth2_cached_set(&c, strdup("t4"), -7);
    assert_true(c.refresh_at <= oauth2_mono_s() + 1);
    oauth2_cached_clear(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_answer_bounds),
        cmocka_unit_test(test_rfc3339_and_impersonation_answer),
        cmocka_unit_test(test_token_file_bounded_and_reread),
        cmocka_unit_test(test_cache_refresh_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
