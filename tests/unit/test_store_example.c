/* test_store_example: the example driver of docs/store-driver.md (docs/examples/store_acme.c),
 * compiled here with the project's warnings so the page cannot rot, and run far enough to show
 * it is wired to the real net layer: the constructor refuses missing settings and a credentials
 * file without a token, builds the bucket URL, and a write to a closed loopback port fails with
 * the net layer's error, naming the request, instead of reporting success. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../docs/examples/store_acme.c"
#include "codec/io.h"
#include "support/testutil.h"

#include <stdlib.h>
#include <unistd.h>

static char *creds_file(const char *json) {
    char *path = strdup("/tmp/etcdbr-acme-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    return path;
}

static void test_example_refuses_missing_settings(void **state) {
    (void)state;
    unsetenv("ACME_APPLICATION_CREDENTIALS");
    unsetenv("ACME_ENDPOINT");
    StoreConfig cfg = {.provider = "Acme", .container = "b"};
    StoreDriver *d = NULL;
    assert_int_equal(store_acme_driver_new(&cfg, &d), ERR_INVALID);
    assert_null(d);
    assert_non_null(strstr(err_msg(), "ACME_ENDPOINT"));
    char *p = creds_file("{\"other\": \"x\"}");
    setenv("ACME_APPLICATION_CREDENTIALS", p, 1);
    setenv("ACME_ENDPOINT", "http://127.0.0.1:1", 1);
    assert_int_equal(store_acme_driver_new(&cfg, &d), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "no token"));
    unlink(p);
    free(p);
}

static void test_example_write_to_closed_port_fails(void **state) {
    (void)state;
    char *p = creds_file("{\"token\": \"s3cret-token\"}");
    setenv("ACME_APPLICATION_CREDENTIALS", p, 1);
    setenv("ACME_ENDPOINT", "http://127.0.0.1:1", 1); /* nothing listens on port 1 */
    setenv("ETCDBR_STORE_RETRY_BASE_MS", "1", 1);
    StoreConfig cfg = {.provider = "Acme", .container = "bucket", .timeout_ms = 2000};
    StoreDriver *d = NULL;
    assert_int_equal(store_acme_driver_new(&cfg, &d), 0);
    assert_string_equal(d->vt->describe(d), "http://127.0.0.1:1/bucket");
    StoreDriverWriter *w = NULL;
    assert_int_equal(d->vt->open_write(d, "etcd/v2/Full-00000000-00000001-1", &w), 0);
    assert_int_equal(io_write(w->vt->io(w), "hello", 5), 0);
    int rc = w->vt->commit(w);
    assert_true(rc < 0);
    assert_non_null(strstr(err_msg(), "127.0.0.1:1/bucket/etcd/v2/Full-00000000-00000001-1"));
    assert_null(strstr(err_msg(), "s3cret-token"));
    d->vt->free(d);
    unlink(p);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_refuses_missing_settings),
        cmocka_unit_test(test_example_write_to_closed_port_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
