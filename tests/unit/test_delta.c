/* test_delta: the delta snapshot writer and reader against the Go-written seed-plain deltas
 * (every event of tests/fixtures/seed-plain/README.md; the writer rebuilds them byte for byte),
 * round trips of awkward events, Go decoder quirks the reader must share, corrupt payloads that
 * must give ERR_CORRUPT, and a full disk (tiny tmpfs) that must give ERR_IO.
 * Fixtures are found under $ETCDBR_SOURCE_DIR (default "."). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backup/delta.h"
#include "codec/io.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "support/testutil.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ---- */

static char g_tmp[64]; /* scratch directory for spool files */

static int group_setup(void **state) {
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_delta.XXXXXX");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    return fs_remove_tree(g_tmp) == 0 ? 0 : -1;
}

static void sha256(const void *p, size_t n, uint8_t out[32]) {
    unsigned int len = 0;
    assert_int_equal(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL), 1);
}

static uint8_t *read_whole(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (set ETCDBR_SOURCE_DIR)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static const char *fixture_names[4] = {
    "Incr-00000191-00000202-1795974923",
    "Incr-00000203-00000207-1795974925",
    "Incr-00000208-00000210-1795974927",
    "Incr-00000211-00000216-1795974931",
};

static uint8_t *read_fixture(int i, size_t *len) {
    const char *root = getenv("ETCDBR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/seed-plain/store/v2/%s", root ? root : ".",
             fixture_names[i]);
    return read_whole(path, len);
}

/* JSON text followed by its SHA-256: a payload whose hash is right whatever the JSON says. */
static uint8_t *make_payload(const void *json, size_t n, size_t *len) {
    uint8_t *p = malloc(n + 32);
    assert_non_null(p);
    memcpy(p, json, n);
    sha256(json, n, p + n);
    *len = n + 32;
    return p;
}

static int contains(const void *hay, size_t n, const char *needle) {
    return memmem(hay, n, needle, strlen(needle)) != NULL;
}

/* A copied event. */
typedef struct {
    EtcdOpType type;
    uint8_t *key, *value;
    size_t key_len, value_len;
    int64_t create_revision, mod_revision, version, lease;
    int64_t time_ns, lease_ttl;
} Ev;

typedef struct {
    Ev *ev;
    size_t n;
} EvList;

static void evlist_free(EvList *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->ev[i].key);
        free(l->ev[i].value);
    }
    free(l->ev);
    l->ev = NULL;
    l->n = 0;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n) {
    uint8_t *d = malloc(n + 1);
    assert_non_null(d);
    if (n) memcpy(d, p, n);
    return d;
}

/* Events the fast path decoded in the last read_events_from. */
static uint64_t g_fast_events;

/* Opens and iterates a delta read from src; returns the first error (0 if none) with the events
 * read before it in *out. */
static int read_events_from(IoReader *src, EvList *out) {
    g_fast_events = 0;
    DeltaReader *r = NULL;
    memset(out, 0, sizeof *out);
    int rc = delta_reader_open(src, g_tmp, &r);
    if (rc) {
        assert_null(r);
        return rc;
    }
    for (;;) {
        DeltaEvent de;
        int got = 0;
        rc = delta_reader_next(r, &de, &got);
        if (rc || !got) break;
        out->ev = realloc(out->ev, (out->n + 1) * sizeof *out->ev);
        assert_non_null(out->ev);
        Ev *e = &out->ev[out->n++];
        e->type = de.type;
        e->key = dup_bytes(de.key, de.key_len);
        e->key_len = de.key_len;
        e->value = dup_bytes(de.value, de.value_len);
        e->value_len = de.value_len;
        e->create_revision = de.create_revision;
        e->mod_revision = de.mod_revision;
        e->version = de.version;
        e->lease = de.lease;
        e->time_ns = de.time_ns;
        e->lease_ttl = de.lease_ttl;
    }
    g_fast_events = delta_reader_fast_events(r);
    if (rc) {
        /* errors are sticky */
        DeltaEvent de;
        int got = 1;
        assert_int_equal(delta_reader_next(r, &de, &got), rc);
        assert_int_equal(got, 0);
    }
    delta_reader_close(r);
    return rc;
}

static int read_events(const void *payload, size_t len, EvList *out) {
    IoReader *src = io_mem_reader_new(payload, len);
    assert_non_null(src);
    int rc = read_events_from(src, out);
    io_reader_free(src);
    return rc;
}

static int read_json_events(const char *json, EvList *out) {
    size_t len;
    uint8_t *p = make_payload(json, strlen(json), &len);
    int rc = read_events(p, len, out);
    free(p);
    return rc;
}

/* Reads an IoReader to its end into a new buffer. */
static uint8_t *slurp(IoReader *r, size_t *len) {
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        size_t got = 0;
        assert_int_equal(io_read(r, buf + n, cap - n, &got), 0);
        if (got == 0) break;
        n += got;
    }
    *len = n;
    return buf;
}

static EtcdEvent mk_event(EtcdOpType type, const void *key, size_t key_len, const void *value,
                          size_t value_len, int64_t cr, int64_t mr, int64_t ver, int64_t lease) {
    EtcdEvent e;
    memset(&e, 0, sizeof e);
    e.type = type;
    e.kv.key = key;
    e.kv.key_len = key_len;
    e.kv.value = value;
    e.kv.value_len = value_len;
    e.kv.create_revision = cr;
    e.kv.mod_revision = mr;
    e.kv.version = ver;
    e.kv.lease = lease;
    return e;
}

/* ---- the seed-plain fixture deltas ---- */

typedef struct {
    int delta;
    int64_t rev;
    EtcdOpType type;
    const char *key;
    size_t value_len;
} Expected;

#define BIN_KEY "/registry/special/bin-\xff\xfe\x80\x01-key"
#define UNI_KEY "/registry/special/key with spaces – ünïcødé ✓ 日本語"
#define SVC "/registry/services/specs/default/svc-0"

/* Every event of tests/fixtures/seed-plain/README.md, in file order. */
static const Expected expected_events[] = {
    {0, 191, ETCD_OP_PUT, "/registry/pods/ns1/pod-001", 124},
    {0, 192, ETCD_OP_PUT, "/registry/pods/ns1/pod-002", 124},
    {0, 193, ETCD_OP_PUT, "/registry/pods/ns1/pod-003", 124},
    {0, 194, ETCD_OP_PUT, "/registry/pods/ns1/pod-004", 124},
    {0, 195, ETCD_OP_PUT, "/registry/pods/ns1/pod-005", 124},
    {0, 196, ETCD_OP_PUT, "/registry/pods/ns3/pod-000", 124},
    {0, 197, ETCD_OP_PUT, "/registry/pods/ns3/pod-001", 124},
    {0, 198, ETCD_OP_PUT, "/registry/pods/ns3/pod-002", 124},
    {0, 199, ETCD_OP_DELETE, "/registry/pods/ns2/pod-000", 0},
    {0, 200, ETCD_OP_DELETE, "/registry/pods/ns2/pod-001", 0},
    {0, 201, ETCD_OP_DELETE, "/registry/configmaps/ns1/cm-000", 0},
    {0, 202, ETCD_OP_PUT, "/registry/special/empty-value-2", 0},
    {1, 203, ETCD_OP_PUT, "/registry/configmaps/ns1/cm-000", 137},
    {1, 204, ETCD_OP_PUT, "/registry/deployments/ns1/dep-a", 16},
    {1, 204, ETCD_OP_PUT, "/registry/deployments/ns1/dep-b", 16},
    {1, 204, ETCD_OP_PUT, "/registry/deployments/ns1/dep-c", 16},
    {1, 205, ETCD_OP_PUT, BIN_KEY, 38},
    {1, 206, ETCD_OP_DELETE, "/registry/pods/ns1/pod-010", 0},
    {1, 207, ETCD_OP_PUT, "/registry/pods/ns1/pod-010", 142},
    {2, 208, ETCD_OP_DELETE, SVC "10", 0},
    {2, 208, ETCD_OP_DELETE, SVC "11", 0},
    {2, 208, ETCD_OP_DELETE, SVC "12", 0},
    {2, 208, ETCD_OP_DELETE, SVC "13", 0},
    {2, 208, ETCD_OP_DELETE, SVC "14", 0},
    {2, 208, ETCD_OP_DELETE, SVC "15", 0},
    {2, 208, ETCD_OP_DELETE, SVC "16", 0},
    {2, 208, ETCD_OP_DELETE, SVC "17", 0},
    {2, 208, ETCD_OP_DELETE, SVC "18", 0},
    {2, 208, ETCD_OP_DELETE, SVC "19", 0},
    {2, 209, ETCD_OP_PUT, "/registry/leases/with-etcd-lease", 142},
    {2, 210, ETCD_OP_PUT, UNI_KEY, 27},
    {3, 211, ETCD_OP_PUT, "/registry/pods/ns1/pod-001", 124},
    {3, 212, ETCD_OP_PUT, "/registry/deployments/ns1/dep-d", 16},
    {3, 212, ETCD_OP_DELETE, "/registry/deployments/ns1/dep-a", 0},
    {3, 213, ETCD_OP_DELETE, "/registry/pods/ns3/pod-000", 0},
    {3, 214, ETCD_OP_PUT, "/registry/pods/ns4/pod-000", 124},
    {3, 215, ETCD_OP_PUT, "/registry/pods/ns4/pod-001", 124},
    {3, 216, ETCD_OP_PUT, "/registry/pods/ns4/pod-002", 124},
};

