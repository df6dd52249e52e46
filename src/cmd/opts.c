/* opts: the options table and its parser; see opts.h. Names, defaults, ranges and allowed
 * values are the Go tool's (docs/go-tool.md §1) except where docs/flags.md says we differ
 * (insecure-skip-tls-verify defaults to false: the Go tool's true default silently disables
 * certificate checks). A flag the code does not read is marked UNIMPLEMENTED or IGNORED here,
 * never left to look as if it worked. */
#include "opts.h"
#include "../codec/crypt.h"
#include "../common/err.h"
#include "../common/goparse.h"
#include "../common/log.h"
#include "../common/timeutil.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* verify talks to etcd only for --restore-test */
#define ETCD (CMD_SNAPSHOT | CMD_SERVER | CMD_INITIALIZE | CMD_VERIFY)
#define STORE                                                                                      \
    (CMD_SNAPSHOT | CMD_RESTORE | CMD_SERVER | CMD_INITIALIZE | CMD_COMPACT | CMD_COPY |           \
     CMD_VERIFY | CMD_LIST)
#define SNAP (CMD_SNAPSHOT | CMD_SERVER)
#define RESTORE (CMD_RESTORE | CMD_SERVER | CMD_INITIALIZE | CMD_COMPACT)
#define ALL (STORE | ETCD | RESTORE)

/* Every entry ends with its support status and, where the Go tool has one, its range or
 * allowed values: opts_parse, opts_finish, --help and docs/flags.md all read them from here. */
#define ACTIVE .support = OPT_ACTIVE
#define UNIMPLEMENTED .support = OPT_UNIMPLEMENTED
#define IGNORED(why) .support = OPT_IGNORED, .ignored = (why)
#define AT_LEAST(v) .has_min = 1, .min = (v)
#define BETWEEN(lo, hi) .has_min = 1, .min = (lo), .has_max = 1, .max = (hi)
#define ONE_OF(list) .choices = (list)
#define IGNORED_IN(mask, why) .ignored_in = (mask), .ignored_in_why = (why)

#define MIN_CHUNK_SIZE 5242880      /* 5 MiB: the Go tool's minimum (S3's smallest part) */
#define MAX_CHUNK_SIZE 5368709120LL /* 5 GiB: S3's largest part */
#define MAX_PARALLEL 256            /* threads or requests in flight: far above any use */
#define MAX_COUNT 1000000           /* counts of backups, kept in an int */
/* every duration flag: not negative, at most 100 years (so ms x 1e6 still fits int64 ns) */
#define DURATION_MAX_MS (100LL * 365 * 24 * 3600 * 1000)
#define NO_ETCD_RUNS "restore builds the db offline and starts no etcd"
#define NO_MEMBER "compact writes a full snapshot into the store, not a member's data dir"

static const char *const LOG_LEVELS[] = {
    "error", "warn", "warning", "info", "debug", "trace", "0", "1", "2", "3", "4", "5", "6", NULL};
static const char *const LOG_FORMATS[] = {"text", "json", NULL};
/* the Go tool's providers (its test fake FAILED aside); store_open refuses those this build
 * does not implement yet */
static const char *const PROVIDERS[] = {"",      "Local", "S3",  "ABS", "GCS",
                                        "Swift", "OSS",   "ECS", "OCS", NULL};
static const char *const GC_POLICIES[] = {"Exponential", "LimitBased", NULL};
static const char *const COMPRESSION_POLICIES[] = {"gzip", "zlib", "lzw", "zstd", NULL};
static const char *const GZIP_MODES[] = {"parallel", "single", NULL};
static const char *const COMPACTION_MODES[] = {"periodic", "revision", NULL};
static const char *const VALIDATION_MODES[] = {"full", "sanity", NULL};
static const char *const OUTPUT_FORMATS[] = {"text", "json", NULL};

