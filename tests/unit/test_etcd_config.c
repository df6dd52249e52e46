/* test_etcd_config: GET /config's rendering of the Gardener etcd.conf.yaml. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sidecar/etcd_config.h"
#include "common/err.h"

#include <stdlib.h>
#include <string.h>

static const char conf[] =
    "# comment\n"
    "name: etcd-main\n"
    "member-name-prefix: etcd-main\n"
    "data-dir: /var/etcd/data/new.etcd\n"
    "quota-backend-bytes: 8589934592\n"
    "initial-advertise-peer-urls:\n"
    "  etcd-main-etcd-main-0:\n"
    "  - https://etcd-main-0.peer:2380\n"
    "  etcd-main-etcd-main-1:\n"
    "  - https://etcd-main-1.peer:2380\n"
    "advertise-client-urls:\n"
    "  etcd-main-etcd-main-0: [https://etcd-main-0:2379, https://e0.alt:2379]\n"
    "initial-cluster: etcd-main-etcd-main-0=https://etcd-main-0.peer:2380,"
    "etcd-main-etcd-main-1=https://etcd-main-1.peer:2380,etcd-main-etcd-main-2=https://x:2380\n"
    "client-transport-security:\n"
    "  cert-file: /var/etcd/ssl/tls.crt\n"
    "  auto-tls: false\n"
    "log-level: 'info'\n";

static char *render(const char *pod, const EtcdMember *m, size_t n) {
    char *out = NULL;
    assert_int_equal(etcd_config_render(conf, sizeof conf - 1, pod, m, n, &out), 0);
    return out;
}

static void test_config_resolves_this_members_name_and_urls(void **state) {
    (void)state;
    char *out = render("etcd-main-0", NULL, 0);
    assert_non_null(strstr(out, "name: \"etcd-main-etcd-main-0\"\n"));
    assert_non_null(
        strstr(out, "initial-advertise-peer-urls: \"https://etcd-main-0.peer:2380\"\n"));
    assert_non_null(
        strstr(out, "advertise-client-urls: \"https://etcd-main-0:2379,https://e0.alt:2379\"\n"));
    /* other keys kept as written, plain scalars stay plain (numbers keep their type) */
    assert_non_null(strstr(out, "quota-backend-bytes: 8589934592\n"));
    assert_non_null(strstr(out, "log-level: \"info\"\n"));
    assert_non_null(strstr(
        out, "client-transport-security: {cert-file: /var/etcd/ssl/tls.crt, auto-tls: false}\n"));
    /* three entries in the initial cluster, no learner: new */
    assert_non_null(strstr(out, "initial-cluster-state: new\n"));
    free(out);
}

static void test_config_drops_initial_cluster_entries_of_removed_members(void **state) {
    (void)state;
    EtcdMember m[2] = {0};
    strcpy(m[0].name, "etcd-main-etcd-main-1");
    strcpy(m[1].name, "etcd-main-etcd-main-2");
    m[1].is_learner = 1;
    char *out = render("etcd-main-0", m, 2);
    /* member 0 (this one) and the current members 1 and 2 stay */
    assert_non_null(strstr(out, "initial-cluster: \"etcd-main-etcd-main-0=https://etcd-main-0.peer:"
                                "2380,etcd-main-etcd-main-1=https://etcd-main-1.peer:2380,"
                                "etcd-main-etcd-main-2=https://x:2380\"\n"));
    assert_non_null(strstr(out, "initial-cluster-state: existing\n")); /* a learner exists */
    free(out);
    strcpy(m[1].name, "someone-else");
    m[1].is_learner = 0;
    out = render("etcd-main-0", m, 2);
    assert_non_null(strstr(out, "initial-cluster: \"etcd-main-etcd-main-0=https://etcd-main-0.peer:"
                                "2380,etcd-main-etcd-main-1=https://etcd-main-1.peer:2380\"\n"));
    free(out);
}

static void test_config_rejects_non_mapping_and_bad_yaml(void **state) {
    (void)state;
    char *out = NULL;
    assert_int_equal(etcd_config_render("- a\n- b\n", 8, "p", NULL, 0, &out), ERR_INVALID);
    assert_int_equal(etcd_config_render("a: [b\n", 6, "p", NULL, 0, &out), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "line"));
    assert_null(out);
}

static void test_config_member_gives_identity_and_every_client_url(void **state) {
    (void)state;
    EtcdConfigMember m;
    assert_int_equal(etcd_config_member(conf, sizeof conf - 1, "etcd-main-1", &m), 0);
    assert_string_equal(m.name, "etcd-main-etcd-main-1");
    assert_string_equal(m.peer_urls, "https://etcd-main-1.peer:2380");
    /* every member's client URLs: how a rejoining member reaches the others */
    assert_string_equal(m.client_urls, "https://etcd-main-0:2379,https://e0.alt:2379");
    assert_non_null(strstr(m.initial_cluster, "etcd-main-etcd-main-2=https://x:2380"));
    /* no POD_NAME: the file's name, whose URLs the maps do not list */
    assert_int_equal(etcd_config_member(conf, sizeof conf - 1, NULL, &m), 0);
    assert_string_equal(m.name, "etcd-main");
    assert_string_equal(m.peer_urls, "");
    assert_int_equal(etcd_config_member("- a\n", 4, NULL, &m), ERR_INVALID);
}

static void test_argv_flag_takes_the_last_value_in_go_flag_syntax(void **state) {
    (void)state;
    char *argv[] = {"etcd",
                    "--name",
                    "a",
                    "-name=b",
                    "--initial-cluster-state=new",
                    "--initial-cluster-state",
                    "existing",
                    "--names=x",
                    NULL};
    assert_string_equal(etcd_argv_flag(argv, "name"), "b");
    assert_string_equal(etcd_argv_flag(argv, "initial-cluster-state"), "existing");
    assert_null(etcd_argv_flag(argv, "data-dir"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_resolves_this_members_name_and_urls),
        cmocka_unit_test(test_config_drops_initial_cluster_entries_of_removed_members),
        cmocka_unit_test(test_config_rejects_non_mapping_and_bad_yaml),
        cmocka_unit_test(test_config_member_gives_identity_and_every_client_url),
        cmocka_unit_test(test_argv_flag_takes_the_last_value_in_go_flag_syntax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
