/* lease: coordination.k8s.io/v1 Lease objects as etcd-backup-restore keeps them (docs/go-tool.md
 * §10.6): the full- and delta-snapshot Leases hold the last stored revision in
 * spec.holderIdentity (decimal) and a time in spec.renewTime; a member's heartbeat Lease holds
 * "<member ID hex>:<cluster ID hex>:Leader|Member" and the annotation
 * member.etcd.gardener.cloud/tls-enabled. The Leases are created by the operator (etcd-druid);
 * a missing one is an error, never created here. Every update reads the Lease and sends a JSON
 * merge patch (RFC 7386) carrying the resourceVersion read: the API server refuses it with 409
 * Conflict when another writer came first, and the update is read and decided again. The JSON
 * helpers are pure (unit tests, fuzzing); the update functions talk to the API server. */
#ifndef ETCDBR_K8S_LEASE_H
#define ETCDBR_K8S_LEASE_H

#include "k8s_client.h"

#include <stddef.h>
#include <stdint.h>

/* Annotation on the member Lease (the Go tool's heartbeat.PeerURLTLSEnabledKey). */
#define K8S_LEASE_TLS_ANNOTATION "member.etcd.gardener.cloud/tls-enabled"

/* The fields of a Lease this tool reads. */
typedef struct K8sLease {
    char name[254];
    char resource_version[128];
    int has_holder;   /* spec.holderIdentity present and a string */
    char holder[256]; /* spec.holderIdentity */
    char renew_time[64];
} K8sLease;

/* Parses a Lease object (the API server's JSON, len bytes). 0, or ERR_CORRUPT with a message
 * when it is not JSON, not kind Lease, has no metadata.resourceVersion, or a field is too long or
 * of the wrong type. A null or absent holderIdentity gives has_holder 0. */
int k8s_lease_parse(const char *json, size_t len, K8sLease *out);

/* A revision in holderIdentity: strict decimal, 0 <= rev <= INT64_MAX, no sign, no spaces (Go's
 * strconv.ParseInt accepts a sign; a negative revision does not exist). 0 or ERR_CORRUPT. */
int k8s_lease_parse_revision(const char *s, int64_t *rev);

/* Kubernetes MicroTime (metav1.MicroTime, RFC 3339 with exactly six fractional digits, UTC,
 * "2006-01-02T15:04:05.000000Z") of unix_us microseconds since the epoch into out. */
void k8s_micro_time(int64_t unix_us, char out[32]);

/* The merge patch of one update (owned JSON text, NULL on allocation failure):
 * {"metadata":{"resourceVersion":rv[,"annotations":{ann_key:ann_value}]},
 *  "spec":{["holderIdentity":holder,]"renewTime":renew_time}}; holder and ann_key may be NULL. */
char *k8s_lease_patch_json(const char *rv, const char *holder, const char *renew_time,
                           const char *ann_key, const char *ann_value);

/* What an update of a snapshot Lease writes, from the Lease read (docs/go-tool.md §10.6, the Go
 * tool's UpdateFullSnapshotLease / UpdateDeltaSnapshotLease): full (rev >= 0): holder > rev ->
 * nothing (*skip = 1); else holder = rev when it was unset or lower, and the renew time always.
 * delta (rev >= 0, the last delta's LastRevision): holder = rev when unset or lower; rev < 0
 *   (no delta in the latest set): holder "0" when unset. The renew time always.
 * *holder_out gets the holderIdentity to write, "" = leave it. 0, or ERR_CORRUPT when the
 * Lease's holderIdentity is not a revision and must be compared (never overwritten: another
 * writer owns it); a delta update without a delta keeps any holder and renews (as the Go tool). */
int k8s_lease_decide(const K8sLease *cur, int full, int64_t rev, int *skip, char *holder_out,
                     size_t cap);

/* The Lease's path under the client's namespace (owned; NULL on allocation failure or a name
 * that is not a DNS-1123 subdomain). */
char *k8s_lease_path(const K8sClient *c, const char *name);

/* GET of Lease name. 0, ERR_NOT_FOUND, ERR_CORRUPT (not a Lease) or k8s_request's errors. */
int k8s_lease_get(K8sClient *c, const char *name, int64_t timeout_ms, K8sLease *out);

/* Outcome of an update, for the caller's log line. */
typedef struct K8sLeaseResult {
    int skipped;         /* full: the Lease already holds a higher revision */
    char holder[256];    /* holderIdentity after the update */
    char renew_time[64]; /* renewTime written */
    int conflicts;       /* 409 answers retried */
} K8sLeaseResult;

/* Full-snapshot Lease after full snapshot rev created at created_on_s (Unix s, the snapshot's
 * CreatedOn): see k8s_lease_decide. Delta-snapshot Lease: rev the last delta's LastRevision, or
 * -1 when the latest set has no delta; renewTime now_us. Member Lease: holderIdentity holder,
 * renewTime now_us, annotation K8S_LEASE_TLS_ANNOTATION "true"/"false".
 * Each reads the Lease, patches it with its resourceVersion and, on 409 Conflict, reads and
 * decides again (up to 5 tries, 10 ms x 5^n apart, as client-go's retry.DefaultBackoff), all
 * within timeout_ms. res (may be NULL) gets the outcome. 0 or the last error (message names the
 * Lease, namespace and HTTP status). Thread-safe (the client is). */
int k8s_lease_update_full(K8sClient *c, const char *name, int64_t rev, int64_t created_on_s,
                          int64_t timeout_ms, K8sLeaseResult *res);
int k8s_lease_update_delta(K8sClient *c, const char *name, int64_t rev, int64_t now_us,
                           int64_t timeout_ms, K8sLeaseResult *res);
int k8s_lease_renew_member(K8sClient *c, const char *name, const char *holder, int tls_enabled,
                           int64_t now_us, int64_t timeout_ms, K8sLeaseResult *res);

#endif