static const OptDef opt_table[] = {
    /* logging */
    {"log-level", 0, OPT_STRING, "info", NULL, ALL, 0,
     "log level (logrus numbers: 2 error, 3 warn, 4 info, 5 debug, 6 trace)", ACTIVE,
     ONE_OF(LOG_LEVELS), .choices_nocase = 1},
    {"log-format", 0, OPT_STRING, "text", NULL, ALL, 0, "log format", ACTIVE, ONE_OF(LOG_FORMATS)},
    /* ETCD connection (docs/go-tool.md §1.1) */
    {"endpoints", 'e', OPT_LIST, "http://127.0.0.1:2379", NULL, ETCD, 0,
     "comma-separated etcd client endpoints; failover in order", ACTIVE},
    {"service-endpoints", 0, OPT_LIST, "", NULL, ETCD & ~CMD_VERIFY, 0,
     "endpoints reaching etcd through a Service; also how a member finds the others to rejoin "
     "or join as a learner (docs/cluster.md)",
     ACTIVE},
    {"etcd-username", 0, OPT_STRING, "", "ETCD_USERNAME", ETCD, 0, "etcd user name", ACTIVE},
    {"etcd-password", 0, OPT_STRING, "", "ETCD_PASSWORD", ETCD, 1, "etcd password", ACTIVE},
    {"etcd-connection-timeout", 0, OPT_DURATION, "30s", NULL, ETCD, 0,
     "timeout of short etcd calls", ACTIVE, AT_LEAST(1)},
    {"etcd-snapshot-timeout", 0, OPT_DURATION, "15m", NULL, ETCD | CMD_COMPACT, 0,
     "timeout of a whole full snapshot stream; not below --etcd-connection-timeout", ACTIVE,
     AT_LEAST(1),
     IGNORED_IN(CMD_COMPACT, "compact builds the snapshot offline; it takes none from etcd")},
    {"etcd-defrag-timeout", 0, OPT_DURATION, "8m", NULL, ETCD | CMD_COMPACT, 0,
     "timeout of defragmenting one member", ACTIVE, AT_LEAST(1),
     IGNORED_IN(CMD_COMPACT, "compact writes the db fresh, without free pages")},
    {"insecure-transport", 0, OPT_BOOL, "true", NULL, ETCD, 0,
     "the Go tool's switch between plain HTTP/2 and TLS to etcd",
     IGNORED("the endpoint decides: http:// is plain, https:// is TLS, and an endpoint without "
             "a scheme is TLS when --cacert, --cert or --key is given")},
    {"insecure-skip-tls-verify", 0, OPT_BOOL, "false", NULL, ETCD, 0,
     "do not verify etcd's server certificate (the Go tool defaults to true; we do not)", ACTIVE},
    {"cacert", 0, OPT_STRING, "", NULL, ETCD, 0, "CA bundle to verify etcd's certificate", ACTIVE},
    {"cert", 0, OPT_STRING, "", NULL, ETCD, 0, "client certificate for etcd", ACTIVE},
    {"key", 0, OPT_STRING, "", NULL, ETCD, 0, "client key for etcd", ACTIVE},
    /* STORE (docs/go-tool.md §1.2) */
    {"storage-provider", 0, OPT_STRING, "", NULL, STORE, 0,
     "snapshot store provider (empty = Local; server, run and initialize then have no store, "
     "and take no backups, only when --store-container is empty too); a provider this build "
     "does not support yet is refused at start",
     ACTIVE, ONE_OF(PROVIDERS)},
    {"store-container", 0, OPT_STRING, "", "STORAGE_CONTAINER", STORE, 0,
     "bucket/container; Local: directory (relative = relative to $HOME; default default.bkp)",
     ACTIVE},
    {"store-endpoint-override", 0, OPT_STRING, "", NULL, STORE, 0,
     "object store endpoint URL (scheme://host[:port]); honoured by S3 (then path-style) and ABS "
     "(then <endpoint>/<account>/<container>, as for azurite); OSS ignores it with a warning (its "
     "endpoint is storageEndpoint in the credentials, as in the Go tool)",
     ACTIVE},
    {"store-prefix", 0, OPT_STRING, "", NULL, STORE, 0,
     "key prefix; objects are written under <prefix>/v2/", ACTIVE},
    {"max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, STORE, 0,
     "parts (ABS: blocks) of one object store upload in flight at once (S3, ECS, OCS, ABS); "
     "memory is about "
     "(this + 1) x the part size",
     ACTIVE, BETWEEN(1, MAX_PARALLEL)},
    {"min-chunk-size", 0, OPT_INT, "5242880", NULL, STORE, 0,
     "part size in bytes of an object store multipart upload (S3, ECS, OCS: doubled after "
     "every 1000 parts; ABS: the fixed block size); smaller objects go in one request",
     ACTIVE, BETWEEN(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)},
    {"snapstore-temp-directory", 0, OPT_STRING, "/tmp", NULL, STORE, 0,
     "staging directory for snapshot and delta spool files", ACTIVE},
    {"encryption-key-file", 0, OPT_STRING, "", "ETCDBR_ENCRYPTION_KEY_FILE", STORE, 0,
     "file of client-side encryption keys, one \"<key-id> <base64 of 32 bytes>\" per line ('#' "
     "starts a comment): the first key encrypts new snapshots (AES-256-GCM; names get .enc, "
     "which the Go tool cannot read), every key decrypts; or give the same text in "
     "ETCDBR_ENCRYPTION_KEYS (keys never go on the command line); docs/encryption.md",
     ACTIVE},
    /* SNAPSHOTTER (docs/go-tool.md §1.3) */
    {"schedule", 's', OPT_STRING, "0 */1 * * *", NULL, SNAP, 0, "cron schedule of full snapshots",
     ACTIVE},
    {"delta-snapshot-period", 0, OPT_DURATION, "20s", NULL, SNAP, 0,
     "period of delta snapshots; below 1s disables them", ACTIVE},
    {"delta-snapshot-memory-limit", 0, OPT_INT, "10485760", NULL, SNAP, 0,
     "take a delta as soon as this many bytes of events are pending (0 = the default)", ACTIVE,
     AT_LEAST(0)},
    {"max-changes-per-delta-snapshot", 0, OPT_INT, "0", NULL, SNAP, 0,
     "take a delta as soon as this many events are pending (0 = no limit)", ACTIVE, AT_LEAST(0)},
    {"garbage-collection-period", 0, OPT_DURATION, "1m", NULL, SNAP, 0,
     "garbage collection period; 1s or less disables it", ACTIVE},
    {"garbage-collection-policy", 0, OPT_STRING, "Exponential", NULL, SNAP, 0,
     "which full snapshots garbage collection keeps", ACTIVE, ONE_OF(GC_POLICIES)},
    {"max-backups", 'm', OPT_INT, "7", NULL, SNAP, 0,
     "full snapshots kept by LimitBased (which needs at least 1)", ACTIVE, BETWEEN(0, MAX_COUNT)},
    {"delta-snapshot-retention-period", 0, OPT_DURATION, "0s", NULL, SNAP, 0,
     "deltas younger than this are never removed by garbage collection", ACTIVE},
    {"abandon-other-histories", 0, OPT_BOOL, "false", NULL, SNAP, 0,
     "when the store's latest backups belong to another cluster or end after etcd's revision, "
     "start a new backup history instead of refusing; the other backups are kept but never "
     "restored or garbage-collected (docs/store-history.md)",
     ACTIVE},
    {"defragmentation-schedule", 0, OPT_STRING, "0 0 */3 * *", NULL, SNAP, 0,
     "cron schedule of defragmentation", ACTIVE},
    /* COMPRESSION (docs/go-tool.md §1.4) */
    {"compress-snapshots", 0, OPT_BOOL, "true", NULL, SNAP, 0, "compress full and delta snapshots",
     ACTIVE},
    {"compression-policy", 0, OPT_STRING, "gzip", NULL, SNAP, 0, "compression of new snapshots",
     ACTIVE, ONE_OF(COMPRESSION_POLICIES)},
    {"gzip-mode", 0, OPT_STRING, "parallel", NULL, SNAP, 0,
     "how the gzip policy writes: parallel compresses 1 MiB blocks as separate gzip members on "
     "--gzip-threads threads (libdeflate, level 6); single writes one member from one zlib stream "
     "on one thread, as the Go tool does. The Go tool reads both (docs/compression.md)",
     ACTIVE, ONE_OF(GZIP_MODES)},
    {"gzip-threads", 0, OPT_INT, "0", NULL, SNAP, 0,
     "threads compressing gzip blocks with --gzip-mode=parallel; 0 = the CPUs this process may "
     "use, at most 4",
     ACTIVE, BETWEEN(0, 64)},
    /* BACKOFF (docs/go-tool.md §1.5) */
    {"backoff-multiplier", 0, OPT_INT, "2", NULL, SNAP, 0,
     "factor by which the retry delay after a failed snapshot grows (1 s x multiplier, then x "
     "multiplier per retry)",
     ACTIVE, BETWEEN(1, 1000)},
    {"backoff-attempt-limit", 0, OPT_INT, "6", NULL, SNAP, 0,
     "retries with a growing delay before every retry waits --backoff-threshold-time", ACTIVE,
     BETWEEN(1, 1000)},
    {"backoff-threshold-time", 0, OPT_DURATION, "128s", NULL, SNAP, 0,
     "longest delay between retries after a failed snapshot", ACTIVE, AT_LEAST(1)},
    {"final-delta-drain-timeout", 0, OPT_DURATION, "30s", NULL, SNAP, 0,
     "on SIGTERM/SIGINT, how long the last delta may wait for the watch to reach the revision "
     "etcd had at the signal; falling short is logged, counted and exits non-zero",
     ACTIVE, AT_LEAST(1)},
    /* RESTORE (docs/go-tool.md §1.6) */
    {"initial-cluster", 0, OPT_STRING, "default=http://localhost:2380", NULL, RESTORE, 0,
     "initial cluster of the restored member set", ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)},
    {"initial-cluster-token", 0, OPT_STRING, "etcd-cluster", NULL, RESTORE, 0,
     "initial cluster token", ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)},
    {"data-dir", 'd', OPT_STRING, "default.etcd", NULL, RESTORE, 0,
     "data dir to restore into (restore: {name} in it is replaced by the member's name)", ACTIVE,
     IGNORED_IN(CMD_COMPACT, NO_MEMBER)},
    {"restoration-temp-snapshots-dir", 0, OPT_STRING, "default.restoration.tmp", NULL, RESTORE, 0,
     "scratch directory for downloaded snapshots (made when missing and removed afterwards; an "
     "existing one is kept)",
     ACTIVE},
    {"initial-advertise-peer-urls", 0, OPT_LIST, "http://localhost:2380", NULL, RESTORE, 0,
     "peer URLs of the restored member", ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)},
    {"name", 0, OPT_STRING, "default", NULL, RESTORE, 0, "member name", ACTIVE,
     IGNORED_IN(CMD_COMPACT, NO_MEMBER)},
    {"skip-hash-check", 0, OPT_BOOL, "false", NULL, RESTORE, 0,
     "accept a full snapshot without its sha256 trailer", ACTIVE},
    {"max-fetchers", 0, OPT_INT, "6", NULL, RESTORE | CMD_VERIFY, 0, "parallel delta downloads",
     ACTIVE, BETWEEN(1, MAX_PARALLEL)},
    /* etcdbr's bounds on what a snapshot object may make us write (docs/restore.md) */
    {"max-delta-size", 0, OPT_INT, "1073741824", NULL, RESTORE | CMD_VERIFY, 0,
     "largest a delta snapshot may decompress to, in bytes; a larger one (a decompression bomb) "
     "is refused, naming it",
     ACTIVE, AT_LEAST(1)},
    {"max-full-size", 0, OPT_INT, "68719476736", NULL, RESTORE | CMD_VERIFY, 0,
     "largest a full snapshot may decompress to, in bytes (db plus its 32-byte hash)", ACTIVE,
     AT_LEAST(1)},
    {"min-free-disk-bytes", 0, OPT_INT, "1073741824", NULL, RESTORE | CMD_VERIFY, 0,
     "free bytes that spool, download and restored db files must leave on their file system "
     "(the larger of this and --min-free-disk-percent; both 0: no reserve)",
     ACTIVE, AT_LEAST(0)},
    {"min-free-disk-percent", 0, OPT_INT, "5", NULL, RESTORE | CMD_VERIFY, 0,
     "percent of the file system's size that spool, download and restored db files must leave "
     "free (see --min-free-disk-bytes)",
     ACTIVE, BETWEEN(0, 50)},
    {"max-call-send-message-size", 0, OPT_INT, "10485760", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS), AT_LEAST(1)},
    {"max-request-bytes", 0, OPT_INT, "10485760", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS), AT_LEAST(0)},
    {"max-txn-ops", 0, OPT_INT, "10240", NULL, RESTORE, 0, "the Go tool's embedded-etcd setting",
     IGNORED(NO_ETCD_RUNS), AT_LEAST(0)},
    {"embedded-etcd-quota-bytes", 0, OPT_INT, "8589934592", NULL, RESTORE, 0,
     "warn when the restored db is larger than this many bytes (etcd's --quota-backend-bytes "
     "must then be raised to start on it)",
     ACTIVE, AT_LEAST(1)},
    {"auto-compaction-mode", 0, OPT_STRING, "periodic", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS), ONE_OF(COMPACTION_MODES)},
    {"auto-compaction-retention", 0, OPT_STRING, "30m", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting", IGNORED(NO_ETCD_RUNS)},
    {"etcd-bin", 0, OPT_STRING, "", "ETCDBR_ETCD_BIN", RESTORE, 0,
     "etcd binary of the restore (kept so that existing scripts run)", IGNORED(NO_ETCD_RUNS)},
    {"max-invalid-copies", 0, OPT_INT, "3", NULL, CMD_SERVER | CMD_INITIALIZE, 0,
     "copies of invalid data dirs kept aside as <data-dir>.invalid.<UTC time> (marked as "
     "etcdbr's); beyond this many the oldest marked copy is removed, each removal logged; 0 = "
     "keep all",
     ACTIVE, AT_LEAST(0)},
    {"etcdutl-bin", 0, OPT_STRING, "", "ETCDBR_ETCDUTL_BIN", RESTORE | CMD_VERIFY, 0,
     "fallback, off by default: have this etcdutl (3.5+) or etcdctl (3.4) write the member dir "
     "with `snapshot restore` instead of etcdbr (docs/member-dir.md); unset, no etcd binary is "
     "needed",
     ACTIVE, IGNORED_IN(CMD_COMPACT, NO_MEMBER)},
    /* point in time and revision bump (restore and initialize; docs/restore.md) */
    {"revision", 0, OPT_INT, "0", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "restore exactly the state at this revision (newest full snapshot at or before it plus the "
     "deltas up to it); 0 = the latest revision in the store",
     ACTIVE, AT_LEAST(0)},
    {"time", 0, OPT_STRING, "", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "restore the last revision whose events were recorded at or before this RFC 3339 time "
     "(e.g. 2026-12-01T14:30:00Z); excludes --revision",
     ACTIVE},
    {"bump-revision", 0, OPT_INT, "0", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "add this many revisions after the restored one (as etcdutl snapshot restore "
     "--bump-revision); needs --mark-compacted",
     ACTIVE, AT_LEAST(0)},
    {"mark-compacted", 0, OPT_BOOL, "false", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "with --bump-revision: compact at the bumped revision, so watchers of older revisions get "
     "\"compacted\" instead of silently missing events",
     ACTIVE},
    {"all-members", 0, OPT_BOOL, "false", NULL, CMD_RESTORE, 0,
     "restore every member of --initial-cluster from one download of one set, each into "
     "--data-dir with {name} replaced by its name (docs/runbook-quorum-loss.md); --name and "
     "--initial-advertise-peer-urls then come from --initial-cluster",
     ACTIVE},
    {"new-lease-ttl", 0, OPT_DURATION, "1h", NULL, RESTORE, 0,
     "TTL given to a lease granted after the full snapshot when its delta does not record the "
     "TTL (deltas of the Go tool); keys keep their lease either way",
     ACTIVE, AT_LEAST(1000)},
    /* server (docs/go-tool.md §1.7) */
    {"config-file", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "YAML file in the Go tool's format (docs/config-file.md); flags and environment win over it",
     ACTIVE},
    {"server-port", 'p', OPT_INT, "8080", NULL, CMD_SERVER, 0,
     "HTTP(S) port, all interfaces (0 = any free port)", ACTIVE, BETWEEN(0, 65535)},
    {"server-address", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "IPv4 or IPv6 address the HTTP(S) server listens on; empty = all interfaces, IPv6 and IPv4 "
     "(as the Go tool)",
     ACTIVE},
    {"enable-profiling", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "serve profiling handlers under /debug/pprof/", UNIMPLEMENTED},
    {"server-cert", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "TLS certificate of the HTTP server; with --server-key the server speaks HTTPS", ACTIVE},
    {"server-key", 0, OPT_STRING, "", NULL, CMD_SERVER, 0, "TLS key of the HTTP server", ACTIVE},
    {"use-etcd-wrapper", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "when the start-up peer URL check updated this member's peer URLs (to the "
     "initial-advertise-peer-urls of the etcd config file ETCD_CONF), ask etcd-wrapper to "
     "restart etcd: POST <scheme>://<host of --endpoints[0]>:9095/stop, https with --cacert "
     "when the server has --server-cert; no effect under run (docs/cluster.md)",
     ACTIVE},
    /* HEALTH (docs/go-tool.md §1.7; lease flags also for compact, §1.10) */
    {"enable-snapshot-lease-renewal", 0, OPT_BOOL, "false", NULL, CMD_SERVER | CMD_COMPACT, 0,
     "update the Kubernetes Leases of --full-snapshot-lease-name (revision and creation time of "
     "each full snapshot, retried every minute until it succeeds) and "
     "--delta-snapshot-lease-name (after each delta period) in POD_NAMESPACE with the pod's "
     "service account; compact updates the full one (docs/kubernetes.md)",
     ACTIVE},
    {"enable-member-lease-renewal", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "renew this member's Kubernetes Lease (<member-name-prefix>-$POD_NAME of the etcd config "
     "file) every --k8s-heartbeat-duration with <member ID>:<cluster ID>:Leader|Member "
     "(docs/kubernetes.md)",
     ACTIVE},
    {"k8s-heartbeat-duration", 0, OPT_DURATION, "30s", NULL, CMD_SERVER, 0,
     "period of the member Lease renewal; more than 0", ACTIVE},
    {"full-snapshot-lease-name", 0, OPT_STRING, "full-snapshot-revisions", NULL,
     CMD_SERVER | CMD_COMPACT, 0, "name of the Lease holding the last full snapshot's revision",
     ACTIVE},
    {"delta-snapshot-lease-name", 0, OPT_STRING, "delta-snapshot-revisions", NULL,
     CMD_SERVER | CMD_COMPACT, 0,
     "name of the Lease holding the last delta snapshot's revision (compact: not used)", ACTIVE},
    /* LEADER-ELECTION (docs/go-tool.md §1.7) */
    {"reelection-period", 0, OPT_DURATION, "5s", NULL, CMD_SERVER, 0,
     "period of the backup-leadership check; more than 1s", ACTIVE},
    {"etcd-connection-timeout-leader-election", 0, OPT_DURATION, "5s", NULL, CMD_SERVER, 0,
     "timeout of the Status call of the leadership check; more than 1s", ACTIVE},
    /* SECONDARY store (docs/go-tool.md §1.7, §10.3): its credentials are read from
     * SECONDARY_-prefixed environment variables (SECONDARY_AWS_APPLICATION_CREDENTIALS...;
     * docs/copy.md) */
    {"secondary-storage-provider", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "secondary snapshot store (dual site) that --secondary-backup-sync-enabled copies backups "
     "into; empty with an empty --secondary-store-container = none, a container alone = Local",
     ACTIVE, ONE_OF(PROVIDERS)},
    {"secondary-store-container", 0, OPT_STRING, "", "SECONDARY_STORAGE_CONTAINER", CMD_SERVER, 0,
     "bucket/container of the secondary store", ACTIVE},
    {"secondary-store-endpoint-override", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "secondary object store endpoint URL (as --store-endpoint-override)", ACTIVE},
    {"secondary-store-prefix", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "key prefix in the secondary store; objects are written under <prefix>/v2/", ACTIVE},
    {"secondary-max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, CMD_SERVER, 0,
     "parallel part uploads to the secondary store (as --max-parallel-chunk-uploads)", ACTIVE,
     BETWEEN(1, MAX_PARALLEL)},
    {"secondary-min-chunk-size", 0, OPT_INT, "5242880", NULL, CMD_SERVER, 0,
     "part size in bytes for the secondary store (as --min-chunk-size)", ACTIVE,
     BETWEEN(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)},
    {"secondary-snapstore-temp-directory", 0, OPT_STRING, "/tmp", NULL, CMD_SERVER, 0,
     "staging directory for the secondary store (copies are streamed; nothing is staged there "
     "now)",
     ACTIVE},
    {"secondary-backup-sync-enabled", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "while backup leader, copy every backup missing in the secondary store at once and every "
     "--secondary-backup-sync-period (10 parallel copies), then garbage-collect this cluster's "
     "backup history there with --garbage-collection-policy",
     ACTIVE},
    {"secondary-backup-sync-period", 0, OPT_DURATION, "1h", NULL, CMD_SERVER, 0,
     "period of the copy to the secondary store", ACTIVE, AT_LEAST(1000)},
    /* copy (docs/go-tool.md §1.12): the source store; its credentials are read from
     * SOURCE_-prefixed environment variables; an empty provider, prefix or temp directory is the
     * destination's */
    {"source-storage-provider", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "provider of the store to copy from; empty = the destination's (--storage-provider)", ACTIVE,
     ONE_OF(PROVIDERS)},
    {"source-store-container", 0, OPT_STRING, "", "SOURCE_STORAGE_CONTAINER", CMD_COPY, 0,
     "bucket/container of the source store; Local: directory (relative = relative to $HOME)",
     ACTIVE},
    {"source-store-endpoint-override", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "source object store endpoint URL (as --store-endpoint-override)", ACTIVE},
    {"source-store-prefix", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "key prefix of the source store; not given = the destination's (--store-prefix), given "
     "empty (--source-store-prefix=) = no prefix",
     ACTIVE},
    {"source-max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, CMD_COPY, 0,
     "the source store's --max-parallel-chunk-uploads (copy only reads from it)", ACTIVE,
     BETWEEN(1, MAX_PARALLEL)},
    {"source-min-chunk-size", 0, OPT_INT, "5242880", NULL, CMD_COPY, 0,
     "the source store's --min-chunk-size (copy only reads from it)", ACTIVE,
     BETWEEN(MIN_CHUNK_SIZE, MAX_CHUNK_SIZE)},
    {"source-snapstore-temp-directory", 0, OPT_STRING, "", NULL, CMD_COPY, 0,
     "the source store's staging directory; empty = the destination's (copies are streamed: "
     "nothing is staged)",
     ACTIVE},
    {"max-backups-to-copy", 0, OPT_INT, "-1", NULL, CMD_COPY, 0,
     "copy only the newest this many backups (a full snapshot and its deltas); -1 = all", ACTIVE,
     BETWEEN(-1, MAX_COUNT)},
    {"max-backup-age", 0, OPT_INT, "-1", NULL, CMD_COPY, 0,
     "copy only backups whose full snapshot is at most this many days old; -1 = any age", ACTIVE,
     BETWEEN(-1, 3650000)},
    {"max-parallel-copy-operations", 0, OPT_INT, "10", NULL, CMD_COPY, 0, "objects copied at once",
     ACTIVE, BETWEEN(1, MAX_PARALLEL)},
    {"wait-for-final-snapshot", 0, OPT_BOOL, "false", NULL, CMD_COPY, 0,
     "first wait (listing the source every 15s) until one of its 4 newest full snapshots is a "
     "final one (.final)",
     ACTIVE},
    {"wait-for-final-snapshot-timeout", 0, OPT_DURATION, "0s", NULL, CMD_COPY, 0,
     "stop waiting for the final snapshot after this long and copy what is there; 0 = wait for "
     "ever",
     ACTIVE, AT_LEAST(0)},
    /* COMPACTOR (docs/go-tool.md §1.10) */
    {"defragment", 0, OPT_BOOL, "true", NULL, CMD_COMPACT, 0,
     "defragment the db of the compacted snapshot",
     IGNORED(
         "compact writes the new db fresh, without free pages: there is nothing to defragment")},
    {"metrics-scrape-wait-duration", 0, OPT_DURATION, "0s", NULL, CMD_COMPACT, 0,
     "after a successful compaction, wait this long before exiting (the Go tool's pause for a "
     "Prometheus scrape)",
     ACTIVE},
    /* verify and list (ours; docs/verify.md) */
    {"output", 'o', OPT_STRING, "text", NULL, CMD_VERIFY | CMD_LIST, 0,
     "report format: text (a table or report for people) or json", ACTIVE, ONE_OF(OUTPUT_FORMATS)},
    {"all-sets", 0, OPT_BOOL, "false", NULL, CMD_VERIFY, 0,
     "check every object and every set in the store, not only the latest set", ACTIVE},
    {"restore-test", 0, OPT_BOOL, "false", NULL, CMD_VERIFY, 0,
     "also restore the latest set into a scratch dir under --snapstore-temp-directory, start an "
     "etcd on it on loopback and compare its HashKV at the set's last revision with the live "
     "cluster's (--endpoints) at that revision",
     ACTIVE},
    {"restore-test-etcd-bin", 0, OPT_STRING, "", NULL, CMD_VERIFY | CMD_SERVER, 0,
     "etcd binary started on the scratch restore of verify --restore-test and of the server's "
     "--verify-restore-test (default: $ETCDBR_ETCD_BIN, else etcd from PATH)",
     ACTIVE},
    {"verify-schedule", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "cron schedule of a verification of the store's latest set (as `etcdbrctl verify`) while "
     "this member is the backup leader; results as etcdbr_verify_* metrics; empty = never",
     ACTIVE},
    {"verify-restore-test", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "the scheduled verification also restores the latest set and compares HashKV with etcd "
     "(as verify --restore-test)",
     ACTIVE},
    /* initialize (docs/go-tool.md §1.11) */
    {"validation-mode", 0, OPT_STRING, "full", NULL, CMD_INITIALIZE, 0,
     "data dir validation before restore", ACTIVE, ONE_OF(VALIDATION_MODES)},
};
#define N_OPTS (sizeof opt_table / sizeof opt_table[0])

