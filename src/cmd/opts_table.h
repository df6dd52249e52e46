/* opts_table: the one table of command-line options, as X-macro rows
 *   OPT(field, type, {OptDef initializer})
 * (OptDef in opts.h: name, short name, type, default, environment variable, commands, secret,
 * help, support, then range, allowed values and IGNORED_IN). Included by opts.c for the table
 * and by opts.h for the typed OptValues struct (a field per row: strings const char *, bools
 * int, ints int64_t, durations int64_t <field>_ms, lists OptList), so a flag added here is a
 * field everywhere, in --help and in docs/flags.md (etcdbrctl __flags-md). The identifiers the
 * initializers use (ACTIVE, ONE_OF, STORE, ...) are opts.c's; this file has no include guard
 * on purpose. */
/* logging */
OPT(log_level, OPT_STRING,
    {"log-level", 0, OPT_STRING, "info", "ETCDBR_LOG_LEVEL", ALL, 0,
     "log level (logrus numbers: 2 error, 3 warn, 4 info, 5 debug, 6 trace)", ACTIVE,
     ONE_OF(LOG_LEVELS), .choices_nocase = 1})
OPT(log_format, OPT_STRING,
    {"log-format", 0, OPT_STRING, "text", NULL, ALL, 0, "log format", ACTIVE, ONE_OF(LOG_FORMATS)})
/* ETCD connection (docs/go-tool.md §1.1) */
OPT(endpoints, OPT_LIST,
    {"endpoints", 'e', OPT_LIST, "http://127.0.0.1:2379", NULL, ETCD, 0,
     "comma-separated etcd client endpoints; failover in order", ACTIVE})
OPT(service_endpoints, OPT_LIST,
    {"service-endpoints", 0, OPT_LIST, "", NULL, ETCD & ~CMD_VERIFY, 0,
     "endpoints reaching etcd through a Service; also how a member finds the others to rejoin "
     "or join as a learner (docs/cluster.md)",
     ACTIVE})
OPT(etcd_username, OPT_STRING,
    {"etcd-username", 0, OPT_STRING, "", "ETCD_USERNAME", ETCD, 0, "etcd user name", ACTIVE})
OPT(etcd_password, OPT_STRING,
    {"etcd-password", 0, OPT_STRING, "", "ETCD_PASSWORD", ETCD, 1, "etcd password", ACTIVE})
OPT(etcd_connection_timeout, OPT_DURATION,
    {"etcd-connection-timeout", 0, OPT_DURATION, "30s", NULL, ETCD, 0,
     "timeout of short etcd calls", ACTIVE, AT_LEAST(1)})
OPT(etcd_snapshot_timeout, OPT_DURATION,
    {"etcd-snapshot-timeout", 0, OPT_DURATION, "15m", NULL, ETCD | CMD_COMPACT, 0,
     "timeout of a whole full snapshot stream; not below --etcd-connection-timeout", ACTIVE,
     AT_LEAST(1),
     IGNORED_IN(CMD_COMPACT, "compact builds the snapshot offline; it takes none from etcd")})
OPT(etcd_defrag_timeout, OPT_DURATION,
    {"etcd-defrag-timeout", 0, OPT_DURATION, "8m", NULL, ETCD | CMD_COMPACT, 0,
     "timeout of defragmenting one member", ACTIVE, AT_LEAST(1),
     IGNORED_IN(CMD_COMPACT, "compact writes the db fresh, without free pages")})
OPT(insecure_transport, OPT_BOOL,
    {"insecure-transport", 0, OPT_BOOL, "true", NULL, ETCD, 0,
     "the Go tool's switch between plain HTTP/2 and TLS to etcd",
     IGNORED("the endpoint decides: http:// is plain, https:// is TLS, and an endpoint without "
             "a scheme is TLS when --cacert, --cert or --key is given")})
OPT(insecure_skip_tls_verify, OPT_BOOL,
    {"insecure-skip-tls-verify", 0, OPT_BOOL, "false", NULL, ETCD, 0,
     "do not verify etcd's server certificate (the Go tool defaults to true; we do not)", ACTIVE})
OPT(cacert, OPT_STRING,
    {"cacert", 0, OPT_STRING, "", NULL, ETCD, 0, "CA bundle to verify etcd's certificate", ACTIVE})
OPT(cert, OPT_STRING,
    {"cert", 0, OPT_STRING, "", NULL, ETCD, 0, "client certificate for etcd", ACTIVE})
OPT(key, OPT_STRING, {"key", 0, OPT_STRING, "", NULL, ETCD, 0, "client key for etcd", ACTIVE})
/* STORE (docs/go-tool.md §1.2) */
OPT(storage_provider, OPT_STRING,
    {"storage-provider", 0, OPT_STRING, "", NULL, STORE, 0,
     "snapshot store provider (empty = Local; server, run and initialize then have no store, "
     "and take no backups, only when --store-container is empty too); a provider this build "
     "does not support yet is refused at start",
     ACTIVE, ONE_OF(PROVIDERS)})
