/* wal: etcd WAL and snap-file reader; see wal.h. Framing (encoder.go/decoder.go): a little-endian
 * uint64 length word whose low 56 bits are the record size and whose top byte, when its high bit
 * is set, holds the padding (0-7) that aligns records to 8 bytes; then walpb.Record{type=1,
 * crc=2, data=3}. Protobuf is decoded like gogoproto's generated code: varints of at most 10
 * bytes, known fields with the wrong wire type rejected, unknown fields skipped, last value
 * wins. Nothing read from a file is trusted: lengths are checked against the file before use. */
#include "wal.h"
#include "../common/byteorder.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/array.h"
#include "../common/names.h"
#include "../common/mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAL_BUF_SIZE ((size_t)1 << 20)
#define WAL_SECTOR 512 /* etcd's minSectorSize: torn-write granularity */
#define WAL_MAX_FILES 100000u

/* ---------------- CRC-32C ---------------- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

/* slicing-by-8 over the inverted register */
static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WAL_HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c64;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
static int crc_use_hw;
#endif

static void crc_setup(void) {
    crc_init();
#ifdef WAL_HAVE_HW_CRC
    __builtin_cpu_init();
    crc_use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t wal_crc32c(uint32_t crc, const void *data, size_t len) {
    pthread_once(&crc_once, crc_setup);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    if (len == 0) return crc;
#ifdef WAL_HAVE_HW_CRC
    if (crc_use_hw) return ~crc_hw(c, p, len);
#endif
    return ~crc_sw(c, p, len);
}

uint32_t wal_crc32c_portable(uint32_t crc, const void *data, size_t len) {
    pthread_once(&crc_once, crc_setup);
    return len ? ~crc_sw(~crc, data, len) : crc;
}

/* ---------------- protobuf wire format (in memory) ---------------- */

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_BYTES = 2, PB_FIXED32 = 5 };

typedef struct {
    const uint8_t *p, *end;
} Pb;

/* A reader over p[0, n); p may be NULL when n is 0 (an absent bytes field). */
static Pb pb_make(const uint8_t *p, size_t n) {
    static const uint8_t empty[1];
    if (!p) return (Pb){empty, empty};
    return (Pb){p, p + n};
}

/* Decodes a varint as gogoproto does: at most 10 bytes, bits past 64 dropped. Returns a static
 * reason on error. */
static const char *pb_varint(Pb *b, uint64_t *v) {
    uint64_t x = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (shift >= 64) return "varint longer than 10 bytes";
        if (b->p >= b->end) return "message ends inside a varint";
        uint8_t c = *b->p++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (c < 0x80) break;
    }
    *v = x;
    return NULL;
}

/* Reads a field tag; fields numbered <= 0 (as int32) are errors, as in gogoproto. */
static const char *pb_tag(Pb *b, int32_t *field, unsigned *wire) {
    uint64_t t;
    const char *why = pb_varint(b, &t);
    if (why) return why;
    *field = (int32_t)(uint32_t)(t >> 3);
    *wire = (unsigned)(t & 7);
    if (*field <= 0) return "illegal field number";
    return NULL;
}

static const char *pb_bytes(Pb *b, const uint8_t **p, size_t *n) {
    uint64_t len;
    const char *why = pb_varint(b, &len);
    if (why) return why;
    if (len > (uint64_t)(b->end - b->p)) return "length-delimited field runs past the message";
    *p = b->p;
    *n = (size_t)len;
    b->p += len;
    return NULL;
}

static const char *pb_skip(Pb *b, unsigned wire) {
    uint64_t v;
    const uint8_t *p;
    size_t n;
    switch (wire) {
    case PB_VARINT:
        return pb_varint(b, &v);
    case PB_FIXED64:
        if (b->end - b->p < 8) return "message ends inside a fixed64";
        b->p += 8;
        return NULL;
    case PB_BYTES:
        return pb_bytes(b, &p, &n);
    case PB_FIXED32:
        if (b->end - b->p < 4) return "message ends inside a fixed32";
        b->p += 4;
        return NULL;
    default:
        return "unsupported wire type (group)";
    }
}

static int pb_fail(const char *what, const char *why) {
    return err_set(ERR_CORRUPT, "%s: %s", what, why);
}

/* One field a table-driven decode (pb_decode) takes: its number, the wire types it may come with
 * (bit 1 << wire type), the reason when it comes with another, and a check run on each bytes
 * value (NULL: none). */
typedef struct {
    int32_t num;
    unsigned wires;
    const char *wrong_wire;
    const char *(*check)(const uint8_t *p, size_t n);
} PbField;

/* A field's last occurrence: v for a varint, p and n for bytes (borrowed from the message). */
typedef struct {
    uint64_t v;
    const uint8_t *p;
    size_t n;
    int seen;
} PbValue;

/* Decodes the message p[0, n): each field numbered in fields[0, nf) must come with one of its wire
 * types, and its value (check passed) goes to vals[i], zeroed first; the last occurrence wins, as
 * gogoproto merges. Every other field is skipped. NULL, or a static reason. */
static const char *pb_decode(const uint8_t *p, size_t n, const PbField *fields, size_t nf,
                             PbValue *vals) {
    Pb b = pb_make(p, n);
    memset(vals, 0, nf * sizeof *vals);
    while (b.p < b.end) {
        int32_t f;
        unsigned w;
        const char *why = pb_tag(&b, &f, &w);
        if (why) return why;
        size_t i = 0;
        while (i < nf && fields[i].num != f)
            i++;
        if (i == nf) {
            if ((why = pb_skip(&b, w))) return why;
            continue;
        }
        if (!(fields[i].wires & (1u << w))) return fields[i].wrong_wire;
        PbValue *v = &vals[i];
        if (w == PB_VARINT) {
            why = pb_varint(&b, &v->v);
        } else {
            why = pb_bytes(&b, &v->p, &v->n);
            if (!why && fields[i].check) why = fields[i].check(v->p, v->n);
        }
        if (why) return why;
        v->seen = 1;
    }
    return NULL;
}

