/* leader_proxy: a follower's sidecar forwards /snapshot/full and /snapshot/delta to the backup
 * leader's sidecar, as the Go tool's reverse proxy does (docs/go-tool.md §2, "Not-leader
 * handling"): Status on this member's etcd (endpoint[0]) names the raft leader, MemberList gives
 * its first client URL, whose host with --server-port is the leader sidecar's address; its /healthz
 * must answer {"health":true}; then the request is sent there and the answer returned. */
#ifndef ETCDBR_LEADER_PROXY_H
#define ETCDBR_LEADER_PROXY_H

#include "../etcd/etcd_client.h"
#include "../server/auth_token.h"

#include <curl/curl.h>

#include <stddef.h>
#include <stdint.h>

/* Request header a forwarded request carries: its receiver never forwards it again. */
#define LEADER_PROXY_HEADER "X-Etcdbr-Forwarded-By"

/* Largest answer body forwarded (bytes): a snapshot JSON is well under 1 KiB. */
#define LEADER_PROXY_MAX_BODY (1024 * 1024)

typedef struct LeaderProxyConfig {
    EtcdConfig etcd;            /* this member's etcd; only endpoint[0] is used; borrowed */
    int server_port;            /* the leader sidecar's port: this server's --server-port */
    int tls;                    /* this server runs HTTPS: the leader's is reached over HTTPS */
    const char *cacert;         /* PEM root for the leader's certificate, NULL/"" = the
                                   system's roots; the host name is verified. The sidecar gives
                                   --server-client-ca-file when set, else --cacert */
    const char *client_cert;    /* PEM certificate and key presented to the leader (this */
    const char *client_key;     /* server's --server-cert/--server-key), NULL: none */
    AuthToken *token;           /* NULL, or the token sent to the leader (borrowed) */
    int64_t health_timeout_ms;  /* the /healthz check */
    int64_t request_timeout_ms; /* the forwarded request (a full snapshot takes long) */
} LeaderProxyConfig;

typedef struct LeaderProxyResponse {
    int status;               /* the leader's HTTP status */
    const char *content_type; /* static: "application/json" when the leader's is JSON, else
                                 "text/plain; charset=utf-8" */
    char *body;               /* malloc'ed (NUL-terminated), owned by the caller */
    size_t body_len;
    char leader[512]; /* the leader sidecar's base URL, e.g. "https://10.0.0.2:8080" */
} LeaderProxyResponse;

/* The leader sidecar's base URL ("https://10.0.0.2:8080") into out (cap bytes) from the
 * leader's comma-joined etcd client URLs: the first URL's host (an [IPv6] literal kept in
 * brackets; a URL without scheme taken as host[:port]) with `port`, https when tls. 0, or
 * ERR_INVALID for a URL without a host or a result longer than cap - 1. Pure. */
int leader_proxy_base_url(const char *client_urls, int port, int tls, char *out, size_t cap);

/* The request headers of a call to the leader's sidecar into *out (owned by the caller:
 * curl_slist_free_all; NULL when there are none): for the forwarded request (forwarded 1)
 * LEADER_PROXY_HEADER, and "Authorization: Bearer <token>" with cfg->token's current token; the
 * /healthz check (forwarded 0) sends neither. 0, or ERR_INVALID (the token file holds no
 * usable token now) / ERR_NOMEM. */
int leader_proxy_headers(const LeaderProxyConfig *cfg, int forwarded, struct curl_slist **out);

/* Forwards `method` `path_query` (path plus "?query", as received) to the backup leader's
 * sidecar and fills *out with its answer (any status, including 5xx). Errors, with the step that
 * failed in the message: ERR_ETCD (Status or MemberList), ERR_INVALID (no leader, the leader is
 * this member, no client URL), ERR_UNSUPPORTED (the leader's /healthz is not {"health":true}),
 * ERR_IO (connection, TLS, timeout, body over LEADER_PROXY_MAX_BODY), ERR_UNSUPPORTED also when the
 * leader refuses this sidecar's client certificate or token (401, 403: not passed on, as the
 * caller's own credentials were good here). Thread-safe (libcurl
 * initialized globally by the caller's process, see main.c). */
int leader_proxy_forward(const LeaderProxyConfig *cfg, const char *method, const char *path_query,
                         LeaderProxyResponse *out);

#endif