OPT(store_container, OPT_STRING,
    {"store-container", 0, OPT_STRING, "", "STORAGE_CONTAINER", STORE, 0,
     "bucket/container; Local: directory (relative = relative to $HOME; default default.bkp)",
     ACTIVE})
OPT(store_endpoint_override, OPT_STRING,
    {"store-endpoint-override", 0, OPT_STRING, "", NULL, STORE, 0,
     "object store endpoint URL (scheme://host[:port]); honoured by S3 (then path-style) and ABS "
     "(then <endpoint>/<account>/<container>, as for azurite); OSS ignores it with a warning (its "
     "endpoint is storageEndpoint in the credentials, as in the Go tool)",
     ACTIVE})
OPT(store_prefix, OPT_STRING,
    {"store-prefix", 0, OPT_STRING, "", NULL, STORE, 0,
     "key prefix; objects are written under <prefix>/v2/", ACTIVE})
OPT(max_parallel_chunk_uploads, OPT_INT,
    {"max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, STORE, 0,
     "parts (ABS: blocks) of one object store upload in flight at once (S3, ECS, OCS, ABS); "
     "memory is about "
     "(this + 1) x the part size",
     ACTIVE, BETWEEN(1, MAX_PARALLEL)})
OPT(min_chunk_size, OPT_INT,
    {"min-chunk-size", 0, OPT_INT, "5242880", NULL, STORE, 0,
     "part size in bytes of an object store multipart upload (S3, ECS, OCS: doubled after "
     "every 1000 parts; ABS: the fixed block size); smaller objects go in one request",
     ACTIVE, BETWEEN(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)})
OPT(snapstore_temp_directory, OPT_STRING,
    {"snapstore-temp-directory", 0, OPT_STRING, "/tmp", NULL, STORE, 0,
     "staging directory for snapshot and delta spool files", ACTIVE})
OPT(encryption_key_file, OPT_STRING,
    {"encryption-key-file", 0, OPT_STRING, "", "ETCDBR_ENCRYPTION_KEY_FILE", STORE, 0,
     "file of client-side encryption keys, one \"<key-id> <base64 of 32 bytes>\" per line ('#' "
     "starts a comment): the first key encrypts new snapshots (AES-256-GCM; names get .enc, "
     "which the Go tool cannot read), every key decrypts; or give the same text in "
     "ETCDBR_ENCRYPTION_KEYS (keys never go on the command line); docs/encryption.md",
     ACTIVE})
/* SNAPSHOTTER (docs/go-tool.md §1.3) */
OPT(schedule, OPT_STRING,
    {"schedule", 's', OPT_STRING, "0 */1 * * *", NULL, SNAP, 0, "cron schedule of full snapshots",
     ACTIVE})
OPT(delta_snapshot_period, OPT_DURATION,
    {"delta-snapshot-period", 0, OPT_DURATION, "20s", NULL, SNAP, 0,
     "period of delta snapshots; below 1s disables them", ACTIVE})
OPT(delta_snapshot_memory_limit, OPT_INT,
    {"delta-snapshot-memory-limit", 0, OPT_INT, "10485760", NULL, SNAP, 0,
     "take a delta as soon as this many bytes of events are pending (0 = the default)", ACTIVE,
     AT_LEAST(0)})
OPT(max_changes_per_delta_snapshot, OPT_INT,
    {"max-changes-per-delta-snapshot", 0, OPT_INT, "0", NULL, SNAP, 0,
     "take a delta as soon as this many events are pending (0 = no limit)", ACTIVE, AT_LEAST(0)})
OPT(garbage_collection_period, OPT_DURATION,
    {"garbage-collection-period", 0, OPT_DURATION, "1m", NULL, SNAP, 0,
     "garbage collection period; 1s or less disables it", ACTIVE})
OPT(garbage_collection_policy, OPT_STRING,
    {"garbage-collection-policy", 0, OPT_STRING, "Exponential", NULL, SNAP, 0,
     "which full snapshots garbage collection keeps", ACTIVE, ONE_OF(GC_POLICIES)})
OPT(max_backups, OPT_INT,
    {"max-backups", 'm', OPT_INT, "7", NULL, SNAP, 0,
     "full snapshots kept by LimitBased (which needs at least 1)", ACTIVE, BETWEEN(0, MAX_COUNT)})
OPT(delta_snapshot_retention_period, OPT_DURATION,
    {"delta-snapshot-retention-period", 0, OPT_DURATION, "0s", NULL, SNAP, 0,
     "deltas younger than this are never removed by garbage collection", ACTIVE})