static void test_reads_every_event_of_the_go_fixture_deltas(void **state) {
    (void)state;
    static const size_t counts[4] = {12, 7, 12, 7};
    static const int64_t first[4] = {191, 203, 208, 211}, last[4] = {202, 207, 210, 216};
    size_t k = 0;
    for (int d = 0; d < 4; d++) {
        size_t len;
        uint8_t *payload = read_fixture(d, &len);
        EvList l;
        assert_int_equal(read_events(payload, len, &l), 0);
        assert_int_equal(l.n, counts[d]);
        assert_int_equal(l.ev[0].mod_revision, first[d]);
        assert_int_equal(l.ev[l.n - 1].mod_revision, last[d]);
        for (size_t i = 0; i < l.n; i++, k++) {
            const Expected *x = &expected_events[k];
            const Ev *e = &l.ev[i];
            assert_int_equal(x->delta, d);
            assert_int_equal(e->mod_revision, x->rev);
            assert_int_equal(e->type, x->type);
            assert_int_equal(e->key_len, strlen(x->key));
            assert_memory_equal(e->key, x->key, e->key_len);
            assert_int_equal(e->value_len, x->value_len);
            if (x->type == ETCD_OP_DELETE) {
                assert_int_equal(e->create_revision, 0);
                assert_int_equal(e->version, 0);
            } else {
                assert_true(e->create_revision > 0 && e->create_revision <= e->mod_revision);
                assert_true(e->version >= 1);
            }
            int leased = e->mod_revision == 209;
            assert_int_equal(e->lease, leased ? 3603339471475297496LL : 0);
        }
        /* spot checks from the README */
        if (d == 0) { /* empty value: the event has no "value" */
            assert_int_equal(l.ev[11].value_len, 0);
            assert_int_equal(l.ev[11].version, 1);
            assert_false(contains(payload, len - 32, "\"value\":\"\""));
        }
        if (d == 1) {
            assert_int_equal(l.ev[0].create_revision, 203); /* cm-000 recreated: version 1 */
            assert_int_equal(l.ev[0].version, 1);
            assert_int_equal(l.ev[4].key_len, 30); /* non-UTF-8 key bytes */
            assert_memory_equal(l.ev[4].key + 22, "\xff\xfe\x80\x01", 4);
            assert_int_equal(l.ev[4].create_revision, 188);
        }
        if (d == 2) {
            size_t deletes = 0;
            for (size_t i = 0; i < l.n; i++)
                deletes += l.ev[i].mod_revision == 208 && l.ev[i].type == ETCD_OP_DELETE;
            assert_int_equal(deletes, 10);
            assert_int_equal(l.ev[10].lease, 3603339471475297496LL);
            assert_int_equal(l.ev[11].create_revision, 189);
            assert_int_equal(l.ev[11].version, 2);
            assert_memory_equal(l.ev[11].value, "zweiter Wert ✓ seed-plain", 27);
        }
        evlist_free(&l);
        free(payload);
    }
    assert_int_equal(k, sizeof expected_events / sizeof expected_events[0]);
}

/* A source that hands out 1..37 bytes per read, so the trailer hold-back crosses reads. */
typedef struct {
    IoReader base;
    const uint8_t *p;
    size_t len, pos, step;
} DribbleReader;

static int dribble_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    DribbleReader *d = (DribbleReader *)r;
    size_t n = d->step++ % 37 + 1;
    if (n > cap) n = cap;
    if (n > d->len - d->pos) n = d->len - d->pos;
    memcpy(buf, d->p + d->pos, n);
    d->pos += n;
    *got = n;
    return 0;
}
static void dribble_free(IoReader *r) {
    (void)r;
}
static const IoReaderVt dribble_vt = {dribble_read, dribble_free};

static void test_reads_a_source_that_returns_small_chunks(void **state) {
    (void)state;
    for (int d = 0; d < 4; d++) {
        size_t len;
        uint8_t *payload = read_fixture(d, &len);
        EvList a, b;
        assert_int_equal(read_events(payload, len, &a), 0);
        DribbleReader dr = {{&dribble_vt}, payload, len, 0, 0};
        assert_int_equal(read_events_from(&dr.base, &b), 0);
        assert_int_equal(a.n, b.n);
        for (size_t i = 0; i < a.n; i++) {
            assert_int_equal(a.ev[i].mod_revision, b.ev[i].mod_revision);
            assert_int_equal(a.ev[i].key_len, b.ev[i].key_len);
            assert_memory_equal(a.ev[i].key, b.ev[i].key, a.ev[i].key_len);
            assert_int_equal(a.ev[i].value_len, b.ev[i].value_len);
            assert_memory_equal(a.ev[i].value, b.ev[i].value, a.ev[i].value_len);
        }
        evlist_free(&a);
        evlist_free(&b);
        free(payload);
    }
}

static void test_writer_rebuilds_the_go_fixture_deltas_byte_for_byte(void **state) {
    (void)state;
    for (int d = 0; d < 4; d++) {
        size_t len;
        uint8_t *payload = read_fixture(d, &len);
        /* the "time" strings, straight from the fixture's JSON */
        json_error_t jerr;
        json_t *arr = json_loadb((const char *)payload, len - 32, 0, &jerr);
        assert_non_null(arr);
        EvList l;
        assert_int_equal(read_events(payload, len, &l), 0);
        assert_int_equal(json_array_size(arr), l.n);

        DeltaWriter *w = NULL;
        assert_int_equal(delta_writer_new(g_tmp, &w), 0);
        for (size_t i = 0; i < l.n; i++) {
            const Ev *e = &l.ev[i];
            EtcdEvent ev = mk_event(e->type, e->key, e->key_len, e->value, e->value_len,
                                    e->create_revision, e->mod_revision, e->version, e->lease);
            const char *t = json_string_value(json_object_get(json_array_get(arr, i), "time"));
            assert_non_null(t);
            assert_int_equal(delta_writer_append_with_time(w, &ev, t), 0);
        }
        assert_int_equal(delta_writer_events(w), l.n);
        assert_int_equal(delta_writer_first_revision(w), l.ev[0].mod_revision);
        assert_int_equal(delta_writer_last_revision(w), l.ev[l.n - 1].mod_revision);
        IoReader *out = NULL;
        assert_int_equal(delta_writer_payload(w, &out), 0);
        assert_int_equal(delta_writer_bytes(w), len - 32);
        size_t got_len;
        uint8_t *got = slurp(out, &got_len);
        assert_int_equal(got_len, len);
        assert_memory_equal(got, payload, len);
        free(got);
        io_reader_free(out);
        delta_writer_free(w);
        evlist_free(&l);
        json_decref(arr);
        free(payload);
    }
}

