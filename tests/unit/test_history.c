/* test_history: the pure parts of backup histories (src/store/history.h, docs/store-history.md):
 * tagging and abandonment (history_annotate), the snapshotter's decision table (history_decide),
 * the record and restore-mark JSON, and history ids. Snapshot lists are built from names with
 * snapname_parse and sorted with snapname_sort, as store_list returns them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/log.h"
#include "store/history.h"
#include "store/snapname.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H1 "1111111111111111"
#define H2 "2222222222222222"
#define H3 "3333333333333333"
#define HNEW "abcdef0123456789" /* a restore mark's new_history */
#define C1 UINT64_C(0xc1)       /* this etcd's cluster */
#define C2 UINT64_C(0xc2)       /* another cluster */
#define M1 UINT64_C(0x11)
#define NOW INT64_C(1800000000)
#define T0 INT64_C(1700000000)

/* ---------- building lists ---------- */

typedef struct Obj {
    const char *key; /* relative to the store root, prefix "" */
    const char *history;
} Obj;

#define MAX_OBJS 12

/* Parses the objs (up to the first NULL key or n), sets their history and sorts them. Returns
 * the count. */
static size_t build(Snapshot *v, const Obj *objs, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n && objs[i].key; i++) {
        int rc = snapname_parse(objs[i].key, "", &v[k]);
        if (rc != 0) fail_msg("snapname_parse %s: %s", objs[i].key, err_msg());
        snprintf(v[k].history, sizeof v[k].history, "%s", objs[i].history ? objs[i].history : "");
        k++;
    }
    snapname_sort(v, k);
    return k;
}

static const Snapshot *find_key(const Snapshot *v, size_t n, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].key, key) == 0) return &v[i];
    fail_msg("no snapshot %s in the list", key);
    return NULL;
}

static HistoryRecord rec(const char *id, uint64_t cluster) {
    HistoryRecord r;
    memset(&r, 0, sizeof r);
    snprintf(r.id, sizeof r.id, "%s", id);
    r.cluster_id = cluster;
    r.member_id = M1;
    r.created_s = T0;
    snprintf(r.reason, sizeof r.reason, "new");
    return r;
}

static void rec_abandon(HistoryRecord *r, const char *history, int64_t after) {
    assert_true(r->n_abandons < HISTORY_MAX_ABANDONS);
    HistoryAbandon *a = &r->abandons[r->n_abandons++];
    snprintf(a->history, sizeof a->history, "%s", history);
    a->after_revision = after;
}

static HistoryTag tag(const char *history, const char *name) {
    HistoryTag t;
    memset(&t, 0, sizeof t);
    snprintf(t.history, sizeof t.history, "%s", history);
    snprintf(t.name, sizeof t.name, "%s", name);
    return t;
}

/* ---------- history_id_valid, history_new_id, history_find, history_action_name ---------- */

