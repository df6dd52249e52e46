/* test_s3: the S3 driver's pure parts and objhttp's encoding helpers: part sizes, RFC 3986
 * encoding and canonical queries, URL redaction, credentials from JSON and from a directory (as
 * the Go tool reads them), the ListObjectsV2 parser, driver configuration errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/err.h"
#include "store/objhttp.h"
#include "store/store_driver.h"
#include "store/store_s3.h"
#include "support/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB ((int64_t)1 << 20)

static void test_part_size_known_size_is_size_over_9999(void **state) {
    (void)state;
    assert_int_equal(s3_part_size(5 * MIB, 100 * MIB, 1), 5 * MIB);
    int64_t big = (int64_t)100 << 30; /* 100 GiB */
    int64_t ps = s3_part_size(5 * MIB, big, 1);
    assert_true(ps > 5 * MIB);
    assert_true(ps * 9999 >= big);
    assert_true((ps - 1) * 9999 < big);
}

static void test_part_size_stream_doubles_every_1000_parts(void **state) {
    (void)state;
    assert_int_equal(s3_part_size(5 * MIB, -1, 1), 5 * MIB);
    assert_int_equal(s3_part_size(5 * MIB, -1, 1000), 5 * MIB);
    assert_int_equal(s3_part_size(5 * MIB, -1, 1001), 10 * MIB);
    assert_int_equal(s3_part_size(5 * MIB, -1, 10000), 5 * MIB * 512);
    /* 10000 parts hold more than 5 TB (S3's object limit) */
    int64_t total = 0;
    for (int p = 1; p <= 10000; p++)
        total += s3_part_size(5 * MIB, -1, p);
    assert_true(total >= (int64_t)5 * 1000 * 1000 * 1000 * 1000);
}

static void test_pct_encode_rfc3986(void **state) {
    (void)state;
    char *e = objhttp_pct_encode("a b+c=d%e/f~g-h_i.j", 1);
    assert_string_equal(e, "a%20b%2Bc%3Dd%25e/f~g-h_i.j");
    free(e);
    e = objhttp_pct_encode("dir/x", 0);
    assert_string_equal(e, "dir%2Fx");
    free(e);
    e = objhttp_pct_encode("\xc3\xbc", 1); /* ü */
    assert_string_equal(e, "%C3%BC");
    free(e);
}

static void test_query_sorted_and_encoded(void **state) {
    (void)state;
    const char *names[] = {"prefix", "list-type", "continuation-token", "uploads"};
    const char *values[] = {"etcd/v2/", "2", "a+b=", NULL};
    char *q = objhttp_query(names, values, 4);
    assert_string_equal(q, "continuation-token=a%2Bb%3D&list-type=2&prefix=etcd%2Fv2%2F&uploads=");
    free(q);
    q = objhttp_query(NULL, NULL, 0);
    assert_string_equal(q, "");
    free(q);
}

static void test_redact_url_hides_signatures_and_userinfo(void **state) {
    (void)state;
    char *u = objhttp_redact_url("https://user:pw@h.example/c/b?sv=1&sig=abc%2B&se=x&uploadId=9");
    assert_string_equal(u, "https://h.example/c/b?sv=1&sig=REDACTED&se=x&uploadId=9");
    free(u);
    u = objhttp_redact_url(
        "http://h/b?X-Amz-Credential=k&X-Amz-Signature=s&x-amz-security-token=t");
    assert_string_equal(u, "http://h/b?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&x-amz-"
                           "security-token=REDACTED");
    free(u);
}

static char tmpdir[256];

static void write_str(const char *path, const char *s) {
    write_file(path, s, strlen(s));
}

static int setup_tmp(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/etcdbr-test-s3.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(tmpdir));
    return 0;
}