/* ---- writer round trips ---- */

static void test_round_trip_of_awkward_events(void **state) {
    (void)state;
    static const uint8_t nul_key[] = {'a', 0, 'b', 0};
    static const char uni_key[] = "/ключ/日本語/✓ \"quoted\\\"";
    size_t big_len = 1024 * 1024;
    uint8_t *big = malloc(big_len);
    assert_non_null(big);
    uint32_t x = 12345;
    for (size_t i = 0; i < big_len; i++) {
        x = x * 1103515245u + 12345u;
        big[i] = (uint8_t)(x >> 16);
    }
    EtcdEvent evs[] = {
        mk_event(ETCD_OP_PUT, nul_key, sizeof nul_key, "v\0w", 3, 5, 10, 1, 0),
        mk_event(ETCD_OP_PUT, uni_key, strlen(uni_key), NULL, 0, 11, 11, 1, 0),
        mk_event(ETCD_OP_PUT, "/big", 4, big, big_len, 12, 12, 1, 0),
        mk_event(ETCD_OP_PUT, "/leased", 7, "x", 1, 12, 12, 1, 3603339471475297496LL),
        mk_event(ETCD_OP_PUT, "k", 1, "ke", 2, 3, 12, 9, -5),
        mk_event(ETCD_OP_PUT, "key", 3, "keys", 4, 12, 12, 1, INT64_MAX),
        mk_event(ETCD_OP_DELETE, nul_key, sizeof nul_key, NULL, 0, 0, 13, 0, 0),
        mk_event(ETCD_OP_PUT, NULL, 0, "empty key", 9, 14, 14, 1, 0),
    };
    size_t n = sizeof evs / sizeof evs[0];
    DeltaWriter *w = NULL;
    assert_int_equal(delta_writer_new(g_tmp, &w), 0);
    assert_int_equal(delta_writer_first_revision(w), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(delta_writer_append(w, &evs[i], 1795974923000000000LL + (int64_t)i), 0);
    assert_int_equal(delta_writer_events(w), n);
    assert_int_equal(delta_writer_first_revision(w), 10);
    assert_int_equal(delta_writer_last_revision(w), 14);
    IoReader *out = NULL;
    assert_int_equal(delta_writer_payload(w, &out), 0);
    size_t len;
    uint8_t *payload = slurp(out, &len);
    assert_int_equal(delta_writer_bytes(w), len - 32);
    uint8_t h[32];
    sha256(payload, len - 32, h);
    assert_memory_equal(h, payload + len - 32, 32);
    /* Go-style omitempty: a DELETE carries no version/value, an empty value has no "value" */
    assert_true(contains(payload, len,
                         "{\"etcdEvent\":{\"type\":1,\"kv\":{\"key\":\"YQBiAA==\","
                         "\"mod_revision\":13}},\"time\":"));
    assert_true(contains(payload, len, "\"lease\":-5}"));

    EvList l;
    assert_int_equal(read_events(payload, len, &l), 0);
    assert_int_equal(l.n, n);
    for (size_t i = 0; i < n; i++) {
        const EtcdKeyValue *kv = &evs[i].kv;
        assert_int_equal(l.ev[i].type, evs[i].type);
        assert_int_equal(l.ev[i].key_len, kv->key_len);
        if (kv->key_len) assert_memory_equal(l.ev[i].key, kv->key, kv->key_len);
        assert_int_equal(l.ev[i].value_len, kv->value_len);
        if (kv->value_len) assert_memory_equal(l.ev[i].value, kv->value, kv->value_len);
        assert_int_equal(l.ev[i].create_revision, kv->create_revision);
        assert_int_equal(l.ev[i].mod_revision, kv->mod_revision);
        assert_int_equal(l.ev[i].version, kv->version);
        assert_int_equal(l.ev[i].lease, kv->lease);
    }
    evlist_free(&l);
    free(payload);
    io_reader_free(out);
    delta_writer_free(w);
    free(big);
}

static void test_writer_formats_time_like_go_rfc3339nano(void **state) {
    (void)state;
    static const struct {
        int64_t ns;
        const char *text;
    } cases[] = {
        {0, "1970-01-01T00:00:00Z"},
        {1, "1970-01-01T00:00:00.000000001Z"},
        {1500000000, "1970-01-01T00:00:01.5Z"},
        {-1, "1969-12-31T23:59:59.999999999Z"},
        {951782400LL * 1000000000 + 120000000, "2000-02-29T00:00:00.12Z"},
        {1795974927674885512LL, "2026-11-29T17:55:27.674885512Z"},
        {1795974927674919860LL, "2026-11-29T17:55:27.67491986Z"},
    };
    size_t n = sizeof cases / sizeof cases[0];
    DeltaWriter *w = NULL;
    assert_int_equal(delta_writer_new(g_tmp, &w), 0);
    for (size_t i = 0; i < n; i++) {
        EtcdEvent ev = mk_event(ETCD_OP_PUT, "k", 1, "v", 1, 1, 1, 1, 0);
        assert_int_equal(delta_writer_append(w, &ev, cases[i].ns), 0);
    }
    IoReader *out = NULL;
    assert_int_equal(delta_writer_payload(w, &out), 0);
    size_t len;
    uint8_t *payload = slurp(out, &len);
    json_error_t jerr;
    json_t *arr = json_loadb((const char *)payload, len - 32, 0, &jerr);
    assert_non_null(arr);
    assert_int_equal(json_array_size(arr), n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(arr, i), "time")),
                            cases[i].text);
    json_decref(arr);
    free(payload);
    io_reader_free(out);
    delta_writer_free(w);
}

static void test_writer_rejects_misuse_and_resets_for_the_next_delta(void **state) {
    (void)state;
    DeltaWriter *w = NULL;
    IoReader *out = NULL;
    assert_int_equal(delta_writer_new("/nonexistent/dir", &w), ERR_IO);
    assert_null(w);
    assert_int_equal(delta_writer_new(g_tmp, &w), 0);
    assert_int_equal(delta_writer_payload(w, &out), ERR_INVALID); /* never zero events */
    assert_null(out);
    EtcdEvent ev = mk_event(ETCD_OP_PUT, "k", 1, "v", 1, 5, 5, 1, 0);
    EtcdEvent zero = mk_event(ETCD_OP_PUT, "k", 1, "v", 1, 0, 0, 1, 0);
    EtcdEvent older = mk_event(ETCD_OP_PUT, "k", 1, "v", 1, 4, 4, 1, 0);
    EtcdEvent bad_type = mk_event((EtcdOpType)2, "k", 1, "v", 1, 5, 5, 1, 0);
    assert_int_equal(delta_writer_append(w, &zero, 0), ERR_INVALID);
    assert_int_equal(delta_writer_append(w, &bad_type, 0), ERR_INVALID);
    assert_int_equal(delta_writer_append_with_time(w, &ev, "yesterday"), ERR_INVALID);
    assert_int_equal(delta_writer_append_with_time(w, &ev, "2026-11-29T17:55:27Z\""), ERR_INVALID);
    assert_int_equal(delta_writer_events(w), 0);
    assert_int_equal(delta_writer_append(w, &ev, 0), 0);
    assert_int_equal(delta_writer_append(w, &older, 0), ERR_INVALID);
    assert_int_equal(delta_writer_append(w, &ev, 0), 0); /* same revision is fine (txn) */
    assert_int_equal(delta_writer_events(w), 2);

    /* two payload readers read independently */
    IoReader *a = NULL, *b = NULL;
    assert_int_equal(delta_writer_payload(w, &a), 0);
    assert_int_equal(delta_writer_payload(w, &b), 0);
    assert_int_equal(delta_writer_append(w, &ev, 0), ERR_INVALID); /* sealed */
    uint8_t ca[7], cb[500];
    size_t ga = 0, gb = 0;
    assert_int_equal(io_read(a, ca, sizeof ca, &ga), 0);
    assert_int_equal(io_read_full(b, cb, sizeof cb, &gb), 0);
    assert_int_equal(ga, 7);
    assert_int_equal(gb, delta_writer_bytes(w) + 32);
    assert_memory_equal(ca, cb, 7);
    size_t rest_len;
    uint8_t *rest = slurp(a, &rest_len);
    assert_int_equal(rest_len + 7, gb);
    assert_memory_equal(rest, cb + 7, rest_len);
    free(rest);
    io_reader_free(a);
    io_reader_free(b);

    /* reset: empty again, then a fresh delta; a payload reader left open sees the cut */
    assert_int_equal(delta_writer_payload(w, &a), 0);
    assert_int_equal(delta_writer_reset(w), 0);
    assert_int_equal(io_read(a, ca, sizeof ca, &ga), ERR_IO);
    io_reader_free(a);
    assert_int_equal(delta_writer_events(w), 0);
    assert_int_equal(delta_writer_bytes(w), 0);
    assert_int_equal(delta_writer_last_revision(w), 0);
    assert_int_equal(delta_writer_append(w, &older, 0), 0);
    assert_int_equal(delta_writer_payload(w, &out), 0);
    size_t len;
    uint8_t *p = slurp(out, &len);
    EvList l;
    assert_int_equal(read_events(p, len, &l), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.ev[0].mod_revision, 4);
    evlist_free(&l);
    free(p);
    io_reader_free(out);
    delta_writer_free(w);
    delta_writer_free(NULL);
    delta_reader_close(NULL);
}