/* A packed repeated varint field's bytes: varints to the end, none cut short. */
static const char *pb_check_packed(const uint8_t *p, size_t n) {
    Pb packed = pb_make(p, n);
    uint64_t v;
    const char *why = NULL;
    while (!why && packed.p < packed.end)
        why = pb_varint(&packed, &v);
    return why;
}

/* raftpb.ConfState: voters=1, learners=2, voters_outgoing=3, learners_next=4 (repeated uint64,
 * plain or packed), auto_leave=5 (bool). Only checked, not kept. */
static const char *pb_check_confstate(const uint8_t *p, size_t n) {
    static const char repeated[] = "ConfState: wrong wire type for a repeated uint64";
    enum { plain_or_packed = 1u << PB_VARINT | 1u << PB_BYTES };
    static const PbField fields[] = {
        {1, plain_or_packed, repeated, pb_check_packed},
        {2, plain_or_packed, repeated, pb_check_packed},
        {3, plain_or_packed, repeated, pb_check_packed},
        {4, plain_or_packed, repeated, pb_check_packed},
        {5, 1u << PB_VARINT, "ConfState: wrong wire type for auto_leave", NULL},
    };
    PbValue vals[5];
    return pb_decode(p, n, fields, 5, vals);
}

/* Shared by raftpb.Entry {type=1, term=2, index=3, data=4} and raftpb.HardState {term=1, vote=2,
 * commit=3}: the varints of fields 1-3 go to vals[0..2] (0 when absent, the last occurrence when
 * repeated, as gogoproto merges); field 4's bytes are borrowed into *data when data is not NULL,
 * else skipped like any other field. */
static int decode_three_varints(const char *what, const uint8_t *p, size_t n, uint64_t vals[3],
                                const uint8_t **data, size_t *data_len) {
    static const char varint[] = "wrong wire type for a varint";
    static const PbField fields[] = {
        {1, 1u << PB_VARINT, varint, NULL},
        {2, 1u << PB_VARINT, varint, NULL},
        {3, 1u << PB_VARINT, varint, NULL},
        {4, 1u << PB_BYTES, "wrong wire type for data", NULL},
    };
    PbValue v[4];
    const char *why = pb_decode(p, n, fields, data ? 4 : 3, v);
    if (why) return pb_fail(what, why);
    for (int i = 0; i < 3; i++)
        vals[i] = v[i].v;
    if (data && v[3].seen) {
        *data = v[3].p;
        *data_len = v[3].n;
    }
    return 0;
}

int wal_decode_entry(const uint8_t *p, size_t n, WalEntry *out) {
    uint64_t v[3];
    memset(out, 0, sizeof *out);
    int rc = decode_three_varints("raftpb.Entry", p, n, v, &out->data, &out->data_len);
    if (rc) return rc;
    out->type = (int32_t)(uint32_t)v[0]; /* an int32 enum keeps 32 bits */
    out->term = v[1];
    out->index = v[2];
    return 0;
}

int wal_decode_hardstate(const uint8_t *p, size_t n, WalHardState *out) {
    uint64_t v[3];
    memset(out, 0, sizeof *out);
    int rc = decode_three_varints("raftpb.HardState", p, n, v, NULL, NULL);
    if (rc) return rc;
    out->term = v[0];
    out->vote = v[1];
    out->commit = v[2];
    return 0;
}

/* Shared by walpb.Snapshot {index=1, term=2, conf_state=3} and raftpb.SnapshotMetadata
 * {conf_state=1, index=2, term=3}. Fields present overwrite *index and *term (gogoproto merges
 * repeated occurrences of a message field the same way). */
static int decode_snap_meta(const char *what, const uint8_t *p, size_t n, int f_index, int f_term,
                            int f_conf, uint64_t *index, uint64_t *term) {
    static const char varint[] = "wrong wire type for a varint";
    const PbField fields[] = {
        {f_index, 1u << PB_VARINT, varint, NULL},
        {f_term, 1u << PB_VARINT, varint, NULL},
        {f_conf, 1u << PB_BYTES, "wrong wire type for conf_state", pb_check_confstate},
    };
    PbValue v[3];
    const char *why = pb_decode(p, n, fields, 3, v);
    if (why) return pb_fail(what, why);
    if (v[0].seen) *index = v[0].v;
    if (v[1].seen) *term = v[1].v;
    return 0;
}

int wal_decode_snapshot(const uint8_t *p, size_t n, uint64_t *index, uint64_t *term) {
    *index = *term = 0;
    return decode_snap_meta("walpb.Snapshot", p, n, 1, 2, 3, index, term);
}

/* ---------------- entry payloads (etcdserverpb) ---------------- */

/* gogoproto's generated skip<File>: skips the field whose tag was just read; a group (start
 * wire type 3) is skipped to its matching end, nesting counted without recursion. */
static const char *pb_skip_gogo(Pb *b, unsigned wire) {
    if (wire != 3) return pb_skip(b, wire);
    uint64_t depth = 1;
    while (depth) {
        uint64_t t;
        const char *why = pb_varint(b, &t);
        if (why) return why;
        unsigned w = (unsigned)(t & 7);
        if (w == 3)
            depth++;
        else if (w == 4)
            depth--;
        else if ((why = pb_skip(b, w)))
            return why;
    }
    return NULL;
}

/* A tag as a gogoproto Unmarshal method reads it: wire type 4 (end group) is an error there. */
static const char *pb_tag_gogo(Pb *b, int32_t *field, unsigned *wire) {
    const char *why = pb_tag(b, field, wire);
    if (!why && *wire == 4) why = "end group outside a group";
    return why;
}

/* etcdserverpb.Request (etcdserver.proto, the v2 request) as its Unmarshal accepts it: Method,
 * Path, Val, PrevValue (2, 3, 4, 6) are bytes, the other fields up to 17 varints. 1 = decodes. */
