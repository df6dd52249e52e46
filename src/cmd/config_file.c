/* config_file: see config_file.h. Two libyaml passes over the first document: an event pass
 * that enforces the nesting and alias limits before anything is built, then the document API,
 * walked only along the known key table (so unknown subtrees are never descended). Values are
 * checked and collected first and handed to opts_set_from_config only when the whole file is
 * good, so a bad file leaves the options untouched. */
#include "config_file.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/names.h"
#include "../common/timeutil.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

/* Extra mapping entries an alias or merge key may make us visit beyond the document's own
 * nodes: a little re-use is fine, an alias bomb is not. */
#define ALIAS_EXTRA_VISITS 4096
/* Ignored keys logged one by one; the rest are summarised. */
#define MAX_WARNINGS 32

#define S CONFIG_KIND_SECTION
#define STR CONFIG_KIND_STRING
#define BOOL CONFIG_KIND_BOOL
#define INT CONFIG_KIND_INT
#define UINT CONFIG_KIND_UINT
#define DUR CONFIG_KIND_DURATION
#define LIST CONFIG_KIND_LIST

/* The Go tool's BackupRestoreComponentConfig JSON names (docs/go-tool.md §1.7) and the field types
 * that decide what YAML value each accepts. */
static const ConfigFileKey config_keys[] = {
    {"etcdConnectionConfig", S, NULL},
    {"etcdConnectionConfig.endpoints", LIST, "endpoints"},
    {"etcdConnectionConfig.serviceEndpoints", LIST, "service-endpoints"},
    {"etcdConnectionConfig.username", STR, "etcd-username"},
    {"etcdConnectionConfig.password", STR, "etcd-password"},
    {"etcdConnectionConfig.certFile", STR, "cert"},
    {"etcdConnectionConfig.keyFile", STR, "key"},
    {"etcdConnectionConfig.caFile", STR, "cacert"},
    {"etcdConnectionConfig.connectionTimeout", DUR, "etcd-connection-timeout"},
    {"etcdConnectionConfig.snapshotTimeout", DUR, "etcd-snapshot-timeout"},
    {"etcdConnectionConfig.defragTimeout", DUR, "etcd-defrag-timeout"},
    {"etcdConnectionConfig.maxCallSendMsgSize", INT, NULL}, /* no flag in the Go tool either */
    {"etcdConnectionConfig.insecureTransport", BOOL, "insecure-transport"},
    {"etcdConnectionConfig.insecureSkipVerify", BOOL, "insecure-skip-tls-verify"},

    {"serverConfig", S, NULL},
    {"serverConfig.port", UINT, "server-port"},
    {"serverConfig.enableProfiling", BOOL, "enable-profiling"},
    {"serverConfig.server-cert", STR, "server-cert"},
    {"serverConfig.server-key", STR, "server-key"},

    {"snapshotterConfig", S, NULL},
    {"snapshotterConfig.schedule", STR, "schedule"},
    {"snapshotterConfig.deltaSnapshotPeriod", DUR, "delta-snapshot-period"},
    {"snapshotterConfig.deltaSnapshotMemoryLimit", UINT, "delta-snapshot-memory-limit"},
    {"snapshotterConfig.garbageCollectionPeriod", DUR, "garbage-collection-period"},
    {"snapshotterConfig.garbageCollectionPolicy", STR, "garbage-collection-policy"},
    {"snapshotterConfig.maxBackups", UINT, "max-backups"},
    {"snapshotterConfig.deltaSnapshotRetentionPeriod", DUR, "delta-snapshot-retention-period"},

    {"snapstoreConfig", S, NULL},
    {"snapstoreConfig.provider", STR, "storage-provider"},
    {"snapstoreConfig.container", STR, "store-container"},
    {"snapstoreConfig.endpointOverride", STR, "store-endpoint-override"},
    {"snapstoreConfig.prefix", STR, "store-prefix"},
    {"snapstoreConfig.tempDir", STR, "snapstore-temp-directory"},
    {"snapstoreConfig.envPrefix", STR, NULL}, /* internal to the Go tool */
    {"snapstoreConfig.maxParallelChunkUploads", UINT, "max-parallel-chunk-uploads"},
    {"snapstoreConfig.minChunkSize", INT, "min-chunk-size"},
    {"snapstoreConfig.isSource", BOOL, NULL}, /* internal to the Go tool */

    {"secondarySnapstoreConfig", S, NULL},
    {"secondarySnapstoreConfig.StoreConfig", S, NULL},
    {"secondarySnapstoreConfig.StoreConfig.provider", STR, "secondary-storage-provider"},
    {"secondarySnapstoreConfig.StoreConfig.container", STR, "secondary-store-container"},
    {"secondarySnapstoreConfig.StoreConfig.endpointOverride", STR,
     "secondary-store-endpoint-override"},
    {"secondarySnapstoreConfig.StoreConfig.prefix", STR, "secondary-store-prefix"},
    {"secondarySnapstoreConfig.StoreConfig.tempDir", STR, "secondary-snapstore-temp-directory"},
    {"secondarySnapstoreConfig.StoreConfig.envPrefix", STR, NULL},
    {"secondarySnapstoreConfig.StoreConfig.maxParallelChunkUploads", UINT,
     "secondary-max-parallel-chunk-uploads"},
    {"secondarySnapstoreConfig.StoreConfig.minChunkSize", INT, "secondary-min-chunk-size"},
    {"secondarySnapstoreConfig.StoreConfig.isSource", BOOL, NULL},
    {"secondarySnapstoreConfig.backupSyncEnabled", BOOL, "secondary-backup-sync-enabled"},
    {"secondarySnapstoreConfig.syncPeriod", DUR, "secondary-backup-sync-period"},

    {"compressionConfig", S, NULL},
    {"compressionConfig.enabled", BOOL, "compress-snapshots"},
    {"compressionConfig.policy", STR, "compression-policy"},

    {"restorationConfig", S, NULL},
    {"restorationConfig.initialCluster", STR, "initial-cluster"},
    {"restorationConfig.initialClusterToken", STR, "initial-cluster-token"},
    {"restorationConfig.dataDir", STR, "data-dir"},
    {"restorationConfig.tempDir", STR, "restoration-temp-snapshots-dir"},
    {"restorationConfig.name", STR, "name"},
    {"restorationConfig.initialAdvertisePeerURLs", LIST, "initial-advertise-peer-urls"},
    {"restorationConfig.MaxTxnOps", UINT, "max-txn-ops"},
    {"restorationConfig.MaxRequestBytes", UINT, "max-request-bytes"},
    {"restorationConfig.maxCallSendMsgSize", INT, "max-call-send-message-size"},
    {"restorationConfig.embeddedEtcdQuotaBytes", INT, "embedded-etcd-quota-bytes"},
    {"restorationConfig.maxFetchers", UINT, "max-fetchers"},
    {"restorationConfig.skipHashCheck", BOOL, "skip-hash-check"},
    {"restorationConfig.autoCompactionMode", STR, "auto-compaction-mode"},
    {"restorationConfig.autoCompactionRetention", STR, "auto-compaction-retention"},

    {"healthConfig", S, NULL},
    {"healthConfig.snapshotLeaseRenewalEnabled", BOOL, "enable-snapshot-lease-renewal"},
    {"healthConfig.memberLeaseRenewalEnabled", BOOL, "enable-member-lease-renewal"},
    {"healthConfig.heartbeatDuration", DUR, "k8s-heartbeat-duration"},
    {"healthConfig.fullSnapshotLeaseName", STR, "full-snapshot-lease-name"},
    {"healthConfig.deltaSnapshotLeaseName", STR, "delta-snapshot-lease-name"},

    {"leaderElectionConfig", S, NULL},
    {"leaderElectionConfig.reelectionPeriod", DUR, "reelection-period"},
    {"leaderElectionConfig.etcdConnectionTimeout", DUR, "etcd-connection-timeout-leader-election"},

    {"exponentialBackoffConfig", S, NULL},
    {"exponentialBackoffConfig.multiplier", UINT, "backoff-multiplier"},
    {"exponentialBackoffConfig.attemptLimit", UINT, "backoff-attempt-limit"},
    {"exponentialBackoffConfig.thresholdTime", DUR, "backoff-threshold-time"},

    {"defragmentationSchedule", STR, "defragmentation-schedule"},
    {"useEtcdWrapper", BOOL, "use-etcd-wrapper"},
};
#define N_KEYS (sizeof config_keys / sizeof config_keys[0])

