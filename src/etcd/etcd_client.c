/* etcd_client: etcd v3 KV, Watch, Lease, Maintenance, Cluster and Auth calls over grpc.c; see
 * etcd_client.h. The client sticks to one endpoint and moves to the next only when a call could
 * not reach it (writes: only when nothing was sent). Messages for requests are built on the
 * stack or in scratch arrays kept in the client, so the hot paths (txn, txn_many) allocate
 * nothing per call beyond protobuf-c's reply unpacking. */
#include "etcd_client.h"

#include "common/err.h"
#include "../common/mem.h"
#include "etcd.pb-c.h"
#include "grpc.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define RANGE_PAGE_LIMIT 1000
#define RANGE_PAGE_BYTES (4 << 20) /* pages of big values shrink toward this size */
#define TXN_BATCH_MAX 512

#define M_RANGE "/etcdserverpb.KV/Range"
#define M_PUT "/etcdserverpb.KV/Put"
#define M_DELETE "/etcdserverpb.KV/DeleteRange"
#define M_TXN "/etcdserverpb.KV/Txn"
#define M_COMPACT "/etcdserverpb.KV/Compact"
#define M_WATCH "/etcdserverpb.Watch/Watch"
#define M_STATUS "/etcdserverpb.Maintenance/Status"
#define M_DEFRAG "/etcdserverpb.Maintenance/Defragment"
#define M_HASHKV "/etcdserverpb.Maintenance/HashKV"
#define M_SNAPSHOT "/etcdserverpb.Maintenance/Snapshot"
#define M_MEMBERS "/etcdserverpb.Cluster/MemberList"
#define M_MEMBER_ADD "/etcdserverpb.Cluster/MemberAdd"
#define M_MEMBER_REMOVE "/etcdserverpb.Cluster/MemberRemove"
#define M_MEMBER_PROMOTE "/etcdserverpb.Cluster/MemberPromote"
#define M_MEMBER_UPDATE "/etcdserverpb.Cluster/MemberUpdate"
#define M_AUTH "/etcdserverpb.Auth/Authenticate"
#define M_LEASE_GRANT "/etcdserverpb.Lease/LeaseGrant"
#define M_LEASE_TTL "/etcdserverpb.Lease/LeaseTimeToLive"

struct EtcdClient {
    char **endpoints;
    size_t n_endpoints, cur;
    GrpcChannel *ch;
    char *username, *password;
    int have_token;
    int64_t conn_timeout_ms, snapshot_timeout_ms, defrag_timeout_ms;
    /* txn building scratch, grown to the largest n_ops seen */
    Etcdserverpb__RequestOp *rops;
    Etcdserverpb__RequestOp **rop_ptrs;
    Etcdserverpb__PutRequest *puts;
    Etcdserverpb__DeleteRangeRequest *dels;
    size_t ops_cap;
    /* txn_many request frames, reused across batches */
    GrpcFrame *frames;
    size_t n_frames;
    /* range paging: the next page's start key */
    uint8_t *next_key;
    size_t next_key_cap;
};

struct EtcdWatch {
    EtcdClient *c;
    GrpcStream *s;
    char endpoint[256];
    Etcdserverpb__WatchResponse **parts; /* the response being returned (fragments in order) */
    size_t n_parts, parts_cap;
    int parts_complete; /* parts hold a finished response handed to the caller */
    EtcdEvent *events;
    size_t events_cap;
};

/* ---- helpers ---- */

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void free_secret(char *s) {
    if (!s) return;
    explicit_bzero(s, strlen(s));
    free(s);
}

static ProtobufCBinaryData bin(const void *p, size_t n) {
    ProtobufCBinaryData b = {n, (uint8_t *)(uintptr_t)p};
    if (n == 0) b.data = NULL;
    return b;
}

static int is_compacted(const GrpcResult *r) {
    return r->status == GRPC_STATUS_OUT_OF_RANGE && strstr(r->message, "compacted") != NULL;
}

static int needs_reauth(const EtcdClient *c, const GrpcResult *r) {
    return c->username && r->status > 0 &&
           (strstr(r->message, "invalid auth token") ||
            strstr(r->message, "revision of auth store is old"));
}

/* idempotent calls may be retried on another endpoint after any transport failure; writes
 * only when nothing reached the server. */
static int can_failover(const GrpcResult *r, int idempotent) {
    if (r->connect_failed) return 1;
    if (!idempotent) return 0;
    return r->transport_error || r->status == GRPC_STATUS_UNAVAILABLE;
}

static int final_error(int rc, const GrpcResult *r, size_t tried) {
    if (rc == ERR_ETCD && is_compacted(r)) rc = ERR_COMPACTED;
    if (tried > 1) {
        char msg[1536];
        snprintf(msg, sizeof msg, "%s", err_msg());
        return err_set(rc, "%s (tried %zu endpoints)", msg, tried);
    }
    return rc;
}

static void next_endpoint(EtcdClient *c) {
    c->cur = (c->cur + 1) % c->n_endpoints;
}

static int authenticate(EtcdClient *c);

static int ensure_auth(EtcdClient *c) {
    if (!c->username || c->have_token) return 0;
    return authenticate(c);
}

/* The retries of one call: whether it re-authenticated yet, how many endpoints it tried. */
typedef struct {
    int reauthed;
    size_t tried;
} CallTries;

/* After a call failed with *rc and result r: 1 to call again (once after re-authenticating, or
 * on the next endpoint when the call may fail over), else 0 with *rc the final error. A call
 * that may not be repeated at all (a stream that delivered data) passes may_retry 0. */
static int call_again(EtcdClient *c, CallTries *t, const GrpcResult *r, int may_retry,
                      int idempotent, int *rc) {
    if (may_retry && !t->reauthed && needs_reauth(c, r)) {
        t->reauthed = 1;
        return (*rc = authenticate(c)) == 0;
    }
    if (may_retry && t->tried < c->n_endpoints && can_failover(r, idempotent)) {
        t->tried++;
        next_endpoint(c);
        return 1;
    }
    *rc = final_error(*rc, r, t->tried);
    return 0;
}