static int v2_request_decodes(const uint8_t *p, size_t n) {
    Pb b = pb_make(p, n);
    while (b.p < b.end) {
        int32_t f;
        unsigned w;
        const char *why = pb_tag_gogo(&b, &f, &w);
        if (why) return 0;
        if (f >= 1 && f <= 17) {
            unsigned want = f == 2 || f == 3 || f == 4 || f == 6 ? PB_BYTES : PB_VARINT;
            if (w != want) return 0;
        }
        if ((why = pb_skip_gogo(&b, w))) return 0;
    }
    return 1;
}

/* Txn nesting followed before a txn is taken as a write unread (etcd's --max-txn-ops bounds ops,
 * not depth; real txns nest a level or two). */
#define TXN_MAX_DEPTH 32

/* 1 when a TxnRequest {compare=1, success=2, failure=3 (repeated RequestOp)} holds a put or a
 * delete range in a RequestOp {range=1, put=2, delete_range=3, txn=4} of either branch, at any
 * nesting depth; also when it does not decode or nests deeper than TXN_MAX_DEPTH (doubt counts as
 * a write). Which branch runs depends on the compares at apply time, so both count. */
static int txn_may_write(const uint8_t *p, size_t n) {
    struct {
        Pb b;
        int is_op; /* reading a RequestOp, else a TxnRequest */
    } st[2 * TXN_MAX_DEPTH + 2];
    int top = 0;
    st[0].b = pb_make(p, n);
    st[0].is_op = 0;
    while (top >= 0) {
        Pb *b = &st[top].b;
        if (b->p >= b->end) {
            top--;
            continue;
        }
        int32_t f;
        unsigned w;
        const uint8_t *sub = NULL;
        size_t sub_n = 0;
        if (pb_tag_gogo(b, &f, &w)) return 1;
        int nest = st[top].is_op ? f == 4 : f == 2 || f == 3; /* a txn, or an op */
        if (st[top].is_op && (f == 2 || f == 3)) return 1;    /* put, delete range */
        if (!nest) {
            if (pb_skip_gogo(b, w)) return 1;
            continue;
        }
        if (w != PB_BYTES || pb_bytes(b, &sub, &sub_n)) return 1;
        if (top + 1 >= (int)(sizeof st / sizeof st[0])) return 1;
        top++;
        st[top].b = pb_make(sub, sub_n);
        st[top].is_op = !st[top - 1].is_op;
    }
    return 0;
}

/* etcdserverpb.InternalRaftRequest (raft_internal.proto, etcd 3.4-3.7): ID=1 is a varint; v2=2
 * and the request messages (3-11, header=100, auth 1000 and 1011-1204, membership 1300-1302, 3.6's
 * downgrade_version_test=9900) are bytes, as its Unmarshal checks; the v2 request is decoded
 * (its failure fails the whole message, as there). 0 = decodes, with *v2 and *write set. */
static int irr_decode(const uint8_t *p, size_t n, int *v2, int *write) {
    Pb b = pb_make(p, n);
    *v2 = *write = 0;
    while (b.p < b.end) {
        int32_t f;
        unsigned w;
        const uint8_t *sub = NULL;
        size_t sub_n = 0;
        if (pb_tag_gogo(&b, &f, &w)) return -1;
        if (f == 1) {
            uint64_t v;
            if (w != PB_VARINT || pb_varint(&b, &v)) return -1;
            continue;
        }
        int known = (f >= 2 && f <= 11) || f == 100 || f == 1000 || (f >= 1011 && f <= 1013) ||
                    (f >= 1100 && f <= 1107) || (f >= 1200 && f <= 1204) ||
                    (f >= 1300 && f <= 1302) || f == 9900;
        if (!known) {
            if (pb_skip_gogo(&b, w)) return -1;
            continue;
        }
        if (w != PB_BYTES || pb_bytes(&b, &sub, &sub_n)) return -1;
        switch (f) {
        case 2: /* v2 */
            if (!v2_request_decodes(sub, sub_n)) return -1;
            *v2 = 1;
            break;
        case 4: /* put */
        case 5: /* delete_range */
        case 9: /* lease_revoke: deletes the lease's keys in one txn */
            *write = 1;
            break;
        case 6: /* txn */
            if (txn_may_write(sub, sub_n)) *write = 1;
            break;
        default: /* range, compaction, lease grant and checkpoint, alarm, auth, membership */
            break;
        }
    }
    return 0;
}

/* applyEntryNormal: empty data is skipped; data that is not an InternalRaftRequest is a v2
 * Request (MustUnmarshal: etcd panics if it is not one either); an InternalRaftRequest with v2
 * set applies that to the v2 store and nothing else; otherwise applyV3 takes the request. Several
 * request fields set at once (etcd never writes that) count as a write if any of them writes. */
WalRequestKind wal_classify_request(const uint8_t *data, size_t n) {
    int v2, write;
    if (n == 0) return WAL_REQ_EMPTY;
    if (irr_decode(data, n, &v2, &write) == 0)
        return v2 ? WAL_REQ_V2 : write ? WAL_REQ_WRITE : WAL_REQ_NO_WRITE;
    return v2_request_decodes(data, n) ? WAL_REQ_V2 : WAL_REQ_UNDECODABLE;
}

int wal_request_may_write(WalRequestKind kind) {
    return kind == WAL_REQ_WRITE || kind == WAL_REQ_UNDECODABLE;
}

const char *wal_request_kind_name(WalRequestKind kind) {
    static const char *const names[] = {
        [WAL_REQ_EMPTY] = "empty", [WAL_REQ_NO_WRITE] = "no-write",       [WAL_REQ_V2] = "v2",
        [WAL_REQ_WRITE] = "write", [WAL_REQ_UNDECODABLE] = "undecodable",
    };
    return NAME_AT(names, kind, "unknown");
}

/* ---------------- segments ---------------- */

struct WalSegment {
    int fd;
    int is_last;
    char *path;
    uint64_t size; /* file size at open */
    uint8_t *buf;  /* window: buf[pos, len) is the file from offset buf_off + pos */
    size_t cap, pos, len;
    uint64_t buf_off;
    uint64_t valid_off; /* end of the last good record (etcd's lastValidOff) */
    int eof;
};

