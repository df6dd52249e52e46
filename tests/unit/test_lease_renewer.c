/* test_lease_renewer: the member Lease's name and tls-enabled annotation from the etcd config
 * file (docs/go-tool.md §10.6). The updates themselves are tested against the fake API server
 * (tests/integration/test_k8s_lease_fake_apiserver.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sidecar/lease_renewer.h"
#include "common/err.h"

#include <string.h>

static int identity(const char *yaml, const char *pod, char *name, int *tls) {
    return lease_member_identity(yaml, strlen(yaml), pod, name, 254, tls);
}

static void test_member_name_has_the_prefix_and_tls_needs_every_peer_url_https(void **state) {
    (void)state;
    char name[254];
    int tls = -1;
    const char *all_https = "name: etcd-main\n"
                            "member-name-prefix: etcd-main\n"
                            "initial-advertise-peer-urls:\n"
                            "  etcd-main-etcd-main-0:\n"
                            "  - https://etcd-main-0.peer:2380\n"
                            "  - https://etcd-main-0.alt:2380\n"
                            "  etcd-main-etcd-main-1:\n"
                            "  - http://etcd-main-1.peer:2380\n";
    assert_int_equal(identity(all_https, "etcd-main-0", name, &tls), 0);
    assert_string_equal(name, "etcd-main-etcd-main-0");
    assert_int_equal(tls, 1);
    /* member 1's only URL is http */
    assert_int_equal(identity(all_https, "etcd-main-1", name, &tls), 0);
    assert_string_equal(name, "etcd-main-etcd-main-1");
    assert_int_equal(tls, 0);
}

static void test_mixed_or_missing_peer_urls_are_not_tls(void **state) {
    (void)state;
    char name[254];
    int tls = -1;
    const char *mixed = "initial-advertise-peer-urls:\n"
                        "  p-0: [https://a:2380, http://b:2380]\n";
    assert_int_equal(identity(mixed, "p-0", name, &tls), 0);
    assert_string_equal(name, "p-0"); /* no prefix: the pod name */
    assert_int_equal(tls, 0);
    const char *none = "name: x\n";
    assert_int_equal(identity(none, "p-0", name, &tls), 0);
    assert_int_equal(tls, 0);
    const char *other = "initial-advertise-peer-urls:\n  p-1: [https://a:2380]\n";
    assert_int_equal(identity(other, "p-0", name, &tls), 0);
    assert_int_equal(tls, 0); /* another member's URLs do not count */
    const char *scalar = "initial-advertise-peer-urls: https://a:2380,https://b:2380\n";
    assert_int_equal(identity(scalar, "p-0", name, &tls), 0);
    assert_int_equal(tls, 1);
}

static void test_bad_config_is_an_error(void **state) {
    (void)state;
    char name[254];
    int tls;
    assert_int_equal(identity("- a\n", "p-0", name, &tls), ERR_INVALID);
    assert_int_equal(identity("a: [b\n", "p-0", name, &tls), ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_name_has_the_prefix_and_tls_needs_every_peer_url_https),
        cmocka_unit_test(test_mixed_or_missing_peer_urls_are_not_tls),
        cmocka_unit_test(test_bad_config_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
