/* etcd_client: etcd v3 API over native gRPC (libcurl HTTP/2 + protobuf-c; docs/design.md).
 * h2c prior knowledge for http:// endpoints, ALPN h2 for https://. grpc-status is read from
 * headers and trailers; every error message names the endpoint and the method, e.g.
 * "etcd http://127.0.0.1:2379 /etcdserverpb.KV/Range: grpc-status 3: etcdserver: key is not
 * provided". An EtcdClient is used by one thread at a time (one curl handle); create one per
 * thread. Endpoint failover: a call that cannot reach an endpoint tries the next one in the list.
 */
#ifndef ETCDBR_ETCD_CLIENT_H
#define ETCDBR_ETCD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct EtcdClient EtcdClient;

typedef struct EtcdConfig {
    const char *const
        *endpoints; /* borrowed; "http://host:port" or "https://..." (scheme-less = http) */
    size_t n_endpoints;
    const char *cacert, *cert,
        *key; /* PEM file paths or NULL; any set enables TLS for bare host:port */
    int insecure_skip_tls_verify;    /* nonzero: do not verify the server certificate */
    const char *username, *password; /* both non-empty: Authenticate and send the token */
    int64_t connection_timeout_ms;   /* short calls (Status, Range, Put, Txn...); default 30000 */
    int64_t snapshot_timeout_ms;     /* whole Snapshot stream; default 15 min */
    int64_t defrag_timeout_ms;       /* Defragment; default 8 min */
} EtcdConfig;

/* Copies what it needs from cfg. 0 or ERR_INVALID / ERR_NOMEM. No network I/O happens here. */
int etcd_client_new(const EtcdConfig *cfg, EtcdClient **out);
void etcd_client_free(EtcdClient *c);

/* The endpoint the last call used (borrowed). */
const char *etcd_client_endpoint(const EtcdClient *c);

typedef struct EtcdStatus {
    char version[32];
    int64_t db_size, db_size_in_use; /* bytes */
    uint64_t leader, member_id, cluster_id;
    int64_t revision, raft_term;
    uint64_t raft_index;
    int is_learner; /* the answering member is a learner (etcd >= 3.4) */
} EtcdStatus;

/* Maintenance/Status of the current endpoint. */
int etcd_status(EtcdClient *c, EtcdStatus *out);

/* The store's current revision (header of a count-only Range). */
int etcd_get_revision(EtcdClient *c, int64_t *rev_out);

typedef struct EtcdKeyValue {
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value;
    size_t value_len;
    int64_t create_revision, mod_revision, version, lease;
} EtcdKeyValue;

/* Range [key, range_end) (range_end NULL/0-length = the single key; "\0" = all keys >= key).
 * rev 0 = latest. cb is called for each kv (pointers valid only during the call); nonzero from
 * cb stops and is returned. *header_rev (may be NULL) gets the response header revision.
 * Large results are paged internally (limit + next key) so memory stays bounded. */
int etcd_range(EtcdClient *c, const void *key, size_t key_len, const void *range_end,
               size_t range_end_len, int64_t rev, int (*cb)(void *ctx, const EtcdKeyValue *kv),
               void *ctx, int64_t *header_rev);

/* Put; *rev_out (may be NULL) gets the revision of the write. */
int etcd_put(EtcdClient *c, const void *key, size_t key_len, const void *value, size_t value_len,
             int64_t lease, int64_t *rev_out);

/* DeleteRange like etcd_range's range; *deleted and *rev_out may be NULL. */
int etcd_delete_range(EtcdClient *c, const void *key, size_t key_len, const void *range_end,
                      size_t range_end_len, int64_t *deleted, int64_t *rev_out);

typedef enum { ETCD_OP_PUT = 0, ETCD_OP_DELETE = 1 } EtcdOpType;

typedef struct EtcdTxnOp {
    EtcdOpType type;
    const uint8_t *key;
    size_t key_len;
    const uint8_t *value; /* PUT only */
    size_t value_len;
    int64_t lease;            /* PUT only; 0 = none */
    const uint8_t *range_end; /* DELETE only; NULL = single key */
    size_t range_end_len;
} EtcdTxnOp;

typedef enum { ETCD_CMP_NONE = 0, ETCD_CMP_MOD_EQUAL, ETCD_CMP_VERSION_EQUAL } EtcdCmpKind;

/* Optional guard: "mod_revision(key) == value" or "version(key) == value". */
typedef struct EtcdCompare {
    EtcdCmpKind kind;
    const uint8_t *key;
    size_t key_len;
    int64_t value;
} EtcdCompare;

typedef struct EtcdTxnResult {
    int succeeded;    /* 1 if the compare held (or there was none) and ops were applied */
    int64_t revision; /* response header revision */
} EtcdTxnResult;

/* One Txn with at most one compare (cmp may be NULL) and the ops as the success branch (empty
 * failure branch). */
int etcd_txn(EtcdClient *c, const EtcdCompare *cmp, const EtcdTxnOp *ops, size_t n_ops,
             EtcdTxnResult *res);

/* One transaction for etcd_txn_many. */
typedef struct EtcdTxnReq {
    EtcdCompare cmp; /* kind ETCD_CMP_NONE = no compare */
    const EtcdTxnOp *ops;
    size_t n_ops;
} EtcdTxnReq;

/* Sends n Txns concurrently as multiplexed HTTP/2 streams on one connection, sent in order,
 * and waits for all. results[i] matches reqs[i]. Any transport or gRPC error fails the call
 * (some txns may have been applied: callers guard them with compares). */
int etcd_txn_many(EtcdClient *c, const EtcdTxnReq *reqs, size_t n, EtcdTxnResult *results);