int wal_segment_open(const char *path, int is_last, WalSegment **out) {
    int rc = 0;
    *out = NULL;
    WalSegment *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "%s: out of memory", path);
    s->fd = -1;
    s->is_last = is_last;
    if (!(s->path = strdup(path))) {
        rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    struct stat st;
    if ((rc = fs_open_regular(path, NULL, path, 0, &s->fd, &st))) goto done;
    s->size = (uint64_t)st.st_size;
    s->cap = WAL_BUF_SIZE;
    if (!(s->buf = malloc(s->cap))) {
        rc = err_set(ERR_NOMEM, "%s: out of memory for the read buffer", path);
        goto done;
    }
done:
    RETURN_BUILT(rc, out, s, wal_segment_close(s));
}

void wal_segment_close(WalSegment *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    free(s->buf);
    free(s->path);
    free(s);
}

uint64_t wal_segment_valid_offset(const WalSegment *s) {
    return s->valid_off;
}

/* Makes n bytes available at buf + pos if the file has them; returns how many are (<= n only
 * at the end of the file), or a negative ERR_*. n <= 8 + WAL_MAX_RECORD + 7. */
static int64_t seg_ensure(WalSegment *s, size_t n) {
    if (s->len - s->pos >= n) return (int64_t)n;
    if (s->pos > 0) {
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->buf_off += s->pos;
        s->len -= s->pos;
        s->pos = 0;
    }
    if (n > s->cap) {
        uint8_t *nb = realloc(s->buf, n);
        if (!nb) return err_set(ERR_NOMEM, "%s: out of memory for a %zu-byte record", s->path, n);
        s->buf = nb;
        s->cap = n;
    }
    while (s->len < n && !s->eof) {
        ssize_t r = read(s->fd, s->buf + s->len, s->cap - s->len);
        if (r < 0) {
            if (errno == EINTR) continue;
            return err_set(ERR_IO, "%s: read at offset %llu: %s", s->path,
                           (unsigned long long)(s->buf_off + s->len), strerror(errno));
        }
        if (r == 0) s->eof = 1;
        s->len += (size_t)r;
    }
    return (int64_t)(s->len < n ? s->len : n);
}

/* etcd's isTornEntry: in the last segment, a record any of whose sector-aligned pieces is all
 * zeros was cut by a torn write. data starts at file offset off. */
static int seg_is_torn(const WalSegment *s, const uint8_t *data, size_t n, uint64_t off) {
    if (!s->is_last) return 0;
    size_t cur = 0;
    while (cur < n) {
        size_t chunk = WAL_SECTOR - (size_t)(off % WAL_SECTOR);
        if (chunk > n - cur) chunk = n - cur;
        size_t i = 0;
        while (i < chunk && data[cur + i] == 0)
            i++;
        if (i == chunk) return 1;
        cur += chunk;
        off += chunk;
    }
    return 0;
}

static int seg_torn(WalSegment *s, uint64_t off, const char *why) {
    err_set(ERR_CORRUPT, "%s: offset %llu: %s", s->path, (unsigned long long)off, why);
    return WAL_NEXT_TORN;
}

/* walpb.Record {type=1, crc=2, data=3}: fields present overwrite rec's. */
static const char *decode_record(const uint8_t *p, size_t n, WalRecord *rec) {
    static const char type_crc[] = "wrong wire type for type/crc";
    static const PbField fields[] = {
        {1, 1u << PB_VARINT, type_crc, NULL},
        {2, 1u << PB_VARINT, type_crc, NULL},
        {3, 1u << PB_BYTES, "wrong wire type for data", NULL},
    };
    PbValue v[3];
    const char *why = pb_decode(p, n, fields, 3, v);
    if (why) return why;
    if (v[0].seen) rec->type = (int64_t)v[0].v;
    if (v[1].seen) rec->crc = (uint32_t)v[1].v;
    if (v[2].seen) {
        rec->data = v[2].p;
        rec->len = v[2].n;
    }
    return NULL;
}

int wal_segment_next(WalSegment *s, uint32_t *crc, WalRecord *rec) {
    memset(rec, 0, sizeof *rec);
    uint64_t off = s->valid_off;
    rec->offset = off;
    int64_t got = seg_ensure(s, 8);
    if (got < 0) return (int)got;
    if (got == 0) return WAL_NEXT_END;
    if (got < 8) return seg_torn(s, off, "file ends inside a record's length word");
    const uint8_t *fp = s->buf + s->pos;
    uint64_t word = get_le64(fp);
    if (word == 0) return WAL_NEXT_END; /* preallocated space */
    uint64_t rec_bytes = word & ~((uint64_t)0xff << 56);
    uint64_t pad = (word >> 63) ? (word >> 56) & 7 : 0;
    uint64_t room = s->size > off + 8 ? s->size - off - 8 : 0;
    if (rec_bytes > room || pad > room - rec_bytes) {
        char why[160];
        snprintf(why, sizeof why,
                 "record of %llu bytes (+%llu padding) runs past the end of the file (%llu bytes)",
                 (unsigned long long)rec_bytes, (unsigned long long)pad,
                 (unsigned long long)s->size);
        return seg_torn(s, off, why);
    }
    if (rec_bytes > WAL_MAX_RECORD)
        return err_set(ERR_CORRUPT,
                       "%s: offset %llu: record of %llu bytes exceeds the %llu MiB cap", s->path,
                       (unsigned long long)off, (unsigned long long)rec_bytes,
                       (unsigned long long)(WAL_MAX_RECORD >> 20));
    size_t need = (size_t)(8 + rec_bytes + pad);
    got = seg_ensure(s, need);
    if (got < 0) return (int)got;
    if ((size_t)got < need) return seg_torn(s, off, "file ends inside the record");
    const uint8_t *data = s->buf + s->pos + 8;
    size_t data_len = need - 8;

    const char *why = decode_record(data, (size_t)rec_bytes, rec);
    rec->offset = off;
    if (why) {
        if (seg_is_torn(s, data, data_len, off + 8))
            return seg_torn(s, off, "torn write: undecodable record with a zeroed sector");
        return err_set(ERR_CORRUPT, "%s: offset %llu: bad walpb.Record: %s", s->path,
                       (unsigned long long)off, why);
    }
    if (rec->type != WAL_REC_CRC) {
        uint32_t c = wal_crc32c(*crc, rec->data, rec->len);
        if (c != rec->crc) {
            if (seg_is_torn(s, data, data_len, off + 8))
                return seg_torn(s, off, "torn write: CRC mismatch with a zeroed sector");
            return err_set(ERR_CORRUPT,
                           "%s: offset %llu: CRC mismatch in a type-%lld record of %zu bytes "
                           "(stored 0x%08x, computed 0x%08x)",
                           s->path, (unsigned long long)off, (long long)rec->type, rec->len,
                           rec->crc, c);
        }
        *crc = c;
    } else {
        /* a segment opens with the chain value so far; 0 means a fresh decoder (ReadAll) */
        if (*crc != 0 && rec->crc != *crc)
            return err_set(ERR_CORRUPT,
                           "%s: offset %llu: CRC record 0x%08x does not continue the chain 0x%08x",
                           s->path, (unsigned long long)off, rec->crc, *crc);
        *crc = rec->crc;
    }
    s->pos += need;
    s->valid_off += need;
    return WAL_NEXT_RECORD;
}

