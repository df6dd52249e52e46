/* server_common: see server_common.h. */
#include "server_common.h"
#include "cmd.h"
#include "../backup/delta.h"
#include "../codec/crypt.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../server/metrics.h"
#include "../store/snapobj.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *nonempty(const char *v) {
    return v && *v ? v : NULL;
}

int setup_etcd_config(const Opts *o, EtcdConfig *out) {
    int64_t conn = opts_values(o)->etcd_connection_timeout_ms;
    int64_t snapt = opts_values(o)->etcd_snapshot_timeout_ms;
    if (conn <= 0 || snapt <= 0 || snapt < conn) {
        log_error("etcd timeouts must be > 0 and --etcd-snapshot-timeout >= "
                  "--etcd-connection-timeout");
        return EXIT_USAGE;
    }
    size_t n_ep = opts_values(o)->endpoints.n;
    const char *const *eps = opts_values(o)->endpoints.v;
    if (n_ep == 0) {
        log_error("--endpoints: at least one endpoint is needed");
        return EXIT_USAGE;
    }
    *out = (EtcdConfig){
        .endpoints = eps,
        .n_endpoints = n_ep,
        .cacert = nonempty(opts_values(o)->cacert),
        .cert = nonempty(opts_values(o)->cert),
        .key = nonempty(opts_values(o)->key),
        .insecure_skip_tls_verify = opts_values(o)->insecure_skip_tls_verify,
        .username = opts_values(o)->etcd_username,
        .password = opts_values(o)->etcd_password,
        .connection_timeout_ms = conn,
        .snapshot_timeout_ms = snapt,
        .defrag_timeout_ms = opts_values(o)->etcd_defrag_timeout_ms,
    };
    return EXIT_OK;
}

