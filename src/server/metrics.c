/* metrics: Prometheus registry and text exposition; see metrics.h.
 * Invariants: reg->metrics is sorted by name; m->children is sorted by label values taken in
 * m->order (label names sorted), so rendering walks both arrays as they are. Every field of
 * every metric is read and written with reg->mu held. */
#include "metrics.h"

#include "common/err.h"
#include "common/names.h"
#include "common/strbuf.h"
#include "../common/mem.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const double default_buckets[] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};

typedef struct MetricChild {
    char **values;     /* nlabels copies */
    double value;      /* counter, gauge */
    double sum;        /* histogram */
    uint64_t count;    /* histogram */
    uint64_t *buckets; /* histogram: nbounds per-bucket (not cumulative) counts */
} MetricChild;

struct Metric {
    MetricsRegistry *reg;
    MetricType type;
    char *name, *help;
    size_t nlabels;
    char **label_names;
    size_t *order; /* label indexes sorted by name: render and sort order */
    double *bounds;
    size_t nbounds;
    size_t max_children;
    MetricChild **children;
    size_t nchildren, cap_children;
    double (*fn)(void *arg);
    void *fn_arg;
};

struct MetricsRegistry {
    pthread_mutex_t mu;
    Metric **metrics;
    size_t n, cap;
};

/* ---------- small helpers ---------- */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static int valid_name(const char *s, int allow_colon) {
    if (!s || !*s) return 0;
    for (const char *p = s; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                 (allow_colon && c == ':') || (p != s && c >= '0' && c <= '9');
        if (!ok) return 0;
    }
    return 1;
}

