/* test_oss: the pure parts of the Alibaba OSS driver. Signature V1 against the vectors Alibaba
 * publishes in its Go SDK's signer tests (github.com/aliyun/aliyun-oss-go-sdk, oss/signer/
 * signer_test.go: AccessKey "ak"/"sk", string-to-sign and Authorization given there; each
 * signature re-derived with `openssl dgst -sha1 -hmac sk -binary | base64`), and for the
 * multipart sub-resources vectors derived once with the same openssl command (Alibaba's
 * documentation shows no worked example with a known secret). Also: header canonicalization,
 * ListObjects XML parsing (entities, encoding-type=url, paging, malformed pages), the
 * InitiateMultipartUpload and error documents, IP endpoints, credentials files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "store/store_oss.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void check_sig(const char *secret, const char *sts, const char *want) {
    char sig[64];
    assert_int_equal(oss_sign(secret, sts, sig, sizeof sig), 0);
    assert_string_equal(sig, want);
}

static void test_sdk_vectors_put_object_and_acl(void **state) {
    (void)state;
    const char *h[] = {"Content-MD5: eB5eJF1ptWaXm4bijSPyxw==",
                       "Content-Type: text/html",
                       "x-oss-meta-author: alice",
                       "x-oss-meta-magic: abracadabra",
                       "x-oss-date: Wed, 28 Dec 2022 10:27:41 GMT",
                       "Date: Wed, 28 Dec 2022 10:27:41 GMT"};
    char *sts = oss_string_to_sign("PUT", h, 6, "examplebucket", "nelson", NULL, NULL, 0);
    assert_non_null(sts);
    assert_string_equal(sts, "PUT\neB5eJF1ptWaXm4bijSPyxw==\ntext/html\n"
                             "Wed, 28 Dec 2022 10:27:41 GMT\n"
                             "x-oss-date:Wed, 28 Dec 2022 10:27:41 GMT\n"
                             "x-oss-meta-author:alice\nx-oss-meta-magic:abracadabra\n"
                             "/examplebucket/nelson");
    check_sig("sk", sts, "kSHKmLxlyEAKtZPkJhG9bZb5k7M=");
    free(sts);
    const char *acl[] = {"acl"};
    sts = oss_string_to_sign("PUT", h, 6, "examplebucket", "nelson", acl, NULL, 1);
    assert_non_null(strstr(sts, "\n/examplebucket/nelson?acl"));
    check_sig("sk", sts, "/afkugFbmWDQ967j1vr6zygBLQk=");
    free(sts);
    /* the bucket itself: "/bucket/", a bare sub-resource name */
    const char *g[] = {"x-oss-date: Wed, 28 Dec 2022 10:27:41 GMT",
                       "Date: Wed, 28 Dec 2022 10:27:41 GMT"};
    const char *rg[] = {"resourceGroup"};
    sts = oss_string_to_sign("GET", g, 2, "examplebucket", NULL, rg, NULL, 1);
    assert_string_equal(sts,
                        "GET\n\n\nWed, 28 Dec 2022 10:27:41 GMT\n"
                        "x-oss-date:Wed, 28 Dec 2022 10:27:41 GMT\n/examplebucket/?resourceGroup");
    check_sig("sk", sts, "vkQmfuUDyi1uDi3bKt67oemssIs=");
    free(sts);
}

static void test_multipart_subresources_are_sorted_and_raw(void **state) {
    (void)state;
    /* partNumber before uploadId whatever the call's order; values raw (not percent-encoded) */
    const char *h[] = {
        "content-type: application/octet-stream", "Accept: */*",
        "content-md5:   1B2M2Y8AsgTpgAmY7PhCfg==  ", "Date: Tue, 01 Dec 2026 18:00:00 GMT"};
    const char *sn[] = {"uploadId", "partNumber"};
    const char *sv[] = {"0004B9894A22E5B1888A1E29F823ABCD", "3"};
    char *sts = oss_string_to_sign("PUT", h, 4, "etcdbr-b",
                                   "etcd/v2/Full-00000000-00000010-1700000000.gz", sn, sv, 2);
    assert_string_equal(sts, "PUT\n1B2M2Y8AsgTpgAmY7PhCfg==\napplication/octet-stream\n"
                             "Tue, 01 Dec 2026 18:00:00 GMT\n"
                             "/etcdbr-b/etcd/v2/Full-00000000-00000010-1700000000.gz"
                             "?partNumber=3&uploadId=0004B9894A22E5B1888A1E29F823ABCD");
    check_sig("fakeSecret+/0123", sts, "WbzdRMCz6R0z8DuQB2Dx7POPXkg=");
    free(sts);
    /* x-oss-* names lower-cased, values trimmed; the key raw, odd bytes and all; "?uploads" bare
     * even when given an empty value */
    const char *h2[] = {"Content-Type: application/octet-stream", "X-OSS-Forbid-Overwrite:  true ",
                        "Date: Tue, 01 Dec 2026 18:00:00 GMT", "x-amz-ignored: 1"};
    const char *un[] = {"uploads"};
    const char *uv[] = {""};
    sts = oss_string_to_sign("POST", h2, 4, "etcdbr-b", "odd/with space \xc3\xbc&", un, uv, 1);
    assert_string_equal(sts,
                        "POST\n\napplication/octet-stream\nTue, 01 Dec 2026 18:00:00 GMT\n"
                        "x-oss-forbid-overwrite:true\n/etcdbr-b/odd/with space \xc3\xbc&?uploads");
    check_sig("fakeSecret+/0123", sts, "9IuUmVGt5ll8pfAjAvsOHCvDv4o=");
    free(sts);
}

