/* test_leader_proxy: the leader sidecar's address a follower forwards to (docs/go-tool.md §2: the
 * host of the leader's first client URL with this server's --server-port; https when the server
 * runs TLS). The forwarding itself runs against real sidecars in
 * tests/integration/test_server_leader_proxy_tls.sh and test_cluster_handover.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sidecar/leader_proxy.h"
#include "common/err.h"

#include <string.h>

static void test_first_client_url_host_with_the_server_port(void **state) {
    (void)state;
    char out[128];
    assert_int_equal(
        leader_proxy_base_url("http://10.0.0.2:2379,http://etcd-1:2379", 8080, 0, out, sizeof out),
        0);
    assert_string_equal(out, "http://10.0.0.2:8080");
    assert_int_equal(
        leader_proxy_base_url("https://etcd-main-1.svc:2379/", 9443, 1, out, sizeof out), 0);
    assert_string_equal(out, "https://etcd-main-1.svc:9443");
}

static void test_scheme_follows_this_servers_tls_not_etcds(void **state) {
    (void)state;
    char out[128];
    assert_int_equal(leader_proxy_base_url("https://127.0.0.3:2379", 8080, 0, out, sizeof out), 0);
    assert_string_equal(out, "http://127.0.0.3:8080");
    assert_int_equal(leader_proxy_base_url("127.0.0.3:2379", 8080, 1, out, sizeof out), 0);
    assert_string_equal(out, "https://127.0.0.3:8080");
}

static void test_ipv6_literal_keeps_its_brackets(void **state) {
    (void)state;
    char out[128];
    assert_int_equal(leader_proxy_base_url("http://[fd00::2]:2379", 8080, 0, out, sizeof out), 0);
    assert_string_equal(out, "http://[fd00::2]:8080");
    assert_int_equal(leader_proxy_base_url("http://[fd00::2:2379", 8080, 0, out, sizeof out),
                     ERR_INVALID);
}

static void test_no_host_or_no_room_is_invalid(void **state) {
    (void)state;
    char out[16];
    assert_int_equal(leader_proxy_base_url("http://:2379", 8080, 0, out, sizeof out), ERR_INVALID);
    assert_int_equal(leader_proxy_base_url("", 8080, 0, out, sizeof out), ERR_INVALID);
    assert_int_equal(
        leader_proxy_base_url("http://a-long-host-name:2379", 8080, 0, out, sizeof out),
        ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_client_url_host_with_the_server_port),
        cmocka_unit_test(test_scheme_follows_this_servers_tls_not_etcds),
        cmocka_unit_test(test_ipv6_literal_keeps_its_brackets),
        cmocka_unit_test(test_no_host_or_no_room_is_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