/* Strict UTF-8 check (no overlongs, surrogates or code points above U+10FFFF). */
static int valid_utf8(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        unsigned cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

/* The value a label value is recorded under: itself, or "other" when too long or not UTF-8. */
static const char *label_value_or_other(const char *v) {
    if (!v) return METRICS_OTHER;
    size_t n = strnlen(v, METRICS_MAX_LABEL_VALUE_LEN + 1);
    if (n > METRICS_MAX_LABEL_VALUE_LEN || !valid_utf8(v, n)) return METRICS_OTHER;
    return v;
}

/* ---------- text output (common/strbuf.h) ---------- */

/* Writes s escaped: backslash and newline always, double quote when in_label (text format
 * 0.0.4: HELP escapes \ and \n, label values also "). */
static void buf_escaped(StrBuf *b, const char *s, int in_label) {
    const char *run = s;
    for (const char *p = s;; p++) {
        const char *rep = NULL;
        if (*p == '\\')
            rep = "\\\\";
        else if (*p == '\n')
            rep = "\\n";
        else if (*p == '"' && in_label)
            rep = "\\\"";
        if (rep || !*p) {
            strbuf_add(b, run, (size_t)(p - run));
            if (!*p) break;
            strbuf_str(b, rep);
            run = p + 1;
        }
    }
}

/* Formats v as Go's strconv.FormatFloat(v, 'g', -1, 64), which the Go client's text encoder
 * uses: the fewest digits that read back as v, in exponent form when the decimal exponent is
 * < -4 or >= 6 (e.g. 1.7104608e+09, 123456, 0.005, 2.5). */
static void format_double(double v, char *out, size_t cap) {
    if (isnan(v)) {
        snprintf(out, cap, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (v == 0) {
        snprintf(out, cap, "0");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    if (prec > 17) prec = 17;
    const char *e = strchr(tmp, 'e');
    int exp = e ? atoi(e + 1) : 0;
    if (exp < -4 || exp >= 6) {
        snprintf(out, cap, "%s", tmp);
    } else {
        int decimals = prec - 1 - exp;
        if (decimals < 0) decimals = 0;
        snprintf(out, cap, "%.*f", decimals, v);
    }
}

static void buf_double(StrBuf *b, double v) {
    char tmp[48];
    format_double(v, tmp, sizeof tmp);
    strbuf_str(b, tmp);
}

/* ---------- registry ---------- */

int metrics_registry_new(MetricsRegistry **out) {
    *out = NULL;
    MetricsRegistry *reg = calloc(1, sizeof *reg);
    if (!reg) return err_set(ERR_NOMEM, "metrics registry: out of memory");
    if (pthread_mutex_init(&reg->mu, NULL) != 0) {
        free(reg);
        return err_set(ERR_NOMEM, "metrics registry: cannot create mutex");
    }
    *out = reg;
    return 0;
}

static void child_free(MetricChild *c, size_t nlabels) {
    if (!c) return;
    if (c->values)
        for (size_t i = 0; i < nlabels; i++)
            free(c->values[i]);
    FREE_ALL(c->values, c->buckets, c);
}

static void metric_free(Metric *m) {
    if (!m) return;
    for (size_t i = 0; i < m->nchildren; i++)
        child_free(m->children[i], m->nlabels);
    free(m->children);
    if (m->label_names)
        for (size_t i = 0; i < m->nlabels; i++)
            free(m->label_names[i]);
    FREE_ALL(m->label_names, m->order, m->bounds, m->name, m->help, m);
}

void metrics_registry_free(MetricsRegistry *reg) {
    if (!reg) return;
    for (size_t i = 0; i < reg->n; i++)
        metric_free(reg->metrics[i]);
    free(reg->metrics);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

static MetricsRegistry *default_reg;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void default_create(void) {
    if (metrics_registry_new(&default_reg) != 0) default_reg = NULL;
}

MetricsRegistry *metrics_default(void) {
    pthread_once(&default_once, default_create);
    return default_reg;
}

/* Binary search over n sorted items, cmp_at(ctx, i) comparing item i with the key sought:
 * the index of the item equal to it (*found = 1), or where it would be inserted (*found = 0). */
static size_t sorted_find(size_t n, int (*cmp_at)(const void *ctx, size_t i), const void *ctx,
                          int *found) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = cmp_at(ctx, mid);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

typedef struct {
    const MetricsRegistry *reg;
    const char *name;
} MetricKey;

static int metric_cmp_at(const void *ctx, size_t i) {
    const MetricKey *k = ctx;
    return strcmp(k->reg->metrics[i]->name, k->name);
}

/* Index of name in reg->metrics, or where it would be inserted (*found = 0). Lock held. */
static size_t find_metric_locked(MetricsRegistry *reg, const char *name, int *found) {
    MetricKey k = {reg, name};
    return sorted_find(reg->n, metric_cmp_at, &k, found);
}

Metric *metrics_find(MetricsRegistry *reg, const char *name) {
    if (!reg || !name) return NULL;
    pthread_mutex_lock(&reg->mu);
    int found;
    size_t i = find_metric_locked(reg, name, &found);
    Metric *m = found ? reg->metrics[i] : NULL;
    pthread_mutex_unlock(&reg->mu);
    return m;
}

Metric *metrics_find_or_register(MetricsRegistry *reg, MetricType type, const MetricOpts *opts) {
    Metric *m = metrics_find(reg, opts->name);
    if (m || !reg) return m;
    /* a failure may be another thread registering it first */
    if (metrics_register(reg, type, opts, &m)) return metrics_find(reg, opts->name);
    return m;
}

static const char *type_name(MetricType t) {
    static const char *const names[] = {
        [METRIC_COUNTER] = "counter", [METRIC_GAUGE] = "gauge", [METRIC_HISTOGRAM] = "histogram"};
    return NAME_AT(names, t, "untyped");
}

static int child_get_locked(Metric *m, const char *const *values, int create, MetricChild **out);

/* Builds an unregistered metric from the options. */
static int metric_build(MetricType type, const MetricOpts *o, Metric **out) {
    *out = NULL;
    if (type != METRIC_COUNTER && type != METRIC_GAUGE && type != METRIC_HISTOGRAM)
        return err_set(ERR_INVALID, "metric %s: unknown type %d", o->name ? o->name : "?",
                       (int)type);
    if (!valid_name(o->name, 1))
        return err_set(ERR_INVALID, "metric name \"%s\" is not valid", o->name ? o->name : "");
    int rc = 0;
    Metric *m = calloc(1, sizeof *m);
    if (!m) return err_set(ERR_NOMEM, "metric %s: out of memory", o->name);
    m->type = type;
    m->max_children = o->max_children ? o->max_children : METRICS_DEFAULT_MAX_CHILDREN;
    m->name = xstrdup(o->name);
    m->help = xstrdup(o->help ? o->help : "");
    if (!m->name || !m->help) goto oom;
    if (o->labels)
        while (o->labels[m->nlabels])
            m->nlabels++;
    if (m->nlabels) {
        m->label_names = calloc(m->nlabels, sizeof *m->label_names);
        m->order = calloc(m->nlabels, sizeof *m->order);
        if (!m->label_names || !m->order) goto oom;
    }
    for (size_t i = 0; i < m->nlabels; i++) {
        const char *l = o->labels[i];
        if (!valid_name(l, 0) || strncmp(l, "__", 2) == 0) {
            rc = err_set(ERR_INVALID, "metric %s: label name \"%s\" is not valid", o->name, l);
            goto fail;
        }
        if (type == METRIC_HISTOGRAM && strcmp(l, "le") == 0) {
            rc = err_set(ERR_INVALID, "metric %s: a histogram may not have label \"le\"", o->name);
            goto fail;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(o->labels[j], l) == 0) {
                rc = err_set(ERR_INVALID, "metric %s: label \"%s\" given twice", o->name, l);
                goto fail;
            }
        if (!(m->label_names[i] = xstrdup(l))) goto oom;
    }
    /* Insertion sort of label indexes by name: a handful of labels. */
    for (size_t i = 0; i < m->nlabels; i++) {
        size_t j = i;
        while (j > 0 && strcmp(m->label_names[m->order[j - 1]], m->label_names[i]) > 0) {
            m->order[j] = m->order[j - 1];
            j--;
        }
        m->order[j] = i;
    }
    if (type == METRIC_HISTOGRAM) {
        const double *b = o->buckets ? o->buckets : default_buckets;
        size_t nb = o->buckets ? o->nbuckets : sizeof default_buckets / sizeof *default_buckets;
        if (nb > 0 && isinf(b[nb - 1]) && b[nb - 1] > 0) nb--; /* +Inf is implied */
        if (nb == 0) {
            rc = err_set(ERR_INVALID, "metric %s: a histogram needs at least one bucket", o->name);
            goto fail;
        }
        for (size_t i = 0; i < nb; i++) {
            if (!isfinite(b[i]) || (i > 0 && !(b[i] > b[i - 1]))) {
                rc = err_set(ERR_INVALID,
                             "metric %s: bucket bounds must be finite and strictly increasing",
                             o->name);
                goto fail;
            }
        }
        m->bounds = malloc(nb * sizeof *m->bounds);
        if (!m->bounds) goto oom;
        memcpy(m->bounds, b, nb * sizeof *b);
        m->nbounds = nb;
    }
    *out = m;
    return 0;
oom:
    rc = err_set(ERR_NOMEM, "metric %s: out of memory", o->name);
fail:
    metric_free(m);
    return rc;
}

static int registry_add(MetricsRegistry *reg, Metric *m) {
    pthread_mutex_lock(&reg->mu);
    int rc = 0, found;
    size_t at = find_metric_locked(reg, m->name, &found);
    if (found) {
        rc = err_set(ERR_EXISTS, "metric %s is already registered", m->name);
        goto done;
    }
    if (reg->n == reg->cap) {
        size_t cap = reg->cap ? reg->cap * 2 : 32;
        Metric **p = realloc(reg->metrics, cap * sizeof *p);
        if (!p) {
            rc = err_set(ERR_NOMEM, "metric %s: out of memory", m->name);
            goto done;
        }
        reg->metrics = p;
        reg->cap = cap;
    }
    /* The single child of a metric without labels exists from the start (as in the Go client). */
    if (m->nlabels == 0 && !m->fn) {
        MetricChild *c;
        rc = child_get_locked(m, NULL, 1, &c);
        if (rc != 0) {
            rc = err_set(ERR_NOMEM, "metric %s: out of memory", m->name);
            goto done;
        }
    }
    memmove(reg->metrics + at + 1, reg->metrics + at, (reg->n - at) * sizeof *reg->metrics);
    reg->metrics[at] = m;
    reg->n++;
    m->reg = reg;
done:
    pthread_mutex_unlock(&reg->mu);
    return rc;
}

/* Adds m (built by metric_build; owned, freed on failure) to reg and sets *out (may be NULL). */
static int register_built(MetricsRegistry *reg, Metric *m, Metric **out) {
    int rc = registry_add(reg, m);
    if (rc) {
        metric_free(m);
        return rc;
    }
    if (out) *out = m;
    return 0;
}

int metrics_register(MetricsRegistry *reg, MetricType type, const MetricOpts *opts, Metric **out) {
    if (out) *out = NULL;
    if (!reg || !opts) return err_set(ERR_INVALID, "metrics_register: no registry or options");
    Metric *m;
    int rc = metric_build(type, opts, &m);
    return rc ? rc : register_built(reg, m, out);
}

int metrics_register_func(MetricsRegistry *reg, MetricType type, const char *name, const char *help,
                          double (*fn)(void *arg), void *arg, Metric **out) {
    if (out) *out = NULL;
    if (!reg || !fn) return err_set(ERR_INVALID, "metric %s: no registry or callback", name);
    if (type != METRIC_COUNTER && type != METRIC_GAUGE)
        return err_set(ERR_INVALID, "metric %s: a callback metric is a counter or a gauge", name);
    MetricOpts o = {.name = name, .help = help};
    Metric *m;
    int rc = metric_build(type, &o, &m);
    if (rc != 0) return rc;
    m->fn = fn;
    m->fn_arg = arg;
    return register_built(reg, m, out);
}

/* ---------- children ---------- */

static int child_cmp(const Metric *m, const MetricChild *c, const char *const *values) {
    for (size_t k = 0; k < m->nlabels; k++) {
        size_t i = m->order[k];
        int r = strcmp(c->values[i], values[i]);
        if (r != 0) return r;
    }
    return 0;
}

typedef struct {
    const Metric *m;
    const char *const *values;
} ChildKey;

static int child_cmp_at(const void *ctx, size_t i) {
    const ChildKey *k = ctx;
    return child_cmp(k->m, k->m->children[i], k->values);
}

/* Index of the child with these label values in m->children, or where it would be inserted
 * (*found = 0). Lock held. */
static size_t child_find_locked(Metric *m, const char *const *values, int *found) {
    ChildKey k = {m, values};
    return sorted_find(m->nchildren, child_cmp_at, &k, found);
}

static int child_insert_locked(Metric *m, size_t at, const char *const *values, MetricChild **out) {
    if (m->nchildren == m->cap_children) {
        size_t cap = m->cap_children ? m->cap_children * 2 : 4;
        MetricChild **p = realloc(m->children, cap * sizeof *p);
        if (!p) return ERR_NOMEM;
        m->children = p;
        m->cap_children = cap;
    }
    MetricChild *c = calloc(1, sizeof *c);
    if (!c) return ERR_NOMEM;
    if (m->nlabels) {
        c->values = calloc(m->nlabels, sizeof *c->values);
        if (!c->values) goto oom;
        for (size_t i = 0; i < m->nlabels; i++)
            if (!(c->values[i] = xstrdup(values[i]))) goto oom;
    }
    if (m->type == METRIC_HISTOGRAM) {
        c->buckets = calloc(m->nbounds, sizeof *c->buckets);
        if (!c->buckets) goto oom;
    }
    memmove(m->children + at + 1, m->children + at, (m->nchildren - at) * sizeof *m->children);
    m->children[at] = c;
    m->nchildren++;
    *out = c;
    return 0;
oom:
    child_free(c, m->nlabels);
    return ERR_NOMEM;
}

/* Finds (and with create, makes) the child for values, applying the "other" folding. Does not
 * set err (callers on the update path must not disturb the caller's message). Lock held. */
static int child_get_locked(Metric *m, const char *const *values, int create, MetricChild **out) {
    *out = NULL;
    if (m->nlabels && !values) return ERR_INVALID;
    const char *stack_vals[8] = {0};
    const char **vals = stack_vals;
    if (m->nlabels > 8) {
        vals = malloc(m->nlabels * sizeof *vals);
        if (!vals) return ERR_NOMEM;
    }
    for (size_t i = 0; i < m->nlabels; i++)
        vals[i] = label_value_or_other(values[i]);
    int rc = 0, found;
    size_t at = child_find_locked(m, vals, &found);
    if (found) {
        *out = m->children[at];
        goto done;
    }
    if (m->nchildren >= m->max_children && m->nlabels) {
        /* Cardinality cap: everything new goes to the all-"other" child (one beyond the cap). */
        for (size_t i = 0; i < m->nlabels; i++)
            vals[i] = METRICS_OTHER;
        at = child_find_locked(m, vals, &found);
        if (found) {
            *out = m->children[at];
            goto done;
        }
    }
    if (!create) {
        rc = ERR_NOT_FOUND;
        goto done;
    }
    rc = child_insert_locked(m, at, vals, out);
done:
    if (vals != stack_vals) free(vals);
    return rc;
}

int metrics_touch(Metric *m, const char *const *label_values) {
    if (!m) return err_set(ERR_INVALID, "metrics_touch: no metric");
    if (m->fn) return err_set(ERR_INVALID, "metric %s: a callback metric has no children", m->name);
    pthread_mutex_lock(&m->reg->mu);
    MetricChild *c;
    int rc = child_get_locked(m, label_values, 1, &c);
    pthread_mutex_unlock(&m->reg->mu);
    if (rc == ERR_NOMEM) return err_set(rc, "metric %s: out of memory", m->name);
    if (rc != 0) return err_set(rc, "metric %s: label values missing", m->name);
    return 0;
}

int metrics_touch_all(Metric *m, const char *const *const *value_sets) {
    if (!m) return err_set(ERR_INVALID, "metrics_touch_all: no metric");
    if (m->nlabels == 0) return metrics_touch(m, NULL);
    if (!value_sets) return err_set(ERR_INVALID, "metric %s: no label value sets", m->name);
    for (size_t i = 0; i < m->nlabels; i++)
        if (!value_sets[i] || !value_sets[i][0]) return 0; /* empty product */
    size_t *idx = calloc(m->nlabels, sizeof *idx);
    const char **vals = calloc(m->nlabels, sizeof *vals);
    int rc = 0;
    if (!idx || !vals) {
        rc = err_set(ERR_NOMEM, "metric %s: out of memory", m->name);
        goto done;
    }
    for (;;) {
        for (size_t i = 0; i < m->nlabels; i++)
            vals[i] = value_sets[i][idx[i]];
        if ((rc = metrics_touch(m, vals)) != 0) goto done;
        /* Odometer over the value sets, last label fastest. */
        size_t k = m->nlabels;
        while (k > 0) {
            k--;
            if (value_sets[k][++idx[k]]) break;
            idx[k] = 0;
            if (k == 0) goto done;
        }
    }
done:
    free(idx);
    free(vals);
    return rc;
}

/* ---------- updates ---------- */

typedef enum { OP_COUNTER_ADD, OP_GAUGE_SET, OP_GAUGE_ADD, OP_OBSERVE } UpdateOp;

static void update(Metric *m, const char *const *values, UpdateOp op, double v) {
    if (!m || m->fn) return;
    MetricType want = op == OP_COUNTER_ADD ? METRIC_COUNTER
                      : op == OP_OBSERVE   ? METRIC_HISTOGRAM
                                           : METRIC_GAUGE;
    if (m->type != want) return;
    if (op == OP_COUNTER_ADD && !(v >= 0)) return; /* counters only go up; NaN is dropped too */
    pthread_mutex_lock(&m->reg->mu);
    MetricChild *c;
    if (child_get_locked(m, values, 1, &c) == 0) {
        switch (op) {
        case OP_COUNTER_ADD:
        case OP_GAUGE_ADD:
            c->value += v;
            break;
        case OP_GAUGE_SET:
            c->value = v;
            break;
        case OP_OBSERVE: {
            /* First bucket with v <= bound; NaN and values above the last bound count only
             * towards +Inf (i.e. count). */
            size_t lo = 0, hi = m->nbounds;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v <= m->bounds[mid])
                    hi = mid;
                else
                    lo = mid + 1;
            }
            if (!isnan(v) && lo < m->nbounds) c->buckets[lo]++;
            c->sum += v;
            c->count++;
            break;
        }
        }
    }
    pthread_mutex_unlock(&m->reg->mu);
}

void metrics_counter_add(Metric *m, const char *const *label_values, double v) {
    update(m, label_values, OP_COUNTER_ADD, v);
}

void metrics_counter_inc(Metric *m, const char *const *label_values) {
    update(m, label_values, OP_COUNTER_ADD, 1);
}

void metrics_gauge_set(Metric *m, const char *const *label_values, double v) {
    update(m, label_values, OP_GAUGE_SET, v);
}

void metrics_gauge_add(Metric *m, const char *const *label_values, double v) {
    update(m, label_values, OP_GAUGE_ADD, v);
}

void metrics_histogram_observe(Metric *m, const char *const *label_values, double v) {
    update(m, label_values, OP_OBSERVE, v);
}

int metrics_get(Metric *m, const char *const *label_values, double *out) {
    if (!m || !out) return err_set(ERR_INVALID, "metrics_get: no metric");
    pthread_mutex_lock(&m->reg->mu);
    int rc = 0;
    if (m->fn) {
        *out = m->fn(m->fn_arg);
    } else {
        MetricChild *c;
        rc = child_get_locked(m, label_values, 0, &c);
        if (rc == 0) *out = m->type == METRIC_HISTOGRAM ? (double)c->count : c->value;
    }
    pthread_mutex_unlock(&m->reg->mu);
    if (rc == ERR_NOT_FOUND) return err_set(rc, "metric %s: no such label values", m->name);
    if (rc != 0) return err_set(rc, "metric %s: label values missing", m->name);
    return 0;
}

/* ---------- exposition ---------- */

/* Writes {a="x",b="y"[,le="0.5"]} (nothing when there are no labels and no le). */
static void render_labels(StrBuf *b, const Metric *m, const MetricChild *c, const char *le) {
    if (m->nlabels == 0 && !le) return;
    strbuf_str(b, "{");
    for (size_t k = 0; k < m->nlabels; k++) {
        size_t i = m->order[k];
        if (k) strbuf_str(b, ",");
        strbuf_str(b, m->label_names[i]);
        strbuf_str(b, "=\"");
        buf_escaped(b, c->values[i], 1);
        strbuf_str(b, "\"");
    }
    if (le) {
        if (m->nlabels) strbuf_str(b, ",");
        strbuf_str(b, "le=\"");
        strbuf_str(b, le);
        strbuf_str(b, "\"");
    }
    strbuf_str(b, "}");
}

static void render_metric(StrBuf *b, const Metric *m) {
    if (!m->fn && m->nchildren == 0) return;
    strbuf_str(b, "# HELP ");
    strbuf_str(b, m->name);
    strbuf_str(b, " ");
    buf_escaped(b, m->help, 0);
    strbuf_str(b, "\n# TYPE ");
    strbuf_str(b, m->name);
    strbuf_str(b, " ");
    strbuf_str(b, type_name(m->type));
    strbuf_str(b, "\n");
    if (m->fn) {
        strbuf_str(b, m->name);
        strbuf_str(b, " ");
        buf_double(b, m->fn(m->fn_arg));
        strbuf_str(b, "\n");
        return;
    }
    for (size_t ci = 0; ci < m->nchildren; ci++) {
        const MetricChild *c = m->children[ci];
        if (m->type != METRIC_HISTOGRAM) {
            strbuf_str(b, m->name);
            render_labels(b, m, c, NULL);
            strbuf_str(b, " ");
            buf_double(b, c->value);
            strbuf_str(b, "\n");
            continue;
        }
        uint64_t cum = 0;
        char le[48];
        for (size_t i = 0; i <= m->nbounds; i++) {
            if (i < m->nbounds) {
                cum += c->buckets[i];
                format_double(m->bounds[i], le, sizeof le);
            } else {
                cum = c->count;
                snprintf(le, sizeof le, "+Inf");
            }
            strbuf_str(b, m->name);
            strbuf_str(b, "_bucket");
            render_labels(b, m, c, le);
            strbuf_str(b, " ");
            buf_double(b, (double)cum);
            strbuf_str(b, "\n");
        }
        strbuf_str(b, m->name);
        strbuf_str(b, "_sum");
        render_labels(b, m, c, NULL);
        strbuf_str(b, " ");
        buf_double(b, c->sum);
        strbuf_str(b, "\n");
        strbuf_str(b, m->name);
        strbuf_str(b, "_count");
        render_labels(b, m, c, NULL);
        strbuf_str(b, " ");
        buf_double(b, (double)c->count);
        strbuf_str(b, "\n");
    }
}

char *metrics_render(MetricsRegistry *reg, size_t *len) {
    if (len) *len = 0;
    if (!reg) {
        err_set(ERR_INVALID, "metrics_render: no registry");
        return NULL;
    }
    StrBuf b = {0};
    strbuf_add(&b, "", 0); /* an empty registry still yields "" */
    pthread_mutex_lock(&reg->mu);
    for (size_t i = 0; i < reg->n && !b.oom; i++)
        render_metric(&b, reg->metrics[i]);
    pthread_mutex_unlock(&reg->mu);
    if (b.oom) {
        free(b.d);
        err_set(ERR_NOMEM, "metrics: out of memory rendering");
        return NULL;
    }
    if (len) *len = b.n;
    return b.d;
}

/* ---------- /proc/<pid>/net/dev ---------- */

/* The unsigned decimal number at *p (after any white space, as strtoull reads it) as a double;
 * *p moves past it. 0, or ERR_CORRUPT (no number there, or out of range) with *p and *out
 * unchanged. */
static int read_u64(const char **p, double *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(*p, &end, 10);
    if (end == *p || errno) return ERR_CORRUPT;
    *out = (double)v;
    *p = end;
    return 0;
}

int metrics_read_net_dev(const char *path, double *rx_bytes, double *tx_bytes) {
    *rx_bytes = 0;
    *tx_bytes = 0;
    FILE *f = fopen(path, "re");
    if (!f) return err_set(ERR_IO, "open %s: %s", path, strerror(errno));
    char line[1024];
    int rc = 0;
    double rx = 0, tx = 0;
    while (fgets(line, sizeof line, f)) {
        /* "  eth0: rx_bytes packets errs drop fifo frame compressed multicast tx_bytes ..."; the
         * two header lines have no ':'. */
        char *colon = strchr(line, ':');
        if (!colon) continue;
        const char *p = colon + 1;
        double fields[9];
        int n = 0;
        while (n < 9 && !read_u64(&p, &fields[n]))
            n++;
        if (n < 9) {
            rc = err_set(ERR_CORRUPT, "%s: unexpected line \"%.*s\"", path,
                         (int)strcspn(line, "\n"), line);
            goto done;
        }
        rx += fields[0];
        tx += fields[8];
    }
    if (ferror(f)) {
        rc = err_set(ERR_IO, "read %s: %s", path, strerror(errno));
        goto done;
    }
    *rx_bytes = rx;
    *tx_bytes = tx;
done:
    fclose(f);
    return rc;
}

/* ---------- process metrics (/proc/self) ----------
 * Same sources and arithmetic as Go's procfs behind client_golang's process collector: CPU time
 * and start time in clock ticks, RSS in pages, "unlimited" limits as 2^64 - 1. The readers set
 * err only when report is set: at render time they run inside metrics_render, whose caller's
 * message they must not disturb. */

#define PROC_UNLIMITED 18446744073709551615.0

/* ERR_IO for path with errnum's text ("open" or "read" says which call failed). */
static int proc_io_fail(int report, const char *what, const char *path, int errnum) {
    if (report) err_set(ERR_IO, "%s %s: %s", what, path, strerror(errnum));
    return ERR_IO;
}

/* Closes f, read from path: 0, or ERR_IO (set when report) when a read from it failed. */
static int proc_close(FILE *f, const char *path, int report) {
    int bad = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    return bad ? proc_io_fail(report, "read", path, bad) : 0;
}

static double clock_ticks(void) {
    long t = sysconf(_SC_CLK_TCK);
    return t > 0 ? (double)t : 100.0;
}

/* utime + stime, vsize, rss and starttime of /proc/self/stat: "pid (comm) state ppid ...", where
 * comm may hold spaces and parentheses, so fields are counted after the last ')'. */
static int proc_read_stat(MetricsProcessStats *st, double *start_ticks, int report) {
    static const char path[] = "/proc/self/stat";
    char buf[2048];
    FILE *f = fopen(path, "re");
    if (!f) return proc_io_fail(report, "open", path, errno);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    if (proc_close(f, path, report)) return ERR_IO;
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    /* Tokens after ')': [0] state (field 3) ... [11] utime, [12] stime, [19] starttime,
     * [20] vsize, [21] rss. */
    double tok[22];
    int k = 0;
    if (p) {
        p++;
        while (k < 22) {
            while (*p == ' ')
                p++;
            if (!*p || *p == '\n') break;
            if (k == 0) { /* the state letter */
                p += strcspn(p, " \n");
                tok[k++] = 0;
                continue;
            }
            char *end;
            errno = 0;
            long long v = strtoll(p, &end, 10);
            if (end == p || errno) break;
            tok[k++] = (double)v;
            p = end;
        }
    }
    if (k < 22) {
        if (report) err_set(ERR_CORRUPT, "%s: unexpected content \"%.*s\"", path, 80, buf);
        return ERR_CORRUPT;
    }
    long page = sysconf(_SC_PAGESIZE);
    st->cpu_seconds = (tok[11] + tok[12]) / clock_ticks();
    st->virtual_bytes = tok[20];
    st->resident_bytes = tok[21] * (double)(page > 0 ? page : 4096);
    *start_ticks = tok[19];
    return 0;
}

/* The "btime" line of /proc/stat (Unix s). Lines can be long (intr), so only line starts count. */
static int proc_read_boot_time(double *btime, int report) {
    static const char path[] = "/proc/stat";
    FILE *f = fopen(path, "re");
    if (!f) return proc_io_fail(report, "open", path, errno);
    char line[256];
    int at_start = 1, rc = ERR_CORRUPT;
    while (fgets(line, sizeof line, f)) {
        if (at_start && strncmp(line, "btime ", 6) == 0) {
            const char *p = line + 6;
            if (!read_u64(&p, btime)) rc = 0;
            break;
        }
        at_start = strchr(line, '\n') != NULL;
    }
    if (proc_close(f, path, report)) return ERR_IO;
    if (rc && report) err_set(rc, "%s: no btime line", path);
    return rc;
}

static int proc_count_fds(MetricsProcessStats *st, int report) {
    static const char path[] = "/proc/self/fd";
    DIR *d = opendir(path);
    if (!d) return proc_io_fail(report, "open", path, errno);
    double n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    st->open_fds = n;
    return 0;
}

/* The soft limit of a /proc/self/limits line for name: 0, 1 when the line is another limit's,
 * or ERR_CORRUPT. */
static int proc_limit_value(const char *line, const char *name, double *out) {
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0 || line[n] != ' ') return 1;
    const char *p = line + n;
    while (*p == ' ')
        p++;
    if (strncmp(p, "unlimited", 9) == 0) {
        *out = PROC_UNLIMITED;
        return 0;
    }
    return read_u64(&p, out);
}

static int proc_read_limits(MetricsProcessStats *st, int report) {
    static const char path[] = "/proc/self/limits";
    FILE *f = fopen(path, "re");
    if (!f) return proc_io_fail(report, "open", path, errno);
    char line[256];
    int rc = 0, found = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        int r = proc_limit_value(line, "Max open files", &st->max_fds);
        if (r == 1) r = proc_limit_value(line, "Max address space", &st->max_virtual_bytes);
        if (r == 0) found++;
        if (r < 0) rc = r;
    }
    if (proc_close(f, path, report)) return ERR_IO;
    if (rc == 0 && found < 2) rc = ERR_CORRUPT;
    if (rc && report)
        err_set(rc, "%s: no readable \"Max open files\" and \"Max address space\"", path);
    return rc;
}

static void process_stats_nan(MetricsProcessStats *st) {
    st->cpu_seconds = st->virtual_bytes = st->resident_bytes = st->start_time = NAN;
    st->open_fds = st->max_fds = st->max_virtual_bytes = NAN;
}

int metrics_read_process(MetricsProcessStats *out) {
    process_stats_nan(out);
    double ticks = 0, btime = 0;
    int rc = proc_read_stat(out, &ticks, 1);
    int r = proc_read_boot_time(&btime, rc == 0);
    if (rc == 0 && r == 0) out->start_time = btime + ticks / clock_ticks();
    if (!rc) rc = r;
    r = proc_count_fds(out, rc == 0);
    if (!rc) rc = r;
    r = proc_read_limits(out, rc == 0);
    if (!rc) rc = r;
    return rc;
}

typedef enum {
    PROC_CPU,
    PROC_VSIZE,
    PROC_MAX_VSIZE,
    PROC_RSS,
    PROC_START,
    PROC_OPEN_FDS,
    PROC_MAX_FDS
} ProcField;

/* Callback of the process metrics: reads only the source of the field arg names. */
static double process_field(void *arg) {
    MetricsProcessStats st;
    process_stats_nan(&st);
    double ticks, btime;
    switch ((ProcField)(intptr_t)arg) {
    case PROC_CPU:
        return proc_read_stat(&st, &ticks, 0) == 0 ? st.cpu_seconds : NAN;
    case PROC_VSIZE:
        return proc_read_stat(&st, &ticks, 0) == 0 ? st.virtual_bytes : NAN;
    case PROC_RSS:
        return proc_read_stat(&st, &ticks, 0) == 0 ? st.resident_bytes : NAN;
    case PROC_START:
        if (proc_read_stat(&st, &ticks, 0) || proc_read_boot_time(&btime, 0)) return NAN;
        return btime + ticks / clock_ticks();
    case PROC_OPEN_FDS:
        return proc_count_fds(&st, 0) == 0 ? st.open_fds : NAN;
    case PROC_MAX_FDS:
        proc_read_limits(&st, 0);
        return st.max_fds;
    case PROC_MAX_VSIZE:
        proc_read_limits(&st, 0);
        return st.max_virtual_bytes;
    }
    return NAN;
}

int metrics_register_process(MetricsRegistry *reg) {
    /* Names, types and HELP exactly as client_golang's process collector. */
    static const struct {
        const char *name;
        MetricType type;
        const char *help;
        ProcField field;
    } defs[] = {
        {"process_cpu_seconds_total", METRIC_COUNTER,
         "Total user and system CPU time spent in seconds.", PROC_CPU},
        {"process_max_fds", METRIC_GAUGE, "Maximum number of open file descriptors.", PROC_MAX_FDS},
        {"process_open_fds", METRIC_GAUGE, "Number of open file descriptors.", PROC_OPEN_FDS},
        {"process_resident_memory_bytes", METRIC_GAUGE, "Resident memory size in bytes.", PROC_RSS},
        {"process_start_time_seconds", METRIC_GAUGE,
         "Start time of the process since unix epoch in seconds.", PROC_START},
        {"process_virtual_memory_bytes", METRIC_GAUGE, "Virtual memory size in bytes.", PROC_VSIZE},
        {"process_virtual_memory_max_bytes", METRIC_GAUGE,
         "Maximum amount of virtual memory available in bytes.", PROC_MAX_VSIZE},
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++) {
        int rc = metrics_register_func(reg, defs[i].type, defs[i].name, defs[i].help, process_field,
                                       (void *)(intptr_t)defs[i].field, NULL);
        if (rc != 0) return rc;
    }
    return 0;
}

/* ---------- the etcdbr catalogue ---------- */

static const char *const kinds[] = {"Full", "Incr", "Chunk", NULL};
static const char *const kinds_snap[] = {"Full", "Incr", NULL};
static const char *const succeeded[] = {"false", "true", NULL};
static const char *const restores[] = {ETCDBR_RESTORE_SINGLE_MEMBER, ETCDBR_RESTORE_SINGLE_NODE,
                                       NULL};
static const char *const endpoints[] = {"", NULL};
static const char *const operations[] = {
    "full_snapshot", "gc", "restore", "validation", "delta_snapshot", "defragmentation", NULL};
/* Error classes of etcdbr_metrics_error_class, plus "" as the Go tool pre-initialises. */
static const char *const error_classes[] = {
    "",   "canceled", "compacted", "corrupt", "etcd",    "exists",      "gap",   "invalid",
    "io", "nomem",    "not_found", "other",   "timeout", "unsupported", "store", NULL};

static const char *const l_kind[] = {"kind", NULL};
static const char *const l_kind_succ[] = {"kind", "succeeded", NULL};
static const char *const l_succ[] = {"succeeded", NULL};
static const char *const l_restore_succ[] = {"restore", "succeeded", NULL};
static const char *const l_succ_endpoint[] = {"succeeded", "endpoint", NULL};
static const char *const l_error[] = {"error", NULL};
static const char *const l_operation[] = {"operation", NULL};
static const char *const l_reason[] = {"reason", NULL};
/* chain_verdict_name of every verdict but "proven" (backup/chainproof.h) */
static const char *const chain_reasons[] = {"mismatch", "compacted", "ahead", "unreadable", NULL};

typedef struct CatalogueEntry {
    const char *name;
    MetricType type;
    const char *help;
    const char *const *labels;
    const char *const *pre[3]; /* value sets per label for metrics_touch_all */
} CatalogueEntry;

#define E(id, n, t, h, l, ...)                                                                     \
    [id] = {.name = n, .type = t, .help = h, .labels = l, .pre = {__VA_ARGS__}}

/* Indexed by EtcdbrMetricId. */
static const CatalogueEntry catalogue[ETCDBR_M_COUNT] = {
    E(ETCDBR_M_SNAPSHOT_GC_TOTAL, "etcdbr_snapshot_gc_total", METRIC_COUNTER,
      "Snapshots and chunks deleted by garbage collection.", l_kind_succ, kinds, succeeded),
    E(ETCDBR_M_SNAPSHOT_LATEST_REVISION, "etcdbr_snapshot_latest_revision", METRIC_GAUGE,
      "Last revision of the latest snapshot of each kind.", l_kind, kinds),
    E(ETCDBR_M_SNAPSHOT_LATEST_TIMESTAMP, "etcdbr_snapshot_latest_timestamp", METRIC_GAUGE,
      "Creation time (Unix seconds) of the latest snapshot of each kind.", l_kind, kinds),
    E(ETCDBR_M_SNAPSHOT_REQUIRED, "etcdbr_snapshot_required", METRIC_GAUGE,
      "1 while changes not yet saved in a snapshot of this kind exist, else 0.", l_kind, kinds),
    E(ETCDBR_M_SNAPSHOT_DURATION_SECONDS, "etcdbr_snapshot_duration_seconds", METRIC_HISTOGRAM,
      "Seconds from the start of a snapshot to the end of its upload to the object store.",
      l_kind_succ, kinds, succeeded),
    E(ETCDBR_M_VALIDATION_DURATION_SECONDS, "etcdbr_validation_duration_seconds", METRIC_HISTOGRAM,
      "Seconds spent validating the data directory.", l_succ, succeeded),
    E(ETCDBR_M_RESTORATION_DURATION_SECONDS, "etcdbr_restoration_duration_seconds",
      METRIC_HISTOGRAM, "Seconds spent restoring the etcd member.", l_restore_succ, restores,
      succeeded),
    E(ETCDBR_M_DEFRAGMENTATION_DURATION_SECONDS, "etcdbr_defragmentation_duration_seconds",
      METRIC_HISTOGRAM, "Seconds spent defragmenting each etcd cluster member.", l_succ_endpoint,
      succeeded, endpoints),
    E(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_TOTAL, "etcdbr_snapstore_latest_deltas_total", METRIC_GAUGE,
      "Delta snapshots taken since the latest full snapshot.", NULL, NULL),
    E(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_REVISIONS_TOTAL,
      "etcdbr_snapstore_latest_deltas_revisions_total", METRIC_GAUGE,
      "Revisions stored in delta snapshots taken since the latest full snapshot.", NULL, NULL),
    E(ETCDBR_M_SNAPSHOTTER_FAILURE, "etcdbr_snapshotter_failure", METRIC_COUNTER,
      "Snapshotter and garbage collection failures by error class.", l_error, error_classes),
    E(ETCDBR_M_CLUSTER_SIZE, "etcdbr_cluster_size", METRIC_GAUGE, "Current Etcd cluster size.",
      NULL, NULL),
    E(ETCDBR_M_IS_LEARNER, "etcdbr_is_learner", METRIC_GAUGE,
      "1 while this member is a learner, else 0.", NULL, NULL),
    E(ETCDBR_M_IS_LEARNER_COUNT_TOTAL, "etcdbr_is_learner_count_total", METRIC_COUNTER,
      "Attempts to add this member as a learner.", l_succ, succeeded),
    E(ETCDBR_M_ADD_LEARNER_DURATION_SECONDS, "etcdbr_add_learner_duration_seconds",
      METRIC_HISTOGRAM, "Seconds to add this member to the cluster as a learner.", l_succ,
      succeeded),
    E(ETCDBR_M_MEMBER_REMOVE_DURATION_SECONDS, "etcdbr_member_remove_duration_seconds",
      METRIC_HISTOGRAM, "Seconds to remove a member from the cluster.", l_succ, succeeded),
    E(ETCDBR_M_MEMBER_PROMOTE_DURATION_SECONDS, "etcdbr_member_promote_duration_seconds",
      METRIC_HISTOGRAM, "Seconds to promote the learner to a voting member.", l_succ, succeeded),
    E(ETCDBR_M_NETWORK_TRANSMITTED_BYTES, "etcdbr_network_transmitted_bytes", METRIC_COUNTER,
      "Bytes transmitted over all network interfaces.", NULL, NULL),
    E(ETCDBR_M_NETWORK_RECEIVED_BYTES, "etcdbr_network_received_bytes", METRIC_COUNTER,
      "Bytes received over all network interfaces.", NULL, NULL),
    E(ETCDBR_M_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS,
      "etcdbr_snapshot_last_success_timestamp_seconds", METRIC_GAUGE,
      "Unix time of the newest successful snapshot of each kind (from the store at start, "
      "then at each upload).",
      l_kind, kinds_snap),
    E(ETCDBR_M_LAST_ERROR_TIMESTAMP_SECONDS, "etcdbr_last_error_timestamp_seconds", METRIC_GAUGE,
      "Unix time of the last failure of each operation; 0 = none since start.", l_operation,
      operations),
    E(ETCDBR_M_SNAPSHOT_CHAIN_REJECTED_TOTAL, "etcdbr_snapshot_chain_rejected_total",
      METRIC_COUNTER,
      "Store chains the snapshotter did not continue because they were not proven to be this "
      "cluster's history, by reason; each started a new history with a full snapshot.",
      l_reason, chain_reasons),
};

#undef E

static const char *const op_names[ETCDBR_OP_COUNT] = {
    [ETCDBR_OP_FULL_SNAPSHOT] = "full_snapshot",
    [ETCDBR_OP_DELTA_SNAPSHOT] = "delta_snapshot",
    [ETCDBR_OP_GC] = "gc",
    [ETCDBR_OP_RESTORE] = "restore",
    [ETCDBR_OP_VALIDATION] = "validation",
    [ETCDBR_OP_DEFRAGMENTATION] = "defragmentation",
};

/* Like the Go tool: NaN when the file cannot be read (non-Linux, no /proc). */
static double net_bytes(void *arg) {
    double rx, tx;
    if (metrics_read_net_dev("/proc/self/net/dev", &rx, &tx) != 0) return NAN;
    return (intptr_t)arg == 1 ? tx : rx; /* arg: 1 = transmitted, 2 = received */
}

int etcdbr_metrics_register(MetricsRegistry *reg, Metric **out) {
    for (int id = 0; id < ETCDBR_M_COUNT; id++) {
        const CatalogueEntry *e = &catalogue[id];
        Metric *m;
        int rc;
        if (id == ETCDBR_M_NETWORK_TRANSMITTED_BYTES || id == ETCDBR_M_NETWORK_RECEIVED_BYTES) {
            rc = metrics_register_func(
                reg, e->type, e->name, e->help, net_bytes,
                (void *)(intptr_t)(id == ETCDBR_M_NETWORK_TRANSMITTED_BYTES ? 1 : 2), &m);
        } else {
            /* The cap leaves room for every pre-initialised child plus live values. */
            MetricOpts o = {.name = e->name, .help = e->help, .labels = e->labels};
            rc = metrics_register(reg, e->type, &o, &m);
            if (rc == 0 && e->labels) rc = metrics_touch_all(m, e->pre);
        }
        if (rc != 0) return rc;
        if (out) out[id] = m;
    }
    return 0;
}

static Metric *etcdbr_handles[ETCDBR_M_COUNT];
static pthread_mutex_t etcdbr_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int etcdbr_inited;

int etcdbr_metrics_init(void) {
    pthread_mutex_lock(&etcdbr_init_mu);
    int rc = 0;
    if (etcdbr_inited) goto done;
    MetricsRegistry *reg = metrics_default();
    if (!reg) {
        rc = err_set(ERR_NOMEM, "metrics: no default registry");
        goto done;
    }
    Metric *h[ETCDBR_M_COUNT] = {0};
    rc = etcdbr_metrics_register(reg, h);
    if (rc == 0) rc = metrics_register_process(reg);
    if (rc != 0) goto done;
    /* Published after the whole catalogue exists; readers take the mutex in etcdbr_metric. */
    memcpy(etcdbr_handles, h, sizeof h);
    etcdbr_inited = 1;
done:
    pthread_mutex_unlock(&etcdbr_init_mu);
    return rc;
}

Metric *etcdbr_metric(EtcdbrMetricId id) {
    if ((int)id < 0 || id >= ETCDBR_M_COUNT) return NULL;
    pthread_mutex_lock(&etcdbr_init_mu);
    Metric *m = etcdbr_handles[id];
    pthread_mutex_unlock(&etcdbr_init_mu);
    return m;
}

const char *etcdbr_metric_name(EtcdbrMetricId id) {
    if ((int)id < 0 || id >= ETCDBR_M_COUNT) return NULL;
    return catalogue[id].name;
}

const char *etcdbr_operation_name(EtcdbrOperation op) {
    if ((int)op < 0 || op >= ETCDBR_OP_COUNT) return NULL;
    return op_names[op];
}

const char *etcdbr_metrics_error_class(int err_code) {
    /* indexed by -err_code: every ERR_* is negative; ERR_OK is no error class */
    static const char *const classes[] = {
        [-ERR_IO] = "io",
        [-ERR_NOMEM] = "nomem",
        [-ERR_INVALID] = "invalid",
        [-ERR_NOT_FOUND] = "not_found",
        [-ERR_CORRUPT] = "corrupt",
        [-ERR_ETCD] = "etcd",
        [-ERR_COMPACTED] = "compacted",
        [-ERR_TIMEOUT] = "timeout",
        [-ERR_EXISTS] = "exists",
        [-ERR_UNSUPPORTED] = "unsupported",
        [-ERR_CANCELED] = "canceled",
        [-ERR_GAP] = "gap",
        [-ERR_CONFLICT] = "store_conflict",
        [-ERR_IMMUTABLE] = "immutable",
    };
    return NAME_AT(classes, -(long long)err_code, "other");
}

static double now_unix_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void etcdbr_metrics_record_error(EtcdbrOperation op, const char *error_class) {
    const char *name = etcdbr_operation_name(op);
    if (!name) return;
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_LAST_ERROR_TIMESTAMP_SECONDS), (const char *[]){name},
                      now_unix_seconds());
    if (op == ETCDBR_OP_FULL_SNAPSHOT || op == ETCDBR_OP_DELTA_SNAPSHOT || op == ETCDBR_OP_GC)
        metrics_counter_inc(etcdbr_metric(ETCDBR_M_SNAPSHOTTER_FAILURE),
                            (const char *[]){error_class ? error_class : METRICS_OTHER});
}