/* ---- what Go's decoder accepts, the reader accepts ---- */

#define T "\"time\":\"2026-01-01T00:00:00Z\""

static void test_reader_accepts_what_go_accepts(void **state) {
    (void)state;
    EvList l;
    /* whitespace between and inside elements */
    assert_int_equal(
        read_json_events(" \n[ {\"etcdEvent\" : {\"kv\":{\"key\":\"YQ==\",\"mod_revision\""
                         ":1}}, " T "} ,\r\n\t{\"etcdEvent\":{\"kv\":{\"key\":\"Yg==\","
                         "\"mod_revision\":2}}," T "}\n]\n ",
                         &l),
        0);
    assert_int_equal(l.n, 2);
    assert_memory_equal(l.ev[1].key, "b", 1);
    evlist_free(&l);

    /* keys match case-insensitively (and U+017F folds to 's'); unknown keys are ignored, also
     * when their strings hold brackets; null leaves numbers alone; objects merge */
    assert_int_equal(
        read_json_events(
            "[{\"ETCDEVENT\":{\"Type\":1,\"KV\":{\"Key\":\"YQ==\",\"MOD_REVISION\":5,"
            "\"lea\\u017fe\":7,\"version\":null,\"extra\":[1,{\"x\":\"]}\\\"\"}]},"
            "\"prev_kv\":{\"key\":\"Yg==\"},\"foo\":null},\"TIME\":"
            "\"2026-01-01T00:00:00.5-07:30\",\"other\":{\"a\":\"}\"}},"
            "{\"etcdEvent\":{\"kv\":{\"key\":\"Y\\u0051==\"},\"Kv\":{\"mod_revision\":6,"
            "\"value\":\"Y\\nQ\\r\\n==\"},\"type\":null},"
            "\"t\\u0131me\":\"2026-01-01T00:00:00Z\"},"
            "{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"key\":null,\"mod_revision\":7,"
            "\"ke\":1,\"keys\":2}}," T "}]",
            &l),
        0);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.ev[0].type, ETCD_OP_DELETE);
    assert_int_equal(l.ev[0].mod_revision, 5);
    assert_int_equal(l.ev[0].lease, 7);
    assert_int_equal(l.ev[0].key_len, 1);
    assert_memory_equal(l.ev[0].key, "a", 1);
    assert_int_equal(l.ev[1].type, ETCD_OP_PUT);
    assert_int_equal(l.ev[1].mod_revision, 6);
    assert_memory_equal(l.ev[1].key, "a", 1);
    assert_int_equal(l.ev[1].value_len, 1);
    assert_memory_equal(l.ev[1].value, "a", 1);
    assert_int_equal(l.ev[2].mod_revision, 7);
    assert_int_equal(l.ev[2].key_len, 0); /* exact duplicate key: the last one counts */
    evlist_free(&l);

    /* an empty array is an empty delta */
    assert_int_equal(read_json_events("[ ]", &l), 0);
    assert_int_equal(l.n, 0);
    evlist_free(&l);

    /* times Go's parser takes */
    static const char *times[] = {
        "2026-01-01T00:00:00+01:00", "2024-02-29T23:59:59.123456789123Z",
        "2026-01-01T1:02:03Z",       "2026-01-01T00:00:00,5Z",
        "0000-01-01T00:00:00Z",      "9999-12-31T23:59:59.999999999-24:00",
    };
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        char json[256];
        snprintf(json, sizeof json,
                 "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}},\"time\":\"%s\"}]",
                 times[i]);
        assert_int_equal(read_json_events(json, &l), 0);
        assert_int_equal(l.n, 1);
        evlist_free(&l);
    }
}

/* ---- corrupt payloads ---- */

static void test_reader_rejects_a_payload_whose_hash_does_not_match(void **state) {
    (void)state;
    size_t len;
    uint8_t *payload = read_fixture(0, &len);
    EvList l;
    size_t flips[] = {0, 1, 100, len / 2, len - 33, len - 32, len - 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        payload[flips[i]] ^= 0x01;
        assert_int_equal(read_events(payload, len, &l), ERR_CORRUPT);
        assert_non_null(strstr(err_msg(), "SHA-256"));
        payload[flips[i]] ^= 0x01;
    }
    size_t cuts[] = {len - 1, len - 31, len - 33, len / 2, 33};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        assert_int_equal(read_events(payload, cuts[i], &l), ERR_CORRUPT);
    size_t shorts[] = {0, 1, 31, 32};
    for (size_t i = 0; i < sizeof shorts / sizeof shorts[0]; i++) {
        assert_int_equal(read_events(payload, shorts[i], &l), ERR_CORRUPT);
        assert_non_null(strstr(err_msg(), "too short"));
    }
    /* 32 bytes that are the hash of nothing are still too short */
    uint8_t empty_hash[32];
    sha256("", 0, empty_hash);
    assert_int_equal(read_events(empty_hash, 32, &l), ERR_CORRUPT);
    free(payload);
}