OPT(abandon_other_histories, OPT_BOOL,
    {"abandon-other-histories", 0, OPT_BOOL, "false", NULL, SNAP, 0,
     "when the store's latest backups belong to another cluster or end after etcd's revision, "
     "start a new backup history instead of refusing; the other backups are kept but never "
     "restored or garbage-collected (docs/store-history.md)",
     ACTIVE})
OPT(defragmentation_schedule, OPT_STRING,
    {"defragmentation-schedule", 0, OPT_STRING, "0 0 */3 * *", NULL, SNAP, 0,
     "cron schedule of defragmentation", ACTIVE})
/* COMPRESSION (docs/go-tool.md §1.4) */
OPT(compress_snapshots, OPT_BOOL,
    {"compress-snapshots", 0, OPT_BOOL, "true", NULL, SNAP, 0, "compress full and delta snapshots",
     ACTIVE})
OPT(compression_policy, OPT_STRING,
    {"compression-policy", 0, OPT_STRING, "gzip", NULL, SNAP, 0, "compression of new snapshots",
     ACTIVE, ONE_OF(COMPRESSION_POLICIES)})
OPT(gzip_mode, OPT_STRING,
    {"gzip-mode", 0, OPT_STRING, "parallel", NULL, SNAP, 0,
     "how the gzip policy writes: parallel compresses 1 MiB blocks as separate gzip members on "
     "--gzip-threads threads (libdeflate, level 6); single writes one member from one zlib stream "
     "on one thread, as the Go tool does. The Go tool reads both (docs/compression.md)",
     ACTIVE, ONE_OF(GZIP_MODES)})
OPT(gzip_threads, OPT_INT,
    {"gzip-threads", 0, OPT_INT, "0", NULL, SNAP, 0,
     "threads compressing gzip blocks with --gzip-mode=parallel; 0 = the CPUs this process may "
     "use, at most 4",
     ACTIVE, BETWEEN(0, 64)})
/* BACKOFF (docs/go-tool.md §1.5) */
OPT(backoff_multiplier, OPT_INT,
    {"backoff-multiplier", 0, OPT_INT, "2", NULL, SNAP, 0,
     "factor by which the retry delay after a failed snapshot grows (1 s x multiplier, then x "
     "multiplier per retry)",
     ACTIVE, BETWEEN(1, 1000)})
OPT(backoff_attempt_limit, OPT_INT,
    {"backoff-attempt-limit", 0, OPT_INT, "6", NULL, SNAP, 0,
     "retries with a growing delay before every retry waits --backoff-threshold-time", ACTIVE,
     BETWEEN(1, 1000)})
OPT(backoff_threshold_time, OPT_DURATION,
    {"backoff-threshold-time", 0, OPT_DURATION, "128s", NULL, SNAP, 0,
     "longest delay between retries after a failed snapshot", ACTIVE, AT_LEAST(1)})
OPT(final_delta_drain_timeout, OPT_DURATION,
    {"final-delta-drain-timeout", 0, OPT_DURATION, "30s", NULL, SNAP, 0,
     "on SIGTERM/SIGINT, how long the last delta may wait for the watch to reach the revision "
     "etcd had at the signal; falling short is logged, counted and exits non-zero",
     ACTIVE, AT_LEAST(1)})
/* RESTORE (docs/go-tool.md §1.6) */
OPT(initial_cluster, OPT_STRING,
    {"initial-cluster", 0, OPT_STRING, "default=http://localhost:2380", NULL, RESTORE, 0,
     "initial cluster of the restored member set", ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)})
OPT(initial_cluster_token, OPT_STRING,
    {"initial-cluster-token", 0, OPT_STRING, "etcd-cluster", NULL, RESTORE, 0,
     "initial cluster token", ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)})
OPT(data_dir, OPT_STRING,
    {"data-dir", 'd', OPT_STRING, "default.etcd", NULL, RESTORE, 0,
     "data dir to restore into (restore: {name} in it is replaced by the member's name)", ACTIVE,
     IGNORED_IN(CMD_COMPACT, NO_MEMBER)})
OPT(restoration_temp_snapshots_dir, OPT_STRING,
    {"restoration-temp-snapshots-dir", 0, OPT_STRING, "default.restoration.tmp", NULL, RESTORE, 0,
     "scratch directory for downloaded snapshots (made when missing and removed afterwards; an "
     "existing one is kept)",
     ACTIVE})
OPT(initial_advertise_peer_urls, OPT_LIST,
    {"initial-advertise-peer-urls", 0, OPT_LIST, "http://localhost:2380", NULL, RESTORE, 0,
     "peer URLs of the restored member", ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)})