/* ---------------- snap files ---------------- */

/* A pread cursor over [off, end) of a file: the snap file's data is skipped, never loaded. */
typedef struct {
    int fd;
    const char *path;
    uint64_t off, end;
} Cur;

static int cur_fail(const Cur *c, const char *why) {
    return err_set(ERR_CORRUPT, "%s: offset %llu: %s", c->path, (unsigned long long)c->off, why);
}

static int cur_pread(const Cur *c, uint8_t *buf, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(c->fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return err_set(ERR_IO, "%s: read at offset %llu: %s", c->path,
                           (unsigned long long)(off + got), strerror(errno));
        }
        if (r == 0)
            return err_set(ERR_CORRUPT, "%s: file ends at offset %llu", c->path,
                           (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return 0;
}

static int cur_varint(Cur *c, uint64_t *v) {
    uint8_t tmp[10];
    size_t n = c->end - c->off < sizeof tmp ? (size_t)(c->end - c->off) : sizeof tmp;
    int rc = cur_pread(c, tmp, n, c->off);
    if (rc) return rc;
    Pb b = {tmp, tmp + n};
    const char *why = pb_varint(&b, v);
    if (why) return cur_fail(c, why);
    c->off += (uint64_t)(b.p - tmp);
    return 0;
}

static int cur_tag(Cur *c, int32_t *field, unsigned *wire) {
    uint64_t t;
    int rc = cur_varint(c, &t);
    if (rc) return rc;
    *field = (int32_t)(uint32_t)(t >> 3);
    *wire = (unsigned)(t & 7);
    if (*field <= 0) return cur_fail(c, "illegal field number");
    return 0;
}

/* Reads a length prefix and checks the bytes are inside the cursor; *at = their offset. */
static int cur_len(Cur *c, uint64_t *at, uint64_t *len) {
    int rc = cur_varint(c, len);
    if (rc) return rc;
    if (*len > c->end - c->off) return cur_fail(c, "length-delimited field runs past its end");
    *at = c->off;
    c->off += *len;
    return 0;
}

static int cur_skip(Cur *c, unsigned wire) {
    uint64_t v = 0, at = 0;
    switch (wire) {
    case PB_VARINT:
        return cur_varint(c, &v);
    case PB_FIXED64:
    case PB_FIXED32: {
        uint64_t n = wire == PB_FIXED64 ? 8 : 4;
        if (c->end - c->off < n) return cur_fail(c, "message ends inside a fixed field");
        c->off += n;
        return 0;
    }
    case PB_BYTES:
        return cur_len(c, &at, &v);
    default:
        return cur_fail(c, "unsupported wire type (group)");
    }
}

int wal_snap_read(const char *path, WalSnapMeta *out) {
    int rc = 0;
    uint8_t *buf = NULL;
    memset(out, 0, sizeof *out);
    int fd;
    struct stat st;
    if ((rc = fs_open_regular(path, NULL, path, FS_NOT_REGULAR_CORRUPT, &fd, &st))) return rc;
    if (st.st_size == 0) {
        rc = err_set(ERR_CORRUPT, "%s: empty snapshot file", path);
        goto done;
    }

    /* snappb.Snapshot {crc=1 uint32, data=2 bytes}; the last occurrence of each wins */
    Cur c = {fd, path, 0, (uint64_t)st.st_size};
    uint32_t want = 0;
    uint64_t data_at = 0, data_len = 0;
    while (c.off < c.end) {
        int32_t f;
        unsigned w;
        uint64_t v;
        if ((rc = cur_tag(&c, &f, &w))) goto done;
        if (f == 1) {
            if (w != PB_VARINT) {
                rc = cur_fail(&c, "snappb.Snapshot: wrong wire type for crc");
                goto done;
            }
            if ((rc = cur_varint(&c, &v))) goto done;
            want = (uint32_t)v;
        } else if (f == 2) {
            if (w != PB_BYTES) {
                rc = cur_fail(&c, "snappb.Snapshot: wrong wire type for data");
                goto done;
            }
            if ((rc = cur_len(&c, &data_at, &data_len))) goto done;
        } else if ((rc = cur_skip(&c, w))) {
            goto done;
        }
    }
    if (data_len == 0 || want == 0) {
        rc = err_set(ERR_CORRUPT, "%s: empty snapshot (no data or zero crc)", path);
        goto done;
    }

    size_t bcap = data_len < WAL_BUF_SIZE ? (size_t)data_len : WAL_BUF_SIZE;
    if (!(buf = malloc(bcap))) {
        rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    uint32_t crc = 0;
    for (uint64_t o = 0; o < data_len;) {
        size_t n = data_len - o < bcap ? (size_t)(data_len - o) : bcap;
        if ((rc = cur_pread(&c, buf, n, data_at + o))) goto done;
        crc = wal_crc32c(crc, buf, n);
        o += n;
    }
    if (crc != want) {
        rc = err_set(ERR_CORRUPT, "%s: crc mismatch (stored 0x%08x, computed 0x%08x)", path, want,
                     crc);
        goto done;
    }
    free(buf);
    buf = NULL;

    /* raftpb.Snapshot {data=1 bytes, metadata=2 SnapshotMetadata}; metadata occurrences merge */
    Cur d = {fd, path, data_at, data_at + data_len};
    while (d.off < d.end) {
        int32_t f;
        unsigned w;
        uint64_t at = 0, len = 0;
        if ((rc = cur_tag(&d, &f, &w))) goto done;
        if (f == 1 || f == 2) {
            if (w != PB_BYTES) {
                rc = cur_fail(&d, "raftpb.Snapshot: wrong wire type");
                goto done;
            }
            if ((rc = cur_len(&d, &at, &len))) goto done;
            if (f == 1) continue;
            if (len > WAL_MAX_RECORD) {
                rc = cur_fail(&d, "raftpb.SnapshotMetadata larger than the cap");
                goto done;
            }
            uint8_t *m = malloc(len ? (size_t)len : 1);
            if (!m) {
                rc = err_set(ERR_NOMEM, "%s: out of memory", path);
                goto done;
            }
            rc = cur_pread(&d, m, (size_t)len, at);
            if (rc == 0)
                rc = decode_snap_meta("raftpb.SnapshotMetadata", m, (size_t)len, 2, 3, 1,
                                      &out->index, &out->term);
            free(m);
            if (rc) {
                err_wrap(rc, "%s: offset %llu", path, (unsigned long long)at);
                goto done;
            }
        } else if ((rc = cur_skip(&d, w))) {
            goto done;
        }
    }
    out->data_bytes = data_len;
done:
    free(buf);
    close(fd);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

/* ---------------- a member directory ---------------- */

/* "<a>/<b>" into out; ERR_INVALID if it does not fit. */
static int join_path(char *out, size_t cap, const char *a, const char *b) {
    int n = snprintf(out, cap, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= cap) return err_set(ERR_INVALID, "path %s/%s is too long", a, b);
    return 0;
}

typedef struct {
    char name[40];
    uint64_t seq, index;
} WalName;

static int hex16(const char *s, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
        char ch = s[i];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            d = (unsigned)(ch - 'A' + 10);
        else
            return -1;
        x = x << 4 | d;
    }
    *v = x;
    return 0;
}

/* "%016x-%016x.wal" (wal/util.go parseWALName) */
static int parse_wal_name(const char *s, WalName *out) {
    if (strlen(s) != 37 || s[16] != '-' || strcmp(s + 33, ".wal") != 0) return -1;
    if (hex16(s, &out->seq) || hex16(s + 17, &out->index)) return -1;
    memcpy(out->name, s, 38);
    return 0;
}

static int cmp_wal_name(const void *a, const void *b) {
    return strcmp(((const WalName *)a)->name, ((const WalName *)b)->name);
}

static int cmp_str_desc(const void *a, const void *b) {
    return strcmp(*(char *const *)b, *(char *const *)a);
}

static int list_wal(const char *dir, WalName **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d)
        return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "open dir %s: %s", dir,
                       strerror(errno));
    WalName *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        WalName wn;
        if (parse_wal_name(e->d_name, &wn) != 0) continue;
        if (n == cap && cap >= WAL_MAX_FILES) {
            rc = err_set(ERR_CORRUPT, "%s: more than %u WAL files", dir, WAL_MAX_FILES);
            break;
        }
        if ((rc = array_reserve(&v, &cap, n, sizeof *v, 16, dir))) break;
        v[n++] = wn;
    }
    closedir(d);
    if (rc) {
        free(v);
        return rc;
    }
    if (n) qsort(v, n, sizeof *v, cmp_wal_name);
    *out = v;
    *n_out = n;
    return 0;
}

