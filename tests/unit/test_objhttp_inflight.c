/* test_objhttp_inflight: the process-wide table of object store requests in flight
 * (objhttp.h): counts from start to end, oldest first, a full table still counting what it
 * cannot list, tokens that are not a request's ignored, many threads at once balanced at the
 * end; and real requests through objhttp counted and ended: refused ones, and a stream open
 * on a socket that answers half its body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store/objhttp.h"
#include "support/testutil.h"

static ObjHttpInflightStats stats(ObjHttpInflight *out, size_t cap) {
    ObjHttpInflightStats st;
    objhttp_inflight_list(out, cap, &st);
    return st;
}

static void test_begin_end_and_order(void **state) {
    (void)state;
    ObjHttpInflight in[OBJHTTP_INFLIGHT_SLOTS];
    ObjHttpInflightStats s0 = stats(in, OBJHTTP_INFLIGHT_SLOTS);
    assert_int_equal(s0.in_flight, 0);
    int a = objhttp_inflight_begin("S3", "PUT");
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    int b = objhttp_inflight_begin("a-provider-name-longer-than-its-field", "PROPFIND-LONG");
    assert_true(a > 0 && b > 0 && a != b);
    ObjHttpInflightStats st = stats(in, OBJHTTP_INFLIGHT_SLOTS);
    assert_int_equal(st.in_flight, 2);
    assert_int_equal(st.n, 2);
    assert_int_equal(st.started, s0.started + 2);
    assert_string_equal(in[0].provider, "S3"); /* oldest first */
    assert_string_equal(in[0].method, "PUT");
    assert_true(in[0].age_ms >= 20 && in[0].age_ms >= in[1].age_ms);
    assert_string_equal(in[1].provider, "a-provider-name"); /* cut to fit */
    assert_string_equal(in[1].method, "PROPFIN");
    /* a list smaller than the requests: the oldest, the count still whole */
    st = stats(in, 1);
    assert_int_equal(st.n, 1);
    assert_int_equal(st.in_flight, 2);
    assert_string_equal(in[0].provider, "S3");
    objhttp_inflight_end(a);
    objhttp_inflight_end(0);                          /* no request: nothing */
    objhttp_inflight_end(-5);                         /* not a token: nothing */
    objhttp_inflight_end(OBJHTTP_INFLIGHT_SLOTS + 9); /* not a token: nothing */
    st = stats(in, OBJHTTP_INFLIGHT_SLOTS);
    assert_int_equal(st.in_flight, 1);
    assert_string_equal(in[0].method, "PROPFIN");
    objhttp_inflight_end(b);
    st = stats(in, OBJHTTP_INFLIGHT_SLOTS);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.n, 0);
    assert_int_equal(st.finished, s0.finished + 2);
}

static void test_full_table_still_counts(void **state) {
    (void)state;
    int tok[OBJHTTP_INFLIGHT_SLOTS + 5];
    for (int i = 0; i < OBJHTTP_INFLIGHT_SLOTS + 5; i++)
        tok[i] = objhttp_inflight_begin("GCS", "GET");
    ObjHttpInflight in[OBJHTTP_INFLIGHT_SLOTS];
    ObjHttpInflightStats st = stats(in, OBJHTTP_INFLIGHT_SLOTS);
    assert_int_equal(st.in_flight, OBJHTTP_INFLIGHT_SLOTS + 5);
    assert_int_equal(st.n, OBJHTTP_INFLIGHT_SLOTS);
    for (int i = 0; i < OBJHTTP_INFLIGHT_SLOTS + 5; i++)
        objhttp_inflight_end(tok[i]);
    st = stats(in, OBJHTTP_INFLIGHT_SLOTS);
    assert_int_equal(st.in_flight, 0);
    /* every slot is free again */
    for (int i = 0; i < OBJHTTP_INFLIGHT_SLOTS; i++)
        tok[i] = objhttp_inflight_begin("GCS", "GET");
    st = stats(in, OBJHTTP_INFLIGHT_SLOTS);
    assert_int_equal(st.n, OBJHTTP_INFLIGHT_SLOTS);
    for (int i = 0; i < OBJHTTP_INFLIGHT_SLOTS; i++)
        objhttp_inflight_end(tok[i]);
}

static void *churn(void *arg) {
    (void)arg;
    for (int i = 0; i < 5000; i++) {
        int t = objhttp_inflight_begin("ABS", i % 2 ? "PUT" : "GET");
        ObjHttpInflight in[4];
        ObjHttpInflightStats st;
        objhttp_inflight_list(in, 4, &st);
        if (st.in_flight < 1) return (void *)1; /* this thread's own request is in flight */
        objhttp_inflight_end(t);
    }
    return NULL;
}

static void test_threads_balance(void **state) {
    (void)state;
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        assert_null(r);
    }
    ObjHttpInflight in[1];
    ObjHttpInflightStats st = stats(in, 1);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.started, st.finished);
}

/* Accepts one connection on *arg, reads the request head, answers 200 with 5 of the 10 body
 * bytes announced, then closes once the client has gone. */
static void *half_answer(void *arg) {
    int c = accept(*(int *)arg, NULL, NULL);
    if (c < 0) return NULL;
    char buf[4096];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t r = read(c, buf + got, sizeof buf - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n")) break;
    }
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234";
    if (write(c, head, sizeof head - 1) < 0) {
        close(c);
        return NULL;
    }
    while (read(c, buf, sizeof buf) > 0) /* until the client closes */
        ;
    close(c);
    return NULL;
}

static void test_real_request_counted(void **state) {
    (void)state;
    int port = free_port();
    if (port < 0) testutil_skip("no free port on 127.0.0.1");
    ObjHttpConfig cfg = {.what = "S3", .retry = {.attempts = 1}};
    ObjHttp *h = NULL;
    assert_int_equal(objhttp_new(&cfg, &h), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/bucket/key", port);
    ObjHttpInflight in[4];
    ObjHttpInflightStats s0 = stats(in, 4);
    ObjHttpRequest req = {.method = "GET", .url = url};
    ObjHttpResponse resp = {0};
    assert_int_not_equal(objhttp_do(h, &req, &resp), 0); /* refused: nothing listens */
    objhttp_response_clear(&resp);
    ObjHttpInflightStats st = stats(in, 4);
    assert_true(st.started >= s0.started + 1);
    assert_int_equal(st.in_flight, 0);
    /* a refused stream: counted and ended */
    ObjHttpStream *s = NULL;
    assert_int_not_equal(objhttp_stream_open(h, &req, NULL, &s), 0);
    st = stats(in, 4);
    assert_int_equal(st.in_flight, 0);
    /* a stream whose body is still coming (a socket here answers its headers and part of the
     * body): in flight from its open until it is freed */
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(ls, 1), 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);
    pthread_t srv;
    assert_int_equal(pthread_create(&srv, NULL, half_answer, &ls), 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/bucket/key", ntohs(sa.sin_port));
    assert_int_equal(objhttp_stream_open(h, &req, NULL, &s), 0);
    st = stats(in, 4);
    assert_int_equal(st.in_flight, 1);
    assert_string_equal(in[0].provider, "S3");
    assert_string_equal(in[0].method, "GET");
    objhttp_stream_free(s);
    st = stats(in, 4);
    assert_int_equal(st.in_flight, 0);
    pthread_join(srv, NULL);
    close(ls);
    objhttp_free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_end_and_order),
        cmocka_unit_test(test_full_table_still_counts),
        cmocka_unit_test(test_threads_balance),
        cmocka_unit_test(test_real_request_counted),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
