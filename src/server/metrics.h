/* metrics: a small thread-safe Prometheus registry (counters, gauges, histograms, callback
 * metrics) rendered in text exposition format 0.0.4, the etcdbr catalogue (docs/go-tool.md §11) and
 * the process_* metrics of Go's client (read from /proc at scrape time).
 * One mutex per registry guards every metric in it. Each labelled metric has a cap on label
 * children; values beyond it fold into one child whose label values are all "other", so no input
 * can grow /metrics without bound (docs/go-tool.md §15.14). Depends on common/ only. */
#ifndef ETCDBR_METRICS_H
#define ETCDBR_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* Value of the Content-Type header for metrics_render() output. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Label children per metric before new label values fold into the "other" child. */
#define METRICS_DEFAULT_MAX_CHILDREN 64
/* Label values longer than this (bytes) or not valid UTF-8 are recorded as "other". */
#define METRICS_MAX_LABEL_VALUE_LEN 256
/* The label value that overflowing and invalid values are folded into. */
#define METRICS_OTHER "other"

typedef enum { METRIC_COUNTER = 0, METRIC_GAUGE = 1, METRIC_HISTOGRAM = 2 } MetricType;

typedef struct MetricsRegistry MetricsRegistry;
typedef struct Metric Metric;

typedef struct MetricOpts {
    const char *name;          /* [a-zA-Z_:][a-zA-Z0-9_:]*, unique in the registry */
    const char *help;          /* free text; NULL = "" */
    const char *const *labels; /* NULL-terminated label names, or NULL for none */
    const double *buckets;     /* histogram upper bounds, strictly increasing and finite
                                  (+Inf is implied); NULL = Prometheus defaults
                                  .005 .01 .025 .05 .1 .25 .5 1 2.5 5 10 */
    size_t nbuckets;
    size_t max_children; /* 0 = METRICS_DEFAULT_MAX_CHILDREN */
} MetricOpts;

/* ---------- registries ---------- */

/* A new empty registry (owned; metrics_registry_free). 0 or ERR_NOMEM. */
int metrics_registry_new(MetricsRegistry **out);
/* Frees the registry and every Metric registered in it (their handles become invalid).
 * NULL-safe. No other thread may use the registry meanwhile. */
void metrics_registry_free(MetricsRegistry *reg);

/* The process-wide registry served on /metrics; created on first call (thread-safe), never
 * freed. NULL only if that first allocation failed. */
MetricsRegistry *metrics_default(void);

/* ---------- registration (0 or ERR_INVALID / ERR_EXISTS / ERR_NOMEM, with a message) ---------- */

/* Registers a counter, gauge or histogram; *out is a handle borrowed from reg, valid until
 * metrics_registry_free. A metric without labels gets its single child (value 0) at once, so it
 * renders before first use; a labelled metric renders only the children created so far.
 * Label names follow [a-zA-Z_][a-zA-Z0-9_]*, must not start with "__", and a histogram may not
 * have "le". Thread-safe. */
int metrics_register(MetricsRegistry *reg, MetricType type, const MetricOpts *opts, Metric **out);

/* Registers a counter or gauge without labels whose value is fn(arg), called at every render
 * with the registry lock held (fn must not call into this registry; it should be quick).
 * fn returning NaN renders "NaN". arg is borrowed and must outlive the registry. */
int metrics_register_func(MetricsRegistry *reg, MetricType type, const char *name, const char *help,
                          double (*fn)(void *arg), void *arg, Metric **out);

/* The metric registered under name, or NULL. Borrowed. Thread-safe. */
Metric *metrics_find(MetricsRegistry *reg, const char *name);

/* The metric registered under opts->name, registered first (metrics_register) when there is none
 * yet: for a metric a module registers at its first use. Borrowed from reg. NULL, with the error
 * of metrics_register set, when it is not there and cannot be registered. Thread-safe. */
Metric *metrics_find_or_register(MetricsRegistry *reg, MetricType type, const MetricOpts *opts);

/* ---------- children: label values ----------
 * label_values is an array of exactly as many strings as the metric has label names, in the
 * order they were registered (NULL for a metric without labels). Strings are copied. */

/* Creates the child for label_values with value 0 if it does not exist ("pre-initialise", so
 * that rate()/increase() see the first event). Subject to the cardinality cap. 0, ERR_INVALID
 * (NULL metric, callback metric) or ERR_NOMEM, with a message. */
int metrics_touch(Metric *m, const char *const *label_values);