static int teardown_tmp(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_creds_from_json_file(void **state) {
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/creds.json", tmpdir);
    const char *j =
        "{\"region\":\"eu-west-1\",\"accessKeyID\":\"AK\",\"secretAccessKey\":\"S K\\n\","
        "\"s3ForcePathStyle\":true,\"insecureSkipVerify\":\"false\",\"bucketName\":\"x\","
        "\"sseCustomerKey\":\"k32\",\"sseCustomerAlgorithm\":\"AES256\"}";
    write_file(p, j, strlen(j));
    S3Creds c;
    assert_int_equal(s3_creds_read(p, &c), 0);
    assert_string_equal(c.region, "eu-west-1");
    assert_string_equal(c.access_key, "AK");
    assert_string_equal(c.secret_key, "S K\n"); /* verbatim */
    assert_int_equal(c.force_path_style, 1);
    assert_int_equal(c.insecure_skip_verify, 0);
    assert_string_equal(c.sse_algo, "AES256");
    assert_null(c.endpoint);
    s3_creds_clear(&c);
    assert_null(c.secret_key);
}

static void test_creds_from_directory_verbatim(void **state) {
    (void)state;
    char d[512], p[600];
    snprintf(d, sizeof d, "%s/dir", tmpdir);
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/region", d);
    write_str(p, "us-east-1");
    snprintf(p, sizeof p, "%s/accessKeyID", d);
    write_str(p, "AK\n");
    snprintf(p, sizeof p, "%s/secretAccessKey", d);
    write_str(p, "SECRET");
    snprintf(p, sizeof p, "%s/s3ForcePathStyle", d);
    write_str(p, "true\n");
    snprintf(p, sizeof p, "%s/unknownFile", d);
    write_str(p, "x");
    S3Creds c;
    assert_int_equal(s3_creds_read(d, &c), 0);
    assert_string_equal(c.access_key, "AK\n"); /* contents verbatim, as the Go tool */
    assert_string_equal(c.secret_key, "SECRET");
    assert_int_equal(c.force_path_style, 1);
    s3_creds_clear(&c);
    int64_t m1 = s3_creds_mtime(d);
    assert_true(m1 > 0);
    /* a *.json file in the directory wins */
    snprintf(p, sizeof p, "%s/creds.json", d);
    write_str(p, "{\"region\":\"r2\",\"accessKeyID\":\"J\",\"secretAccessKey\":\"JS\"}");
    assert_int_equal(s3_creds_read(d, &c), 0);
    assert_string_equal(c.access_key, "J");
    assert_string_equal(c.region, "r2");
    s3_creds_clear(&c);
    assert_true(s3_creds_mtime(d) >= m1);
}

static void test_creds_errors_name_field_not_value(void **state) {
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/bad.json", tmpdir);
    write_str(p, "{\"s3ForcePathStyle\":\"maybe\"}");
    S3Creds c;
    assert_int_equal(s3_creds_read(p, &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "s3ForcePathStyle"));
    write_str(p, "{\"sseCustomerKey\":\"topsecret\"}");
    assert_int_equal(s3_creds_read(p, &c), ERR_INVALID);
    assert_null(strstr(err_msg(), "topsecret"));
    write_str(p, "{not json");
    assert_int_equal(s3_creds_read(p, &c), ERR_INVALID);
    snprintf(p, sizeof p, "%s/missing.json", tmpdir);
    assert_int_equal(s3_creds_read(p, &c), ERR_NOT_FOUND);
}

typedef struct {
    char keys[8][128];
    int64_t sizes[8];
    int n;
} Got;

static int got_cb(void *ctx, const char *key, int64_t size) {
    Got *g = ctx;
    snprintf(g->keys[g->n], sizeof g->keys[0], "%s", key);
    g->sizes[g->n++] = size;
    return 0;
}

static void test_list_parse_pages_and_entities(void **state) {
    (void)state;
    const char *xml =
        "<?xml version=\"1.0\"?><ListBucketResult xmlns=\"http://s3\">"
        "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount>"
        "<IsTruncated>true</IsTruncated>"
        "<Contents><Key>p/a&amp;b &lt;c&gt; &#x27;&#252;</Key><Size>12</Size></Contents>"
        "<Contents><Key>p/Full-1</Key><ETag>&quot;x&quot;</ETag><Size>0</Size>"
        "</Contents><NextContinuationToken>tok+/=&amp;</NextContinuationToken>"
        "</ListBucketResult>";
    Got g = {0};
    int trunc = 0;
    char *tok = NULL;
    assert_int_equal(s3_list_parse(xml, strlen(xml), got_cb, &g, &trunc, &tok), 0);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.keys[0], "p/a&b <c> '\xc3\xbc");
    assert_int_equal(g.sizes[0], 12);
    assert_string_equal(g.keys[1], "p/Full-1");
    assert_int_equal(g.sizes[1], 0);
    assert_int_equal(trunc, 1);
    assert_string_equal(tok, "tok+/=&");
    free(tok);
    const char *last = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
    memset(&g, 0, sizeof g);
    assert_int_equal(s3_list_parse(last, strlen(last), got_cb, &g, &trunc, &tok), 0);
    assert_int_equal(g.n, 0);
    assert_int_equal(trunc, 0);
    assert_null(tok);
}