#undef S
#undef STR
#undef BOOL
#undef INT
#undef UINT
#undef DUR
#undef LIST

const ConfigFileKey *config_file_keys(size_t *n) {
    *n = N_KEYS;
    return config_keys;
}

/* One checked value waiting to be set. */
typedef struct {
    const ConfigFileKey *key;
    char *value; /* owned; canonical text for opts */
    yaml_mark_t mark;
} Assign;

typedef struct {
    const char *name; /* for messages */
    yaml_document_t *doc;
    Assign *assigns;
    size_t n_assigns, cap_assigns;
    size_t visits, max_visits;
    unsigned warned, ignored;
} Ctx;

/* ---- positions and messages ---------------------------------------------------------------- */

static unsigned long mark_line(yaml_mark_t m) {
    return (unsigned long)m.line + 1;
}

static unsigned long mark_col(yaml_mark_t m) {
    return (unsigned long)m.column + 1;
}

/* 1-based line and column of byte offset off in buf (columns count bytes). */
static void offset_position(const char *buf, size_t len, size_t off, unsigned long *line,
                            unsigned long *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (buf[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int parser_error(const yaml_parser_t *p, const char *buf, size_t len, const char *name) {
    if (p->error == YAML_MEMORY_ERROR) return err_set(ERR_NOMEM, "%s: out of memory", name);
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_READER_ERROR) {
        unsigned long line, col;
        offset_position(buf, len, p->problem_offset, &line, &col);
        return err_set(ERR_INVALID, "%s:%lu:%lu: invalid YAML: %s", name, line, col, problem);
    }
    if (p->context)
        return err_set(ERR_INVALID, "%s:%lu:%lu: invalid YAML: %s (%s at line %lu column %lu)",
                       name, mark_line(p->problem_mark), mark_col(p->problem_mark), problem,
                       p->context, mark_line(p->context_mark), mark_col(p->context_mark));
    return err_set(ERR_INVALID, "%s:%lu:%lu: invalid YAML: %s", name, mark_line(p->problem_mark),
                   mark_col(p->problem_mark), problem);
}

/* Logs one ignored key (the first MAX_WARNINGS of them) and counts it. */
static void warn_ignored(Ctx *c, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void warn_ignored(Ctx *c, yaml_mark_t m, const char *fmt, ...) {
    c->ignored++;
    if (c->warned++ >= MAX_WARNINGS) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_warn("config file %s:%lu:%lu: %s", c->name, mark_line(m), mark_col(m), msg);
}

static const char *node_kind_name(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    default:
        return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "a scalar" : "a quoted string";
    }
}

static const char *kind_expectation(ConfigKind k) {
    static const char *const expectations[] = {
        [CONFIG_KIND_SECTION] = "a mapping",
        [CONFIG_KIND_STRING] = "a string",
        [CONFIG_KIND_BOOL] = "a boolean (true or false, unquoted)",
        [CONFIG_KIND_INT] = "an integer (unquoted)",
        [CONFIG_KIND_UINT] = "a non-negative integer (unquoted)",
        [CONFIG_KIND_DURATION] = "a duration string such as \"30s\" or \"1h30m\"",
        [CONFIG_KIND_LIST] = "a list of strings",
    };
    return NAME_AT(expectations, k, "a list of strings");
}

static int type_error(Ctx *c, const ConfigFileKey *k, const yaml_node_t *v) {
    return err_set(ERR_INVALID, "%s:%lu:%lu: %s: expected %s, found %s", c->name,
                   mark_line(v->start_mark), mark_col(v->start_mark), k->path,
                   kind_expectation(k->kind), node_kind_name(v));
}

/* ---- key matching --------------------------------------------------------------------------- */

/* Case-insensitive comparison of an ASCII table name with a key as written, as Go's
 * encoding/json folds (bytes.EqualFold): besides ASCII case, U+212A KELVIN SIGN folds to 'k'
 * and U+017F LATIN SMALL LETTER LONG S to 's'. */
static int go_fold_equal(const char *canon, size_t canon_len, const unsigned char *s, size_t len) {
    size_t i = 0, j = 0;
    while (i < canon_len && j < len) {
        unsigned char want = (unsigned char)tolower((unsigned char)canon[i]);
        if (s[j] < 0x80) {
            if ((unsigned char)tolower(s[j]) != want) return 0;
            j++;
        } else if (want == 'k' && j + 2 < len && s[j] == 0xE2 && s[j + 1] == 0x84 &&
                   s[j + 2] == 0xAA) {
            j += 3;
        } else if (want == 's' && j + 1 < len && s[j] == 0xC5 && s[j + 1] == 0xBF) {
            j += 2;
        } else {
            return 0;
        }
        i++;
    }
    return i == canon_len && j == len;
}

/* The table entry directly below prefix ("" = top level) whose last segment matches key. */
static const ConfigFileKey *find_key(const char *prefix, const unsigned char *key, size_t len) {
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *p = config_keys[i].path;
        if (plen) {
            if (strncmp(p, prefix, plen) != 0 || p[plen] != '.') continue;
            p += plen + 1;
        }
        if (strchr(p, '.')) continue;
        if (go_fold_equal(p, strlen(p), key, len)) return &config_keys[i];
    }
    return NULL;
}

static const OptDef *find_opt(const char *name) {
    size_t n;
    const OptDef *t = opts_table(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

/* ---- scalars ------------------------------------------------------------------------------- */

static int is_plain(const yaml_node_t *n) {
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int plain_is(const yaml_node_t *n, const char *s) {
    return is_plain(n) && n->data.scalar.length == strlen(s) &&
           memcmp(n->data.scalar.value, s, n->data.scalar.length) == 0;
}

/* YAML null: Go's JSON decoding leaves the field as it was. */
static int is_null(const yaml_node_t *n) {
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (plain_is(n, nulls[i])) return 1;
    return 0;
}

static int is_merge_key(const yaml_node_t *n) {
    return plain_is(n, "<<");
}

/* YAML 1.1 booleans as the Go tool's YAML library (yaml.v2) resolves plain scalars. */
static int yaml_bool(const yaml_node_t *n, int *out) {
    static const char *const t[] = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                    "True", "TRUE", "on",  "On",  "ON"};
    static const char *const f[] = {"n",     "N",     "no",  "No",  "NO", "false",
                                    "False", "FALSE", "off", "Off", "OFF"};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (plain_is(n, t[i])) return *out = 1, 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (plain_is(n, f[i])) return *out = 0, 0;
    return -1;
}

static int digit_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return 99;
}

static int parse_digits(const char *p, int base, uint64_t *v) {
    if (!*p) return -1;
    *v = 0;
    for (; *p; p++) {
        int d = digit_value(*p);
        if (d >= base) return -1;
        if (*v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return -1;
        *v = *v * (uint64_t)base + (uint64_t)d;
    }
    return 0;
}

/* A plain YAML integer as yaml.v2 resolves it (underscores dropped, then Go's
 * strconv.ParseInt base 0: sign, 0x/0o/0b prefixes, a leading 0 for octal; a leading-0 number
 * with 8 or 9 in it reads as decimal, as yaml.v2's float fallback gives). 0 or -1. */
static int yaml_int(const yaml_node_t *n, int64_t *out) {
    if (!is_plain(n)) return -1;
    const char *s = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    char digits[80];
    size_t k = 0;
    if (len == 0 || !(isdigit((unsigned char)s[0]) || s[0] == '+' || s[0] == '-')) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '_') continue;
        if (k + 1 >= sizeof digits) return -1;
        digits[k++] = s[i];
    }
    digits[k] = '\0';
    const char *p = digits;
    int neg = 0;
    if (*p == '+' || *p == '-') neg = *p++ == '-';
    uint64_t v;
    int rc;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        rc = parse_digits(p + 2, 16, &v);
    } else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
        rc = parse_digits(p + 2, 8, &v);
    } else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
        rc = parse_digits(p + 2, 2, &v);
    } else if (p[0] == '0' && p[1]) {
        rc = parse_digits(p + 1, 8, &v);
        if (rc) rc = parse_digits(p, 10, &v);
    } else {
        rc = parse_digits(p, 10, &v);
    }
    if (rc) return -1;
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return -1;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* ---- collecting values --------------------------------------------------------------------- */

