/* server_common: configuration built from options once, shared by the commands (snapshot,
 * restore, server, initialize), and the glue between the snapshotter/initializer and metrics
 * and the HTTP API's JSON. */
#ifndef ETCDBR_SERVER_COMMON_H
#define ETCDBR_SERVER_COMMON_H

#include "lease_renewer.h"
#include "opts.h"
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

/* Parts, each logging a clear error and returning an EXIT_* code. */
int setup_etcd_config(const Opts *o, EtcdConfig *out);
int setup_snapshotter_config(const Opts *o, SnapshotterConfig *out, CronSchedule *defrag);
int setup_restore_config(const Opts *o, RestoreConfig *out, char **peer_urls_owned);
/* Opens the store. A --store-container (or STORAGE_CONTAINER) without --storage-provider is the
 * Local store. With allow_none, neither given gives *out = NULL (server, initialize). */
int setup_store(const Opts *o, int allow_none, Store **out);
/* setup_store for the store of the flags "<flag_prefix>storage-provider"... (flag_prefix "",
 * "source-" for copy's source: an empty provider, prefix or temp directory is then the
 * destination's, docs/go-tool.md §1.12; "secondary-" for the server's secondary store), whose
 * driver reads environment variables with env_prefix ("", "SOURCE_", "SECONDARY_"; docs/go-tool.md
 * §12). role names it in log lines ("source store"). Only the store of flag_prefix "" gets the
 * encryption keys (setup_keyring): the others are copied raw. */
int setup_store_as(const Opts *o, const char *flag_prefix, const char *env_prefix, const char *role,
                   int allow_none, Store **out);
/* The encryption keys from --encryption-key-file (ETCDBR_ENCRYPTION_KEY_FILE) or else the
 * variable ETCDBR_ENCRYPTION_KEYS (the same text; wiped from the environment once read), for a
 * command's stores; setup_store already gives its Store these (store_set_keyring). *out NULL when
 * neither is set; owned otherwise. Logs a clear error (never a key) and returns EXIT_USAGE for
 * both set or malformed keys, EXIT_FAIL for an unreadable file; warns when the file may be read
 * by group or others. The variable is gone after the first call: a command with two stores
 * (copy) calls setup_store once and gives the second store keyring_copy(store_keyring(first)). */
int setup_keyring(const Opts *o, Keyring **out);

/* Everything the server needs; EXIT_OK or EXIT_USAGE/EXIT_FAIL. server_teardown frees. */
int server_setup(const Opts *o, ServerSetup *out);
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
 * seconds since the last successful snapshot of this process, NaN before the first). */
void server_register_age_metrics(void);
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
