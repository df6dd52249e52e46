/* test_gcs: the pure parts of the GCS driver: base64url, the RS256 JWT of the service-account
 * flow (decoded and its signature verified with the public half of a key generated here),
 * credentials validation as the Go tool does it (type, allowed fields, project_id pattern,
 * external_account refused as a key), the workload identity (external_account) file and its
 * subject token, the token response, the objects.list JSON parser,
 * the chunk sizes and chunk-key shape, and endpoint parsing (emulator = http://). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "store/store_gcs.h"

#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh RSA-2048 private key as PKCS#8 PEM (owned) and its EVP_PKEY (owned). */
static char *new_key_pem(EVP_PKEY **key) {
    EVP_PKEY *k = EVP_RSA_gen(2048);
    assert_non_null(k);
    BIO *b = BIO_new(BIO_s_mem());
    assert_int_equal(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL), 1);
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *pem = strndup(data, (size_t)n);
    BIO_free(b);
    *key = k;
    return pem;
}

/* base64url (no padding) decode; owned, NUL-terminated, *len set. */
static unsigned char *b64url_dec(const char *s, size_t n, size_t *len) {
    char *t = malloc(n + 4);
    assert_non_null(t);
    for (size_t i = 0; i < n; i++)
        t[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
    size_t m = n;
    while (m % 4)
        t[m++] = '=';
    unsigned char *o = malloc(m + 1);
    assert_non_null(o);
    int got = EVP_DecodeBlock(o, (unsigned char *)t, (int)m);
    assert_true(got >= 0);
    size_t pad = (m - n);
    *len = (size_t)got - pad;
    o[*len] = '\0';
    free(t);
    return o;
}

static void test_b64url_has_no_padding_and_url_alphabet(void **st) {
    (void)st;
    char *e = gcs_b64url("\xfb\xff", 2);
    assert_string_equal(e, "-_8");
    free(e);
    e = gcs_b64url("abcd", 4);
    assert_string_equal(e, "YWJjZA");
    free(e);
    e = gcs_b64url("", 0);
    assert_string_equal(e, "");
    free(e);
}

static void test_jwt_claims_and_rs256_signature_verify(void **st) {
    (void)st;
    EVP_PKEY *key;
    char *pem = new_key_pem(&key);
    GcsCreds c = {.client_email = "sa@proj-123.iam.gserviceaccount.com",
                  .private_key = pem,
                  .private_key_id = "kid-1",
                  .token_uri = "https://oauth2.example/token"};
    char *jwt = NULL;
    assert_int_equal(gcs_jwt(&c, GCS_SCOPE, 1700000000, &jwt), 0);
    char *d1 = strchr(jwt, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    assert_non_null(d2);
    assert_null(strchr(d2 + 1, '.'));
    assert_null(strchr(jwt, '='));
    size_t hl, cl, sl;
    unsigned char *h = b64url_dec(jwt, (size_t)(d1 - jwt), &hl);
    unsigned char *cj = b64url_dec(d1 + 1, (size_t)(d2 - d1 - 1), &cl);
    unsigned char *sig = b64url_dec(d2 + 1, strlen(d2 + 1), &sl);
    json_t *hj = json_loads((char *)h, 0, NULL), *cjj = json_loads((char *)cj, 0, NULL);
    assert_non_null(hj);
    assert_non_null(cjj);
    assert_string_equal(json_string_value(json_object_get(hj, "alg")), "RS256");
    assert_string_equal(json_string_value(json_object_get(hj, "typ")), "JWT");
    assert_string_equal(json_string_value(json_object_get(hj, "kid")), "kid-1");
    assert_string_equal(json_string_value(json_object_get(cjj, "iss")), c.client_email);
    assert_string_equal(json_string_value(json_object_get(cjj, "aud")), c.token_uri);
    assert_string_equal(json_string_value(json_object_get(cjj, "scope")), GCS_SCOPE);
    assert_int_equal(json_integer_value(json_object_get(cjj, "iat")), 1700000000);
    assert_int_equal(json_integer_value(json_object_get(cjj, "exp")), 1700003600);
    /* the signature verifies over "<header>.<claims>" with the public key */
    assert_int_equal(sl, 256);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key), 1);
    assert_int_equal(EVP_DigestVerify(md, sig, sl, (unsigned char *)jwt, (size_t)(d2 - jwt)), 1);
    /* and not over anything else */
    jwt[3] ^= 1;
    EVP_MD_CTX_reset(md);
    assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key), 1);
    assert_int_not_equal(EVP_DigestVerify(md, sig, sl, (unsigned char *)jwt, (size_t)(d2 - jwt)),
                         1);
    EVP_MD_CTX_free(md);
    json_decref(hj);
    json_decref(cjj);
    free(h);
    free(cj);
    free(sig);
    free(jwt);
    /* a key that is not PEM: ERR_INVALID naming private_key */
    c.private_key = "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
    assert_int_equal(gcs_jwt(&c, GCS_SCOPE, 1, &jwt), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "private_key"));
    assert_null(jwt);
    free(pem);
    EVP_PKEY_free(key);
}