/* Lease/LeaseGrant: a lease of ttl seconds with an ID etcd chooses (*id_out, may be NULL). Not
 * retried on another endpoint once sent. ERR_ETCD on a gRPC error or an error in the reply. */
int etcd_lease_grant(EtcdClient *c, int64_t ttl, int64_t *id_out);

/* Lease/LeaseTimeToLive of lease id (without its keys): *granted_ttl gets the TTL in seconds it
 * was granted with, *remaining_ttl the seconds left; either may be NULL.
 * ERR_NOT_FOUND when etcd does not know the lease (expired, revoked or never granted: etcd
 * reports TTL -1), ERR_ETCD on other failures. */
int etcd_lease_time_to_live(EtcdClient *c, int64_t id, int64_t *granted_ttl,
                            int64_t *remaining_ttl);

/* Compact at rev; physical = wait until compaction is applied to the backend. */
int etcd_compact(EtcdClient *c, int64_t rev, int physical);

/* Defragment the current endpoint (defrag timeout). */
int etcd_defragment(EtcdClient *c);

/* HashKV at rev (0 = latest). */
int etcd_hash_kv(EtcdClient *c, int64_t rev, uint32_t *hash, int64_t *compact_revision,
                 int64_t *header_rev);

typedef struct EtcdMember {
    uint64_t id;
    char name[128];
    char peer_urls[512];   /* comma-joined */
    char client_urls[512]; /* comma-joined */
    int is_learner;
} EtcdMember;

/* Cluster/MemberList. *members_out is malloc'ed (owned by caller, free()). */
int etcd_member_list(EtcdClient *c, EtcdMember **members_out, size_t *n_out);

/* Cluster/MemberAdd of a member with peer_urls (n_urls of them), as a learner when is_learner
 * (etcd >= 3.4; a learner receives the log but does not vote until promoted). *added (may be
 * NULL) gets the new member (its name is empty until it starts); *members_out (may be NULL) the
 * member list after the add, malloc'ed (caller free()s). Not retried on another endpoint once
 * sent. ERR_ETCD with etcd's message, e.g. "etcdserver: too many learner members in cluster",
 * "etcdserver: Peer URLs already exists", "etcdserver: unhealthy cluster". */
int etcd_member_add(EtcdClient *c, const char *const *peer_urls, size_t n_urls, int is_learner,
                    EtcdMember *added, EtcdMember **members_out, size_t *n_out);

/* Cluster/MemberRemove of member id. ERR_ETCD with etcd's message ("etcdserver: member not
 * found", "etcdserver: re-configuration failed due to not enough started members"...). Not
 * retried on another endpoint once sent. */
int etcd_member_remove(EtcdClient *c, uint64_t id);

/* Cluster/MemberPromote of learner id to a voting member. Must reach a voting member (a learner
 * serves only Status and serializable Range). ERR_ETCD with etcd's message: "etcdserver: can
 * only promote a learner member which is in sync with leader" (not caught up yet: retry later),
 * "etcdserver: can only promote a learner member" (already a voter), "etcdserver: member not
 * found". */
int etcd_member_promote(EtcdClient *c, uint64_t id);

/* Cluster/MemberUpdate: sets the peer URLs (n_urls of them) of member id, replacing the ones it
 * has (etcd applies it as a raft configuration change; the other members then reach it there;
 * the member's own listeners do not change). *members_out (may be NULL) gets the member list
 * after the update, malloc'ed (caller free()s). Idempotent, so tried on the next endpoint when
 * one does not answer or is a learner. ERR_ETCD with etcd's message: "etcdserver: member not
 * found", "etcdserver: Peer URLs already exists" (another member has one of them),
 * "etcdserver: unhealthy cluster", "etcdserver: request timed out". */
int etcd_member_update(EtcdClient *c, uint64_t id, const char *const *peer_urls, size_t n_urls,
                       EtcdMember **members_out, size_t *n_out);

/* Maintenance/Snapshot stream: sink is called with each blob chunk in order (db bytes, then the
 * 32-byte sha256 message etcd appends). Nonzero from sink aborts and is returned. The whole
 * stream must finish within snapshot_timeout_ms. Memory: one gRPC message (32 KiB) at a time. */
int etcd_snapshot(EtcdClient *c, int (*sink)(void *ctx, const void *buf, size_t len), void *ctx);

/* ---- Watch (bidi stream) ---- */
typedef struct EtcdWatch EtcdWatch;

typedef struct EtcdEvent {
    EtcdOpType type; /* PUT or DELETE */
    EtcdKeyValue kv;
} EtcdEvent;

typedef struct EtcdWatchResponse {
    int64_t header_revision;
    int created, canceled;
    int64_t compact_revision; /* > 0: start revision was compacted; the watch is canceled */
    char cancel_reason[256];
    const EtcdEvent *events; /* borrowed until the next etcd_watch_next / close */
    size_t n_events;
} EtcdWatchResponse;

/* Opens a watch on [key, range_end) from start_rev (0 = now). progress_notify asks etcd for
 * periodic progress responses (no events, header revision only). Waits for the `created`
 * response (connection timeout). The watch has its own HTTP/2 connection. */
int etcd_watch_open(EtcdClient *c, const void *key, size_t key_len, const void *range_end,
                    size_t range_end_len, int64_t start_rev, int progress_notify, EtcdWatch **out);

/* Waits up to timeout_ms for the next response. Returns 0 with *got = 1 and *resp filled, or
 * 0 with *got = 0 on timeout, or ERR_ETCD when the stream ended or failed. Fragmented responses
 * are reassembled. */
int etcd_watch_next(EtcdWatch *w, int timeout_ms, EtcdWatchResponse *resp, int *got);

/* Ends the stream (RST_STREAM) and frees it. NULL-safe. */
void etcd_watch_close(EtcdWatch *w);

#endif
