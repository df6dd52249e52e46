/* mvcc: etcd's storage encoding of its keyspace, as etcd's mvcc package writes it to the bbolt
 * backend (server/v3/mvcc: revision.go, kvstore_txn.go; api/v3/mvccpb/kv.proto; lease/leasepb):
 * - bucket "key": key = revision bytes {main big-endian int64, '_', sub big-endian int64}
 *   (17 bytes), with 't' appended for a tombstone (18 bytes); value = a marshaled
 *   mvccpb.KeyValue. A put stores the whole KeyValue; a delete stores KeyValue{key} only.
 * - bucket "lease": key = lease ID big-endian int64; value = leasepb.Lease{ID, TTL,
 *   RemainingTTL}.
 * - bucket "meta": "scheduledCompactRev"/"finishedCompactRev" = revision bytes (main, sub 0).
 * Protobuf is written exactly as gogoproto's Marshal does (fields in number order, zero scalars
 * and empty bytes omitted), so HashKV over our key bucket equals etcd's. Pure functions; no I/O. */
#ifndef ETCDBR_MVCC_H
#define ETCDBR_MVCC_H

#include <stddef.h>
#include <stdint.h>

#define MVCC_REV_BYTES 17  /* revBytesLen */
#define MVCC_MARK_BYTES 18 /* with the tombstone mark */
#define MVCC_LEASE_MAX 33  /* largest marshaled leasepb.Lease: 3 x (1 tag + 10 varint) */

#define MVCC_BUCKET_KEY "key"
#define MVCC_BUCKET_LEASE "lease"
#define MVCC_BUCKET_META "meta"
#define MVCC_META_SCHEDULED_COMPACT "scheduledCompactRev"
#define MVCC_META_FINISHED_COMPACT "finishedCompactRev"

typedef struct MvccKeyValue {
    const uint8_t *key; /* borrowed */
    size_t key_len;
    const uint8_t *value; /* borrowed */
    size_t value_len;
    int64_t create_revision, mod_revision, version, lease;
} MvccKeyValue;

/* Writes the revision key of (main, sub) into out, with the tombstone mark when tombstone is
 * nonzero. Returns its length: MVCC_REV_BYTES or MVCC_MARK_BYTES. */
size_t mvcc_rev_key(int64_t main_rev, int64_t sub_rev, int tombstone, uint8_t out[MVCC_MARK_BYTES]);

/* Parses a key of bucket "key". 0, or ERR_CORRUPT when len is neither 17 nor 18, the separator
 * is not '_' or the mark is not 't'. Outputs may be NULL. */
int mvcc_rev_parse(const uint8_t *key, size_t len, int64_t *main_rev, int64_t *sub_rev,
                   int *tombstone);

/* Bytes mvcc_kv_marshal writes for kv. */
size_t mvcc_kv_size(const MvccKeyValue *kv);

/* Marshals kv (mvccpb.KeyValue: key=1, create_revision=2, mod_revision=3, version=4, value=5,
 * lease=6) into out, which must hold mvcc_kv_size(kv) bytes. Returns the bytes written. */
size_t mvcc_kv_marshal(const MvccKeyValue *kv, uint8_t *out);

/* Unmarshals a stored KeyValue (key and value point into buf). Unknown fields are skipped as
 * protobuf requires. 0 or ERR_CORRUPT (truncated field, bad wire type). */
int mvcc_kv_unmarshal(const uint8_t *buf, size_t len, MvccKeyValue *out);

/* Marshals leasepb.Lease{ID=1, TTL=2, RemainingTTL=3} (seconds) into out; returns its length. */
size_t mvcc_lease_marshal(int64_t id, int64_t ttl, int64_t remaining_ttl,
                          uint8_t out[MVCC_LEASE_MAX]);

/* Unmarshals a leasepb.Lease; outputs may be NULL. 0 or ERR_CORRUPT. */
int mvcc_lease_unmarshal(const uint8_t *buf, size_t len, int64_t *id, int64_t *ttl,
                         int64_t *remaining_ttl);

/* The lease bucket's key for a lease ID: 8 bytes big-endian. */
void mvcc_lease_key(int64_t id, uint8_t out[8]);

#endif