/* Where a value came from; the order is the precedence. */
typedef enum { FROM_DEFAULT = 0, FROM_CONFIG, FROM_ENV, FROM_CLI } OptOrigin;

typedef struct {
    char *value; /* owned; NULL = default */
    OptOrigin origin;
    char **items; /* OPT_LIST split */
    size_t n_items;
} OptValue;

struct Opts {
    unsigned cmd;
    OptValue v[N_OPTS];
};

/* The commands users type, for messages and docs ("run" shares the server's flags). */
static const struct {
    unsigned bit;
    const char *names;
} cmd_names[] = {
    {CMD_SNAPSHOT, "snapshot"},     {CMD_RESTORE, "restore"}, {CMD_SERVER, "server, run"},
    {CMD_INITIALIZE, "initialize"}, {CMD_COMPACT, "compact"}, {CMD_COPY, "copy"},
    {CMD_VERIFY, "verify"},         {CMD_LIST, "list"},
};

/* "snapshot, server, run" for the commands in mask; "" if none. */
static void commands_text(unsigned mask, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof cmd_names / sizeof cmd_names[0]; i++) {
        if (!(mask & cmd_names[i].bit)) continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", cmd_names[i].names);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

static const OptDef *find_long(const char *name, size_t len, unsigned cmd, size_t *idx) {
    for (size_t i = 0; i < N_OPTS; i++) {
        if ((opt_table[i].commands & cmd) && strlen(opt_table[i].name) == len &&
            strncmp(opt_table[i].name, name, len) == 0) {
            *idx = i;
            return &opt_table[i];
        }
    }
    return NULL;
}

static const OptDef *find_short(char c, unsigned cmd, size_t *idx) {
    for (size_t i = 0; i < N_OPTS; i++) {
        if ((opt_table[i].commands & cmd) && opt_table[i].short_name == c) {
            *idx = i;
            return &opt_table[i];
        }
    }
    return NULL;
}

/* ---------- ranges and allowed values ---------- */

/* A bound as the user writes it: "5242880", or for durations Go's "1h2m3s" / "250ms". */
static void bound_text(const OptDef *d, int64_t v, char *out, size_t cap) {
    if (d->type != OPT_DURATION) {
        snprintf(out, cap, "%" PRId64, v);
        return;
    }
    if (v == 0 || v % 1000) {
        snprintf(out, cap, "%" PRId64 "%s", v, v ? "ms" : "s");
        return;
    }
    int64_t s = v / 1000, h = s / 3600, m = s / 60 % 60;
    size_t n = 0;
    out[0] = '\0';
    if (h) n += (size_t)snprintf(out + n, cap - n, "%" PRId64 "h", h);
    if (m && n < cap) n += (size_t)snprintf(out + n, cap - n, "%" PRId64 "m", m);
    if (s % 60 && n < cap) snprintf(out + n, cap - n, "%" PRId64 "s", s % 60);
}

/* "at least 1", "between 0 and 65535", "one of gzip, zlib, lzw, zstd", or "" (no restriction).
 * quote wraps values in backticks (markdown). */
static void allowed_text(const OptDef *d, int quote, char *out, size_t cap) {
    char lo[32], hi[32];
    const char *q = quote ? "`" : "";
    out[0] = '\0';
    if (d->choices) {
        size_t n = (size_t)snprintf(out, cap, "one of ");
        for (size_t i = 0; d->choices[i] && n < cap; i++) {
            const char *c = d->choices[i];
            n += (size_t)snprintf(out + n, cap - n, "%s%s%s%s", i ? ", " : "", c[0] ? q : "",
                                  c[0] ? c : "\"\" (empty)", c[0] ? q : "");
        }
        if (d->choices_nocase && n < cap) snprintf(out + n, cap - n, "; any case");
        return;
    }
    if (d->has_min) bound_text(d, d->min, lo, sizeof lo);
    if (d->has_max) bound_text(d, d->max, hi, sizeof hi);
    if (d->has_min && d->has_max)
        snprintf(out, cap, "between %s%s%s and %s%s%s", q, lo, q, q, hi, q);
    else if (d->has_min)
        snprintf(out, cap, "at least %s%s%s", q, lo, q);
    else if (d->has_max)
        snprintf(out, cap, "at most %s%s%s", q, hi, q);
}

/* Checks v against d's allowed values or range. from follows the flag's name in the message
 * ("", " (config file)", " (environment variable X)"). 0 or ERR_INVALID naming the flag, the
 * value and what is allowed. */
static int check_allowed(const OptDef *d, const char *v, const char *from) {
    char allowed[256];
    if (d->choices) {
        for (size_t i = 0; d->choices[i]; i++)
            if (d->choices_nocase ? !strcasecmp(v, d->choices[i]) : !strcmp(v, d->choices[i]))
                return 0;
        allowed_text(d, 0, allowed, sizeof allowed);
        return err_set(ERR_INVALID, "--%s%s: invalid value \"%s\": must be %s", d->name, from, v,
                       allowed);
    }
    if (!d->has_min && !d->has_max) return 0;
    int64_t x = 0;
    if (d->type == OPT_INT)
        x = strtoll(v, NULL, 10);
    else if (d->type == OPT_DURATION)
        duration_parse_ms(v, &x);
    else
        return 0;
    if ((d->has_min && x < d->min) || (d->has_max && x > d->max)) {
        allowed_text(d, 0, allowed, sizeof allowed);
        return err_set(ERR_INVALID, "--%s%s: %s is out of range: must be %s", d->name, from, v,
                       allowed);
    }
    return 0;
}

static int validate_value(const OptDef *d, const char *v) {
    char *end;
    int b;
    int64_t ms;
    switch (d->type) {
    case OPT_BOOL:
        if (go_parse_bool(v, &b))
            return err_set(ERR_INVALID, "--%s: invalid boolean \"%s\"", d->name, v);
        break;
    case OPT_INT:
        errno = 0;
        strtoll(v, &end, 10);
        if (!*v || *end || errno == ERANGE)
            return err_set(ERR_INVALID, "--%s: invalid integer \"%s\"", d->name, v);
        break;
    case OPT_DURATION:
        if (duration_parse_ms(v, &ms))
            return err_set(ERR_INVALID, "--%s: invalid duration \"%s\" (e.g. 20s, 1h30m)", d->name,
                           v);
        if (ms < 0 || ms > DURATION_MAX_MS)
            return err_set(ERR_INVALID,
                           "--%s: duration \"%s\" is out of range: must be between 0 and 100 "
                           "years",
                           d->name, v);
        break;
    default:
        break;
    }
    return 0;
}

static const char *origin_text(const OptDef *d, OptOrigin origin, char *buf, size_t cap) {
    switch (origin) {
    case FROM_ENV:
        snprintf(buf, cap, " (environment variable %s)", d->env);
        return buf;
    case FROM_CONFIG:
        return " (config file)";
    default:
        return "";
    }
}

/* Type check, then (unless the value comes from a config file: opts_finish checks those) the
 * range and allowed values; then stores it. */
static int set_value(Opts *o, size_t idx, const char *v, OptOrigin origin) {
    OptValue *ov = &o->v[idx];
    const OptDef *d = &opt_table[idx];
    char from[96];
    int rc = validate_value(d, v);
    if (!rc && origin != FROM_CONFIG)
        rc = check_allowed(d, v, origin_text(d, origin, from, sizeof from));
    if (rc) return rc;
    if (d->type == OPT_LIST) {
        /* repeatable: a flag given again appends */
        char *copy = strdup(v);
        for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
            ov->items = realloc(ov->items, (ov->n_items + 1) * sizeof *ov->items);
            ov->items[ov->n_items++] = strdup(tok);
        }
        free(copy);
    }
    free(ov->value);
    ov->value = strdup(v);
    ov->origin = origin;
    return 0;
}

