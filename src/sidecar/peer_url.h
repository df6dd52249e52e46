/* peer_url: the server's start-up peer URL update (docs/go-tool.md §10.4, last paragraph; §10.6).
 * Once this member's etcd answers Status, the peer URLs the etcd config file gives this member
 * (initial-advertise-peer-urls of ETCD_CONF, else /var/etcd/config/etcd.conf.yaml: a map
 * {member-name: [urls]} in etcd-druid's layout, or a plain "a,b") are compared with the peer URLs
 * the cluster's member list has for it; when the file has one the list lacks, MemberUpdate sets
 * the member's peer URLs to the file's, and with --use-etcd-wrapper etcd-wrapper is asked to
 * restart etcd (POST <scheme>://<host of --endpoints[0]>:9095/stop). Members are never added or
 * removed here. docs/cluster.md describes it for operators. */
#ifndef ETCDBR_PEER_URL_H
#define ETCDBR_PEER_URL_H

#include "../etcd/etcd_client.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* etcd-wrapper's HTTP port (docs/go-tool.md Appendix B: fixed, not configurable in the Go tool). */
#define ETCD_WRAPPER_PORT 9095

typedef struct PeerUrlConfig {
    EtcdConfig etcd; /* borrowed: TLS and credentials; endpoints[0] is this member's etcd */
    const char *const *others; /* more client URLs for MemberUpdate (a learner refuses it): the
                                  cluster's --service-endpoints, may be NULL; borrowed */
    size_t n_others;
    int use_wrapper;  /* --use-etcd-wrapper: POST /stop to etcd-wrapper after an update */
    int server_tls;   /* the HTTP server runs HTTPS: etcd-wrapper is reached over HTTPS, its
                         certificate checked against etcd.cacert (--cacert) */
    atomic_int *stop; /* may be NULL; set: waits between retries end, ERR_CANCELED */
} PeerUrlConfig;

/* The check for member member_id (the Status answer of endpoints[0]). Reads the etcd config file
 * and does nothing (0, logged) when it is absent, unreadable or has no peer URLs for this member
 * (its name: POD_NAME with member-name-prefix, else the file's "name"). Otherwise MemberList, and
 * MemberUpdate when needed, each tried PEER_URL_ATTEMPTS times 5 s each with waits of 2, 4, 8 s
 * (the Go tool's member calls, docs/go-tool.md Appendix B). Logs what it compared and what it did.
 * 0 when done (nothing to do, or updated; a failed POST to etcd-wrapper is logged as an error
 * but not retried later: the member's URLs are right, only the restart is missing), else the
 * error of the last attempt (ERR_ETCD, ERR_NOT_FOUND: member_id is not in the list,
 * ERR_CANCELED): the caller may call again later. Blocks for up to ~40 s; one thread. */
int peer_url_update(const PeerUrlConfig *pc, uint64_t member_id);

#define PEER_URL_ATTEMPTS 4

/* The URLs of config_urls ("a,b", blanks around entries ignored) that registered ("a,b", as
 * EtcdMember.peer_urls) lacks, compared byte for byte up to a trailing '/'; comma-joined into
 * out (cap bytes, cut at cap - 1; may be NULL with cap 0). Returns how many. Pure. */
size_t peer_urls_unregistered(const char *config_urls, const char *registered, char *out,
                              size_t cap);

/* etcd-wrapper's stop URL for this member: "<http|https>://<host of endpoint>:9095/stop", https
 * when tls; an [IPv6] host kept in brackets, a scheme-less endpoint taken as host[:port].
 * 0 or ERR_INVALID (no host, longer than cap - 1). Pure. */
int etcd_wrapper_stop_url(const char *endpoint, int tls, char *out, size_t cap);

#endif
