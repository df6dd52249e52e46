/* test_cluster: --initial-cluster parsing and etcd's member and cluster IDs. The expected IDs
 * are etcd's own: a default member (name "default", http://localhost:2380, token
 * "etcd-cluster") is member 8e9e05c52164694d of cluster cdf818194e3a8c32, as every etcd started
 * without flags reports. A real 3-member cluster checks the rest
 * (tests/integration/test_cluster_quorum_loss.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/err.h"
#include "restore/cluster.h"

static void test_default_member_has_etcds_well_known_ids(void **state) {
    (void)state;
    InitialCluster c;
    assert_int_equal(initial_cluster_parse("default=http://localhost:2380", "etcd-cluster", &c), 0);
    assert_int_equal(c.n, 1);
    assert_string_equal(c.members[0].name, "default");
    assert_true(c.members[0].id == UINT64_C(0x8e9e05c52164694d));
    assert_true(c.cluster_id == UINT64_C(0xcdf818194e3a8c32));
    initial_cluster_free(&c);
}

static void test_repeated_name_joins_its_urls_and_sorts_them_for_the_id(void **state) {
    (void)state;
    InitialCluster c;
    assert_int_equal(
        initial_cluster_parse("a=http://h2:2380,b=http://h3:2380,a=http://h1:2380", "tok", &c), 0);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.members[0].peer_urls, "http://h2:2380,http://h1:2380");
    /* the order given does not matter: etcd sorts the URLs */
    assert_true(c.members[0].id == cluster_member_id("http://h1:2380,http://h2:2380", "tok"));
    assert_true(initial_cluster_find(&c, "b") == &c.members[1]);
    assert_null(initial_cluster_find(&c, "c"));
    uint64_t ids[2] = {c.members[1].id, c.members[0].id}; /* order does not matter either */
    assert_true(c.cluster_id == cluster_id_of(ids, 2));
    initial_cluster_free(&c);
}

static void test_token_changes_every_id(void **state) {
    (void)state;
    const char *spec = "m1=http://127.0.0.1:1,m2=http://127.0.0.1:2,m3=http://127.0.0.1:3";
    InitialCluster a, b;
    assert_int_equal(initial_cluster_parse(spec, "old", &a), 0);
    assert_int_equal(initial_cluster_parse(spec, "new", &b), 0);
    for (size_t i = 0; i < 3; i++)
        assert_true(a.members[i].id != b.members[i].id);
    assert_true(a.cluster_id != b.cluster_id);
    initial_cluster_free(&a);
    initial_cluster_free(&b);
}

static void test_bad_specs_are_refused_naming_the_entry(void **state) {
    (void)state;
    InitialCluster c;
    assert_int_equal(initial_cluster_parse("", "t", &c), ERR_INVALID);
    assert_int_equal(initial_cluster_parse("a=http://x:1,b", "t", &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "\"b\""));
    assert_int_equal(initial_cluster_parse("=http://x:1", "t", &c), ERR_INVALID);
    assert_int_equal(initial_cluster_parse("a=", "t", &c), ERR_INVALID);
    assert_int_equal(initial_cluster_parse("a=http://x:1,b=http://x:1", "t", &c), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "http://x:1"));
    assert_null(c.members);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_member_has_etcds_well_known_ids),
        cmocka_unit_test(test_repeated_name_joins_its_urls_and_sorts_them_for_the_id),
        cmocka_unit_test(test_token_changes_every_id),
        cmocka_unit_test(test_bad_specs_are_refused_naming_the_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
