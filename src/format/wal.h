/* wal: read-only, streaming reader of etcd's raft log: WAL segments (member/wal/<seq>-<index>.wal)
 * and raft snapshot files (member/snap/<term>-<index>.snap), written from etcd's server/v3/wal
 * (decoder.go, wal.go, repair.go), etcdserver/api/snap and raftpb. Records are decoded one at a
 * time (memory: one record, at most WAL_MAX_RECORD bytes, plus 4 bits per log entry); every length
 * read from a file is checked against the file size first. Protobuf fields are decoded by hand. */
#ifndef ETCDBR_WAL_H
#define ETCDBR_WAL_H

#include <stddef.h>
#include <stdint.h>

/* Largest record (or snap-file metadata) accepted; etcd itself has no cap besides the file. */
#define WAL_MAX_RECORD ((uint64_t)64 << 20)

/* walpb.Record types (wal.go: metadataType = iota + 1, ...). */
enum {
    WAL_REC_METADATA = 1,
    WAL_REC_ENTRY = 2,
    WAL_REC_STATE = 3,
    WAL_REC_CRC = 4,
    WAL_REC_SNAPSHOT = 5,
};

/* CRC-32C (Castagnoli) continuing from crc, as Go's crc32.Update(crc, castagnoli, p): the WAL
 * chains it across records and segments, snap files use it from 0. */
uint32_t wal_crc32c(uint32_t crc, const void *data, size_t len);
/* The same with the portable table code that wal_crc32c uses on CPUs without SSE4.2 (for tests). */
uint32_t wal_crc32c_portable(uint32_t crc, const void *data, size_t len);

/* ---- one segment ---- */

typedef struct WalSegment WalSegment;

typedef struct WalRecord {
    int64_t type;
    uint32_t crc;        /* the record's stored CRC: the chain value after its data */
    const uint8_t *data; /* borrowed: valid until the next wal_segment_next/close */
    size_t len;
    uint64_t offset; /* file offset of the record's length word */
} WalRecord;

enum {
    WAL_NEXT_END = 0,    /* end of the segment: end of file or a zero length word */
    WAL_NEXT_RECORD = 1, /* *rec holds a record whose CRC checked */
    WAL_NEXT_TORN = 2,   /* etcd's io.ErrUnexpectedEOF: the record runs past the end of the
                            file, or (last segment only) it fails to decode or to match its CRC
                            and one of its 512-byte sectors is all zeros (a torn write). etcd's
                            wal.Repair truncates the last segment there. err_msg() says where. */
};

/* Opens a segment for sequential reading. is_last: nonzero for the last segment read (only there
 * does a zero sector make a bad record a torn write, as in etcd's decoder.isTornEntry).
 * *out owned (wal_segment_close). ERR_NOT_FOUND, ERR_IO, ERR_INVALID (not a regular file),
 * ERR_NOMEM. */
int wal_segment_open(const char *path, int is_last, WalSegment **out);

/* Decodes the next record. *crc is the running CRC chain (0 for the first segment read): data
 * records must carry crc32c(*crc, data), which becomes the new *crc; a CRC-type record must equal
 * a nonzero *crc and then replaces it (etcd's ReadAll). Returns WAL_NEXT_*, or ERR_CORRUPT
 * (bad framing, protobuf, CRC; record over WAL_MAX_RECORD) or ERR_IO with file and offset in
 * err_msg(). After anything but WAL_NEXT_RECORD the segment must not be read further. */
int wal_segment_next(WalSegment *s, uint32_t *crc, WalRecord *rec);

/* File offset just past the last good record (where etcd's Repair would truncate). */
uint64_t wal_segment_valid_offset(const WalSegment *s);

void wal_segment_close(WalSegment *s); /* NULL-safe */

/* ---- record payloads (in-memory; ERR_CORRUPT with the reason, no file context) ---- */

typedef struct WalEntry {
    int32_t type; /* raftpb.EntryType: 0 normal, 1 conf change, 2 conf change v2 */
    uint64_t term, index;
    const uint8_t *data; /* borrowed from the record */
    size_t data_len;
} WalEntry;

typedef struct WalHardState {
    uint64_t term, vote, commit;
} WalHardState;

int wal_decode_entry(const uint8_t *p, size_t n, WalEntry *out);         /* raftpb.Entry */
int wal_decode_hardstate(const uint8_t *p, size_t n, WalHardState *out); /* raftpb.HardState */
/* walpb.Snapshot {index, term, conf_state} */
int wal_decode_snapshot(const uint8_t *p, size_t n, uint64_t *index, uint64_t *term);

/* ---- entry payloads: what applying one can do to the mvcc revision ---- */

