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
#include "support/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* the headers of a request to the leader: the forwarded one carries the loop guard and, with a
 * token file, the file's current token (rotation included); the /healthz check carries neither;
 * a token file that holds no token now fails the request instead of sending none */
static void test_forwarded_request_headers(void **state) {
    (void)state;
    LeaderProxyConfig cfg = {0};
    struct curl_slist *l = (struct curl_slist *)1;
    assert_int_equal(leader_proxy_headers(&cfg, 0, &l), 0);
    assert_null(l);
    assert_int_equal(leader_proxy_headers(&cfg, 1, &l), 0);
    assert_non_null(l);
    assert_string_equal(l->data, LEADER_PROXY_HEADER ": etcdbrctl");
    assert_null(l->next);
    curl_slist_free_all(l);

    char dir[] = "/tmp/test_leader_proxy.XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/token", dir);
    write_file(path, "tok-1\n", 6);
    assert_int_equal(auth_token_open(path, &cfg.token), 0);
    assert_int_equal(leader_proxy_headers(&cfg, 1, &l), 0);
    assert_string_equal(l->data, LEADER_PROXY_HEADER ": etcdbrctl");
    assert_non_null(l->next);
    assert_string_equal(l->next->data, "Authorization: Bearer tok-1");
    curl_slist_free_all(l);
    assert_int_equal(leader_proxy_headers(&cfg, 0, &l), 0);
    assert_null(l);
    write_file(path, "tok-22\n", 7);
    assert_int_equal(leader_proxy_headers(&cfg, 1, &l), 0);
    assert_string_equal(l->next->data, "Authorization: Bearer tok-22");
    curl_slist_free_all(l);
    write_file(path, "", 0);
    l = (struct curl_slist *)1;
    assert_int_equal(leader_proxy_headers(&cfg, 1, &l), ERR_INVALID);
    assert_null(l);
    auth_token_free(cfg.token);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_client_url_host_with_the_server_port),
        cmocka_unit_test(test_scheme_follows_this_servers_tls_not_etcds),
        cmocka_unit_test(test_ipv6_literal_keeps_its_brackets),
        cmocka_unit_test(test_no_host_or_no_room_is_invalid),
        cmocka_unit_test(test_forwarded_request_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
