/* test_k8s_lease: the Lease JSON (parse, merge patch, MicroTime), the update decisions of the
 * snapshot Leases (docs/go-tool.md §10.6), the Status message, and the in-cluster configuration
 * checks of k8s_client_new (no network). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/err.h"
#include "k8s/k8s_client.h"
#include "k8s/lease.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char lease_json[] =
    "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":"
    "\"full-snapshot-revisions\",\"namespace\":\"shoot--a\",\"resourceVersion\":\"4711\","
    "\"annotations\":{\"x\":\"y\"}},\"spec\":{\"holderIdentity\":\"1234\",\"renewTime\":"
    "\"2026-12-02T03:17:29.000000Z\",\"leaseDurationSeconds\":30}}";

static void test_lease_parse_reads_version_holder_and_renew_time(void **state) {
    (void)state;
    K8sLease l;
    assert_int_equal(k8s_lease_parse(lease_json, strlen(lease_json), &l), 0);
    assert_string_equal(l.name, "full-snapshot-revisions");
    assert_string_equal(l.resource_version, "4711");
    assert_true(l.has_holder);
    assert_string_equal(l.holder, "1234");
    assert_string_equal(l.renew_time, "2026-12-02T03:17:29.000000Z");
}

static void test_lease_parse_null_or_absent_holder_is_unset(void **state) {
    (void)state;
    const char *docs[] = {
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"}}",
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{}}",
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{\"holderIdentity\":"
        "null,\"renewTime\":null}}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        K8sLease l;
        assert_int_equal(k8s_lease_parse(docs[i], strlen(docs[i]), &l), 0);
        assert_false(l.has_holder);
        assert_string_equal(l.renew_time, "");
    }
}

static void test_lease_parse_rejects_what_is_not_a_lease(void **state) {
    (void)state;
    const char *bad[] = {
        "",
        "[]",
        "{\"kind\":\"Status\",\"message\":\"x\"}",
        "{\"kind\":\"Lease\"}",
        "{\"kind\":\"Lease\",\"metadata\":{}}",
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":7}}",
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"\"}}",
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":[]}",
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{\"holderIdentity\":"
        "5}}",
        "{\"kind\":\"Lease\",\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"}}",
        "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{\"holderIdentity\":"
        "\"a\\u0000b\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        K8sLease l;
        assert_int_equal(k8s_lease_parse(bad[i], strlen(bad[i]), &l), ERR_CORRUPT);
        assert_true(strlen(err_msg()) > 0);
    }
    /* a holderIdentity longer than the buffer is refused, not truncated */
    char big[600];
    int n = snprintf(big, sizeof big,
                     "{\"kind\":\"Lease\",\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{"
                     "\"holderIdentity\":\"%0300d\"}}",
                     1);
    K8sLease l;
    assert_int_equal(k8s_lease_parse(big, (size_t)n, &l), ERR_CORRUPT);
}

static void test_revision_parse_is_strict_decimal(void **state) {
    (void)state;
    int64_t r = -1;
    assert_int_equal(k8s_lease_parse_revision("0", &r), 0);
    assert_int_equal(r, 0);
    assert_int_equal(k8s_lease_parse_revision("9223372036854775807", &r), 0);
    assert_int_equal(r, INT64_MAX);
    const char *bad[] = {
        "", "-1", "+1", " 1", "1 ", "1a", "9223372036854775808", "99999999999999999999", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(k8s_lease_parse_revision(bad[i], &r), ERR_CORRUPT);
}

static void test_micro_time_is_rfc3339_with_microseconds_utc(void **state) {
    (void)state;
    char t[32];
    k8s_micro_time(0, t);
    assert_string_equal(t, "1970-01-01T00:00:00.000000Z");
    k8s_micro_time(1796181449000000LL + 42, t);
    assert_string_equal(t, "2026-12-02T03:17:29.000042Z");
    k8s_micro_time(1796181449999999LL, t);
    assert_string_equal(t, "2026-12-02T03:17:29.999999Z");
}

static void test_patch_carries_resource_version_holder_time_and_annotation(void **state) {
    (void)state;
    char *p = k8s_lease_patch_json("4711", "12", "2026-12-02T03:17:29.000000Z", NULL, NULL);
    assert_non_null(p);
    assert_string_equal(p, "{\"metadata\":{\"resourceVersion\":\"4711\"},\"spec\":{"
                           "\"holderIdentity\":\"12\",\"renewTime\":\"2026-12-02T03:17:29."
                           "000000Z\"}}");
    free(p);
    p = k8s_lease_patch_json("1", NULL, "T", NULL, NULL);
    assert_string_equal(p, "{\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{\"renewTime\":"
                           "\"T\"}}");
    free(p);
    /* odd characters are escaped, the result is valid JSON */
    p = k8s_lease_patch_json("9", "a:b:\"Leader\"\n", "T", K8S_LEASE_TLS_ANNOTATION, "true");
    json_t *j = json_loads(p, 0, NULL);
    assert_non_null(j);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "spec"), "holderIdentity")),
        "a:b:\"Leader\"\n");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(j, "metadata"), "annotations"),
                            "member.etcd.gardener.cloud/tls-enabled")),
                        "true");
    json_decref(j);
    free(p);
}