static void test_id_valid_takes_16_lower_case_hex_digits_only(void **state) {
    (void)state;
    assert_true(history_id_valid("0123456789abcdef"));
    assert_true(history_id_valid(H1));
    const char *bad[] = {"",
                         "0123456789abcde",
                         "0123456789abcdef0",
                         "0123456789ABCDEF",
                         "0123456789abcdeg",
                         "0123456789abcde ",
                         " 0123456789abcde",
                         "0123456789abcd-f",
                         "record.json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (history_id_valid(bad[i])) fail_msg("history_id_valid(\"%s\") = 1, want 0", bad[i]);
    assert_false(history_id_valid(NULL));
}

static void test_new_id_is_valid_and_random(void **state) {
    (void)state;
    char a[HISTORY_ID_LEN + 1], b[HISTORY_ID_LEN + 1];
    assert_int_equal(history_new_id(a), 0);
    assert_int_equal(history_new_id(b), 0);
    assert_true(history_id_valid(a));
    assert_true(history_id_valid(b));
    assert_string_not_equal(a, b);
}

static void test_find_and_action_names(void **state) {
    (void)state;
    HistoryRecord r[2] = {rec(H1, C1), rec(H2, C2)};
    assert_ptr_equal(history_find(r, 2, H2), &r[1]);
    assert_ptr_equal(history_find(r, 2, H1), &r[0]);
    assert_null(history_find(r, 2, H3));
    assert_null(history_find(r, 2, ""));
    assert_null(history_find(r, 2, NULL));
    assert_null(history_find(r, 0, H1));
    assert_string_equal(history_action_name(HISTORY_NEW), "new");
    assert_string_equal(history_action_name(HISTORY_CONTINUE), "continue");
    assert_string_equal(history_action_name(HISTORY_ADOPT), "adopt");
    assert_string_equal(history_action_name(HISTORY_FORK), "fork");
    assert_string_equal(history_action_name(HISTORY_TAKEOVER), "takeover");
    assert_string_equal(history_action_name(HISTORY_NEED_DB), "need-db");
    assert_string_equal(history_action_name(HISTORY_REFUSE), "refuse");
}

/* ---------- records ---------- */

static void assert_record_equal(const HistoryRecord *got, const HistoryRecord *want) {
    assert_string_equal(got->id, want->id);
    assert_int_equal(got->cluster_id, want->cluster_id);
    assert_int_equal(got->member_id, want->member_id);
    assert_int_equal(got->created_s, want->created_s);
    assert_string_equal(got->reason, want->reason);
    assert_int_equal(got->adopts_untagged, want->adopts_untagged);
    assert_int_equal(got->n_abandons, want->n_abandons);
    for (size_t i = 0; i < want->n_abandons; i++) {
        assert_string_equal(got->abandons[i].history, want->abandons[i].history);
        assert_int_equal(got->abandons[i].after_revision, want->abandons[i].after_revision);
    }
}

static void test_record_format_parse_round_trips(void **state) {
    (void)state;
    HistoryRecord in[3];
    in[0] = rec(H1, UINT64_C(0xd1ca6ad7c15e05cc));
    in[0].member_id = UINT64_C(0x8e9e05c52164694d);
    in[0].created_s = 1796147732;
    in[1] = rec(H2, C1);
    snprintf(in[1].reason, sizeof in[1].reason, "fork");
    in[1].adopts_untagged = 1;
    rec_abandon(&in[1], H1, 41);
    rec_abandon(&in[1], "", 0);
    in[2] = rec(H3, 0); /* cluster unknown */
    in[2].member_id = UINT64_MAX;
    snprintf(in[2].reason, sizeof in[2].reason, "takeover");
    for (int k = 0; k < HISTORY_MAX_ABANDONS; k++)
        rec_abandon(&in[2], k % 2 ? H1 : "", (int64_t)k * INT64_C(1000000007));
    for (size_t i = 0; i < 3; i++) {
        char *json = NULL;
        size_t len = 0;
        assert_int_equal(history_record_format(&in[i], &json, &len), 0);
        assert_int_equal(strlen(json), len);
        HistoryRecord out;
        memset(&out, 0x5a, sizeof out);
        if (history_record_parse(json, len, &out) != 0)
            fail_msg("parse of formatted record %s: %s", json, err_msg());
        assert_record_equal(&out, &in[i]);
        assert_int_equal(out.effective, 0);
        free(json);
    }
    /* the stored form: ids as 16 hex digits, a format version, sorted keys */
    char *json = NULL;
    size_t len = 0;
    assert_int_equal(history_record_format(&in[1], &json, &len), 0);
    assert_string_equal(json, "{\"abandons\":[{\"after_revision\":41,\"history\":\"" H1 "\"},"
                              "{\"after_revision\":0,\"history\":\"\"}],\"adopts_untagged\":true,"
                              "\"cluster_id\":\"00000000000000c1\",\"created\":1700000000,"
                              "\"format\":1,\"history\":\"" H2 "\",\"member_id\":"
                              "\"0000000000000011\",\"reason\":\"fork\"}");
    free(json);
}

static void test_record_parse_reads_the_documented_example(void **state) {
    (void)state;
    const char *doc =
        "{\"format\":1,\"history\":\"9539a7d3edef1399\",\"cluster_id\":\"d1ca6ad7c15e05cc\","
        "\"member_id\":\"8e9e05c52164694d\",\n \"created\":1796147732,\"reason\":\"new\","
        "\"adopts_untagged\":false,\n \"abandons\":[{\"history\":\"3b59181e0eff1844\","
        "\"after_revision\":41}]}";
    HistoryRecord r;
    assert_int_equal(history_record_parse(doc, strlen(doc), &r), 0);
    assert_string_equal(r.id, "9539a7d3edef1399");
    assert_int_equal(r.cluster_id, UINT64_C(0xd1ca6ad7c15e05cc));
    assert_int_equal(r.member_id, UINT64_C(0x8e9e05c52164694d));
    assert_int_equal(r.created_s, 1796147732);
    assert_string_equal(r.reason, "new");
    assert_int_equal(r.adopts_untagged, 0);
    assert_int_equal(r.n_abandons, 1);
    assert_string_equal(r.abandons[0].history, "3b59181e0eff1844");
    assert_int_equal(r.abandons[0].after_revision, 41);
    /* member_id and abandons are optional */
    const char *min = "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\"}";
    assert_int_equal(history_record_parse(min, strlen(min), &r), 0);
    assert_string_equal(r.id, H1);
    assert_int_equal(r.cluster_id, 0xc1);
    assert_int_equal(r.member_id, 0);
    assert_int_equal(r.n_abandons, 0);
    assert_string_equal(r.reason, "");
}

/* A record of H1 abandoning H2 after revisions 0, 1, ... count - 1. */
static void abandons_json(char *out, size_t cap, int count) {
    size_t o =
        (size_t)snprintf(out, cap, "{\"history\":\"%s\",\"cluster_id\":\"1\",\"abandons\":[", H1);
    for (int i = 0; i < count; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s{\"history\":\"" H2 "\",\"after_revision\":%d}",
                              i ? "," : "", i);
    assert_true(o + 3 < cap);
    snprintf(out + o, cap - o, "]}");
}

static void test_record_parse_rejects_malformed_json_and_ids(void **state) {
    (void)state;
    char many[4096];
    abandons_json(many, sizeof many, HISTORY_MAX_ABANDONS + 1);
    const char *bad[] = {
        "",
        "not json",
        "[]",
        "\"" H1 "\"",
        "{}",
        "{\"history\":\"" H1 "\"",
        "{\"history\":\"" H1 "\"}",                                      /* no cluster_id */
        "{\"cluster_id\":\"c1\"}",                                       /* no history */
        "{\"history\":\"1111111111111111a\",\"cluster_id\":\"c1\"}",     /* 17 digits */
        "{\"history\":\"111111111111111\",\"cluster_id\":\"c1\"}",       /* 15 digits */
        "{\"history\":\"111111111111111A\",\"cluster_id\":\"c1\"}",      /* upper case */
        "{\"history\":1,\"cluster_id\":\"c1\"}",                         /* not a string */
        "{\"history\":\"" H1 "\",\"cluster_id\":\"xyz\"}",               /* not hex */
        "{\"history\":\"" H1 "\",\"cluster_id\":\"\"}",                  /* empty */
        "{\"history\":\"" H1 "\",\"cluster_id\":\"11111111111111111\"}", /* 17 digits */
        "{\"history\":\"" H1 "\",\"cluster_id\":193}",                   /* a number */
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"member_id\":\"q\"}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"abandons\":{}}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"abandons\":[1]}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"abandons\":[{\"history\":\"zz\","
        "\"after_revision\":1}]}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"abandons\":[{\"history\":\"" H2 "\","
        "\"after_revision\":\"1\"}]}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"abandons\":[{\"history\":\"" H2 "\"}]}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"abandons\":[{\"after_revision\":1}]}",
        many, /* more than HISTORY_MAX_ABANDONS */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        HistoryRecord r;
        int rc = history_record_parse(bad[i], strlen(bad[i]), &r);
        if (rc != ERR_CORRUPT)
            fail_msg("history_record_parse(%s) = %d, want ERR_CORRUPT", bad[i], rc);
        assert_non_null(strstr(err_msg(), "history record"));
    }
    /* the limit itself is fine */
    abandons_json(many, sizeof many, HISTORY_MAX_ABANDONS);
    HistoryRecord r;
    assert_int_equal(history_record_parse(many, strlen(many), &r), 0);
    assert_int_equal(r.n_abandons, HISTORY_MAX_ABANDONS);
    assert_string_equal(r.abandons[HISTORY_MAX_ABANDONS - 1].history, H2);
    assert_int_equal(r.abandons[HISTORY_MAX_ABANDONS - 1].after_revision, HISTORY_MAX_ABANDONS - 1);
}

/* BUG: parse_hex64 in history.c uses strtoull(s, &end, 16), which also takes leading blanks, a
 * sign and a "0x" prefix, so a cluster_id or member_id of "-1" reads as ffffffffffffffff, " c1"
 * and "0xc1" as c1. history_record_format always writes 16 hex digits; anything else in a record
 * is not ours and should be ERR_CORRUPT. (Found by this test; fixed.) */
static void test_record_parse_rejects_signed_or_prefixed_cluster_ids(void **state) {
    (void)state;
    const char *bad[] = {
        "{\"history\":\"" H1 "\",\"cluster_id\":\"-1\"}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"+c1\"}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\" c1\"}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"0xc1\"}",
        "{\"history\":\"" H1 "\",\"cluster_id\":\"c1\",\"member_id\":\"-2\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        HistoryRecord r;
        int rc = history_record_parse(bad[i], strlen(bad[i]), &r);
        if (rc != ERR_CORRUPT)
            fail_msg("history_record_parse(%s) = %d (cluster %llx), want ERR_CORRUPT", bad[i], rc,
                     (unsigned long long)r.cluster_id);
    }
}

/* ---------- restore marks ---------- */

static void test_mark_format_parse_round_trips(void **state) {
    (void)state;
    HistoryRestoreMark in[2] = {{1, H1, 120, 1700000500, HNEW}, {1, "", 0, 0, H2}};
    char buf[256];
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(history_mark_format(&in[i], buf, sizeof buf), 0);
        HistoryRestoreMark out;
        memset(&out, 0x5a, sizeof out);
        if (history_mark_parse(buf, strlen(buf), &out) != 0)
            fail_msg("parse of formatted mark %s: %s", buf, err_msg());
        assert_int_equal(out.present, 1);
        assert_string_equal(out.from_history, in[i].from_history);
        assert_string_equal(out.new_history, in[i].new_history);
        assert_int_equal(out.revision, in[i].revision);
        assert_int_equal(out.time_s, in[i].time_s);
    }
    assert_int_equal(history_mark_format(&in[0], buf, sizeof buf), 0);
    assert_string_equal(buf, "{\"from_history\":\"" H1 "\",\"new_history\":\"" HNEW
                             "\",\"revision\":120,\"time\":1700000500}");
    size_t need = strlen(buf) + 1;
    assert_int_equal(history_mark_format(&in[0], buf, need), 0);
    assert_int_equal(history_mark_format(&in[0], buf, need - 1), ERR_INVALID);
}

static void test_mark_parse_rejects_malformed_marks(void **state) {
    (void)state;
    const char *bad[] = {
        "",
        "junk",
        "[]",
        "{}",
        "{\"from_history\":\"" H1 "\",\"revision\":1,\"time\":2}", /* no new */
        "{\"new_history\":\"" H2 "\",\"revision\":1,\"time\":2}",  /* no from */
        "{\"from_history\":\"XYZ\",\"new_history\":\"" H2 "\",\"revision\":1,\"time\":2}",
        "{\"from_history\":\"\",\"new_history\":\"\",\"revision\":1,\"time\":2}",
        "{\"from_history\":\"\",\"new_history\":\"" H2 "\",\"revision\":\"1\",\"time\":2}",
        "{\"from_history\":\"\",\"new_history\":\"" H2 "\",\"revision\":1}",
        "{\"from_history\":\"\",\"new_history\":\"" H2 "\",\"revision\":1,\"time\":2.5}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        HistoryRestoreMark m;
        memset(&m, 0x5a, sizeof m);
        int rc = history_mark_parse(bad[i], strlen(bad[i]), &m);
        if (rc != ERR_CORRUPT)
            fail_msg("history_mark_parse(%s) = %d, want ERR_CORRUPT", bad[i], rc);
        assert_int_equal(m.present, 0);
    }
}

/* ---------- history_annotate ---------- */

#define F100 "Full-00000000-00000100-1700000000.gz"
#define F100_KEY "v2/" F100

static void test_annotate_tags_by_name_chunks_inherit_v1_stays_untagged(void **state) {
    (void)state;
    const Obj objs[] = {
        {F100_KEY, NULL},
        {F100_KEY "/0000000001", NULL},
        {"v2/Incr-00000101-00000200-1700000100.gz", NULL},
        {"v2/Incr-00000201-00000300-1700000200.gz", NULL},
        {"v1/Backup-1690000000/Full-00000000-00000050-1690000000", NULL},
    };
    Snapshot v[MAX_OBJS];
    size_t n = build(v, objs, 5);
    for (size_t i = 0; i < n; i++) { /* stale values are overwritten */
        snprintf(v[i].history, sizeof v[i].history, "%s", H3);
        v[i].abandoned = 1;
    }
    const HistoryTag tags[] = {
        tag(H2, "Incr-00000101-00000200-1700000100.gz"),
        tag(H1, "Full-00000000-00000050-1690000000"),    /* a v1 name: never taken */
        tag(H3, "Incr-00000301-00000400-1700000300.gz"), /* no such object */
        tag(H1, F100),
    };
    history_annotate(v, n, tags, 4, NULL, 0);
    assert_string_equal(find_key(v, n, F100_KEY)->history, H1);
    assert_string_equal(find_key(v, n, F100_KEY "/0000000001")->history, H1);
    assert_string_equal(find_key(v, n, "v2/Incr-00000101-00000200-1700000100.gz")->history, H2);
    assert_string_equal(find_key(v, n, "v2/Incr-00000201-00000300-1700000200.gz")->history, "");
    assert_string_equal(
        find_key(v, n, "v1/Backup-1690000000/Full-00000000-00000050-1690000000")->history, "");
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i].abandoned, 0);
    /* no tags at all: everything untagged */
    history_annotate(v, n, NULL, 0, NULL, 0);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v[i].history, "");
}