static void test_reader_rejects_malformed_json_under_a_valid_hash(void **state) {
    (void)state;
#define KV(x) "[{\"etcdEvent\":{\"kv\":{" x "}}," T "}]"
#define EVT(x) "[{\"etcdEvent\":{" x "}," T "}]"
#define TM(x) "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}},\"time\":" x "}]"
#define OK_EL "{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}}," T "}"
    static const char *bad[] = {
        /* base64 */
        KV("\"key\":\"YQ\",\"mod_revision\":1"),
        KV("\"key\":\"YQ=\",\"mod_revision\":1"),
        KV("\"key\":\"Y===\",\"mod_revision\":1"),
        KV("\"key\":\"====\",\"mod_revision\":1"),
        KV("\"key\":\"YQ==YQ==\",\"mod_revision\":1"),
        KV("\"key\":\"Y!==\",\"mod_revision\":1"),
        KV("\"key\":\"YQ-_\",\"mod_revision\":1"),
        KV("\"key\":\"YQ== \",\"mod_revision\":1"),
        KV("\"value\":\"YWJj\\u0000\",\"mod_revision\":1"),
        KV("\"key\":5,\"mod_revision\":1"),
        /* time */
        TM("\"2026-01-01 00:00:00Z\""),
        TM("\"2026-02-29T00:00:00Z\""),
        TM("\"2026-01-01T24:00:00Z\""),
        TM("\"2026-01-01T00:60:00Z\""),
        TM("\"2026-01-01T00:00:60Z\""),
        TM("\"2026-01-01T00:00:00\""),
        TM("\"2026-01-01T00:00:00z\""),
        TM("\"2026-01-01t00:00:00Z\""),
        TM("\"2026-01-01T00:00:00.Z\""),
        TM("\"2026-01-01T00:00:00ZZ\""),
        TM("\"2026-01-01T00:00:00+0100\""),
        TM("\"2026-01-01T00:00:00+25:00\""),
        TM("\"26-01-01T00:00:00Z\""),
        TM("\"2026-1-01T00:00:00Z\""),
        TM("\"\""),
        TM("5"),
        TM("null"),
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}}}]",
        /* type */
        EVT("\"type\":2,\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}"),
        EVT("\"type\":-1,\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}"),
        EVT("\"type\":\"1\",\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}"),
        EVT("\"type\":1.0,\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}"),
        EVT("\"type\":4294967297,\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}"),
        /* revisions and numbers */
        KV("\"key\":\"YQ==\",\"mod_revision\":0"),
        KV("\"key\":\"YQ==\""),
        KV("\"key\":\"YQ==\",\"mod_revision\":-3"),
        KV("\"key\":\"YQ==\",\"mod_revision\":1.5"),
        KV("\"key\":\"YQ==\",\"mod_revision\":\"7\""),
        KV("\"key\":\"YQ==\",\"mod_revision\":1e3"),
        KV("\"key\":\"YQ==\",\"mod_revision\":99999999999999999999"),
        KV("\"key\":\"YQ==\",\"mod_revision\":1,\"lease\":true"),
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":5}}," T "},"
        "{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":4}}," T "}]",
        /* shapes */
        EVT("\"type\":1"),
        EVT("\"kv\":[]"),
        EVT("\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1},\"kv\":null"),
        EVT("\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1},\"prev_kv\":{\"key\":\"YQ\"}"),
        EVT("\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1},\"prev_kv\":7"),
        "[{\"etcdEvent\":\"x\"," T "}]",
        "[{\"etcdEvent\":null," T "}]",
        "[null]",
        "[5]",
        "[[" OK_EL "]]",
        "{}",
        "null",
        "x",
        " ",
        "[",
        "[" OK_EL,
        "[" OK_EL ",",
        "[" OK_EL ",]",
        "[" OK_EL "]x",
        "[" OK_EL "]]",
        "[" OK_EL " " OK_EL "]",
        "[" OK_EL ",," OK_EL "]",
        "[,]",
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1]}," T "}]",
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}}," T,
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}}," T "}}]",
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==,\"mod_revision\":1}}," T "}]",
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"\xff\xfe\",\"mod_revision\":1}}," T "}]",
        "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1}}," T ",}]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        EvList l;
        int rc = read_json_events(bad[i], &l);
        if (rc != ERR_CORRUPT) fail_msg("case %zu accepted (rc %d): %s", i, rc, bad[i]);
        if (!strstr(err_msg(), "offset")) fail_msg("case %zu: no offset in \"%s\"", i, err_msg());
        evlist_free(&l);
    }
    /* the message names the element's offset and what is wrong */
    EvList l;
    assert_int_equal(read_json_events("[" OK_EL ",{\"etcdEvent\":{\"type\":2,\"kv\":{"
                                      "\"mod_revision\":1}}," T "}]",
                                      &l),
                     ERR_CORRUPT);
    assert_int_equal(l.n, 1);
    char want[64];
    snprintf(want, sizeof want, "event 1 at byte offset %zu", strlen("[" OK_EL ","));
    if (!strstr(err_msg(), want) || !strstr(err_msg(), "type 2"))
        fail_msg("unexpected message: %s", err_msg());
    evlist_free(&l);
#undef KV
#undef EVT
#undef TM
#undef OK_EL
}

static void test_reader_rejects_an_element_over_64_mib(void **state) {
    (void)state;
    static const char head[] = "[{\"etcdEvent\":{\"kv\":{\"key\":\"YQ==\",\"mod_revision\":1,"
                               "\"value\":\"";
    static const char tail[] = "\"}}," T "}]";
    size_t b64 = (size_t)64 * 1024 * 1024; /* element = head + 64 MiB + tail: just over */
    size_t n = strlen(head) + b64 + strlen(tail);
    char *json = malloc(n + 32);
    assert_non_null(json);
    memcpy(json, head, strlen(head));
    memset(json + strlen(head), 'A', b64);
    memcpy(json + strlen(head) + b64, tail, strlen(tail));
    sha256(json, n, (uint8_t *)json + n);
    EvList l;
    assert_int_equal(read_events(json, n + 32, &l), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "larger than 64 MiB"));
    free(json);
}

/* ---- a full disk ---- */

static void test_full_disk_is_an_error_never_a_short_delta(void **state) {
    (void)state;
    char dir[sizeof g_tmp + 8];
    snprintf(dir, sizeof dir, "%s/tiny", g_tmp);
    assert_int_equal(fs_mkdir_p(dir, 0700), 0);
    if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) {
        rmdir(dir);
        testutil_skip("cannot mount a tmpfs for the full-disk case (needs root)");
    }
    DeltaWriter *w = NULL;
    assert_int_equal(delta_writer_new(dir, &w), 0);
    static uint8_t value[16 * 1024];
    memset(value, 'v', sizeof value);
    int rc = 0;
    size_t appended = 0;
    IoReader *out = NULL;
    for (int i = 1; i <= 64 && rc == 0; i++) {
        EtcdEvent ev = mk_event(ETCD_OP_PUT, "/k", 2, value, sizeof value, i, i, 1, 0);
        rc = delta_writer_append(w, &ev, 0);
        if (rc == 0) appended++;
        assert_int_equal(delta_writer_events(w), appended); /* a failed append leaves no trace */
    }
    if (rc == 0) rc = delta_writer_payload(w, &out);
    assert_int_equal(rc, ERR_IO);
    assert_null(out);
    assert_non_null(strstr(err_msg(), "No space left"));
    assert_true(appended > 0 && appended < 64);
    /* sealing what fits is also refused while the disk is full, never silently short */
    rc = delta_writer_payload(w, &out);
    if (rc == 0) {
        size_t len;
        uint8_t *p = slurp(out, &len);
        EvList l;
        assert_int_equal(read_events(p, len, &l), 0);
        assert_int_equal(l.n, appended);
        evlist_free(&l);
        free(p);
        io_reader_free(out);
    } else {
        assert_int_equal(rc, ERR_IO);
    }
    /* an event larger than the write buffer fails half-written and is cut off again */
    static uint8_t huge[100 * 1024];
    memset(huge, 'h', sizeof huge);
    assert_int_equal(delta_writer_reset(w), 0);
    EtcdEvent big = mk_event(ETCD_OP_PUT, "/h", 2, huge, sizeof huge, 1, 1, 1, 0);
    assert_int_equal(delta_writer_append(w, &big, 0), ERR_IO);
    assert_int_equal(delta_writer_events(w), 0);
    assert_int_equal(delta_writer_bytes(w), 0);
    /* after a reset the space is back */
    assert_int_equal(delta_writer_reset(w), 0);
    EtcdEvent small = mk_event(ETCD_OP_PUT, "/k", 2, "v", 1, 1, 1, 1, 0);
    assert_int_equal(delta_writer_append(w, &small, 0), 0);
    assert_int_equal(delta_writer_payload(w, &out), 0);
    size_t len;
    uint8_t *p = slurp(out, &len);
    io_reader_free(out);
    EvList l;
    assert_int_equal(read_events(p, len, &l), 0);
    assert_int_equal(l.n, 1);
    evlist_free(&l);
    free(p);
    delta_writer_free(w);

    /* the reader's spool on a full disk: ERR_IO, not ERR_CORRUPT */
    size_t big_n = 128 * 1024;
    char *json = malloc(big_n + 32);
    assert_non_null(json);
    memset(json, ' ', big_n);
    json[0] = '[';
    json[big_n - 1] = ']';
    sha256(json, big_n, (uint8_t *)json + big_n);
    IoReader *src = io_mem_reader_new(json, big_n + 32);
    DeltaReader *r = NULL;
    assert_int_equal(delta_reader_open(src, dir, &r), ERR_IO);
    assert_null(r);
    io_reader_free(src);
    free(json);
    assert_int_equal(umount(dir), 0);
    rmdir(dir);
}