static K8sLease with_holder(const char *h) {
    K8sLease l;
    memset(&l, 0, sizeof l);
    snprintf(l.name, sizeof l.name, "x");
    snprintf(l.resource_version, sizeof l.resource_version, "1");
    if (h) {
        l.has_holder = 1;
        snprintf(l.holder, sizeof l.holder, "%s", h);
    }
    return l;
}

static void test_full_lease_never_lowers_the_revision(void **state) {
    (void)state;
    char h[32];
    int skip;
    K8sLease l = with_holder(NULL);
    assert_int_equal(k8s_lease_decide(&l, 1, 10, &skip, h, sizeof h), 0);
    assert_false(skip);
    assert_string_equal(h, "10");
    l = with_holder("5");
    assert_int_equal(k8s_lease_decide(&l, 1, 10, &skip, h, sizeof h), 0);
    assert_false(skip);
    assert_string_equal(h, "10");
    l = with_holder("10"); /* same revision: renewTime only */
    assert_int_equal(k8s_lease_decide(&l, 1, 10, &skip, h, sizeof h), 0);
    assert_false(skip);
    assert_string_equal(h, "");
    l = with_holder("11"); /* higher: left alone, renewTime too */
    assert_int_equal(k8s_lease_decide(&l, 1, 10, &skip, h, sizeof h), 0);
    assert_true(skip);
    l = with_holder("etcd-main-0"); /* not ours: error, not overwritten */
    assert_int_equal(k8s_lease_decide(&l, 1, 10, &skip, h, sizeof h), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "not a revision"));
}

static void test_delta_lease_follows_last_delta_and_zero_when_none(void **state) {
    (void)state;
    char h[32];
    int skip;
    K8sLease l = with_holder(NULL);
    assert_int_equal(k8s_lease_decide(&l, 0, -1, &skip, h, sizeof h), 0);
    assert_string_equal(h, "0"); /* no delta yet, unset: "0" */
    l = with_holder("7");
    assert_int_equal(k8s_lease_decide(&l, 0, -1, &skip, h, sizeof h), 0);
    assert_string_equal(h, ""); /* no delta: renewTime only */
    assert_int_equal(k8s_lease_decide(&l, 0, 9, &skip, h, sizeof h), 0);
    assert_string_equal(h, "9");
    l = with_holder("12"); /* higher: kept, but the delta Lease is still renewed */
    assert_int_equal(k8s_lease_decide(&l, 0, 9, &skip, h, sizeof h), 0);
    assert_false(skip);
    assert_string_equal(h, "");
    l = with_holder("0"); /* "0" (no delta before): the first delta's revision */
    assert_int_equal(k8s_lease_decide(&l, 0, 9, &skip, h, sizeof h), 0);
    assert_string_equal(h, "9");
    /* a holder that is not a revision: kept and renewed while there is no delta (the Go tool
     * reads it only to compare it with a delta's revision); an error once there is one */
    const char *foreign[] = {"etcd-main-0", ""};
    for (size_t i = 0; i < 2; i++) {
        l = with_holder(foreign[i]);
        assert_int_equal(k8s_lease_decide(&l, 0, -1, &skip, h, sizeof h), 0);
        assert_false(skip);
        assert_string_equal(h, "");
        assert_int_equal(k8s_lease_decide(&l, 0, 9, &skip, h, sizeof h), ERR_CORRUPT);
    }
}