/* One unary call with failover and one re-authentication. */
static int call_unary(EtcdClient *c, const char *method, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *desc, int64_t timeout_ms, int idempotent,
                      ProtobufCMessage **resp) {
    int rc = ensure_auth(c);
    if (rc) return rc;
    CallTries t = {0, 1};
    for (;;) {
        GrpcResult r;
        rc = grpc_unary(c->ch, c->endpoints[c->cur], method, req, desc, timeout_ms, resp, &r);
        if (rc == 0 || !call_again(c, &t, &r, 1, idempotent, &rc)) return rc;
    }
}

/* call_unary for a method whose reply carries nothing the caller needs: it is freed. */
static int call_no_reply(EtcdClient *c, const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *desc, int64_t timeout_ms,
                         int idempotent) {
    ProtobufCMessage *resp = NULL;
    int rc = call_unary(c, method, req, desc, timeout_ms, idempotent, &resp);
    if (rc) return rc;
    protobuf_c_message_free_unpacked(resp, NULL);
    return 0;
}

static int authenticate(EtcdClient *c) {
    Etcdserverpb__AuthenticateRequest req = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    Etcdserverpb__AuthenticateResponse *resp = NULL;
    int rc;
    size_t tried = 1;
    c->have_token = 0;
    if ((rc = grpc_channel_set_token(c->ch, NULL))) return rc;
    req.name = c->username;
    req.password = c->password;
    for (;;) {
        GrpcResult r;
        rc = grpc_unary(c->ch, c->endpoints[c->cur], M_AUTH, &req.base,
                        &etcdserverpb__authenticate_response__descriptor, c->conn_timeout_ms,
                        (ProtobufCMessage **)&resp, &r);
        if (rc == 0) break;
        if (tried < c->n_endpoints && can_failover(&r, 1)) {
            tried++;
            next_endpoint(c);
            continue;
        }
        if (strstr(r.message, "authentication is not enabled")) {
            /* like etcd's clientv3: credentials for a cluster without auth are not an error */
            c->have_token = 1;
            return 0;
        }
        rc = final_error(rc, &r, tried);
        return err_wrap(rc, "authenticating as user \"%s\"", c->username);
    }
    if (!resp->token || !*resp->token) {
        c->have_token = 1; /* no token issued: send none */
        goto done;
    }
    if ((rc = grpc_channel_set_token(c->ch, resp->token))) goto done;
    c->have_token = 1;
done:
    if (resp) {
        if (resp->token) explicit_bzero(resp->token, strlen(resp->token));
        protobuf_c_message_free_unpacked(&resp->base, NULL);
    }
    return rc;
}

/* ---- lifecycle ---- */

static char *normalize_endpoint(const char *e, int tls) {
    const char *scheme = "";
    if (!strstr(e, "://")) {
        scheme = tls ? "https://" : "http://";
    } else if (strncasecmp(e, "http://", 7) && strncasecmp(e, "https://", 8)) {
        return NULL;
    }
    size_t n = strlen(e);
    while (n > 0 && e[n - 1] == '/')
        n--;
    size_t sz = strlen(scheme) + n + 1;
    char *s = malloc(sz);
    if (s) snprintf(s, sz, "%s%.*s", scheme, (int)n, e);
    return s;
}

int etcd_client_new(const EtcdConfig *cfg, EtcdClient **out) {
    int rc;
    *out = NULL;
    if (!cfg || !cfg->endpoints || cfg->n_endpoints == 0)
        return err_set(ERR_INVALID, "etcd client: no endpoints given");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return err_set(ERR_IO, "etcd client: curl_global_init failed");
    EtcdClient *c = calloc(1, sizeof *c);
    if (!c) {
        curl_global_cleanup();
        return err_set(ERR_NOMEM, "etcd client: out of memory");
    }
    int tls = (cfg->cacert && *cfg->cacert) || (cfg->cert && *cfg->cert) || (cfg->key && *cfg->key);
    c->conn_timeout_ms = cfg->connection_timeout_ms > 0 ? cfg->connection_timeout_ms : 30000;
    c->snapshot_timeout_ms = cfg->snapshot_timeout_ms > 0 ? cfg->snapshot_timeout_ms : 15 * 60000;
    c->defrag_timeout_ms = cfg->defrag_timeout_ms > 0 ? cfg->defrag_timeout_ms : 8 * 60000;
    c->endpoints = calloc(cfg->n_endpoints, sizeof *c->endpoints);
    if (!c->endpoints) {
        rc = err_set(ERR_NOMEM, "etcd client: out of memory");
        goto done;
    }
    for (size_t i = 0; i < cfg->n_endpoints; i++) {
        const char *e = cfg->endpoints[i];
        if (!e || !*e) {
            rc = err_set(ERR_INVALID, "etcd client: endpoint %zu is empty", i + 1);
            goto done;
        }
        if (!(c->endpoints[i] = normalize_endpoint(e, tls))) {
            rc = strstr(e, "://")
                     ? err_set(ERR_INVALID,
                               "etcd client: endpoint %s: scheme must be http or https", e)
                     : err_set(ERR_NOMEM, "etcd client: out of memory");
            goto done;
        }
        c->n_endpoints++;
    }
    if (cfg->username && *cfg->username && cfg->password && *cfg->password) {
        c->username = strdup(cfg->username);
        c->password = strdup(cfg->password);
        if (!c->username || !c->password) {
            rc = err_set(ERR_NOMEM, "etcd client: out of memory");
            goto done;
        }
    }
    GrpcChannelConfig gc = {
        .cacert = cfg->cacert,
        .cert = cfg->cert,
        .key = cfg->key,
        .insecure_skip_tls_verify = cfg->insecure_skip_tls_verify,
        .connect_timeout_ms = c->conn_timeout_ms,
    };
    if ((rc = grpc_channel_new(&gc, &c->ch))) goto done;
done:
    RETURN_BUILT(rc, out, c, etcd_client_free(c));
}