static void test_annotate_name_tagged_by_two_histories_keeps_the_smaller_id(void **state) {
    (void)state;
    const Obj objs[] = {{F100_KEY, NULL}, {F100_KEY "/0000000002", NULL}};
    for (int order = 0; order < 2; order++) {
        Snapshot v[MAX_OBJS];
        size_t n = build(v, objs, 2);
        HistoryTag tags[3] = {tag(H3, F100), tag(H2, F100), tag(H3, "x")};
        if (order) {
            HistoryTag t = tags[0];
            tags[0] = tags[1];
            tags[1] = t;
        }
        history_annotate(v, n, tags, 3, NULL, 0);
        assert_string_equal(find_key(v, n, F100_KEY)->history, H2);
        assert_string_equal(find_key(v, n, F100_KEY "/0000000002")->history, H2);
    }
}

static void test_annotate_record_is_effective_only_with_a_stored_object(void **state) {
    (void)state;
    const Obj objs[] = {
        {F100_KEY, NULL},
        {"v2/Incr-00000101-00000200-1700000100.gz", NULL},
        /* only a chunk of H2's full: an upload in progress, not a stored object */
        {"v2/Full-00000000-00000200-1700000200.gz/0000000001", NULL},
    };
    Snapshot v[MAX_OBJS];
    size_t n = build(v, objs, 3);
    const HistoryTag tags[] = {
        tag(H1, F100),
        tag(H1, "Incr-00000101-00000200-1700000100.gz"),
        tag(H2, "Full-00000000-00000200-1700000200.gz"),
    };
    HistoryRecord r[3] = {rec(H1, C1), rec(H2, C1), rec(H3, C1)};
    rec_abandon(&r[1], H1, 0); /* H2 would abandon all of H1 ... */
    rec_abandon(&r[2], "", 0); /* ... H3 every untagged object */
    r[2].effective = 1;        /* stale: recomputed */
    history_annotate(v, n, tags, 3, r, 3);
    assert_int_equal(r[0].effective, 1);
    assert_int_equal(r[1].effective, 0);
    assert_int_equal(r[2].effective, 0);
    for (size_t i = 0; i < n; i++)
        if (v[i].abandoned) fail_msg("%s abandoned by a record not in effect", v[i].key);
    assert_string_equal(
        find_key(v, n, "v2/Full-00000000-00000200-1700000200.gz/0000000001")->history, H2);

    /* once H2 stores its full, its record takes effect and abandons H1 */
    const Obj more[] = {
        {F100_KEY, NULL},
        {"v2/Incr-00000101-00000200-1700000100.gz", NULL},
        {"v2/Full-00000000-00000200-1700000200.gz/0000000001", NULL},
        {"v2/Full-00000000-00000200-1700000200.gz", NULL},
    };
    n = build(v, more, 4);
    history_annotate(v, n, tags, 3, r, 3);
    assert_int_equal(r[1].effective, 1);
    assert_int_equal(find_key(v, n, F100_KEY)->abandoned, 1);
    assert_int_equal(find_key(v, n, "v2/Incr-00000101-00000200-1700000100.gz")->abandoned, 1);
    assert_int_equal(find_key(v, n, "v2/Full-00000000-00000200-1700000200.gz")->abandoned, 0);
    assert_int_equal(
        find_key(v, n, "v2/Full-00000000-00000200-1700000200.gz/0000000001")->abandoned, 0);
}

