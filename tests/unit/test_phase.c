/* test_phase: the phase timer (phase.h) — phases accumulate in first-use order, laps leave no
 * gap, a full table counts the rest as dropped, hostile names and negative durations are bounded
 * — the "last" slots read and written from several threads at once (each read a whole timer,
 * never a mix of two), and the stream timer (io_timer_new) around a writer that takes a known
 * time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "codec/io.h"
#include "common/phase.h"

static void sleep_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_add_and_order(void **state) {
    (void)state;
    PhaseTimer t;
    phase_timer_begin(&t);
    assert_true(t.start_ns > 0);
    phase_add(&t, "upload", 5);
    phase_add(&t, "etcd_read", 7);
    phase_add(&t, "upload", 10);
    phase_add(&t, "check", -3); /* negative: 0 */
    phase_add(NULL, "x", 1);    /* no timer: nothing */
    phase_add(&t, NULL, 1);
    assert_int_equal(t.n, 3);
    assert_string_equal(t.v[0].name, "upload");
    assert_int_equal(t.v[0].ns, 15);
    assert_string_equal(t.v[1].name, "etcd_read");
    assert_int_equal(phase_get(&t, "check"), 0);
    assert_int_equal(phase_get(&t, "nope"), -1);
    assert_int_equal(phase_sum_ns(&t), 22);
    /* saturates instead of overflowing */
    phase_add(&t, "upload", INT64_MAX);
    assert_int_equal(phase_get(&t, "upload"), INT64_MAX);
    assert_int_equal(phase_sum_ns(&t), INT64_MAX);
}

static void test_full_table_and_long_names(void **state) {
    (void)state;
    PhaseTimer t;
    phase_timer_begin(&t);
    char name[64];
    for (int i = 0; i < PHASE_MAX + 3; i++) {
        snprintf(name, sizeof name, "p%d", i);
        phase_add(&t, name, 100);
    }
    assert_int_equal(t.n, PHASE_MAX);
    assert_int_equal(t.dropped_ns, 300);
    assert_int_equal(phase_sum_ns(&t), (PHASE_MAX + 3) * 100);
    /* a known phase still accumulates when the table is full */
    phase_add(&t, "p0", 1);
    assert_int_equal(phase_get(&t, "p0"), 101);
    /* a name longer than the slot is cut, and the cut name is the same phase */
    PhaseTimer u;
    phase_timer_begin(&u);
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    phase_add(&u, longname, 1);
    phase_add(&u, longname, 2);
    assert_int_equal(u.n, 1);
    assert_int_equal(strlen(u.v[0].name), PHASE_NAME_MAX - 1);
    assert_int_equal(u.v[0].ns, 3);
    phase_timer_end(&u, 1, longname); /* label cut too */
    assert_int_equal(strlen(u.label), PHASE_LABEL_MAX - 1);
}

static void test_laps_cover_the_total(void **state) {
    (void)state;
    PhaseTimer t;
    phase_timer_begin(&t);
    int64_t lap = t.start_ns;
    sleep_ms(20);
    phase_lap(&t, "a", &lap);
    sleep_ms(10);
    phase_lap(&t, "b", &lap);
    sleep_ms(10);
    phase_lap(&t, "a", &lap);
    phase_timer_end(&t, 1, "Full-1");
    assert_true(phase_get(&t, "a") >= 30 * 1000000LL);
    assert_true(phase_get(&t, "b") >= 10 * 1000000LL);
    /* the laps leave no gap: their sum is the total up to the end call's own moment */
    assert_true(t.total_ns >= phase_sum_ns(&t));
    assert_true(t.total_ns - phase_sum_ns(&t) < 5 * 1000000LL);
    assert_int_equal(t.ok, 1);
    assert_string_equal(t.label, "Full-1");
    assert_true(t.ended_unix_s > 1600000000);
}

/* Writers store timers whose every phase holds the same value k; readers must never see two
 * values in one timer. */