/* ---------- unknown flags ---------- */

#define SUGGEST_MAX_LEN 64

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions, so a swapped
 * pair of letters costs 1). a and b at most SUGGEST_MAX_LEN bytes. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    size_t d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The flag of cmd nearest to name[0..len), or NULL when none is close: within an edit
 * distance of a quarter of the name (1 to 3), or the only flag that name is a prefix of. */
static const OptDef *nearest_flag(const char *name, size_t len, unsigned cmd) {
    if (len == 0 || len > SUGGEST_MAX_LEN) return NULL;
    size_t limit = len / 4 < 1 ? 1 : len / 4 > 3 ? 3 : len / 4;
    const OptDef *best = NULL, *prefix_of = NULL;
    size_t best_d = limit + 1, n_prefix = 0;
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & cmd)) continue;
        size_t dl = strlen(d->name);
        if (dl <= SUGGEST_MAX_LEN) {
            size_t dist = edit_distance(name, len, d->name, dl);
            if (dist < best_d) {
                best_d = dist;
                best = d;
            }
        }
        if (len >= 3 && dl > len && !strncmp(d->name, name, len)) {
            prefix_of = d;
            n_prefix++;
        }
    }
    if (best) return best;
    return n_prefix == 1 ? prefix_of : NULL;
}