/* H1: F100 I101-150 I151-200 (+ a chunk of it); untagged: F90 I91-160 and a v1 full at 120;
 * H2 (a fork at 150): F150 I151-170; H3: F300. */
static const Obj abandon_objs[] = {
    {"v2/Full-00000000-00000100-1700000000.gz", H1},
    {"v2/Incr-00000101-00000150-1700000100.gz", H1},
    {"v2/Incr-00000151-00000200-1700000200.gz", H1},
    {"v2/Incr-00000151-00000200-1700000200.gz/0000000001", H1},
    {"v2/Full-00000000-00000090-1600000000", ""},
    {"v2/Incr-00000091-00000160-1600000100", ""},
    {"v1/Backup-1600000200/Full-00000000-00000120-1600000200", ""},
    {"v2/Full-00000000-00000150-1700000500.gz", H2},
    {"v2/Incr-00000151-00000170-1700000600.gz", H2},
    {"v2/Full-00000000-00000300-1700000900.gz", H3},
};
#define N_ABANDON_OBJS (sizeof abandon_objs / sizeof abandon_objs[0])

/* Annotates abandon_objs (tags from their .history) with recs and returns the keys abandoned,
 * joined by ' ' in list order. */
static void abandoned_keys(HistoryRecord *recs, size_t n_recs, char *out, size_t cap) {
    Snapshot v[MAX_OBJS];
    size_t n = build(v, abandon_objs, N_ABANDON_OBJS);
    HistoryTag tags[MAX_OBJS];
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        if (!v[i].history[0] || v[i].is_chunk) continue;
        tags[nt++] = tag(v[i].history, v[i].snap_name);
    }
    history_annotate(v, n, tags, nt, recs, n_recs);
    out[0] = '\0';
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].abandoned) o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? " " : "", v[i].key);
}