static int push_assign(Ctx *c, const ConfigFileKey *k, char *value, yaml_mark_t m) {
    if (!value) return err_set(ERR_NOMEM, "out of memory");
    if (c->n_assigns == c->cap_assigns) {
        size_t cap = c->cap_assigns ? c->cap_assigns * 2 : 32;
        Assign *a = realloc(c->assigns, cap * sizeof *a);
        if (!a) {
            free(value);
            return err_set(ERR_NOMEM, "out of memory");
        }
        c->assigns = a;
        c->cap_assigns = cap;
    }
    c->assigns[c->n_assigns++] = (Assign){k, value, m};
    return 0;
}

static int is_secret(const ConfigFileKey *k) {
    const OptDef *d = k->option ? find_opt(k->option) : NULL;
    return d && d->secret;
}

/* Checks a scalar or list value against the key's kind and queues its canonical text. */
static int collect_leaf(Ctx *c, const ConfigFileKey *k, const yaml_node_t *v) {
    if (v->type == YAML_SCALAR_NODE && is_null(v)) return 0; /* JSON null: no change */
    const unsigned long line = mark_line(v->start_mark), col = mark_col(v->start_mark);

    if (k->kind == CONFIG_KIND_LIST) {
        if (v->type != YAML_SEQUENCE_NODE) return type_error(c, k, v);
        size_t total = 1;
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++) {
            yaml_node_t *item = yaml_document_get_node(c->doc, *it);
            if (!item || item->type != YAML_SCALAR_NODE)
                return err_set(ERR_INVALID, "%s:%lu:%lu: %s: list items must be strings, found %s",
                               c->name, item ? mark_line(item->start_mark) : line,
                               item ? mark_col(item->start_mark) : col, k->path,
                               item ? node_kind_name(item) : "nothing");
            const char *s = (const char *)item->data.scalar.value;
            size_t len = item->data.scalar.length;
            if (is_null(item) || memchr(s, '\0', len) || memchr(s, ',', len))
                return err_set(ERR_INVALID,
                               "%s:%lu:%lu: %s: list items must be non-empty and contain no comma "
                               "or NUL",
                               c->name, mark_line(item->start_mark), mark_col(item->start_mark),
                               k->path);
            total += len + 1;
        }
        char *joined = malloc(total);
        if (!joined) return err_set(ERR_NOMEM, "out of memory");
        size_t off = 0;
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++) {
            yaml_node_t *item = yaml_document_get_node(c->doc, *it);
            if (off) joined[off++] = ',';
            memcpy(joined + off, item->data.scalar.value, item->data.scalar.length);
            off += item->data.scalar.length;
        }
        joined[off] = '\0';
        return push_assign(c, k, joined, v->start_mark);
    }

    if (v->type != YAML_SCALAR_NODE) return type_error(c, k, v);
    const char *s = (const char *)v->data.scalar.value;
    size_t len = v->data.scalar.length;
    if (memchr(s, '\0', len))
        return err_set(ERR_INVALID, "%s:%lu:%lu: %s: value contains a NUL character", c->name, line,
                       col, k->path);
    /* Values of secret options are never echoed; others are, cut to a readable length. */
    const int shown = is_secret(k) ? 0 : len > 64 ? 64 : (int)len;
    const char *ell = !is_secret(k) && len > 64 ? "..." : "";

    switch (k->kind) {
    case CONFIG_KIND_STRING:
        return push_assign(c, k, strndup(s, len), v->start_mark);
    case CONFIG_KIND_BOOL: {
        int b;
        if (yaml_bool(v, &b))
            return err_set(ERR_INVALID, "%s:%lu:%lu: %s: expected %s, found %s \"%.*s%s\"", c->name,
                           line, col, k->path, kind_expectation(k->kind), node_kind_name(v), shown,
                           s, ell);
        return push_assign(c, k, strdup(b ? "true" : "false"), v->start_mark);
    }
    case CONFIG_KIND_INT:
    case CONFIG_KIND_UINT: {
        int64_t i;
        if (yaml_int(v, &i) || (k->kind == CONFIG_KIND_UINT && i < 0))
            return err_set(ERR_INVALID, "%s:%lu:%lu: %s: expected %s, found %s \"%.*s%s\"", c->name,
                           line, col, k->path, kind_expectation(k->kind), node_kind_name(v), shown,
                           s, ell);
        char text[32];
        snprintf(text, sizeof text, "%" PRId64, i);
        return push_assign(c, k, strdup(text), v->start_mark);
    }
    case CONFIG_KIND_DURATION: {
        /* wrappers.Duration unmarshals only a JSON string; a bare number (nanoseconds in Go's
         * time.Duration JSON form) is refused there, and here, except the unambiguous 0. */
        int64_t i, ms;
        if (yaml_int(v, &i) == 0) {
            if (i != 0)
                return err_set(ERR_INVALID,
                               "%s:%lu:%lu: %s: expected %s, found the bare number %.*s%s (a "
                               "duration needs a unit; the Go tool refuses numbers here too)",
                               c->name, line, col, k->path, kind_expectation(k->kind), shown, s,
                               ell);
            return push_assign(c, k, strdup("0"), v->start_mark);
        }
        char *text = strndup(s, len);
        if (!text) return err_set(ERR_NOMEM, "out of memory");
        if (duration_parse_ms(text, &ms)) {
            free(text);
            return err_set(ERR_INVALID, "%s:%lu:%lu: %s: expected %s, found \"%.*s%s\"", c->name,
                           line, col, k->path, kind_expectation(k->kind), shown, s, ell);
        }
        return push_assign(c, k, text, v->start_mark);
    }
    default:
        return type_error(c, k, v);
    }
}

