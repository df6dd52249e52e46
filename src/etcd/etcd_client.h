/* etcd_client: etcd v3 API over native gRPC (libcurl HTTP/2 + protobuf-c; see DESIGN.md).
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

/* ---- Txn pipeline: a sliding window of Txns, replies in completion order ----
 * Txns go out as HTTP/2 streams on a connection of their own (http:// endpoints only): the
 * caller queues some with etcd_txn_pipeline_submit, writes them in one go with
 * etcd_txn_pipeline_flush, keeps as many in flight as it likes and collects replies with
 * etcd_txn_pipeline_wait in the order they arrive. etcd (grpc-go) runs every stream in a
 * goroutine of its own, so concurrent txns may be applied in any order; callers that need an
 * order guard each txn with a compare. In ordered mode each flush ends with one extra read-only
 * (empty) txn: the Go scheduler runs the goroutine started last before the others, so that slot
 * goes to the empty txn and the real ones reach raft in the order sent far more often (etcd
 * started with GOMAXPROCS=1 keeps that order almost always). The pipeline uses c's scratch to
 * build requests: c must outlive it and stay on the same thread. */
typedef struct EtcdTxnPipeline EtcdTxnPipeline;

typedef struct EtcdTxnDone {
    uint64_t tag;     /* as given to etcd_txn_pipeline_submit */
    int succeeded;    /* the compare held (or there was none) and the ops were applied */
    int64_t revision; /* response header revision (the txn's own revision when succeeded) */
} EtcdTxnDone;

/* Connects to the current endpoint (failing over only when it cannot connect) after
 * authenticating if needed. 0, ERR_UNSUPPORTED (https endpoint), ERR_ETCD, ERR_NOMEM. */
int etcd_txn_pipeline_open(EtcdClient *c, int ordered, EtcdTxnPipeline **out);

/* Queues one txn (tag < 2^63); it is sent at the next flush or wait (or once 256 KiB are
 * queued). 0, or ERR_INVALID / ERR_NOMEM, or the pipeline's failure. */
int etcd_txn_pipeline_submit(EtcdTxnPipeline *p, const EtcdTxnReq *req, uint64_t tag);

/* Writes the queued txns (in ordered mode followed by the empty txn). 0 or the failure. */
int etcd_txn_pipeline_flush(EtcdTxnPipeline *p);

/* Flushes, then fills done[0..*n_done) (at most cap) with finished txns, waiting up to
 * timeout_us (0 = no wait, < 0 = until one finishes) when none is ready. Returns 0 (possibly
 * *n_done = 0 on timeout or when nothing is pending), or the error of the first txn that failed
 * with a gRPC or transport error (ERR_ETCD, ERR_TIMEOUT, ERR_CORRUPT; the message names the
 * endpoint); the pipeline is then unusable (txns in flight may or may not have been applied). */
int etcd_txn_pipeline_wait(EtcdTxnPipeline *p, int64_t timeout_us, EtcdTxnDone *done, size_t cap,
                           size_t *n_done);

/* Txns submitted and not yet returned by etcd_txn_pipeline_wait. */
size_t etcd_txn_pipeline_pending(const EtcdTxnPipeline *p);

/* Closes the connection (txns still in flight are abandoned) and frees p. NULL-safe. */
void etcd_txn_pipeline_close(EtcdTxnPipeline *p);

#endif