static void test_annotate_abandons_exactly_the_objects_after_the_revision(void **state) {
    (void)state;
    char got[4096];
    HistoryRecord r[3] = {rec(H1, C1), rec(H2, C1), rec(H3, C2)};
    abandoned_keys(r, 3, got, sizeof got);
    assert_string_equal(got, "");

    rec_abandon(&r[1], H1, 150);
    abandoned_keys(r, 3, got, sizeof got);
    assert_string_equal(got, "v2/Incr-00000151-00000200-1700000200.gz "
                             "v2/Incr-00000151-00000200-1700000200.gz/0000000001");

    r[1].n_abandons = 0;
    rec_abandon(&r[1], "", 95); /* untagged after 95: v1 objects are untagged too */
    abandoned_keys(r, 3, got, sizeof got);
    assert_string_equal(got, "v1/Backup-1600000200/Full-00000000-00000120-1600000200 "
                             "v2/Incr-00000091-00000160-1600000100");

    /* a takeover by H3: everything else after revision 0 */
    r[1].n_abandons = 0;
    rec_abandon(&r[2], H1, 0);
    rec_abandon(&r[2], H2, 0);
    rec_abandon(&r[2], "", 0);
    abandoned_keys(r, 3, got, sizeof got);
    assert_string_equal(got, "v2/Full-00000000-00000090-1600000000 "
                             "v2/Full-00000000-00000100-1700000000.gz "
                             "v1/Backup-1600000200/Full-00000000-00000120-1600000200 "
                             "v2/Incr-00000101-00000150-1700000100.gz "
                             "v2/Full-00000000-00000150-1700000500.gz "
                             "v2/Incr-00000091-00000160-1600000100 "
                             "v2/Incr-00000151-00000170-1700000600.gz "
                             "v2/Incr-00000151-00000200-1700000200.gz "
                             "v2/Incr-00000151-00000200-1700000200.gz/0000000001");
}

static void test_annotate_record_never_abandons_its_own_objects(void **state) {
    (void)state;
    char got[4096];
    HistoryRecord r[1] = {rec(H1, C1)};
    rec_abandon(&r[0], H1, 0);
    abandoned_keys(r, 1, got, sizeof got);
    assert_string_equal(got, "");
    /* the same entry in another history's record does abandon them */
    HistoryRecord r2[2] = {rec(H1, C1), rec(H3, C1)};
    rec_abandon(&r2[1], H1, 0);
    abandoned_keys(r2, 2, got, sizeof got);
    assert_string_equal(got, "v2/Full-00000000-00000100-1700000000.gz "
                             "v2/Incr-00000101-00000150-1700000100.gz "
                             "v2/Incr-00000151-00000200-1700000200.gz "
                             "v2/Incr-00000151-00000200-1700000200.gz/0000000001");
}

/* ---------- history_decide: the decision table ---------- */

typedef struct DecideCase {
    const char *name;
    Obj objs[MAX_OBJS];
    struct {
        const char *id;
        uint64_t cluster;
    } recs[4];
    int64_t etcd_revision;
    int has_mark;
    HistoryRestoreMark mark;
    int takeover;
    /* expected */
    HistoryAction action;
    const char *history;
    int write_record;
    const char *reason;
    int adopts_untagged;
    const char *latest_history;
    int64_t latest_revision;
    const char *abandons; /* "<history>@<after_revision>" joined by ' ', "" untagged: "@R" */
    const char *why_has;
} DecideCase;

#define FULL(last, t) "v2/Full-00000000-" last "-" t ".gz"
#define INCR(start, last, t) "v2/Incr-" start "-" last "-" t ".gz"
/* the db was read: it carries this restore mark / none */
#define MARK(from, rev, t, new) .has_mark = 1, .mark = {1, from, rev, t, new}
#define MARK_NONE .has_mark = 1, .mark = {0}