static void test_status_message_is_read_only_from_status_objects(void **state) {
    (void)state;
    char m[64];
    const char *st =
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"leases.coordination."
        "k8s.io \\\"x\\\" is forbidden\\n\",\"code\":403}";
    k8s_status_message(st, strlen(st), m, sizeof m);
    assert_string_equal(m, "leases.coordination.k8s.io \"x\" is forbidden ");
    k8s_status_message(lease_json, strlen(lease_json), m, sizeof m);
    assert_string_equal(m, "");
    k8s_status_message("<html>", 6, m, sizeof m);
    assert_string_equal(m, "");
    char small[8];
    k8s_status_message(st, strlen(st), small, sizeof small);
    assert_string_equal(small, "leases.");
}

/* ---------- k8s_client_new: configuration checks ---------- */

static char sa_dir[256];

static void write_file(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup_sa(void **state) {
    (void)state;
    snprintf(sa_dir, sizeof sa_dir, "%s/k8s-sa.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(sa_dir)) return -1;
    write_file(sa_dir, "ca.crt", "not checked before a request\n");
    write_file(sa_dir, "token", "secret-token\n");
    write_file(sa_dir, "namespace", "  from-file\n");
    unsetenv("POD_NAMESPACE");
    unsetenv("ETCDBR_K8S_SERVICE_ACCOUNT_DIR");
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    return 0;
}

static int teardown_sa(void **state) {
    (void)state;
    const char *f[] = {"ca.crt", "token", "namespace"};
    for (size_t i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", sa_dir, f[i]);
        unlink(p);
    }
    rmdir(sa_dir);
    return 0;
}

static void test_client_namespace_from_env_else_file(void **state) {
    (void)state;
    K8sClient *c = NULL;
    K8sClientConfig cfg = {.sa_dir = sa_dir};
    assert_int_equal(k8s_client_new(&cfg, &c), 0);
    assert_string_equal(k8s_client_namespace(c), "from-file");
    char *path = k8s_lease_path(c, "full-snapshot-revisions");
    assert_string_equal(path, "/apis/coordination.k8s.io/v1/namespaces/from-file/leases/"
                              "full-snapshot-revisions");
    free(path);
    assert_null(k8s_lease_path(c, "Bad_Name"));
    assert_null(k8s_lease_path(c, "-x"));
    assert_null(k8s_lease_path(c, "a/b"));
    k8s_client_free(c);
    setenv("POD_NAMESPACE", "shoot--x", 1);
    setenv("ETCDBR_K8S_SERVICE_ACCOUNT_DIR", sa_dir, 1);
    assert_int_equal(k8s_client_new(NULL, &c), 0);
    assert_string_equal(k8s_client_namespace(c), "shoot--x");
    k8s_client_free(c);
    setenv("POD_NAMESPACE", "../etc", 1);
    assert_int_equal(k8s_client_new(NULL, &c), ERR_INVALID);
    assert_null(c);
    unsetenv("POD_NAMESPACE");
    unsetenv("ETCDBR_K8S_SERVICE_ACCOUNT_DIR");
}

static void test_client_outside_a_cluster_says_what_is_missing(void **state) {
    (void)state;
    K8sClient *c = NULL;
    K8sClientConfig cfg = {.sa_dir = sa_dir};
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(k8s_client_new(&cfg, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "KUBERNETES_SERVICE_HOST"));
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    K8sClientConfig nodir = {.sa_dir = "/nonexistent/sa"};
    assert_int_equal(k8s_client_new(&nodir, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "/nonexistent/sa/ca.crt"));
    assert_null(c);
    /* the token never appears in a message */
    assert_null(strstr(err_msg(), "secret-token"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_parse_reads_version_holder_and_renew_time),
        cmocka_unit_test(test_lease_parse_null_or_absent_holder_is_unset),
        cmocka_unit_test(test_lease_parse_rejects_what_is_not_a_lease),
        cmocka_unit_test(test_revision_parse_is_strict_decimal),
        cmocka_unit_test(test_micro_time_is_rfc3339_with_microseconds_utc),
        cmocka_unit_test(test_patch_carries_resource_version_holder_time_and_annotation),
        cmocka_unit_test(test_full_lease_never_lowers_the_revision),
        cmocka_unit_test(test_delta_lease_follows_last_delta_and_zero_when_none),
        cmocka_unit_test(test_status_message_is_read_only_from_status_objects),
        cmocka_unit_test_setup_teardown(test_client_namespace_from_env_else_file, setup_sa,
                                        teardown_sa),
        cmocka_unit_test_setup_teardown(test_client_outside_a_cluster_says_what_is_missing,
                                        setup_sa, teardown_sa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