static void *writer(void *arg) {
    int64_t base = (int64_t)(intptr_t)arg;
    for (int64_t k = 0; k < 2000; k++) {
        PhaseTimer t;
        phase_timer_begin(&t);
        for (int i = 0; i < PHASE_MAX; i++) {
            char name[8];
            snprintf(name, sizeof name, "p%d", i);
            phase_add(&t, name, base + k);
        }
        phase_timer_end(&t, 1, NULL);
        phase_last_set(PHASE_LAST_FULL, &t);
    }
    return NULL;
}

static void *reader(void *arg) {
    int *torn = arg;
    for (int k = 0; k < 4000; k++) {
        PhaseTimer t;
        if (!phase_last_get(PHASE_LAST_FULL, &t)) continue;
        for (size_t i = 1; i < t.n; i++)
            if (t.v[i].ns != t.v[0].ns) (*torn)++;
    }
    return NULL;
}

static void test_last_slots_threads(void **state) {
    (void)state;
    phase_last_clear();
    PhaseTimer t;
    assert_int_equal(phase_last_get(PHASE_LAST_DELTA, &t), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(phase_last_get(PHASE_LAST_N, &t), 0);
    phase_last_set(PHASE_LAST_N, &t); /* out of range: ignored */
    pthread_t w[2], r[2];
    int torn[2] = {0, 0};
    assert_int_equal(pthread_create(&w[0], NULL, writer, (void *)(intptr_t)0), 0);
    assert_int_equal(pthread_create(&w[1], NULL, writer, (void *)(intptr_t)1000000), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&r[i], NULL, reader, &torn[i]), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(w[i], NULL);
        pthread_join(r[i], NULL);
    }
    assert_int_equal(torn[0] + torn[1], 0);
    assert_int_equal(phase_last_get(PHASE_LAST_FULL, &t), 1);
    assert_int_equal(t.n, PHASE_MAX);
    assert_true(t.v[0].ns == 1999 || t.v[0].ns == 1001999);
    /* the kinds are separate */
    assert_int_equal(phase_last_get(PHASE_LAST_RESTORE, &t), 0);
    assert_string_equal(phase_last_name(PHASE_LAST_FULL), "full");
    assert_string_equal(phase_last_name(PHASE_LAST_DELTA), "delta");
    assert_string_equal(phase_last_name(PHASE_LAST_RESTORE), "restore");
    assert_string_equal(phase_last_name(PHASE_LAST_N), "");
    phase_last_clear();
    assert_int_equal(phase_last_get(PHASE_LAST_FULL, &t), 0);
}

/* A sink that takes 5 ms per write. */
typedef struct {
    IoWriter base;
    size_t bytes;
} SlowSink;

static int slow_write(IoWriter *w, const void *buf, size_t len) {
    (void)buf;
    sleep_ms(5);
    ((SlowSink *)w)->bytes += len;
    return 0;
}
static int slow_finish(IoWriter *w) {
    (void)w;
    return 0;
}
static void slow_free(IoWriter *w) {
    (void)w;
}
static const IoWriterVt slow_vt = {slow_write, slow_finish, slow_free};

static void test_stream_timer(void **state) {
    (void)state;
    SlowSink sink = {{&slow_vt}, 0};
    int64_t ns = 7; /* added to, never reset */
    IoWriter *t = io_timer_new(&sink.base, &ns);
    assert_non_null(t);
    for (int i = 0; i < 4; i++)
        assert_int_equal(io_write(t, "abcd", 4), 0);
    assert_int_equal(io_finish(t), 0);
    assert_int_equal(sink.bytes, 16);
    assert_true(ns >= 7 + 4 * 5 * 1000000LL);
    assert_true(ns < 7 + 4 * 5 * 1000000LL + 500 * 1000000LL);
    io_writer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_and_order),
        cmocka_unit_test(test_full_table_and_long_names),
        cmocka_unit_test(test_laps_cover_the_total),
        cmocka_unit_test(test_last_slots_threads),
        cmocka_unit_test(test_stream_timer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
