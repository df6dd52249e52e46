/* test_etcd_client: etcd_client, grpc and etcd_proc against a REAL etcd started with
 * etcd_proc_start in a temporary directory (no mocks). Most tests share one etcd; TLS, auth and
 * fragmentation tests start their own. Skipped only when no etcd binary is found.
 * Also prints sequential etcd_txn vs etcd_txn_many rates (informational). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fsutil.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_proc.h"
#include "support/testutil.h"

typedef struct Env {
    char dir[256];
    EtcdProc *proc;
    EtcdClient *c;
} Env;

static Env env;
static int etcd_missing;

static const char *etcd_bin(void) {
    const char *b = getenv("ETCDBR_ETCD_BIN");
    return b && *b ? b : "etcd";
}

static int find_etcd(void) {
    const char *b = etcd_bin();
    if (strchr(b, '/')) return access(b, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path) return 0;
    char *copy = strdup(path), *save = NULL;
    int found = 0;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", d, b);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int new_client(const char *url, EtcdClient **out) {
    const char *eps[1] = {url};
    EtcdConfig cfg = {.endpoints = eps, .n_endpoints = 1, .connection_timeout_ms = 10000};
    return etcd_client_new(&cfg, out);
}

/* starts an etcd in dir/sub with optional extras */
static int start_etcd(const char *dir, const char *sub, EtcdProcConfig *cfg, EtcdProc **out) {
    char data[512], log[512];
    snprintf(data, sizeof data, "%s/%s.data", dir, sub);
    snprintf(log, sizeof log, "%s/%s.log", dir, sub);
    cfg->data_dir = data;
    cfg->log_path = log;
    cfg->unsafe_no_fsync = 1;
    cfg->ready_timeout_ms = 30000;
    int rc = etcd_proc_start(cfg, out);
    if (rc) fprintf(stderr, "etcd_proc_start: %s\n", err_msg());
    return rc;
}

static int group_setup(void **state) {
    (void)state;
    if (!find_etcd()) {
        etcd_missing = 1;
        return 0;
    }
    snprintf(env.dir, sizeof env.dir, "/tmp/etcdbr-test-etcd-XXXXXX");
    if (!mkdtemp(env.dir)) return -1;
    EtcdProcConfig cfg = {.name = "unit"};
    if (start_etcd(env.dir, "main", &cfg, &env.proc)) return -1;
    if (new_client(etcd_proc_client_url(env.proc), &env.c)) return -1;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    etcd_client_free(env.c);
    if (env.proc && etcd_proc_stop(env.proc)) fprintf(stderr, "etcd_proc_stop: %s\n", err_msg());
    if (env.dir[0]) fs_remove_tree(env.dir);
    return 0;
}

#define NEED_ETCD()                                                                                \
    do {                                                                                           \
        if (etcd_missing) testutil_skip("no etcd on PATH");                                        \
    } while (0)

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != 0) fail_msg("%s -> %s: %s", #expr, err_name(rc_), err_msg());                   \
    } while (0)

/* ---- range collection ---- */

typedef struct Kv {
    uint8_t *key, *value;
    size_t key_len, value_len;
    int64_t mod_revision, create_revision, version;
} Kv;

typedef struct Kvs {
    Kv *v;
    size_t n, cap;
} Kvs;

static int collect(void *ctx, const EtcdKeyValue *kv) {
    Kvs *k = ctx;
    if (k->n == k->cap) {
        k->cap = k->cap ? k->cap * 2 : 16;
        k->v = realloc(k->v, k->cap * sizeof *k->v);
    }
    Kv *o = &k->v[k->n++];
    o->key = malloc(kv->key_len + 1);
    memcpy(o->key, kv->key, kv->key_len);
    o->key_len = kv->key_len;
    o->value = malloc(kv->value_len + 1);
    if (kv->value_len) memcpy(o->value, kv->value, kv->value_len);
    o->value_len = kv->value_len;
    o->mod_revision = kv->mod_revision;
    o->create_revision = kv->create_revision;
    o->version = kv->version;
    return 0;
}

static void kvs_free(Kvs *k) {
    for (size_t i = 0; i < k->n; i++) {
        free(k->v[i].key);
        free(k->v[i].value);
    }
    free(k->v);
    memset(k, 0, sizeof *k);
}

static int count_cb(void *ctx, const EtcdKeyValue *kv) {
    (void)kv;
    (*(size_t *)ctx)++;
    return 0;
}

/* ---- tests on the shared etcd ---- */

static void test_put_range_round_trips_binary_empty_and_1mib_values(void **state) {
    (void)state;
    NEED_ETCD();
    static const uint8_t key[] = {'b', 'i', 'n', 0, 'k', 0xff, 0x01};
    static const uint8_t val[] = {0, 1, 2, 0, 0xfe, 0};
    int64_t rev = 0, hrev = 0;
    CHECK(etcd_put(env.c, key, sizeof key, val, sizeof val, 0, &rev));
    assert_true(rev > 0);
    Kvs k = {0};
    CHECK(etcd_range(env.c, key, sizeof key, NULL, 0, 0, collect, &k, &hrev));
    assert_int_equal(k.n, 1);
    assert_int_equal(k.v[0].key_len, sizeof key);
    assert_memory_equal(k.v[0].key, key, sizeof key);
    assert_int_equal(k.v[0].value_len, sizeof val);
    assert_memory_equal(k.v[0].value, val, sizeof val);
    assert_int_equal(k.v[0].mod_revision, rev);
    assert_true(hrev >= rev);
    kvs_free(&k);

    CHECK(etcd_put(env.c, "empty", 5, NULL, 0, 0, &rev));
    CHECK(etcd_range(env.c, "empty", 5, NULL, 0, 0, collect, &k, NULL));
    assert_int_equal(k.n, 1);
    assert_int_equal(k.v[0].value_len, 0);
    kvs_free(&k);

    size_t big = 1024 * 1024;
    uint8_t *bv = malloc(big);
    for (size_t i = 0; i < big; i++)
        bv[i] = (uint8_t)(i * 7 + (i >> 9));
    CHECK(etcd_put(env.c, "big", 3, bv, big, 0, &rev));
    CHECK(etcd_range(env.c, "big", 3, NULL, 0, 0, collect, &k, NULL));
    assert_int_equal(k.n, 1);
    assert_int_equal(k.v[0].value_len, big);
    assert_memory_equal(k.v[0].value, bv, big);
    kvs_free(&k);
    free(bv);

    /* a missing key is an empty result, not an error */
    CHECK(etcd_range(env.c, "no-such-key", 11, NULL, 0, 0, collect, &k, NULL));
    assert_int_equal(k.n, 0);
}

