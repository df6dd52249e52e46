/* test_i64map: the int64 -> int64 hash map against a plain array as the reference, over random
 * operations from a logged seed (ETCDBR_TEST_SEED=<n> replays one), with keys chosen to collide
 * (equal low bits, lease-like 19-digit IDs, negative and extreme values). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/i64map.h"

static uint64_t rng_state;

static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t test_seed(void) {
    const char *s = getenv("ETCDBR_TEST_SEED");
    uint64_t seed = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    fprintf(stderr, "test_i64map: seed %" PRIu64 " (ETCDBR_TEST_SEED=%" PRIu64 " replays it)\n",
            seed, seed);
    return seed;
}

/* Keys that stress probing: a small range (many repeats), multiples of large powers of two
 * (equal low bits), lease-like IDs, negatives and the extremes. Never 0. */
static int64_t random_key(void) {
    int64_t k = 0;
    while (k == 0) {
        switch (rnd() % 6) {
        case 0:
            k = (int64_t)(rnd() % 64) - 32;
            break;
        case 1:
            k = (int64_t)((rnd() % 512) << 40);
            break;
        case 2:
            k = (int64_t)(UINT64_C(7587000000000000000) + rnd() % 1000); /* 19 digits */
            break;
        case 3: {
            static const int64_t edge[] = {INT64_MIN, INT64_MAX, -1, 1, INT64_MIN + 1};
            k = edge[rnd() % 5];
            break;
        }
        default:
            k = (int64_t)rnd();
        }
    }
    return k;
}

typedef struct {
    int64_t *k, *v;
    size_t n, cap;
} Ref;

static ptrdiff_t ref_find(const Ref *r, int64_t key) {
    for (size_t i = 0; i < r->n; i++)
        if (r->k[i] == key) return (ptrdiff_t)i;
    return -1;
}

static void ref_put(Ref *r, int64_t key, int64_t value) {
    ptrdiff_t i = ref_find(r, key);
    if (i >= 0) {
        r->v[i] = value;
        return;
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->k = realloc(r->k, r->cap * sizeof *r->k);
        r->v = realloc(r->v, r->cap * sizeof *r->v);
        assert_non_null(r->k);
        assert_non_null(r->v);
    }
    r->k[r->n] = key;
    r->v[r->n++] = value;
}

/* The map holds exactly the reference's entries: count, a get of each, and one iteration that
 * visits every entry once. */
static void check_equal(const I64Map *m, const Ref *r) {
    assert_int_equal(i64map_count(m), r->n);
    for (size_t i = 0; i < r->n; i++) {
        int64_t v = 0;
        assert_int_equal(i64map_get(m, r->k[i], &v), 1);
        assert_true(v == r->v[i]);
    }
    unsigned char *seen = calloc(r->n ? r->n : 1, 1);
    assert_non_null(seen);
    size_t pos = 0, visits = 0;
    int64_t k, v;
    while (i64map_next(m, &pos, &k, &v)) {
        ptrdiff_t i = ref_find(r, k);
        assert_true(i >= 0);
        assert_false(seen[i]);
        seen[i] = 1;
        assert_true(v == r->v[i]);
        visits++;
    }
    assert_int_equal(visits, r->n);
    assert_int_equal(i64map_next(m, &pos, &k, &v), 0); /* stays at the end */
    free(seen);
}

static void test_random_operations_match_a_reference(void **state) {
    (void)state;
    rng_state = test_seed();
    I64Map *m = NULL;
    assert_int_equal(i64map_new(&m), 0);
    Ref ref = {0};
    size_t clears = 0, max_n = 0;
    for (int op = 0; op < 200000; op++) {
        unsigned what = (unsigned)(rnd() % 1000);
        if (what < 600) {
            int64_t key = random_key(), value = (int64_t)rnd();
            assert_int_equal(i64map_put(m, key, value), 0);
            ref_put(&ref, key, value);
        } else if (what < 999) {
            int64_t key = random_key(), v = 12345;
            ptrdiff_t i = ref_find(&ref, key);
            int got = i64map_get(m, key, &v);
            assert_int_equal(got, i >= 0);
            if (i >= 0)
                assert_true(v == ref.v[i]);
            else
                assert_true(v == 12345); /* untouched when absent */
            assert_int_equal(i64map_get(m, key, NULL), i >= 0);
        } else {
            check_equal(m, &ref);
            i64map_clear(m);
            ref.n = 0;
            clears++;
        }
        if (ref.n > max_n) max_n = ref.n;
        if (op % 5000 == 0) check_equal(m, &ref);
    }
    check_equal(m, &ref);
    fprintf(stderr, "test_i64map: %zu clears, up to %zu entries\n", clears, max_n);
    free(ref.k);
    free(ref.v);
    i64map_free(m);
}

