/* test_recsort: the sorter under get, diff and history. Random records (seeded; the seed is
 * printed) go in with limits that keep them in memory, spill them into runs, and spill so often
 * that the runs are merged into one (RECSORT_MAX_RUNS); every time they must come out as qsort
 * orders a copy kept aside: by key bytes (shorter first on a tie, as etcd orders keys), then
 * revision, with every field, key and value byte intact. Also keyrange's etcd semantics and
 * inspect_kube_type on Kubernetes protobuf, JSON and hostile values. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/testutil.h"

#include "common/err.h"
#include "format/bbolt.h"
#include "inspect/inspect_print.h"
#include "inspect/keyrange.h"
#include "inspect/recsort.h"

typedef struct Ref {
    InspectRec h;
    uint8_t key[12];
    uint8_t value[40];
} Ref;

static int ref_cmp(const void *a, const void *b) {
    const Ref *x = a, *y = b;
    int c = bbolt_key_cmp(x->key, x->h.key_len, y->key, y->h.key_len);
    if (c) return c;
    if (x->h.main != y->h.main) return x->h.main < y->h.main ? -1 : 1;
    return x->h.sub < y->h.sub ? -1 : x->h.sub > y->h.sub;
}

static unsigned seed_of(void) {
    const char *s = getenv("ETCDBR_SEED");
    unsigned seed = s ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL);
    printf("seed=%u (ETCDBR_SEED=%u replays it)\n", seed, seed);
    return seed;
}

/* n random records through a sorter of mem_limit bytes; returns its spills. */
static size_t sort_and_check(size_t n, size_t mem_limit, unsigned seed) {
    srand(seed);
    Ref *refs = calloc(n, sizeof *refs);
    assert_non_null(refs);
    char dir[] = "/tmp/test_recsort.XXXXXX";
    assert_non_null(mkdtemp(dir));
    RecSort *s = NULL;
    assert_int_equal(recsort_new(dir, mem_limit, &s), 0);
    for (size_t i = 0; i < n; i++) {
        Ref *r = &refs[i];
        r->h.key_len = (uint32_t)(rand() % 4); /* few distinct short keys: many ties */
        for (uint32_t k = 0; k < r->h.key_len; k++)
            r->key[k] = (uint8_t)("ab\xff"[rand() % 3]);
        r->h.main = (int64_t)(i + 1); /* unique revisions, added out of key order */
        r->h.sub = rand() % 3;
        r->h.value_len = (uint32_t)(rand() % 40);
        r->h.value_size = r->h.value_len;
        r->h.create_revision = rand();
        r->h.version = rand();
        r->h.lease = rand();
        r->h.time_ns = rand();
        r->h.tombstone = (uint8_t)(rand() % 2);
        r->h.views = (uint8_t)(rand() % 4);
        r->h.object = (uint32_t)rand();
        for (uint32_t k = 0; k < r->h.value_len; k++)
            r->value[k] = (uint8_t)rand();
        assert_int_equal(recsort_add(s, &r->h, r->key, r->value), 0);
    }
    assert_int_equal(recsort_finish(s), 0);
    qsort(refs, n, sizeof *refs, ref_cmp);
    for (size_t i = 0; i <= n; i++) {
        const InspectRec *h;
        const uint8_t *key, *value;
        int got = 0;
        assert_int_equal(recsort_next(s, &h, &key, &value, &got), 0);
        assert_int_equal(got, i < n);
        if (!got) break;
        const Ref *r = &refs[i];
        assert_memory_equal(h, &r->h, sizeof *h);
        assert_memory_equal(key, r->key, r->h.key_len);
        assert_memory_equal(value, r->value, r->h.value_len);
    }
    size_t spills = recsort_spills(s);
    recsort_free(s);
    assert_int_equal(rmdir(dir), 0); /* every run file was unlinked */
    free(refs);
    return spills;
}

static void test_in_memory(void **state) {
    (void)state;
    assert_int_equal(sort_and_check(5000, 0, seed_of()), 0);
}

static void test_spilled_runs(void **state) {
    (void)state;
    size_t spills = sort_and_check(5000, 16 << 10, seed_of());
    assert_true(spills > 1 && spills < RECSORT_MAX_RUNS);
}