static void put_many(const char *prefix, int n) {
    EtcdTxnOp ops[128];
    char keys[128][64];
    for (int base = 0; base < n; base += 128) {
        int m = n - base < 128 ? n - base : 128;
        for (int j = 0; j < m; j++) {
            int len = snprintf(keys[j], sizeof keys[j], "%s%06d", prefix, base + j);
            ops[j] = (EtcdTxnOp){.type = ETCD_OP_PUT,
                                 .key = (const uint8_t *)keys[j],
                                 .key_len = (size_t)len,
                                 .value = (const uint8_t *)"v",
                                 .value_len = 1};
        }
        EtcdTxnResult r;
        CHECK(etcd_txn(env.c, NULL, ops, (size_t)m, &r));
        assert_int_equal(r.succeeded, 1);
    }
}

static void test_range_pages_over_more_than_1000_keys(void **state) {
    (void)state;
    NEED_ETCD();
    put_many("page/", 2500);
    Kvs k = {0};
    int64_t hrev = 0;
    CHECK(etcd_range(env.c, "page/", 5, "page0", 5, 0, collect, &k, &hrev));
    assert_int_equal(k.n, 2500);
    for (size_t i = 0; i < k.n; i++) {
        char want[32];
        snprintf(want, sizeof want, "page/%06zu", i);
        assert_int_equal(k.v[i].key_len, strlen(want));
        assert_memory_equal(k.v[i].key, want, strlen(want));
        assert_true(k.v[i].mod_revision <= hrev);
    }
    kvs_free(&k);
    /* "\0" as range_end = every key >= key */
    size_t n = 0;
    CHECK(etcd_range(env.c, "page/", 5, "\0", 1, 0, count_cb, &n, NULL));
    assert_true(n >= 2500);
}

static void test_range_pages_big_values_to_the_end(void **state) {
    (void)state;
    NEED_ETCD();
    /* 1000 x 8 KiB = 8 MiB in the first page: later pages use a smaller limit */
    enum { N = 1300, V = 8192, PER_TXN = 100 };
    uint8_t *val = malloc(V);
    memset(val, 'v', V);
    EtcdTxnOp ops[PER_TXN];
    char keys[PER_TXN][32];
    for (int base = 0; base < N; base += PER_TXN) {
        for (int j = 0; j < PER_TXN; j++) {
            int len = snprintf(keys[j], sizeof keys[j], "bigv/%06d", base + j);
            ops[j] = (EtcdTxnOp){.type = ETCD_OP_PUT,
                                 .key = (const uint8_t *)keys[j],
                                 .key_len = (size_t)len,
                                 .value = val,
                                 .value_len = V};
        }
        EtcdTxnResult r;
        CHECK(etcd_txn(env.c, NULL, ops, PER_TXN, &r));
    }
    Kvs k = {0};
    CHECK(etcd_range(env.c, "bigv/", 5, "bigv0", 5, 0, collect, &k, NULL));
    assert_int_equal(k.n, N);
    for (size_t i = 0; i < k.n; i++) {
        char want[32];
        snprintf(want, sizeof want, "bigv/%06zu", i);
        assert_memory_equal(k.v[i].key, want, strlen(want));
        assert_int_equal(k.v[i].value_len, V);
    }
    kvs_free(&k);
    free(val);
    int64_t deleted = 0;
    CHECK(etcd_delete_range(env.c, "bigv/", 5, "bigv0", 5, &deleted, NULL));
    assert_int_equal(deleted, N);
}

static int stop_after_3(void *ctx, const EtcdKeyValue *kv) {
    (void)kv;
    return ++*(int *)ctx == 3 ? 42 : 0;
}

static void test_range_callback_stops_iteration(void **state) {
    (void)state;
    NEED_ETCD();
    int seen = 0;
    int rc = etcd_range(env.c, "page/", 5, "page0", 5, 0, stop_after_3, &seen, NULL);
    assert_int_equal(rc, 42);
    assert_int_equal(seen, 3);
}

static void test_delete_range_removes_prefix(void **state) {
    (void)state;
    NEED_ETCD();
    int64_t deleted = 0, rev = 0;
    CHECK(etcd_delete_range(env.c, "page/", 5, "page0", 5, &deleted, &rev));
    assert_int_equal(deleted, 2500);
    assert_true(rev > 0);
    size_t n = 0;
    CHECK(etcd_range(env.c, "page/", 5, "page0", 5, 0, count_cb, &n, NULL));
    assert_int_equal(n, 0);
    /* single-key delete of a missing key deletes nothing */
    CHECK(etcd_delete_range(env.c, "page/x", 6, NULL, 0, &deleted, NULL));
    assert_int_equal(deleted, 0);
}