static int unknown_flag(const char *name, size_t len, unsigned cmd) {
    const OptDef *near = nearest_flag(name, len, cmd);
    size_t idx;
    const OptDef *elsewhere = find_long(name, len, ~0u, &idx);
    char cmds[128];
    if (elsewhere) commands_text(elsewhere->commands, cmds, sizeof cmds);
    if (elsewhere && cmds[0])
        return err_set(ERR_INVALID, "unknown flag: --%.*s (a flag of %s only)", (int)len, name,
                       cmds);
    if (near)
        return err_set(ERR_INVALID, "unknown flag: --%.*s; did you mean --%s?", (int)len, name,
                       near->name);
    return err_set(ERR_INVALID, "unknown flag: --%.*s", (int)len, name);
}

/* ---------- parsing ---------- */

int opts_parse(unsigned cmd, int argc, char **argv, Opts **out, int *help_requested) {
    Opts *o = calloc(1, sizeof *o);
    if (!o) return err_set(ERR_NOMEM, "out of memory");
    o->cmd = cmd;
    *help_requested = 0;
    int rc = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        size_t idx = 0;
        const OptDef *d = NULL;
        const char *val = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help_requested = 1;
            continue;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            d = find_long(a + 2, len, cmd, &idx);
            if (!d) {
                rc = unknown_flag(a + 2, len, cmd);
                goto done;
            }
            if (eq) val = eq + 1;
        } else if (a[0] == '-' && a[1] && a[2] == '\0') {
            d = find_short(a[1], cmd, &idx);
            if (!d) {
                rc = err_set(ERR_INVALID, "unknown shorthand flag: '%c' in %s", a[1], a);
                goto done;
            }
        } else if (a[0] == '-' && a[1] && a[2] == '=') {
            d = find_short(a[1], cmd, &idx);
            if (!d) {
                rc = err_set(ERR_INVALID, "unknown shorthand flag: '%c' in %s", a[1], a);
                goto done;
            }
            val = a + 3;
        } else {
            rc = err_set(ERR_INVALID, "unexpected argument \"%s\"", a);
            goto done;
        }
        if (!val) {
            if (d->type == OPT_BOOL) {
                val = "true";
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                rc = err_set(ERR_INVALID, "flag needs an argument: --%s", d->name);
                goto done;
            }
        }
        rc = set_value(o, idx, val, FROM_CLI);
        if (rc) goto done;
    }
    /* environment fallbacks, then defaults for lists */
    for (size_t i = 0; i < N_OPTS; i++) {
        if (!(opt_table[i].commands & cmd) || o->v[i].origin == FROM_CLI) continue;
        const char *env = opt_table[i].env ? getenv(opt_table[i].env) : NULL;
        if (env && *env) {
            rc = set_value(o, i, env, FROM_ENV);
            if (rc) goto done;
        } else if (opt_table[i].type == OPT_LIST && opt_table[i].def[0]) {
            rc = set_value(o, i, opt_table[i].def, FROM_DEFAULT);
            if (rc) goto done;
        }
    }
