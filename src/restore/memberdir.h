/* memberdir: the member dir of a restored etcd member, written by us instead of
 * `etcdutl snapshot restore` (etcd 3.5+) or `etcdctl snapshot restore` (3.4); the decision and
 * the sources per release are in docs/member-dir.md. What etcd's tool writes, and so we do:
 * - in the db (built once by the restorer, these items in their sorted place): the "members"
 *   bucket holding exactly the new cluster's members (key: the ID in hex as types.ID prints it;
 *   value: membership.Member as JSON), "members_removed" emptied, "cluster" kept (created empty
 *   when absent), and in "meta" consistent_index = the number of members and term = 1
 *   (etcdutl/snapshot/v3_snapshot.go saveDB, saveWALAndSnap, updateCIndex;
 *   server/etcdserver/api/membership/store.go; server/etcdserver/cindex/cindex.go; etcd v3.5.35,
 *   v3.6.16, v3.7.3);
 * - member/snap/db: that db (copied with copy_file_range for every member after the first);
 * - member/wal/0000000000000000-0000000000000000.wal: wal.Create's records (a CRC record, the
 *   etcdserverpb.Metadata{NodeID, ClusterID}, an empty snapshot), one ConfChangeAddNode entry per
 *   member in ID order (term 1, index 1..n, context the member's JSON), HardState{term 1, vote
 *   the lowest ID, commit n}, and the snapshot {index n, term 1, voters};
 * - member/snap/0000000000000001-<n>.snap: a raftpb.Snapshot at index n, term 1, of the v2 store
 *   (server/etcdserver/api/v2store store.go Save) holding /0/members/<id>/raftAttributes.
 * One format serves etcd 3.4, 3.5, 3.6 and 3.7 (docs/member-dir.md). Files are written once and
 * fsynced with their directories. */
#ifndef ETCDBR_MEMBERDIR_H
#define ETCDBR_MEMBERDIR_H

#include "cluster.h"

#include <stddef.h>
#include <stdint.h>

/* Bounds on what a member dir is written for (ERR_INVALID beyond): members of the cluster, bytes
 * of a member name, bytes of one peer URL. */
#define MEMBERDIR_MAX_MEMBERS 128
#define MEMBERDIR_MAX_NAME 1024
#define MEMBERDIR_MAX_URL 1024

/* meta bucket keys (server/storage/schema/bucket.go: MetaConsistentIndexKeyName, MetaTermKeyName)
 */
#define MEMBERDIR_META_CINDEX "consistent_index"
#define MEMBERDIR_META_TERM "term"

/* One item of a db bucket (key and value borrowed from the MemberDbItems that holds them). */
typedef struct MemberDbItem {
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
} MemberDbItem;

/* What the db of a restored cluster holds for its membership. */
typedef struct MemberDbItems {
    MemberDbItem *members; /* the "members" bucket, sorted by key bytes; owned */
    size_t n_members;
    uint8_t cindex[8], term[8]; /* big-endian consistent_index (= n_members) and term (= 1) */
    char *text;                 /* owned storage of the keys and values */
} MemberDbItems;

/* Checks what etcd's tool checks before it writes anything (config.ServerConfig.VerifyBootstrap,
 * types.NewURLs, NewClusterFromURLsMap), for the member `name` advertising peer_urls
 * (comma-joined): the name is in ic; its peer URLs there and peer_urls are the same set; every
 * URL of ic is http(s)://host:port without path, query or user (or unix(s)://...), written as
 * etcd prints it (lowercase scheme, no spaces); IDs are distinct and nonzero; names are valid
 * UTF-8 without control characters; the bounds above. peer_urls NULL: not compared.
 * 0 or ERR_INVALID naming the flag and the value. */
int memberdir_check(const InitialCluster *ic, const char *name, const char *peer_urls);

/* The db items of ic's membership. *out owned (memberdir_db_items_free). 0, ERR_INVALID (as
 * memberdir_check without a member), ERR_NOMEM. */
int memberdir_db_items(const InitialCluster *ic, MemberDbItems *out);
void memberdir_db_items_free(MemberDbItems *items); /* NULL-safe */

/* "<data_dir>/member/snap/db": where the db of a member dir goes. Owned; NULL when out of
 * memory. */
char *memberdir_db_path(const char *data_dir);

/* Creates data_dir (it must not exist: ERR_EXISTS) and data_dir/member/{snap,wal} (0700).
 * 0, ERR_EXISTS, ERR_IO, ERR_NOMEM. */
int memberdir_make_dirs(const char *data_dir);

/* Copies the db at src (a complete, fsynced db) to data_dir's member/snap/db (O_EXCL, 0600) with
 * copy_file_range (read/write where the kernel refuses), fsynced. 0, ERR_EXISTS, ERR_IO. */
int memberdir_copy_db(const char *src, const char *data_dir);

/* Writes the WAL and the snap file of member `name` of ic into data_dir (made by
 * memberdir_make_dirs; the db is put there by the caller) and fsyncs every directory of the
 * member dir and data_dir's parent. 0, ERR_INVALID (memberdir_check), ERR_EXISTS, ERR_IO,
 * ERR_NOMEM. */
int memberdir_write_raft(const char *data_dir, const InitialCluster *ic, const char *name);

/* Tests: the marshaled raftpb.Snapshot data of the snap file (the v2 store JSON) for ic into out
 * (appended). 0, ERR_INVALID, ERR_NOMEM. */
struct StrBuf;
int memberdir_v2_store_json(const InitialCluster *ic, struct StrBuf *out);

#endif
