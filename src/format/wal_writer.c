/* wal_writer: see wal_writer.h. Everything is built in memory (a restore's WAL holds one record
 * per member plus four) and written with one write per file. */
#include "wal_writer.h"
#include "../common/byteorder.h"
#include "../common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------- protobuf wire format (writing) ---------------- */

enum { PB_VARINT = 0, PB_BYTES = 2 };

static void pb_varint(StrBuf *out, uint64_t v) {
    char b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (char)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (char)v;
    strbuf_add(out, b, n);
}

static void pb_key(StrBuf *out, unsigned field, unsigned wire) {
    pb_varint(out, (uint64_t)field << 3 | wire);
}

/* a varint field, written also when zero (gogoproto's non-nullable fields) */
static void pb_u64(StrBuf *out, unsigned field, uint64_t v) {
    pb_key(out, field, PB_VARINT);
    pb_varint(out, v);
}

static void pb_bytes(StrBuf *out, unsigned field, const void *p, size_t n) {
    pb_key(out, field, PB_BYTES);
    pb_varint(out, n);
    if (n) strbuf_add(out, p, n);
}

/* a nested message: its bytes are built in a buffer of their own first */
static void pb_msg(StrBuf *out, unsigned field, const StrBuf *m) {
    if (m->oom) {
        out->oom = 1;
        return;
    }
    pb_bytes(out, field, m->d, m->n);
}

void wal_pb_metadata(StrBuf *out, uint64_t node_id, uint64_t cluster_id) {
    pb_u64(out, 1, node_id);
    pb_u64(out, 2, cluster_id);
}

void wal_pb_entry(StrBuf *out, int32_t type, uint64_t term, uint64_t index, const uint8_t *data,
                  size_t data_len) {
    pb_u64(out, 1, (uint64_t)(int64_t)type); /* an enum is an int32 varint, sign-extended */
    pb_u64(out, 2, term);
    pb_u64(out, 3, index);
    if (data) pb_bytes(out, 4, data, data_len);
}

void wal_pb_hardstate(StrBuf *out, const WalHardState *hs) {
    pb_u64(out, 1, hs->term);
    pb_u64(out, 2, hs->vote);
    pb_u64(out, 3, hs->commit);
}

void wal_pb_conf_change_add(StrBuf *out, uint64_t node_id, const uint8_t *ctx, size_t ctx_len) {
    pb_u64(out, 1, 0); /* ID */
    pb_u64(out, 2, 0); /* Type: ConfChangeAddNode */
    pb_u64(out, 3, node_id);
    if (ctx) pb_bytes(out, 4, ctx, ctx_len);
}

/* raftpb.ConfState{Voters (repeated, unpacked), AutoLeave false} */
static void pb_conf_state(StrBuf *out, const uint64_t *voters, size_t n) {
    for (size_t i = 0; i < n; i++)
        pb_u64(out, 1, voters[i]);
    pb_u64(out, 5, 0);
}

void wal_pb_wal_snapshot(StrBuf *out, uint64_t index, uint64_t term, const uint64_t *voters,
                         size_t n_voters) {
    pb_u64(out, 1, index);
    pb_u64(out, 2, term);
    if (!voters) return;
    StrBuf cs = {0};
    pb_conf_state(&cs, voters, n_voters);
    pb_msg(out, 3, &cs);
    free(cs.d);
}

void wal_pb_raft_snapshot(StrBuf *out, const uint8_t *data, size_t data_len, uint64_t index,
                          uint64_t term, const uint64_t *voters, size_t n_voters) {
    StrBuf cs = {0}, md = {0};
    pb_conf_state(&cs, voters, n_voters);
    pb_msg(&md, 1, &cs);
    pb_u64(&md, 2, index);
    pb_u64(&md, 3, term);
    if (data) pb_bytes(out, 1, data, data_len);
    pb_msg(out, 2, &md);
    free(cs.d);
    free(md.d);
}

/* ---------------- records ---------------- */