/* *.snap names in dir, newest (largest name) first. A missing dir is an empty list. */
static int list_snaps(const char *dir, char ***out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        return err_set(ERR_IO, "open dir %s: %s", dir, strerror(errno));
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".snap") != 0) continue;
        if (n == cap && cap >= WAL_MAX_FILES) {
            rc = err_set(ERR_CORRUPT, "%s: more than %u snap files", dir, WAL_MAX_FILES);
            break;
        }
        if ((rc = array_reserve(&v, &cap, n, sizeof *v, 16, dir))) break;
        if (!(v[n] = strdup(e->d_name))) {
            rc = err_set(ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        n++;
    }
    closedir(d);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return rc;
    }
    if (n) qsort(v, n, sizeof *v, cmp_str_desc);
    *out = v;
    *n_out = n;
    return 0;
}

/* The raft log after the snapshot as ReadAll builds it: an entry with index i > start replaces
 * everything from i on (ents = append(ents[:i-start-1], e)). Four bits per entry (LOG_*) say
 * whether it is EntryNormal and, past the consistent index, whether it carries data, may write
 * and does not decode; the counters follow truncations. */
enum { LOG_NORMAL = 1, LOG_DATA_AFTER = 2, LOG_WRITE_AFTER = 4, LOG_UNDECODABLE_AFTER = 8 };

typedef struct {
    uint64_t start, after;
    uint64_t len; /* entries start+1 .. start+len */
    uint64_t last_term;
    uint8_t *nibbles; /* entry i (0-based) in nibbles[i / 2], low half first */
    size_t cap_bytes;
    uint64_t n_normal, n_after, n_writes, n_undecodable;
} Log;

static unsigned nib_get(const uint8_t *m, uint64_t i) {
    return (m[i >> 1] >> ((i & 1) * 4)) & 0xf;
}

static void nib_put(uint8_t *m, uint64_t i, unsigned v) {
    unsigned sh = (unsigned)(i & 1) * 4;
    m[i >> 1] = (uint8_t)((m[i >> 1] & ~(0xfu << sh)) | (v & 0xf) << sh);
}

