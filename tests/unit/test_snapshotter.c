/* test_snapshotter: the snapshotter's retry decisions (snapshotter_backoff_next) against the Go
 * tool's backoff: 1 s x multiplier, growing for attempt-limit + 1 retries, then the threshold;
 * and, against a REAL etcd (etcd_proc) and a Local store, that each object is named once: the
 * snapshot a request answers with and every event's name, revisions and creation second are
 * those of the object the store lists (its key parsed by the store's own listing). Skipped only
 * when no etcd binary is found. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backup/snapshotter.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "etcd/etcd_proc.h"
#include "support/testutil.h"

static void test_backoff_defaults_double_to_the_threshold_then_stay(void **state) {
    (void)state;
    SnapshotterConfig cfg = {0};
    int64_t delay = 1000, attempt = 0;
    const int64_t want[] = {2000, 4000, 8000, 16000, 32000, 64000, 128000, 128000, 128000};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        assert_int_equal(snapshotter_backoff_next(&cfg, &delay, &attempt), want[i]);
}

static void test_backoff_multiplier_is_a_factor_not_the_first_delay(void **state) {
    (void)state;
    SnapshotterConfig cfg = {
        .backoff_multiplier = 3, .backoff_attempt_limit = 2, .backoff_max_ms = 60000};
    int64_t delay = 1000, attempt = 0;
    const int64_t want[] = {3000, 9000, 27000, 60000, 60000};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        assert_int_equal(snapshotter_backoff_next(&cfg, &delay, &attempt), want[i]);
    /* a cap below the growth: capped at once, never above */
    SnapshotterConfig small = {
        .backoff_multiplier = 10, .backoff_attempt_limit = 6, .backoff_max_ms = 2000};
    delay = 1000;
    attempt = 0;
    for (int i = 0; i < 10; i++)
        assert_int_equal(snapshotter_backoff_next(&small, &delay, &attempt), 2000);
    /* multiplier 1: a steady 1 s until the limit, then the threshold */
    SnapshotterConfig one = {
        .backoff_multiplier = 1, .backoff_attempt_limit = 1, .backoff_max_ms = 5000};
    delay = 1000;
    attempt = 0;
    assert_int_equal(snapshotter_backoff_next(&one, &delay, &attempt), 1000);
    assert_int_equal(snapshotter_backoff_next(&one, &delay, &attempt), 1000);
    assert_int_equal(snapshotter_backoff_next(&one, &delay, &attempt), 5000);
}

/* ---------- one name along the path, against a real etcd ---------- */

#define MAX_SEEN 64

/* The FULL and DELTA events that stored an object, copied on the loop thread; read after the
 * loop thread was joined. */
typedef struct {
    size_t n;
    struct {
        SnapshotterEventKind kind;
        int64_t start_revision, revision, created_on;
        char snap_name[256];
    } ev[MAX_SEEN];
} Seen;

static void record_event(void *ctx, const SnapshotterEvent *ev) {
    Seen *seen = ctx;
    if (!ev->ok || ev->skipped || (ev->kind != SNAP_EVENT_FULL && ev->kind != SNAP_EVENT_DELTA))
        return;
    if (seen->n == MAX_SEEN) return;
    seen->ev[seen->n].kind = ev->kind;
    seen->ev[seen->n].start_revision = ev->start_revision;
    seen->ev[seen->n].revision = ev->revision;
    seen->ev[seen->n].created_on = ev->created_on;
    snprintf(seen->ev[seen->n].snap_name, sizeof seen->ev[seen->n].snap_name, "%s",
             ev->snap_name ? ev->snap_name : "");
    seen->n++;
}

typedef struct {
    Snapshotter *s;
    atomic_int stop;
    int rc;
} Loop;

static void *run_loop(void *arg) {
    Loop *l = arg;
    l->rc = snapshotter_run(l->s, &l->stop, 0);
    return NULL;
}

static const Snapshot *listed(const Snapshot *list, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i].key, key)) return &list[i];
    fail_msg("%s is not in the store's listing (%zu objects)", key, n);
    return NULL;
}

/* The snapshot a request answered with is the stored object as the store lists it. */
static void assert_is_listed(const Snapshot *got, const Snapshot *list, size_t n) {
    const Snapshot *l = listed(list, n, got->key);
    assert_int_equal(got->kind, l->kind);
    assert_int_equal(got->start_revision, l->start_revision);
    assert_int_equal(got->last_revision, l->last_revision);
    assert_int_equal(got->created_on, l->created_on);
    assert_string_equal(got->snap_name, l->snap_name);
    assert_string_equal(got->prefix, l->prefix);
    assert_string_equal(got->compression_suffix, l->compression_suffix);
    assert_int_equal(got->encrypted, l->encrypted);
    assert_int_equal(got->is_final, l->is_final);
    assert_int_equal(got->version, l->version);
}

static void put_keys(EtcdClient *c, int n, int64_t *rev) {
    for (int i = 0; i < n; i++) {
        char key[32];
        snprintf(key, sizeof key, "/k/%d", i);
        if (etcd_put(c, key, strlen(key), "v", 1, 0, rev)) fail_msg("put %s: %s", key, err_msg());
    }
}

static void wait_active(Snapshotter *s) {
    for (int i = 0; i < 600; i++) {
        SnapshotterStatus st;
        snapshotter_status(s, &st);
        if (st.active) return;
        usleep(100 * 1000);
    }
    fail_msg("the snapshotter did not store its first full snapshot within 60 s");
}

