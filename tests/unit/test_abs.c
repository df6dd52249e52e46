/* test_abs: the pure parts of the Azure Blob driver: the SharedKey string-to-sign and signature
 * against a vector derived once with `openssl dgst -sha256 -mac HMAC` (azurite's well-known
 * key), block ids as the Go tool makes them, List Blobs XML parsing (entities, Encoded names,
 * NextMarker) and credentials from a JSON file, a directory and a connection string. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/fsutil.h"
#include "store/store_abs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define AZURITE_KEY                                                                                \
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

static const char *const vec_headers[] = {
    "If-None-Match: *",
    "x-ms-version: 2021-08-06",
    "X-MS-Blob-Type: BlockBlob",
    "x-ms-date:  Tue, 01 Dec 2026 18:00:00 GMT ",
    "Content-Type: application/xml",
    "Authorization-Not-Signed: x",
};
static const char *const vec_qn[] = {"comp", "blockid"};
static const char *const vec_qv[] = {"block", "MDAwMDAwMDAwMQ=="};
static const char vec_sts[] = "PUT\n\n\n11\n\napplication/xml\n\n\n\n*\n\n\n"
                              "x-ms-blob-type:BlockBlob\n"
                              "x-ms-date:Tue, 01 Dec 2026 18:00:00 GMT\n"
                              "x-ms-version:2021-08-06\n"
                              "/devstoreaccount1/devstoreaccount1/cont/a%20b\n"
                              "blockid:MDAwMDAwMDAwMQ==\n"
                              "comp:block";

static void test_string_to_sign_orders_headers_and_query_as_azure(void **state) {
    (void)state;
    char *sts = abs_string_to_sign("PUT", 11, vec_headers, 6, "devstoreaccount1",
                                   "/devstoreaccount1/cont/a%20b", vec_qn, vec_qv, 2);
    assert_non_null(sts);
    assert_string_equal(sts, vec_sts);
    free(sts);
    /* a zero length is an empty field, a GET with no query ends at the path */
    sts = abs_string_to_sign("GET", 0, NULL, 0, "acct", "/c/k", NULL, NULL, 0);
    assert_string_equal(sts, "GET\n\n\n\n\n\n\n\n\n\n\n\n/acct/c/k");
    free(sts);
}

static void test_signature_matches_openssl_vector(void **state) {
    (void)state;
    /* printf '<vec_sts>' | openssl dgst -sha256 -mac HMAC -macopt hexkey:<key hex> -binary | base64
     */
    AbsCreds c;
    char dir[] = "/tmp/etcdbr-test-abs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[256];
    snprintf(p, sizeof p, "%s/c.json", dir);
    FILE *f = fopen(p, "w");
    fprintf(f, "{\"storageAccount\":\"devstoreaccount1\",\"storageKey\":\"%s\"}", AZURITE_KEY);
    fclose(f);
    assert_int_equal(abs_creds_load(p, &c), 0);
    assert_int_equal(c.key_len, 64);
    char sig[64];
    assert_int_equal(abs_sign(c.key, c.key_len, vec_sts, sig, sizeof sig), 0);
    assert_string_equal(sig, "bLuLn97uqsVpjqErW7poN0cwnN0KLSDVucSqyzPH4CE=");
    abs_creds_clear(&c);
    assert_int_equal(fs_remove_tree(dir), 0);
}

static void test_block_ids_are_base64_of_ten_digits(void **state) {
    (void)state;
    char id[24];
    abs_block_id(1, id);
    assert_string_equal(id, "MDAwMDAwMDAwMQ==");
    abs_block_id(12, id);
    assert_string_equal(id, "MDAwMDAwMDAxMg==");
    abs_block_id(50000, id);
    assert_int_equal(strlen(id), 16);
}

typedef struct Seen {
    char names[8][128];
    int64_t sizes[8];
    int n;
} Seen;

static int seen_cb(void *ctx, const char *key, int64_t size) {
    Seen *s = ctx;
    if (s->n >= 8) return -99;
    snprintf(s->names[s->n], sizeof s->names[0], "%s", key);
    s->sizes[s->n++] = size;
    return 0;
}