/* ---- leaseTTL, fast path equivalence, times ---- */

static size_t count_substr(const void *hay, size_t n, const char *needle) {
    size_t c = 0, m = strlen(needle);
    const uint8_t *p = hay, *end = p + n;
    while ((p = memmem(p, (size_t)(end - p), needle, m)) != NULL) {
        c++;
        p += m;
    }
    return c;
}

static void assert_same_events(const EvList *a, const EvList *b, const char *what) {
    if (a->n != b->n) fail_msg("%s: %zu events vs %zu", what, a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const Ev *x = &a->ev[i], *y = &b->ev[i];
        if (x->type != y->type || x->key_len != y->key_len || x->value_len != y->value_len ||
            memcmp(x->key, y->key, x->key_len) != 0 ||
            memcmp(x->value, y->value, x->value_len) != 0 ||
            x->create_revision != y->create_revision || x->mod_revision != y->mod_revision ||
            x->version != y->version || x->lease != y->lease || x->time_ns != y->time_ns ||
            x->lease_ttl != y->lease_ttl)
            fail_msg("%s: event %zu differs (type %d/%d, key %zu/%zu bytes, value %zu/%zu, "
                     "create %lld/%lld, mod %lld/%lld, version %lld/%lld, lease %lld/%lld, "
                     "time %lld/%lld, leaseTTL %lld/%lld)",
                     what, i, (int)x->type, (int)y->type, x->key_len, y->key_len, x->value_len,
                     y->value_len, (long long)x->create_revision, (long long)y->create_revision,
                     (long long)x->mod_revision, (long long)y->mod_revision, (long long)x->version,
                     (long long)y->version, (long long)x->lease, (long long)y->lease,
                     (long long)x->time_ns, (long long)y->time_ns, (long long)x->lease_ttl,
                     (long long)y->lease_ttl);
    }
}

/* The same JSON with a space after every ':' and ',' outside strings: equal to Go's decoder, but
 * never the canonical form, so the reader must take its general path. */
static char *respace(const void *json, size_t n, size_t *out_n) {
    const uint8_t *p = json;
    char *o = malloc(2 * n + 1);
    assert_non_null(o);
    size_t k = 0;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        o[k++] = (char)c;
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == ':' || c == ',') {
            o[k++] = ' ';
        }
    }
    o[k] = '\0';
    *out_n = k;
    return o;
}

static void test_lease_ttl_round_trips_after_time(void **state) {
    (void)state;
    const int64_t t = 1714979289123456700LL; /* 2024-05-06T07:08:09.1234567Z */
    const int64_t lease = 7587869123456789012LL;
    EtcdEvent first = mk_event(ETCD_OP_PUT, "/a", 2, "v", 1, 5, 5, 1, lease);
    EtcdEvent again = mk_event(ETCD_OP_PUT, "/b", 2, "w", 1, 6, 6, 1, lease);
    EtcdEvent other = mk_event(ETCD_OP_PUT, "/c", 2, NULL, 0, 7, 7, 1, 42);
    EtcdEvent plain = mk_event(ETCD_OP_PUT, "/d", 2, "x", 1, 8, 8, 1, 0);
    EtcdEvent del = mk_event(ETCD_OP_DELETE, "/a", 2, NULL, 0, 0, 9, 0, 0);
    DeltaWriter *w = NULL;
    assert_int_equal(delta_writer_new(g_tmp, &w), 0);
    assert_int_equal(delta_writer_append_lease(w, &first, t, 77), 0);
    assert_int_equal(delta_writer_append_lease(w, &again, t + 1, 0), 0);
    assert_int_equal(delta_writer_append_lease(w, &other, t + 2, INT64_MAX), 0);
    /* a TTL only goes with a put that has a lease; none (<= 0) is always fine */
    assert_int_equal(delta_writer_append_lease(w, &plain, t, 3), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "leaseTTL"));
    assert_int_equal(delta_writer_append_lease(w, &del, t, 3), ERR_INVALID);
    assert_int_equal(delta_writer_events(w), 3);
    assert_int_equal(delta_writer_append_lease(w, &plain, t + 3, -5), 0);
    assert_int_equal(delta_writer_append(w, &del, t + 4), 0);
    IoReader *out = NULL;
    assert_int_equal(delta_writer_payload(w, &out), 0);
    size_t len;
    uint8_t *payload = slurp(out, &len);
    /* exactly after "time", no spaces: the form the fast path expects */
    assert_true(contains(payload, len,
                         "{\"etcdEvent\":{\"kv\":{\"key\":\"L2E=\",\"create_revision\":5,"
                         "\"mod_revision\":5,\"version\":1,\"value\":\"dg==\",\"lease\":"
                         "7587869123456789012}},\"time\":\"2024-05-06T07:08:09.1234567Z\","
                         "\"leaseTTL\":77}"));
    assert_true(contains(payload, len,
                         "\"lease\":42}},\"time\":\"2024-05-06T07:08:09.1234567"
                         "02Z\",\"leaseTTL\":9223372036854775807}"));
    assert_int_equal(count_substr(payload, len, "leaseTTL"), 2);
    json_error_t jerr;
    json_t *arr = json_loadb((const char *)payload, len - 32, 0, &jerr);
    assert_non_null(arr); /* still plain JSON */
    json_decref(arr);

    EvList l;
    assert_int_equal(read_events(payload, len, &l), 0);
    assert_int_equal(l.n, 5);
    assert_int_equal(g_fast_events, 5);
    static const int64_t want_ttl[] = {77, 0, INT64_MAX, 0, 0};
    for (size_t i = 0; i < 5; i++) {
        assert_true(l.ev[i].lease_ttl == want_ttl[i]);
        assert_true(l.ev[i].time_ns == t + (int64_t)i);
    }
    assert_true(l.ev[0].lease == lease);
    evlist_free(&l);
    free(payload);
    io_reader_free(out);
    delta_writer_free(w);
}

static uint64_t rng_state;