done:
    if (rc) {
        opts_free(o);
        return rc;
    }
    *out = o;
    return 0;
}

int opts_set_from_config(Opts *o, const char *name, const char *value) {
    size_t idx;
    if (!find_long(name, strlen(name), o->cmd, &idx))
        return err_set(ERR_INVALID, "config file: option %s does not apply to this command", name);
    OptValue *ov = &o->v[idx];
    if (ov->origin >= FROM_ENV) return 0; /* the command line or environment wins */
    for (size_t j = 0; j < ov->n_items; j++)
        free(ov->items[j]);
    free(ov->items);
    ov->items = NULL;
    ov->n_items = 0;
    int rc = set_value(o, idx, value, FROM_CONFIG);
    if (rc) return err_wrap(rc, "config file");
    return 0;
}

/* The flag's support status for command cmd (0: whatever command), or NULL when it works. */
static const char *support_text_for(const OptDef *d, unsigned cmd, char *buf, size_t cap) {
    if (d->support == OPT_UNIMPLEMENTED) return "not implemented yet: ignored";
    if (d->support == OPT_IGNORED) {
        snprintf(buf, cap, "ignored: %s", d->ignored);
        return buf;
    }
    if (cmd & d->ignored_in) {
        snprintf(buf, cap, "ignored here: %s", d->ignored_in_why);
        return buf;
    }
    return NULL;
}