void etcdbr_metrics_stamp_error(EtcdbrOperation op) {
    const char *name = etcdbr_operation_name(op);
    if (!name) return;
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_LAST_ERROR_TIMESTAMP_SECONDS), (const char *[]){name},
                      now_unix_seconds());
}

void etcdbr_metrics_snapshot_saved(int is_delta, int64_t start_revision, int64_t last_revision,
                                   int64_t created_on) {
    const char *kind = is_delta ? "Incr" : "Full";
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSHOT_LATEST_REVISION), (const char *[]){kind},
                      (double)last_revision);
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSHOT_LATEST_TIMESTAMP), (const char *[]){kind},
                      (double)created_on);
    Metric *deltas = etcdbr_metric(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_TOTAL);
    Metric *revs = etcdbr_metric(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_REVISIONS_TOTAL);
    Metric *required = etcdbr_metric(ETCDBR_M_SNAPSHOT_REQUIRED);
    if (is_delta) {
        metrics_gauge_add(deltas, NULL, 1);
        metrics_gauge_add(revs, NULL, (double)(last_revision - start_revision));
        metrics_gauge_set(required, (const char *[]){"Incr"}, 0);
    } else {
        metrics_gauge_set(deltas, NULL, 0);
        metrics_gauge_set(revs, NULL, 0);
        for (size_t i = 0; kinds[i]; i++)
            metrics_gauge_set(required, (const char *[]){kinds[i]}, 0);
    }
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS),
                      (const char *[]){kind}, now_unix_seconds());
}

