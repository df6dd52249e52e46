/* wal_writer: writes the raft side of a new etcd member dir, the counterpart of the reader in
 * wal.h: protobuf encoders of the raft messages a restore writes, WAL records framed and
 * CRC-chained in memory, one WAL segment file and one snap file. Formats as etcd v3.5.35 and
 * v3.6.16 write them (etcd v3.4 and v3.7.3 decode the same bytes; docs/member-dir.md):
 * - record framing: server/storage/wal/encoder.go (a little-endian uint64 length word, the top
 *   byte 0x80|padding when the data is padded to 8 bytes), walpb.Record{type=1, crc=2, data=3}
 *   from server/storage/wal/walpb/record.proto, the CRC-32C chain of wal.go;
 * - raftpb.Entry, HardState, ConfChange, ConfState, Snapshot from go.etcd.io/raft raftpb/raft.proto
 *   (gogoproto: non-nullable fields always written, fields in number order, repeated uint64
 *   unpacked);
 * - etcdserverpb.Metadata{NodeID=1, ClusterID=2} from api/etcdserverpb/etcdserver.proto;
 * - the snap file: server/etcdserver/api/snap/snapshotter.go (SaveSnap), snappb.Snapshot{crc=1,
 *   data=2} with crc = CRC-32C of data, named "%016x-%016x.snap" (term, index).
 * Buffers are StrBufs (binary-safe; an allocation failure is sticky, checked by the writers). */
#ifndef ETCDBR_WAL_WRITER_H
#define ETCDBR_WAL_WRITER_H

#include "wal.h"
#include "../common/strbuf.h"

#include <stddef.h>
#include <stdint.h>

/* etcd's wal.SegmentSizeBytes: a new segment is preallocated to this size (bytes). */
#define WAL_SEGMENT_BYTES ((uint64_t)64 * 1000 * 1000)

/* raftpb.EntryType / ConfChangeType values used here */
enum { WAL_ENTRY_NORMAL = 0, WAL_ENTRY_CONF_CHANGE = 1 };

/* ---- protobuf encoders: each appends one message to out ---- */

/* etcdserverpb.Metadata: the WAL's metadata record (the member's and its cluster's IDs). */
void wal_pb_metadata(StrBuf *out, uint64_t node_id, uint64_t cluster_id);
/* raftpb.Entry{Type, Term, Index, Data}; data may be NULL (no data field). */
void wal_pb_entry(StrBuf *out, int32_t type, uint64_t term, uint64_t index, const uint8_t *data,
                  size_t data_len);
/* raftpb.HardState{Term, Vote, Commit}. */
void wal_pb_hardstate(StrBuf *out, const WalHardState *hs);
/* raftpb.ConfChange{ID 0, Type ConfChangeAddNode, NodeID, Context}. */
void wal_pb_conf_change_add(StrBuf *out, uint64_t node_id, const uint8_t *ctx, size_t ctx_len);
/* walpb.Snapshot{Index, Term[, ConfState{Voters, AutoLeave false}]}: the conf state only when
 * voters is not NULL (wal.Create's empty first snapshot record has none). */
void wal_pb_wal_snapshot(StrBuf *out, uint64_t index, uint64_t term, const uint64_t *voters,
                         size_t n_voters);
/* raftpb.Snapshot{Data, Metadata{ConfState{Voters, AutoLeave false}, Index, Term}}. */
void wal_pb_raft_snapshot(StrBuf *out, const uint8_t *data, size_t data_len, uint64_t index,
                          uint64_t term, const uint64_t *voters, size_t n_voters);

/* ---- WAL records ---- */

typedef struct WalEncoder {
    StrBuf buf;   /* the framed records (owned: wal_encoder_free) */
    uint32_t crc; /* the CRC chain after the last record; 0 for a new WAL */
} WalEncoder;

/* Appends a record of type (WAL_REC_*) with data (len bytes; data NULL: no data field): the
 * record's crc is the chain continued over data. A WAL_REC_CRC record carries the current chain
 * and no data (pass NULL, 0). 0, ERR_INVALID (len over WAL_MAX_RECORD), ERR_NOMEM. */
int wal_encoder_record(WalEncoder *e, int64_t type, const uint8_t *data, size_t len);

void wal_encoder_free(WalEncoder *e); /* NULL-safe; leaves *e empty */

/* "%016x-%016x.wal" of (seq, index) and "%016x-%016x.snap" of (term, index) into out (at least
 * 40 bytes); returns out. */
char *wal_segment_name(uint64_t seq, uint64_t index, char out[40]);
char *wal_snap_name(uint64_t term, uint64_t index, char out[40]);

/* Writes e's records as a new segment file at path (O_EXCL, mode 0600), extended to
 * WAL_SEGMENT_BYTES as etcd's wal.Create preallocates it (fallocate, else ftruncate: zeros after
 * the records end the segment for every reader), then fsyncs it. The caller fsyncs the
 * directory. 0, ERR_EXISTS, ERR_INVALID (records longer than a segment), ERR_IO. */
int wal_write_segment(const char *path, const WalEncoder *e);

/* Writes a snap file at path (O_EXCL, mode 0666 less the umask, as etcd's SaveSnap):
 * snappb.Snapshot{crc32c(raft_snapshot), raft_snapshot}, fsynced. raft_snapshot is a marshaled
 * raftpb.Snapshot of at most WAL_MAX_RECORD bytes, not empty. 0, ERR_EXISTS, ERR_INVALID,
 * ERR_NOMEM, ERR_IO. */
int wal_snap_write(const char *path, const uint8_t *raft_snapshot, size_t len);

#endif
