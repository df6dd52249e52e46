/* restore_fixture: see restore_fixture.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "restore_fixture.h"
#include "testutil.h"

#include "backup/delta.h"
#include "codec/compress.h"
#include "codec/io.h"
#include "codec/sha256.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "format/bbolt_writer.h"
#include "format/mvcc.h"
#include "store/history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void rf_open(RfStore *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/test_restore.XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    char container[300];
    snprintf(container, sizeof container, "%s/store", s->dir);
    snprintf(s->scratch, sizeof s->scratch, "%s/scratch", s->dir);
    assert_int_equal(fs_mkdir_p(container, 0700), 0);
    assert_int_equal(fs_mkdir_p(s->scratch, 0700), 0);
    StoreConfig cfg = {
        .provider = "Local", .container = container, .prefix = "p", .temp_dir = s->scratch};
    if (store_open(&cfg, &s->store)) fail_msg("store_open: %s", err_msg());
}

void rf_close(RfStore *s) {
    store_free(s->store);
    s->store = NULL;
    assert_int_equal(sh(NULL, 0, "rm -rf '%s'", s->dir), 0);
}

static void put_kv(BboltWriter *w, int64_t rev) {
    char key[32], val[32];
    snprintf(key, sizeof key, "k%lld", (long long)rev);
    snprintf(val, sizeof val, "v%lld", (long long)rev);
    uint8_t rk[MVCC_MARK_BYTES], buf[256];
    size_t rl = mvcc_rev_key(rev, 0, 0, rk);
    MvccKeyValue kv = {.key = (const uint8_t *)key,
                       .key_len = strlen(key),
                       .value = (const uint8_t *)val,
                       .value_len = strlen(val),
                       .create_revision = rev,
                       .mod_revision = rev,
                       .version = 1};
    size_t n = mvcc_kv_marshal(&kv, buf);
    assert_int_equal(bbolt_writer_put(w, rk, rl, buf, n), 0);
}

void rf_write_db(const char *path, int64_t rev, const char *members_key) {
    BboltWriter *w = NULL;
    if (bbolt_writer_open(path, 0, &w)) fail_msg("bbolt_writer_open %s: %s", path, err_msg());
    assert_int_equal(bbolt_writer_begin_bucket(w, "key", 3), 0);
    for (int64_t r = 2; r <= rev; r++)
        put_kv(w, r);
    assert_int_equal(bbolt_writer_end_bucket(w), 0);
    if (members_key) {
        const char *v = "{\"id\":1}";
        assert_int_equal(bbolt_writer_begin_bucket(w, "members", 7), 0);
        assert_int_equal(bbolt_writer_put(w, (const uint8_t *)members_key, strlen(members_key),
                                          (const uint8_t *)v, strlen(v)),
                         0);
        assert_int_equal(bbolt_writer_end_bucket(w), 0);
    }
    assert_int_equal(bbolt_writer_finish(w), 0);
    bbolt_writer_free(w);
}

static void tag(RfStore *s, const char *history, const char *name) {
    if (!history) return;
    HistoryRecord r = {.created_s = 1000};
    snprintf(r.id, sizeof r.id, "%s", history);
    snprintf(r.reason, sizeof r.reason, "new");
    if (store_history_put_record(s->store, &r)) fail_msg("history record: %s", err_msg());
    if (store_history_tag(s->store, history, name)) fail_msg("tag %s: %s", name, err_msg());
}

/* Writes len bytes of buf as object name, compressed as suffix says. */
static void put_object(RfStore *s, const char *name, const char *suffix, const void *buf,
                       size_t len) {
    StoreWriter *w = NULL;
    if (store_open_write(s->store, name, &w)) fail_msg("open_write %s: %s", name, err_msg());
    CompressKind kind = COMPRESS_NONE;
    assert_int_equal(compress_from_suffix(suffix, &kind), 0);
    IoWriter *io = store_writer_io(w);
    IoWriter *cw = kind == COMPRESS_NONE ? NULL : compress_writer_new(kind, io);
    IoWriter *top = cw ? cw : io;
    assert_int_equal(io_write(top, buf, len), 0);
    assert_int_equal(io_finish(top), 0);
    io_writer_free(cw);
    if (store_writer_commit(w)) fail_msg("commit %s: %s", name, err_msg());
}

void rf_put_full(RfStore *s, int64_t name_rev, int64_t db_rev, int64_t created, const char *suffix,
                 const char *history, char *name, size_t cap) {
    char nm[256], path[400];
    assert_int_equal(snapname_format(SNAP_FULL, 0, name_rev, created, suffix, 0, nm, sizeof nm), 0);
    snprintf(path, sizeof path, "%s/full.db", s->dir);
    rf_write_db(path, db_rev, NULL);
    size_t len = 0;
    uint8_t *db = read_file(path, &len);
    unlink(path);
    db = realloc(db, len + SHA256_LEN);
    assert_non_null(db);
    Sha256 *h = sha256_new();
    sha256_update(h, db, len);
    sha256_final(h, db + len);
    sha256_free(h);
    tag(s, history, nm);
    put_object(s, nm, suffix, db, len + SHA256_LEN);
    free(db);
    if (name) snprintf(name, cap, "%s", nm);
}

void rf_put_delta(RfStore *s, int64_t start, int64_t last, int64_t created, const char *history,
                  char *name, size_t cap) {
    char nm[256];
    assert_int_equal(snapname_format(SNAP_INCR, start, last, created, "", 0, nm, sizeof nm), 0);
    DeltaWriter *dw = NULL;
    assert_int_equal(delta_writer_new(s->scratch, &dw), 0);
    for (int64_t r = start; r <= last; r++) {
        char key[32], val[32];
        snprintf(key, sizeof key, "k%lld", (long long)r);
        snprintf(val, sizeof val, "v%lld", (long long)r);
        EtcdEvent ev = {.type = ETCD_OP_PUT,
                        .kv = {.key = (const uint8_t *)key,
                               .key_len = strlen(key),
                               .value = (const uint8_t *)val,
                               .value_len = strlen(val),
                               .create_revision = r,
                               .mod_revision = r,
                               .version = 1}};
        int64_t at = (created - (last - r)) * 1000000000LL;
        assert_int_equal(delta_writer_append(dw, &ev, at), 0);
    }
    IoReader *payload = NULL;
    assert_int_equal(delta_writer_payload(dw, &payload), 0);
    tag(s, history, nm);
    StoreWriter *w = NULL;
    if (store_open_write(s->store, nm, &w)) fail_msg("open_write %s: %s", nm, err_msg());
    assert_int_equal(io_copy(payload, store_writer_io(w), NULL), 0);
    assert_int_equal(io_finish(store_writer_io(w)), 0);
    if (store_writer_commit(w)) fail_msg("commit %s: %s", nm, err_msg());
    io_reader_free(payload);
    delta_writer_free(dw);
    if (name) snprintf(name, cap, "%s", nm);
}

void rf_object_path(const RfStore *s, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/store/p/v2/%s", s->dir, name);
}