int setup_snapshotter_config(const Opts *o, SnapshotterConfig *sc, CronSchedule *defrag) {
    memset(sc, 0, sizeof *sc);
    int code = setup_etcd_config(o, &sc->etcd);
    if (code) return code;
    if (cron_parse(opts_values(o)->schedule, &sc->schedule)) {
        log_error("--schedule: %s", err_msg());
        return EXIT_USAGE;
    }
    if (defrag) {
        if (cron_parse(opts_values(o)->defragmentation_schedule, defrag)) {
            log_error("--defragmentation-schedule: %s", err_msg());
            return EXIT_USAGE;
        }
        sc->defrag_schedule = defrag;
    }
    sc->compression = COMPRESS_NONE;
    if (opts_values(o)->compress_snapshots &&
        compress_parse_policy(opts_values(o)->compression_policy, &sc->compression)) {
        log_error("--compression-policy: %s", err_msg());
        return EXIT_USAGE;
    }
    GzipWriterOptions gz = {.threads = (int)opts_values(o)->gzip_threads};
    if (compress_parse_gzip_mode(opts_values(o)->gzip_mode, &gz.mode)) {
        log_error("--gzip-mode: %s", err_msg());
        return EXIT_USAGE;
    }
    compress_set_gzip_defaults(&gz); /* parsed config, before the snapshotter's threads */
    int64_t mem = opts_values(o)->delta_snapshot_memory_limit;
    int64_t maxch = opts_values(o)->max_changes_per_delta_snapshot; /* >= 0: the table's range */
    sc->temp_dir = opts_values(o)->snapstore_temp_directory;
    sc->delta_period_ms = opts_values(o)->delta_snapshot_period_ms;
    sc->delta_memory_limit = mem < 1 ? 10485760u : (uint64_t)mem; /* Go: < 1 resets */
    sc->max_changes = (uint64_t)maxch;
    sc->backoff_multiplier = opts_values(o)->backoff_multiplier;
    sc->backoff_attempt_limit = opts_values(o)->backoff_attempt_limit;
    sc->backoff_max_ms = opts_values(o)->backoff_threshold_time_ms;
    sc->stop_drain_ms = opts_values(o)->final_delta_drain_timeout_ms;
    sc->gc_period_ms = opts_values(o)->garbage_collection_period_ms;
    sc->max_backups = (int)opts_values(o)->max_backups;
    sc->delta_retention_s = opts_values(o)->delta_snapshot_retention_period_ms / 1000;
    sc->resume = 1; /* snapshot and server: a crash loop must not stop backups (issue 7) */
    sc->abandon_other_histories = opts_values(o)->abandon_other_histories;
    if (gc_parse_policy(opts_values(o)->garbage_collection_policy, &sc->gc_policy)) {
        log_error("--garbage-collection-policy: %s", err_msg());
        return EXIT_USAGE;
    }
    if (sc->gc_policy == GC_LIMIT_BASED && sc->max_backups < 1) {
        log_error("--max-backups must be > 0 with the LimitBased policy");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int setup_restore_config(const Opts *o, RestoreConfig *rc, char **peer_urls_owned) {
    memset(rc, 0, sizeof *rc);
    *peer_urls_owned = NULL;
    /* ranges and allowed values (max-fetchers, quota, new-lease-ttl, revision, bump-revision,
     * auto-compaction-mode) are the option table's, checked before any command runs; the Go
     * tool's embedded-etcd flags are marked ignored there and warned about by opts_finish */
    int64_t fetchers = opts_values(o)->max_fetchers;
    int64_t lease_ttl_ms = opts_values(o)->new_lease_ttl_ms;
    int64_t target_rev = 0, target_time = 0, bump = 0;
    int mark = 0;
    if (opts_has(o, "revision")) {
        target_rev = opts_values(o)->revision;
        bump = opts_values(o)->bump_revision;
        mark = opts_values(o)->mark_compacted;
        const char *t = opts_values(o)->time;
        if (setup_parse_time("time", t, &target_time)) return EXIT_USAGE;
        if (*t && target_rev) {
            log_error("--revision and --time exclude each other");
            return EXIT_USAGE;
        }
        if ((bump > 0) != (mark != 0)) {
            log_error("--bump-revision and --mark-compacted go together (as in etcdutl snapshot "
                      "restore)");
            return EXIT_USAGE;
        }
    }
    const char *etcdutl = opts_values(o)->etcdutl_bin;
    if (*etcdutl && setup_check_program("--etcdutl-bin", etcdutl)) return EXIT_USAGE;
    size_t n_urls = opts_values(o)->initial_advertise_peer_urls.n;
    const char *const *urls = opts_values(o)->initial_advertise_peer_urls.v;
    size_t len = 1;
    for (size_t i = 0; i < n_urls; i++)
        len += strlen(urls[i]) + 1;
    char *peer = calloc(1, len);
    if (!peer) return EXIT_FAIL;
    for (size_t i = 0; i < n_urls; i++) {
        if (i) strcat(peer, ",");
        strcat(peer, urls[i]);
    }
    *peer_urls_owned = peer;
    *rc = (RestoreConfig){
        .data_dir = opts_values(o)->data_dir,
        .temp_dir = opts_values(o)->restoration_temp_snapshots_dir,
        .name = opts_values(o)->name,
        .initial_cluster = opts_values(o)->initial_cluster,
        .initial_cluster_token = opts_values(o)->initial_cluster_token,
        .initial_advertise_peer_urls = peer,
        .skip_hash_check = opts_values(o)->skip_hash_check,
        .max_fetchers = (int)fetchers,
        .etcdutl_bin = opts_values(o)->etcdutl_bin,
        .target_revision = target_rev,
        .target_time_ns = target_time,
        .bump_revision = bump,
        .mark_compacted = mark,
        .new_lease_ttl = lease_ttl_ms / 1000,
        .quota_bytes = opts_values(o)->embedded_etcd_quota_bytes,
    };
    return EXIT_OK;
}

int setup_parse_time(const char *flag, const char *text, int64_t *ns) {
    if (!*text) return EXIT_OK;
    if (delta_parse_time(text, ns)) {
        log_error("--%s: %s", flag, err_msg());
        return EXIT_USAGE;
    }
    if (*ns <= 0) *ns = 1; /* 0 means no target time */
    return EXIT_OK;
}

int setup_check_program(const char *flag, const char *bin) {
    if (fs_check_executable(bin) == 0) return EXIT_OK;
    log_error("%s: %s (the program must exist and be executable; checked before anything is "
              "downloaded or started)",
              flag, err_msg());
    return EXIT_USAGE;
}

int setup_check_restore_test_etcd(const Opts *o) {
    const char *bin = opts_values(o)->restore_test_etcd_bin;
    if (*bin) return setup_check_program("--restore-test-etcd-bin", bin);
    const char *env = getenv("ETCDBR_ETCD_BIN");
    if (env && *env)
        return setup_check_program("etcd of the restore test (ETCDBR_ETCD_BIN; "
                                   "--restore-test-etcd-bin sets another)",
                                   env);
    return setup_check_program("etcd of the restore test (etcd from $PATH; "
                               "--restore-test-etcd-bin sets another)",
                               "etcd");
}

#define KEYS_ENV "ETCDBR_ENCRYPTION_KEYS"

const MemberFlags *setup_member_flags(const Opts *o, const char *peer_urls, MemberFlags *out) {
    *out = (MemberFlags){
        .name = opts_values(o)->name,
        .name_set = opts_given(o)->name,
        .peer_urls = peer_urls,
        .peer_urls_set = opts_given(o)->initial_advertise_peer_urls,
        .initial_cluster = opts_values(o)->initial_cluster,
        .initial_cluster_set = opts_given(o)->initial_cluster,
    };
    out->service_endpoints = opts_values(o)->service_endpoints.v;
    out->n_service_endpoints = opts_values(o)->service_endpoints.n;
    return out;
}

int setup_keyring(const Opts *o, Keyring **out) {
    *out = NULL;
    const char *file =
        opts_has(o, "encryption-key-file") ? opts_values(o)->encryption_key_file : "";
    char *env = getenv(KEYS_ENV);
    int rc = 0, code = EXIT_OK;
    if (env && !*env) env = NULL;
    if (*file && env) {
        log_error("encryption keys: both --encryption-key-file (or ETCDBR_ENCRYPTION_KEY_FILE) and "
                  "%s are set; give the keys one way",
                  KEYS_ENV);
        code = EXIT_USAGE;
    } else if (*file) {
        unsigned mode = 0;
        rc = keyring_load_file(file, out, &mode);
        if (!rc && (mode & 077))
            log_warn("key file %s may be read by group or others (mode %04o): chmod 600 it", file,
                     mode);
    } else if (env) {
        rc = keyring_parse(env, strlen(env), KEYS_ENV, out);
    }
    if (env) {
        /* the keys leave the environment: etcd and etcdutl children must not inherit them, and
         * the process's initial environment (/proc/<pid>/environ) no longer shows them */
        OPENSSL_cleanse(env, strlen(env));
        unsetenv(KEYS_ENV);
    }
    if (rc) {
        log_error("encryption keys: %s", err_msg());
        code = rc == ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
    }
    if (code) {
        keyring_free(*out);
        *out = NULL;
        return code;
    }
    if (*out)
        log_info("encryption: %zu key(s) from %s; new snapshots are encrypted with key id \"%s\"",
                 keyring_count(*out), *file ? file : KEYS_ENV, keyring_id(*out, 0));
    return EXIT_OK;
}

/* The STORE flag group's names, once per prefix ("", "source-", "secondary-"). */
typedef struct {
    const char *prefix, *provider, *container, *endpoint, *store_prefix, *temp_dir, *min_chunk,
        *parallel;
} StoreFlagNames;
static const StoreFlagNames STORE_FLAG_NAMES[] = {
    {"", "storage-provider", "store-container", "store-endpoint-override", "store-prefix",
     "snapstore-temp-directory", "min-chunk-size", "max-parallel-chunk-uploads"},
    {"source-", "source-storage-provider", "source-store-container",
     "source-store-endpoint-override", "source-store-prefix", "source-snapstore-temp-directory",
     "source-min-chunk-size", "source-max-parallel-chunk-uploads"},
    {"secondary-", "secondary-storage-provider", "secondary-store-container",
     "secondary-store-endpoint-override", "secondary-store-prefix",
     "secondary-snapstore-temp-directory", "secondary-min-chunk-size",
     "secondary-max-parallel-chunk-uploads"},
};

int setup_store_as(const Opts *o, const char *flag_prefix, const char *env_prefix, const char *role,
                   int allow_none, Store **out) {
    *out = NULL;
    const StoreFlagNames *f = &STORE_FLAG_NAMES[0];
    for (size_t i = 0; i < sizeof STORE_FLAG_NAMES / sizeof STORE_FLAG_NAMES[0]; i++)
        if (!strcmp(flag_prefix, STORE_FLAG_NAMES[i].prefix)) f = &STORE_FLAG_NAMES[i];
    int source = !strcmp(f->prefix, "source-");
    const char *provider = opt_str(o, f->provider);
    const char *container = opt_str(o, f->container);
    const char *prefix = opt_str(o, f->store_prefix);
    const char *temp_dir = opt_str(o, f->temp_dir);
    /* copy's source completion (docs/go-tool.md §1.12): an empty provider, prefix or temp directory
     * is the destination's */
    if (source && !*provider) provider = opts_values(o)->storage_provider;
    if (source && !*prefix && !opts_given(o)->source_store_prefix)
        prefix = opts_values(o)->store_prefix; /* --source-store-prefix= names the root */
    if (source && !*temp_dir) temp_dir = opts_values(o)->snapstore_temp_directory;
    /* the encryption keys belong to the command's own store; copy's source and the secondary
     * store are copied raw and need none */
    Keyring *kr = NULL;
    if (!*f->prefix) {
        int code = setup_keyring(o, &kr);
        if (code) return code;
    }
    if (!*f->prefix && opts_has(o, "max-delta-size")) { /* commands that decode snapshots */
        snapobj_set_limits((uint64_t)opts_values(o)->max_delta_size,
                           (uint64_t)opts_values(o)->max_full_size);
        fs_set_free_reserve((uint64_t)opts_values(o)->min_free_disk_bytes,
                            (int)opts_values(o)->min_free_disk_percent);
    }
    /* a container alone means Local, as the help says and as `snapshot` and `restore` take it */
    if (allow_none && !*provider && !*container) {
        if (kr) log_warn("encryption keys given but no store: they are not used");
        keyring_free(kr);
        return EXIT_OK;
    }
    StoreConfig stc = {
        .provider = *provider ? provider : "Local",
        .container = container,
        .prefix = prefix,
        .temp_dir = temp_dir,
        .endpoint_override = opt_str(o, f->endpoint),
        .min_chunk_size = opt_int(o, f->min_chunk),
        .max_parallel_chunk_uploads = (int)opt_int(o, f->parallel),
        .env_prefix = env_prefix,
    };
    int rc = store_open(&stc, out);
    if (rc) {
        keyring_free(kr);
        log_error("%s: %s", *f->prefix ? role : "store", err_msg());
        return rc == ERR_INVALID || rc == ERR_UNSUPPORTED ? EXIT_USAGE : EXIT_FAIL;
    }
    store_set_keyring(*out, kr);
    log_info("%s: %s", role, store_describe(*out));
    return EXIT_OK;
}

int setup_store(const Opts *o, int allow_none, Store **out) {
    return setup_store_as(o, "", "", "snapshot store", allow_none, out);
}

int server_setup(const Opts *o, ServerSetup *s) {
    memset(s, 0, sizeof *s);
    int code = setup_snapshotter_config(o, &s->snap, &s->defrag);
    if (!code) code = setup_restore_config(o, &s->restore, &s->peer_urls);
    if (!code) code = setup_store(o, 1, &s->store);
    if (code) {
        server_teardown(s);
        return code;
    }
    if (!code && opts_values(o)->secondary_backup_sync_enabled) {
        code = setup_store_as(o, "secondary-", "SECONDARY_", "secondary store", 1, &s->secondary);
        if (!code && !s->secondary) {
            log_error("--secondary-backup-sync-enabled needs a secondary store: give "
                      "--secondary-storage-provider or --secondary-store-container");
            code = EXIT_USAGE;
        } else if (!code && !s->store) {
            log_error("--secondary-backup-sync-enabled needs a snapshot store to copy from");
            code = EXIT_USAGE;
        } else if (!code && strcmp(store_describe(s->store), store_describe(s->secondary)) == 0) {
            log_error("the secondary store is the snapshot store itself (%s)",
                      store_describe(s->store));
            code = EXIT_USAGE;
        }
        s->secondary_period_ms = opts_values(o)->secondary_backup_sync_period_ms;
        if (code) {
            server_teardown(s);
            return code;
        }
    } else if (!code && (*opts_values(o)->secondary_storage_provider ||
                         *opts_values(o)->secondary_store_container)) {
        log_warn("a secondary store is configured but --secondary-backup-sync-enabled is false: "
                 "nothing is copied to it");
    }
    s->has_store = s->store != NULL;
    s->snap.store = s->store;
    s->snap.resume = 1;
    s->restore.store = s->store;
    s->leader_timeout_ms = opts_values(o)->etcd_connection_timeout_leader_election_ms;
    s->service_endpoints = opts_values(o)->service_endpoints.v;
    s->service_endpoints_n = opts_values(o)->service_endpoints.n;
    /* the Go tool's strict "> 1s" for both, which the table's inclusive bounds cannot say */
    if (s->leader_timeout_ms <= 1000 || opts_values(o)->reelection_period_ms <= 1000) {
        log_error("--etcd-connection-timeout-leader-election and --reelection-period must be "
                  "more than 1s");
        server_teardown(s);
        return EXIT_USAGE;
    }
    opts_log_effective(o, "server");
    LeaseRenewerConfig lc = {
        .snapshot_leases = opts_values(o)->enable_snapshot_lease_renewal,
        .member_lease = opts_values(o)->enable_member_lease_renewal,
        .full_name = opts_values(o)->full_snapshot_lease_name,
        .delta_name = opts_values(o)->delta_snapshot_lease_name,
        .heartbeat_ms = opts_values(o)->k8s_heartbeat_duration_ms,
        .member_timeout_ms = opts_values(o)->etcd_connection_timeout_ms,
    };
    if ((code = lease_renewer_new(&lc, &s->leases)) != EXIT_OK) {
        server_teardown(s);
        return code;
    }
    return EXIT_OK;
}