/* Pre-initialises the cartesian product of value sets: value_sets[i] is a NULL-terminated list
 * of values for label i (as many lists as labels). Errors as metrics_touch. */
int metrics_touch_all(Metric *m, const char *const *const *value_sets);

/* ---------- updates ----------
 * Never fail the caller and never touch err_msg(): a NULL metric, a wrong type, a negative or NaN
 * counter increment or an allocation failure is silently ignored. Thread-safe. */

/* Adds v >= 0 to a counter. */
void metrics_counter_add(Metric *m, const char *const *label_values, double v);
/* Adds 1 to a counter. */
void metrics_counter_inc(Metric *m, const char *const *label_values);
/* Sets a gauge (units are the metric's: seconds, bytes, Unix seconds, revisions). */
void metrics_gauge_set(Metric *m, const char *const *label_values, double v);
/* Adds v (may be negative) to a gauge. */
void metrics_gauge_add(Metric *m, const char *const *label_values, double v);
/* Records one observation (e.g. a duration in seconds) in a histogram. */
void metrics_histogram_observe(Metric *m, const char *const *label_values, double v);

/* Reads a child: the value of a counter or gauge (callback metrics: fn(arg)), the observation
 * count of a histogram. Does not create the child. 0, ERR_INVALID or ERR_NOT_FOUND (no such
 * child; values that would fold are looked up as "other"). Thread-safe. */
int metrics_get(Metric *m, const char *const *label_values, double *out);

/* ---------- exposition ---------- */

/* Renders every metric of reg in text format 0.0.4: families sorted by name, each with
 * "# HELP" and "# TYPE", children sorted by label values, labels sorted by name (histogram
 * "le" last), values in Go's shortest form (1.7104608e+09, 0.005, +Inf, NaN) like the Go tool.
 * Labelled families without children are left out. Returns a malloc'ed NUL-terminated text
 * (caller frees) and its length without the NUL in *len (len may be NULL); NULL on ERR_NOMEM
 * with a message. Thread-safe; holds the registry lock while rendering. */
char *metrics_render(MetricsRegistry *reg, size_t *len);

/* Sums received and transmitted bytes over all interfaces of a /proc/<pid>/net/dev file (the
 * network namespace of the process, as the Go tool reads it). 0, ERR_IO (open/read) or
 * ERR_CORRUPT (a line without numbers), with a message. */
int metrics_read_net_dev(const char *path, double *rx_bytes, double *tx_bytes);

/* ---------- process metrics (the Go client's process collector) ---------- */

/* The calling process as the Go client's process collector reports it (Linux /proc). Each
 * field is NaN when its source could not be read. */
typedef struct MetricsProcessStats {
    double cpu_seconds;       /* user + system CPU time, s (/proc/self/stat utime + stime) */
    double virtual_bytes;     /* virtual memory size, bytes (vsize) */
    double resident_bytes;    /* resident set, bytes (rss pages x page size) */
    double start_time;        /* Unix s: boot time (/proc/stat btime) + starttime ticks */
    double open_fds;          /* entries of /proc/self/fd (the one reading it included) */
    double max_fds;           /* soft "Max open files" of /proc/self/limits */
    double max_virtual_bytes; /* soft "Max address space"; unlimited = 2^64 - 1, as Go's procfs */
} MetricsProcessStats;

/* Reads every field of *out at once (what the scrape-time callbacks read one source at a time).
 * 0 when all sources were read, else the first ERR_IO (open/read) or ERR_CORRUPT (unexpected
 * content) with a message naming the file; the fields read so far are still filled in. */
int metrics_read_process(MetricsProcessStats *out);

/* Registers process_cpu_seconds_total (counter), process_virtual_memory_bytes,
 * process_virtual_memory_max_bytes, process_resident_memory_bytes, process_start_time_seconds,
 * process_open_fds and process_max_fds (gauges) as callback metrics with the HELP text of Go's
 * client_golang process collector, read from /proc at every render (NaN where it cannot be
 * read). 0 or ERR_EXISTS / ERR_NOMEM; etcdbr_metrics_init registers them in the default
 * registry. */
int metrics_register_process(MetricsRegistry *reg);

/* ---------- the etcdbr catalogue (docs/go-tool.md §11, plus operator metrics) ----------
 * label_values arrays follow the label order given per metric. Every combination of the values
 * listed in §11 is pre-initialised to 0 (kind: "Full", "Incr", "Chunk"; succeeded: "false",
 * "true"; restore: "single_member", "single_node"; endpoint: ""), other ones after "pre:". */