static int parse(const char *json, GcsCreds *c) {
    return gcs_creds_parse(json, strlen(json), "test.json", c);
}

static void test_credentials_validated_like_the_go_tool(void **st) {
    (void)st;
    GcsCreds c;
    const char *good = "{\"type\":\"service_account\",\"project_id\":\"my-proj-42\","
                       "\"private_key_id\":\"abc\",\"private_key\":\"PEM\","
                       "\"client_email\":\"sa@my-proj-42.iam.gserviceaccount.com\","
                       "\"client_id\":\"1\",\"auth_uri\":\"https://accounts.google.com/o/oauth2/"
                       "auth\",\"token_uri\":\"https://oauth2.googleapis.com/token\","
                       "\"auth_provider_x509_cert_url\":\"x\",\"client_x509_cert_url\":\"y\","
                       "\"universe_domain\":\"googleapis.com\"}";
    assert_int_equal(parse(good, &c), 0);
    assert_string_equal(c.project_id, "my-proj-42");
    assert_string_equal(c.client_email, "sa@my-proj-42.iam.gserviceaccount.com");
    assert_string_equal(c.private_key, "PEM");
    assert_string_equal(c.token_uri, "https://oauth2.googleapis.com/token");
    gcs_creds_clear(&c);
    /* token_uri defaults */
    assert_int_equal(parse("{\"type\":\"service_account\",\"private_key\":\"P\","
                           "\"client_email\":\"e\"}",
                           &c),
                     0);
    assert_string_equal(c.token_uri, "https://oauth2.googleapis.com/token");
    gcs_creds_clear(&c);
    /* an unknown field */
    assert_int_equal(parse("{\"type\":\"service_account\",\"private_key\":\"P\","
                           "\"client_email\":\"e\",\"extra\":\"x\"}",
                           &c),
                     ERR_INVALID);
    assert_non_null(strstr(err_msg(), "\"extra\" is not allowed"));
    /* project_id pattern: too short, upper case, trailing '-', leading digit */
    const char *bad_ids[] = {"abcde", "Abcdef", "abcdef-", "1abcdef",
                             "abcdefghijklmnopqrstuvwxyz12345"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        char j[256];
        snprintf(j, sizeof j,
                 "{\"type\":\"service_account\",\"project_id\":\"%s\",\"private_key\":\"P\","
                 "\"client_email\":\"e\"}",
                 bad_ids[i]);
        assert_int_equal(parse(j, &c), ERR_INVALID);
        assert_non_null(strstr(err_msg(), "project_id"));
    }
    /* a project_id of 30 characters is fine */
    assert_int_equal(parse("{\"type\":\"service_account\",\"project_id\":"
                           "\"abcdefghijklmnopqrstuvwxyz1234\",\"private_key\":\"P\","
                           "\"client_email\":\"e\"}",
                           &c),
                     0);
    gcs_creds_clear(&c);
    /* workload identity: not a key (gcs_ext_parse reads it) */
    assert_int_equal(parse("{\"type\":\"external_account\",\"audience\":\"a\"}", &c),
                     ERR_UNSUPPORTED);
    assert_non_null(strstr(err_msg(), "external_account"));
    /* other types, missing fields, wrong JSON types, not JSON */
    assert_int_equal(parse("{\"type\":\"authorized_user\"}", &c), ERR_INVALID);
    assert_int_equal(parse("{\"private_key\":\"P\",\"client_email\":\"e\"}", &c), ERR_INVALID);
    assert_int_equal(parse("{\"type\":\"service_account\",\"client_email\":\"e\"}", &c),
                     ERR_INVALID);
    assert_non_null(strstr(err_msg(), "private_key is missing"));
    assert_int_equal(parse("{\"type\":\"service_account\",\"private_key\":\"P\"}", &c),
                     ERR_INVALID);
    assert_int_equal(parse("{\"type\":\"service_account\",\"private_key\":\"P\","
                           "\"client_email\":\"e\",\"client_id\":1}",
                           &c),
                     ERR_INVALID);
    assert_int_equal(parse("[1]", &c), ERR_INVALID);
    assert_int_equal(parse("{", &c), ERR_INVALID);
    /* messages never carry the key */
    assert_int_equal(parse("{\"type\":\"service_account\",\"private_key\":\"SECRETKEY\","
                           "\"client_email\":\"e\",\"bad\":\"x\"}",
                           &c),
                     ERR_INVALID);
    assert_null(strstr(err_msg(), "SECRETKEY"));
}