static void test_list_xml_decodes_names_sizes_and_marker(void **state) {
    (void)state;
    const char xml[] =
        "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"utf-8\"?>"
        "<EnumerationResults ServiceEndpoint=\"http://x/\" ContainerName=\"c\">"
        "<Prefix>a/</Prefix><Marker /><MaxResults>2</MaxResults><Blobs>"
        "<Blob><Name>a/x &amp; y&lt;&gt;&quot;&apos;&#233;&#x263A;</Name><Properties>"
        "<Creation-Time>Tue, 01 Dec 2026</Creation-Time><Content-Length>12345</Content-Length>"
        "<Content-Type>application/octet-stream</Content-Type></Properties></Blob>"
        "<Blob><Name Encoded=\"true\">a/%01odd</Name><Properties><Content-Length>0"
        "</Content-Length></Properties></Blob>"
        "</Blobs><NextMarker>2!84!MDAwMDI&amp;x</NextMarker></EnumerationResults>";
    Seen s = {0};
    char *next = NULL;
    assert_int_equal(abs_parse_list(xml, sizeof xml - 1, seen_cb, &s, &next), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.names[0], "a/x & y<>\"'\xC3\xA9\xE2\x98\xBA");
    assert_int_equal(s.sizes[0], 12345);
    assert_string_equal(s.names[1], "a/\x01odd");
    assert_int_equal(s.sizes[1], 0);
    assert_non_null(next);
    assert_string_equal(next, "2!84!MDAwMDI&x");
    free(next);

    /* the last page: empty NextMarker, and no blobs at all */
    const char last[] = "<EnumerationResults><Blobs /><NextMarker /></EnumerationResults>";
    s.n = 0;
    assert_int_equal(abs_parse_list(last, sizeof last - 1, seen_cb, &s, &next), 0);
    assert_int_equal(s.n, 0);
    assert_null(next);
}

static void test_list_xml_rejects_malformed_documents(void **state) {
    (void)state;
    Seen s = {0};
    char *next = NULL;
    const char *bad[] = {
        "<Error><Code>x</Code></Error>",
        "<EnumerationResults><Blobs><Blob><Name>a</Name>",
        "<EnumerationResults><Blobs><Blob><Properties/></Blob></Blobs></EnumerationResults>",
        "<EnumerationResults><Blobs><Blob><Name>a&bogus;</Name></Blob></Blobs>"
        "</EnumerationResults>",
        "<EnumerationResults><Blobs><Blob><Name>a&#0;</Name></Blob></Blobs>"
        "</EnumerationResults>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s.n = 0;
        assert_int_equal(abs_parse_list(bad[i], strlen(bad[i]), seen_cb, &s, &next), ERR_CORRUPT);
        assert_null(next);
    }
}

static void write_file(const char *dir, const char *name, const char *content) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static void test_credentials_from_directory_json_and_connection_string(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-test-abs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    AbsCreds c;
    /* one file per field, verbatim; the key's trailing newline is ignored like Go's decoder */
    write_file(dir, "storageAccount", "acct1");
    write_file(dir, "storageKey", AZURITE_KEY "\n");
    write_file(dir, "bucketName", "ignored");
    assert_int_equal(abs_creds_load(dir, &c), 0);
    assert_string_equal(c.account, "acct1");
    assert_int_equal(c.key_len, 64);
    assert_string_equal(c.domain, "blob.core.windows.net");
    assert_null(c.sas);
    abs_creds_clear(&c);
    write_file(dir, "domain", "blob.core.chinacloudapi.cn");
    assert_int_equal(abs_creds_load(dir, &c), 0);
    assert_string_equal(c.domain, "blob.core.chinacloudapi.cn");
    abs_creds_clear(&c);

    /* a *.json file in the directory wins over the field files */
    write_file(dir, "creds.json", "{\"storageAccount\":\"acct2\",\"sasToken\":\"?sv=1&sig=abc\"}");
    assert_int_equal(abs_creds_load(dir, &c), 0);
    assert_string_equal(c.account, "acct2");
    assert_null(c.key);
    assert_string_equal(c.sas, "sv=1&sig=abc");
    abs_creds_clear(&c);

    /* errors name the field, not a value */
    write_file(dir, "creds.json", "{\"storageAccount\":\"acct3\",\"storageKey\":\"not base64!\"}");
    assert_int_equal(abs_creds_load(dir, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "storageKey is not valid base64"));
    assert_null(strstr(err_msg(), "not base64!"));
    write_file(dir, "creds.json", "{\"storageKey\":\"" AZURITE_KEY "\"}");
    assert_int_equal(abs_creds_load(dir, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "storageAccount is missing"));
    write_file(dir, "creds.json", "[1]");
    assert_int_equal(abs_creds_load(dir, &c), ERR_INVALID);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    assert_int_equal(abs_creds_load(missing, &c), ERR_NOT_FOUND);

    assert_int_equal(
        abs_creds_from_connection_string(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" AZURITE_KEY
            ";BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1/;",
            &c),
        0);
    assert_string_equal(c.account, "devstoreaccount1");
    assert_int_equal(c.key_len, 64);
    assert_string_equal(c.blob_endpoint, "http://127.0.0.1:10000/devstoreaccount1");
    abs_creds_clear(&c);
    assert_int_equal(abs_creds_from_connection_string("AccountName=a;AccountKey=" AZURITE_KEY
                                                      ";EndpointSuffix=core.usgovcloudapi.net",
                                                      &c),
                     0);
    assert_string_equal(c.domain, "blob.core.usgovcloudapi.net");
    assert_null(c.blob_endpoint);
    abs_creds_clear(&c);
    /* no key: accepted here (a SAS may come from AZURE_STORAGE_SAS_TOKEN; the driver checks) */
    assert_int_equal(abs_creds_from_connection_string("AccountName=a", &c), 0);
    assert_null(c.key);
    abs_creds_clear(&c);
    assert_int_equal(abs_creds_from_connection_string("AccountKey=" AZURITE_KEY, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "storageAccount is missing"));
    assert_null(strstr(err_msg(), "Eby8"));
    assert_int_equal(fs_remove_tree(dir), 0);
}