static int walk_mapping(Ctx *c, const yaml_node_t *map, const char *prefix, int depth);

/* A merge key's value: one mapping, or a list of them where earlier ones win. */
static int walk_merge(Ctx *c, const yaml_node_t *v, const char *prefix, int depth) {
    if (v->type == YAML_MAPPING_NODE) return walk_mapping(c, v, prefix, depth + 1);
    if (v->type == YAML_SEQUENCE_NODE) {
        /* later applies overwrite earlier ones, so walk from the end */
        for (yaml_node_item_t *it = v->data.sequence.items.top; it > v->data.sequence.items.start;
             it--) {
            yaml_node_t *m = yaml_document_get_node(c->doc, it[-1]);
            if (!m || m->type != YAML_MAPPING_NODE)
                return err_set(ERR_INVALID,
                               "%s:%lu:%lu: a merge key (<<) takes a mapping or a list of "
                               "mappings",
                               c->name, mark_line(v->start_mark), mark_col(v->start_mark));
            int rc = walk_mapping(c, m, prefix, depth + 1);
            if (rc) return rc;
        }
        return 0;
    }
    return err_set(ERR_INVALID,
                   "%s:%lu:%lu: a merge key (<<) takes a mapping or a list of mappings", c->name,
                   mark_line(v->start_mark), mark_col(v->start_mark));
}