static void test_runs_merged_into_one(void **state) {
    (void)state;
    size_t spills = sort_and_check(20000, 4 << 10, seed_of());
    assert_true(spills > RECSORT_MAX_RUNS); /* at least one merge of every run happened */
}

static void test_empty(void **state) {
    (void)state;
    assert_int_equal(sort_and_check(0, 0, 1), 0);
}

static void test_key_too_large(void **state) {
    (void)state;
    RecSort *s = NULL;
    assert_int_equal(recsort_new("/tmp", 0, &s), 0);
    InspectRec h = {.key_len = RECSORT_MAX_KEY + 1};
    assert_int_equal(recsort_add(s, &h, (const uint8_t *)"", NULL), ERR_INVALID);
    recsort_free(s);
}

static int in_range(const char *key, const char *end, int prefix, int from_key, const char *k) {
    KeyRange kr;
    assert_int_equal(keyrange_make(key, end, prefix, from_key, &kr), 0);
    int has = keyrange_has(&kr, (const uint8_t *)k, strlen(k));
    keyrange_free(&kr);
    return has;
}

static void test_keyrange(void **state) {
    (void)state;
    assert_true(in_range("a", NULL, 0, 0, "a"));
    assert_false(in_range("a", NULL, 0, 0, "ab"));
    assert_true(in_range("a", "c", 0, 0, "b"));
    assert_false(in_range("a", "c", 0, 0, "c"));
    assert_true(in_range("/r/", NULL, 1, 0, "/r/x"));
    assert_false(in_range("/r/", NULL, 1, 0, "/r0"));
    assert_false(in_range("/r/", NULL, 1, 0, "/q/"));
    assert_true(in_range("", NULL, 1, 0, "anything"));
    assert_true(in_range("a\xff", NULL, 1, 0, "a\xff\xff"));
    assert_false(in_range("a\xff", NULL, 1, 0, "b"));
    assert_true(in_range("\xff", NULL, 1, 0, "\xff\x01")); /* all 0xff: every key from it */
    assert_true(in_range("m", NULL, 0, 1, "z"));
    assert_false(in_range("m", NULL, 0, 1, "l"));
    KeyRange kr;
    assert_int_equal(keyrange_make("a", "b", 1, 0, &kr), ERR_INVALID);
    assert_int_equal(keyrange_make("a", NULL, 1, 1, &kr), ERR_INVALID);
}

static void test_kube_type(void **state) {
    (void)state;
    char out[300];
    /* "k8s\0" + Unknown{typeMeta{apiVersion "v1", kind "Pod"}, raw "x"} */
    static const uint8_t pod[] = {'k', '8',  's', 0,   0x0a, 9,   0x0a, 2, 'v',
                                  '1', 0x12, 3,   'P', 'o',  'd', 0x12, 1, 'x'};
    assert_int_equal(inspect_kube_type(pod, sizeof pod, out, sizeof out), 1);
    assert_string_equal(out, "v1 Pod");
    const char *js = "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\"}";
    assert_int_equal(inspect_kube_type((const uint8_t *)js, strlen(js), out, sizeof out), 1);
    assert_string_equal(out, "apps/v1 Deployment");
    /* lengths beyond the value, a truncated varint, a group, plain text: not a type */
    static const uint8_t lie[] = {'k', '8', 's', 0, 0x0a, 0x7f, 0x0a, 2};
    static const uint8_t trunc[] = {'k', '8', 's', 0, 0x0a, 0xff, 0xff};
    static const uint8_t group[] = {'k', '8', 's', 0, 0x0b, 0x0c};
    assert_int_equal(inspect_kube_type(lie, sizeof lie, out, sizeof out), 0);
    assert_int_equal(inspect_kube_type(trunc, sizeof trunc, out, sizeof out), 0);
    assert_int_equal(inspect_kube_type(group, sizeof group, out, sizeof out), 0);
    assert_int_equal(inspect_kube_type((const uint8_t *)"hello", 5, out, sizeof out), 0);
    assert_int_equal(inspect_kube_type((const uint8_t *)"{\"kind\":1}", 10, out, sizeof out), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_memory),
        cmocka_unit_test(test_spilled_runs),
        cmocka_unit_test(test_runs_merged_into_one),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_key_too_large),
        cmocka_unit_test(test_keyrange),
        cmocka_unit_test(test_kube_type),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