OPT(name, OPT_STRING,
    {"name", 0, OPT_STRING, "default", NULL, RESTORE, 0, "member name", ACTIVE,
     IGNORED_IN(CMD_COMPACT, NO_MEMBER)})
OPT(skip_hash_check, OPT_BOOL,
    {"skip-hash-check", 0, OPT_BOOL, "false", NULL, RESTORE, 0,
     "accept a full snapshot without its sha256 trailer", ACTIVE})
OPT(max_fetchers, OPT_INT,
    {"max-fetchers", 0, OPT_INT, "6", NULL, RESTORE | CMD_VERIFY | INSPECT, 0,
     "parallel delta downloads", ACTIVE, BETWEEN(1, MAX_PARALLEL)})
/* etcdbr's bounds on what a snapshot object may make us write (docs/restore.md) */
OPT(max_delta_size, OPT_INT,
    {"max-delta-size", 0, OPT_INT, "1073741824", NULL, RESTORE | CMD_VERIFY | INSPECT, 0,
     "largest a delta snapshot may decompress to, in bytes; a larger one (a decompression bomb) "
     "is refused, naming it",
     ACTIVE, AT_LEAST(1)})
OPT(max_full_size, OPT_INT,
    {"max-full-size", 0, OPT_INT, "68719476736", NULL, RESTORE | CMD_VERIFY | INSPECT, 0,
     "largest a full snapshot may decompress to, in bytes (db plus its 32-byte hash)", ACTIVE,
     AT_LEAST(1)})
OPT(min_free_disk_bytes, OPT_INT,
    {"min-free-disk-bytes", 0, OPT_INT, "1073741824", NULL, RESTORE | CMD_VERIFY | INSPECT, 0,
     "free bytes that spool, download and restored db files must leave on their file system "
     "(the larger of this and --min-free-disk-percent; both 0: no reserve)",
     ACTIVE, AT_LEAST(0)})
OPT(min_free_disk_percent, OPT_INT,
    {"min-free-disk-percent", 0, OPT_INT, "5", NULL, RESTORE | CMD_VERIFY | INSPECT, 0,
     "percent of the file system's size that spool, download and restored db files must leave "
     "free (see --min-free-disk-bytes)",
     ACTIVE, BETWEEN(0, 50)})
OPT(max_call_send_message_size, OPT_INT,
    {"max-call-send-message-size", 0, OPT_INT, "10485760", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS), AT_LEAST(1)})
OPT(max_request_bytes, OPT_INT,
    {"max-request-bytes", 0, OPT_INT, "10485760", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS), AT_LEAST(0)})
OPT(max_txn_ops, OPT_INT,
    {"max-txn-ops", 0, OPT_INT, "10240", NULL, RESTORE, 0, "the Go tool's embedded-etcd setting",
     IGNORED(NO_ETCD_RUNS), AT_LEAST(0)})
OPT(embedded_etcd_quota_bytes, OPT_INT,
    {"embedded-etcd-quota-bytes", 0, OPT_INT, "8589934592", NULL, RESTORE, 0,
     "warn when the restored db is larger than this many bytes (etcd's --quota-backend-bytes "
     "must then be raised to start on it)",
     ACTIVE, AT_LEAST(1)})
OPT(auto_compaction_mode, OPT_STRING,
    {"auto-compaction-mode", 0, OPT_STRING, "periodic", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS), ONE_OF(COMPACTION_MODES)})
OPT(auto_compaction_retention, OPT_STRING,
    {"auto-compaction-retention", 0, OPT_STRING, "30m", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS)})
OPT(etcd_bin, OPT_STRING,
    {"etcd-bin", 0, OPT_STRING, "", "ETCDBR_ETCD_BIN", RESTORE, 0,
     "etcd binary of the restore (kept so that existing scripts run)", IGNORED(NO_ETCD_RUNS)})
OPT(max_invalid_copies, OPT_INT,
    {"max-invalid-copies", 0, OPT_INT, "3", NULL, CMD_SERVER | CMD_INITIALIZE, 0,
     "copies of invalid data dirs kept aside as <data-dir>.invalid.<UTC time> (marked as "
     "etcdbr's); beyond this many the oldest marked copy is removed, each removal logged; 0 = "
     "keep all",
     ACTIVE, AT_LEAST(0)})
OPT(etcdutl_bin, OPT_STRING,
    {"etcdutl-bin", 0, OPT_STRING, "", "ETCDBR_ETCDUTL_BIN", RESTORE | CMD_VERIFY, 0,
     "fallback, off by default: have this etcdutl (3.5+) or etcdctl (3.4) write the member dir "
     "with `snapshot restore` instead of etcdbr (docs/member-dir.md); unset, no etcd binary is "
     "needed",
     ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)})