/* Walks one mapping whose keys sit below prefix (canonical path, "" = top level). Merged
 * mappings are walked first so the mapping's own keys win, as YAML merge keys specify. */
static int walk_mapping(Ctx *c, const yaml_node_t *map, const char *prefix, int depth) {
    if (depth > CONFIG_FILE_MAX_DEPTH)
        return err_set(ERR_INVALID, "%s:%lu:%lu: nesting deeper than %d levels", c->name,
                       mark_line(map->start_mark), mark_col(map->start_mark),
                       CONFIG_FILE_MAX_DEPTH);
    const yaml_node_pair_t *start = map->data.mapping.pairs.start;
    const yaml_node_pair_t *top = map->data.mapping.pairs.top;
    int rc;
    for (const yaml_node_pair_t *p = start; p < top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (k && v && is_merge_key(k) && (rc = walk_merge(c, v, prefix, depth))) return rc;
    }
    for (const yaml_node_pair_t *p = start; p < top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (!k || !v)
            return err_set(ERR_INVALID, "%s:%lu:%lu: malformed YAML document", c->name,
                           mark_line(map->start_mark), mark_col(map->start_mark));
        if (++c->visits > c->max_visits)
            return err_set(ERR_INVALID, "%s:%lu:%lu: aliases expand to too many entries", c->name,
                           mark_line(k->start_mark), mark_col(k->start_mark));
        if (k->type != YAML_SCALAR_NODE)
            return err_set(ERR_INVALID, "%s:%lu:%lu: %s%smapping keys must be scalars, found %s",
                           c->name, mark_line(k->start_mark), mark_col(k->start_mark), prefix,
                           *prefix ? ": " : "", node_kind_name(k));
        if (is_merge_key(k)) continue;
        const unsigned char *ks = k->data.scalar.value;
        size_t klen = k->data.scalar.length;
        int kshow = klen > 80 ? 80 : (int)klen;
        const ConfigFileKey *e = find_key(prefix, ks, klen);
        if (!e) {
            const char *hint = "";
            if (strcmp(prefix, "restorationConfig") == 0 &&
                go_fold_equal("restoreDataDir", 14, ks, klen))
                hint = " (the Go tool's example file uses it but the Go tool ignores it too; "
                       "restorationConfig.dataDir sets --data-dir)";
            warn_ignored(c, k->start_mark, "unknown key %s%s%.*s%s, ignored%s", prefix,
                         *prefix ? "." : "", kshow, (const char *)ks, klen > 80 ? "..." : "", hint);
            continue;
        }
        if (e->kind == CONFIG_KIND_SECTION) {
            if (v->type == YAML_SCALAR_NODE && is_null(v)) continue;
            if (v->type != YAML_MAPPING_NODE) return type_error(c, e, v);
            if ((rc = walk_mapping(c, v, e->path, depth + 1))) return rc;
            continue;
        }
        size_t before = c->n_assigns;
        if ((rc = collect_leaf(c, e, v))) return rc;
        if (!e->option) {
            /* type-checked as the Go tool would, but there is nothing to set */
            if (c->n_assigns > before) free(c->assigns[--c->n_assigns].value);
            warn_ignored(c, k->start_mark, "key %s has no etcdbr option, ignored", e->path);
        }
    }
    return 0;
}