static const char *support_text(const OptDef *d, char *buf, size_t cap) {
    return support_text_for(d, 0, buf, cap);
}

/* A value as logs may show it: secrets redacted, and so is any value holding key material (the
 * keys given as --encryption-key-file instead of a file name: docs/encryption.md). */
static const char *value_shown(const OptDef *d, const char *v) {
    if (v[0] && (d->secret || crypt_text_holds_key(v, strlen(v)))) return "<redacted>";
    return v;
}

int opts_finish(const Opts *o) {
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        const OptValue *ov = &o->v[i];
        if (!(d->commands & o->cmd) || ov->origin != FROM_CONFIG) continue;
        int rc = check_allowed(d, ov->value, " (config file)");
        if (rc) return rc;
    }
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        const OptValue *ov = &o->v[i];
        char why[256], from[96];
        const char *status = support_text_for(d, o->cmd, why, sizeof why);
        if (!(d->commands & o->cmd) || !status || ov->origin == FROM_DEFAULT) continue;
        const char *src = ov->origin == FROM_CLI ? " (command line)"
                                                 : origin_text(d, ov->origin, from, sizeof from);
        log_warn("--%s=%s%s: %s", d->name, value_shown(d, ov->value), src, status);
    }
    return 0;
}

const OptDef *opts_table(size_t *n) {
    *n = N_OPTS;
    return opt_table;
}

void opts_free(Opts *o) {
    if (!o) return;
    for (size_t i = 0; i < N_OPTS; i++) {
        free(o->v[i].value);
        for (size_t j = 0; j < o->v[i].n_items; j++)
            free(o->v[i].items[j]);
        free(o->v[i].items);
    }
    free(o);
}

static size_t lookup(const Opts *o, const char *name) {
    size_t idx;
    if (!find_long(name, strlen(name), o->cmd, &idx)) {
        fprintf(stderr, "internal error: option --%s not defined for this command\n", name);
        abort();
    }
    return idx;
}

const char *opt_str(const Opts *o, const char *name) {
    size_t i = lookup(o, name);
    return o->v[i].value ? o->v[i].value : opt_table[i].def;
}

int opt_bool(const Opts *o, const char *name) {
    int b = 0;
    go_parse_bool(opt_str(o, name), &b);
    return b;
}

int64_t opt_int(const Opts *o, const char *name) {
    return strtoll(opt_str(o, name), NULL, 10);
}