/* point in time and revision bump (restore and initialize; docs/restore.md) */
OPT(revision, OPT_INT,
    {"revision", 0, OPT_INT, "0", NULL, CMD_RESTORE | CMD_INITIALIZE | CMD_GET | CMD_HISTORY, 0,
     "the state at this exact revision (restore, initialize, get: the newest full snapshot at or "
     "before it plus the deltas up to it; history: the set that holds it); 0 = the latest "
     "revision in the store",
     ACTIVE, AT_LEAST(0)})
OPT(time, OPT_STRING,
    {"time", 0, OPT_STRING, "", NULL, CMD_RESTORE | CMD_INITIALIZE | CMD_GET | CMD_HISTORY, 0,
     "the last revision whose events were recorded at or before this RFC 3339 time "
     "(e.g. 2026-12-01T14:30:00Z); excludes --revision",
     ACTIVE})
OPT(bump_revision, OPT_INT,
    {"bump-revision", 0, OPT_INT, "0", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "add this many revisions after the restored one (as etcdutl snapshot restore "
     "--bump-revision); needs --mark-compacted",
     ACTIVE, AT_LEAST(0)})
OPT(mark_compacted, OPT_BOOL,
    {"mark-compacted", 0, OPT_BOOL, "false", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "with --bump-revision: compact at the bumped revision, so watchers of older revisions get "
     "\"compacted\" instead of silently missing events",
     ACTIVE})
OPT(all_members, OPT_BOOL,
    {"all-members", 0, OPT_BOOL, "false", NULL, CMD_RESTORE, 0,
     "restore every member of --initial-cluster from one download of one set, each into "
     "--data-dir with {name} replaced by its name (docs/runbook-quorum-loss.md); --name and "
     "--initial-advertise-peer-urls then come from --initial-cluster",
     ACTIVE})
OPT(new_lease_ttl, OPT_DURATION,
    {"new-lease-ttl", 0, OPT_DURATION, "1h", NULL, RESTORE, 0,
     "TTL given to a lease granted after the full snapshot when its delta does not record the "
     "TTL (deltas of the Go tool); keys keep their lease either way",
     ACTIVE, AT_LEAST(1000)})
/* server (docs/go-tool.md §1.7) */
OPT(config_file, OPT_STRING,
    {"config-file", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "YAML file in the Go tool's format (docs/config-file.md); flags and environment win over it",
     ACTIVE})
OPT(server_port, OPT_INT,
    {"server-port", 'p', OPT_INT, "8080", NULL, CMD_SERVER, 0,
     "HTTP(S) port, all interfaces (0 = any free port)", ACTIVE, BETWEEN(0, 65535)})
OPT(server_address, OPT_STRING,
    {"server-address", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "IPv4 or IPv6 address the HTTP(S) server listens on; empty = all interfaces, IPv6 and IPv4 "
     "(as the Go tool)",
     ACTIVE})
OPT(enable_profiling, OPT_BOOL,
    {"enable-profiling", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "serve profiling documents under /debug/pprof/ (JSON, or text with ?format=text): memory "
     "and heap, threads and their states, open fds, store requests in flight, time per phase "
     "of the last snapshots and restore; they need the token or client certificate when "
     "--server-auth-token-file or --server-client-ca-file asks for one",
     ACTIVE})
OPT(server_cert, OPT_STRING,
    {"server-cert", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "TLS certificate of the HTTP server; with --server-key the server speaks HTTPS", ACTIVE})
OPT(server_key, OPT_STRING,
    {"server-key", 0, OPT_STRING, "", NULL, CMD_SERVER, 0, "TLS key of the HTTP server", ACTIVE})
OPT(server_client_ca_file, OPT_STRING,
    {"server-client-ca-file", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "PEM bundle of CAs: every path but /healthz, /livez and /metrics then needs a client "
     "certificate signed by one of them (403 without); needs --server-cert/--server-key, which a "
     "follower presents to the leader, whose certificate it verifies against this bundle "
     "(docs/server.md, \"Production setting\")",
     ACTIVE})
OPT(server_auth_token_file, OPT_STRING,
    {"server-auth-token-file", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "file holding a bearer token (at most 4 KiB, surrounding whitespace ignored): every path "
     "but /healthz, /livez and /metrics then needs Authorization: Bearer <token> (401 "
     "without); re-read when the file changes; a follower sends it to the leader",
     ACTIVE})
OPT(use_etcd_wrapper, OPT_BOOL,
    {"use-etcd-wrapper", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "when the start-up peer URL check updated this member's peer URLs (to the "
     "initial-advertise-peer-urls of the etcd config file ETCD_CONF), ask etcd-wrapper to "
     "restart etcd: POST <scheme>://<host of --endpoints[0]>:9095/stop, https with --cacert "
     "when the server has --server-cert; no effect under run (docs/cluster.md)",
     ACTIVE})