static void test_list_parse_rejects_malformed(void **state) {
    (void)state;
    int trunc;
    char *tok;
    Got g = {0};
    const char *bad[] = {
        "<Error><Code>x</Code></Error>",
        "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a&bogus;</Key></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key><Size>-3</Size></Contents></ListBucketResult>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g.n = 0;
        assert_int_equal(s3_list_parse(bad[i], strlen(bad[i]), got_cb, &g, &trunc, &tok),
                         ERR_CORRUPT);
    }
}

/* The web-identity forms: JSON roleARN + tokenPath; a directory's roleARN with its file "token". */
static void test_creds_web_identity_forms(void **state) {
    (void)state;
    char p[600], d[512];
    snprintf(p, sizeof p, "%s/wi.json", tmpdir);
    write_str(p, "{\"region\":\"eu-central-1\",\"roleARN\":\"arn:aws:iam::1:role/r\","
                 "\"tokenPath\":\"/var/run/secrets/token\"}");
    S3Creds c;
    assert_int_equal(s3_creds_read(p, &c), 0);
    assert_string_equal(c.role_arn, "arn:aws:iam::1:role/r");
    assert_string_equal(c.token_path, "/var/run/secrets/token");
    assert_null(c.access_key);
    s3_creds_clear(&c);
    snprintf(d, sizeof d, "%s/widir", tmpdir);
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/roleARN", d);
    write_str(p, "arn:aws:iam::1:role/r");
    snprintf(p, sizeof p, "%s/region", d);
    write_str(p, "eu-central-1");
    assert_int_equal(s3_creds_read(d, &c), 0);
    snprintf(p, sizeof p, "%s/token", d);
    assert_string_equal(c.token_path, p);
    s3_creds_clear(&c);
}

/* STS AssumeRoleWithWebIdentity responses: the documented shape parses, with entities decoded
 * and the expiry in unix seconds; anything else is ERR_CORRUPT naming the field, not a value. */
static void test_sts_parse(void **state) {
    (void)state;
    const char *ok =
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
        "<AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>x</"
        "SubjectFromWebIdentityToken><Credentials><SessionToken>AQoD&amp;YXdz</SessionToken>"
        "<SecretAccessKey>wJalr/K7MDENG</SecretAccessKey><Expiration>2014-10-24T23:00:23Z</"
        "Expiration><AccessKeyId>ASgeIAIOSFODNN7EXAMPLE</AccessKeyId></Credentials>"
        "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
    S3StsCreds c;
    assert_int_equal(s3_sts_parse(ok, strlen(ok), &c), 0);
    assert_string_equal(c.access_key, "ASgeIAIOSFODNN7EXAMPLE");
    assert_string_equal(c.secret_key, "wJalr/K7MDENG");
    assert_string_equal(c.session_token, "AQoD&YXdz");
    assert_int_equal(c.expiration, 1414191623); /* date -u -d 2014-10-24T23:00:23Z +%s */
    s3_sts_creds_clear(&c);
    assert_null(c.access_key);
    const char *frac = "<AssumeRoleWithWebIdentityResponse><Credentials><AccessKeyId>A</"
                       "AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</"
                       "SessionToken><Expiration>2014-10-24T23:00:23.123Z</Expiration>"
                       "</Credentials></AssumeRoleWithWebIdentityResponse>";
    assert_int_equal(s3_sts_parse(frac, strlen(frac), &c), 0);
    assert_int_equal(c.expiration, 1414191623);
    s3_sts_creds_clear(&c);
    const char *bad[] = {
        "",
        "<ErrorResponse><Error><Code>InvalidIdentityToken</Code></Error></ErrorResponse>",
        "<AssumeRoleWithWebIdentityResponse><Credentials><AccessKeyId>A</AccessKeyId>"
        "<SecretAccessKey>S</SecretAccessKey><Expiration>2014-10-24T23:00:23Z</Expiration>"
        "</Credentials></AssumeRoleWithWebIdentityResponse>",
        "<AssumeRoleWithWebIdentityResponse><Credentials><AccessKeyId>A</AccessKeyId>"
        "<SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken>"
        "<Expiration>tomorrow</Expiration></Credentials></AssumeRoleWithWebIdentityResponse>",
        "<AssumeRoleWithWebIdentityResponse><Credentials><AccessKeyId>A&bogus;</AccessKeyId>"
        "<SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken>"
        "<Expiration>2014-10-24T23:00:23Z</Expiration></Credentials>"
        "</AssumeRoleWithWebIdentityResponse>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(s3_sts_parse(bad[i], strlen(bad[i]), &c), ERR_CORRUPT);
        assert_null(c.access_key);
    }
}