static void test_token_response_parse(void **st) {
    (void)st;
    char *t = NULL;
    int64_t ex = 0;
    const char *ok = "{\"access_token\":\"ya29.x\",\"expires_in\":3599,\"token_type\":\"Bearer\"}";
    assert_int_equal(gcs_token_parse(ok, strlen(ok), &t, &ex), 0);
    assert_string_equal(t, "ya29.x");
    assert_int_equal(ex, 3599);
    free(t);
    const char *noex = "{\"access_token\":\"a\"}";
    assert_int_equal(gcs_token_parse(noex, strlen(noex), &t, &ex), 0);
    assert_int_equal(ex, 3600);
    free(t);
    const char *err = "{\"error\":\"invalid_grant\",\"error_description\":\"Invalid JWT "
                      "Signature.\"}";
    assert_int_equal(gcs_token_parse(err, strlen(err), &t, &ex), ERR_CORRUPT);
    assert_null(t);
    assert_non_null(strstr(err_msg(), "OAuth2 error invalid_grant: Invalid JWT Signature."));
    assert_int_equal(gcs_token_parse("nope", 4, &t, &ex), ERR_CORRUPT);
}

static int ext(const char *json, GcsExtCreds *c) {
    return gcs_ext_parse(json, strlen(json), "test.json", c);
}

#define EXT_HEAD                                                                                   \
    "{\"type\":\"external_account\",\"audience\":\"//iam.googleapis.com/projects/1/locations/"     \
    "global/workloadIdentityPools/p/providers/k\",\"subject_token_type\":\"urn:ietf:params:"       \
    "oauth:token-type:jwt\",\"token_url\":\"https://sts.googleapis.com/v1/token\""

/* The external_account file: required fields, the token file's formats, impersonation, what is
 * unsupported (URL, executable and AWS sources) and malformed values. */
static void test_external_account_parse(void **st) {
    (void)st;
    GcsExtCreds c;
    assert_int_equal(ext(EXT_HEAD ",\"credential_source\":{\"file\":\"/var/run/t\"},"
                                  "\"quota_project_id\":\"q\",\"client_id\":\"ignored\"}",
                         &c),
                     0);
    assert_string_equal(c.token_file, "/var/run/t");
    assert_null(c.token_field);
    assert_null(c.impersonation_url);
    assert_string_equal(c.token_url, "https://sts.googleapis.com/v1/token");
    gcs_ext_clear(&c);
    assert_int_equal(
        ext(EXT_HEAD
            ",\"credential_source\":{\"file\":\"/t\",\"format\":{\"type\":\"json\","
            "\"subject_token_field_name\":\"id_token\"}},"
            "\"service_account_impersonation_url\":\"https://iamcredentials.googleapis.com/"
            "v1/projects/-/serviceAccounts/sa@p.iam.gserviceaccount.com:"
            "generateAccessToken\",\"service_account_impersonation\":{"
            "\"token_lifetime_seconds\":1800}}",
            &c),
        0);
    assert_string_equal(c.token_field, "id_token");
    assert_non_null(c.impersonation_url);
    assert_int_equal(c.lifetime, 1800);
    gcs_ext_clear(&c);
    /* unsupported sources: named */
    assert_int_equal(
        ext(EXT_HEAD ",\"credential_source\":{\"url\":\"http://169.254.169.254/t\"}}", &c),
        ERR_UNSUPPORTED);
    assert_non_null(strstr(err_msg(), "credential_source.url"));
    assert_int_equal(ext(EXT_HEAD ",\"credential_source\":{\"environment_id\":\"aws1\"}}", &c),
                     ERR_UNSUPPORTED);
    assert_int_equal(ext(EXT_HEAD ",\"credential_source\":{\"executable\":{}}}", &c),
                     ERR_UNSUPPORTED);
    /* malformed */
    const char *bad[] = {
        EXT_HEAD "}",
        EXT_HEAD ",\"credential_source\":\"/t\"}",
        EXT_HEAD ",\"credential_source\":{\"file\":\"\"}}",
        EXT_HEAD ",\"credential_source\":{\"file\":7}}",
        EXT_HEAD ",\"credential_source\":{\"file\":\"/t\",\"format\":{\"type\":\"xml\"}}}",
        EXT_HEAD ",\"credential_source\":{\"file\":\"/t\",\"format\":{\"type\":\"json\"}}}",
        EXT_HEAD ",\"credential_source\":{\"file\":\"/t\"},\"service_account_impersonation_url\":"
                 "\"ftp://x\"}",
        EXT_HEAD ",\"credential_source\":{\"file\":\"/t\"},\"service_account_impersonation\":{"
                 "\"token_lifetime_seconds\":99999999999}}",
        EXT_HEAD ",\"credential_source\":{\"file\":\"/t\"},\"universe_domain\":5}",
        "{\"type\":\"external_account\",\"audience\":\"a\",\"subject_token_type\":\"t\","
        "\"token_url\":\"file:///x\",\"credential_source\":{\"file\":\"/t\"}}",
        "{\"type\":\"external_account\",\"subject_token_type\":\"t\",\"token_url\":\"https://x\","
        "\"credential_source\":{\"file\":\"/t\"}}",
        "{\"type\":\"service_account\"}",
        "[]",
        "{\"type\":\"external_account\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ext(bad[i], &c), ERR_INVALID);
        assert_null(c.audience);
    }
}