/* Event pass: refuses deep nesting and many aliases before the document API builds anything.
 * Stops at the end of the first document. */
static int check_limits(const char *buf, size_t len, const char *name) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return err_set(ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    int depth = 0, aliases = 0, rc = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = parser_error(&p, buf, len, name);
            break;
        }
        yaml_event_type_t t = ev.type;
        yaml_mark_t m = ev.start_mark;
        yaml_event_delete(&ev);
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > CONFIG_FILE_MAX_DEPTH) {
                rc = err_set(ERR_INVALID, "%s:%lu:%lu: nesting deeper than %d levels", name,
                             mark_line(m), mark_col(m), CONFIG_FILE_MAX_DEPTH);
                break;
            }
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (t == YAML_ALIAS_EVENT) {
            if (++aliases > CONFIG_FILE_MAX_ALIASES) {
                rc = err_set(ERR_INVALID, "%s:%lu:%lu: more than %d aliases", name, mark_line(m),
                             mark_col(m), CONFIG_FILE_MAX_ALIASES);
                break;
            }
        } else if (t == YAML_DOCUMENT_END_EVENT || t == YAML_STREAM_END_EVENT) {
            break;
        }
    }
    yaml_parser_delete(&p);
    return rc;
}

static void free_assigns(Ctx *c) {
    for (size_t i = 0; i < c->n_assigns; i++) {
        /* may hold the etcd password */
        explicit_bzero(c->assigns[i].value, strlen(c->assigns[i].value));
        free(c->assigns[i].value);
    }
    free(c->assigns);
}

