/* test_base64: the one base64 decoder (codec/base64.h) under each reader's rules. Random bytes
 * encoded by OpenSSL decode back under every flag set (a logged seed; ETCDBR_SEED replays it);
 * line breaks are skipped only where asked; padding, stray '=', bad characters, non-zero
 * trailing bits and short buffers are refused with the offending offset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/base64.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_round_trip_random_bytes_under_every_flag_set(void **state) {
    (void)state;
    const char *env = getenv("ETCDBR_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("seed=%u (ETCDBR_SEED=%u replays it)\n", seed, seed);
    uint8_t raw[300], out[300];
    char enc[420], crlf[900];
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(rand_r(&seed) % sizeof raw);
        for (size_t i = 0; i < n; i++)
            raw[i] = (uint8_t)rand_r(&seed);
        int el = EVP_EncodeBlock((unsigned char *)enc, raw, (int)n);
        for (unsigned flags = 0; flags < 16; flags++) {
            size_t got = 0, want = 0;
            assert_int_equal(b64_decoded_len(enc, (size_t)el, flags, &want, NULL), 0);
            assert_int_equal(want, n);
            assert_int_equal(b64_decode(enc, (size_t)el, flags, out, sizeof out, &got, NULL), 0);
            assert_int_equal(got, n);
            if (n) assert_memory_equal(out, raw, n);
        }
        /* a line break every 76 characters (and a stray one): only the skipping flags take it */
        size_t k = 0;
        for (int i = 0; i < el; i++) {
            if (i && i % 76 == 0) crlf[k++] = '\r', crlf[k++] = '\n';
            crlf[k++] = enc[i];
        }
        crlf[k++] = '\n';
        crlf[k] = '\0';
        size_t got = 0;
        B64Fault f;
        assert_int_equal(
            b64_decode(crlf, k, B64_SKIP_CRLF | B64_PAD_REQUIRED, out, sizeof out, &got, NULL), 0);
        assert_int_equal(got, n);
        if (n) assert_memory_equal(out, raw, n);
        assert_int_equal(b64_decode(crlf, k, B64_SKIP_BLANKS, out, sizeof out, &got, NULL), 0);
        assert_int_equal(b64_decode(crlf, k, 0, out, sizeof out, &got, &f), -1);
        assert_int_equal(f.at, strcspn(crlf, "\r\n")); /* refused at the first line break */
    }
}

static void test_malformed_text_is_refused_where_it_is_wrong(void **state) {
    (void)state;
    uint8_t out[16];
    size_t n;
    B64Fault f;
    /* unpadded: fine unless padding is required */
    assert_int_equal(b64_decode("YWI", 3, 0, out, sizeof out, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_int_equal(b64_decode("YWI", 3, B64_PAD_REQUIRED, out, sizeof out, &n, &f), -1);
    assert_string_equal(f.why, "not padded");
    /* data after '=' */
    assert_int_equal(b64_decode("YQ==YQ==", 8, 0, out, sizeof out, &n, &f), -1);
    assert_string_equal(f.why, "data after '='");
    assert_int_equal(f.at, 4);
    /* a bad character, with its offset */
    assert_int_equal(b64_decode("YW*j", 4, 0, out, sizeof out, &n, &f), -1);
    assert_int_equal(f.at, 2);
    /* one character too many for any byte; three '=' */
    assert_int_equal(b64_decode("YWJjZ", 5, 0, out, sizeof out, &n, &f), -1);
    assert_int_equal(b64_decode("Y===", 4, 0, out, sizeof out, &n, &f), -1);
    /* "YR==" decodes to "a" with non-zero trailing bits: Go accepts it, a canonical key not */
    assert_int_equal(b64_decode("YR==", 4, B64_PAD_REQUIRED, out, sizeof out, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 'a');
    assert_int_equal(b64_decode("YR==", 4, B64_CANONICAL, out, sizeof out, &n, &f), -1);
    assert_string_equal(f.why, "non-zero trailing bits");
    /* a buffer too small */
    assert_int_equal(b64_decode("YWJjZGVm", 8, 0, out, 5, &n, &f), -1);
    assert_string_equal(f.why, "too long");
    /* empty text: zero bytes */
    assert_int_equal(b64_decode("", 0, B64_PAD_REQUIRED, out, sizeof out, &n, NULL), 0);
    assert_int_equal(n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_random_bytes_under_every_flag_set),
        cmocka_unit_test(test_malformed_text_is_refused_where_it_is_wrong),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
