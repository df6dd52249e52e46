/* test_swift: the pure parts of the Swift driver: credentials (JSON file, directory of files, the
 * OS_* environment, mixing refused), v1 vs Keystone v3 auth URLs, the Keystone request body, the
 * service catalog lookup by region, the JSON listing parser (segments hidden, marker, sizes) and
 * the segment layout (names, sizes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/fsutil.h"
#include "store/objhttp.h"
#include "store/store_swift.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(s, f);
    fclose(f);
}

static void test_credentials_json_directory_and_mixing(void **state) {
    (void)state;
    char dir[] = "/tmp/test_swift.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[512];
    snprintf(p, sizeof p, "%s/creds.json", dir);
    write_file(p, "{\"authURL\":\"http://ks:5000/v3\",\"username\":\"u\",\"password\":\"pw\","
                  "\"domainName\":\"d\",\"tenantName\":\"t\",\"region\":\"r\"}");
    SwiftCreds c;
    assert_int_equal(swift_creds_load(p, &c), 0);
    assert_string_equal(c.auth_url, "http://ks:5000/v3");
    assert_string_equal(c.password, "pw");
    assert_string_equal(c.tenant_name, "t");
    assert_string_equal(c.region, "r");
    swift_creds_clear(&c);
    /* the directory holds a *.json: that one is read */
    assert_int_equal(swift_creds_load(dir, &c), 0);
    assert_string_equal(c.username, "u");
    swift_creds_clear(&c);
    unlink(p);
    /* one file per field, verbatim (a trailing newline stays) */
    snprintf(p, sizeof p, "%s/authURL", dir);
    write_file(p, "http://127.0.0.1:8080/auth/v1.0");
    snprintf(p, sizeof p, "%s/username", dir);
    write_file(p, "test:tester");
    snprintf(p, sizeof p, "%s/password", dir);
    write_file(p, "testing\n");
    assert_int_equal(swift_creds_load(dir, &c), 0);
    assert_string_equal(c.username, "test:tester");
    assert_string_equal(c.password, "testing\n");
    assert_null(c.region);
    swift_creds_clear(&c);
    /* a password and an application credential: refused, the secret not in the message */
    snprintf(p, sizeof p, "%s/applicationCredentialSecret", dir);
    write_file(p, "topsecret");
    assert_int_equal(swift_creds_load(dir, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "not both"));
    assert_null(strstr(err_msg(), "topsecret"));
    /* application credential alone: needs an ID (or a name and a username) */
    snprintf(p, sizeof p, "%s/password", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/username", dir);
    unlink(p);
    assert_int_equal(swift_creds_load(dir, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "applicationCredentialID"));
    snprintf(p, sizeof p, "%s/applicationCredentialID", dir);
    write_file(p, "acid");
    assert_int_equal(swift_creds_load(dir, &c), 0);
    assert_string_equal(c.app_cred_id, "acid");
    swift_creds_clear(&c);
    assert_int_equal(swift_creds_load("/nonexistent/creds", &c), ERR_NOT_FOUND);
    assert_int_equal(fs_remove_tree(dir), 0);
}

