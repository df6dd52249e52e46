/* sidecar: `etcdbrctl server` and `run` once their flags are read: the HTTP API, the
 * initialization state machine (validate the data dir, restore it when needed), and, while this
 * member's etcd is the raft leader, the snapshotter with GC, scheduled defragmentation, the
 * secondary store's sync and scheduled verification; member rejoin and promotion, the start-up
 * peer URL check and Kubernetes Leases (docs/server.md, docs/cluster.md, docs/kubernetes.md).
 * The modules beside it are its parts: member.h, lease_renewer.h, leader_proxy.h, peer_url.h,
 * secondary_sync.h, server_verify.h, etcd_config.h, and setup.h (its configuration). */
#ifndef ETCDBR_SIDECAR_H
#define ETCDBR_SIDECAR_H

#include "member.h"
#include "../server/auth_token.h"
#include "server_verify.h"
#include "setup.h"

#include <stdatomic.h>
#include <stdint.h>

/* The flags the sidecar reads besides its setup (strings borrowed for the whole run). */
typedef struct SidecarOptions {
    int64_t reelection_ms;        /* --reelection-period: leader check period */
    int max_invalid_copies;       /* --max-invalid-copies (initializer) */
    const char *server_address;   /* --server-address ("" = every address) */
    int server_port;              /* --server-port */
    const char *server_cert;      /* --server-cert ("" with server_key "": plain HTTP) */
    const char *server_key;       /* --server-key */
    const char *server_client_ca; /* --server-client-ca-file ("": no client certificates) */
    AuthToken *server_token;      /* --server-auth-token-file, NULL: none (borrowed) */
    int use_etcd_wrapper;         /* --use-etcd-wrapper */
    int enable_profiling;         /* --enable-profiling: /debug/pprof/ (profiling.h) */
    MemberFlags member;           /* this member's flags (member.h) */
    ServerVerifyConfig verify;    /* --verify-schedule and its restore test */
    atomic_int *stop;             /* set by SIGTERM/SIGINT: the run ends cleanly */
} SidecarOptions;

/* Runs the sidecar until *so->stop: with etcd_argv (run mode, NULL-terminated, borrowed) it also
 * starts etcd as its child after initializing its data dir, restarts it after a crash and stops
 * it at the end. setup (from server_setup, its storage the caller's) is torn down
 * (server_teardown) before this returns, on every path. Threads: the HTTP server's event loop and
 * workers, a leader-check loop on the calling thread, the snapshotter thread while leading, one
 * initialization thread at a time; only the calling thread takes stop signals. Returns EXIT_OK
 * after a clean stop, or EXIT_USAGE / EXIT_FAIL (logged) when it cannot start. */
int sidecar_run(ServerSetup *setup, const SidecarOptions *so, char **etcd_argv);

#endif
