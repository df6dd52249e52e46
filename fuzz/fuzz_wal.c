/* fuzz_wal: libFuzzer target for the WAL and snap readers (src/format/wal.c). The first input
 * byte picks what the rest is: 0 one WAL segment, 1 a snap file, 2 a snap file and a segment,
 * 3 two segments (mode 2/3: a 2-byte little-endian length splits the parts). Files go to a
 * private temp data dir; wal_read_dir and the segment reader must return 0 or a project error
 * with their promises kept, never crash, hang or allocate without bound. Each input also runs
 * with its record and snap CRCs recomputed, so mutations reach the protobuf decoders. Every
 * entry payload, and the input itself, also goes through wal_classify_request (the
 * etcdserverpb decoder), whose kinds must be consistent: a request that decodes as one that
 * writes nothing must count once a put is appended to it. */
#include "common/err.h"
#include "format/wal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[256], member[300], wal0[400], wal1[400], snap0[400];

static void clear(void);

/* Removes the temp data dir at exit (libFuzzer and the replay runner both exit normally). */
static void teardown(void) {
    char d[400];
    clear();
    snprintf(d, sizeof d, "%s/wal", member);
    rmdir(d);
    snprintf(d, sizeof d, "%s/snap", member);
    rmdir(d);
    rmdir(member);
    rmdir(root);
}

static void setup(void) {
    if (root[0]) return;
    const char *t = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/fuzz_wal.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(root)) abort();
    snprintf(member, sizeof member, "%s/member", root);
    char d[400];
    if (mkdir(member, 0700) != 0) abort();
    snprintf(d, sizeof d, "%s/wal", member);
    if (mkdir(d, 0700) != 0) abort();
    snprintf(d, sizeof d, "%s/snap", member);
    if (mkdir(d, 0700) != 0) abort();
    snprintf(wal0, sizeof wal0, "%s/wal/0000000000000000-0000000000000000.wal", member);
    snprintf(wal1, sizeof wal1, "%s/wal/0000000000000001-0000000000000010.wal", member);
    snprintf(snap0, sizeof snap0, "%s/snap/0000000000000002-0000000000000010.snap", member);
    atexit(teardown);
}

static void put(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f) != 0) abort();
}

static void clear(void) {
    unlink(wal0);
    unlink(wal1);
    unlink(snap0);
}

/* ---- CRC fixing: re-encode each record with the CRC etcd's encoder would have written ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void buf_put(Buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void buf_varint(Buf *b, uint64_t v) {
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    buf_put(b, t, k);
}

static int rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned s = 0; s < 64; s += 7) {
        if (*p >= end) return -1;
        uint8_t c = *(*p)++;
        x |= (uint64_t)(c & 0x7f) << s;
        if (c < 0x80) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Parses {1: varint, 2: varint, 3: bytes} (walpb.Record) or {1: varint, 2: bytes} (snappb);
 * -1 when it is anything else. */