void etcdbr_metrics_snapshotter_started(const EtcdbrLatestSet *l) {
    if (!l || !l->has_full) return;
    Metric *rev = etcdbr_metric(ETCDBR_M_SNAPSHOT_LATEST_REVISION);
    Metric *ts = etcdbr_metric(ETCDBR_M_SNAPSHOT_LATEST_TIMESTAMP);
    Metric *ok = etcdbr_metric(ETCDBR_M_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS);
    int64_t incr_rev = l->ndeltas ? l->delta_last_revision : l->full_last_revision;
    int64_t incr_ts = l->ndeltas ? l->delta_created_on : l->full_created_on;
    metrics_gauge_set(rev, (const char *[]){"Full"}, (double)l->full_last_revision);
    metrics_gauge_set(rev, (const char *[]){"Incr"}, (double)incr_rev);
    metrics_gauge_set(ts, (const char *[]){"Full"}, (double)l->full_created_on);
    metrics_gauge_set(ts, (const char *[]){"Incr"}, (double)incr_ts);
    metrics_gauge_set(ok, (const char *[]){"Full"}, (double)l->full_created_on);
    metrics_gauge_set(ok, (const char *[]){"Incr"}, (double)incr_ts);
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_TOTAL), NULL,
                      (double)l->ndeltas);
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_REVISIONS_TOTAL), NULL,
                      (double)(l->ndeltas ? l->delta_revisions : 0));
}

void etcdbr_metrics_initialization(int validated, double validation_seconds, int restore_attempted,
                                   int restore_ok, double restore_seconds) {
    static const char *const tf[2] = {"false", "true"};
    metrics_histogram_observe(etcdbr_metric(ETCDBR_M_VALIDATION_DURATION_SECONDS),
                              (const char *[]){tf[validated != 0]}, validation_seconds);
    if (!restore_attempted) return;
    metrics_histogram_observe(etcdbr_metric(ETCDBR_M_RESTORATION_DURATION_SECONDS),
                              (const char *[]){ETCDBR_RESTORE_SINGLE_NODE, tf[restore_ok != 0]},
                              restore_seconds);
    if (!restore_ok) etcdbr_metrics_record_error(ETCDBR_OP_RESTORE, NULL);
}

void etcdbr_metrics_set_cluster_size(size_t members) {
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_CLUSTER_SIZE), NULL, (double)members);
}