static void test_txn_three_puts_share_one_revision(void **state) {
    (void)state;
    NEED_ETCD();
    EtcdTxnOp ops[3] = {
        {.type = ETCD_OP_PUT,
         .key = (const uint8_t *)"t/a",
         .key_len = 3,
         .value = (const uint8_t *)"1",
         .value_len = 1},
        {.type = ETCD_OP_PUT,
         .key = (const uint8_t *)"t/b",
         .key_len = 3,
         .value = (const uint8_t *)"2",
         .value_len = 1},
        {.type = ETCD_OP_PUT,
         .key = (const uint8_t *)"t/c",
         .key_len = 3,
         .value = (const uint8_t *)"3",
         .value_len = 1},
    };
    EtcdTxnResult r;
    CHECK(etcd_txn(env.c, NULL, ops, 3, &r));
    assert_int_equal(r.succeeded, 1);
    Kvs k = {0};
    CHECK(etcd_range(env.c, "t/", 2, "t0", 2, 0, collect, &k, NULL));
    assert_int_equal(k.n, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(k.v[i].mod_revision, r.revision);
    kvs_free(&k);
    /* delete op with a range inside a txn */
    EtcdTxnOp del = {.type = ETCD_OP_DELETE,
                     .key = (const uint8_t *)"t/",
                     .key_len = 2,
                     .range_end = (const uint8_t *)"t0",
                     .range_end_len = 2};
    EtcdTxnResult r2;
    CHECK(etcd_txn(env.c, NULL, &del, 1, &r2));
    assert_int_equal(r2.revision, r.revision + 1);
    size_t n = 0;
    CHECK(etcd_range(env.c, "t/", 2, "t0", 2, 0, count_cb, &n, NULL));
    assert_int_equal(n, 0);
}

static void test_txn_compare_true_applies_false_does_nothing(void **state) {
    (void)state;
    NEED_ETCD();
    int64_t rev = 0;
    CHECK(etcd_put(env.c, "cmp", 3, "v0", 2, 0, &rev));
    EtcdTxnOp op = {.type = ETCD_OP_PUT,
                    .key = (const uint8_t *)"cmp",
                    .key_len = 3,
                    .value = (const uint8_t *)"v1",
                    .value_len = 2};
    EtcdCompare cmp = {
        .kind = ETCD_CMP_MOD_EQUAL, .key = (const uint8_t *)"cmp", .key_len = 3, .value = rev};
    EtcdTxnResult r;
    CHECK(etcd_txn(env.c, &cmp, &op, 1, &r));
    assert_int_equal(r.succeeded, 1);
    assert_int_equal(r.revision, rev + 1);
    /* same guard again: mod_revision moved on, so nothing is applied */
    CHECK(etcd_txn(env.c, &cmp, &op, 1, &r));
    assert_int_equal(r.succeeded, 0);
    assert_int_equal(r.revision, rev + 1);
    int64_t cur = 0;
    CHECK(etcd_get_revision(env.c, &cur));
    assert_int_equal(cur, rev + 1);
    /* version guard: version 0 = "key absent" */
    EtcdCompare absent = {.kind = ETCD_CMP_VERSION_EQUAL,
                          .key = (const uint8_t *)"cmp-new",
                          .key_len = 7,
                          .value = 0};
    EtcdTxnOp create = {.type = ETCD_OP_PUT, .key = (const uint8_t *)"cmp-new", .key_len = 7};
    CHECK(etcd_txn(env.c, &absent, &create, 1, &r));
    assert_int_equal(r.succeeded, 1);
    CHECK(etcd_txn(env.c, &absent, &create, 1, &r));
    assert_int_equal(r.succeeded, 0);
}

static void test_txn_many_applies_all_with_consecutive_revisions(void **state) {
    (void)state;
    NEED_ETCD();
    enum { N = 200 };
    static char keys[N][32];
    static EtcdTxnOp ops[N];
    static EtcdTxnReq reqs[N];
    static EtcdTxnResult res[N];
    int64_t base = 0;
    CHECK(etcd_get_revision(env.c, &base));
    for (int i = 0; i < N; i++) {
        int len = snprintf(keys[i], sizeof keys[i], "many/%04d", i);
        ops[i] = (EtcdTxnOp){.type = ETCD_OP_PUT,
                             .key = (const uint8_t *)keys[i],
                             .key_len = (size_t)len,
                             .value = (const uint8_t *)keys[i],
                             .value_len = (size_t)len};
        reqs[i] = (EtcdTxnReq){.cmp = {.kind = ETCD_CMP_VERSION_EQUAL,
                                       .key = ops[i].key,
                                       .key_len = ops[i].key_len,
                                       .value = 0},
                               .ops = &ops[i],
                               .n_ops = 1};
    }
    CHECK(etcd_txn_many(env.c, reqs, N, res));
    int in_order = 1;
    uint8_t seen[N] = {0};
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].succeeded, 1);
        assert_true(res[i].revision > base && res[i].revision <= base + N);
        assert_int_equal(seen[res[i].revision - base - 1], 0);
        seen[res[i].revision - base - 1] = 1;
        if (res[i].revision != base + 1 + i) in_order = 0;
    }
    if (!in_order) fprintf(stderr, "note: txn_many batch was applied out of order\n");
    /* every result's revision is the key's mod_revision */
    Kvs k = {0};
    CHECK(etcd_range(env.c, "many/", 5, "many0", 5, 0, collect, &k, NULL));
    assert_int_equal(k.n, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(k.v[i].mod_revision, res[i].revision);
    kvs_free(&k);
    /* repeated: every guard fails, nothing changes */
    CHECK(etcd_txn_many(env.c, reqs, N, res));
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i].succeeded, 0);
        assert_int_equal(res[i].revision, base + N);
    }
    CHECK(etcd_txn_many(env.c, reqs, 0, res));
}

static void test_status_reports_version_leader_and_revision(void **state) {
    (void)state;
    NEED_ETCD();
    EtcdStatus st;
    int64_t rev = 0;
    CHECK(etcd_put(env.c, "st", 2, "x", 1, 0, &rev));
    CHECK(etcd_status(env.c, &st));
    assert_true(strlen(st.version) >= 5);
    assert_true(st.leader != 0);
    assert_true(st.member_id == st.leader);
    assert_true(st.cluster_id != 0);
    assert_true(st.revision >= rev);
    assert_true(st.db_size > 0 && st.db_size_in_use > 0);
    assert_true(st.raft_term >= 1 && st.raft_index > 0);
    int64_t cur = 0;
    CHECK(etcd_get_revision(env.c, &cur));
    assert_int_equal(cur, rev);
    assert_string_equal(etcd_client_endpoint(env.c), etcd_proc_client_url(env.proc));
}

typedef struct Ev {
    EtcdOpType type;
    char key[64];
    int64_t mod_revision;
} Ev;

/* Collects events until n are seen or ~10 s pass. */
static size_t watch_collect(EtcdWatch *w, Ev *out, size_t n) {
    size_t got_n = 0;
    for (int tries = 0; tries < 100 && got_n < n; tries++) {
        EtcdWatchResponse r;
        int got = 0;
        CHECK(etcd_watch_next(w, 100, &r, &got));
        if (!got) continue;
        assert_int_equal(r.canceled, 0);
        for (size_t i = 0; i < r.n_events && got_n < n; i++) {
            out[got_n].type = r.events[i].type;
            snprintf(out[got_n].key, sizeof out[got_n].key, "%.*s", (int)r.events[i].kv.key_len,
                     (const char *)r.events[i].kv.key);
            out[got_n].mod_revision = r.events[i].kv.mod_revision;
            got_n++;
        }
    }
    return got_n;
}

static void test_watch_receives_put_and_delete_with_revisions(void **state) {
    (void)state;
    NEED_ETCD();
    EtcdWatch *w = NULL;
    CHECK(etcd_watch_open(env.c, "w/", 2, "w0", 2, 0, 0, &w));
    int64_t r1, r2, r3, deleted;
    CHECK(etcd_put(env.c, "w/a", 3, "1", 1, 0, &r1));
    CHECK(etcd_put(env.c, "w/b", 3, "2", 1, 0, &r2));
    CHECK(etcd_put(env.c, "x/ignored", 9, "3", 1, 0, NULL));
    CHECK(etcd_delete_range(env.c, "w/a", 3, NULL, 0, &deleted, &r3));
    Ev ev[3];
    assert_int_equal(watch_collect(w, ev, 3), 3);
    assert_int_equal(ev[0].type, ETCD_OP_PUT);
    assert_string_equal(ev[0].key, "w/a");
    assert_int_equal(ev[0].mod_revision, r1);
    assert_int_equal(ev[1].type, ETCD_OP_PUT);
    assert_string_equal(ev[1].key, "w/b");
    assert_int_equal(ev[1].mod_revision, r2);
    assert_int_equal(ev[2].type, ETCD_OP_DELETE);
    assert_string_equal(ev[2].key, "w/a");
    assert_int_equal(ev[2].mod_revision, r3);
    /* nothing more: a timeout is got = 0, not an error */
    EtcdWatchResponse r;
    int got = 1;
    CHECK(etcd_watch_next(w, 50, &r, &got));
    assert_int_equal(got, 0);
    etcd_watch_close(w);

    /* from a past revision: history is replayed */
    CHECK(etcd_watch_open(env.c, "w/", 2, "w0", 2, r2, 0, &w));
    assert_int_equal(watch_collect(w, ev, 2), 2);
    assert_int_equal(ev[0].mod_revision, r2);
    assert_int_equal(ev[1].mod_revision, r3);
    etcd_watch_close(w);
    etcd_watch_close(NULL);
}