/* The subject token: the file as is, or one field of it as JSON; read anew each time. */
static void test_external_account_subject_token(void **st) {
    (void)st;
    char dir[] = "/tmp/test_gcs_ext.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/token", dir);
    GcsExtCreds c = {.token_file = path};
    FILE *f = fopen(path, "w");
    fputs("eyJ.subject.one\n", f);
    fclose(f);
    char *t = NULL;
    assert_int_equal(gcs_ext_subject_token(&c, &t), 0);
    assert_string_equal(t, "eyJ.subject.one");
    free(t);
    c.token_field = "id_token";
    assert_int_equal(gcs_ext_subject_token(&c, &t), ERR_INVALID); /* not JSON */
    f = fopen(path, "w");
    fputs("{\"id_token\":\"eyJ.subject.two\"}", f);
    fclose(f);
    assert_int_equal(gcs_ext_subject_token(&c, &t), 0);
    assert_string_equal(t, "eyJ.subject.two");
    free(t);
    f = fopen(path, "w");
    fputs("{\"id_token\":5}", f);
    fclose(f);
    assert_int_equal(gcs_ext_subject_token(&c, &t), ERR_INVALID);
    assert_null(strstr(err_msg(), "eyJ"));
    unlink(path);
    assert_int_equal(gcs_ext_subject_token(&c, &t), ERR_IO);
    rmdir(dir);
}

typedef struct {
    char names[8][64];
    int64_t sizes[8], ret[8];
    int n;
} Got;

static int got_cb(void *ctx, const char *name, int64_t size, int64_t ret) {
    Got *g = ctx;
    if (g->n >= 8) return -99;
    snprintf(g->names[g->n], sizeof g->names[0], "%s", name);
    g->sizes[g->n] = size;
    g->ret[g->n++] = ret;
    return 0;
}

static void test_list_json_items_sizes_retention_and_page_token(void **st) {
    (void)st;
    const char *page = "{\"kind\":\"storage#objects\",\"nextPageToken\":\"tok/+=\",\"items\":["
                       "{\"name\":\"p/v2/Full-00000000-00000005-1700000000.gz\",\"size\":"
                       "\"12345\",\"retentionExpirationTime\":\"2030-01-02T03:04:05.123Z\"},"
                       "{\"name\":\"p/v2/\\u00fc n\",\"size\":\"0\"},"
                       "{\"name\":\"p/v2/nosize\",\"retentionExpirationTime\":"
                       "\"1970-01-01T01:00:00+01:00\"}]}";
    Got g = {0};
    char *next = NULL;
    assert_int_equal(gcs_list_parse(page, strlen(page), got_cb, &g, &next), 0);
    assert_int_equal(g.n, 3);
    assert_string_equal(g.names[0], "p/v2/Full-00000000-00000005-1700000000.gz");
    assert_int_equal(g.sizes[0], 12345);
    assert_int_equal(g.ret[0], 1893553445); /* 2030-01-02T03:04:05Z */
    assert_string_equal(g.names[1], "p/v2/\xc3\xbc n");
    assert_int_equal(g.sizes[1], 0);
    assert_int_equal(g.ret[1], 0);
    assert_int_equal(g.sizes[2], -1);
    assert_int_equal(g.ret[2], 0); /* 01:00+01:00 = the epoch */
    assert_string_equal(next, "tok/+=");
    free(next);
    /* the last page: no token, no items */
    memset(&g, 0, sizeof g);
    const char *last = "{\"kind\":\"storage#objects\"}";
    assert_int_equal(gcs_list_parse(last, strlen(last), got_cb, &g, &next), 0);
    assert_int_equal(g.n, 0);
    assert_null(next);
    /* malformed */
    const char *bad[] = {"",
                         "[]",
                         "{\"items\":{}}",
                         "{\"items\":[{\"size\":\"1\"}]}",
                         "{\"items\":[{\"name\":1}]}",
                         "{\"items\":[{\"name\":\"a\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&g, 0, sizeof g);
        assert_int_equal(gcs_list_parse(bad[i], strlen(bad[i]), got_cb, &g, &next), ERR_CORRUPT);
        assert_null(next);
    }
    /* a callback's nonzero return stops the parse and is returned */
    memset(&g, 0, sizeof g);
    g.n = 8;
    assert_int_equal(gcs_list_parse(page, strlen(page), got_cb, &g, &next), -99);
    assert_null(next);
}