static const DecideCase decide_cases[] = {
    {.name = "empty store: a new history",
     .etcd_revision = 50,
     .action = HISTORY_NEW,
     .history = "",
     .write_record = 1,
     .reason = "new",
     .latest_history = "",
     .abandons = "",
     .why_has = "no backups"},
    {.name = "only an upload in progress (a chunk): a new history",
     .objs = {{FULL("00000100", "1700000000") "/0000000001", H1}},
     .recs = {{H1, C2}},
     .etcd_revision = 50,
     .action = HISTORY_NEW,
     .history = "",
     .write_record = 1,
     .reason = "new",
     .latest_history = "",
     .abandons = ""},
    {.name = "same cluster, etcd after the latest set: continue",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 250,
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = "",
     .why_has = "continuing history " H1},
    {.name = "same cluster, etcd at the latest set's revision: continue",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 200,
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = ""},
    {.name = "only deltas of a history: continue it",
     .objs = {{INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 200,
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = ""},
    {.name = "untagged latest set, etcd not behind: adopt",
     .objs = {{FULL("00000100", "1700000000"), ""},
              {INCR("00000101", "00000200", "1700000100"), ""}},
     .etcd_revision = 200,
     .action = HISTORY_ADOPT,
     .history = "",
     .write_record = 1,
     .reason = "adopt",
     .adopts_untagged = 1,
     .latest_history = "",
     .latest_revision = 200,
     .abandons = ""},
    {.name = "untagged latest set ahead of etcd, db not read: need the db",
     .objs = {{FULL("00000100", "1700000000"), ""},
              {INCR("00000101", "00000200", "1700000100"), ""}},
     .etcd_revision = 150,
     .action = HISTORY_NEED_DB,
     .history = "",
     .latest_history = "",
     .latest_revision = 200,
     .abandons = ""},
    {.name = "untagged latest set ahead of etcd, no mark: refuse",
     .objs = {{FULL("00000100", "1700000000"), ""},
              {INCR("00000101", "00000200", "1700000100"), ""}},
     .etcd_revision = 150,
     MARK_NONE,
     .action = HISTORY_REFUSE,
     .history = "",
     .latest_history = "",
     .latest_revision = 200,
     .abandons = "",
     .why_has = "--abandon-other-histories"},
    {.name = "another cluster's latest set, db not read: need the db",
     .objs = {{FULL("00000100", "1700000000"), H1}},
     .recs = {{H1, C2}},
     .etcd_revision = 250,
     .action = HISTORY_NEED_DB,
     .history = "",
     .latest_history = H1,
     .latest_revision = 100,
     .abandons = "",
     .why_has = "00000000000000c2"},
    {.name = "another cluster's latest set, no mark: refuse",
     .objs = {{FULL("00000100", "1700000000"), H1}},
     .recs = {{H1, C2}},
     .etcd_revision = 250,
     MARK_NONE,
     .action = HISTORY_REFUSE,
     .history = "",
     .latest_history = H1,
     .latest_revision = 100,
     .abandons = "",
     .why_has = "another etcd cluster"},
    {.name = "another cluster's latest set, a mark from another history: refuse",
     .objs = {{FULL("00000100", "1700000000"), H1}},
     .recs = {{H1, C2}},
     .etcd_revision = 250,
     MARK(H3, 50, 1700000500, HNEW),
     .action = HISTORY_REFUSE,
     .history = "",
     .latest_history = H1,
     .latest_revision = 100,
     .abandons = ""},
    {.name = "another cluster's latest set, a mark from untagged backups: refuse",
     .objs = {{FULL("00000100", "1700000000"), H1}},
     .recs = {{H1, C2}},
     .etcd_revision = 250,
     MARK("", 50, 1700000500, HNEW),
     .action = HISTORY_REFUSE,
     .history = "",
     .latest_history = H1,
     .latest_revision = 100,
     .abandons = ""},
    {.name = "store ahead of etcd, db not read: need the db",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 150,
     .action = HISTORY_NEED_DB,
     .history = "",
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = "",
     .why_has = "after etcd's current revision 150"},
    {.name = "store ahead of etcd, no mark: refuse",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 150,
     MARK_NONE,
     .action = HISTORY_REFUSE,
     .history = "",
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = ""},
    {.name = "restored from the latest history to an older revision: fork",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 130,
     MARK(H1, 120, 1700000500, HNEW),
     .action = HISTORY_FORK,
     .history = HNEW,
     .write_record = 1,
     .reason = "fork",
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = H1 "@120",
     .why_has = "restored from history " H1},
    {.name = "restored, etcd since moved past the old line's end: still a fork",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 250,
     MARK(H1, 120, 1700000500, HNEW),
     .action = HISTORY_FORK,
     .history = HNEW,
     .write_record = 1,
     .reason = "fork",
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = H1 "@120"},
    {.name = "restored from the latest set itself, nothing after it: continue",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000120", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 120,
     MARK(H1, 120, 1700000500, HNEW),
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 120,
     .abandons = ""},
    {.name = "restored, and backups after the restore continued the history: continue",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000120", "1700000100"), H1},
              {INCR("00000121", "00000140", "1700000600"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 150,
     MARK(H1, 120, 1700000500, HNEW),
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 140,
     .abandons = ""},
    {.name = "restored from the latest history into another cluster: fork",
     .objs = {{FULL("00000100", "1700000000"), H1}},
     .recs = {{H1, C2}},
     .etcd_revision = 100,
     MARK(H1, 100, 1700000500, HNEW),
     .action = HISTORY_FORK,
     .history = HNEW,
     .write_record = 1,
     .reason = "fork",
     .latest_history = H1,
     .latest_revision = 100,
     .abandons = H1 "@100"},
    {.name = "restored from untagged backups to an older revision: fork that adopts them",
     .objs = {{FULL("00000100", "1700000000"), ""},
              {INCR("00000101", "00000200", "1700000100"), ""}},
     .etcd_revision = 130,
     MARK("", 120, 1700000500, HNEW),
     .action = HISTORY_FORK,
     .history = HNEW,
     .write_record = 1,
     .reason = "fork",
     .adopts_untagged = 1,
     .latest_history = "",
     .latest_revision = 200,
     .abandons = "@120"},
    {.name = "conflict with --abandon-other-histories: takeover of every live history",
     .objs = {{"v1/Backup-1600000000/Full-00000000-00000040-1600000000", ""},
              {FULL("00000080", "1650000000"), H3},
              {FULL("00000100", "1700000000"), H1},
              {FULL("00000100", "1700000000") "/0000000001", H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}, {H3, C2}},
     .etcd_revision = 150,
     .takeover = 1,
     .action = HISTORY_TAKEOVER,
     .history = "",
     .write_record = 1,
     .reason = "takeover",
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = "@0 " H3 "@0 " H1 "@0",
     .why_has = "--abandon-other-histories"},
    {.name = "another cluster with --abandon-other-histories, mark not matching: takeover",
     .objs = {{FULL("00000100", "1700000000"), H1}},
     .recs = {{H1, C2}},
     .etcd_revision = 250,
     MARK(H3, 50, 1700000500, HNEW),
     .takeover = 1,
     .action = HISTORY_TAKEOVER,
     .history = "",
     .write_record = 1,
     .reason = "takeover",
     .latest_history = H1,
     .latest_revision = 100,
     .abandons = H1 "@0"},
    {.name = "--abandon-other-histories without a conflict: continue",
     .objs = {{FULL("00000080", "1650000000"), H3},
              {FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}, {H3, C2}},
     .etcd_revision = 200,
     .takeover = 1,
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = ""},
    {.name = "--abandon-other-histories on untagged backups without a conflict: adopt",
     .objs = {{FULL("00000100", "1700000000"), ""}},
     .etcd_revision = 100,
     .takeover = 1,
     .action = HISTORY_ADOPT,
     .history = "",
     .write_record = 1,
     .reason = "adopt",
     .adopts_untagged = 1,
     .latest_history = "",
     .latest_revision = 100,
     .abandons = ""},
    {.name = "--abandon-other-histories on an empty store: new",
     .etcd_revision = 100,
     .takeover = 1,
     .action = HISTORY_NEW,
     .history = "",
     .write_record = 1,
     .reason = "new",
     .latest_history = "",
     .abandons = ""},
    {.name = "deltas of another history after a newer full are not the latest set",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {FULL("00000200", "1700000100"), H2},
              {INCR("00000201", "00000300", "1700000200"), H1}},
     .recs = {{H1, C1}, {H2, C1}},
     .etcd_revision = 250,
     .action = HISTORY_CONTINUE,
     .history = H2,
     .latest_history = H2,
     .latest_revision = 200,
     .abandons = ""},
    {.name = "another cluster's deltas after our newer full: continue ours",
     .objs = {{FULL("00000100", "1700000000"), H3},
              {FULL("00000200", "1700000100"), H1},
              {INCR("00000201", "00000300", "1700000200"), H3}},
     .recs = {{H1, C1}, {H3, C2}},
     .etcd_revision = 250,
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = ""},
    {.name = "untagged deltas after a tagged full belong to its latest set",
     .objs = {{FULL("00000100", "1700000000"), H1},
              {INCR("00000101", "00000200", "1700000100"), ""}},
     .recs = {{H1, C1}},
     .etcd_revision = 150,
     .action = HISTORY_NEED_DB,
     .history = "",
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = ""},
    {.name = "a tagged delta after an untagged full: the delta's history continues",
     .objs = {{FULL("00000100", "1700000000"), ""},
              {INCR("00000101", "00000200", "1700000100"), H1}},
     .recs = {{H1, C1}},
     .etcd_revision = 200,
     .action = HISTORY_CONTINUE,
     .history = H1,
     .latest_history = H1,
     .latest_revision = 200,
     .abandons = ""},
};

static void format_abandons(const HistoryRecord *r, char *out, size_t cap) {
    out[0] = '\0';
    size_t o = 0;
    for (size_t i = 0; i < r->n_abandons; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s@%lld", i ? " " : "", r->abandons[i].history,
                              (long long)r->abandons[i].after_revision);
}

static void check_decision(const DecideCase *c) {
    Snapshot v[MAX_OBJS];
    size_t n = build(v, c->objs, MAX_OBJS);
    HistoryRecord recs[4];
    size_t n_recs = 0;
    for (size_t i = 0; i < 4 && c->recs[i].id; i++)
        recs[n_recs++] = rec(c->recs[i].id, c->recs[i].cluster);
    HistoryDecision d;
    memset(&d, 0x5a, sizeof d);
    history_decide(v, n, recs, n_recs, C1, M1, c->etcd_revision, c->has_mark ? &c->mark : NULL,
                   c->takeover, NOW, &d);
    char ab[512];
    format_abandons(&d.record, ab, sizeof ab);
    if (d.action != c->action)
        fail_msg("%s: action %s, want %s (%s)", c->name, history_action_name(d.action),
                 history_action_name(c->action), d.why);
    if (strcmp(d.history, c->history) != 0)
        fail_msg("%s: history \"%s\", want \"%s\"", c->name, d.history, c->history);
    if (d.write_record != c->write_record)
        fail_msg("%s: write_record %d, want %d", c->name, d.write_record, c->write_record);
    if (strcmp(d.latest_history, c->latest_history) != 0 || d.latest_revision != c->latest_revision)
        fail_msg("%s: latest set %s@%lld, want %s@%lld", c->name, d.latest_history,
                 (long long)d.latest_revision, c->latest_history, (long long)c->latest_revision);
    if (!d.why[0]) fail_msg("%s: no reason given", c->name);
    if (c->why_has && !strstr(d.why, c->why_has))
        fail_msg("%s: why \"%s\" does not say \"%s\"", c->name, d.why, c->why_has);
    if (!c->write_record) return;
    const HistoryRecord *r = &d.record;
    if (strcmp(r->id, d.history) != 0)
        fail_msg("%s: record id \"%s\" != history \"%s\"", c->name, r->id, d.history);
    if (strcmp(r->reason, c->reason) != 0)
        fail_msg("%s: reason \"%s\", want \"%s\"", c->name, r->reason, c->reason);
    if (r->cluster_id != C1 || r->member_id != M1 || r->created_s != NOW)
        fail_msg("%s: record of cluster %llx member %llx at %lld", c->name,
                 (unsigned long long)r->cluster_id, (unsigned long long)r->member_id,
                 (long long)r->created_s);
    if (r->adopts_untagged != c->adopts_untagged)
        fail_msg("%s: adopts_untagged %d, want %d", c->name, r->adopts_untagged,
                 c->adopts_untagged);
    if (strcmp(ab, c->abandons) != 0)
        fail_msg("%s: abandons \"%s\", want \"%s\"", c->name, ab, c->abandons);
}

static void test_decide_walks_the_decision_table(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof decide_cases / sizeof decide_cases[0]; i++)
        check_decision(&decide_cases[i]);
}

/* The store's decision takes only what store_list returns: objects another history abandoned are
 * not in the list, so a fork that has stored objects is continued, not refused. */
static void test_decide_after_a_fork_continues_the_fork(void **state) {
    (void)state;
    const Obj objs[] = {
        {FULL("00000100", "1700000000"), NULL},
        {INCR("00000101", "00000200", "1700000100"), NULL},
        {FULL("00000120", "1700000600"), NULL},
    };
    Snapshot v[MAX_OBJS];
    size_t n = build(v, objs, 3);
    const HistoryTag tags[] = {
        tag(H1, "Full-00000000-00000100-1700000000.gz"),
        tag(H1, "Incr-00000101-00000200-1700000100.gz"),
        tag(HNEW, "Full-00000000-00000120-1700000600.gz"),
    };
    HistoryRecord r[2] = {rec(H1, C1), rec(HNEW, C1)};
    rec_abandon(&r[1], H1, 120);
    history_annotate(v, n, tags, 3, r, 2);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i].abandoned) v[k++] = v[i];
    assert_int_equal(k, 2);
    HistoryRestoreMark mark = {1, H1, 120, 1700000500, HNEW};
    HistoryDecision d;
    history_decide(v, k, r, 2, C1, M1, 130, &mark, 0, NOW, &d);
    assert_int_equal(d.action, HISTORY_CONTINUE);
    assert_string_equal(d.history, HNEW);
    assert_int_equal(d.write_record, 0);
    assert_int_equal(d.latest_revision, 120);
}

