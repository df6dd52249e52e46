/* test_objhttp_failure: the store layer's failure hook (objhttp_set_failure_hook), which the
 * sidecar counts in etcdbr_store_request_failures_total: it is called on every failed try of a
 * passing kind, as the try fails (will_retry says whether another follows), with a bounded class;
 * answers that are not passing failures (404) do not call it. Against a closed loopback port
 * (connection refused, a real one) and a loopback socket answering 503 then 404. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/err.h"
#include "store/objhttp.h"
#include "support/testutil.h"

#define MAX_SEEN 16

typedef struct {
    atomic_int n;
    char cls[MAX_SEEN][16];
    char provider[MAX_SEEN][16];
    long status[MAX_SEEN];
    int will_retry[MAX_SEEN];
} Seen;

static void on_failure(void *ctx, const ObjHttpFailure *f) {
    Seen *s = ctx;
    int i = atomic_fetch_add(&s->n, 1);
    if (i >= MAX_SEEN) return;
    snprintf(s->cls[i], sizeof s->cls[i], "%s", f->cls);
    snprintf(s->provider[i], sizeof s->provider[i], "%s", f->provider);
    s->status[i] = f->status;
    s->will_retry[i] = f->will_retry;
}

static ObjHttp *client(void) {
    ObjHttpConfig cfg = {.what = "S3", .timeout_ms = 5000, .retry = {3, 1, 2}};
    ObjHttp *h = NULL;
    assert_int_equal(objhttp_new(&cfg, &h), 0);
    return h;
}

static void test_refused_connection_calls_the_hook_on_every_try(void **state) {
    (void)state;
    int port = free_port();
    assert_true(port > 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/bucket/key", port);
    Seen seen;
    memset(&seen, 0, sizeof seen);
    objhttp_set_failure_hook(on_failure, &seen);
    ObjHttp *h = client();
    ObjHttpRequest req = {.method = "GET", .url = url};
    ObjHttpResponse resp = {0};
    assert_int_equal(objhttp_do(h, &req, &resp), ERR_IO);
    objhttp_response_clear(&resp);
    assert_int_equal(atomic_load(&seen.n), 3); /* 3 tries, 3 calls */
    for (int i = 0; i < 3; i++) {
        assert_string_equal(seen.cls[i], "connect");
        assert_string_equal(seen.provider[i], "S3");
        assert_int_equal(seen.status[i], 0);
        assert_int_equal(seen.will_retry[i], i < 2);
    }
    /* no hook: nothing is called */
    objhttp_set_failure_hook(NULL, NULL);
    assert_int_equal(objhttp_do(h, &req, &resp), ERR_IO);
    objhttp_response_clear(&resp);
    assert_int_equal(atomic_load(&seen.n), 3);
    objhttp_free(h);
}

/* A loopback server answering each connection with the next of its canned statuses. */
typedef struct {
    int fd;
    const int *statuses;
    int n;
} Canned;

static void *serve(void *arg) {
    Canned *c = arg;
    for (int i = 0; i < c->n; i++) {
        int fd = accept(c->fd, NULL, NULL);
        if (fd < 0) break;
        char buf[4096];
        ssize_t got = recv(fd, buf, sizeof buf, 0); /* a GET without a body fits */
        (void)got;
        char ans[160];
        int len = snprintf(ans, sizeof ans,
                           "HTTP/1.1 %d X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                           c->statuses[i]);
        ssize_t sent = send(fd, ans, (size_t)len, MSG_NOSIGNAL);
        (void)sent;
        close(fd);
    }
    return NULL;
}

static void test_5xx_is_counted_and_404_is_not(void **state) {
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    static const int statuses[] = {503, 404};
    Canned c = {lfd, statuses, 2};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve, &c), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/bucket/key", ntohs(a.sin_port));
    Seen seen;
    memset(&seen, 0, sizeof seen);
    objhttp_set_failure_hook(on_failure, &seen);
    ObjHttp *h = client();
    ObjHttpRequest req = {.method = "GET", .url = url};
    ObjHttpResponse resp = {0};
    /* 503 (retried, counted), then 404 (an answer: not counted, not retried) */
    assert_int_equal(objhttp_do(h, &req, &resp), ERR_NOT_FOUND);
    objhttp_response_clear(&resp);
    pthread_join(t, NULL);
    close(lfd);
    objhttp_set_failure_hook(NULL, NULL);
    assert_int_equal(atomic_load(&seen.n), 1);
    assert_string_equal(seen.cls[0], "http_5xx");
    assert_int_equal(seen.status[0], 503);
    assert_int_equal(seen.will_retry[0], 1);
    objhttp_free(h);
}

static void test_classes_are_bounded(void **state) {
    (void)state;
    assert_string_equal(objhttp_failure_class(0, CURLE_COULDNT_CONNECT), "connect");
    assert_string_equal(objhttp_failure_class(0, CURLE_COULDNT_RESOLVE_HOST), "connect");
    assert_string_equal(objhttp_failure_class(0, CURLE_OPERATION_TIMEDOUT), "timeout");
    assert_string_equal(objhttp_failure_class(0, CURLE_SSL_CONNECT_ERROR), "tls");
    assert_string_equal(objhttp_failure_class(0, CURLE_RECV_ERROR), "network");
    assert_string_equal(objhttp_failure_class(0, CURLE_GOT_NOTHING), "network");
    assert_string_equal(objhttp_failure_class(429, CURLE_OK), "throttled");
    assert_string_equal(objhttp_failure_class(500, CURLE_OK), "http_5xx");
    assert_string_equal(objhttp_failure_class(599, CURLE_OK), "http_5xx");
    assert_string_equal(objhttp_failure_class(408, CURLE_OK), "http_4xx");
    assert_string_equal(objhttp_failure_class(200, CURLE_OK), "other");
    assert_string_equal(objhttp_failure_class(0, CURLE_URL_MALFORMAT), "other");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_connection_calls_the_hook_on_every_try),
        cmocka_unit_test(test_5xx_is_counted_and_404_is_not),
        cmocka_unit_test(test_classes_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