int wal_encoder_record(WalEncoder *e, int64_t type, const uint8_t *data, size_t len) {
    if (len > WAL_MAX_RECORD)
        return err_set(ERR_INVALID, "WAL record of %zu bytes: over the %llu-byte limit", len,
                       (unsigned long long)WAL_MAX_RECORD);
    if (type != WAL_REC_CRC) e->crc = wal_crc32c(e->crc, data, len);
    StrBuf rec = {0};
    pb_u64(&rec, 1, (uint64_t)type);
    pb_u64(&rec, 2, e->crc);
    if (data) pb_bytes(&rec, 3, data, len);
    if (rec.oom) {
        free(rec.d);
        return err_set(ERR_NOMEM, "out of memory for a WAL record");
    }
    /* encoder.go encodeFrameSize: the record padded to 8 bytes, the padding in the top byte */
    size_t pad = (8 - rec.n % 8) % 8;
    uint64_t word = (uint64_t)rec.n;
    if (pad) word |= (uint64_t)(0x80 | pad) << 56;
    uint8_t w[8];
    char zeros[8] = {0};
    put_le64(w, word);
    strbuf_add(&e->buf, (const char *)w, 8);
    strbuf_add(&e->buf, rec.d, rec.n);
    strbuf_add(&e->buf, zeros, pad);
    free(rec.d);
    return e->buf.oom ? err_set(ERR_NOMEM, "out of memory for the WAL") : 0;
}

void wal_encoder_free(WalEncoder *e) {
    if (!e) return;
    free(e->buf.d);
    memset(e, 0, sizeof *e);
}

char *wal_segment_name(uint64_t seq, uint64_t index, char out[40]) {
    snprintf(out, 40, "%016llx-%016llx.wal", (unsigned long long)seq, (unsigned long long)index);
    return out;
}

char *wal_snap_name(uint64_t term, uint64_t index, char out[40]) {
    snprintf(out, 40, "%016llx-%016llx.snap", (unsigned long long)term, (unsigned long long)index);
    return out;
}

/* ---------------- files ---------------- */

static int write_all(int fd, const char *path, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return err_set(ERR_IO, "write %s: %s", path, w < 0 ? strerror(errno) : "0");
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int create_excl(const char *path, unsigned mode, int *fd) {
    *fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (*fd >= 0) return 0;
    return err_set(errno == EEXIST ? ERR_EXISTS : ERR_IO, "create %s: %s", path, strerror(errno));
}

static int sync_close(int fd, const char *path, int rc) {
    if (!rc && fsync(fd) != 0) rc = err_set(ERR_IO, "fsync %s: %s", path, strerror(errno));
    if (close(fd) != 0 && !rc) rc = err_set(ERR_IO, "close %s: %s", path, strerror(errno));
    return rc;
}

int wal_write_segment(const char *path, const WalEncoder *e) {
    if (e->buf.oom) return err_set(ERR_NOMEM, "out of memory for the WAL");
    if ((uint64_t)e->buf.n > WAL_SEGMENT_BYTES)
        return err_set(ERR_INVALID, "%s: %zu bytes of records do not fit one %llu-byte segment",
                       path, e->buf.n, (unsigned long long)WAL_SEGMENT_BYTES);
    int fd, rc = create_excl(path, 0600, &fd);
    if (rc) return rc;
    /* fileutil.Preallocate(f, SegmentSizeBytes, true): fallocate, ftruncate where the file
     * system has no fallocate */
    if (fallocate(fd, 0, 0, (off_t)WAL_SEGMENT_BYTES) != 0) {
        if (errno != EOPNOTSUPP && errno != ENOSYS)
            rc = err_set(ERR_IO, "preallocate %s: %s", path, strerror(errno));
        else if (ftruncate(fd, (off_t)WAL_SEGMENT_BYTES) != 0)
            rc = err_set(ERR_IO, "extend %s: %s", path, strerror(errno));
    }
    if (!rc && e->buf.n) rc = write_all(fd, path, e->buf.d, e->buf.n);
    return sync_close(fd, path, rc);
}

int wal_snap_write(const char *path, const uint8_t *raft_snapshot, size_t len) {
    if (!len || len > WAL_MAX_RECORD)
        return err_set(ERR_INVALID, "snapshot of %zu bytes for %s: must be 1 to %llu bytes", len,
                       path, (unsigned long long)WAL_MAX_RECORD);
    StrBuf s = {0};
    pb_u64(&s, 1, wal_crc32c(0, raft_snapshot, len));
    pb_bytes(&s, 2, raft_snapshot, len);
    if (s.oom) {
        free(s.d);
        return err_set(ERR_NOMEM, "out of memory for %s", path);
    }
    int fd, rc = create_excl(path, 0666, &fd);
    if (!rc) rc = sync_close(fd, path, write_all(fd, path, s.d, s.n));
    free(s.d);
    return rc;
}