/* etcd's applyEntryNormal: the data of an EntryNormal is an etcdserverpb.InternalRaftRequest
 * (raft_internal.proto), or, when it does not decode as one, a v2 etcdserverpb.Request (etcd 3.4
 * proposes v2 requests, its member publish and cluster version among them, unwrapped). Applying
 * one runs at most one mvcc write transaction, so it raises the revision by at most one. */
typedef enum {
    WAL_REQ_EMPTY = 0,       /* no data: the empty entry a new leader appends */
    WAL_REQ_NO_WRITE = 1,    /* an InternalRaftRequest that changes no key: lease grant and
                                checkpoint, compaction, range, a txn without put or delete, auth,
                                alarm, cluster version, member attributes, downgrade */
    WAL_REQ_V2 = 2,          /* a v2 store request (unwrapped, or InternalRaftRequest.v2) */
    WAL_REQ_WRITE = 3,       /* put, delete range, a txn with a put or delete in any branch at any
                                depth (or one that does not decode), lease revoke */
    WAL_REQ_UNDECODABLE = 4, /* neither message decodes: counted as a write */
} WalRequestKind;

/* Classifies an EntryNormal's data (borrowed; not kept). Decodes like gogoproto's generated code
 * at the top level (known fields with the wrong wire type fail, unknown fields and groups are
 * skipped); of the nested messages only a txn's ops are read, iteratively up to 32 nested txns
 * deep (deeper: WRITE). Doubt resolves toward WRITE. No allocation; thread-safe. */
WalRequestKind wal_classify_request(const uint8_t *data, size_t n);

/* Nonzero for the kinds that can advance the mvcc revision: WAL_REQ_WRITE, WAL_REQ_UNDECODABLE. */
int wal_request_may_write(WalRequestKind kind);

/* "empty", "no-write", "v2", "write", "undecodable"; static. */
const char *wal_request_kind_name(WalRequestKind kind);

/* ---- snap files ---- */

typedef struct WalSnapMeta {
    uint64_t index, term; /* raftpb.SnapshotMetadata */
    uint64_t data_bytes;  /* size of the serialized raftpb.Snapshot */
} WalSnapMeta;

/* Reads and checks one .snap file like etcd's snap.Read: snappb.Snapshot{crc, data}, data not
 * empty, crc nonzero and equal to crc32c(0, data), data a valid raftpb.Snapshot. The data is
 * streamed (CRC) and skipped, never loaded; only the metadata (capped at WAL_MAX_RECORD) is read.
 * 0, ERR_CORRUPT, ERR_NOT_FOUND, ERR_IO. */
int wal_snap_read(const char *path, WalSnapMeta *out);

/* ---- a member directory ---- */

typedef struct WalInfo {
    /* raft snapshot the log is read from: the newest .snap file that reads and that the WAL
     * records as a committed snapshot (etcd 3.5's LoadNewestAvailable); 0/0 without one */
    int have_snap;
    uint64_t snap_index, snap_term;
    char snap_file[64];          /* its name in member/snap, "" without */
    uint32_t snap_files;         /* *.snap files present */
    uint32_t snap_files_skipped; /* unreadable, or not recorded in the WAL */
    /* the log after the snapshot, as etcd's ReadAll returns it (later entries overwrite) */
    uint64_t last_index, last_term; /* last entry; snap_index/term when there is none */
    uint64_t entries;               /* entries after the snapshot */
    uint64_t normal_entries;        /* EntryNormal among them */
    uint64_t normal_after;          /* EntryNormal with data and index > count_after */
    uint64_t writes_after;          /* those of them that may raise the mvcc revision
                                       (wal_request_may_write) */
    uint64_t undecodable_after;     /* those of them that do not decode (in writes_after) */
    WalHardState hard_state;        /* last HardState record */
    uint32_t segments;              /* WAL files read from the snapshot's segment on */
    uint32_t segments_total;        /* WAL files in member/wal */
    uint64_t records;               /* records read in those segments */
    int torn_tail;                  /* the last segment ends in a torn record */
    uint64_t torn_offset;           /* its offset there (etcd's repair truncates to it) */
    char torn_file[64];
} WalInfo;

/* Reads member_dir/wal and member_dir/snap the way etcd does on start (snap selection, then the
 * WAL from the snapshot's segment: CRC chain, segment sequence, metadata, snapshot match, entry
 * index continuity, payload decoding). count_after: the db's consistent index; entries with a
 * higher index are counted in normal_after and classified (wal_classify_request) for
 * writes_after. A torn last record of the last segment is what etcd repairs, so it is reported
 * (torn_tail), not an error; a torn or bad record anywhere else is.
 * Returns 0, ERR_NOT_FOUND (no WAL file), ERR_CORRUPT, ERR_IO or ERR_NOMEM; err_msg() names the
 * file and offset. */
int wal_read_dir(const char *member_dir, uint64_t count_after, WalInfo *out);

#endif
