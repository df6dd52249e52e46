/* etcd_proc: a temporary etcd process on loopback for restore (delta replay) and tests.
 * Free ephemeral ports are chosen by binding port 0; the process gets its own process group so
 * it can be stopped with everything it started. */
#ifndef ETCDBR_ETCD_PROC_H
#define ETCDBR_ETCD_PROC_H

#include <stdint.h>
#include <sys/types.h>

typedef struct EtcdProc EtcdProc;

typedef struct EtcdProcConfig {
    const char *etcd_bin;      /* NULL = "etcd" from PATH (or $ETCDBR_ETCD_BIN) */
    const char *data_dir;      /* required */
    const char *name;          /* member name, NULL = "default" */
    int64_t quota_bytes;       /* --quota-backend-bytes, 0 = etcd default */
    int64_t max_request_bytes; /* --max-request-bytes, 0 = default */
    int64_t max_txn_ops;       /* --max-txn-ops, 0 = default */
    int unsafe_no_fsync;       /* pass --unsafe-no-fsync */
    const char *log_path;      /* etcd's stdout+stderr go here; NULL = /dev/null */
    int64_t ready_timeout_ms;  /* default 60000 */
    /* Optional, zero = unused (fields added after the first contract; append-only): */
    const char *const *extra_args; /* NULL-terminated extra etcd flags (borrowed), e.g. TLS */
    int client_https; /* clients on https://; pass --cert-file/--key-file in extra_args */
    const char *probe_cacert, *probe_cert, *probe_key; /* TLS files for the readiness probe
                                                         (no cacert = probe skips verification) */
    /* Go runtime settings for the child, 0 = inherited; GOMAXPROCS or GOGC already set in our
     * environment win (an operator's override). */
    int gomaxprocs;
    int gogc;
    int64_t snapshot_count;        /* --snapshot-count; 0 = 100000 */
    int backend_batch_interval_ms; /* --backend-batch-interval; 0 = etcd's default (100 ms) */
} EtcdProcConfig;

/* Starts etcd and waits until it answers Status. *out is owned (etcd_proc_stop frees it).
 * ERR_IO if it cannot start, ERR_TIMEOUT if it does not get ready (the process is killed). */
int etcd_proc_start(const EtcdProcConfig *cfg, EtcdProc **out);

/* Client URL "http://127.0.0.1:<port>" ("https://" with client_https) (borrowed). */
const char *etcd_proc_client_url(const EtcdProc *p);
pid_t etcd_proc_pid(const EtcdProc *p);

/* SIGTERM, wait up to 10 s, then SIGKILL; frees p. Returns 0 if etcd exited cleanly. NULL-safe. */
int etcd_proc_stop(EtcdProc *p);

#endif
