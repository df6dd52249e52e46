/* test_objhttp_parts: the part writer every multipart driver writes through (objhttp.h): how an
 * object's bytes are cut into parts (sizes per part number; eager and lazy hand-over, so an
 * object of one part stays for a plain PUT), that the parts put hold exactly the bytes written
 * and in order of number, that the before hook runs once per part before it is handed over, and
 * that any failure (a part's put, the hook) is sticky: later writes, finish and failed return it.
 * Randomised sizes come from a logged seed (ETCDBR_SEED replays one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/err.h"
#include "store/objhttp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PARTS 4096

typedef struct {
    pthread_mutex_t mu;
    size_t base;     /* part size: base for part 1, base + num for later ones */
    int fail_put;    /* part number whose put fails (0: none) */
    int fail_before; /* part number whose before hook fails (0: none) */
    int befores;     /* hook calls */
    int last_before; /* the last part number the hook saw */
    uint8_t *got[MAX_PARTS + 1];
    size_t got_len[MAX_PARTS + 1];
} Sink;

static size_t part_size(void *ctx, int num) {
    Sink *s = ctx;
    return num == 1 ? s->base : s->base + (size_t)num;
}

static int before(void *ctx, int num) {
    Sink *s = ctx;
    s->befores++;
    assert_int_equal(num, s->last_before + 1); /* once per part, in order */
    s->last_before = num;
    if (num == s->fail_before) return err_set(ERR_INVALID, "hook refuses part %d", num);
    return 0;
}

static int put(void *ctx, int num, const void *data, size_t len) {
    Sink *s = ctx;
    if (num == s->fail_put) return err_set(ERR_IO, "put of part %d failed", num);
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return err_set(ERR_NOMEM, "out of memory");
    memcpy(copy, data, len);
    pthread_mutex_lock(&s->mu);
    s->got[num] = copy;
    s->got_len[num] = len;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static void sink_init(Sink *s, size_t base) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->base = base;
}

static void sink_free(Sink *s) {
    for (int i = 0; i <= MAX_PARTS; i++)
        free(s->got[i]);
    pthread_mutex_destroy(&s->mu);
}

static ObjHttpPartWriter *pw_open(Sink *s, int eager, int parallel) {
    ObjHttpPartWriterConfig c = {.what = "Test",
                                 .key = "k",
                                 .parallel = parallel,
                                 .eager = eager,
                                 .part_size = part_size,
                                 .before = before,
                                 .put = put,
                                 .ctx = s};
    ObjHttpPartWriter *w = NULL;
    assert_int_equal(objhttp_pw_new(&c, &w), 0);
    return w;
}

/* Writes n bytes of pattern in chunks of random sizes. 0 or the first write's error. */
static int write_random(ObjHttpPartWriter *w, const uint8_t *data, size_t n, unsigned *seed) {
    size_t off = 0;
    while (off < n) {
        size_t k = 1 + (size_t)(rand_r(seed) % 3000);
        if (k > n - off) k = n - off;
        int rc = io_write(objhttp_pw_io(w), data + off, k);
        if (rc) return rc;
        off += k;
    }
    return 0;
}

/* Random object sizes and part sizes, eager and lazy, 1-4 in flight: the parts concatenate to
 * the object; every part but the last has its number's size; lazy keeps a one-part object whole
 * for a plain PUT (no part handed over), eager hands a full first part over. */
static void test_parts_hold_the_bytes_in_order(void **state) {
    (void)state;
    const char *env = getenv("ETCDBR_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("seed=%u (ETCDBR_SEED=%u replays it)\n", seed, seed);
    for (int round = 0; round < 60; round++) {
        size_t base = 1 + (size_t)(rand_r(&seed) % 5000);
        size_t n = (size_t)(rand_r(&seed) % 40000);
        if (round % 7 == 0) n = base; /* exactly one full part */
        int eager = round % 2, parallel = 1 + round % 4;
        uint8_t *data = malloc(n ? n : 1);
        assert_non_null(data);
        for (size_t i = 0; i < n; i++)
            data[i] = (uint8_t)rand_r(&seed);
        Sink s;
        sink_init(&s, base);
        ObjHttpPartWriter *w = pw_open(&s, eager, parallel);
        assert_int_equal(write_random(w, data, n, &seed), 0);
        assert_int_equal(objhttp_pw_total(w), n);
        if (!eager && n <= base) { /* one part: nothing handed over, the rest is the object */
            size_t len;
            const void *rest = objhttp_pw_rest(w, &len);
            assert_int_equal(objhttp_pw_parts(w), 0);
            assert_int_equal(len, n);
            if (n) assert_memory_equal(rest, data, n);
        }
        if (eager && n == base) assert_int_equal(objhttp_pw_parts(w), 1);
        assert_int_equal(objhttp_pw_finish(w), 0);
        int parts = objhttp_pw_parts(w);
        assert_int_equal(s.befores, parts);
        size_t off = 0;
        for (int p = 1; p <= parts; p++) {
            assert_non_null(s.got[p]);
            if (p < parts) assert_int_equal(s.got_len[p], part_size(&s, p));
            assert_true(s.got_len[p] > 0 && s.got_len[p] <= part_size(&s, p));
            assert_memory_equal(s.got[p], data + off, s.got_len[p]);
            off += s.got_len[p];
        }
        assert_int_equal(off, n);
        objhttp_pw_free(w, 0);
        sink_free(&s);
        free(data);
    }
}

/* A failed put (part 2) or a refusing hook (part 3): the next write, finish and failed all
 * return that failure with its message; nothing after it is taken as success. */
static void test_a_failure_is_sticky(void **state) {
    (void)state;
    uint8_t buf[1000];
    memset(buf, 'x', sizeof buf);
    for (int which = 0; which < 2; which++) {
        Sink s;
        sink_init(&s, 100);
        if (which == 0)
            s.fail_put = 2;
        else
            s.fail_before = 3;
        ObjHttpPartWriter *w = pw_open(&s, 0, 1);
        int rc = 0;
        for (int i = 0; i < 20 && !rc; i++)
            rc = io_write(objhttp_pw_io(w), buf, 100);
        if (!rc) rc = objhttp_pw_finish(w);
        assert_int_equal(rc, which == 0 ? ERR_IO : ERR_INVALID);
        assert_non_null(strstr(err_msg(), which == 0 ? "put of part 2" : "hook refuses part 3"));
        err_set(ERR_OK, "cleared");
        assert_int_equal(io_write(objhttp_pw_io(w), buf, 10), rc);
        assert_int_equal(objhttp_pw_finish(w), rc);
        assert_int_equal(objhttp_pw_failed(w), rc);
        assert_non_null(strstr(err_msg(), which == 0 ? "put of part 2" : "hook refuses part 3"));
        objhttp_pw_free(w, 1);
        sink_free(&s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parts_hold_the_bytes_in_order),
        cmocka_unit_test(test_a_failure_is_sticky),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