static void test_chunk_sizes_and_chunk_keys(void **st) {
    (void)st;
    const int64_t m = 5 << 20;
    assert_int_equal(gcs_chunk_size(m, 1), m);
    assert_int_equal(gcs_chunk_size(m, 128), m);
    assert_int_equal(gcs_chunk_size(m, 129), 2 * m);
    assert_int_equal(gcs_chunk_size(m, 1023), 8 * m);
    int64_t total = 0;
    for (int n = 1; n < GCS_MAX_COMPONENTS; n++)
        total += gcs_chunk_size(m, n);
    assert_int_equal(total, 4600 * m);
    assert_int_equal(gcs_chunk_size(0, 1), m);
    assert_true(gcs_is_chunk_key("p/v2/Full-00000000-00000005-1700000000.gz/0000000001"));
    assert_true(gcs_is_chunk_key("a/1000000001"));
    assert_false(gcs_is_chunk_key("p/v2/Full-00000000-00000005-1700000000.gz"));
    assert_false(gcs_is_chunk_key("a/000000001"));
    assert_false(gcs_is_chunk_key("a/00000000012"));
    assert_false(gcs_is_chunk_key("/0000000001"));
    assert_false(gcs_is_chunk_key("a/00000x0001"));
    assert_false(gcs_is_chunk_key("0000000001"));
}

static void test_endpoint_forms(void **st) {
    (void)st;
    char *b = NULL;
    int emu = -1;
    assert_int_equal(gcs_endpoint_parse("http://127.0.0.1:4443", &b, &emu), 0);
    assert_string_equal(b, "http://127.0.0.1:4443");
    assert_int_equal(emu, 1);
    free(b);
    assert_int_equal(gcs_endpoint_parse("https://storage.example.com/storage/v1/", &b, &emu), 0);
    assert_string_equal(b, "https://storage.example.com");
    assert_int_equal(emu, 0);
    free(b);
    assert_int_equal(gcs_endpoint_parse("https://proxy.example.com/gcs/", &b, &emu), 0);
    assert_string_equal(b, "https://proxy.example.com/gcs");
    free(b);
    assert_int_equal(gcs_endpoint_parse("127.0.0.1:4443", &b, &emu), 0);
    assert_string_equal(b, "http://127.0.0.1:4443");
    assert_int_equal(emu, 1);
    free(b);
    assert_int_equal(gcs_endpoint_parse("ftp://x", &b, &emu), ERR_INVALID);
    assert_int_equal(gcs_endpoint_parse("https://", &b, &emu), ERR_INVALID);
    assert_int_equal(gcs_endpoint_parse("https:///storage/v1", &b, &emu), ERR_INVALID);
    assert_null(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64url_has_no_padding_and_url_alphabet),
        cmocka_unit_test(test_jwt_claims_and_rs256_signature_verify),
        cmocka_unit_test(test_credentials_validated_like_the_go_tool),
        cmocka_unit_test(test_token_response_parse),
        cmocka_unit_test(test_external_account_parse),
        cmocka_unit_test(test_external_account_subject_token),
        cmocka_unit_test(test_list_json_items_sizes_retention_and_page_token),
        cmocka_unit_test(test_chunk_sizes_and_chunk_keys),
        cmocka_unit_test(test_endpoint_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