/* BUG: an adopted store cannot fork. The Go tool left Full 100 and Incr 101-150 (untagged);
 * etcdbr adopted them as H1 and resumed deltas (H1 Incr 151-200), so the latest set is the
 * untagged full with untagged and H1 deltas, and history_decide names it H1 (the newest delta's).
 * A deliberate etcdbr restore to revision 120 applies the untagged Incr 101-150 last, so its mark
 * says from_history "" (restorer.c takes the last applied object's history). history_decide only
 * forks when mark->from_history equals the latest set's history, so with etcd at 130 it REFUSEs
 * (NEED_DB without the mark), where docs/store-history.md promises a fork after any deliberate
 * restore. Expected: FORK to the mark's new_history whose record abandons the untagged objects
 * after 120 and H1's objects after 120. (Found by this test; fixed: the fork takes a mark
 * from any history the latest set is made of.) */
static void test_decide_forks_after_a_restore_inside_adopted_untagged_deltas(void **state) {
    (void)state;
    const Obj objs[] = {
        {FULL("00000100", "1700000000"), ""},
        {INCR("00000101", "00000150", "1700000100"), ""},
        {INCR("00000151", "00000200", "1700000200"), H1},
    };
    Snapshot v[MAX_OBJS];
    size_t n = build(v, objs, 3);
    HistoryRecord r[2] = {rec(H1, C1)};
    r[0].adopts_untagged = 1;
    snprintf(r[0].reason, sizeof r[0].reason, "adopt");
    HistoryRestoreMark mark = {1, "", 120, 1700000500, HNEW};
    HistoryDecision d;
    history_decide(v, n, r, 1, C1, M1, 130, &mark, 0, NOW, &d);
    if (d.action != HISTORY_FORK)
        fail_msg("action %s, want fork (%s)", history_action_name(d.action), d.why);
    assert_string_equal(d.history, HNEW);
    assert_int_equal(d.write_record, 1);
    /* once the fork has stored a full, exactly the old line after 120 is abandoned */
    r[1] = d.record;
    Obj with_fork[4] = {objs[0], objs[1], objs[2], {FULL("00000130", "1700000600"), HNEW}};
    n = build(v, with_fork, 4);
    HistoryTag tags[2] = {tag(H1, "Incr-00000151-00000200-1700000200.gz"),
                          tag(HNEW, "Full-00000000-00000130-1700000600.gz")};
    history_annotate(v, n, tags, 2, r, 2);
    assert_int_equal(find_key(v, n, FULL("00000100", "1700000000"))->abandoned, 0);
    assert_int_equal(find_key(v, n, INCR("00000101", "00000150", "1700000100"))->abandoned, 1);
    assert_int_equal(find_key(v, n, INCR("00000151", "00000200", "1700000200"))->abandoned, 1);
    assert_int_equal(find_key(v, n, FULL("00000130", "1700000600"))->abandoned, 0);
}

