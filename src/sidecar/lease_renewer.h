/* lease_renewer: the server's Kubernetes Lease updates (docs/go-tool.md §10.6, docs/kubernetes.md),
 * on one worker thread so that the snapshotter loop never waits for the API server:
 * - the full-snapshot Lease after each stored full snapshot, retried every retry period (1 min,
 *   the Go tool's; ETCDBR_K8S_LEASE_RETRY_PERIOD overrides it for tests) until one update
 *   succeeds; a newer full snapshot replaces a pending older one;
 * - the delta-snapshot Lease after each stored delta and after each delta period that had
 *   nothing to store (renewTime only), as the Go tool renews it every delta period;
 * - this member's heartbeat Lease every --k8s-heartbeat-duration, from etcd's Status.
 * Events are queued under a mutex (latest wins); the thread waits on a CLOCK_MONOTONIC
 * condition variable. lease_renewer_free stops it after one last try of what is queued. */
#ifndef ETCDBR_LEASE_RENEWER_H
#define ETCDBR_LEASE_RENEWER_H

#include "../backup/snapshotter.h"
#include "../etcd/etcd_client.h"
#include "../store/store.h"

#include <stdint.h>

typedef struct LeaseRenewer LeaseRenewer;

/* The Lease flags (strings borrowed for the call only). */
typedef struct LeaseRenewerConfig {
    int snapshot_leases;       /* --enable-snapshot-lease-renewal */
    int member_lease;          /* --enable-member-lease-renewal */
    const char *full_name;     /* --full-snapshot-lease-name */
    const char *delta_name;    /* --delta-snapshot-lease-name */
    int64_t heartbeat_ms;      /* --k8s-heartbeat-duration */
    int64_t member_timeout_ms; /* --etcd-connection-timeout: the member Status call */
} LeaseRenewerConfig;

/* Checks the lease options of cfg and the in-cluster configuration (k8s_client.h), and for the
 * member Lease its name (<member-name-prefix>-$POD_NAME from the etcd config file at ETCD_CONF or
 * /var/etcd/config/etcd.conf.yaml) and whether all its peer URLs are https. *out NULL when no
 * renewal is enabled. No thread yet, no network I/O. EXIT_OK or EXIT_USAGE (logged). */
int lease_renewer_new(const LeaseRenewerConfig *cfg, LeaseRenewer **out);

/* Starts the worker thread (stop signals blocked in it). etcd (copied; its strings borrowed
 * until lease_renewer_free) reaches this member at endpoints[0]; status_timeout_ms bounds its
 * Status call. store (borrowed until lease_renewer_free; may be NULL): when the snapshotter's
 * first event is a delta (it resumed the store's latest set), that set's full snapshot and last
 * delta are looked up and the Leases updated with them, as the Go tool does on start.
 * NULL r: nothing. 0 or ERR_IO (logged by the caller). */
int lease_renewer_start(LeaseRenewer *r, const EtcdConfig *etcd, int64_t status_timeout_ms,
                        Store *store);

/* Queues the updates a snapshotter event asks for (FULL, DELTA, IDLE; others ignored).
 * Never blocks on I/O; any thread. NULL r: nothing. */
void lease_renewer_on_event(LeaseRenewer *r, const SnapshotterEvent *ev);

/* Stops the thread (one last try, within 10 s each, of a queued snapshot Lease update) and frees
 * r. NULL-safe. */
void lease_renewer_free(LeaseRenewer *r);

/* This member's name (the member Lease's) and whether all its peer URLs are https, from the
 * etcd config file's text yaml (len bytes, borrowed) for pod pod_name, resolved as GET /config
 * resolves it (etcd_config_render: <member-name-prefix>-<pod_name>, the member's entry of
 * initial-advertise-peer-urls). *tls is 1 iff there is at least one peer URL and every one
 * starts with "https://" (the Go tool's IsPeerURLTLSEnabled). name gets cap bytes at most.
 * 0 or ERR_INVALID / ERR_NOMEM with a message. */
int lease_member_identity(const char *yaml, size_t len, const char *pod_name, char *name,
                          size_t cap, int *tls);

/* compact --enable-snapshot-lease-renewal: updates the full-snapshot Lease now, within 60 s
 * (docs/go-tool.md Appendix B), for full snapshot rev created at created_on_s. Logs the outcome
 * (info) or the failure (warn). lease_name: --full-snapshot-lease-name. 0 or an ERR_*. */
int lease_update_full_now(const char *lease_name, int64_t rev, int64_t created_on_s);

#endif