static void test_driver_config_errors(void **state) {
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/ok.json", tmpdir);
    write_str(p, "{\"region\":\"us-east-1\",\"accessKeyID\":\"A\",\"secretAccessKey\":\"S\"}");
    StoreDriver *d = NULL;
    StoreConfig cfg = {.provider = "S3", .credentials = p, .container = "bkt"};
    assert_int_equal(store_s3_driver_new(&cfg, &d), 0);
    assert_string_equal(d->vt->describe(d), "S3:bkt");
    assert_true(d->vt->features & STORE_FEAT_THREAD_SAFE);
    store_driver_free(d);
    unsetenv("STORAGE_CONTAINER");
    cfg.container = "";
    assert_int_equal(store_s3_driver_new(&cfg, &d), ERR_INVALID);
    cfg.container = "bkt";
    cfg.endpoint_override = "ftp://x";
    assert_int_equal(store_s3_driver_new(&cfg, &d), ERR_INVALID);
    cfg.endpoint_override = NULL;
    /* web identity: roleARN needs tokenPath; no request is sent at open */
    write_str(p, "{\"region\":\"r\",\"roleARN\":\"arn\"}");
    assert_int_equal(store_s3_driver_new(&cfg, &d), ERR_INVALID);
    write_str(p, "{\"region\":\"r\",\"roleARN\":\"arn\",\"tokenPath\":\"/t\"}");
    assert_int_equal(store_s3_driver_new(&cfg, &d), 0);
    store_driver_free(d);
    /* ECS: its environment only */
    unsetenv("ECS_ENDPOINT");
    StoreConfig ecs = {.provider = "ECS", .container = "bkt"};
    assert_int_equal(store_s3_driver_new(&ecs, &d), ERR_INVALID);
    setenv("ECS_ENDPOINT", "ecs.example:9021", 1);
    setenv("ECS_ACCESS_KEY_ID", "a", 1);
    setenv("ECS_SECRET_ACCESS_KEY", "s", 1);
    setenv("ECS_DISABLE_SSL", "yes", 1);
    assert_int_equal(store_s3_driver_new(&ecs, &d), ERR_INVALID);
    setenv("ECS_DISABLE_SSL", "true", 1);
    assert_int_equal(store_s3_driver_new(&ecs, &d), 0);
    assert_string_equal(d->vt->describe(d), "ECS:bkt");
    store_driver_free(d);
    unsetenv("ECS_ENDPOINT");
    unsetenv("ECS_ACCESS_KEY_ID");
    unsetenv("ECS_SECRET_ACCESS_KEY");
    unsetenv("ECS_DISABLE_SSL");
}

/* The listing guard of every cloud driver: a repeated token, the page cap, a long token. */
static void test_listing_guard(void **state) {
    (void)state;
    ObjHttpListing l;
    objhttp_listing_begin(&l, "S3", "b", "p/v2/");
    assert_int_equal(objhttp_listing_page(&l, NULL), 0);
    char tok[32];
    for (int i = 0; i < 1000; i++) { /* the set grows and rehashes */
        snprintf(tok, sizeof tok, "t%d", i);
        assert_int_equal(objhttp_listing_page(&l, tok), 0);
    }
    assert_int_equal(objhttp_listing_page(&l, "t17"), ERR_IO);
    assert_non_null(strstr(err_msg(), "S3 b list p/v2/: page 1001 repeats a continuation token"));
    objhttp_listing_end(&l);

    setenv("ETCDBR_STORE_LIST_MAX_PAGES", "3", 1);
    objhttp_listing_begin(&l, "GCS", "", "x/");
    unsetenv("ETCDBR_STORE_LIST_MAX_PAGES");
    assert_int_equal(objhttp_listing_page(&l, NULL), 0);
    assert_int_equal(objhttp_listing_page(&l, "a"), 0);
    assert_int_equal(objhttp_listing_page(&l, "b"), 0);
    assert_int_equal(objhttp_listing_page(&l, "c"), ERR_IO);
    assert_non_null(strstr(err_msg(), "GCS list x/: more than 3 pages (the listing page cap)"));
    objhttp_listing_end(&l);

    char *big = malloc(OBJHTTP_LIST_TOKEN_MAX + 2);
    assert_non_null(big);
    memset(big, 'k', OBJHTTP_LIST_TOKEN_MAX + 1);
    big[OBJHTTP_LIST_TOKEN_MAX + 1] = '\0';
    objhttp_listing_begin(&l, "OSS", "b", "");
    assert_int_equal(objhttp_listing_page(&l, big), ERR_IO);
    assert_non_null(strstr(err_msg(), "longer than 8192 bytes"));
    objhttp_listing_end(&l);
    free(big);
}