int main(void) {
    log_setup(LOG_ERROR, 0); /* history_annotate warns about names tagged twice */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_valid_takes_16_lower_case_hex_digits_only),
        cmocka_unit_test(test_new_id_is_valid_and_random),
        cmocka_unit_test(test_find_and_action_names),
        cmocka_unit_test(test_record_format_parse_round_trips),
        cmocka_unit_test(test_record_parse_reads_the_documented_example),
        cmocka_unit_test(test_record_parse_rejects_malformed_json_and_ids),
        cmocka_unit_test(test_record_parse_rejects_signed_or_prefixed_cluster_ids),
        cmocka_unit_test(test_mark_format_parse_round_trips),
        cmocka_unit_test(test_mark_parse_rejects_malformed_marks),
        cmocka_unit_test(test_annotate_tags_by_name_chunks_inherit_v1_stays_untagged),
        cmocka_unit_test(test_annotate_name_tagged_by_two_histories_keeps_the_smaller_id),
        cmocka_unit_test(test_annotate_record_is_effective_only_with_a_stored_object),
        cmocka_unit_test(test_annotate_abandons_exactly_the_objects_after_the_revision),
        cmocka_unit_test(test_annotate_record_never_abandons_its_own_objects),
        cmocka_unit_test(test_decide_walks_the_decision_table),
        cmocka_unit_test(test_decide_after_a_fork_continues_the_fork),
        cmocka_unit_test(test_decide_forks_after_a_restore_inside_adopted_untagged_deltas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