static void test_watch_progress_notify_option_is_accepted(void **state) {
    (void)state;
    NEED_ETCD();
    EtcdWatch *w = NULL;
    CHECK(etcd_watch_open(env.c, "pn/", 3, "pn0", 3, 0, 1, &w));
    int64_t rev;
    CHECK(etcd_put(env.c, "pn/a", 4, "1", 1, 0, &rev));
    Ev ev[1];
    assert_int_equal(watch_collect(w, ev, 1), 1);
    assert_int_equal(ev[0].mod_revision, rev);
    etcd_watch_close(w);
}

static void test_lease_grant_then_time_to_live_reports_granted_ttl(void **state) {
    (void)state;
    NEED_ETCD();
    int64_t id = 0, granted = 0, remaining = 0;
    CHECK(etcd_lease_grant(env.c, 77, &id));
    assert_true(id != 0);
    CHECK(etcd_lease_time_to_live(env.c, id, &granted, &remaining));
    assert_int_equal(granted, 77);
    assert_true(remaining > 0 && remaining <= 77);
    /* a key attached to it does not change what is reported; NULL outputs are allowed */
    CHECK(etcd_put(env.c, "lease-key", 9, "v", 1, id, NULL));
    CHECK(etcd_lease_time_to_live(env.c, id, NULL, NULL));
    CHECK(etcd_lease_time_to_live(env.c, id, &granted, NULL));
    assert_int_equal(granted, 77);
    /* a put with a lease etcd does not know is etcd's error, not ours */
    assert_int_equal(etcd_put(env.c, "lease-key", 9, "v", 1, id + 1, NULL), ERR_ETCD);
}

static void test_lease_time_to_live_of_unknown_or_expired_lease_is_not_found(void **state) {
    (void)state;
    NEED_ETCD();
    int64_t granted = -5;
    int rc = etcd_lease_time_to_live(env.c, INT64_C(7587869123456789012), &granted, NULL);
    assert_int_equal(rc, ERR_NOT_FOUND);
    assert_int_equal(granted, -5); /* untouched */
    assert_non_null(strstr(err_msg(), "7587869123456789012"));
    assert_non_null(strstr(err_msg(), "LeaseTimeToLive"));
    /* the shortest lease etcd grants (it raises TTL 1 to its minimum), then its expiry */
    int64_t id = 0;
    CHECK(etcd_lease_grant(env.c, 1, &id));
    CHECK(etcd_lease_time_to_live(env.c, id, &granted, NULL));
    assert_true(granted >= 1);
    CHECK(etcd_put(env.c, "short-lived", 11, "v", 1, id, NULL));
    double until = now_s() + 15;
    while ((rc = etcd_lease_time_to_live(env.c, id, NULL, NULL)) == 0 && now_s() < until)
        usleep(200 * 1000);
    assert_int_equal(rc, ERR_NOT_FOUND);
    size_t n = 0;
    CHECK(etcd_range(env.c, "short-lived", 11, NULL, 0, 0, count_cb, &n, NULL));
    assert_int_equal(n, 0); /* the expiry deleted its key */
    /* a grant etcd refuses (TTL beyond its maximum) */
    rc = etcd_lease_grant(env.c, INT64_C(1) << 40, &id);
    assert_int_equal(rc, ERR_ETCD);
    assert_non_null(strstr(err_msg(), "LeaseGrant"));
}

static void test_compact_then_watch_from_compacted_revision_reports_it(void **state) {
    (void)state;
    NEED_ETCD();
    int64_t r1, r2, r3;
    CHECK(etcd_put(env.c, "c/k", 3, "1", 1, 0, &r1));
    CHECK(etcd_put(env.c, "c/k", 3, "2", 1, 0, &r2));
    CHECK(etcd_put(env.c, "c/k", 3, "3", 1, 0, &r3));
    CHECK(etcd_compact(env.c, r2, 1));
    /* compacting the same revision again is "compacted" */
    int rc = etcd_compact(env.c, r2, 0);
    assert_int_equal(rc, ERR_COMPACTED);
    /* a Range at a compacted revision is ERR_COMPACTED and says so */
    size_t n = 0;
    rc = etcd_range(env.c, "c/k", 3, NULL, 0, r1, count_cb, &n, NULL);
    assert_int_equal(rc, ERR_COMPACTED);
    assert_non_null(strstr(err_msg(), "compacted"));
    assert_non_null(strstr(err_msg(), "grpc-status 11"));
    /* HashKV reports the compaction */
    uint32_t h = 0;
    int64_t crev = 0, hrev = 0;
    CHECK(etcd_hash_kv(env.c, 0, &h, &crev, &hrev));
    assert_int_equal(crev, r2);

    EtcdWatch *w = NULL;
    CHECK(etcd_watch_open(env.c, "c/", 2, "c0", 2, r1, 0, &w));
    EtcdWatchResponse resp;
    int got = 0;
    for (int i = 0; i < 50 && !got; i++)
        CHECK(etcd_watch_next(w, 100, &resp, &got));
    assert_int_equal(got, 1);
    assert_int_equal(resp.compact_revision, r2);
    assert_int_equal(resp.canceled, 1);
    etcd_watch_close(w);
}

static void test_hash_kv_is_stable_and_changes_on_write(void **state) {
    (void)state;
    NEED_ETCD();
    uint32_t h1 = 0, h2 = 0, h3 = 0;
    int64_t rev = 0, hrev = 0;
    CHECK(etcd_get_revision(env.c, &rev));
    CHECK(etcd_hash_kv(env.c, rev, &h1, NULL, &hrev));
    CHECK(etcd_hash_kv(env.c, rev, &h2, NULL, NULL));
    assert_int_equal(h1, h2);
    assert_true(hrev >= rev);
    CHECK(etcd_put(env.c, "hk", 2, "x", 1, 0, NULL));
    CHECK(etcd_hash_kv(env.c, 0, &h3, NULL, NULL));
    assert_true(h3 != h1);
}

static void test_member_list_has_the_single_member(void **state) {
    (void)state;
    NEED_ETCD();
    EtcdMember *m = NULL;
    size_t n = 0;
    CHECK(etcd_member_list(env.c, &m, &n));
    assert_int_equal(n, 1);
    assert_string_equal(m[0].name, "unit");
    assert_string_equal(m[0].client_urls, etcd_proc_client_url(env.proc));
    assert_non_null(strstr(m[0].peer_urls, "http://127.0.0.1:"));
    assert_int_equal(m[0].is_learner, 0);
    EtcdStatus st;
    CHECK(etcd_status(env.c, &st));
    assert_true(m[0].id == st.member_id);
    free(m);
}