OPT(etcd_process_name, OPT_STRING,
    {"etcd-process-name", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "the name of etcd's process, passed by older etcd-druid releases (docs/druid.md)",
     IGNORED("etcdbrctl never looks for etcd by its process name: with --use-etcd-wrapper it "
             "asks etcd-wrapper to restart etcd")})
/* HEALTH (docs/go-tool.md §1.7; lease flags also for compact, §1.10) */
OPT(enable_snapshot_lease_renewal, OPT_BOOL,
    {"enable-snapshot-lease-renewal", 0, OPT_BOOL, "false", NULL, CMD_SERVER | CMD_COMPACT, 0,
     "update the Kubernetes Leases of --full-snapshot-lease-name (revision and creation time of "
     "each full snapshot, retried every minute until it succeeds) and "
     "--delta-snapshot-lease-name (after each delta period) in POD_NAMESPACE with the pod's "
     "service account; compact updates the full one (docs/kubernetes.md)",
     ACTIVE})
OPT(enable_member_lease_renewal, OPT_BOOL,
    {"enable-member-lease-renewal", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "renew this member's Kubernetes Lease (<member-name-prefix>-$POD_NAME of the etcd config "
     "file) every --k8s-heartbeat-duration with <member ID>:<cluster ID>:Leader|Member "
     "(docs/kubernetes.md)",
     ACTIVE})
OPT(k8s_heartbeat_duration, OPT_DURATION,
    {"k8s-heartbeat-duration", 0, OPT_DURATION, "30s", NULL, CMD_SERVER, 0,
     "period of the member Lease renewal; more than 0", ACTIVE})
OPT(full_snapshot_lease_name, OPT_STRING,
    {"full-snapshot-lease-name", 0, OPT_STRING, "full-snapshot-revisions", NULL,
     CMD_SERVER | CMD_COMPACT, 0, "name of the Lease holding the last full snapshot's revision",
     ACTIVE})
OPT(delta_snapshot_lease_name, OPT_STRING,
    {"delta-snapshot-lease-name", 0, OPT_STRING, "delta-snapshot-revisions", NULL,
     CMD_SERVER | CMD_COMPACT, 0,
     "name of the Lease holding the last delta snapshot's revision (compact: not used)", ACTIVE})
/* LEADER-ELECTION (docs/go-tool.md §1.7) */
OPT(reelection_period, OPT_DURATION,
    {"reelection-period", 0, OPT_DURATION, "5s", NULL, CMD_SERVER, 0,
     "period of the backup-leadership check; more than 1s", ACTIVE})
OPT(etcd_connection_timeout_leader_election, OPT_DURATION,
    {"etcd-connection-timeout-leader-election", 0, OPT_DURATION, "5s", NULL, CMD_SERVER, 0,
     "timeout of the Status call of the leadership check; more than 1s", ACTIVE})
/* SECONDARY store (docs/go-tool.md §1.7, §10.3): its credentials are read from
 * SECONDARY_-prefixed environment variables (SECONDARY_AWS_APPLICATION_CREDENTIALS...;
 * docs/copy.md) */
OPT(secondary_storage_provider, OPT_STRING,
    {"secondary-storage-provider", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "secondary snapshot store (dual site) that --secondary-backup-sync-enabled copies backups "
     "into; empty with an empty --secondary-store-container = none, a container alone = Local",
     ACTIVE, ONE_OF(PROVIDERS)})
OPT(secondary_store_container, OPT_STRING,
    {"secondary-store-container", 0, OPT_STRING, "", "SECONDARY_STORAGE_CONTAINER", CMD_SERVER, 0,
     "bucket/container of the secondary store", ACTIVE})
OPT(secondary_store_endpoint_override, OPT_STRING,
    {"secondary-store-endpoint-override", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "secondary object store endpoint URL (as --store-endpoint-override)", ACTIVE})
OPT(secondary_store_prefix, OPT_STRING,
    {"secondary-store-prefix", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "key prefix in the secondary store; objects are written under <prefix>/v2/", ACTIVE})
OPT(secondary_max_parallel_chunk_uploads, OPT_INT,
    {"secondary-max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, CMD_SERVER, 0,
     "parallel part uploads to the secondary store (as --max-parallel-chunk-uploads)", ACTIVE,
     BETWEEN(1, MAX_PARALLEL)})
OPT(secondary_min_chunk_size, OPT_INT,
    {"secondary-min-chunk-size", 0, OPT_INT, "5242880", NULL, CMD_SERVER, 0,
     "part size in bytes for the secondary store (as --min-chunk-size)", ACTIVE,
     BETWEEN(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)})