typedef struct {
    char keys[8][128];
    int64_t sizes[8];
    int n;
    int stop_at;
} Got;

static int got_cb(void *ctx, const char *key, int64_t size) {
    Got *g = ctx;
    if (g->n == g->stop_at) return 42;
    assert_true(g->n < 8);
    snprintf(g->keys[g->n], sizeof g->keys[0], "%s", key);
    g->sizes[g->n++] = size;
    return 0;
}

static void test_list_xml_entities_url_encoding_and_paging(void **state) {
    (void)state;
    const char page1[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult><Name>b</Name>"
        "<Prefix>p%2F</Prefix><Marker></Marker><MaxKeys>2</MaxKeys><Delimiter></Delimiter>"
        "<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
        "<NextMarker>p%2Fa%2Bb%20c</NextMarker>"
        "<Contents><Key>p%2F%C3%BC%26x</Key><LastModified>2026-12-01T18:00:00.000Z</LastModified>"
        "<ETag>&quot;5B3C&quot;</ETag><Type>Normal</Type><Size>344606</Size></Contents>"
        "<Contents><Key>p%2Fa%2Bb+c</Key><Size>0</Size></Contents></ListBucketResult>";
    Got g = {.stop_at = -1};
    int truncated = 0;
    char *next = NULL;
    assert_int_equal(oss_parse_list(page1, sizeof page1 - 1, got_cb, &g, &truncated, &next), 0);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.keys[0], "p/\xc3\xbc&x");
    assert_int_equal(g.sizes[0], 344606);
    assert_string_equal(g.keys[1], "p/a+b c"); /* %2B is '+', '+' a space (QueryUnescape) */
    assert_int_equal(g.sizes[1], 0);
    assert_true(truncated);
    assert_string_equal(next, "p/a+b c");
    free(next);
    /* without encoding-type: entities only; the last page has no NextMarker */
    const char page2[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
                         "<Contents><Key>a &amp; b &lt;&#233;&#x4E2D;&gt; 100%</Key></Contents>"
                         "</ListBucketResult>";
    memset(&g, 0, sizeof g);
    g.stop_at = -1;
    assert_int_equal(oss_parse_list(page2, sizeof page2 - 1, got_cb, &g, &truncated, &next), 0);
    assert_int_equal(g.n, 1);
    assert_string_equal(g.keys[0], "a & b <\xc3\xa9\xe4\xb8\xad> 100%");
    assert_int_equal(g.sizes[0], -1);
    assert_false(truncated);
    assert_null(next);
    /* the callback's nonzero stops the parse and is returned */
    memset(&g, 0, sizeof g);
    g.stop_at = 1;
    assert_int_equal(oss_parse_list(page1, sizeof page1 - 1, got_cb, &g, &truncated, &next), 42);
    free(next);
}

static void test_list_xml_rejects_malformed_pages(void **state) {
    (void)state;
    static const char *const bad[] = {
        "<Error><Code>AccessDenied</Code></Error>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
        "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a&bogus;</Key></Contents></ListBucketResult>",
        "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%zz</Key></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%2</Key></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><Contents><Key>a&#0;</Key></Contents></ListBucketResult>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Got g = {.stop_at = -1};
        int truncated;
        char *next = NULL;
        int rc = oss_parse_list(bad[i], strlen(bad[i]), got_cb, &g, &truncated, &next);
        if (rc != ERR_CORRUPT) fail_msg("page %zu: %s, not ERR_CORRUPT", i, err_name(rc));
        free(next);
    }
}

static void test_initiate_and_error_documents(void **state) {
    (void)state;
    const char init[] = "<?xml version=\"1.0\"?><InitiateMultipartUploadResult><Bucket>b</Bucket>"
                        "<Key>k</Key><UploadId>0004B9894A22E5B1888A1E29F823ABCD</UploadId>"
                        "</InitiateMultipartUploadResult>";
    char *id = NULL;
    assert_int_equal(oss_parse_upload_id(init, sizeof init - 1, &id), 0);
    assert_string_equal(id, "0004B9894A22E5B1888A1E29F823ABCD");
    free(id);
    const char noid[] = "<InitiateMultipartUploadResult><UploadId></UploadId>"
                        "</InitiateMultipartUploadResult>";
    assert_int_equal(oss_parse_upload_id(noid, sizeof noid - 1, &id), ERR_CORRUPT);
    assert_int_equal(oss_parse_upload_id("<Error/>", 8, &id), ERR_CORRUPT);
    const char err[] = "<?xml version=\"1.0\"?>\n<Error>\n  <Code>SignatureDoesNotMatch</Code>\n"
                       "  <Message>x</Message></Error>";
    char code[32];
    assert_string_equal(oss_parse_error_code(err, sizeof err - 1, code, sizeof code),
                        "SignatureDoesNotMatch");
    assert_string_equal(oss_parse_error_code("", 0, code, sizeof code), "");
    assert_string_equal(oss_parse_error_code(NULL, 0, code, sizeof code), "");
    char small[5];
    assert_string_equal(oss_parse_error_code(err, sizeof err - 1, small, sizeof small), "Sign");
}

static void test_ip_hosts_are_path_style(void **state) {
    (void)state;
    assert_true(oss_host_is_ip("127.0.0.1", 9));
    assert_true(oss_host_is_ip("[::1]", 5));
    assert_true(oss_host_is_ip("10.1.2.3:8080", 8));
    assert_false(oss_host_is_ip("oss-cn-hangzhou.aliyuncs.com", 28));
    assert_false(oss_host_is_ip("localhost", 9));
    assert_false(oss_host_is_ip("[::1", 4));
    assert_false(oss_host_is_ip("", 0));
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_credentials_json_directory_and_missing_fields(void **state) {
    (void)state;
    char dir[] = "/tmp/test_oss.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[512], q[512];
    OssCreds c;
    /* JSON file; bucketName and unknown fields ignored */
    snprintf(p, sizeof p, "%s/creds.json", dir);
    put(p, "{\"storageEndpoint\":\"oss-cn-hangzhou.aliyuncs.com\",\"accessKeyID\":\"LTAIx\","
           "\"accessKeySecret\":\"s3cr3t\",\"bucketName\":\"ignored\",\"other\":1}");
    assert_int_equal(oss_creds_load(p, &c), 0);
    assert_string_equal(c.endpoint, "oss-cn-hangzhou.aliyuncs.com");
    assert_string_equal(c.access_key, "LTAIx");
    assert_string_equal(c.secret, "s3cr3t");
    oss_creds_clear(&c);
    assert_null(c.secret);
    /* a missing field is named, its neighbours' values are not shown */
    put(p, "{\"storageEndpoint\":\"e\",\"accessKeySecret\":\"s3cr3t\"}");
    assert_int_equal(oss_creds_load(p, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "accessKeyID"));
    assert_null(strstr(err_msg(), "s3cr3t"));
    put(p, "{\"storageEndpoint\":\"e\",\"accessKeyID\":7,\"accessKeySecret\":\"s\"}");
    assert_int_equal(oss_creds_load(p, &c), ERR_INVALID);
    assert_int_equal(oss_creds_load("/nonexistent/oss.json", &c), ERR_NOT_FOUND);
    unlink(p);
    /* a directory, one file per field: keys verbatim (a newline stays), the endpoint trimmed */
    snprintf(q, sizeof q, "%s/storageEndpoint", dir);
    put(q, "  http://127.0.0.1:9000\n");
    snprintf(q, sizeof q, "%s/accessKeyID", dir);
    put(q, "LTAIdir");
    snprintf(q, sizeof q, "%s/accessKeySecret", dir);
    put(q, "sec\n");
    assert_int_equal(oss_creds_load(dir, &c), 0);
    assert_string_equal(c.endpoint, "http://127.0.0.1:9000");
    assert_string_equal(c.access_key, "LTAIdir");
    assert_string_equal(c.secret, "sec\n");
    oss_creds_clear(&c);
    /* a *.json file in the directory wins */
    snprintf(p, sizeof p, "%s/x.json", dir);
    put(p, "{\"storageEndpoint\":\"j\",\"accessKeyID\":\"J\",\"accessKeySecret\":\"JS\"}");
    assert_int_equal(oss_creds_load(dir, &c), 0);
    assert_string_equal(c.access_key, "J");
    oss_creds_clear(&c);
    unlink(p);
    unlink(q);
    assert_int_equal(oss_creds_load(dir, &c), ERR_INVALID); /* accessKeySecret now missing */
    snprintf(q, sizeof q, "%s/storageEndpoint", dir);
    unlink(q);
    snprintf(q, sizeof q, "%s/accessKeyID", dir);
    unlink(q);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sdk_vectors_put_object_and_acl),
        cmocka_unit_test(test_multipart_subresources_are_sorted_and_raw),
        cmocka_unit_test(test_list_xml_entities_url_encoding_and_paging),
        cmocka_unit_test(test_list_xml_rejects_malformed_pages),
        cmocka_unit_test(test_initiate_and_error_documents),
        cmocka_unit_test(test_ip_hosts_are_path_style),
        cmocka_unit_test(test_credentials_json_directory_and_missing_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