int64_t opt_duration_ms(const Opts *o, const char *name) {
    int64_t ms = 0;
    duration_parse_ms(opt_str(o, name), &ms);
    return ms;
}

const char *const *opt_list(const Opts *o, const char *name, size_t *n) {
    size_t i = lookup(o, name);
    *n = o->v[i].n_items;
    return (const char *const *)o->v[i].items;
}

int opt_is_set(const Opts *o, const char *name) {
    return o->v[lookup(o, name)].origin >= FROM_ENV;
}

int opts_has(const Opts *o, const char *name) {
    size_t idx;
    return find_long(name, strlen(name), o->cmd, &idx) != NULL;
}

/* ---------- help and docs ---------- */

static const char *type_name(OptType t) {
    switch (t) {
    case OPT_BOOL:
        return "bool";
    case OPT_INT:
        return "int";
    case OPT_DURATION:
        return "duration";
    case OPT_LIST:
        return "strings";
    default:
        return "string";
    }
}

void opts_print_help(unsigned cmd) {
    printf("Flags:\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & cmd)) continue;
        char left[96], allowed[256], why[256];
        const char *type = d->type == OPT_BOOL ? "" : type_name(d->type);
        if (d->short_name)
            snprintf(left, sizeof left, "  -%c, --%s%s%s", d->short_name, d->name, *type ? " " : "",
                     type);
        else
            snprintf(left, sizeof left, "      --%s%s%s", d->name, *type ? " " : "", type);
        printf("%-52s %s", left, d->help);
        const char *status = support_text_for(d, cmd, why, sizeof why);
        if (status) printf(" (%s)", status);
        allowed_text(d, 0, allowed, sizeof allowed);
        if (allowed[0]) printf(" (%s)", allowed);
        if (d->def[0]) printf(" (default \"%s\")", d->def);
        if (d->env) printf(" [env %s]", d->env);
        printf("\n");
    }
    printf("  -h, --help%42s help for this command\n", "");
}

/* Markdown table cell text: '|', '<' and '>' escaped, no line breaks. */
static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '\n')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

void opts_write_markdown(FILE *f) {
    fputs("# Flags reference\n\n"
          "<!-- Generated from the option table in src/cmd/opts.c by `etcdbrctl __flags-md > "
          "docs/flags.md`;\n"
          "     do not edit by hand: the unit test test_opts fails when this file and the table "
          "differ. -->\n\n"
          "Every flag of every command, generated from the one option table that also drives the "
          "parser\nand `--help`. Flag syntax is the Go tool's (pflag): `--name=value`, "
          "`--name value`, `-x value`;\na bool flag alone means true (`--name=false` to turn it "
          "off); list flags take comma-separated\nvalues and may be repeated. Durations use Go's "
          "syntax (`20s`, `1h30m`, `500ms`).\n\n"
          "Precedence: command line > environment variable > config file (`--config-file`, "
          "`server` and\n`run`; docs/config-file.md) > default.\n\n"
          "A value outside a flag's range or allowed values is a usage error (exit 2) naming the "
          "flag and\nwhat it allows, wherever it was given. A mistyped flag gets the nearest "
          "flag of the command\nsuggested.\n\n"
          "Flags marked **not implemented yet** or **ignored** are accepted so that the Go "
          "tool's command\nlines and config files keep working, but they have no effect; giving "
          "one (command line,\nenvironment or config file) logs a warning at start.\n\n",
          f);
    fputs("## Flags\n\n"
          "| flag | type | default | allowed | environment | commands | description |\n"
          "|---|---|---|---|---|---|---|\n",
          f);
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        char cmds[128], allowed[256], why[256];
        commands_text(d->commands, cmds, sizeof cmds);
        if (!cmds[0]) continue; /* only for commands not built yet (compact, copy) */
        fputs("| ", f);
        if (d->short_name) fprintf(f, "`-%c`, ", d->short_name);
        fprintf(f, "`--%s` | %s | ", d->name, type_name(d->type));
        if (d->def[0]) {
            fputc('`', f);
            md_cell(f, d->def);
            fputc('`', f);
        }
        allowed_text(d, 1, allowed, sizeof allowed);
        fputs(" | ", f);
        md_cell(f, allowed);
        fputs(" | ", f);
        if (d->env) fprintf(f, "`%s`", d->env);
        fprintf(f, " | %s | ", cmds);
        const char *status = support_text(d, why, sizeof why);
        if (status) {
            fputs("**", f);
            md_cell(f, status);
            fputs(".** ", f);
        }
        md_cell(f, d->help);
        if (d->ignored_in) {
            char in[128];
            commands_text(d->ignored_in, in, sizeof in);
            fputs(" **Ignored by ", f);
            md_cell(f, in);
            fputs(": ", f);
            md_cell(f, d->ignored_in_why);
            fputs(".**", f);
        }
        fputs(" |\n", f);
    }
    static const OptSupport kinds[] = {OPT_UNIMPLEMENTED, OPT_IGNORED};
    static const char *const titles[] = {
        "## Not implemented yet\n\nAccepted for compatibility; their features are not built "
        "yet.\n\n",
        "## Ignored on purpose\n\nThe Go tool's settings that have no meaning here.\n\n"};
    for (size_t k = 0; k < 2; k++) {
        fprintf(f, "\n%s", titles[k]);
        for (size_t i = 0; i < N_OPTS; i++) {
            const OptDef *d = &opt_table[i];
            char cmds[128];
            commands_text(d->commands, cmds, sizeof cmds);
            if (kinds[k] == OPT_IGNORED && d->support != OPT_IGNORED && d->ignored_in) {
                commands_text(d->ignored_in, cmds, sizeof cmds);
                fprintf(f, "- `--%s` (%s): %s\n", d->name, cmds, d->ignored_in_why);
                continue;
            }
            if (d->support != kinds[k] || !cmds[0]) continue;
            fprintf(f, "- `--%s` (%s)", d->name, cmds);
            if (d->support == OPT_IGNORED) fprintf(f, ": %s", d->ignored);
            fputs("\n", f);
        }
    }
}

void opts_log_effective(const Opts *o, const char *command) {
    char line[16384];
    size_t n = 0;
    line[0] = '\0';
    for (size_t i = 0; i < N_OPTS && n < sizeof line - 1; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & o->cmd)) continue;
        const char *v = o->v[i].value ? o->v[i].value : d->def;
        v = value_shown(d, v);
        int w = snprintf(line + n, sizeof line - n, "%s%s=%s", n ? " " : "", d->name, v);
        if (w < 0) break;
        n += (size_t)w;
    }
    log_info("etcdbrctl %s %s: %s", command, ETCDBR_VERSION, line);
}