OPT(secondary_snapstore_temp_directory, OPT_STRING,
    {"secondary-snapstore-temp-directory", 0, OPT_STRING, "/tmp", NULL, CMD_SERVER, 0,
     "staging directory for the secondary store (copies are streamed; nothing is staged there "
     "now)",
     ACTIVE})
OPT(secondary_backup_sync_enabled, OPT_BOOL,
    {"secondary-backup-sync-enabled", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "while backup leader, copy every backup missing in the secondary store at once and every "
     "--secondary-backup-sync-period (10 parallel copies), then garbage-collect this cluster's "
     "backup history there with --garbage-collection-policy",
     ACTIVE})
OPT(secondary_backup_sync_period, OPT_DURATION,
    {"secondary-backup-sync-period", 0, OPT_DURATION, "1h", NULL, CMD_SERVER, 0,
     "period of the copy to the secondary store", ACTIVE, AT_LEAST(1000)})
/* copy (docs/go-tool.md §1.12): the source store; its credentials are read from
 * SOURCE_-prefixed environment variables; an empty provider, prefix or temp directory is the
 * destination's */
OPT(source_storage_provider, OPT_STRING,
    {"source-storage-provider", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "provider of the store to copy from; empty = the destination's (--storage-provider)", ACTIVE,
     ONE_OF(PROVIDERS)})
OPT(source_store_container, OPT_STRING,
    {"source-store-container", 0, OPT_STRING, "", "SOURCE_STORAGE_CONTAINER", CMD_COPY, 0,
     "bucket/container of the source store; Local: directory (relative = relative to $HOME)",
     ACTIVE})
OPT(source_store_endpoint_override, OPT_STRING,
    {"source-store-endpoint-override", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "source object store endpoint URL (as --store-endpoint-override)", ACTIVE})
OPT(source_store_prefix, OPT_STRING,
    {"source-store-prefix", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "key prefix of the source store; not given = the destination's (--store-prefix), given "
     "empty (--source-store-prefix=) = no prefix",
     ACTIVE})
OPT(source_max_parallel_chunk_uploads, OPT_INT,
    {"source-max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, CMD_COPY, 0,
     "the source store's --max-parallel-chunk-uploads (copy only reads from it)", ACTIVE,
     BETWEEN(1, MAX_PARALLEL)})
OPT(source_min_chunk_size, OPT_INT,
    {"source-min-chunk-size", 0, OPT_INT, "5242880", NULL, CMD_COPY, 0,
     "the source store's --min-chunk-size (copy only reads from it)", ACTIVE,
     BETWEEN(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)})
OPT(source_snapstore_temp_directory, OPT_STRING,
    {"source-snapstore-temp-directory", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "the source store's staging directory; empty = the destination's (copies are streamed: "
     "nothing is staged)",
     ACTIVE})
OPT(max_backups_to_copy, OPT_INT,
    {"max-backups-to-copy", 0, OPT_INT, "-1", NULL, CMD_COPY, 0,
     "copy only the newest this many backups (a full snapshot and its deltas); -1 = all", ACTIVE,
     BETWEEN(-1, MAX_COUNT)})
OPT(max_backup_age, OPT_INT,
    {"max-backup-age", 0, OPT_INT, "-1", NULL, CMD_COPY, 0,
     "copy only backups whose full snapshot is at most this many days old; -1 = any age", ACTIVE,
     BETWEEN(-1, 3650000)})
OPT(max_parallel_copy_operations, OPT_INT,
    {"max-parallel-copy-operations", 0, OPT_INT, "10", NULL, CMD_COPY, 0, "objects copied at once",
     ACTIVE, BETWEEN(1, MAX_PARALLEL)})
OPT(wait_for_final_snapshot, OPT_BOOL,
    {"wait-for-final-snapshot", 0, OPT_BOOL, "false", NULL, CMD_COPY, 0,
     "first wait (listing the source every 15s) until one of its 4 newest full snapshots is a "
     "final one (.final)",
     ACTIVE})
OPT(wait_for_final_snapshot_timeout, OPT_DURATION,
    {"wait-for-final-snapshot-timeout", 0, OPT_DURATION, "0s", NULL, CMD_COPY, 0,
     "stop waiting for the final snapshot after this long and copy what is there; 0 = wait for "
     "ever",
     ACTIVE, AT_LEAST(0)})
/* COMPACTOR (docs/go-tool.md §1.10) */
OPT(defragment, OPT_BOOL,
    {"defragment", 0, OPT_BOOL, "true", NULL, CMD_COMPACT, 0,
     "defragment the db of the compacted snapshot",
     IGNORED(
         "compact writes the new db fresh, without free pages: there is nothing to defragment")})
OPT(metrics_scrape_wait_duration, OPT_DURATION,
    {"metrics-scrape-wait-duration", 0, OPT_DURATION, "0s", NULL, CMD_COMPACT, 0,
     "after a successful compaction, wait this long before exiting (the Go tool's pause for a "
     "Prometheus scrape)",
     ACTIVE})