int config_file_apply_buffer(Opts *o, const char *buf, size_t len, const char *name,
                             ConfigFileStats *stats) {
    ConfigFileStats st = {0, 0, 0};
    if (stats) *stats = st;
    if (len > CONFIG_FILE_MAX_BYTES) {
        unsigned long line, col;
        offset_position(buf, len, CONFIG_FILE_MAX_BYTES, &line, &col);
        return err_set(ERR_INVALID, "%s:%lu:%lu: config file larger than %d bytes (1 MiB)", name,
                       line, col, CONFIG_FILE_MAX_BYTES);
    }
    int rc = check_limits(buf, len, name);
    if (rc) return rc;

    yaml_parser_t p;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&p)) return err_set(ERR_NOMEM, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&p, &doc)) {
        rc = parser_error(&p, buf, len, name);
        yaml_parser_delete(&p);
        return rc;
    }
    yaml_parser_delete(&p);

    Ctx c = {.name = name, .doc = &doc};
    c.max_visits = (size_t)(doc.nodes.top - doc.nodes.start) + ALIAS_EXTRA_VISITS;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && !(root->type == YAML_SCALAR_NODE && is_null(root))) {
        if (root->type != YAML_MAPPING_NODE)
            rc = err_set(ERR_INVALID, "%s:%lu:%lu: the top level must be a mapping, found %s", name,
                         mark_line(root->start_mark), mark_col(root->start_mark),
                         node_kind_name(root));
        else
            rc = walk_mapping(&c, root, "", 1);
    }
    if (rc) goto done;

    /* Every value is good: set them in document order (a repeated key: the last one wins). */
    for (size_t i = 0; i < c.n_assigns; i++) {
        const Assign *a = &c.assigns[i];
        if (opts_set_from_config(o, a->key->option, a->value)) {
            /* values were checked as the table's type wants, so only "not for this command" */
            warn_ignored(&c, a->mark, "key %s (--%s) does not apply to this command, ignored",
                         a->key->path, a->key->option);
            continue;
        }
        if (opt_is_set(o, a->key->option)) {
            st.overridden++;
            log_debug("config file %s: %s ignored: --%s was given on the command line or in the "
                      "environment",
                      name, a->key->path, a->key->option);
        } else {
            st.applied++;
        }
    }
    if (c.warned > MAX_WARNINGS)
        log_warn("config file %s: %u more ignored keys not listed", name, c.warned - MAX_WARNINGS);
    st.ignored = c.ignored;
    if (stats) *stats = st;
done:
    free_assigns(&c);
    yaml_document_delete(&doc);
    return rc;
}

int config_file_apply(Opts *o, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(ERR_IO, "config file %s: %s", path, strerror(errno));
    /* one byte more than the limit tells "too large" without trusting st_size (pipes, /proc) */
    char *buf = malloc(CONFIG_FILE_MAX_BYTES + 1);
    if (!buf) {
        close(fd);
        return err_set(ERR_NOMEM, "out of memory");
    }
    size_t len = 0;
    int rc = 0;
    while (len < CONFIG_FILE_MAX_BYTES + 1) {
        ssize_t r = read(fd, buf + len, CONFIG_FILE_MAX_BYTES + 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = err_set(ERR_IO, "config file %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    if (!rc) rc = config_file_apply_buffer(o, buf, len, path, NULL);
    explicit_bzero(buf, len); /* may hold the etcd password */
    free(buf);
    return rc;
}