typedef enum {
    ETCDBR_M_SNAPSHOT_GC_TOTAL,            /* counter {kind, succeeded}: snapshots deleted by GC;
                                              pre: kind x succeeded */
    ETCDBR_M_SNAPSHOT_LATEST_REVISION,     /* gauge {kind}: LastRevision of the latest snapshot */
    ETCDBR_M_SNAPSHOT_LATEST_TIMESTAMP,    /* gauge {kind}: its CreatedOn, Unix seconds */
    ETCDBR_M_SNAPSHOT_REQUIRED,            /* gauge {kind}: 1 while unsaved changes exist */
    ETCDBR_M_SNAPSHOT_DURATION_SECONDS,    /* histogram {kind, succeeded}: start to upload end, s */
    ETCDBR_M_VALIDATION_DURATION_SECONDS,  /* histogram {succeeded}: data-dir validation, s */
    ETCDBR_M_RESTORATION_DURATION_SECONDS, /* histogram {restore, succeeded}: restore, s;
                                              restore: ETCDBR_RESTORE_* */
    ETCDBR_M_DEFRAGMENTATION_DURATION_SECONDS, /* histogram {succeeded, endpoint}: per member, s;
                                                  pre: endpoint "" */
    ETCDBR_M_SNAPSTORE_LATEST_DELTAS_TOTAL,    /* gauge: deltas in the latest set */
    ETCDBR_M_SNAPSTORE_LATEST_DELTAS_REVISIONS_TOTAL, /* gauge: sum of Last-Start of them */
    ETCDBR_M_SNAPSHOTTER_FAILURE,             /* counter {error}: snapshotter/GC failures by error
                                                 class (etcdbr_metrics_error_class), not free text;
                                                 pre: "" (Go tool) and every class */
    ETCDBR_M_CLUSTER_SIZE,                    /* gauge: members of the etcd cluster */
    ETCDBR_M_IS_LEARNER,                      /* gauge: 1 while this member is a learner */
    ETCDBR_M_IS_LEARNER_COUNT_TOTAL,          /* counter {succeeded}: learner-add attempts */
    ETCDBR_M_ADD_LEARNER_DURATION_SECONDS,    /* histogram {succeeded}, s */
    ETCDBR_M_MEMBER_REMOVE_DURATION_SECONDS,  /* histogram {succeeded}, s */
    ETCDBR_M_MEMBER_PROMOTE_DURATION_SECONDS, /* histogram {succeeded}, s */
    ETCDBR_M_NETWORK_TRANSMITTED_BYTES,       /* counter (callback): tx bytes, /proc/self/net/dev */
    ETCDBR_M_NETWORK_RECEIVED_BYTES,          /* counter (callback): rx bytes */
    ETCDBR_M_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS, /* gauge {kind}: Unix s of the newest
                                                         successful snapshot; pre: Full, Incr */
    ETCDBR_M_LAST_ERROR_TIMESTAMP_SECONDS, /* gauge {operation}: Unix s of the last failure;
                                              pre: every EtcdbrOperation name */
    /* counter {reason}: store chains the snapshotter did not continue (chainproof.h); pre:
     * mismatch, compacted, ahead, unreadable */
    ETCDBR_M_SNAPSHOT_CHAIN_REJECTED_TOTAL,
    ETCDBR_M_COUNT
} EtcdbrMetricId;

/* Values of the restore label of etcdbr_restoration_duration_seconds, as the Go tool writes
 * them. An initialization that restores this member's data dir from the store (or clears it
 * when the store is empty) is "single_node", whatever the cluster size; "single_member" is the
 * Go tool's multi-node path (remove the member, re-add it as a learner), which etcdbr measures
 * with the member remove/add-learner metrics instead (src/sidecar/member.c, docs/cluster.md), so
 * that label only ever shows its pre-initialised zeros. */
#define ETCDBR_RESTORE_SINGLE_NODE "single_node"
#define ETCDBR_RESTORE_SINGLE_MEMBER "single_member"

/* Operations whose failures are time-stamped in etcdbr_last_error_timestamp_seconds. */
typedef enum {
    ETCDBR_OP_FULL_SNAPSHOT,   /* "full_snapshot" */
    ETCDBR_OP_DELTA_SNAPSHOT,  /* "delta_snapshot" */
    ETCDBR_OP_GC,              /* "gc" */
    ETCDBR_OP_RESTORE,         /* "restore" */
    ETCDBR_OP_VALIDATION,      /* "validation" */
    ETCDBR_OP_DEFRAGMENTATION, /* "defragmentation" */
    ETCDBR_OP_COUNT
} EtcdbrOperation;