typedef struct Buf {
    uint8_t *p;
    size_t n, cap;
    size_t calls;
} Buf;

static int buf_sink(void *ctx, const void *data, size_t len) {
    Buf *b = ctx;
    if (b->n + len > b->cap) {
        while (b->n + len > b->cap)
            b->cap = b->cap ? b->cap * 2 : 65536;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->calls++;
    return 0;
}

static int stop_sink(void *ctx, const void *data, size_t len) {
    (void)data;
    (void)len;
    return ++*(int *)ctx == 2 ? 7 : 0;
}

static void test_snapshot_stream_ends_with_sha256_of_the_db(void **state) {
    (void)state;
    NEED_ETCD();
    Buf b = {0};
    CHECK(etcd_snapshot(env.c, buf_sink, &b));
    assert_true(b.n > 32);
    assert_int_equal(b.n % 512, 32);
    uint8_t md[32];
    unsigned int mdlen = 0;
    assert_int_equal(EVP_Digest(b.p, b.n - 32, md, &mdlen, EVP_sha256(), NULL), 1);
    assert_int_equal(mdlen, 32);
    assert_memory_equal(md, b.p + b.n - 32, 32);
    free(b.p);
    /* a sink error stops the stream and is returned as is; the client stays usable */
    int calls = 0;
    assert_int_equal(etcd_snapshot(env.c, stop_sink, &calls), 7);
    int64_t rev;
    CHECK(etcd_get_revision(env.c, &rev));
}

static void test_defragment_succeeds(void **state) {
    (void)state;
    NEED_ETCD();
    CHECK(etcd_defragment(env.c));
    EtcdStatus st;
    CHECK(etcd_status(env.c, &st));
    assert_true(st.db_size > 0);
}

static int dead_port_url(char *buf, size_t cap) {
    /* port 1 on loopback: nobody listens there as non-root services go */
    snprintf(buf, cap, "http://127.0.0.1:1");
    return 0;
}

static void test_unreachable_endpoint_gives_err_etcd_naming_it(void **state) {
    (void)state;
    NEED_ETCD();
    char url[64];
    dead_port_url(url, sizeof url);
    EtcdClient *c = NULL;
    CHECK(new_client(url, &c));
    EtcdStatus st;
    int rc = etcd_status(c, &st);
    assert_int_equal(rc, ERR_ETCD);
    assert_non_null(strstr(err_msg(), url));
    assert_non_null(strstr(err_msg(), "/etcdserverpb.Maintenance/Status"));
    etcd_client_free(c);
}

static void test_failover_from_dead_endpoint_to_live_one(void **state) {
    (void)state;
    NEED_ETCD();
    char dead[64];
    dead_port_url(dead, sizeof dead);
    /* scheme-less live endpoint = http */
    const char *live = etcd_proc_client_url(env.proc) + strlen("http://");
    const char *eps[2] = {dead, live};
    EtcdConfig cfg = {.endpoints = eps, .n_endpoints = 2, .connection_timeout_ms = 5000};
    EtcdClient *c = NULL;
    CHECK(etcd_client_new(&cfg, &c));
    assert_string_equal(etcd_client_endpoint(c), dead);
    int64_t rev = 0;
    CHECK(etcd_put(c, "fo", 2, "1", 1, 0, &rev));
    assert_string_equal(etcd_client_endpoint(c), etcd_proc_client_url(env.proc));
    EtcdStatus st;
    CHECK(etcd_status(c, &st));
    etcd_client_free(c);

    /* both dead: the error names the endpoints tried */
    const char *eps2[2] = {dead, "http://127.0.0.1:2"};
    cfg.endpoints = eps2;
    CHECK(etcd_client_new(&cfg, &c));
    assert_int_equal(etcd_status(c, &st), ERR_ETCD);
    assert_non_null(strstr(err_msg(), "tried 2 endpoints"));
    etcd_client_free(c);
}

static void test_grpc_error_reply_carries_status_and_message(void **state) {
    (void)state;
    NEED_ETCD();
    int rc = etcd_put(env.c, "", 0, "v", 1, 0, NULL);
    assert_int_equal(rc, ERR_ETCD);
    assert_non_null(strstr(err_msg(), "grpc-status 3"));
    assert_non_null(strstr(err_msg(), "key is not provided"));
    assert_non_null(strstr(err_msg(), "/etcdserverpb.KV/Put"));
    assert_non_null(strstr(err_msg(), etcd_proc_client_url(env.proc)));
    /* future revision is not "compacted" */
    size_t n = 0;
    rc = etcd_range(env.c, "a", 1, NULL, 0, INT64_C(1) << 40, count_cb, &n, NULL);
    assert_int_equal(rc, ERR_ETCD);
    assert_non_null(strstr(err_msg(), "future revision"));
}

static void test_client_rejects_bad_config(void **state) {
    (void)state;
    EtcdClient *c = NULL;
    const char *eps[1] = {"ftp://127.0.0.1:1"};
    EtcdConfig cfg = {.endpoints = eps, .n_endpoints = 1};
    assert_int_equal(etcd_client_new(&cfg, &c), ERR_INVALID);
    assert_null(c);
    cfg.n_endpoints = 0;
    assert_int_equal(etcd_client_new(&cfg, &c), ERR_INVALID);
}

static void test_txn_rates_sequential_vs_many(void **state) {
    (void)state;
    NEED_ETCD();
    enum { SEQ = 1000, MANY = 8192, BATCH = 128 };
    static char keys[MANY][24];
    static EtcdTxnOp ops[MANY];
    static EtcdTxnReq reqs[MANY];
    static EtcdTxnResult res[MANY];
    for (int i = 0; i < MANY; i++) {
        int len = snprintf(keys[i], sizeof keys[i], "rate/%06d", i);
        ops[i] = (EtcdTxnOp){.type = ETCD_OP_PUT,
                             .key = (const uint8_t *)keys[i],
                             .key_len = (size_t)len,
                             .value = (const uint8_t *)"value-0123456789",
                             .value_len = 16};
        reqs[i] = (EtcdTxnReq){.cmp = {.kind = ETCD_CMP_NONE}, .ops = &ops[i], .n_ops = 1};
    }
    double t0 = now_s();
    for (int i = 0; i < SEQ; i++)
        CHECK(etcd_txn(env.c, NULL, &ops[i], 1, &res[i]));
    double t1 = now_s();
    for (int i = 0; i < MANY; i += BATCH)
        CHECK(etcd_txn_many(env.c, reqs + i, BATCH, res + i));
    double t2 = now_s();
    for (int i = 1; i < MANY; i++)
        assert_true(res[i].revision > 0);
    fprintf(stderr, "rate: sequential etcd_txn %.0f txn/s, etcd_txn_many(batch %d) %.0f txn/s\n",
            SEQ / (t1 - t0), BATCH, MANY / (t2 - t1));
    int64_t deleted;
    CHECK(etcd_delete_range(env.c, "rate/", 5, "rate0", 5, &deleted, NULL));
    assert_int_equal(deleted, MANY);
}

/* ---- tests with their own etcd ---- */

static void test_watch_reassembles_fragmented_responses(void **state) {
    (void)state;
    NEED_ETCD();
    /* small max-request-bytes makes etcd split one big revision into fragments */
    EtcdProcConfig cfg = {.name = "frag", .max_request_bytes = 8192};
    EtcdProc *p = NULL;
    EtcdClient *c = NULL;
    EtcdWatch *w = NULL;
    CHECK(start_etcd(env.dir, "frag", &cfg, &p));
    CHECK(new_client(etcd_proc_client_url(p), &c));
    enum { N = 60 };
    char key[1100];
    memset(key, 'k', sizeof key);
    memcpy(key, "f/", 2);
    for (int i = 0; i < N; i++) {
        snprintf(key + 2, 8, "%05d", i);
        key[7] = 'k';
        CHECK(etcd_put(c, key, 1000, "v", 1, 0, NULL));
    }
    CHECK(etcd_watch_open(c, "f/", 2, "f0", 2, 0, 0, &w));
    int64_t deleted = 0, rev = 0;
    CHECK(etcd_delete_range(c, "f/", 2, "f0", 2, &deleted, &rev));
    assert_int_equal(deleted, N);
    EtcdWatchResponse r;
    int got = 0;
    for (int i = 0; i < 100 && !got; i++)
        CHECK(etcd_watch_next(w, 100, &r, &got));
    assert_int_equal(got, 1);
    assert_int_equal(r.n_events, N);
    for (size_t i = 0; i < r.n_events; i++) {
        assert_int_equal(r.events[i].type, ETCD_OP_DELETE);
        assert_int_equal(r.events[i].kv.mod_revision, rev);
        assert_int_equal(r.events[i].kv.key_len, 1000);
    }
    etcd_watch_close(w);
    etcd_client_free(c);
    CHECK(etcd_proc_stop(p));
}

static int make_certs(const char *d) {
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    if (sh(NULL, 0,
           "cd %s && openssl req -x509 %s -keyout ca.key -out ca.crt -days 2 -subj "
           "/CN=etcdbr-test-ca "
           ">/dev/null 2>&1",
           d, ec))
        return -1;
    if (sh(NULL, 0,
           "cd %s && openssl req -x509 %s -keyout ca2.key -out ca2.crt -days 2 -subj /CN=other-ca "
           ">/dev/null 2>&1",
           d, ec))
        return -1;
    if (sh(NULL, 0,
           "cd %s && printf "
           "'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext",
           d))
        return -1;
    const char *names[2] = {"server", "client"};
    for (int i = 0; i < 2; i++) {
        if (sh(NULL, 0,
               "cd %s && openssl req %s -keyout %s.key -out %s.csr -subj /CN=%s >/dev/null 2>&1 && "
               "openssl x509 -req -in %s.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out %s.crt "
               "-days 2 -extfile ext >/dev/null 2>&1",
               d, ec, names[i], names[i], i ? "root" : "127.0.0.1", names[i], names[i]))
            return -1;
    }
    return 0;
}

static void test_tls_client_certs_and_wrong_ca(void **state) {
    (void)state;
    NEED_ETCD();
    char d[512], ca[600], ca2[600], crt[600], key[600], scrt[600], skey[600];
    snprintf(d, sizeof d, "%s/tls", env.dir);
    assert_int_equal(mkdir(d, 0700), 0);
    if (make_certs(d)) fail_msg("openssl certificate generation failed");
    snprintf(ca, sizeof ca, "%s/ca.crt", d);
    snprintf(ca2, sizeof ca2, "%s/ca2.crt", d);
    snprintf(crt, sizeof crt, "%s/client.crt", d);
    snprintf(key, sizeof key, "%s/client.key", d);
    snprintf(scrt, sizeof scrt, "--cert-file=%s/server.crt", d);
    snprintf(skey, sizeof skey, "--key-file=%s/server.key", d);
    char tca[640];
    snprintf(tca, sizeof tca, "--trusted-ca-file=%s", ca);
    const char *extra[] = {scrt, skey, "--client-cert-auth", tca, NULL};
    EtcdProcConfig cfg = {.name = "tls",
                          .extra_args = extra,
                          .client_https = 1,
                          .probe_cacert = ca,
                          .probe_cert = crt,
                          .probe_key = key};
    EtcdProc *p = NULL;
    CHECK(start_etcd(env.dir, "tls", &cfg, &p));
    const char *url = etcd_proc_client_url(p);
    assert_non_null(strstr(url, "https://127.0.0.1:"));

    const char *eps[1] = {url};
    EtcdConfig ec = {.endpoints = eps,
                     .n_endpoints = 1,
                     .cacert = ca,
                     .cert = crt,
                     .key = key,
                     .connection_timeout_ms = 10000};
    EtcdClient *c = NULL;
    CHECK(etcd_client_new(&ec, &c));
    int64_t rev = 0;
    CHECK(etcd_put(c, "tls-key", 7, "tls-value", 9, 0, &rev));
    Kvs k = {0};
    CHECK(etcd_range(c, "tls-key", 7, NULL, 0, 0, collect, &k, NULL));
    assert_int_equal(k.n, 1);
    assert_memory_equal(k.v[0].value, "tls-value", 9);
    kvs_free(&k);
    Buf b = {0};
    CHECK(etcd_snapshot(c, buf_sink, &b));
    assert_int_equal(b.n % 512, 32);
    free(b.p);
    EtcdWatch *w = NULL;
    CHECK(etcd_watch_open(c, "tls-key", 7, NULL, 0, rev, 0, &w));
    Ev ev[1];
    assert_int_equal(watch_collect(w, ev, 1), 1);
    assert_int_equal(ev[0].mod_revision, rev);
    etcd_watch_close(w);
    etcd_client_free(c);

    /* scheme-less endpoint + TLS files = https */
    const char *bare[1] = {url + strlen("https://")};
    ec.endpoints = bare;
    CHECK(etcd_client_new(&ec, &c));
    CHECK(etcd_get_revision(c, &rev));
    assert_string_equal(etcd_client_endpoint(c), url);
    etcd_client_free(c);

    /* the server certificate does not verify against another CA */
    ec.endpoints = eps;
    ec.cacert = ca2;
    CHECK(etcd_client_new(&ec, &c));
    int rc = etcd_get_revision(c, &rev);
    assert_int_equal(rc, ERR_ETCD);
    assert_non_null(strstr(err_msg(), url));
    fprintf(stderr, "wrong CA error: %s\n", err_msg());
    etcd_client_free(c);

    /* the message says what to do: the CA given does not verify it */
    assert_non_null(strstr(err_msg(), "--cacert"));
    assert_non_null(strstr(err_msg(), "--insecure-skip-tls-verify"));

    /* http:// to the TLS port: "probably speaks TLS" instead of only curl's HTTP/2 complaint */
    char plain[256];
    snprintf(plain, sizeof plain, "http://%s", url + strlen("https://"));
    const char *plain_eps[1] = {plain};
    EtcdConfig pc = {.endpoints = plain_eps, .n_endpoints = 1, .connection_timeout_ms = 10000};
    CHECK(etcd_client_new(&pc, &c));
    assert_int_equal(etcd_get_revision(c, &rev), ERR_ETCD);
    fprintf(stderr, "http:// to TLS etcd: %s\n", err_msg());
    assert_non_null(strstr(err_msg(), "probably speaks TLS: use https:// and --cacert"));
    etcd_client_free(c);

    /* insecure_skip_tls_verify accepts it (client cert still presented) */
    ec.insecure_skip_tls_verify = 1;
    CHECK(etcd_client_new(&ec, &c));
    CHECK(etcd_get_revision(c, &rev));
    etcd_client_free(c);

    /* no client certificate: the server refuses the handshake */
    EtcdConfig nocert = {
        .endpoints = eps, .n_endpoints = 1, .cacert = ca, .connection_timeout_ms = 10000};
    CHECK(etcd_client_new(&nocert, &c));
    assert_int_equal(etcd_get_revision(c, &rev), ERR_ETCD);
    fprintf(stderr, "no client certificate: %s\n", err_msg());
    /* TLS 1.3 reports the refusal on the first read: the alert, or only a closed connection */
    if (strstr(err_msg(), "alert")) assert_non_null(strstr(err_msg(), "give --cert and --key"));
    etcd_client_free(c);

    CHECK(etcd_proc_stop(p));
}

/* ---- TLS mismatch hints against openssl s_server (no etcd needed) ---- */

static int local_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static int port_accepts(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

/* openssl s_server on 127.0.0.1:port with dir/server.{crt,key}; its pid, or -1. */
static pid_t start_s_server(const char *dir, int port) {
    char accept_arg[64], crt[600], key[600];
    snprintf(accept_arg, sizeof accept_arg, "127.0.0.1:%d", port);
    snprintf(crt, sizeof crt, "%s/server.crt", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execlp("openssl", "openssl", "s_server", "-accept", accept_arg, "-cert", crt, "-key", key,
               "-alpn", "h2", "-quiet", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 100; i++) {
        if (port_accepts(port)) return pid;
        if (waitpid(pid, NULL, WNOHANG) == pid) return -1;
        usleep(50 * 1000);
    }
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    return -1;
}

/* err_msg() of one Status call to url with the given CA (NULL: none). */
static void status_error(const char *url, const char *cacert, char *out, size_t cap) {
    const char *eps[1] = {url};
    EtcdConfig ec = {
        .endpoints = eps, .n_endpoints = 1, .cacert = cacert, .connection_timeout_ms = 5000};
    EtcdClient *c = NULL;
    CHECK(etcd_client_new(&ec, &c));
    EtcdStatus st;
    assert_int_equal(etcd_status(c, &st), ERR_ETCD);
    snprintf(out, cap, "%s", err_msg());
    etcd_client_free(c);
}

static void test_tls_mismatch_errors_name_the_flags_to_fix(void **state) {
    (void)state;
    if (system("openssl version >/dev/null 2>&1") != 0) testutil_skip("no openssl CLI");
    char d[] = "/tmp/etcdbr-test-tlshint-XXXXXX";
    assert_non_null(mkdtemp(d));
    if (make_certs(d)) fail_msg("openssl certificate generation failed");
    int port = local_free_port();
    assert_true(port > 0);
    pid_t pid = start_s_server(d, port);
    if (pid < 0) {
        fs_remove_tree(d);
        fail_msg("openssl s_server did not start on port %d", port);
    }
    char https[64], http[64], msg[1024], ca[600], ca2[600];
    snprintf(https, sizeof https, "https://127.0.0.1:%d", port);
    snprintf(http, sizeof http, "http://127.0.0.1:%d", port);
    snprintf(ca, sizeof ca, "%s/ca.crt", d);
    snprintf(ca2, sizeof ca2, "%s/ca2.crt", d);

    /* https:// without --cacert: a private CA is not trusted */
    status_error(https, NULL, msg, sizeof msg);
    fprintf(stderr, "no --cacert: %s\n", msg);
    assert_non_null(strstr(msg, https));
    assert_non_null(strstr(msg, "give the CA that signed it with --cacert"));
    assert_non_null(strstr(msg, "--insecure-skip-tls-verify"));

    /* another CA given */
    status_error(https, ca2, msg, sizeof msg);
    assert_non_null(strstr(msg, "does not verify against --cacert"));

    /* http:// to a TLS port */
    status_error(http, NULL, msg, sizeof msg);
    fprintf(stderr, "http:// to TLS: %s\n", msg);
    assert_non_null(strstr(msg, "probably speaks TLS: use https:// and --cacert"));

    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    fs_remove_tree(d);
}

static void test_https_to_plain_etcd_says_use_http(void **state) {
    (void)state;
    NEED_ETCD();
    char url[256], msg[1024];
    snprintf(url, sizeof url, "https://%s", etcd_proc_client_url(env.proc) + strlen("http://"));
    status_error(url, NULL, msg, sizeof msg);
    fprintf(stderr, "https:// to plain etcd: %s\n", msg);
    assert_non_null(strstr(msg, "if the endpoint speaks plain HTTP/2, use http://"));
}

static void test_auth_username_password_and_wrong_password(void **state) {
    (void)state;
    NEED_ETCD();
    /* token TTL of 1 s lets the test see "invalid auth token" and the re-authentication */
    const char *extra[] = {"--auth-token-ttl=1", NULL};
    EtcdProcConfig cfg = {.name = "auth", .extra_args = extra};
    EtcdProc *p = NULL;
    CHECK(start_etcd(env.dir, "auth", &cfg, &p));
    const char *url = etcd_proc_client_url(p);
    char ctl[512];
    snprintf(ctl, sizeof ctl, "ETCDCTL_API=3 etcdctl --endpoints=%s", url);
    assert_int_equal(sh(NULL, 0, "%s user add root:s3cret --interactive=false >/dev/null", ctl), 0);
    assert_int_equal(sh(NULL, 0, "%s role add root >/dev/null", ctl), 0);
    assert_int_equal(sh(NULL, 0, "%s user grant-role root root >/dev/null", ctl), 0);
    assert_int_equal(sh(NULL, 0, "%s auth enable >/dev/null", ctl), 0);

    const char *eps[1] = {url};
    EtcdConfig ec = {.endpoints = eps,
                     .n_endpoints = 1,
                     .username = "root",
                     .password = "s3cret",
                     .connection_timeout_ms = 10000};
    EtcdClient *c = NULL;
    CHECK(etcd_client_new(&ec, &c));
    int64_t rev = 0;
    CHECK(etcd_put(c, "auth-key", 8, "v", 1, 0, &rev));
    size_t n = 0;
    CHECK(etcd_range(c, "auth-key", 8, NULL, 0, 0, count_cb, &n, NULL));
    assert_int_equal(n, 1);
    Buf b = {0};
    CHECK(etcd_snapshot(c, buf_sink, &b));
    free(b.p);
    EtcdWatch *w = NULL;
    CHECK(etcd_watch_open(c, "auth-key", 8, NULL, 0, rev, 0, &w));
    Ev ev[1];
    assert_int_equal(watch_collect(w, ev, 1), 1);
    etcd_watch_close(w);
    /* the token expires; the next call re-authenticates transparently */
    sleep(2);
    CHECK(etcd_range(c, "auth-key", 8, NULL, 0, 0, count_cb, &n, NULL));
    EtcdTxnOp op = {.type = ETCD_OP_PUT, .key = (const uint8_t *)"auth-key", .key_len = 8};
    EtcdTxnReq req = {.ops = &op, .n_ops = 1};
    EtcdTxnResult res;
    sleep(2);
    CHECK(etcd_txn_many(c, &req, 1, &res));
    /* lease calls carry the token, and re-authenticate after it expired */
    int64_t lease = 0, granted = 0;
    CHECK(etcd_lease_grant(c, 60, &lease));
    sleep(2);
    CHECK(etcd_lease_time_to_live(c, lease, &granted, NULL));
    assert_int_equal(granted, 60);
    etcd_client_free(c);

    /* wrong password: a clear error naming the user and the server's reason */
    ec.password = "wrong";
    CHECK(etcd_client_new(&ec, &c));
    int rc = etcd_range(c, "auth-key", 8, NULL, 0, 0, count_cb, &n, NULL);
    assert_int_equal(rc, ERR_ETCD);
    assert_non_null(strstr(err_msg(), "authentication failed"));
    assert_non_null(strstr(err_msg(), "root"));
    assert_null(strstr(err_msg(), "wrong"));
    fprintf(stderr, "wrong password error: %s\n", err_msg());
    etcd_client_free(c);

    /* no credentials at all */
    EtcdConfig anon = {.endpoints = eps, .n_endpoints = 1, .connection_timeout_ms = 10000};
    CHECK(etcd_client_new(&anon, &c));
    rc = etcd_range(c, "auth-key", 8, NULL, 0, 0, count_cb, &n, NULL);
    assert_int_equal(rc, ERR_ETCD);
    assert_non_null(strstr(err_msg(), "user name is empty"));
    etcd_client_free(c);
    CHECK(etcd_proc_stop(p));
}

static void test_proc_sets_go_runtime_env(void **state) {
    (void)state;
    NEED_ETCD();
    EtcdProcConfig cfg = {.name = "gomax", .gomaxprocs = 1, .gogc = 400};
    EtcdProc *p = NULL;
    CHECK(start_etcd(env.dir, "gomax", &cfg, &p));
    char path[64], envbuf[65536];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)etcd_proc_pid(p));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(envbuf, 1, sizeof envbuf - 1, f);
    fclose(f);
    int procs = 0, gc = 0;
    envbuf[n] = 0;
    for (size_t i = 0; i < n; i += strlen(envbuf + i) + 1) {
        if (!strcmp(envbuf + i, "GOMAXPROCS=1")) procs = 1;
        if (!strcmp(envbuf + i, "GOGC=400")) gc = 1;
    }
    /* values already in our environment win */
    assert_true(procs || getenv("GOMAXPROCS"));
    assert_true(gc || getenv("GOGC"));
    CHECK(etcd_proc_stop(p));
}

static void test_proc_start_reports_early_exit_with_log_tail(void **state) {
    (void)state;
    NEED_ETCD();
    const char *extra[] = {"--no-such-flag-for-etcd", NULL};
    EtcdProcConfig cfg = {.name = "bad", .extra_args = extra};
    EtcdProc *p = NULL;
    int rc = start_etcd(env.dir, "bad", &cfg, &p);
    assert_int_equal(rc, ERR_IO);
    assert_null(p);
    assert_non_null(strstr(err_msg(), "exited during start"));
    assert_non_null(strstr(err_msg(), "no-such-flag"));
    /* a missing binary */
    EtcdProcConfig nobin = {.etcd_bin = "/nonexistent/etcd", .name = "nobin"};
    rc = start_etcd(env.dir, "nobin", &nobin, &p);
    assert_int_equal(rc, ERR_IO);
    assert_non_null(strstr(err_msg(), "exec failed"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_rejects_bad_config),
        cmocka_unit_test(test_put_range_round_trips_binary_empty_and_1mib_values),
        cmocka_unit_test(test_range_pages_over_more_than_1000_keys),
        cmocka_unit_test(test_range_pages_big_values_to_the_end),
        cmocka_unit_test(test_range_callback_stops_iteration),
        cmocka_unit_test(test_delete_range_removes_prefix),
        cmocka_unit_test(test_txn_three_puts_share_one_revision),
        cmocka_unit_test(test_txn_compare_true_applies_false_does_nothing),
        cmocka_unit_test(test_txn_many_applies_all_with_consecutive_revisions),
        cmocka_unit_test(test_status_reports_version_leader_and_revision),
        cmocka_unit_test(test_watch_receives_put_and_delete_with_revisions),
        cmocka_unit_test(test_watch_progress_notify_option_is_accepted),
        cmocka_unit_test(test_hash_kv_is_stable_and_changes_on_write),
        cmocka_unit_test(test_lease_grant_then_time_to_live_reports_granted_ttl),
        cmocka_unit_test(test_lease_time_to_live_of_unknown_or_expired_lease_is_not_found),
        cmocka_unit_test(test_compact_then_watch_from_compacted_revision_reports_it),
        cmocka_unit_test(test_member_list_has_the_single_member),
        cmocka_unit_test(test_snapshot_stream_ends_with_sha256_of_the_db),
        cmocka_unit_test(test_defragment_succeeds),
        cmocka_unit_test(test_unreachable_endpoint_gives_err_etcd_naming_it),
        cmocka_unit_test(test_failover_from_dead_endpoint_to_live_one),
        cmocka_unit_test(test_grpc_error_reply_carries_status_and_message),
        cmocka_unit_test(test_txn_rates_sequential_vs_many),
        cmocka_unit_test(test_watch_reassembles_fragmented_responses),
        cmocka_unit_test(test_tls_client_certs_and_wrong_ca),
        cmocka_unit_test(test_tls_mismatch_errors_name_the_flags_to_fix),
        cmocka_unit_test(test_https_to_plain_etcd_says_use_http),
        cmocka_unit_test(test_auth_username_password_and_wrong_password),
        cmocka_unit_test(test_proc_sets_go_runtime_env),
        cmocka_unit_test(test_proc_start_reports_early_exit_with_log_tail),
    };
    return testutil_exit(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