static void test_credentials_from_environment(void **state) {
    (void)state;
    SwiftCreds c;
    unsetenv("OS_AUTH_URL");
    assert_int_equal(swift_creds_from_env("", &c), ERR_NOT_FOUND);
    setenv("OS_AUTH_URL", "https://keystone.example:5000", 1);
    setenv("OS_USERNAME", "alice", 1);
    setenv("OS_PASSWORD", "s3cret", 1);
    setenv("OS_TENANT_NAME", "old-tenant", 1);
    setenv("OS_PROJECT_NAME", "project", 1);
    setenv("OS_USER_DOMAIN_NAME", "udom", 1);
    setenv("OS_REGION_NAME", "RegionTwo", 1);
    assert_int_equal(swift_creds_from_env("", &c), 0);
    assert_string_equal(c.tenant_name, "project"); /* OS_PROJECT_NAME wins */
    assert_string_equal(c.domain_name, "udom");    /* OS_DOMAIN_NAME unset */
    assert_string_equal(c.region, "RegionTwo");
    swift_creds_clear(&c);
    setenv("OS_APPLICATION_CREDENTIAL_ID", "x", 1);
    setenv("OS_APPLICATION_CREDENTIAL_SECRET", "y", 1);
    assert_int_equal(swift_creds_from_env("", &c), ERR_INVALID);
    unsetenv("OS_PASSWORD");
    assert_int_equal(swift_creds_from_env("", &c), 0);
    swift_creds_clear(&c);
    static const char *const vars[] = {"OS_AUTH_URL",         "OS_USERNAME",
                                       "OS_TENANT_NAME",      "OS_PROJECT_NAME",
                                       "OS_REGION_NAME",      "OS_APPLICATION_CREDENTIAL_ID",
                                       "OS_USER_DOMAIN_NAME", "OS_APPLICATION_CREDENTIAL_SECRET"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static void test_auth_url_kinds_and_keystone_body(void **state) {
    (void)state;
    assert_true(swift_auth_is_v1("http://127.0.0.1:8080/auth/v1.0"));
    assert_true(swift_auth_is_v1("http://127.0.0.1:8080/auth/v1.0/"));
    assert_true(swift_auth_is_v1("https://h/auth/v1"));
    assert_false(swift_auth_is_v1("https://keystone:5000/v3"));
    assert_false(swift_auth_is_v1("https://keystone:5000/"));
    char *u = swift_keystone_tokens_url("https://keystone:5000/v3/");
    assert_string_equal(u, "https://keystone:5000/v3/auth/tokens");
    free(u);
    u = swift_keystone_tokens_url("https://keystone:5000");
    assert_string_equal(u, "https://keystone:5000/v3/auth/tokens");
    free(u);

    SwiftCreds c = {0};
    c.username = "alice";
    c.password = "pw";
    c.domain_name = "dom";
    c.tenant_name = "proj";
    char *body = swift_keystone_body(&c);
    json_t *j = json_loads(body, 0, NULL);
    assert_non_null(j);
    json_t *id = json_object_get(json_object_get(j, "auth"), "identity");
    assert_string_equal(json_string_value(json_array_get(json_object_get(id, "methods"), 0)),
                        "password");
    json_t *user = json_object_get(json_object_get(id, "password"), "user");
    assert_string_equal(json_string_value(json_object_get(user, "name")), "alice");
    assert_string_equal(json_string_value(json_object_get(user, "password")), "pw");
    assert_string_equal(json_string_value(json_object_get(json_object_get(user, "domain"), "name")),
                        "dom");
    json_t *proj = json_object_get(json_object_get(json_object_get(j, "auth"), "scope"), "project");
    assert_string_equal(json_string_value(json_object_get(proj, "name")), "proj");
    json_decref(j);
    objhttp_free_secret(body);

    SwiftCreds a = {0};
    a.app_cred_id = "acid";
    a.app_cred_secret = "acsecret";
    body = swift_keystone_body(&a);
    j = json_loads(body, 0, NULL);
    id = json_object_get(json_object_get(j, "auth"), "identity");
    json_t *ac = json_object_get(id, "application_credential");
    assert_string_equal(json_string_value(json_object_get(ac, "id")), "acid");
    assert_string_equal(json_string_value(json_object_get(ac, "secret")), "acsecret");
    assert_null(json_object_get(json_object_get(j, "auth"), "scope")); /* no scope allowed */
    json_decref(j);
    objhttp_free_secret(body);
}

static const char catalog[] =
    "{\"token\":{\"catalog\":["
    "{\"type\":\"identity\",\"endpoints\":[{\"interface\":\"public\",\"region\":\"RegionOne\","
    "\"url\":\"http://ks/v3\"}]},"
    "{\"type\":\"object-store\",\"name\":\"swift\",\"endpoints\":["
    "{\"interface\":\"internal\",\"region\":\"RegionOne\",\"url\":\"http://internal/v1/AUTH_p\"},"
    "{\"interface\":\"public\",\"region\":\"RegionTwo\",\"region_id\":\"RegionTwo\","
    "\"url\":\"http://two/v1/AUTH_p\"},"
    "{\"interface\":\"public\",\"region_id\":\"RegionOne\",\"url\":\"http://one/v1/AUTH_p/\"}"
    "]}]}}";

static void test_catalog_lookup_by_region(void **state) {
    (void)state;
    char *url = NULL;
    assert_int_equal(swift_catalog_lookup(catalog, strlen(catalog), "RegionOne", &url), 0);
    assert_string_equal(url, "http://one/v1/AUTH_p"); /* by region_id, trailing '/' dropped */
    free(url);
    assert_int_equal(swift_catalog_lookup(catalog, strlen(catalog), "RegionTwo", &url), 0);
    assert_string_equal(url, "http://two/v1/AUTH_p");
    free(url);
    assert_int_equal(swift_catalog_lookup(catalog, strlen(catalog), NULL, &url), 0);
    assert_string_equal(url, "http://two/v1/AUTH_p"); /* the first public one */
    free(url);
    assert_int_equal(swift_catalog_lookup(catalog, strlen(catalog), "Nowhere", &url),
                     ERR_NOT_FOUND);
    assert_null(url);
    assert_non_null(strstr(err_msg(), "RegionTwo"));
    const char *bad = "{\"token\":{}}";
    assert_int_equal(swift_catalog_lookup(bad, strlen(bad), NULL, &url), ERR_CORRUPT);
    assert_int_equal(swift_catalog_lookup("[", 1, NULL, &url), ERR_CORRUPT);
}

typedef struct {
    char keys[8][128];
    int64_t sizes[8];
    int n;
} Got;

static int got_cb(void *ctx, const char *key, int64_t size) {
    Got *g = ctx;
    if (g->n < 8) {
        snprintf(g->keys[g->n], sizeof g->keys[0], "%s", key);
        g->sizes[g->n] = size;
    }
    g->n++;
    return 0;
}

static void test_list_hides_segments_and_gives_the_marker(void **state) {
    (void)state;
    const char *page = "[{\"name\":\"p/v2/Full-1\",\"bytes\":0,\"hash\":\"x\"},"
                       "{\"name\":\"p/v2/Full-1.final\",\"bytes\":10},"
                       "{\"name\":\"p/v2/Full-1/0000000001\",\"bytes\":5242880},"
                       "{\"name\":\"p/v2/Full-1/0000000002\",\"bytes\":7},"
                       "{\"name\":\"p/v2/Full-1/000000003\",\"bytes\":3},"
                       "{\"subdir\":\"p/v2/x/\"},"
                       "{\"name\":\"p/v2/caf\\u00e9/0000000009\",\"bytes\":1}]";
    Got g = {0};
    size_t n = 0;
    char *last = NULL;
    assert_int_equal(swift_parse_list(page, strlen(page), 0, got_cb, &g, &n, &last), 0);
    assert_int_equal(n, 7);
    assert_string_equal(last, "p/v2/caf\xc3\xa9/0000000009"); /* segments count for the marker */
    free(last);
    assert_int_equal(g.n, 3);
    assert_string_equal(g.keys[0], "p/v2/Full-1");
    assert_int_equal(g.sizes[0], -1); /* zero bytes: may be a manifest */
    assert_string_equal(g.keys[1], "p/v2/Full-1.final");
    assert_int_equal(g.sizes[1], 10);
    assert_string_equal(g.keys[2], "p/v2/Full-1/000000003"); /* 9 digits: not a segment */
    memset(&g, 0, sizeof g);
    assert_int_equal(swift_parse_list(page, strlen(page), 1, got_cb, &g, &n, &last), 0);
    free(last);
    assert_int_equal(g.n, 3);
    assert_string_equal(g.keys[0], "p/v2/Full-1/0000000001");
    assert_int_equal(g.sizes[0], 5242880);
    /* the last page */
    memset(&g, 0, sizeof g);
    assert_int_equal(swift_parse_list("[]", 2, 0, got_cb, &g, &n, &last), 0);
    assert_int_equal(n, 0);
    assert_null(last);
    /* malformed documents */
    assert_int_equal(swift_parse_list("{}", 2, 0, got_cb, &g, &n, &last), ERR_CORRUPT);
    const char *noname = "[{\"bytes\":1}]";
    assert_int_equal(swift_parse_list(noname, strlen(noname), 0, got_cb, &g, &n, &last),
                     ERR_CORRUPT);
    const char *nul = "[{\"name\":\"a\\u0000b\",\"bytes\":1}]";
    assert_int_equal(swift_parse_list(nul, strlen(nul), 0, got_cb, &g, &n, &last), ERR_CORRUPT);
    assert_null(last);
}

static void test_segment_names_and_sizes(void **state) {
    (void)state;
    assert_true(swift_is_segment("a/0000000001"));
    assert_true(swift_is_segment("etcd/v2/Full-00000000-00000009-1700000000.gz/0000000999"));
    assert_false(swift_is_segment("0000000001"));
    assert_false(swift_is_segment("a/000000001"));
    assert_false(swift_is_segment("a/00000000012"));
    assert_false(swift_is_segment("a/00000000x1"));
    const int64_t M5 = 5 << 20;
    assert_int_equal(swift_segment_size(0, 1), M5);
    assert_int_equal(swift_segment_size(M5, 333), M5);
    assert_int_equal(swift_segment_size(M5, 334), 2 * M5);
    assert_int_equal(swift_segment_size(M5, 667), 4 * M5);
    assert_int_equal(swift_segment_size(M5, 999), 4 * M5);
    assert_int_equal(swift_segment_size(M5, 1000), 8 * M5);
    /* 999 segments hold 2331 x min_chunk */
    int64_t total = 0;
    for (int i = 1; i <= 999; i++)
        total += swift_segment_size(M5, i);
    assert_int_equal(total, 2331 * M5);
    /* never above Swift's 5 GiB object limit */
    assert_true(swift_segment_size((int64_t)3 << 30, 100000) <= (int64_t)5 << 30);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credentials_json_directory_and_mixing),
        cmocka_unit_test(test_credentials_from_environment),
        cmocka_unit_test(test_auth_url_kinds_and_keystone_body),
        cmocka_unit_test(test_catalog_lookup_by_region),
        cmocka_unit_test(test_list_hides_segments_and_gives_the_marker),
        cmocka_unit_test(test_segment_names_and_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