/* Adds (add = 1) or takes back (add = 0) an entry's bits in the counters. */
static void log_count(Log *lg, unsigned v, int add) {
    uint64_t *c[4] = {&lg->n_normal, &lg->n_after, &lg->n_writes, &lg->n_undecodable};
    for (unsigned b = 0; b < 4; b++)
        if (v >> b & 1) *c[b] = add ? *c[b] + 1 : *c[b] - 1;
}

static int log_append(Log *lg, const WalEntry *e, const char *path, uint64_t off) {
    if (e->index <= lg->start) return 0;
    uint64_t up = e->index - lg->start - 1;
    if (up > lg->len)
        return err_set(ERR_CORRUPT,
                       "%s: offset %llu: entry index %llu leaves a gap after index %llu", path,
                       (unsigned long long)off, (unsigned long long)e->index,
                       (unsigned long long)(lg->start + lg->len));
    for (uint64_t i = up; i < lg->len; i++) { /* overwritten (uncommitted) entries */
        log_count(lg, nib_get(lg->nibbles, i), 0);
        nib_put(lg->nibbles, i, 0);
    }
    if (up / 2 >= lg->cap_bytes) {
        size_t ncap = lg->cap_bytes ? lg->cap_bytes * 2 : 4096;
        uint8_t *a = realloc(lg->nibbles, ncap);
        if (!a) return err_set(ERR_NOMEM, "%s: out of memory for the entry map", path);
        memset(a + lg->cap_bytes, 0, ncap - lg->cap_bytes);
        lg->nibbles = a;
        lg->cap_bytes = ncap;
    }
    unsigned v = 0;
    if (e->type == 0) {
        v |= LOG_NORMAL;
        /* only entries the db lacks are replayed into it on start */
        if (e->data_len > 0 && e->index > lg->after) {
            WalRequestKind k = wal_classify_request(e->data, e->data_len);
            v |= LOG_DATA_AFTER;
            if (wal_request_may_write(k)) v |= LOG_WRITE_AFTER;
            if (k == WAL_REQ_UNDECODABLE) v |= LOG_UNDECODABLE_AFTER;
        }
    }
    nib_put(lg->nibbles, up, v);
    log_count(lg, v, 1);
    lg->len = up + 1;
    lg->last_term = e->term;
    return 0;
}

typedef struct {
    uint64_t index, term;
} SnapRef;

/* Pass 1, etcd's wal.ValidSnapshotEntries: every segment from the first, collecting snapshot
 * records and the last HardState. Stops quietly at a torn record (io.ErrUnexpectedEOF). */
static int scan_snapshots(const char *wal_dir, const WalName *names, size_t n, SnapRef **out,
                          size_t *n_out, WalHardState *hs) {
    SnapRef *v = NULL;
    size_t nv = 0, cap = 0;
    uint32_t crc = 0;
    int rc = 0, stop = 0;
    WalSegment *seg = NULL;
    for (size_t i = 0; i < n && !stop; i++) {
        char path[4096];
        if ((rc = join_path(path, sizeof path, wal_dir, names[i].name))) goto done;
        if ((rc = wal_segment_open(path, i + 1 == n, &seg))) {
            if (rc == ERR_INVALID) rc = ERR_CORRUPT;
            goto done;
        }
        WalRecord rec;
        for (;;) {
            int r = wal_segment_next(seg, &crc, &rec);
            if (r < 0) {
                rc = r;
                goto done;
            }
            if (r == WAL_NEXT_TORN) stop = 1;
            if (r != WAL_NEXT_RECORD) break;
            if (rec.type == WAL_REC_STATE) {
                if ((rc = wal_decode_hardstate(rec.data, rec.len, hs))) break;
            } else if (rec.type == WAL_REC_SNAPSHOT) {
                SnapRef s;
                if ((rc = wal_decode_snapshot(rec.data, rec.len, &s.index, &s.term))) break;
                if ((rc = array_reserve(&v, &cap, nv, sizeof *v, 16, path))) break;
                v[nv++] = s;
            }
        }
        if (rc) {
            err_wrap(rc, "%s: offset %llu", path, (unsigned long long)rec.offset);
            goto done;
        }
        wal_segment_close(seg);
        seg = NULL;
    }
done:
    wal_segment_close(seg);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n_out = nv;
    return 0;
}

/* The snapshot etcd 3.5 starts from (snap.LoadNewestAvailable): the newest readable .snap file
 * that the WAL recorded with an index <= the last HardState's commit. */
static int choose_snapshot(const char *member_dir, const WalName *names, size_t n, WalInfo *out) {
    char snap_dir[4096], wal_dir[4096];
    char **snaps = NULL;
    size_t ns = 0, nref = 0;
    SnapRef *refs = NULL;
    WalHardState hs = {0};
    int rc = join_path(snap_dir, sizeof snap_dir, member_dir, "snap");
    if (rc == 0) rc = join_path(wal_dir, sizeof wal_dir, member_dir, "wal");
    if (rc == 0) rc = list_snaps(snap_dir, &snaps, &ns);
    if (rc || ns == 0) goto done;
    out->snap_files = (uint32_t)ns;
    if ((rc = scan_snapshots(wal_dir, names, n, &refs, &nref, &hs))) goto done;
    for (size_t i = 0; i < ns && !out->have_snap; i++) {
        char path[4096];
        WalSnapMeta m;
        if (join_path(path, sizeof path, snap_dir, snaps[i]) == 0 && wal_snap_read(path, &m) == 0) {
            for (size_t k = nref; k-- > 0;) {
                if (refs[k].index == m.index && refs[k].term == m.term &&
                    refs[k].index <= hs.commit) {
                    out->have_snap = 1;
                    out->snap_index = m.index;
                    out->snap_term = m.term;
                    snprintf(out->snap_file, sizeof out->snap_file, "%s", snaps[i]);
                    break;
                }
            }
        }
        if (!out->have_snap) out->snap_files_skipped++;
    }
done:
    for (size_t i = 0; i < ns; i++)
        free(snaps[i]);
    free(snaps);
    free(refs);
    return rc;
}

/* wal.ReadAll's state across records (wal_read_dir). */
typedef struct {
    WalInfo *out;
    Log *lg;
    uint8_t *meta; /* the first metadata record; later ones must equal it */
    size_t meta_len;
    int have_meta;
    int match; /* a snapshot record matches the snap file's index and term */
} ReadAll;

