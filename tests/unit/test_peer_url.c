/* test_peer_url: the pure parts of the server's start-up peer URL update (docs/go-tool.md §10.4):
 * which of the etcd config file's peer URLs the member list lacks (any one means MemberUpdate), and
 * etcd-wrapper's stop URL. The update itself runs against a real etcd and a fake etcd-wrapper in
 * tests/integration/test_server_peer_url_update_fake_wrapper.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sidecar/peer_url.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_registered_urls_need_no_update(void **state) {
    (void)state;
    char out[256];
    assert_int_equal(
        peer_urls_unregistered("http://10.0.0.2:2380", "http://10.0.0.2:2380", out, sizeof out), 0);
    assert_string_equal(out, "");
    /* order, blanks and a trailing slash do not matter; more registered ones do not either */
    assert_int_equal(peer_urls_unregistered(" https://b:2380/ , https://a:2380",
                                            "https://a:2380,https://b:2380,https://c:2380", out,
                                            sizeof out),
                     0);
}

static void test_url_missing_from_the_list_is_named(void **state) {
    (void)state;
    char out[256];
    /* the TLS switch of etcd-druid: the file says https, the member list still http */
    assert_int_equal(peer_urls_unregistered("https://etcd-main-0.etcd-main-peer:2380",
                                            "http://etcd-main-0.etcd-main-peer:2380", out,
                                            sizeof out),
                     1);
    assert_string_equal(out, "https://etcd-main-0.etcd-main-peer:2380");
    /* a restored member still registered with etcd's default */
    assert_int_equal(peer_urls_unregistered("http://10.0.0.2:2380,http://10.0.0.3:2380",
                                            "http://localhost:2380", out, sizeof out),
                     2);
    assert_string_equal(out, "http://10.0.0.2:2380,http://10.0.0.3:2380");
    /* a member that has none registered */
    assert_int_equal(peer_urls_unregistered("http://a:1", "", out, sizeof out), 1);
}

static void test_prefixes_are_different_urls(void **state) {
    (void)state;
    assert_int_equal(peer_urls_unregistered("http://a:2380", "http://a:23800", NULL, 0), 1);
    assert_int_equal(peer_urls_unregistered("http://a:23800", "http://a:2380", NULL, 0), 1);
    assert_int_equal(peer_urls_unregistered("http://A:2380", "http://a:2380", NULL, 0), 1);
}

static void test_no_config_urls_means_nothing_to_do(void **state) {
    (void)state;
    char out[8] = "x";
    assert_int_equal(peer_urls_unregistered("", "http://a:2380", out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_int_equal(peer_urls_unregistered(" , ,", "", out, sizeof out), 0);
    assert_int_equal(peer_urls_unregistered(NULL, NULL, out, sizeof out), 0);
}

static void test_output_is_cut_not_overrun(void **state) {
    (void)state;
    char out[12];
    memset(out, 'Z', sizeof out);
    assert_int_equal(peer_urls_unregistered("http://aaaa:1,http://bbbb:2", "", out, 10), 2);
    assert_int_equal(strlen(out), 9);
    assert_int_equal(out[10], 'Z');
}

/* Seeded: config and registered lists drawn from a small URL pool; the count equals a set
 * difference computed here. */
static void test_count_is_the_set_difference_seeded(void **state) {
    (void)state;
    const char *env = getenv("ETCDBR_TEST_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("test_count_is_the_set_difference_seeded: seed %u (ETCDBR_TEST_SEED)\n", seed);
    srand(seed);
    static const char *pool[] = {"http://10.0.0.1:2380",     "https://10.0.0.1:2380",
                                 "http://10.0.0.2:2380",     "http://[fd00::1]:2380",
                                 "https://etcd-0.peer:2380", "http://localhost:2380"};
    const size_t np = sizeof pool / sizeof *pool;
    for (int round = 0; round < 2000; round++) {
        int in_cfg[6] = {0}, in_reg[6] = {0};
        char cfg[512] = "", reg[512] = "";
        for (size_t i = 0; i < np; i++) {
            in_cfg[i] = rand() % 2;
            in_reg[i] = rand() % 2;
            const char *slash = rand() % 4 == 0 ? "/" : "";
            if (in_cfg[i])
                snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), "%s%s%s", *cfg ? "," : "",
                         pool[i], slash);
            if (in_reg[i])
                snprintf(reg + strlen(reg), sizeof reg - strlen(reg), "%s%s", *reg ? "," : "",
                         pool[i]);
        }
        size_t want = 0;
        for (size_t i = 0; i < np; i++)
            want += in_cfg[i] && !in_reg[i];
        if (peer_urls_unregistered(cfg, reg, NULL, 0) != want)
            fail_msg("seed %u round %d: config \"%s\" registered \"%s\": want %zu", seed, round,
                     cfg, reg, want);
    }
}

static void test_wrapper_url_is_port_9095_on_the_first_endpoints_host(void **state) {
    (void)state;
    char out[128];
    assert_int_equal(etcd_wrapper_stop_url("http://10.0.0.2:2379", 0, out, sizeof out), 0);
    assert_string_equal(out, "http://10.0.0.2:9095/stop");
    /* the scheme follows this server's TLS (the Go tool), not etcd's */
    assert_int_equal(etcd_wrapper_stop_url("http://etcd-main-local:2379", 1, out, sizeof out), 0);
    assert_string_equal(out, "https://etcd-main-local:9095/stop");
    assert_int_equal(etcd_wrapper_stop_url("127.0.0.2:2379", 0, out, sizeof out), 0);
    assert_string_equal(out, "http://127.0.0.2:9095/stop");
    assert_int_equal(etcd_wrapper_stop_url("https://[fd00::2]:2379", 1, out, sizeof out), 0);
    assert_string_equal(out, "https://[fd00::2]:9095/stop");
}

static void test_wrapper_url_without_host_is_invalid(void **state) {
    (void)state;
    char out[128];
    assert_int_equal(etcd_wrapper_stop_url("http://:2379", 0, out, sizeof out), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "etcd-wrapper"));
    assert_int_equal(etcd_wrapper_stop_url("http://10.0.0.2:2379", 0, out, 20), ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registered_urls_need_no_update),
        cmocka_unit_test(test_url_missing_from_the_list_is_named),
        cmocka_unit_test(test_prefixes_are_different_urls),
        cmocka_unit_test(test_no_config_urls_means_nothing_to_do),
        cmocka_unit_test(test_output_is_cut_not_overrun),
        cmocka_unit_test(test_count_is_the_set_difference_seeded),
        cmocka_unit_test(test_wrapper_url_is_port_9095_on_the_first_endpoints_host),
        cmocka_unit_test(test_wrapper_url_without_host_is_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
