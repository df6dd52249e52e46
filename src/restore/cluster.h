/* cluster: etcd's --initial-cluster as etcd parses it (types.NewURLsMap: comma-separated
 * name=peer-URL pairs, a name repeated once per peer URL) and the IDs etcd computes from it and
 * the cluster token when it creates a cluster (server/etcdserver/api/membership: computeMemberId
 * and RaftCluster.genID, used by `etcdutl snapshot restore` and etcd 3.4's etcdctl alike). A
 * restore of a whole cluster checks its flags with these before anything is downloaded, and logs
 * the IDs `etcdctl member list` must show afterwards. */
#ifndef ETCDBR_CLUSTER_H
#define ETCDBR_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

typedef struct ClusterMember {
    char *name;      /* owned */
    char *peer_urls; /* owned; comma-joined in the order given */
    uint64_t id;     /* etcd's member ID for these peer URLs and the token */
} ClusterMember;

typedef struct InitialCluster {
    ClusterMember *members; /* owned; in order of first appearance */
    size_t n;
    uint64_t cluster_id; /* etcd's cluster ID of these members */
} InitialCluster;

/* Parses spec ("n1=http://a:2380,n2=http://b:2380,n1=http://c:2380") and computes the IDs with
 * token. Errors: ERR_INVALID (an entry without "=", an empty name or URL, the same URL twice,
 * nothing at all; the message names the entry), ERR_NOMEM. URLs are compared and hashed as
 * written: etcd normalises them through url.Parse first, which keeps the usual
 * scheme://host:port form unchanged. *out owned (initial_cluster_free); zeroed on error. */
int initial_cluster_parse(const char *spec, const char *token, InitialCluster *out);
void initial_cluster_free(InitialCluster *c);

/* The member called name, or NULL. Borrowed from c. */
const ClusterMember *initial_cluster_find(const InitialCluster *c, const char *name);

/* etcd's member ID of a member created with these peer URLs (comma-joined) in a cluster with this
 * token: the first 8 bytes (big-endian) of SHA-1(sorted URLs concatenated, then the token). */
uint64_t cluster_member_id(const char *peer_urls_csv, const char *token);

/* etcd's cluster ID of these member IDs: the first 8 bytes (big-endian) of SHA-1 of the sorted
 * IDs, each 8 bytes big-endian. */
uint64_t cluster_id_of(const uint64_t *ids, size_t n);

#endif
