/* setup: the sidecar's configuration, built once from the flags by the command that runs it
 * (cmd/server_common.c: server_setup), and the glue between the snapshotter and initializer and
 * the metrics, the Kubernetes Leases and the HTTP API's JSON. */
#ifndef ETCDBR_SIDECAR_SETUP_H
#define ETCDBR_SIDECAR_SETUP_H

#include "lease_renewer.h"
#include "../backup/snapshotter.h"
#include "../restore/initializer.h"
#include "../restore/restorer.h"

#include <jansson.h>

typedef struct ServerSetup {
    Store *store; /* owned; NULL when neither --storage-provider nor --store-container is set */
    int has_store;
    SnapshotterConfig snap;    /* etcd, store, schedule... (borrows from opts and this) */
    CronSchedule defrag;       /* storage for snap.defrag_schedule */
    RestoreConfig restore;     /* borrows from opts and this */
    char *peer_urls;           /* owned, comma-joined --initial-advertise-peer-urls */
    int64_t leader_timeout_ms; /* Status timeout of the leader check */
    const char *const *service_endpoints; /* --service-endpoints (borrowed) */
    size_t service_endpoints_n;
    Store *secondary;             /* owned; only with --secondary-backup-sync-enabled */
    int64_t secondary_period_ms;  /* --secondary-backup-sync-period */
    char *client_urls;            /* owned: run mode's endpoints taken from etcd's flags */
    const char **client_url_list; /* owned array into client_urls */
    LeaseRenewer *leases;         /* owned; NULL without --enable-*-lease-renewal */
} ServerSetup;

/* Frees what server_setup (cmd/server_common.h) made; NULL-safe fields. */
void server_teardown(ServerSetup *s);

/* Run mode without --endpoints: the snapshotter, leader check and restore talk to the client URLs
 * of the etcd command line etcd_argv (etcd_client_urls), when it names any; logged. 0 or ERR_*. */
int server_take_etcd_client_urls(ServerSetup *s, char *const *etcd_argv);

/* Starts the Kubernetes Lease renewals (lease_renewer.h) once the endpoints are final (after
 * server_take_etcd_client_urls); server_teardown stops them. EXIT_OK or EXIT_FAIL (logged). */
int server_start_leases(ServerSetup *s);

/* Snapshotter observer: updates metrics (snapshot_duration, latest revision, failures...) and
 * queues the snapshot Lease updates; ctx is the ServerSetup (or NULL: metrics only). */
void server_on_snapshotter_event(void *ctx, const SnapshotterEvent *ev);
/* Registers etcdbr_full_snapshot_age_seconds and etcdbr_delta_snapshot_age_seconds (gauges,
 * seconds since the last successful snapshot of this process, NaN before the first) and
 * etcdbr_snapshot_rpo_seconds (gauge, rpo.h: seconds since the store last held everything etcd
 * had, NaN where no snapshotter runs). */
void server_register_age_metrics(void);
/* Registers etcdbr_store_request_failures_total{provider, class} (counter; its classes
 * pre-initialised for store's provider when it is an object store; store may be NULL) and
 * installs the store layer's failure hook (objhttp_set_failure_hook), which counts every failed
 * try of a store request as it fails and stamps etcdbr_last_error_timestamp_seconds of the
 * operation the snapshotter is in (full_snapshot, gc, else delta_snapshot; nothing where no
 * snapshotter runs). Once per process. */
void server_register_store_failure_metric(const Store *store);
/* Registers etcdbr_snapshotter_store_configured (gauge): 1 when a snapshot store is configured,
 * 0 when none is and so no backups are taken. */
void server_register_store_metric(int configured);

/* The Go tool's Snapshot JSON object (docs/go-tool.md §2; field names exactly, including the
 * misspelled "immutabilityExpriyTime"). New reference. */
json_t *server_snapshot_json(const Snapshot *s);
/* {"fullSnapshot": ..., "deltaSnapshots": [...]} of the store's latest set; *text malloc'ed. */
int server_latest_json(const ServerSetup *s, char **text);
/* The etcd config file for the launcher (ETCD_CONF, else /var/etcd/config/etcd.conf.yaml);
 * *text malloc'ed. */
int server_etcd_config(const ServerSetup *s, char **text);
/* Status of the first endpoint with the leader-election timeout. */
int server_probe_etcd(const ServerSetup *s, EtcdStatus *st);

#endif