static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t test_seed(const char *test) {
    const char *s = getenv("ETCDBR_TEST_SEED");
    uint64_t seed = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    fprintf(stderr, "%s: seed %llu (ETCDBR_TEST_SEED=%llu replays it)\n", test,
            (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

/* 0..3000 bytes, mostly short; NUL, high bytes and JSON's special characters are frequent. */
static size_t random_bytes(uint8_t *buf) {
    size_t n;
    switch (rnd() % 4) {
    case 0:
        n = 0;
        break;
    case 1:
        n = rnd() % 16;
        break;
    case 2:
        n = rnd() % 300;
        break;
    default:
        n = rnd() % 3001;
    }
    static const uint8_t special[] = {0, 0xff, 0x80, 0xc3, '"', '\\', '/', '=', '\n', 0x7f};
    for (size_t i = 0; i < n; i++)
        buf[i] = rnd() % 4 ? (uint8_t)rnd() : special[rnd() % sizeof special];
    return n;
}

/* A revision-like number: zero, small, negative, 19 digits or an extreme. */
static int64_t random_number(int64_t near) {
    switch (rnd() % 8) {
    case 0:
        return 0;
    case 1:
        return near;
    case 2:
        return (int64_t)(rnd() % 1000);
    case 3:
        return -(int64_t)(rnd() % 1000) - 1;
    case 4:
        return INT64_MAX - (int64_t)(rnd() % 3);
    case 5:
        return INT64_MIN + (int64_t)(rnd() % 3);
    case 6:
        return (int64_t)(UINT64_C(1000000000000000000) + rnd() % UINT64_C(8000000000000000000));
    default:
        return (int64_t)rnd();
    }
}

static void test_fast_path_decodes_like_the_general_path(void **state) {
    (void)state;
    rng_state = test_seed("test_fast_path_decodes_like_the_general_path");
    uint8_t *kbuf = malloc(3001), *vbuf = malloc(3001);
    assert_non_null(kbuf);
    assert_non_null(vbuf);
    size_t total = 0, with_ttl = 0;
    for (int round = 0; round < 40; round++) {
        size_t n = 1 + rnd() % 60;
        EvList want = {calloc(n, sizeof(Ev)), n};
        assert_non_null(want.ev);
        int64_t rev = rnd() % 5 ? 1 + (int64_t)(rnd() % 1000000) : INT64_MAX - 200;
        DeltaWriter *w = NULL;
        assert_int_equal(delta_writer_new(g_tmp, &w), 0);
        for (size_t i = 0; i < n; i++) {
            Ev *e = &want.ev[i];
            if (i > 0 && rnd() % 3) rev += 1 + (int64_t)(rnd() % 3); /* else: same txn */
            e->type = rnd() % 3 ? ETCD_OP_PUT : ETCD_OP_DELETE;
            e->key_len = random_bytes(kbuf);
            e->key = dup_bytes(kbuf, e->key_len);
            e->mod_revision = rev;
            int realistic_delete = e->type == ETCD_OP_DELETE && rnd() % 4;
            if (!realistic_delete) {
                e->value_len = random_bytes(vbuf);
                e->create_revision = random_number(rev);
                e->version = random_number(1);
                e->lease = rnd() % 2 ? 0 : random_number(7587869123456789012LL);
            }
            e->value = dup_bytes(vbuf, e->value_len);
            int64_t ttl = 0;
            if (e->type == ETCD_OP_PUT && e->lease != 0 && rnd() % 3) {
                static const int64_t ttls[] = {1, 77, 3600, INT64_MAX};
                ttl = rnd() % 2 ? ttls[rnd() % 4] : 1 + (int64_t)(rnd() % 1000000000);
            } else if (rnd() % 8 == 0) {
                ttl = -(int64_t)(rnd() % 100); /* none, written as none */
            }
            e->lease_ttl = ttl > 0 ? ttl : 0;
            e->time_ns = rnd() % 4 ? 1700000000000000000LL + (int64_t)(rnd() % 1000000000000000)
                                   : (int64_t)rnd();
            EtcdEvent ev = mk_event(e->type, e->key, e->key_len, e->value, e->value_len,
                                    e->create_revision, e->mod_revision, e->version, e->lease);
            int rc = ttl || rnd() % 2 ? delta_writer_append_lease(w, &ev, e->time_ns, ttl)
                                      : delta_writer_append(w, &ev, e->time_ns);
            if (rc) fail_msg("round %d event %zu: append: %s", round, i, err_msg());
            with_ttl += e->lease_ttl > 0;
        }
        IoReader *out = NULL;
        assert_int_equal(delta_writer_payload(w, &out), 0);
        size_t len;
        uint8_t *payload = slurp(out, &len);
        io_reader_free(out);
        delta_writer_free(w);

        EvList fast, general;
        assert_int_equal(read_events(payload, len, &fast), 0);
        if (g_fast_events != n)
            fail_msg("round %d: fast path decoded %llu of %zu canonical events", round,
                     (unsigned long long)g_fast_events, n);
        assert_same_events(&want, &fast, "written vs read (fast path)");
        size_t sn;
        char *sp = respace(payload, len - 32, &sn);
        size_t plen;
        uint8_t *p2 = make_payload(sp, sn, &plen);
        assert_int_equal(read_events(p2, plen, &general), 0);
        assert_int_equal(g_fast_events, 0);
        assert_same_events(&fast, &general, "fast path vs general path");
        total += n;
        evlist_free(&fast);
        evlist_free(&general);
        evlist_free(&want);
        free(sp);
        free(p2);
        free(payload);
    }
    fprintf(stderr, "fast path equivalence: %zu events, %zu with leaseTTL\n", total, with_ttl);
    free(kbuf);
    free(vbuf);
}

/* One element in many spellings: each must decode the same (or fail with the same code) whether
 * the fast path may try it or the general path must take it. */
static void test_fast_path_agrees_on_hand_written_elements(void **state) {
    (void)state;
#define EL(kv, tail) "[{\"etcdEvent\":{\"kv\":{" kv "}},\"time\":\"2026-01-01T00:00:00Z\"" tail "}]"
#define CANON_KV "\"key\":\"YQ==\",\"mod_revision\":3,\"version\":1,\"lease\":5"
    static const struct {
        const char *json;
        int rc;      /* 0 or the error both paths give */
        int fast;    /* events the fast path takes */
        int64_t ttl; /* when accepted */
        const char *key;
        int64_t lease;
    } cases[] = {
        {EL(CANON_KV, ",\"leaseTTL\":77"), 0, 1, 77, "a", 5},
        {EL("\"lease\":5,\"version\":1,\"mod_revision\":3,\"key\":\"YQ==\"", ",\"leaseTTL\":77"), 0,
         0, 77, "a", 5},
        {"[{\"time\":\"2026-01-01T00:00:00Z\",\"leaseTTL\":77,\"etcdEvent\":{\"kv\":{" CANON_KV
         "}}}]",
         0, 0, 77, "a", 5},
        {"[{\"etcdEvent\":{\"kv\":{" CANON_KV "}},\"leaseTTL\":77,\"time\":\"2026-01-01T00:00:00Z\""
         "}]",
         0, 0, 77, "a", 5},
        {EL("\"Key\":\"YQ==\",\"mod_revision\":3,\"version\":1,\"lease\":5", ",\"leaseTTL\":77"), 0,
         0, 77, "a", 5},
        {EL(CANON_KV, ",\"LeaseTTL\":77"), 0, 0, 77, "a", 5},
        {EL(CANON_KV, ",\"leasettl\":77"), 0, 0, 77, "a", 5},
        {"[{\"EtcdEvent\":{\"kv\":{" CANON_KV "}},\"time\":\"2026-01-01T00:00:00Z\"}]", 0, 0, 0,
         "a", 5},
        {EL("\"key\":\"Y\\u0051==\",\"mod_revision\":3,\"version\":1,\"lease\":5", ""), 0, 0, 0,
         "a", 5},
        {EL("\"key\":\"\\u0041A==\",\"mod_revision\":3,\"lease\":5", ""), 0, 0, 0, "\0", 5},
        {EL("\"key\":\"\\/w==\",\"mod_revision\":3,\"lease\":5", ""), 0, 0, 0, "\xff", 5},
        {EL("\"key\":\"YR==\",\"mod_revision\":3,\"lease\":5", ""), 0, 1, 0, "a", 5},
        {EL(CANON_KV, ",\"leaseTTL\":-3"), 0, 1, -3, "a", 5},
        {EL(CANON_KV, ",\"leaseTTL\":null"), 0, 0, 0, "a", 5},
        {EL(CANON_KV, ",\"leaseTTL\":1,\"leaseTTL\":2"), 0, 0, 2, "a", 5},
        {EL(CANON_KV, ",\"leaseTTL\":77,\"other\":[1]"), 0, 0, 77, "a", 5},
        {EL("\"key\":\"YQ==\",\"mod_revision\":3,\"lease\":-0", ""), 0, 1, 0, "a", 0},
        {EL("\"key\":\"YQ==\",\"mod_revision\":3,\"lease\":-9223372036854775808",
            ",\"leaseTTL\":9223372036854775807"),
         0, 1, INT64_MAX, "a", INT64_MIN},
        {"[{\"etcdEvent\":{\"type\":0,\"kv\":{" CANON_KV "}},\"time\":\"2026-01-01T00:00:00Z\"}]",
         0, 1, 0, "a", 5},
        {EL("\"key\":\"YQ==\",\"mod_revision\":3,\"value\":\"\",\"lease\":5", ""), 0, 1, 0, "a", 5},
        {"[{\"etcdEvent\":{\"kv\":{" CANON_KV "}},\"time\":\"2026-01-01T02:00:00+02:00\"}]", 0, 1,
         0, "a", 5},
        {EL(CANON_KV, ",\"leaseTTL\":12345678901234567890"), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL("\"key\":\"YQ==\",\"mod_revision\":3,\"lease\":12345678901234567890", ""), ERR_CORRUPT,
         0, 0, NULL, 0},
        {EL("\"key\":\"YQ==\",\"mod_revision\":3,\"lease\":9223372036854775808", ""), ERR_CORRUPT,
         0, 0, NULL, 0},
        {EL(CANON_KV, ",\"leaseTTL\":\"77\""), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL(CANON_KV, ",\"leaseTTL\":7.5"), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL(CANON_KV, ",\"leaseTTL\":1e3"), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL(CANON_KV, ",\"leaseTTL\":077"), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL(CANON_KV, ",\"leaseTTL\":"), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL(CANON_KV, ",\"leaseTTL\":77,"), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL("\"key\":\"YQ==\",\"mod_revision\":03", ""), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL("\"key\":\"YQ=\",\"mod_revision\":3", ""), ERR_CORRUPT, 0, 0, NULL, 0},
        {EL("\"key\":\"YQ==\",\"mod_revision\":0", ""), ERR_CORRUPT, 0, 0, NULL, 0},
    };
#undef EL
#undef CANON_KV
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *json = cases[i].json;
        EvList a, b;
        int rc_a = read_json_events(json, &a);
        uint64_t fast = g_fast_events;
        size_t sn;
        char *sp = respace(json, strlen(json), &sn);
        int rc_b = read_json_events(sp, &b);
        if (rc_a != rc_b || rc_a != cases[i].rc)
            fail_msg("case %zu: rc %s as written, %s respaced, want %s: %s", i, err_name(rc_a),
                     err_name(rc_b), err_name(cases[i].rc), json);
        if (fast != (uint64_t)cases[i].fast || g_fast_events != 0)
            fail_msg("case %zu: fast path took %llu events (want %d), respaced %llu: %s", i,
                     (unsigned long long)fast, cases[i].fast, (unsigned long long)g_fast_events,
                     json);
        assert_same_events(&a, &b, json);
        if (rc_a == 0) {
            assert_int_equal(a.n, 1);
            size_t klen = cases[i].key[0] ? strlen(cases[i].key) : 1;
            assert_int_equal(a.ev[0].key_len, klen);
            assert_memory_equal(a.ev[0].key, cases[i].key, klen);
            assert_true(a.ev[0].mod_revision == 3);
            assert_true(a.ev[0].lease == cases[i].lease);
            assert_true(a.ev[0].lease_ttl == cases[i].ttl);
            assert_true(a.ev[0].time_ns == 1767225600000000000LL);
        }
        evlist_free(&a);
        evlist_free(&b);
        free(sp);
    }
}

static void test_parse_time_gives_unix_nanoseconds(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int64_t ns;
    } cases[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"1969-12-31T23:59:59.999999999Z", -1},
        {"2024-05-06T07:08:09Z", 1714979289000000000LL},
        {"2024-05-06T07:08:09.1Z", 1714979289100000000LL},
        {"2024-05-06T07:08:09.12Z", 1714979289120000000LL},
        {"2024-05-06T07:08:09.1234567Z", 1714979289123456700LL},
        {"2024-05-06T07:08:09.123456789Z", 1714979289123456789LL},
        {"2024-05-06T07:08:09.1234567899999Z", 1714979289123456789LL}, /* truncated, as Go */
        {"2024-05-06T09:08:09.1234567+02:00", 1714979289123456700LL},
        {"2024-05-06T00:30:00-05:30", 1714975200000000000LL},
        {"2024-05-06T7:08:09Z", 1714979289000000000LL},
        {"2024-05-06T9:08:09+02:00", 1714979289000000000LL},
        {"2000-02-29T12:00:00,5Z", 951825600500000000LL},
        /* the edges of int64 nanoseconds, and saturation beyond them */
        {"1677-09-21T00:12:43.145224192Z", INT64_MIN},
        {"1677-09-21T00:12:43.145224193Z", INT64_MIN + 1},
        {"1677-09-21T00:12:43.145224191Z", INT64_MIN},
        {"0000-01-01T00:00:00Z", INT64_MIN},
        {"2262-04-11T23:47:16.854775807Z", INT64_MAX},
        {"2262-04-11T23:47:16.854775806Z", INT64_MAX - 1},
        {"2262-04-11T23:47:16.854775808Z", INT64_MAX},
        {"9999-12-31T23:59:59.999999999-24:00", INT64_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t ns = 12345;
        int rc = delta_parse_time(cases[i].text, &ns);
        if (rc || ns != cases[i].ns)
            fail_msg("%s: rc %s, %lld ns, want %lld", cases[i].text, err_name(rc), (long long)ns,
                     (long long)cases[i].ns);
    }
    static const char *bad[] = {"",
                                "2024-05-06 07:08:09Z",
                                "2024-05-06T07:08:09",
                                "2023-02-29T00:00:00Z",
                                "2024-05-06T07:08:09.Z",
                                "2024-05-06T07:08:09+2:00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ns = 0;
        assert_int_equal(delta_parse_time(bad[i], &ns), ERR_INVALID);
    }
    int64_t ns = 0;
    assert_int_equal(delta_parse_time(NULL, &ns), ERR_INVALID);
}

/* delta_event_check: what etcd writes passes (a create, an update, a delete), what it never
 * writes is ERR_CORRUPT naming the revision: the restorer and verify both apply it. */
static void test_event_check_refuses_what_etcd_never_writes(void **state) {
    (void)state;
    uint8_t key[] = "/k";
    DeltaEvent ev = {.type = ETCD_OP_PUT,
                     .key = key,
                     .key_len = 2,
                     .create_revision = 7,
                     .mod_revision = 7,
                     .version = 1};
    assert_int_equal(delta_event_check(&ev), 0);
    ev.create_revision = 3;
    ev.version = 4;
    assert_int_equal(delta_event_check(&ev), 0); /* an update */
    DeltaEvent del = {.type = ETCD_OP_DELETE, .key = key, .key_len = 2, .mod_revision = 9};
    assert_int_equal(delta_event_check(&del), 0);
    DeltaEvent bad = ev;
    bad.key_len = 0;
    assert_int_equal(delta_event_check(&bad), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "event at revision 7 has no key"));
    del.key_len = 0;
    assert_int_equal(delta_event_check(&del), ERR_CORRUPT);
    bad = ev;
    bad.create_revision = 8; /* after the put */
    assert_int_equal(delta_event_check(&bad), ERR_CORRUPT);
    assert_non_null(strstr(err_msg(), "create_revision 8 and version 4"));
    bad = ev;
    bad.version = 0;
    assert_int_equal(delta_event_check(&bad), ERR_CORRUPT);
    bad = ev;
    bad.version = 1; /* version 1 but created earlier */
    assert_int_equal(delta_event_check(&bad), ERR_CORRUPT);
    bad = ev;
    bad.create_revision = 7;
    bad.version = 2; /* created here but not version 1 */
    assert_int_equal(delta_event_check(&bad), ERR_CORRUPT);
    bad.create_revision = 0;
    assert_int_equal(delta_event_check(&bad), ERR_CORRUPT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_every_event_of_the_go_fixture_deltas),
        cmocka_unit_test(test_reads_a_source_that_returns_small_chunks),
        cmocka_unit_test(test_writer_rebuilds_the_go_fixture_deltas_byte_for_byte),
        cmocka_unit_test(test_round_trip_of_awkward_events),
        cmocka_unit_test(test_writer_formats_time_like_go_rfc3339nano),
        cmocka_unit_test(test_writer_rejects_misuse_and_resets_for_the_next_delta),
        cmocka_unit_test(test_reader_accepts_what_go_accepts),
        cmocka_unit_test(test_reader_rejects_a_payload_whose_hash_does_not_match),
        cmocka_unit_test(test_reader_rejects_malformed_json_under_a_valid_hash),
        cmocka_unit_test(test_reader_rejects_an_element_over_64_mib),
        cmocka_unit_test(test_full_disk_is_an_error_never_a_short_delta),
        cmocka_unit_test(test_lease_ttl_round_trips_after_time),
        cmocka_unit_test(test_fast_path_decodes_like_the_general_path),
        cmocka_unit_test(test_fast_path_agrees_on_hand_written_elements),
        cmocka_unit_test(test_parse_time_gives_unix_nanoseconds),
        cmocka_unit_test(test_event_check_refuses_what_etcd_never_writes),
    };
    return testutil_exit(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