/* Workload identity from the environment: all three variables or nothing; the token URL from
 * the authority host and tenant; hostile values refused. */
static void test_workload_identity_environment(void **state) {
    (void)state;
    unsetenv("AZURE_FEDERATED_TOKEN_FILE");
    unsetenv("AZURE_AUTHORITY_HOST");
    setenv("AZURE_CLIENT_ID", "cid", 1);
    setenv("AZURE_TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47", 1);
    AbsWid *w = NULL;
    assert_int_equal(abs_wid_from_env(&w), 0);
    assert_null(w); /* no token file: not set up */
    setenv("AZURE_FEDERATED_TOKEN_FILE", "/var/run/secrets/azure/tokens/azure-identity-token", 1);
    assert_int_equal(abs_wid_from_env(&w), 0);
    assert_non_null(w);
    assert_string_equal(abs_wid_token_url(w), "https://login.microsoftonline.com/"
                                              "72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/"
                                              "token");
    abs_wid_free(w);
    setenv("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.us", 1); /* no trailing '/' */
    assert_int_equal(abs_wid_from_env(&w), 0);
    assert_string_equal(abs_wid_token_url(w), "https://login.microsoftonline.us/"
                                              "72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/v2.0/"
                                              "token");
    abs_wid_free(w);
    setenv("AZURE_AUTHORITY_HOST", "file:///etc/passwd", 1);
    assert_int_equal(abs_wid_from_env(&w), ERR_INVALID);
    unsetenv("AZURE_AUTHORITY_HOST");
    const char *tenants[] = {"../../evil", "a/b", "a?b", "t#x", ""};
    for (size_t i = 0; i < sizeof tenants / sizeof tenants[0]; i++) {
        setenv("AZURE_TENANT_ID", tenants[i], 1);
        w = NULL;
        int rc = abs_wid_from_env(&w);
        assert_null(w);
        assert_true(rc == ERR_INVALID || (rc == 0 && !tenants[i][0]));
    }
    unsetenv("AZURE_FEDERATED_TOKEN_FILE");
    unsetenv("AZURE_CLIENT_ID");
    unsetenv("AZURE_TENANT_ID");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_string_to_sign_orders_headers_and_query_as_azure),
        cmocka_unit_test(test_signature_matches_openssl_vector),
        cmocka_unit_test(test_block_ids_are_base64_of_ten_digits),
        cmocka_unit_test(test_list_xml_decodes_names_sizes_and_marker),
        cmocka_unit_test(test_list_xml_rejects_malformed_documents),
        cmocka_unit_test(test_credentials_from_directory_json_and_connection_string),
        cmocka_unit_test(test_workload_identity_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
