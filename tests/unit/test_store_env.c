/* test_store_env: every driver reads its environment with the store's prefix (docs/go-tool.md §12):
 * "SOURCE_" for copy's source, "SECONDARY_" for the server's secondary store, none for the
 * store itself; ECS's variables take none. A prefixed store never takes the unprefixed
 * credential files (the Go tool's secondary GCS store took the primary's), and its errors name
 * the prefixed variables. Drivers are only constructed (S3, OSS and the GCS credential check
 * send no request). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/log.h"
#include "store/store.h"
#include "store/store_driver.h"
#include "store/store_swift.h"
#include "support/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_dir[256];

static int setup(void **st) {
    (void)st;
    snprintf(g_dir, sizeof g_dir, "/tmp/test_store_env.XXXXXX");
    assert_non_null(mkdtemp(g_dir));
    return 0;
}

static int teardown(void **st) {
    (void)st;
    sh(NULL, 0, "rm -rf '%s'", g_dir);
    return 0;
}

static const char *file_with(const char *name, const char *text) {
    static char p[4][512];
    static int k;
    char *path = p[k++ % 4];
    snprintf(path, 512, "%s/%s", g_dir, name);
    write_file(path, text, strlen(text));
    return path;
}

static void test_store_env_reads_the_prefixed_variable_only(void **st) {
    (void)st;
    setenv("STORAGE_CONTAINER", "plain", 1);
    unsetenv("SOURCE_STORAGE_CONTAINER");
    StoreConfig c = {.env_prefix = "SOURCE_"};
    assert_null(store_env(&c, "STORAGE_CONTAINER"));
    setenv("SOURCE_STORAGE_CONTAINER", "", 1);
    assert_null(store_env(&c, "STORAGE_CONTAINER")); /* empty = unset */
    setenv("SOURCE_STORAGE_CONTAINER", "src", 1);
    assert_string_equal(store_env(&c, "STORAGE_CONTAINER"), "src");
    StoreConfig none = {0};
    assert_string_equal(store_env(&none, "STORAGE_CONTAINER"), "plain");
    assert_string_equal(store_env_prefix(&none), "");
    unsetenv("STORAGE_CONTAINER");
    unsetenv("SOURCE_STORAGE_CONTAINER");
}

static void test_local_container_from_prefixed_variable(void **st) {
    (void)st;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/secondary-local", g_dir);
    setenv("SECONDARY_STORAGE_CONTAINER", dir, 1);
    setenv("STORAGE_CONTAINER", "/nonexistent-primary", 1);
    StoreConfig c = {.provider = "Local", .env_prefix = "SECONDARY_"};
    Store *s = NULL;
    assert_int_equal(store_open(&c, &s), 0);
    char want[600];
    snprintf(want, sizeof want, "Local:%s", dir);
    assert_string_equal(store_describe(s), want);
    store_free(s);
    unsetenv("SECONDARY_STORAGE_CONTAINER");
    unsetenv("STORAGE_CONTAINER");
}

static void test_s3_credentials_by_prefix(void **st) {
    (void)st;
    const char *good =
        file_with("s3.json", "{\"region\":\"eu-west-1\",\"accessKeyID\":\"A\",\"secretAccessKey\":"
                             "\"S\"}");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_ROLE_ARN");
    unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
    setenv("AWS_APPLICATION_CREDENTIALS_JSON", good, 1);
    unsetenv("SOURCE_AWS_APPLICATION_CREDENTIALS_JSON");
    StoreConfig c = {.provider = "S3", .container = "bkt", .env_prefix = "SOURCE_"};
    StoreDriver *d = NULL;
    /* the unprefixed credentials file is the destination's, never the source's */
    assert_int_equal(store_s3_driver_new(&c, &d), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "SOURCE_AWS_APPLICATION_CREDENTIALS_JSON"));
    unsetenv("AWS_APPLICATION_CREDENTIALS_JSON");
    setenv("SOURCE_AWS_APPLICATION_CREDENTIALS_JSON", good, 1);
    assert_int_equal(store_s3_driver_new(&c, &d), 0);
    store_driver_free(d);
    unsetenv("SOURCE_AWS_APPLICATION_CREDENTIALS_JSON");
    /* the bucket from SOURCE_STORAGE_CONTAINER */
    setenv("SOURCE_AWS_APPLICATION_CREDENTIALS_JSON", good, 1);
    setenv("SOURCE_STORAGE_CONTAINER", "from-env", 1);
    c.container = "";
    assert_int_equal(store_s3_driver_new(&c, &d), 0);
    assert_string_equal(d->vt->describe(d), "S3:from-env");
    store_driver_free(d);
    unsetenv("SOURCE_STORAGE_CONTAINER");
    unsetenv("SOURCE_AWS_APPLICATION_CREDENTIALS_JSON");
    /* the SDK's variables: prefixed first, then (as the Go tool's SDK) unprefixed */
    c.container = "bkt";
    setenv("SOURCE_AWS_ACCESS_KEY_ID", "sa", 1);
    setenv("SOURCE_AWS_SECRET_ACCESS_KEY", "ss", 1);
    setenv("SOURCE_AWS_REGION", "r1", 1);
    assert_int_equal(store_s3_driver_new(&c, &d), 0);
    store_driver_free(d);
    unsetenv("SOURCE_AWS_ACCESS_KEY_ID");
    unsetenv("SOURCE_AWS_SECRET_ACCESS_KEY");
    unsetenv("SOURCE_AWS_REGION");
    assert_int_equal(store_s3_driver_new(&c, &d), ERR_INVALID);
    setenv("AWS_ACCESS_KEY_ID", "a", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
    setenv("AWS_REGION", "r", 1);
    assert_int_equal(store_s3_driver_new(&c, &d), 0);
    store_driver_free(d);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_REGION");
    /* ECS has no prefixed variants */
    setenv("ECS_ENDPOINT", "ecs.example:9021", 1);
    setenv("ECS_ACCESS_KEY_ID", "a", 1);
    setenv("ECS_SECRET_ACCESS_KEY", "s", 1);
    StoreConfig e = {.provider = "ECS", .container = "bkt", .env_prefix = "SECONDARY_"};
    assert_int_equal(store_s3_driver_new(&e, &d), 0);
    store_driver_free(d);
    unsetenv("ECS_ENDPOINT");
    unsetenv("ECS_ACCESS_KEY_ID");
    unsetenv("ECS_SECRET_ACCESS_KEY");
}