static void test_key_zero_is_reserved(void **state) {
    (void)state;
    I64Map *m = NULL;
    assert_int_equal(i64map_new(&m), 0);
    assert_int_equal(i64map_put(m, 0, 5), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "reserved"));
    assert_int_equal(i64map_get(m, 0, NULL), 0);
    assert_int_equal(i64map_put(m, 7, 0), 0); /* value 0 is an ordinary value */
    assert_int_equal(i64map_get(m, 0, NULL), 0);
    int64_t v = -1;
    assert_int_equal(i64map_get(m, 7, &v), 1);
    assert_int_equal(v, 0);
    assert_int_equal(i64map_count(m), 1);
    i64map_free(m);
}

static void test_empty_and_null_maps_hold_nothing(void **state) {
    (void)state;
    I64Map *m = NULL;
    assert_int_equal(i64map_new(&m), 0);
    size_t pos = 0;
    assert_int_equal(i64map_count(m), 0);
    assert_int_equal(i64map_get(m, 1, NULL), 0);
    assert_int_equal(i64map_next(m, &pos, NULL, NULL), 0);
    i64map_clear(m); /* clearing a map that never had a table */
    assert_int_equal(i64map_count(NULL), 0);
    assert_int_equal(i64map_get(NULL, 1, NULL), 0);
    assert_int_equal(i64map_put(NULL, 1, 1), ERR_INVALID);
    i64map_clear(NULL);
    i64map_free(NULL);
    i64map_free(m);
}

static void test_large_map_cleared_then_reused(void **state) {
    (void)state;
    I64Map *m = NULL;
    assert_int_equal(i64map_new(&m), 0);
    for (int round = 0; round < 3; round++) {
        /* sequential keys shifted into the high bits: identical low bits for all of them */
        for (int64_t i = 1; i <= 100000; i++)
            assert_int_equal(i64map_put(m, i << 32, i + round), 0);
        assert_int_equal(i64map_count(m), 100000);
        for (int64_t i = 1; i <= 100000; i += 997) {
            int64_t v = 0;
            assert_int_equal(i64map_get(m, i << 32, &v), 1);
            assert_true(v == i + round);
            assert_int_equal(i64map_get(m, (i << 32) + 1, NULL), 0);
        }
        i64map_clear(m);
        assert_int_equal(i64map_count(m), 0);
        assert_int_equal(i64map_get(m, INT64_C(1) << 32, NULL), 0);
        size_t pos = 0;
        assert_int_equal(i64map_next(m, &pos, NULL, NULL), 0);
    }
    i64map_free(m);
}

static void test_values_replaced_during_iteration(void **state) {
    (void)state;
    I64Map *m = NULL;
    assert_int_equal(i64map_new(&m), 0);
    for (int64_t k = -50; k <= 50; k++)
        if (k) assert_int_equal(i64map_put(m, k, k), 0);
    size_t pos = 0, n = 0;
    int64_t k, v;
    while (i64map_next(m, &pos, &k, &v)) {
        assert_true(v == k);
        assert_int_equal(i64map_put(m, k, -k), 0);
        n++;
    }
    assert_int_equal(n, 100);
    for (int64_t key = -50; key <= 50; key++) {
        if (!key) continue;
        assert_int_equal(i64map_get(m, key, &v), 1);
        assert_true(v == -key);
    }
    i64map_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_operations_match_a_reference),
        cmocka_unit_test(test_key_zero_is_reserved),
        cmocka_unit_test(test_empty_and_null_maps_hold_nothing),
        cmocka_unit_test(test_large_map_cleared_then_reused),
        cmocka_unit_test(test_values_replaced_during_iteration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
