/* test_http: the HTTP server (src/server/http.c) with real requests over loopback: a handler that
 * waits runs on a worker, so a quick request is answered meanwhile; the query string is rebuilt
 * percent-encoded from the copied arguments, on a worker too; an announced body over the limit is
 * refused with 413; stop waits for the request in a worker. The floods (1,100 idle connections,
 * slowloris) run against the real server in tests/integration/test_server_connection_flood.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "server/http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int released, slow_started;
} Gate;

static void handler(void *ctx, const HttpRequest *req, HttpResponse *resp) {
    Gate *g = ctx;
    const char *path = http_request_path(req);
    if (!strcmp(path, "/slow")) { /* waits until the test releases it */
        pthread_mutex_lock(&g->mu);
        g->slow_started = 1;
        pthread_cond_broadcast(&g->cv);
        while (!g->released)
            pthread_cond_wait(&g->cv, &g->mu);
        pthread_mutex_unlock(&g->mu);
        http_respond(resp, 200, NULL, "slow");
    } else if (!strcmp(path, "/echo")) {
        char q[256];
        if (http_request_query_string(req, q, sizeof q)) snprintf(q, sizeof q, "too long");
        http_respond(resp, 200, NULL, q);
    } else {
        http_respond(resp, 200, NULL, "quick");
    }
}

static int inline_ok(void *ctx, const HttpRequest *req) {
    (void)ctx;
    return !strcmp(http_request_path(req), "/quick");
}

typedef struct {
    char body[256];
    size_t len;
} Buf;

static size_t collect(char *p, size_t size, size_t n, void *arg) {
    Buf *b = arg;
    size_t k = size * n;
    if (k > sizeof b->body - 1 - b->len) k = sizeof b->body - 1 - b->len;
    memcpy(b->body + b->len, p, k);
    b->len += k;
    b->body[b->len] = '\0';
    return size * n;
}

/* GET (or POST with Content-Length post_len) of path; the status, body in *b. */
static long request(int port, const char *path, long timeout_ms, long post_len, Buf *b) {
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    memset(b, 0, sizeof *b);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    struct curl_slist *h = NULL;
    char cl[64];
    if (post_len >= 0) { /* only the header: the server must answer before any body */
        snprintf(cl, sizeof cl, "Content-Length: %ld", post_len);
        h = curl_slist_append(h, cl);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    }
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

typedef struct {
    int port;
    long status;
    Buf b;
} SlowCall;

static void *slow_call(void *arg) {
    SlowCall *sc = arg;
    sc->status = request(sc->port, "/slow", 30000, -1, &sc->b);
    return NULL;
}

static void test_waiting_handler_does_not_hold_up_quick_answers(void **state) {
    (void)state;
    Gate g = {.released = 0};
    pthread_mutex_init(&g.mu, NULL);
    pthread_cond_init(&g.cv, NULL);
    HttpServerConfig cfg = {
        .bind_addr = "127.0.0.1", .port = 0, .handler = handler, .ctx = &g, .inline_ok = inline_ok};
    HttpServer *s = NULL;
    assert_int_equal(http_server_start(&cfg, &s), 0);
    int port = http_server_port(s);
    assert_true(port > 0);
    SlowCall sc = {.port = port};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_call, &sc), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.slow_started)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    /* /slow waits in its handler; a quick request and a worker request are answered meanwhile */
    Buf b;
    assert_int_equal(request(port, "/quick", 2000, -1, &b), 200);
    assert_string_equal(b.body, "quick");
    assert_int_equal(request(port, "/echo?final=true&k=a%20b&flag", 2000, -1, &b), 200);
    assert_string_equal(b.body, "?final=true&k=a%20b&flag");
    assert_int_equal(request(port, "/quick", 2000, HTTP_MAX_BODY + 1, &b), 413);
    pthread_mutex_lock(&g.mu);
    g.released = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(t, NULL);
    assert_int_equal(sc.status, 200);
    assert_string_equal(sc.b.body, "slow");
    http_server_stop(s);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.mu);
}

static void test_bad_listen_address_is_named(void **state) {
    (void)state;
    Gate g = {0};
    HttpServerConfig cfg = {.bind_addr = "10.0.0.300", .port = 0, .handler = handler, .ctx = &g};
    HttpServer *s = NULL;
    assert_int_not_equal(http_server_start(&cfg, &s), 0);
    assert_null(s);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiting_handler_does_not_hold_up_quick_answers),
        cmocka_unit_test(test_bad_listen_address_is_named),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