static void test_gcs_secondary_never_takes_the_primary_credentials(void **st) {
    (void)st;
    const char *key = file_with("gcs.json", "{\"type\":\"service_account\"}");
    setenv("GOOGLE_APPLICATION_CREDENTIALS", key, 1);
    unsetenv("SECONDARY_GOOGLE_APPLICATION_CREDENTIALS");
    StoreConfig c = {.provider = "GCS", .container = "bkt", .env_prefix = "SECONDARY_"};
    StoreDriver *d = NULL;
    /* without its own file the secondary asks the metadata server (a closed port here), never
     * the primary's file */
    setenv("GCE_METADATA_HOST", "127.0.0.1:1", 1);
    assert_int_not_equal(store_driver_open(&c, &d), 0);
    unsetenv("GCE_METADATA_HOST");
    assert_non_null(strstr(err_msg(), "SECONDARY_GOOGLE_APPLICATION_CREDENTIALS is not set"));
    assert_non_null(strstr(err_msg(), "http://127.0.0.1:1/computeMetadata/v1/"));
    /* the prefixed one is read: its (bad) file is what the error is about */
    setenv("SECONDARY_GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/secondary-key.json", 1);
    assert_int_not_equal(store_driver_open(&c, &d), 0);
    assert_non_null(strstr(err_msg(), "/nonexistent/secondary-key.json"));
    unsetenv("SECONDARY_GOOGLE_APPLICATION_CREDENTIALS");
    unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
}

static void test_oss_credentials_by_prefix(void **st) {
    (void)st;
    const char *creds =
        file_with("oss.json", "{\"storageEndpoint\":\"oss.example.com\",\"accessKeyID\":\"a\","
                              "\"accessKeySecret\":\"s\"}");
    setenv("ALICLOUD_APPLICATION_CREDENTIALS_JSON", creds, 1);
    StoreConfig c = {.provider = "OSS", .container = "bkt", .env_prefix = "SOURCE_"};
    StoreDriver *d = NULL;
    assert_int_equal(store_driver_open(&c, &d), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "SOURCE_ALICLOUD_APPLICATION_CREDENTIALS_JSON"));
    setenv("SOURCE_ALICLOUD_APPLICATION_CREDENTIALS_JSON", creds, 1);
    assert_int_equal(store_driver_open(&c, &d), 0);
    store_driver_free(d);
    unsetenv("SOURCE_ALICLOUD_APPLICATION_CREDENTIALS_JSON");
    unsetenv("ALICLOUD_APPLICATION_CREDENTIALS_JSON");
}

static void test_swift_environment_by_prefix(void **st) {
    (void)st;
    SwiftCreds c;
    setenv("OS_AUTH_URL", "https://keystone.example:5000", 1);
    unsetenv("SOURCE_OS_AUTH_URL");
    assert_int_equal(swift_creds_from_env("SOURCE_", &c), ERR_NOT_FOUND);
    assert_non_null(strstr(err_msg(), "SOURCE_OS_AUTH_URL"));
    setenv("SOURCE_OS_AUTH_URL", "https://src-keystone.example:5000", 1);
    setenv("SOURCE_OS_USERNAME", "bob", 1);
    setenv("SOURCE_OS_PASSWORD", "pw", 1);
    setenv("SOURCE_OS_PROJECT_NAME", "p", 1);
    setenv("SOURCE_OS_DOMAIN_NAME", "d", 1);
    setenv("OS_USERNAME", "alice", 1);
    assert_int_equal(swift_creds_from_env("SOURCE_", &c), 0);
    assert_string_equal(c.auth_url, "https://src-keystone.example:5000");
    assert_string_equal(c.username, "bob");
    swift_creds_clear(&c);
    static const char *const vars[] = {"OS_AUTH_URL",          "OS_USERNAME",
                                       "SOURCE_OS_AUTH_URL",   "SOURCE_OS_USERNAME",
                                       "SOURCE_OS_PASSWORD",   "SOURCE_OS_PROJECT_NAME",
                                       "SOURCE_OS_DOMAIN_NAME"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

int main(void) {
    log_setup(LOG_ERROR, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_env_reads_the_prefixed_variable_only),
        cmocka_unit_test(test_local_container_from_prefixed_variable),
        cmocka_unit_test(test_s3_credentials_by_prefix),
        cmocka_unit_test(test_gcs_secondary_never_takes_the_primary_credentials),
        cmocka_unit_test(test_oss_credentials_by_prefix),
        cmocka_unit_test(test_swift_environment_by_prefix),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