static int parse_simple(const uint8_t *p, size_t n, int bytes_field, uint64_t *a, uint64_t *b,
                        const uint8_t **data, size_t *dlen, int *has_data) {
    const uint8_t *end = p + n;
    *a = *b = 0;
    *has_data = 0;
    while (p < end) {
        uint64_t tag, v;
        if (rd_varint(&p, end, &tag)) return -1;
        unsigned f = (unsigned)(tag >> 3), w = (unsigned)(tag & 7);
        if ((int)f == bytes_field && w == 2) {
            if (rd_varint(&p, end, &v) || v > (uint64_t)(end - p)) return -1;
            *data = p;
            *dlen = (size_t)v;
            *has_data = 1;
            p += v;
        } else if (f >= 1 && f <= 2 && w == 0) {
            if (rd_varint(&p, end, &v)) return -1;
            *(f == 1 ? a : b) = v;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Rewrites a segment's records with a correct CRC chain (*chain carries across segments); the
 * bytes after the first unparseable frame are copied as they are. */
static void fix_segment(const uint8_t *in, size_t n, uint32_t *chain, Buf *out) {
    size_t off = 0;
    while (off + 8 <= n) {
        uint64_t word = 0;
        for (int i = 7; i >= 0; i--)
            word = word << 8 | in[off + i];
        uint64_t len = word & 0x00ffffffffffffffull;
        uint64_t pad = (word >> 63) ? (word >> 56) & 7 : 0;
        if (word == 0 || len > n - off - 8 || pad > n - off - 8 - len) break;
        uint64_t type, crc;
        const uint8_t *d = NULL;
        size_t dl = 0;
        int has;
        if (parse_simple(in + off + 8, (size_t)len, 3, &type, &crc, &d, &dl, &has)) break;
        if (type != WAL_REC_CRC) *chain = wal_crc32c(*chain, d, dl);
        Buf rec = {0};
        buf_varint(&rec, 0x08);
        buf_varint(&rec, type);
        buf_varint(&rec, 0x10);
        buf_varint(&rec, *chain);
        if (has) {
            buf_varint(&rec, 0x1a);
            buf_varint(&rec, dl);
            buf_put(&rec, d, dl);
        }
        size_t p = (8 - rec.n % 8) % 8;
        uint64_t w2 = rec.n | (p ? (uint64_t)(0x80 | p) << 56 : 0);
        uint8_t lw[8], zeros[8] = {0};
        for (int i = 0; i < 8; i++)
            lw[i] = (uint8_t)(w2 >> (8 * i));
        buf_put(out, lw, 8);
        buf_put(out, rec.p, rec.n);
        buf_put(out, zeros, p);
        free(rec.p);
        off += 8 + len + pad;
    }
    buf_put(out, in + off, n - off);
}

static void fix_snap(const uint8_t *in, size_t n, Buf *out) {
    uint64_t crc, unused;
    const uint8_t *d = NULL;
    size_t dl = 0;
    int has;
    if (parse_simple(in, n, 2, &crc, &unused, &d, &dl, &has) || !has) {
        buf_put(out, in, n);
        return;
    }
    buf_varint(out, 0x08);
    buf_varint(out, wal_crc32c(0, d, dl));
    buf_varint(out, 0x12);
    buf_varint(out, dl);
    buf_put(out, d, dl);
}

/* ---- checks ---- */

static void check_rc(int rc) {
    if (rc != 0 && rc != ERR_CORRUPT && rc != ERR_NOT_FOUND && rc != ERR_IO) abort();
    if (rc != 0 && err_msg()[0] == '\0') abort();
}

/* Classifies an entry payload and checks what can be checked without etcd. */
static void check_request(const uint8_t *p, size_t n) {
    WalRequestKind k = wal_classify_request(p, n);
    if ((int)k < (int)WAL_REQ_EMPTY || (int)k > (int)WAL_REQ_UNDECODABLE) abort();
    if ((k == WAL_REQ_EMPTY) != (n == 0)) abort();
    if (wal_request_may_write(k) != (k == WAL_REQ_WRITE || k == WAL_REQ_UNDECODABLE)) abort();
    if (strcmp(wal_request_kind_name(k), "unknown") == 0) abort();
    if (k == WAL_REQ_NO_WRITE) {
        /* an InternalRaftRequest with put = {} appended is still one, and now it writes */
        uint8_t *q = malloc(n + 2);
        if (!q) abort();
        memcpy(q, p, n);
        q[n] = 0x22;
        q[n + 1] = 0x00;
        if (wal_classify_request(q, n + 2) != WAL_REQ_WRITE) abort();
        free(q);
    }
}

static void run_dir(uint64_t after) {
    WalInfo w;
    int rc = wal_read_dir(member, after, &w);
    check_rc(rc);
    if (rc) return;
    if (w.last_index != w.snap_index + w.entries) abort();
    if (w.normal_entries > w.entries || w.normal_after > w.normal_entries) abort();
    if (w.writes_after > w.normal_after || w.undecodable_after > w.writes_after) abort();
    if (w.segments == 0 || w.segments > w.segments_total) abort();
    if (w.have_snap != (w.snap_file[0] != '\0')) abort();
    if (w.snap_files_skipped > w.snap_files) abort();
}

static void run_segment(const char *path, int is_last) {
    WalSegment *s = NULL;
    int rc = wal_segment_open(path, is_last, &s);
    if (rc) {
        check_rc(rc);
        return;
    }
    struct stat st;
    if (stat(path, &st) != 0) abort();
    uint32_t chain = 0;
    WalRecord r;
    uint64_t prev = 0;
    for (int i = 0; i < 1000000; i++) {
        rc = wal_segment_next(s, &chain, &r);
        if (rc != WAL_NEXT_RECORD) break;
        if (r.offset < prev || r.offset + 8 + r.len > (uint64_t)st.st_size) abort();
        if (r.len && !r.data) abort();
        prev = r.offset + 8;
        if (r.type == WAL_REC_ENTRY) {
            WalEntry e;
            int erc = wal_decode_entry(r.data, r.len, &e);
            check_rc(erc);
            if (erc == 0) check_request(e.data, e.data_len);
        } else if (r.type == WAL_REC_STATE) {
            WalHardState hs;
            check_rc(wal_decode_hardstate(r.data, r.len, &hs));
        } else if (r.type == WAL_REC_SNAPSHOT) {
            uint64_t a, b;
            check_rc(wal_decode_snapshot(r.data, r.len, &a, &b));
        }
    }
    if (rc < 0) check_rc(rc);
    if (wal_segment_valid_offset(s) > (uint64_t)st.st_size) abort();
    wal_segment_close(s);
}

static void run_all(int mode, uint64_t after) {
    if (mode == 1) {
        WalSnapMeta m;
        check_rc(wal_snap_read(snap0, &m));
        return;
    }
    run_dir(after);
    run_segment(wal0, mode != 3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    check_request(data, size);
    if (size < 1) return 0;
    int mode = data[0] & 3;
    uint64_t after = data[0] >> 2; /* a small consistent index */
    const uint8_t *p = data + 1;
    size_t n = size - 1, split = n;
    if (mode >= 2) {
        if (n < 2) return 0;
        split = (size_t)(p[0] | p[1] << 8);
        p += 2;
        n -= 2;
        if (split > n) split = n;
    }

    for (int fixed = 0; fixed < 2; fixed++) {
        clear();
        Buf a = {0}, b = {0};
        uint32_t chain = 0;
        switch (mode) {
        case 0:
            if (fixed)
                fix_segment(p, n, &chain, &a);
            else
                buf_put(&a, p, n);
            put(wal0, a.p, a.n);
            break;
        case 1:
            if (fixed)
                fix_snap(p, n, &a);
            else
                buf_put(&a, p, n);
            put(snap0, a.p, a.n);
            break;
        case 2:
            if (fixed) {
                fix_snap(p, split, &a);
                fix_segment(p + split, n - split, &chain, &b);
            } else {
                buf_put(&a, p, split);
                buf_put(&b, p + split, n - split);
            }
            put(snap0, a.p, a.n);
            put(wal0, b.p, b.n);
            break;
        default:
            if (fixed) {
                fix_segment(p, split, &chain, &a);
                fix_segment(p + split, n - split, &chain, &b);
            } else {
                buf_put(&a, p, split);
                buf_put(&b, p + split, n - split);
            }
            put(wal0, a.p, a.n);
            put(wal1, b.p, b.n);
        }
        free(a.p);
        free(b.p);
        run_all(mode, after);
    }
    clear();
    return 0;
}