void etcd_client_free(EtcdClient *c) {
    if (!c) return;
    grpc_channel_free(c->ch);
    for (size_t i = 0; i < c->n_endpoints; i++)
        free(c->endpoints[i]);
    free(c->endpoints);
    free_secret(c->username);
    free_secret(c->password);
    FREE_ALL(c->rops, c->rop_ptrs, c->puts, c->dels);
    for (size_t i = 0; i < c->n_frames; i++)
        grpc_frame_free(&c->frames[i]);
    free(c->frames);
    free(c->next_key);
    free(c);
    curl_global_cleanup();
}

const char *etcd_client_endpoint(const EtcdClient *c) {
    return c->endpoints[c->cur];
}

/* ---- maintenance, cluster ---- */

int etcd_status(EtcdClient *c, EtcdStatus *out) {
    Etcdserverpb__StatusRequest req = ETCDSERVERPB__STATUS_REQUEST__INIT;
    Etcdserverpb__StatusResponse *resp = NULL;
    int rc = call_unary(c, M_STATUS, &req.base, &etcdserverpb__status_response__descriptor,
                        c->conn_timeout_ms, 1, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    snprintf(out->version, sizeof out->version, "%s", resp->version ? resp->version : "");
    out->db_size = resp->dbsize;
    out->db_size_in_use = resp->dbsizeinuse;
    out->leader = resp->leader;
    out->raft_index = resp->raftindex;
    out->raft_term = (int64_t)resp->raftterm;
    out->is_learner = resp->islearner;
    if (resp->header) {
        out->member_id = resp->header->member_id;
        out->cluster_id = resp->header->cluster_id;
        out->revision = resp->header->revision;
    }
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return 0;
}

int etcd_get_revision(EtcdClient *c, int64_t *rev_out) {
    static const uint8_t nul = 0;
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__RangeResponse *resp = NULL;
    req.key = bin(&nul, 1);
    req.count_only = 1;
    int rc = call_unary(c, M_RANGE, &req.base, &etcdserverpb__range_response__descriptor,
                        c->conn_timeout_ms, 1, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    *rev_out = resp->header ? resp->header->revision : 0;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return 0;
}

int etcd_compact(EtcdClient *c, int64_t rev, int physical) {
    Etcdserverpb__CompactionRequest req = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    req.revision = rev;
    req.physical = physical != 0;
    /* a physical compaction waits for the backend: as long as a defragmentation may take */
    return call_no_reply(c, M_COMPACT, &req.base, &etcdserverpb__compaction_response__descriptor,
                         physical ? c->defrag_timeout_ms : c->conn_timeout_ms, 0);
}

int etcd_defragment(EtcdClient *c) {
    Etcdserverpb__DefragmentRequest req = ETCDSERVERPB__DEFRAGMENT_REQUEST__INIT;
    return call_no_reply(c, M_DEFRAG, &req.base, &etcdserverpb__defragment_response__descriptor,
                         c->defrag_timeout_ms, 0);
}

int etcd_hash_kv(EtcdClient *c, int64_t rev, uint32_t *hash, int64_t *compact_revision,
                 int64_t *header_rev) {
    Etcdserverpb__HashKVRequest req = ETCDSERVERPB__HASH_KVREQUEST__INIT;
    Etcdserverpb__HashKVResponse *resp = NULL;
    req.revision = rev;
    /* HashKV reads the whole backend: the defragmentation timeout, not the short one */
    int rc = call_unary(c, M_HASHKV, &req.base, &etcdserverpb__hash_kvresponse__descriptor,
                        c->defrag_timeout_ms, 1, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    if (hash) *hash = resp->hash;
    if (compact_revision) *compact_revision = resp->compact_revision;
    if (header_rev) *header_rev = resp->header ? resp->header->revision : 0;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return 0;
}

static void join_urls(char *dst, size_t cap, char **urls, size_t n) {
    size_t o = 0;
    dst[0] = 0;
    for (size_t i = 0; i < n && o < cap; i++) {
        int w = snprintf(dst + o, cap - o, "%s%s", i ? "," : "", urls[i] ? urls[i] : "");
        if (w < 0) break;
        o += (size_t)w;
    }
}

static void copy_member(EtcdMember *d, const Etcdserverpb__Member *s) {
    d->id = s->id;
    snprintf(d->name, sizeof d->name, "%s", s->name ? s->name : "");
    join_urls(d->peer_urls, sizeof d->peer_urls, s->peerurls, s->n_peerurls);
    join_urls(d->client_urls, sizeof d->client_urls, s->clienturls, s->n_clienturls);
    d->is_learner = s->islearner;
}

/* The members of a reply as a malloc'ed array in *members_out (NULL: nothing copied); frees
 * reply in every case. 0 or ERR_NOMEM. */
static int take_members(EtcdClient *c, const char *method, ProtobufCMessage *reply,
                        Etcdserverpb__Member **src, size_t n, EtcdMember **members_out,
                        size_t *n_out) {
    EtcdMember *m = members_out ? calloc(n ? n : 1, sizeof *m) : NULL;
    for (size_t i = 0; m && i < n; i++)
        copy_member(&m[i], src[i]);
    protobuf_c_message_free_unpacked(reply, NULL);
    if (!members_out) return 0;
    if (!m) return err_set(ERR_NOMEM, "etcd %s %s: out of memory", etcd_client_endpoint(c), method);
    *members_out = m;
    if (n_out) *n_out = n;
    return 0;
}

int etcd_member_list(EtcdClient *c, EtcdMember **members_out, size_t *n_out) {
    Etcdserverpb__MemberListRequest req = ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
    Etcdserverpb__MemberListResponse *resp = NULL;
    *members_out = NULL;
    *n_out = 0;
    int rc = call_unary(c, M_MEMBERS, &req.base, &etcdserverpb__member_list_response__descriptor,
                        c->conn_timeout_ms, 1, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    return take_members(c, M_MEMBERS, &resp->base, resp->members, resp->n_members, members_out,
                        n_out);
}

int etcd_member_add(EtcdClient *c, const char *const *peer_urls, size_t n_urls, int is_learner,
                    EtcdMember *added, EtcdMember **members_out, size_t *n_out) {
    Etcdserverpb__MemberAddRequest req = ETCDSERVERPB__MEMBER_ADD_REQUEST__INIT;
    Etcdserverpb__MemberAddResponse *resp = NULL;
    if (members_out) *members_out = NULL;
    if (n_out) *n_out = 0;
    req.peerurls = (char **)(uintptr_t)peer_urls;
    req.n_peerurls = n_urls;
    req.islearner = is_learner != 0;
    /* not idempotent: a second add of the same peer URLs fails with "Peer URLs already exists" */
    int rc = call_unary(c, M_MEMBER_ADD, &req.base, &etcdserverpb__member_add_response__descriptor,
                        c->conn_timeout_ms, 0, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    if (added) {
        memset(added, 0, sizeof *added);
        if (resp->member) copy_member(added, resp->member);
    }
    return take_members(c, M_MEMBER_ADD, &resp->base, resp->members, resp->n_members, members_out,
                        n_out);
}

int etcd_member_remove(EtcdClient *c, uint64_t id) {
    Etcdserverpb__MemberRemoveRequest req = ETCDSERVERPB__MEMBER_REMOVE_REQUEST__INIT;
    req.id = id;
    return call_no_reply(c, M_MEMBER_REMOVE, &req.base,
                         &etcdserverpb__member_remove_response__descriptor, c->conn_timeout_ms, 0);
}

int etcd_member_update(EtcdClient *c, uint64_t id, const char *const *peer_urls, size_t n_urls,
                       EtcdMember **members_out, size_t *n_out) {
    Etcdserverpb__MemberUpdateRequest req = ETCDSERVERPB__MEMBER_UPDATE_REQUEST__INIT;
    Etcdserverpb__MemberUpdateResponse *resp = NULL;
    if (members_out) *members_out = NULL;
    if (n_out) *n_out = 0;
    req.id = id;
    req.peerurls = (char **)(uintptr_t)peer_urls;
    req.n_peerurls = n_urls;
    /* idempotent: the same update again sets the same URLs, so another endpoint may be tried
     * (a learner answers "rpc not supported for learner" with UNAVAILABLE) */
    int rc =
        call_unary(c, M_MEMBER_UPDATE, &req.base, &etcdserverpb__member_update_response__descriptor,
                   c->conn_timeout_ms, 1, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    return take_members(c, M_MEMBER_UPDATE, &resp->base, resp->members, resp->n_members,
                        members_out, n_out);
}

int etcd_member_promote(EtcdClient *c, uint64_t id) {
    Etcdserverpb__MemberPromoteRequest req = ETCDSERVERPB__MEMBER_PROMOTE_REQUEST__INIT;
    req.id = id;
    return call_no_reply(c, M_MEMBER_PROMOTE, &req.base,
                         &etcdserverpb__member_promote_response__descriptor, c->conn_timeout_ms, 0);
}

/* ---- KV ---- */

static int copy_next_key(EtcdClient *c, const ProtobufCBinaryData *last, size_t *len_out) {
    size_t need = last->len + 1;
    if (c->next_key_cap < need) {
        uint8_t *p = realloc(c->next_key, need);
        if (!p) return err_set(ERR_NOMEM, "etcd range: out of memory");
        c->next_key = p;
        c->next_key_cap = need;
    }
    if (last->len) memcpy(c->next_key, last->data, last->len);
    c->next_key[last->len] = 0;
    *len_out = need;
    return 0;
}

int etcd_range(EtcdClient *c, const void *key, size_t key_len, const void *range_end,
               size_t range_end_len, int64_t rev, int (*cb)(void *ctx, const EtcdKeyValue *kv),
               void *ctx, int64_t *header_rev) {
    Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
    Etcdserverpb__RangeResponse *resp = NULL;
    int rc = 0, first = 1;
    int paged = range_end_len > 0;
    req.key = bin(key, key_len);
    req.range_end = bin(range_end, range_end_len);
    req.revision = rev;
    if (paged) req.limit = RANGE_PAGE_LIMIT;
    if (header_rev) *header_rev = 0;
    for (;;) {
        rc = call_unary(c, M_RANGE, &req.base, &etcdserverpb__range_response__descriptor,
                        c->conn_timeout_ms, 1, (ProtobufCMessage **)&resp);
        if (rc) goto done;
        if (first) {
            int64_t hrev = resp->header ? resp->header->revision : 0;
            if (header_rev) *header_rev = hrev;
            /* later pages read the same revision as the first, for a consistent view */
            if (req.revision == 0) req.revision = hrev;
            first = 0;
        }
        size_t page_bytes = 0;
        for (size_t i = 0; i < resp->n_kvs; i++) {
            const Etcdserverpb__KeyValue *s = resp->kvs[i];
            page_bytes += s->key.len + s->value.len;
            EtcdKeyValue kv = {
                .key = s->key.data,
                .key_len = s->key.len,
                .value = s->value.data,
                .value_len = s->value.len,
                .create_revision = s->create_revision,
                .mod_revision = s->mod_revision,
                .version = s->version,
                .lease = s->lease,
            };
            if (cb && (rc = cb(ctx, &kv))) goto done;
        }
        if (!paged || !resp->more || resp->n_kvs == 0) break;
        /* the count limit alone does not bound memory when values are big */
        if (page_bytes > RANGE_PAGE_BYTES) {
            int64_t l = (int64_t)((double)req.limit * RANGE_PAGE_BYTES / (double)page_bytes);
            req.limit = l > 0 ? l : 1;
        } else if (page_bytes < RANGE_PAGE_BYTES / 4 && req.limit < RANGE_PAGE_LIMIT) {
            req.limit = req.limit * 2 < RANGE_PAGE_LIMIT ? req.limit * 2 : RANGE_PAGE_LIMIT;
        }
        size_t nlen = 0;
        if ((rc = copy_next_key(c, &resp->kvs[resp->n_kvs - 1]->key, &nlen))) goto done;
        req.key = bin(c->next_key, nlen);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
        resp = NULL;
    }
done:
    if (resp) protobuf_c_message_free_unpacked(&resp->base, NULL);
    return rc;
}

int etcd_put(EtcdClient *c, const void *key, size_t key_len, const void *value, size_t value_len,
             int64_t lease, int64_t *rev_out) {
    Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
    Etcdserverpb__PutResponse *resp = NULL;
    req.key = bin(key, key_len);
    req.value = bin(value, value_len);
    req.lease = lease;
    int rc = call_unary(c, M_PUT, &req.base, &etcdserverpb__put_response__descriptor,
                        c->conn_timeout_ms, 0, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    if (rev_out) *rev_out = resp->header ? resp->header->revision : 0;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return 0;
}

int etcd_delete_range(EtcdClient *c, const void *key, size_t key_len, const void *range_end,
                      size_t range_end_len, int64_t *deleted, int64_t *rev_out) {
    Etcdserverpb__DeleteRangeRequest req = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    Etcdserverpb__DeleteRangeResponse *resp = NULL;
    req.key = bin(key, key_len);
    req.range_end = bin(range_end, range_end_len);
    int rc = call_unary(c, M_DELETE, &req.base, &etcdserverpb__delete_range_response__descriptor,
                        c->conn_timeout_ms, 0, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    if (deleted) *deleted = resp->deleted;
    if (rev_out) *rev_out = resp->header ? resp->header->revision : 0;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return 0;
}

static int grow_ops(EtcdClient *c, size_t n) {
    if (n <= c->ops_cap) return 0;
    size_t cap = c->ops_cap ? c->ops_cap : 16;
    while (cap < n)
        cap *= 2;
    void *a = realloc(c->rops, cap * sizeof *c->rops);
    if (a) c->rops = a;
    void *b = realloc(c->rop_ptrs, cap * sizeof *c->rop_ptrs);
    if (b) c->rop_ptrs = b;
    void *p = realloc(c->puts, cap * sizeof *c->puts);
    if (p) c->puts = p;
    void *d = realloc(c->dels, cap * sizeof *c->dels);
    if (d) c->dels = d;
    if (!a || !b || !p || !d) return err_set(ERR_NOMEM, "etcd txn: out of memory for %zu ops", n);
    c->ops_cap = cap;
    return 0;
}

/* Fills *req (pointing into the client's scratch and *cmp_msg); valid until the next build. */
static int build_txn(EtcdClient *c, const EtcdCompare *cmp, const EtcdTxnOp *ops, size_t n_ops,
                     Etcdserverpb__TxnRequest *req, Etcdserverpb__Compare *cmp_msg,
                     Etcdserverpb__Compare **cmp_ptr) {
    int rc = grow_ops(c, n_ops);
    if (rc) return rc;
    etcdserverpb__txn_request__init(req);
    if (cmp && cmp->kind != ETCD_CMP_NONE) {
        etcdserverpb__compare__init(cmp_msg);
        cmp_msg->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
        cmp_msg->key = bin(cmp->key, cmp->key_len);
        if (cmp->kind == ETCD_CMP_MOD_EQUAL) {
            cmp_msg->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
            cmp_msg->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
            cmp_msg->mod_revision = cmp->value;
        } else if (cmp->kind == ETCD_CMP_VERSION_EQUAL) {
            cmp_msg->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
            cmp_msg->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
            cmp_msg->version = cmp->value;
        } else {
            return err_set(ERR_INVALID, "etcd txn: unknown compare kind %d", (int)cmp->kind);
        }
        *cmp_ptr = cmp_msg;
        req->compare = cmp_ptr;
        req->n_compare = 1;
    }
    for (size_t i = 0; i < n_ops; i++) {
        Etcdserverpb__RequestOp *op = &c->rops[i];
        etcdserverpb__request_op__init(op);
        if (ops[i].type == ETCD_OP_PUT) {
            Etcdserverpb__PutRequest *p = &c->puts[i];
            etcdserverpb__put_request__init(p);
            p->key = bin(ops[i].key, ops[i].key_len);
            p->value = bin(ops[i].value, ops[i].value_len);
            p->lease = ops[i].lease;
            op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
            op->request_put = p;
        } else if (ops[i].type == ETCD_OP_DELETE) {
            Etcdserverpb__DeleteRangeRequest *d = &c->dels[i];
            etcdserverpb__delete_range_request__init(d);
            d->key = bin(ops[i].key, ops[i].key_len);
            d->range_end = bin(ops[i].range_end, ops[i].range_end_len);
            op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
            op->request_delete_range = d;
        } else {
            return err_set(ERR_INVALID, "etcd txn: unknown op type %d", (int)ops[i].type);
        }
        c->rop_ptrs[i] = op;
    }
    req->success = c->rop_ptrs;
    req->n_success = n_ops;
    return 0;
}

int etcd_txn(EtcdClient *c, const EtcdCompare *cmp, const EtcdTxnOp *ops, size_t n_ops,
             EtcdTxnResult *res) {
    Etcdserverpb__TxnRequest req;
    Etcdserverpb__Compare cmp_msg, *cmp_ptr;
    Etcdserverpb__TxnResponse *resp = NULL;
    int rc = build_txn(c, cmp, ops, n_ops, &req, &cmp_msg, &cmp_ptr);
    if (rc) return rc;
    rc = call_unary(c, M_TXN, &req.base, &etcdserverpb__txn_response__descriptor,
                    c->conn_timeout_ms, 0, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    if (res) {
        res->succeeded = resp->succeeded;
        res->revision = resp->header ? resp->header->revision : 0;
    }
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return 0;
}

/* Reads a protobuf varint; returns bytes used or 0 if malformed. */
static size_t pb_varint(const uint8_t *p, size_t n, uint64_t *v) {
    uint64_t r = 0;
    for (size_t i = 0; i < n && i < 10; i++) {
        r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = r;
            return i + 1;
        }
    }
    return 0;
}

/* Walks one message's top-level fields: calls f for each (field, wire type, varint value or
 * bytes). Returns 0 or -1 when malformed. Used where unpacking would copy or allocate. */
static int pb_walk(const uint8_t *p, size_t n,
                   void (*f)(void *ctx, uint32_t field, int wt, uint64_t v, const uint8_t *b,
                             size_t blen),
                   void *ctx) {
    while (n > 0) {
        uint64_t tag, v = 0;
        size_t k = pb_varint(p, n, &tag);
        if (!k) return -1;
        p += k;
        n -= k;
        int wt = (int)(tag & 7);
        uint32_t field = (uint32_t)(tag >> 3);
        switch (wt) {
        case 0:
            if (!(k = pb_varint(p, n, &v))) return -1;
            f(ctx, field, wt, v, NULL, 0);
            p += k;
            n -= k;
            break;
        case 1:
        case 5:
            k = wt == 1 ? 8 : 4;
            if (n < k) return -1;
            p += k;
            n -= k;
            break;
        case 2:
            if (!(k = pb_varint(p, n, &v)) || v > n - k) return -1;
            f(ctx, field, wt, 0, p + k, (size_t)v);
            p += k + v;
            n -= k + (size_t)v;
            break;
        default:
            return -1;
        }
    }
    return 0;
}

typedef struct {
    int succeeded;
    int64_t revision;
} TxnReply;

static void header_field(void *ctx, uint32_t field, int wt, uint64_t v, const uint8_t *b,
                         size_t blen) {
    (void)b;
    (void)blen;
    if (field == 3 && wt == 0) ((TxnReply *)ctx)->revision = (int64_t)v;
}

static void txn_field(void *ctx, uint32_t field, int wt, uint64_t v, const uint8_t *b,
                      size_t blen) {
    TxnReply *t = ctx;
    if (field == 2 && wt == 0) t->succeeded = v != 0;
    /* the header is parsed lazily; its failure leaves revision 0, caught by the caller */
    if (field == 1 && wt == 2) (void)pb_walk(b, blen, header_field, t);
}

typedef struct {
    EtcdTxnResult *results;
    size_t base;
    const char *endpoint;
} ManyCtx;

static int many_reply(void *ctx, size_t i, const uint8_t *msg, size_t len) {
    ManyCtx *m = ctx;
    TxnReply t = {0, 0};
    if (pb_walk(msg, len, txn_field, &t) || t.revision <= 0)
        return err_set(ERR_CORRUPT, "etcd %s %s: cannot decode TxnResponse (%zu bytes)",
                       m->endpoint, M_TXN, len);
    m->results[m->base + i].succeeded = t.succeeded;
    m->results[m->base + i].revision = t.revision;
    return 0;
}

static int txn_batch(EtcdClient *c, const EtcdTxnReq *reqs, size_t n, EtcdTxnResult *results,
                     size_t base) {
    int rc;
    if (n > c->n_frames) {
        GrpcFrame *f = realloc(c->frames, n * sizeof *f);
        if (!f) return err_set(ERR_NOMEM, "etcd txn_many: out of memory");
        memset(f + c->n_frames, 0, (n - c->n_frames) * sizeof *f);
        c->frames = f;
        c->n_frames = n;
    }
    for (size_t i = 0; i < n; i++) {
        Etcdserverpb__TxnRequest req;
        Etcdserverpb__Compare cmp_msg, *cmp_ptr;
        if ((rc = build_txn(c, &reqs[i].cmp, reqs[i].ops, reqs[i].n_ops, &req, &cmp_msg, &cmp_ptr)))
            return rc;
        if ((rc = grpc_frame_pack(&c->frames[i], &req.base))) return rc;
    }
    int reauthed = 0;
    size_t tried = 1;
    for (;;) {
        GrpcResult r;
        size_t n_ok = 0;
        ManyCtx m = {results, base, c->endpoints[c->cur]};
        rc = grpc_unary_many(c->ch, c->endpoints[c->cur], M_TXN, c->frames, n, c->conn_timeout_ms,
                             many_reply, &m, &n_ok, &r);
        if (rc == 0) return 0;
        if (n_ok == 0 && !reauthed && needs_reauth(c, &r)) {
            reauthed = 1;
            if ((rc = authenticate(c))) return rc;
            continue;
        }
        if (n_ok == 0 && tried < c->n_endpoints && r.connect_failed) {
            tried++;
            next_endpoint(c);
            continue;
        }
        return final_error(rc, &r, tried);
    }
}

int etcd_txn_many(EtcdClient *c, const EtcdTxnReq *reqs, size_t n, EtcdTxnResult *results) {
    int rc = ensure_auth(c);
    if (rc) return rc;
    for (size_t off = 0; off < n; off += TXN_BATCH_MAX) {
        size_t k = n - off < TXN_BATCH_MAX ? n - off : TXN_BATCH_MAX;
        if ((rc = txn_batch(c, reqs + off, k, results, off))) return rc;
    }
    return 0;
}

/* ---- lease ---- */

int etcd_lease_grant(EtcdClient *c, int64_t ttl, int64_t *id_out) {
    Etcdserverpb__LeaseGrantRequest req = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    Etcdserverpb__LeaseGrantResponse *resp = NULL;
    req.ttl = ttl;
    /* not idempotent: a retry after the request reached etcd would grant a second lease */
    int rc =
        call_unary(c, M_LEASE_GRANT, &req.base, &etcdserverpb__lease_grant_response__descriptor,
                   c->conn_timeout_ms, 0, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    if (resp->error && *resp->error)
        rc = err_set(ERR_ETCD, "etcd %s %s: %s", etcd_client_endpoint(c), M_LEASE_GRANT,
                     resp->error);
    else if (id_out)
        *id_out = resp->id;
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return rc;
}

int etcd_lease_time_to_live(EtcdClient *c, int64_t id, int64_t *granted_ttl,
                            int64_t *remaining_ttl) {
    Etcdserverpb__LeaseTimeToLiveRequest req = ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    Etcdserverpb__LeaseTimeToLiveResponse *resp = NULL;
    req.id = id;
    int rc = call_unary(c, M_LEASE_TTL, &req.base,
                        &etcdserverpb__lease_time_to_live_response__descriptor, c->conn_timeout_ms,
                        1, (ProtobufCMessage **)&resp);
    if (rc) return rc;
    /* etcd answers an unknown (expired, revoked, never granted) lease with TTL -1, no error */
    if (resp->ttl == -1) {
        rc = err_set(ERR_NOT_FOUND, "etcd %s %s: lease %lld not found (expired or revoked)",
                     etcd_client_endpoint(c), M_LEASE_TTL, (long long)id);
    } else {
        if (granted_ttl) *granted_ttl = resp->grantedttl;
        if (remaining_ttl) *remaining_ttl = resp->ttl;
    }
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    return rc;
}

/* ---- snapshot ---- */

typedef struct {
    int (*sink)(void *ctx, const void *buf, size_t len);
    void *ctx;
    const char *endpoint;
    const uint8_t *blob;
    size_t blob_len;
    int have_blob;
} SnapCtx;

static void snap_field(void *ctx, uint32_t field, int wt, uint64_t v, const uint8_t *b,
                       size_t blen) {
    (void)v;
    SnapCtx *s = ctx;
    if (field == 3 && wt == 2) {
        s->blob = b;
        s->blob_len = blen;
        s->have_blob = 1;
    }
}

/* SnapshotResponse is walked by hand so blob bytes go to the sink without a copy. */
static int snap_msg(void *ctx, const uint8_t *msg, size_t len) {
    SnapCtx *s = ctx;
    s->have_blob = 0;
    s->blob_len = 0;
    if (pb_walk(msg, len, snap_field, s))
        return err_set(ERR_CORRUPT, "etcd %s %s: cannot decode SnapshotResponse (%zu bytes)",
                       s->endpoint, M_SNAPSHOT, len);
    if (!s->have_blob || s->blob_len == 0) return 0;
    return s->sink(s->ctx, s->blob, s->blob_len);
}

int etcd_snapshot(EtcdClient *c, int (*sink)(void *ctx, const void *buf, size_t len), void *ctx) {
    Etcdserverpb__SnapshotRequest req = ETCDSERVERPB__SNAPSHOT_REQUEST__INIT;
    int rc = ensure_auth(c);
    if (rc) return rc;
    CallTries t = {0, 1};
    for (;;) {
        GrpcResult r;
        size_t delivered = 0;
        SnapCtx s = {.sink = sink, .ctx = ctx, .endpoint = c->endpoints[c->cur]};
        rc = grpc_server_stream(c->ch, c->endpoints[c->cur], M_SNAPSHOT, &req.base,
                                c->snapshot_timeout_ms, snap_msg, &s, &delivered, &r);
        /* once data reached the sink, the snapshot cannot start again */
        if (rc == 0 || !call_again(c, &t, &r, delivered == 0, 1, &rc)) return rc;
    }
}

/* ---- watch ---- */

static void watch_drop_parts(EtcdWatch *w) {
    for (size_t i = 0; i < w->n_parts; i++)
        protobuf_c_message_free_unpacked(&w->parts[i]->base, NULL);
    w->n_parts = 0;
    w->parts_complete = 0;
}

/* Receives and unpacks one WatchResponse into parts. 0 with *got, or an error. */
static int watch_recv_part(EtcdWatch *w, int timeout_ms, int *got, GrpcResult *r) {
    const uint8_t *msg;
    size_t len;
    int rc = grpc_stream_recv(w->s, timeout_ms, &msg, &len, got, r);
    if (rc || !*got) return rc;
    Etcdserverpb__WatchResponse *wr = etcdserverpb__watch_response__unpack(NULL, len, msg);
    if (!wr)
        return err_set(ERR_CORRUPT, "etcd %s %s: cannot decode WatchResponse (%zu bytes)",
                       w->endpoint, M_WATCH, len);
    if (w->n_parts == w->parts_cap) {
        size_t cap = w->parts_cap ? w->parts_cap * 2 : 4;
        Etcdserverpb__WatchResponse **p = realloc(w->parts, cap * sizeof *p);
        if (!p) {
            protobuf_c_message_free_unpacked(&wr->base, NULL);
            return err_set(ERR_NOMEM, "etcd %s %s: out of memory", w->endpoint, M_WATCH);
        }
        w->parts = p;
        w->parts_cap = cap;
    }
    w->parts[w->n_parts++] = wr;
    return 0;
}

/* Builds resp from the complete parts (fragments in order, the last one unfragmented). */
static int watch_assemble(EtcdWatch *w, EtcdWatchResponse *resp) {
    size_t total = 0;
    for (size_t i = 0; i < w->n_parts; i++)
        total += w->parts[i]->n_events;
    if (total > w->events_cap) {
        EtcdEvent *e = realloc(w->events, total * sizeof *e);
        if (!e) return err_set(ERR_NOMEM, "etcd %s %s: out of memory", w->endpoint, M_WATCH);
        w->events = e;
        w->events_cap = total;
    }
    size_t k = 0;
    memset(resp, 0, sizeof *resp);
    for (size_t i = 0; i < w->n_parts; i++) {
        const Etcdserverpb__WatchResponse *p = w->parts[i];
        if (p->header) resp->header_revision = p->header->revision;
        resp->created |= p->created;
        resp->canceled |= p->canceled;
        if (p->compact_revision) resp->compact_revision = p->compact_revision;
        if (p->cancel_reason && *p->cancel_reason)
            snprintf(resp->cancel_reason, sizeof resp->cancel_reason, "%s", p->cancel_reason);
        for (size_t j = 0; j < p->n_events; j++) {
            const Etcdserverpb__Event *ev = p->events[j];
            EtcdEvent *o = &w->events[k++];
            memset(o, 0, sizeof *o);
            o->type =
                ev->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE ? ETCD_OP_DELETE : ETCD_OP_PUT;
            if (ev->kv) {
                o->kv.key = ev->kv->key.data;
                o->kv.key_len = ev->kv->key.len;
                o->kv.value = ev->kv->value.data;
                o->kv.value_len = ev->kv->value.len;
                o->kv.create_revision = ev->kv->create_revision;
                o->kv.mod_revision = ev->kv->mod_revision;
                o->kv.version = ev->kv->version;
                o->kv.lease = ev->kv->lease;
            }
        }
    }
    resp->events = total ? w->events : NULL;
    resp->n_events = total;
    w->parts_complete = 1;
    return 0;
}

void etcd_watch_close(EtcdWatch *w) {
    if (!w) return;
    grpc_stream_close(w->s);
    watch_drop_parts(w);
    free(w->parts);
    free(w->events);
    free(w);
}

/* Opens the stream on the current endpoint and waits for the first response. */
static int watch_start(EtcdWatch *w, const Etcdserverpb__WatchRequest *req, GrpcResult *r) {
    EtcdClient *c = w->c;
    int rc = grpc_stream_open(c->ch, c->endpoints[c->cur], M_WATCH, &w->s);
    if (rc) return rc;
    if ((rc = grpc_stream_send(w->s, &req->base))) return rc;
    int64_t deadline = now_ms() + c->conn_timeout_ms;
    for (;;) {
        int got = 0;
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            memset(r, 0, sizeof *r);
            r->status = -1;
            return err_set(ERR_TIMEOUT, "etcd %s %s: no watch created response within %lld ms",
                           w->endpoint, M_WATCH, (long long)c->conn_timeout_ms);
        }
        rc = watch_recv_part(w, left > 1000 ? 1000 : (int)left, &got, r);
        if (rc) return rc;
        if (got) return 0;
    }
}

int etcd_watch_open(EtcdClient *c, const void *key, size_t key_len, const void *range_end,
                    size_t range_end_len, int64_t start_rev, int progress_notify, EtcdWatch **out) {
    Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
    Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    EtcdWatch *w = NULL;
    size_t tried = 1;
    *out = NULL;
    int rc = ensure_auth(c);
    if (rc) return rc;
    cr.key = bin(key, key_len);
    cr.range_end = bin(range_end, range_end_len);
    cr.start_revision = start_rev;
    cr.progress_notify = progress_notify != 0;
    cr.fragment = 1; /* etcd splits huge revisions; watch_next reassembles them */
    req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    for (;;) {
        GrpcResult r;
        w = calloc(1, sizeof *w);
        if (!w) return err_set(ERR_NOMEM, "etcd watch: out of memory");
        w->c = c;
        snprintf(w->endpoint, sizeof w->endpoint, "%s", c->endpoints[c->cur]);
        rc = watch_start(w, &req, &r);
        if (rc == 0) break;
        etcd_watch_close(w);
        w = NULL;
        if (rc != ERR_NOMEM && tried < c->n_endpoints && can_failover(&r, 1)) {
            tried++;
            next_endpoint(c);
            continue;
        }
        return final_error(rc, &r, tried);
    }
    /* the first response is normally `created`; a canceled one means the server refused */
    Etcdserverpb__WatchResponse *first = w->parts[0];
    if (first->created && first->canceled) {
        rc = err_set(ERR_ETCD, "etcd %s %s: watch refused: %s", w->endpoint, M_WATCH,
                     first->cancel_reason && *first->cancel_reason ? first->cancel_reason
                                                                   : "canceled");
        etcd_watch_close(w);
        return rc;
    }
    if (first->created && first->n_events == 0 && !first->fragment) watch_drop_parts(w);
    /* anything else (events, compaction) stays queued for the first etcd_watch_next */
    *out = w;
    return 0;
}

int etcd_watch_next(EtcdWatch *w, int timeout_ms, EtcdWatchResponse *resp, int *got) {
    *got = 0;
    if (w->parts_complete) watch_drop_parts(w);
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (w->n_parts > 0 && !w->parts[w->n_parts - 1]->fragment) {
            int rc = watch_assemble(w, resp);
            if (rc) return rc;
            *got = 1;
            return 0;
        }
        int64_t left = deadline - now_ms();
        if (left < 0) left = 0;
        int g = 0;
        GrpcResult r;
        int rc = watch_recv_part(w, (int)left, &g, &r);
        if (rc) return rc == ERR_ETCD || rc == ERR_CORRUPT ? rc : err_wrap(rc, "watch");
        if (!g) return 0; /* timeout; a partial fragmented response stays for the next call */
    }
}