static void test_objects_are_stored_under_the_name_recorded(void **state) {
    (void)state;
    char dir[] = "/tmp/etcdbr-test-snapshotter-XXXXXX";
    if (!mkdtemp(dir)) fail_msg("mkdtemp");
    char data[300], log[300], container[300], temp[300];
    snprintf(data, sizeof data, "%s/etcd.data", dir);
    snprintf(log, sizeof log, "%s/etcd.log", dir);
    snprintf(container, sizeof container, "%s/store", dir);
    snprintf(temp, sizeof temp, "%s/temp", dir);
    EtcdProcConfig pc = {.data_dir = data,
                         .name = "unit",
                         .log_path = log,
                         .unsafe_no_fsync = 1,
                         .ready_timeout_ms = 30000};
    const char *bin = getenv("ETCDBR_ETCD_BIN");
    if (sh(NULL, 0, "command -v '%s' >/dev/null", bin && *bin ? bin : "etcd") != 0) {
        fs_remove_tree(dir);
        testutil_skip("no etcd on PATH (scripts/install-deps.sh installs it)");
    }
    EtcdProc *proc = NULL;
    if (etcd_proc_start(&pc, &proc)) fail_msg("etcd_proc_start: %s", err_msg());
    const char *ep = etcd_proc_client_url(proc);
    EtcdConfig ec = {.endpoints = &ep, .n_endpoints = 1, .connection_timeout_ms = 10000};
    EtcdClient *c = NULL;
    assert_int_equal(etcd_client_new(&ec, &c), 0);
    int64_t rev = 0;
    put_keys(c, 5, &rev);

    /* a nested store prefix and keys: the name carries ".enc.gz" and a key prefix of its own */
    StoreConfig stc = {.provider = "Local", .container = container, .prefix = "etcd-main//sub/"};
    Store *store = NULL;
    assert_int_equal(store_open(&stc, &store), 0);
    static const char keys[] = "k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n";
    Keyring *kr = NULL;
    assert_int_equal(keyring_parse(keys, sizeof keys - 1, "test", &kr), 0);
    store_set_keyring(store, kr);

    Seen seen = {0};
    SnapshotterConfig cfg = {.etcd = ec,
                             .store = store,
                             .temp_dir = temp,
                             .delta_period_ms = 1000,
                             .delta_memory_limit = 100 << 20,
                             .compression = COMPRESS_GZIP,
                             .on_event = record_event,
                             .event_ctx = &seen};
    assert_int_equal(cron_parse("0 0 1 1 *", &cfg.schedule), 0); /* no scheduled full here */
    Loop loop = {.rc = -1};
    assert_int_equal(snapshotter_new(&cfg, &loop.s), 0);
    atomic_init(&loop.stop, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_loop, &loop), 0);
    wait_active(loop.s);

    put_keys(c, 3, &rev);
    Snapshot delta, full;
    int none = 1;
    if (snapshotter_request(loop.s, SNAP_REQ_DELTA, 60000, &delta, &none))
        fail_msg("delta request: %s", err_msg());
    assert_false(none);
    put_keys(c, 2, &rev);
    if (snapshotter_request(loop.s, SNAP_REQ_FULL, 60000, &full, NULL))
        fail_msg("full request: %s", err_msg());
    atomic_store(&loop.stop, 1);
    pthread_join(th, NULL);
    assert_int_equal(loop.rc, 0);
    snapshotter_free(loop.s);

    /* the recorded revisions are etcd's: the delta ends at or after the 3 writes, the full at
     * the last write */
    assert_int_equal(delta.kind, SNAP_INCR);
    assert_true(delta.last_revision >= rev - 2);
    assert_int_equal(full.kind, SNAP_FULL);
    assert_int_equal(full.last_revision, rev);
    assert_true(delta.encrypted && full.encrypted);
    assert_string_equal(full.compression_suffix, ".gz");

    Snapshot *list = NULL;
    size_t n = 0;
    assert_int_equal(store_list(store, &list, &n), 0);
    assert_is_listed(&delta, list, n);
    assert_is_listed(&full, list, n);
    /* every stored object was reported under its name, revisions and creation second */
    assert_true(seen.n >= 3); /* the first full, the delta, the requested full */
    for (size_t i = 0; i < seen.n; i++) {
        char key[1024];
        snprintf(key, sizeof key, "%s%s", full.prefix, seen.ev[i].snap_name);
        const Snapshot *l = listed(list, n, key);
        assert_int_equal(seen.ev[i].kind == SNAP_EVENT_FULL ? SNAP_FULL : SNAP_INCR, l->kind);
        assert_int_equal(seen.ev[i].revision, l->last_revision);
        assert_int_equal(seen.ev[i].created_on, l->created_on);
        if (seen.ev[i].kind == SNAP_EVENT_DELTA)
            assert_int_equal(seen.ev[i].start_revision, l->start_revision);
    }
    assert_string_equal(full.prefix, "etcd-main/sub/v2/");
    free(list);
    store_free(store);
    etcd_client_free(c);
    if (etcd_proc_stop(proc)) fprintf(stderr, "etcd_proc_stop: %s\n", err_msg());
    fs_remove_tree(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_defaults_double_to_the_threshold_then_stay),
        cmocka_unit_test(test_backoff_multiplier_is_a_factor_not_the_first_delay),
        cmocka_unit_test(test_objects_are_stored_under_the_name_recorded),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
