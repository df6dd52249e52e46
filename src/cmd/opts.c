/* opts: the options table and its parser; see opts.h. Names and defaults are the Go tool's
 * (seed-spec §1) except where DESIGN.md says we differ (insecure-skip-tls-verify defaults to
 * false: the Go tool's true default silently disables certificate checks). */
#include "opts.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETCD (CMD_SNAPSHOT | CMD_SERVER | CMD_INITIALIZE)
#define STORE (CMD_SNAPSHOT | CMD_RESTORE | CMD_SERVER | CMD_INITIALIZE | CMD_COMPACT | CMD_COPY)
#define SNAP (CMD_SNAPSHOT | CMD_SERVER)
#define RESTORE (CMD_RESTORE | CMD_SERVER | CMD_INITIALIZE | CMD_COMPACT)
#define ALL (STORE | ETCD | RESTORE)

static const OptDef opt_table[] = {
    /* logging */
    {"log-level", 0, OPT_STRING, "info", NULL, ALL, 0,
     "log level: error, warn, info, debug (or logrus numbers 2-6)"},
    {"log-format", 0, OPT_STRING, "text", NULL, ALL, 0, "log format: text or json"},
    /* ETCD connection (seed-spec §1.1) */
    {"endpoints", 'e', OPT_LIST, "http://127.0.0.1:2379", NULL, ETCD, 0,
     "comma-separated etcd client endpoints; failover in order"},
    {"service-endpoints", 0, OPT_LIST, "", NULL, ETCD, 0,
     "endpoints reaching etcd through a Service"},
    {"etcd-username", 0, OPT_STRING, "", "ETCD_USERNAME", ETCD, 0, "etcd user name"},
    {"etcd-password", 0, OPT_STRING, "", "ETCD_PASSWORD", ETCD, 1, "etcd password"},
    {"etcd-connection-timeout", 0, OPT_DURATION, "30s", NULL, ETCD, 0,
     "timeout of short etcd calls"},
    {"etcd-snapshot-timeout", 0, OPT_DURATION, "15m", NULL, ETCD | CMD_COMPACT, 0,
     "timeout of a whole full snapshot stream"},
    {"etcd-defrag-timeout", 0, OPT_DURATION, "8m", NULL, ETCD | CMD_COMPACT, 0,
     "timeout of defragmenting one member"},
    {"insecure-transport", 0, OPT_BOOL, "true", NULL, ETCD, 0,
     "plain HTTP/2 to etcd unless an endpoint is https:// or certificates are given"},
    {"insecure-skip-tls-verify", 0, OPT_BOOL, "false", NULL, ETCD, 0,
     "do not verify etcd's server certificate (the Go tool defaults to true; we do not)"},
    {"cacert", 0, OPT_STRING, "", NULL, ETCD, 0, "CA bundle to verify etcd's certificate"},
    {"cert", 0, OPT_STRING, "", NULL, ETCD, 0, "client certificate for etcd"},
    {"key", 0, OPT_STRING, "", NULL, ETCD, 0, "client key for etcd"},
    /* STORE (seed-spec §1.2) */
    {"storage-provider", 0, OPT_STRING, "", NULL, STORE, 0,
     "snapshot store: Local (default when empty)"},
    {"store-container", 0, OPT_STRING, "", "STORAGE_CONTAINER", STORE, 0,
     "bucket/container; Local: directory (relative = relative to $HOME; default default.bkp)"},
    {"store-endpoint-override", 0, OPT_STRING, "", NULL, STORE, 0, "object store endpoint URL"},
    {"store-prefix", 0, OPT_STRING, "", NULL, STORE, 0,
     "key prefix; objects are written under <prefix>/v2/"},
    {"max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, STORE, 0, "parallel part uploads"},
    {"min-chunk-size", 0, OPT_INT, "5242880", NULL, STORE, 0, "minimum part size in bytes"},
    {"snapstore-temp-directory", 0, OPT_STRING, "/tmp", NULL, STORE, 0,
     "staging directory for snapshot and delta spool files"},
    /* SNAPSHOTTER (seed-spec §1.3) */
    {"schedule", 's', OPT_STRING, "0 */1 * * *", NULL, SNAP, 0, "cron schedule of full snapshots"},
    {"delta-snapshot-period", 0, OPT_DURATION, "20s", NULL, SNAP, 0,
     "period of delta snapshots; below 1s disables them"},
    {"delta-snapshot-memory-limit", 0, OPT_INT, "10485760", NULL, SNAP, 0,
     "take a delta as soon as this many bytes of events are pending"},
    {"max-changes-per-delta-snapshot", 0, OPT_INT, "0", NULL, SNAP, 0,
     "take a delta as soon as this many events are pending (0 = no limit)"},
    {"garbage-collection-period", 0, OPT_DURATION, "1m", NULL, SNAP, 0,
     "garbage collection period; 1s or less disables it"},
    {"garbage-collection-policy", 0, OPT_STRING, "Exponential", NULL, SNAP, 0,
     "Exponential or LimitBased"},
    {"max-backups", 'm', OPT_INT, "7", NULL, SNAP, 0, "full snapshots kept by LimitBased"},
    {"delta-snapshot-retention-period", 0, OPT_DURATION, "0s", NULL, SNAP, 0,
     "deltas younger than this are never removed by garbage collection"},
    {"defragmentation-schedule", 0, OPT_STRING, "0 0 */3 * *", NULL, SNAP, 0,
     "cron schedule of defragmentation"},
    /* COMPRESSION (seed-spec §1.4) */
    {"compress-snapshots", 0, OPT_BOOL, "true", NULL, SNAP, 0, "compress full and delta snapshots"},
    {"compression-policy", 0, OPT_STRING, "gzip", NULL, SNAP, 0, "gzip, zlib, lzw or zstd"},
    /* BACKOFF (seed-spec §1.5) */
    {"backoff-multiplier", 0, OPT_INT, "2", NULL, SNAP, 0, "backoff multiplier"},
    {"backoff-attempt-limit", 0, OPT_INT, "6", NULL, SNAP, 0, "attempts before the threshold"},
    {"backoff-threshold-time", 0, OPT_DURATION, "128s", NULL, SNAP, 0, "backoff cap"},
    /* RESTORE (seed-spec §1.6) */
    {"initial-cluster", 0, OPT_STRING, "default=http://localhost:2380", NULL, RESTORE, 0,
     "initial cluster of the restored member set"},
    {"initial-cluster-token", 0, OPT_STRING, "etcd-cluster", NULL, RESTORE, 0,
     "initial cluster token"},
    {"data-dir", 'd', OPT_STRING, "default.etcd", NULL, RESTORE, 0, "data dir to restore into"},
    {"restoration-temp-snapshots-dir", 0, OPT_STRING, "default.restoration.tmp", NULL, RESTORE, 0,
     "scratch directory for downloaded snapshots"},
    {"initial-advertise-peer-urls", 0, OPT_LIST, "http://localhost:2380", NULL, RESTORE, 0,
     "peer URLs of the restored member"},
    {"name", 0, OPT_STRING, "default", NULL, RESTORE, 0, "member name"},
    {"skip-hash-check", 0, OPT_BOOL, "false", NULL, RESTORE, 0,
     "accept a full snapshot without its sha256 trailer"},
    {"max-fetchers", 0, OPT_INT, "6", NULL, RESTORE, 0, "parallel delta downloads"},
    {"max-call-send-message-size", 0, OPT_INT, "10485760", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting; ignored: restore builds the db offline, no etcd runs"},
    {"max-request-bytes", 0, OPT_INT, "10485760", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting; ignored: restore builds the db offline, no etcd runs"},
    {"max-txn-ops", 0, OPT_INT, "10240", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting; ignored: restore builds the db offline, no etcd runs"},
    {"embedded-etcd-quota-bytes", 0, OPT_INT, "8589934592", NULL, RESTORE, 0,
     "warn when the restored db is larger than this many bytes (etcd's --quota-backend-bytes "
     "must then be raised to start on it)"},
    {"auto-compaction-mode", 0, OPT_STRING, "periodic", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting (periodic or revision); ignored: no etcd runs"},
    {"auto-compaction-retention", 0, OPT_STRING, "30m", NULL, RESTORE, 0,
     "the Go tool's embedded-etcd setting; ignored: no etcd runs"},
    {"etcd-bin", 0, OPT_STRING, "", "ETCDBR_ETCD_BIN", RESTORE, 0,
     "ignored since restore starts no etcd (kept so that existing scripts run)"},
    {"etcdutl-bin", 0, OPT_STRING, "", "ETCDBR_ETCDUTL_BIN", RESTORE, 0,
     "etcdutl (3.5+) or etcdctl (3.4) used for snapshot restore (default: etcdutl, else etcdctl)"},
    /* point in time and revision bump (restore and initialize; docs/restore.md) */
    {"revision", 0, OPT_INT, "0", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "restore exactly the state at this revision (newest full snapshot at or before it plus the "
     "deltas up to it); 0 = the latest revision in the store"},
    {"time", 0, OPT_STRING, "", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "restore the last revision whose events were recorded at or before this RFC 3339 time "
     "(e.g. 2026-12-01T14:30:00Z); excludes --revision"},
    {"bump-revision", 0, OPT_INT, "0", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "add this many revisions after the restored one (as etcdutl snapshot restore "
     "--bump-revision); needs --mark-compacted"},
    {"mark-compacted", 0, OPT_BOOL, "false", NULL, CMD_RESTORE | CMD_INITIALIZE, 0,
     "with --bump-revision: compact at the bumped revision, so watchers of older revisions get "
     "\"compacted\" instead of silently missing events"},
    {"new-lease-ttl", 0, OPT_DURATION, "1h", NULL, RESTORE, 0,
     "TTL given to a lease granted after the full snapshot when its delta does not record the "
     "TTL (deltas of the Go tool); keys keep their lease either way"},
    /* server (seed-spec §1.7) */
    {"config-file", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "YAML file in the Go tool's format (docs/config-file.md); flags and environment win over it"},
    {"server-port", 'p', OPT_INT, "8080", NULL, CMD_SERVER, 0, "HTTP(S) port, all interfaces"},
    {"enable-profiling", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "serve profiling handlers under /debug/pprof/"},
    {"server-cert", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "TLS certificate of the HTTP server; with --server-key the server speaks HTTPS"},
    {"server-key", 0, OPT_STRING, "", NULL, CMD_SERVER, 0, "TLS key of the HTTP server"},
    {"use-etcd-wrapper", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "after a peer URL change, ask etcd-wrapper (port 9095) to restart etcd"},
    /* HEALTH (seed-spec §1.7; lease flags also for compact, §1.10) */
    {"enable-snapshot-lease-renewal", 0, OPT_BOOL, "false", NULL, CMD_SERVER | CMD_COMPACT, 0,
     "update the full/delta snapshot Leases after snapshots"},
    {"enable-member-lease-renewal", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "periodically renew the member heartbeat Lease"},
    {"k8s-heartbeat-duration", 0, OPT_DURATION, "30s", NULL, CMD_SERVER, 0,
     "member Lease renewal period"},
    {"full-snapshot-lease-name", 0, OPT_STRING, "full-snapshot-revisions", NULL,
     CMD_SERVER | CMD_COMPACT, 0, "name of the full snapshot Lease"},
    {"delta-snapshot-lease-name", 0, OPT_STRING, "delta-snapshot-revisions", NULL,
     CMD_SERVER | CMD_COMPACT, 0, "name of the delta snapshot Lease"},
    /* LEADER-ELECTION (seed-spec §1.7) */
    {"reelection-period", 0, OPT_DURATION, "5s", NULL, CMD_SERVER, 0,
     "period of the backup-leadership check; more than 1s"},
    {"etcd-connection-timeout-leader-election", 0, OPT_DURATION, "5s", NULL, CMD_SERVER, 0,
     "timeout of the Status call of the leadership check; more than 1s"},
    /* SECONDARY store (seed-spec §1.7) */
    {"secondary-storage-provider", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "secondary snapshot store (dual site); empty = none"},
    {"secondary-store-container", 0, OPT_STRING, "", "SECONDARY_STORAGE_CONTAINER", CMD_SERVER, 0,
     "bucket/container of the secondary store"},
    {"secondary-store-endpoint-override", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "secondary object store endpoint URL"},
    {"secondary-store-prefix", 0, OPT_STRING, "", NULL, CMD_SERVER, 0,
     "key prefix in the secondary store"},
    {"secondary-max-parallel-chunk-uploads", 0, OPT_INT, "5", NULL, CMD_SERVER, 0,
     "parallel part uploads to the secondary store"},
    {"secondary-min-chunk-size", 0, OPT_INT, "5242880", NULL, CMD_SERVER, 0,
     "minimum part size in bytes for the secondary store"},
    {"secondary-snapstore-temp-directory", 0, OPT_STRING, "/tmp", NULL, CMD_SERVER, 0,
     "staging directory for the secondary store"},
    {"secondary-backup-sync-enabled", 0, OPT_BOOL, "false", NULL, CMD_SERVER, 0,
     "periodically copy backups to the secondary store and garbage-collect there"},
    {"secondary-backup-sync-period", 0, OPT_DURATION, "1h", NULL, CMD_SERVER, 0,
     "period of the copy to the secondary store"},
    /* initialize (seed-spec §1.11) */
    {"validation-mode", 0, OPT_STRING, "full", NULL, CMD_INITIALIZE, 0,
     "data dir validation before restore: full or sanity"},
};
#define N_OPTS (sizeof opt_table / sizeof opt_table[0])

typedef struct {
    char *value; /* owned; NULL = default */
    int set;
    char **items; /* OPT_LIST split */
    size_t n_items;
} OptValue;

struct Opts {
    unsigned cmd;
    OptValue v[N_OPTS];
};

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

int opts_parse_bool(const char *s, int *out) {
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (!strcmp(s, t[i])) return *out = 1, 0;
        if (!strcmp(s, f[i])) return *out = 0, 0;
    }
    return err_set(ERR_INVALID, "invalid boolean \"%s\"", s);
}

static int validate_value(const OptDef *d, const char *v) {
    char *end;
    int b;
    int64_t ms;
    switch (d->type) {
    case OPT_BOOL:
        if (opts_parse_bool(v, &b))
            return err_set(ERR_INVALID, "--%s: invalid boolean \"%s\"", d->name, v);
        break;
    case OPT_INT:
        strtoll(v, &end, 10);
        if (!*v || *end) return err_set(ERR_INVALID, "--%s: invalid integer \"%s\"", d->name, v);
        break;
    case OPT_DURATION:
        if (duration_parse_ms(v, &ms))
            return err_set(ERR_INVALID, "--%s: invalid duration \"%s\" (e.g. 20s, 1h30m)", d->name,
                           v);
        break;
    default:
        break;
    }
    return 0;
}

static int set_value(Opts *o, size_t idx, const char *v) {
    OptValue *ov = &o->v[idx];
    const OptDef *d = &opt_table[idx];
    int rc = validate_value(d, v);
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
    ov->set = 1;
    return 0;
}

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
                rc = err_set(ERR_INVALID, "unknown flag: --%.*s", (int)len, a + 2);
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
        rc = set_value(o, idx, val);
        if (rc) goto done;
    }
    /* environment fallbacks, then defaults for lists */
    for (size_t i = 0; i < N_OPTS; i++) {
        if (!(opt_table[i].commands & cmd) || o->v[i].set) continue;
        const char *env = opt_table[i].env ? getenv(opt_table[i].env) : NULL;
        if (env && *env) {
            rc = set_value(o, i, env);
            if (rc) goto done;
        } else if (opt_table[i].type == OPT_LIST && opt_table[i].def[0]) {
            rc = set_value(o, i, opt_table[i].def);
            o->v[i].set = 0;
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
    if (o->v[idx].set) return 0; /* the command line or environment wins */
    OptValue *ov = &o->v[idx];
    for (size_t j = 0; j < ov->n_items; j++)
        free(ov->items[j]);
    free(ov->items);
    ov->items = NULL;
    ov->n_items = 0;
    int rc = set_value(o, idx, value);
    if (rc) return err_wrap(rc, "config file");
    ov->set = 0; /* still overridable by nothing, but not "given on the command line" */
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
    opts_parse_bool(opt_str(o, name), &b);
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
    return o->v[lookup(o, name)].set;
}

int opts_has(const Opts *o, const char *name) {
    size_t idx;
    return find_long(name, strlen(name), o->cmd, &idx) != NULL;
}

void opts_print_help(unsigned cmd) {
    printf("Flags:\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & cmd)) continue;
        char left[96];
        const char *type = d->type == OPT_BOOL       ? ""
                           : d->type == OPT_INT      ? " int"
                           : d->type == OPT_DURATION ? " duration"
                           : d->type == OPT_LIST     ? " strings"
                                                     : " string";
        if (d->short_name)
            snprintf(left, sizeof left, "  -%c, --%s%s", d->short_name, d->name, type);
        else
            snprintf(left, sizeof left, "      --%s%s", d->name, type);
        printf("%-52s %s", left, d->help);
        if (d->def[0]) printf(" (default \"%s\")", d->def);
        if (d->env) printf(" [env %s]", d->env);
        printf("\n");
    }
    printf("  -h, --help%42s help for this command\n", "");
}

void opts_log_effective(const Opts *o, const char *command) {
    char line[16384];
    size_t n = 0;
    line[0] = '\0';
    for (size_t i = 0; i < N_OPTS && n < sizeof line - 1; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & o->cmd)) continue;
        const char *v = o->v[i].value ? o->v[i].value : d->def;
        if (d->secret && v[0]) v = "<redacted>";
        int w = snprintf(line + n, sizeof line - n, "%s%s=%s", n ? " " : "", d->name, v);
        if (w < 0) break;
        n += (size_t)w;
    }
    log_info("etcdbrctl %s %s: %s", command, ETCDBR_VERSION, line);
}