/* verify and list (ours; docs/verify.md) */
OPT(output, OPT_STRING,
    {"output", 'o', OPT_STRING, "text", NULL, CMD_VERIFY | CMD_LIST | INSPECT, 0,
     "output format: json (get: etcdctl's get -w json; the others: docs/verify.md and "
     "docs/inspect.md), or for people: text, simple or table (verify, list, diff, history: their "
     "one text form; get: text and simple are etcdctl's key and value lines, table one line per "
     "key with its revisions, size and a Kubernetes object's apiVersion and kind)",
     ACTIVE, ONE_OF(OUTPUT_FORMATS)})
OPT(all_sets, OPT_BOOL,
    {"all-sets", 0, OPT_BOOL, "false", NULL, CMD_VERIFY, 0,
     "check every object and every set in the store, not only the latest set", ACTIVE})
OPT(restore_test, OPT_BOOL,
    {"restore-test", 0, OPT_BOOL, "false", NULL, CMD_VERIFY, 0,
     "also restore the latest set into a scratch dir under --snapstore-temp-directory, start an "
     "etcd on it on loopback and compare its HashKV at the set's last revision with the live "
     "cluster's (--endpoints) at that revision",
     ACTIVE})
OPT(restore_test_etcd_bin, OPT_STRING,
    {"restore-test-etcd-bin", 0, OPT_STRING, "", NULL, CMD_VERIFY | CMD_SERVER, 0,
     "etcd binary started on the scratch restore of verify --restore-test and of the server's "
     "--verify-restore-test (default: $ETCDBR_ETCD_BIN, else etcd from PATH)",
     ACTIVE})
OPT(verify_schedule, OPT_STRING,
    {"verify-schedule", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "cron schedule of a verification of the store's latest set (as `etcdbrctl verify`) while "
     "this member is the backup leader; results as etcdbr_verify_* metrics; empty = never",
     ACTIVE})
OPT(verify_restore_test, OPT_BOOL,
    {"verify-restore-test", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "the scheduled verification also restores the latest set and compares HashKV with etcd "
     "(as verify --restore-test)",
     ACTIVE})
/* get, diff, history: reading a backup without restoring it (ours; docs/inspect.md) */
OPT(prefix, OPT_BOOL,
    {"prefix", 0, OPT_BOOL, "false", NULL, INSPECT & ~CMD_HISTORY, 0,
     "every key that starts with KEY (KEY \"\" = every key)", ACTIVE})
OPT(from_key, OPT_BOOL,
    {"from-key", 0, OPT_BOOL, "false", NULL, INSPECT & ~CMD_HISTORY, 0,
     "every key at or after KEY in byte order", ACTIVE})
OPT(keys_only, OPT_BOOL,
    {"keys-only", 0, OPT_BOOL, "false", NULL, CMD_GET, 0, "keys without their values", ACTIVE})
OPT(limit, OPT_INT,
    {"limit", 0, OPT_INT, "0", NULL, CMD_GET, 0,
     "print at most this many keys (0 = all); count still gives every key", ACTIVE, AT_LEAST(0)})
OPT(from_revision, OPT_INT,
    {"from-revision", 0, OPT_INT, "0", NULL, CMD_DIFF, 0,
     "the older revision of the comparison (or --from-time)", ACTIVE, AT_LEAST(0)})
OPT(to_revision, OPT_INT,
    {"to-revision", 0, OPT_INT, "0", NULL, CMD_DIFF, 0,
     "the newer revision of the comparison (or --to-time; neither = the latest)", ACTIVE,
     AT_LEAST(0)})
OPT(from_time, OPT_STRING,
    {"from-time", 0, OPT_STRING, "", NULL, CMD_DIFF, 0,
     "the older point of the comparison: the last revision recorded at or before this RFC 3339 "
     "time",
     ACTIVE})
OPT(to_time, OPT_STRING,
    {"to-time", 0, OPT_STRING, "", NULL, CMD_DIFF, 0,
     "the newer point of the comparison: the last revision recorded at or before this RFC 3339 "
     "time",
     ACTIVE})
OPT(cache_dir, OPT_STRING,
    {"cache-dir", 0, OPT_STRING, "", NULL, INSPECT, 0,
     "keep the downloaded, checked objects in this directory for the next command (empty = a "
     "scratch dir removed at exit)",
     ACTIVE})
/* initialize (docs/go-tool.md §1.11) */
OPT(validation_mode, OPT_STRING,
    {"validation-mode", 0, OPT_STRING, "full", NULL, CMD_INITIALIZE, 0,
     "data dir validation before restore", ACTIVE, ONE_OF(VALIDATION_MODES)})