/* One record of a WAL file at path, as wal.ReadAll takes it: entries into the log, the hard
 * state, metadata checked equal, the snapshot record checked against the snap file. 0 or ERR_*. */
static int read_record(ReadAll *ra, const WalRecord *rec, const char *path) {
    int rc = 0;
    switch (rec->type) {
    case WAL_REC_ENTRY: {
        WalEntry e;
        if ((rc = wal_decode_entry(rec->data, rec->len, &e)) == 0)
            rc = log_append(ra->lg, &e, path, rec->offset);
        break;
    }
    case WAL_REC_STATE:
        rc = wal_decode_hardstate(rec->data, rec->len, &ra->out->hard_state);
        break;
    case WAL_REC_METADATA:
        if (!ra->have_meta) {
            if (!(ra->meta = malloc(rec->len ? rec->len : 1))) {
                rc = err_set(ERR_NOMEM, "out of memory");
                break;
            }
            if (rec->len) memcpy(ra->meta, rec->data, rec->len);
            ra->meta_len = rec->len;
            ra->have_meta = 1;
        } else if (ra->meta_len != rec->len ||
                   (rec->len && memcmp(ra->meta, rec->data, rec->len))) {
            rc = err_set(ERR_CORRUPT, "metadata record differs from the first one");
        }
        break;
    case WAL_REC_CRC:
        break;
    case WAL_REC_SNAPSHOT: {
        uint64_t si, st;
        if ((rc = wal_decode_snapshot(rec->data, rec->len, &si, &st))) break;
        if (si == ra->out->snap_index) {
            if (st != ra->out->snap_term) {
                rc = err_set(ERR_CORRUPT,
                             "snapshot record for index %llu has term %llu, the snap "
                             "file says %llu",
                             (unsigned long long)si, (unsigned long long)st,
                             (unsigned long long)ra->out->snap_term);
                break;
            }
            ra->match = 1;
        }
        break;
    }
    default:
        rc = err_set(ERR_CORRUPT, "unexpected record type %lld", (long long)rec->type);
    }
    return rc;
}

int wal_read_dir(const char *member_dir, uint64_t count_after, WalInfo *out) {
    char wal_dir[4096], path[4096];
    WalName *names = NULL;
    size_t n = 0;
    WalSegment *seg = NULL;
    int rc;
    Log lg = {0};
    ReadAll ra = {.out = out, .lg = &lg};
    memset(out, 0, sizeof *out);
    if ((rc = join_path(wal_dir, sizeof wal_dir, member_dir, "wal"))) goto done;
    if ((rc = list_wal(wal_dir, &names, &n))) goto done;
    out->segments_total = (uint32_t)n;
    if (n == 0) {
        rc = err_set(ERR_NOT_FOUND, "%s: no WAL files", wal_dir);
        goto done;
    }
    if ((rc = choose_snapshot(member_dir, names, n, out))) goto done;

    /* wal.Open: the last segment whose first index is <= the snapshot's, then a gapless run of
     * sequence numbers (selectWALFiles, searchIndex, isValidSeq) */
    size_t first = n;
    for (size_t i = n; i-- > 0;) {
        if (out->snap_index >= names[i].index) {
            first = i;
            break;
        }
    }
    if (first == n) {
        rc = err_set(ERR_CORRUPT, "%s: no WAL file holds snapshot index %llu (first file %s)",
                     wal_dir, (unsigned long long)out->snap_index, names[0].name);
        goto done;
    }
    for (size_t i = first + 1; i < n; i++) {
        if (names[i].seq != names[i - 1].seq + 1) {
            rc = err_set(ERR_CORRUPT, "%s: WAL sequence jumps from %s to %s", wal_dir,
                         names[i - 1].name, names[i].name);
            goto done;
        }
    }

    /* wal.ReadAll */
    lg.start = out->snap_index;
    lg.after = count_after;
    uint32_t crc = 0;
    for (size_t i = first; i < n; i++) {
        int last = i + 1 == n;
        if ((rc = join_path(path, sizeof path, wal_dir, names[i].name))) goto done;
        if ((rc = wal_segment_open(path, last, &seg))) {
            if (rc == ERR_INVALID || rc == ERR_NOT_FOUND) rc = ERR_CORRUPT;
            goto done;
        }
        out->segments++;
        for (;;) {
            WalRecord rec;
            int r = wal_segment_next(seg, &crc, &rec);
            if (r < 0) {
                rc = r;
                goto done;
            }
            if (r == WAL_NEXT_END) break;
            if (r == WAL_NEXT_TORN) {
                if (!last) {
                    rc = err_wrap(ERR_CORRUPT, "record cut short in a WAL file that is not the "
                                               "last (etcd repairs only the last)");
                    goto done;
                }
                out->torn_tail = 1;
                out->torn_offset = rec.offset;
                snprintf(out->torn_file, sizeof out->torn_file, "%s", names[i].name);
                break;
            }
            out->records++;
            if ((rc = read_record(&ra, &rec, path))) {
                if (!strstr(err_msg(), path))
                    err_wrap(rc, "%s: offset %llu", path, (unsigned long long)rec.offset);
                goto done;
            }
        }
        wal_segment_close(seg);
        seg = NULL;
    }
    if (!ra.match) {
        rc = err_set(ERR_CORRUPT, "%s: no snapshot record for index %llu term %llu from %s on",
                     wal_dir, (unsigned long long)out->snap_index,
                     (unsigned long long)out->snap_term, names[first].name);
        goto done;
    }
    out->entries = lg.len;
    out->normal_entries = lg.n_normal;
    out->normal_after = lg.n_after;
    out->writes_after = lg.n_writes;
    out->undecodable_after = lg.n_undecodable;
    out->last_index = lg.start + lg.len;
    out->last_term = lg.len ? lg.last_term : out->snap_term;
done:
    wal_segment_close(seg);
    free(names);
    free(ra.meta);
    free(lg.nibbles);
    return rc;
}