/* CompleteMultipartUpload holds every ETag intact, however long and whatever it contains
 * (a 300-character ETag full of quotes overflowed the heap before). */
static void test_complete_xml_keeps_etags(void **state) {
    (void)state;
    char e1[301];
    for (int i = 0; i < 300; i++)
        e1[i] = "\"&<>'x"[i % 6];
    e1[300] = '\0';
    const char *tags[3] = {e1, "\"plain\"", ""};
    char *xml = NULL;
    size_t n = 0;
    assert_int_equal(objhttp_complete_xml(tags, 3, "t", &xml, &n), 0);
    assert_int_equal(strlen(xml), n);
    const char *p = xml;
    for (int i = 0; i < 3; i++) {
        size_t pl, tl;
        const char *part = objhttp_xml_element(p, xml + n, "Part", &pl, &p);
        assert_non_null(part);
        const char *t = objhttp_xml_element(part, part + pl, "ETag", &tl, NULL);
        assert_non_null(t);
        char *back = objhttp_xml_text(t, tl);
        assert_string_equal(back, tags[i]);
        free(back);
    }
    free(xml);
    const char *missing[2] = {"a", NULL};
    assert_int_equal(objhttp_complete_xml(missing, 2, "S3 commit k", &xml, &n), ERR_IO);
    assert_string_equal(err_msg(), "S3 commit k: part 2 has no ETag");
}

/* Header values are copied with their length checked: too long is an error, never cut short. */
static void test_header_fit(void **state) {
    (void)state;
    ObjHttpResponse r = {0};
    r.headers = (char *)"HTTP/1.1 200 OK\r\nETag: \"0123456789\"\r\nX-Empty:\r\n";
    char buf[13], small[12];
    assert_int_equal(objhttp_response_header_fit(&r, "etag", buf, sizeof buf, "ctx"), 0);
    assert_string_equal(buf, "\"0123456789\"");
    assert_int_equal(objhttp_response_header_fit(&r, "ETag", small, sizeof small, "S3 part"),
                     ERR_IO);
    assert_string_equal(err_msg(),
                        "S3 part: the ETag header of the answer is longer than 11 bytes");
    assert_int_equal(objhttp_response_header_fit(&r, "X-None", buf, sizeof buf, "c"),
                     ERR_NOT_FOUND);
    assert_int_equal(objhttp_response_header_fit(&r, "X-Empty", buf, sizeof buf, "c"), 0);
    assert_string_equal(buf, "");
    assert_null(objhttp_dup_bounded("abcdef", 6, 5, "UploadId", "OSS"));
    assert_string_equal(err_msg(),
                        "OSS: the UploadId in the answer has 6 bytes, more than the 5 accepted");
    char *d = objhttp_dup_bounded("abcdef", 5, 5, "UploadId", "OSS");
    assert_string_equal(d, "abcde");
    free(d);
    char *id = NULL;
    static const char init[] = "<InitiateMultipartUploadResult><UploadId>a&amp;b</UploadId>"
                               "</InitiateMultipartUploadResult>";
    assert_int_equal(s3_parse_upload_id(init, sizeof init - 1, &id), 0);
    assert_string_equal(id, "a&b");
    free(id);
    assert_int_equal(s3_parse_upload_id("<UploadId></UploadId>", 21, &id), ERR_CORRUPT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_part_size_known_size_is_size_over_9999),
        cmocka_unit_test(test_part_size_stream_doubles_every_1000_parts),
        cmocka_unit_test(test_pct_encode_rfc3986),
        cmocka_unit_test(test_query_sorted_and_encoded),
        cmocka_unit_test(test_redact_url_hides_signatures_and_userinfo),
        cmocka_unit_test(test_listing_guard),
        cmocka_unit_test(test_complete_xml_keeps_etags),
        cmocka_unit_test(test_header_fit),
        cmocka_unit_test_setup_teardown(test_creds_from_json_file, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_creds_from_directory_verbatim, setup_tmp,
                                        teardown_tmp),
        cmocka_unit_test_setup_teardown(test_creds_errors_name_field_not_value, setup_tmp,
                                        teardown_tmp),
        cmocka_unit_test_setup_teardown(test_creds_web_identity_forms, setup_tmp, teardown_tmp),
        cmocka_unit_test(test_sts_parse),
        cmocka_unit_test(test_list_parse_pages_and_entities),
        cmocka_unit_test(test_list_parse_rejects_malformed),
        cmocka_unit_test_setup_teardown(test_driver_config_errors, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