/* Registers the catalogue in metrics_default() with every pre-initialised child, and the
 * process metrics (metrics_register_process); the handles are then available from
 * etcdbr_metric(). Idempotent and thread-safe; call once at startup. 0 or ERR_NOMEM. */
int etcdbr_metrics_init(void);

/* Registers the catalogue in reg (tests use a fresh registry); out may be NULL, else it receives
 * ETCDBR_M_COUNT borrowed handles. 0 or ERR_EXISTS / ERR_NOMEM. */
int etcdbr_metrics_register(MetricsRegistry *reg, Metric **out);

/* Handle of a catalogue metric in metrics_default(); NULL before etcdbr_metrics_init() (updates
 * on NULL are no-ops, so callers need not check). */
Metric *etcdbr_metric(EtcdbrMetricId id);

/* Metric name of a catalogue id ("etcdbr_snapshot_gc_total"); static storage, NULL if out of
 * range. */
const char *etcdbr_metric_name(EtcdbrMetricId id);

/* Operation label value ("full_snapshot"...); static storage, NULL if out of range. */
const char *etcdbr_operation_name(EtcdbrOperation op);

/* Bounded error class for an ERR_* code: "io", "nomem", "invalid", "not_found", "corrupt",
 * "etcd", "compacted", "timeout", "exists", "unsupported", "canceled", "gap", else "other".
 * Callers that know better may pass their own short class (e.g. "store") instead. */
const char *etcdbr_metrics_error_class(int err_code);

/* A failure of op: last_error_timestamp_seconds{operation} := now (wall clock, Unix s); for full
 * snapshots, deltas and GC also snapshotter_failure{error=error_class} += 1 (NULL class =
 * "other"). Thread-safe; never fails. */
void etcdbr_metrics_record_error(EtcdbrOperation op, const char *error_class);

/* last_error_timestamp_seconds{operation} := now (wall clock, Unix s), and nothing else: a
 * failure seen on the way (a store request that is retried) before the operation itself ends.
 * Thread-safe; never fails. */
void etcdbr_metrics_stamp_error(EtcdbrOperation op);

/* Set points after a successful snapshot upload (docs/go-tool.md §11). Full (is_delta = 0):
 * latest_revision/latest_timestamp{Full}, deltas gauges := 0, required{*} := 0. Delta:
 * latest_revision/latest_timestamp{Incr}, deltas_total += 1, deltas_revisions_total +=
 * last_revision - start_revision, required{Incr} := 0. Both: last_success_timestamp{kind} := now.
 * created_on is the snapshot's Unix seconds. Duration is observed separately. */
void etcdbr_metrics_snapshot_saved(int is_delta, int64_t start_revision, int64_t last_revision,
                                   int64_t created_on);

/* One initialization (validate, restore when needed) finished. validation_duration_seconds
 * {succeeded = validated} observes validation_seconds. When restore_attempted,
 * restoration_duration_seconds{restore="single_node", succeeded = restore_ok} observes
 * restore_seconds, and a failed restore also stamps last_error_timestamp_seconds
 * {operation="restore"}. Seconds are wall durations. Thread-safe; never fails. */
void etcdbr_metrics_initialization(int validated, double validation_seconds, int restore_attempted,
                                   int restore_ok, double restore_seconds);

/* etcdbr_cluster_size := members, the number of members (learners included) in etcd's member
 * list. Thread-safe; never fails. */
void etcdbr_metrics_set_cluster_size(size_t members);

/* The store's latest set when a snapshotter starts (docs/go-tool.md §7.1, §11). */
typedef struct EtcdbrLatestSet {
    int has_full;                /* 0: the store holds no full snapshot */
    int64_t full_last_revision;  /* of the latest full */
    int64_t full_created_on;     /* Unix s */
    size_t ndeltas;              /* deltas after it */
    int64_t delta_last_revision; /* of the newest delta (ndeltas > 0) */
    int64_t delta_created_on;    /* Unix s, newest delta */
    int64_t delta_revisions;     /* sum of Last-Start over the deltas */
} EtcdbrLatestSet;

/* Set points at snapshotter creation: latest_revision/timestamp{Full} from the full,
 * {Incr} from the newest delta or, without deltas, from the full; deltas gauges from the set;
 * last_success_timestamp{Full,Incr} likewise (so staleness alerts survive restarts and leader
 * changes). Nothing is set when has_full is 0. */
void etcdbr_metrics_snapshotter_started(const EtcdbrLatestSet *latest);

#endif
