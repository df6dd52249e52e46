/* test_metrics: the Prometheus registry and the etcdbr catalogue (docs/go-tool.md §2, §11, §15.14).
 * Exact exposition text for each metric type, escaping, pre-initialised children, the
 * cardinality cap, concurrent updates, and a small text-format checker run over every
 * rendering so that a malformed line fails whatever test produced it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "server/metrics.h"
#include "support/testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------- a tiny text-format 0.0.4 checker ---------- */

static int is_name_char(char c, int first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Parses a value token: a float strtod accepts fully, or NaN, +Inf, -Inf. */
static int parse_value(const char *s, double *out) {
    if (strcmp(s, "NaN") == 0) return *out = NAN, 1;
    if (strcmp(s, "+Inf") == 0) return *out = INFINITY, 1;
    if (strcmp(s, "-Inf") == 0) return *out = -INFINITY, 1;
    if (!*s) return 0;
    char *end;
    *out = strtod(s, &end);
    return *end == '\0' && strpbrk(s, "nN") == NULL; /* strtod also takes "nan", "inf" */
}

typedef struct Family {
    char name[128];
    char type[32];
    int samples;
} Family;

/* Checks every line of text: "# HELP n h", "# TYPE n t" once per family before its samples,
 * samples "name{l="v",...} value" with valid names and escapes, histogram series named
 * n_bucket/n_sum/n_count with cumulative buckets ending at le="+Inf" == _count. Fails the test
 * with the offending line. Returns the number of sample lines. */
static int check_exposition(const char *text) {
    Family fam = {0};
    int samples = 0;
    double last_bucket = -1;
    int saw_inf = 1;
    const char *line = text;
    assert_true(*text == '\0' || text[strlen(text) - 1] == '\n');
    while (*line) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        char buf[2048];
        size_t n = (size_t)(nl - line);
        assert_true(n < sizeof buf);
        memcpy(buf, line, n);
        buf[n] = '\0';
        line = nl + 1;
        if (strncmp(buf, "# HELP ", 7) == 0) {
            const char *p = buf + 7;
            size_t k = 0;
            while (is_name_char(p[k], k == 0))
                k++;
            if (k == 0 || p[k] != ' ') fail_msg("bad HELP line: %s", buf);
            if (!saw_inf) fail_msg("histogram %s without +Inf bucket", fam.name);
            for (const char *q = p + k + 1; *q; q++)
                if (*q == '\\' && q[1] != '\\' && q[1] != 'n')
                    fail_msg("bad HELP escape: %s", buf);
                else if (*q == '\\')
                    q++;
            memset(&fam, 0, sizeof fam);
            snprintf(fam.name, sizeof fam.name, "%.*s", (int)k, p);
            continue;
        }
        if (strncmp(buf, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            if (sscanf(buf + 7, "%127s %31s", name, type) != 2) fail_msg("bad TYPE: %s", buf);
            if (strcmp(name, fam.name) != 0) fail_msg("TYPE without HELP before it: %s", buf);
            if (fam.type[0]) fail_msg("second TYPE line: %s", buf);
            if (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "histogram"))
                fail_msg("unknown type: %s", buf);
            snprintf(fam.type, sizeof fam.type, "%s", type);
            continue;
        }
        if (buf[0] == '#') fail_msg("unexpected comment: %s", buf);
        if (!fam.type[0]) fail_msg("sample before TYPE: %s", buf);
        /* name */
        const char *p = buf;
        size_t k = 0;
        while (is_name_char(p[k], k == 0))
            k++;
        if (k == 0) fail_msg("sample without name: %s", buf);
        char name[160];
        snprintf(name, sizeof name, "%.*s", (int)k, p);
        p += k;
        const char *suffix = "";
        if (strcmp(fam.type, "histogram") == 0) {
            size_t fl = strlen(fam.name);
            if (strncmp(name, fam.name, fl) != 0) fail_msg("sample of another family: %s", buf);
            suffix = name + fl;
            if (strcmp(suffix, "_bucket") && strcmp(suffix, "_sum") && strcmp(suffix, "_count"))
                fail_msg("bad histogram series: %s", buf);
        } else if (strcmp(name, fam.name) != 0) {
            fail_msg("sample of another family: %s", buf);
        }
        /* labels */
        char le[512] = "";
        if (*p == '{') {
            p++;
            while (*p != '}') {
                size_t ln = 0;
                while (is_name_char(p[ln], ln == 0) && p[ln] != ':')
                    ln++;
                if (ln == 0 || p[ln] != '=' || p[ln + 1] != '"') fail_msg("bad label: %s", buf);
                int is_le = ln == 2 && strncmp(p, "le", 2) == 0;
                p += ln + 2;
                char val[512];
                size_t vl = 0;
                while (*p != '"') {
                    if (!*p) fail_msg("unterminated label value: %s", buf);
                    if (*p == '\\') {
                        p++;
                        if (*p != '\\' && *p != '"' && *p != 'n') fail_msg("bad escape: %s", buf);
                    }
                    if (vl < sizeof val - 1) val[vl++] = *p;
                    p++;
                }
                val[vl] = '\0';
                if (is_le) snprintf(le, sizeof le, "%s", val);
                p++;
                if (*p == ',')
                    p++;
                else if (*p != '}')
                    fail_msg("bad label separator: %s", buf);
            }
            p++;
        }
        if (*p != ' ') fail_msg("no space before value: %s", buf);
        double v;
        if (!parse_value(p + 1, &v)) fail_msg("bad value: %s", buf);
        if (strcmp(suffix, "_bucket") == 0) {
            double bound = 0;
            if (!le[0] || !parse_value(le, &bound)) fail_msg("bucket without le: %s", buf);
            if (v < last_bucket) fail_msg("buckets not cumulative: %s", buf);
            last_bucket = v;
            saw_inf = isinf(bound) && bound > 0;
        } else if (strcmp(suffix, "_count") == 0) {
            if (!saw_inf || v != last_bucket) fail_msg("_count differs from +Inf bucket: %s", buf);
            last_bucket = -1;
        } else if (le[0]) {
            fail_msg("le outside a bucket: %s", buf);
        }
        fam.samples++;
        samples++;
    }
    return samples;
}

/* Renders reg, checks the format, returns the text (caller frees). */
static char *render_checked(MetricsRegistry *reg) {
    size_t len = 99;
    char *text = metrics_render(reg, &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    check_exposition(text);
    return text;
}

static MetricsRegistry *new_reg(void) {
    MetricsRegistry *reg;
    assert_int_equal(metrics_registry_new(&reg), 0);
    return reg;
}

/* ---------- exposition of each type ---------- */

static void test_counter_renders_exact_text(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *c;
    MetricOpts o = {.name = "requests_total",
                    .help = "Requests served.",
                    .labels = (const char *[]){"path", "code", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &o, &c), 0);
    metrics_counter_inc(c, (const char *[]){"/metrics", "200"});
    metrics_counter_add(c, (const char *[]){"/metrics", "200"}, 2.5);
    metrics_counter_inc(c, (const char *[]){"/healthz", "503"});
    metrics_counter_add(c, (const char *[]){"/healthz", "503"}, -4);  /* ignored */
    metrics_counter_add(c, (const char *[]){"/healthz", "503"}, NAN); /* ignored */
    char *text = render_checked(reg);
    /* Labels sorted by name (code before path), children sorted by those values. */
    assert_string_equal(text, "# HELP requests_total Requests served.\n"
                              "# TYPE requests_total counter\n"
                              "requests_total{code=\"200\",path=\"/metrics\"} 3.5\n"
                              "requests_total{code=\"503\",path=\"/healthz\"} 1\n");
    free(text);
    metrics_registry_free(reg);
}

static void test_gauge_renders_values_in_go_float_form(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *g;
    MetricOpts o = {.name = "v", .help = "h", .labels = (const char *[]){"i", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &o, &g), 0);
    static const struct {
        const char *label;
        double v;
        const char *want;
    } cases[] = {
        {"a", 1710460800, "1.7104608e+09"},
        {"b", 123456, "123456"},
        {"c", 1234567, "1.234567e+06"},
        {"d", 1e6, "1e+06"},
        {"e", 0.005, "0.005"},
        {"f", 0.0001, "0.0001"},
        {"g", 0.00001, "1e-05"},
        {"h", 0.1 + 0.2, "0.30000000000000004"},
        {"i", -3, "-3"},
        {"j", NAN, "NaN"},
        {"k", INFINITY, "+Inf"},
        {"l", -INFINITY, "-Inf"},
        {"m", -0.0, "0"},
        {"n", 2.5, "2.5"},
        {"o", 9007199254740993.0, "9.007199254740992e+15"},
    };
    char want[2048] = "# HELP v h\n# TYPE v gauge\n";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        metrics_gauge_set(g, (const char *[]){cases[i].label}, cases[i].v);
        char line[128];
        snprintf(line, sizeof line, "v{i=\"%s\"} %s\n", cases[i].label, cases[i].want);
        strcat(want, line);
    }
    char *text = render_checked(reg);
    assert_string_equal(text, want);
    free(text);
    metrics_registry_free(reg);
}

static void test_gauge_without_labels_renders_before_use(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *g;
    MetricOpts o = {.name = "up_gauge", .help = "Up."};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &o, &g), 0);
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP up_gauge Up.\n# TYPE up_gauge gauge\nup_gauge 0\n");
    free(text);
    metrics_gauge_set(g, NULL, 7);
    metrics_gauge_add(g, NULL, -2);
    double v;
    assert_int_equal(metrics_get(g, NULL, &v), 0);
    assert_true(v == 5);
    metrics_registry_free(reg);
}

static void test_histogram_buckets_are_cumulative(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *h;
    MetricOpts o = {.name = "op_seconds",
                    .help = "Op time.",
                    .labels = (const char *[]){"ok", NULL},
                    .buckets = (const double[]){0.5, 1, 2.5},
                    .nbuckets = 3};
    assert_int_equal(metrics_register(reg, METRIC_HISTOGRAM, &o, &h), 0);
    const char *const ok[] = {"true"};
    metrics_histogram_observe(h, ok, 0.5); /* on a bound: counts in le="0.5" */
    metrics_histogram_observe(h, ok, 0.7);
    metrics_histogram_observe(h, ok, 2);
    metrics_histogram_observe(h, ok, 30);
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP op_seconds Op time.\n"
                              "# TYPE op_seconds histogram\n"
                              "op_seconds_bucket{ok=\"true\",le=\"0.5\"} 1\n"
                              "op_seconds_bucket{ok=\"true\",le=\"1\"} 2\n"
                              "op_seconds_bucket{ok=\"true\",le=\"2.5\"} 3\n"
                              "op_seconds_bucket{ok=\"true\",le=\"+Inf\"} 4\n"
                              "op_seconds_sum{ok=\"true\"} 33.2\n"
                              "op_seconds_count{ok=\"true\"} 4\n");
    free(text);
    double n;
    assert_int_equal(metrics_get(h, ok, &n), 0);
    assert_true(n == 4);
    metrics_registry_free(reg);
}

static void test_histogram_default_buckets(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *h;
    MetricOpts o = {.name = "d_seconds", .help = "D."};
    assert_int_equal(metrics_register(reg, METRIC_HISTOGRAM, &o, &h), 0);
    metrics_histogram_observe(h, NULL, 0.03);
    metrics_histogram_observe(h, NULL, 7);
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP d_seconds D.\n"
                              "# TYPE d_seconds histogram\n"
                              "d_seconds_bucket{le=\"0.005\"} 0\n"
                              "d_seconds_bucket{le=\"0.01\"} 0\n"
                              "d_seconds_bucket{le=\"0.025\"} 0\n"
                              "d_seconds_bucket{le=\"0.05\"} 1\n"
                              "d_seconds_bucket{le=\"0.1\"} 1\n"
                              "d_seconds_bucket{le=\"0.25\"} 1\n"
                              "d_seconds_bucket{le=\"0.5\"} 1\n"
                              "d_seconds_bucket{le=\"1\"} 1\n"
                              "d_seconds_bucket{le=\"2.5\"} 1\n"
                              "d_seconds_bucket{le=\"5\"} 1\n"
                              "d_seconds_bucket{le=\"10\"} 2\n"
                              "d_seconds_bucket{le=\"+Inf\"} 2\n"
                              "d_seconds_sum 7.03\n"
                              "d_seconds_count 2\n");
    free(text);
    metrics_registry_free(reg);
}

static void test_families_sorted_by_name_and_empty_ones_left_out(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *m;
    MetricOpts zeta = {.name = "zeta", .help = "z"};
    MetricOpts alpha = {.name = "alpha", .help = "a"};
    MetricOpts unused = {.name = "mid", .help = "m", .labels = (const char *[]){"x", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &zeta, &m), 0);
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &unused, &m), 0);
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &alpha, &m), 0);
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP alpha a\n# TYPE alpha counter\nalpha 0\n"
                              "# HELP zeta z\n# TYPE zeta gauge\nzeta 0\n");
    free(text);
    assert_non_null(metrics_find(reg, "mid"));
    assert_null(metrics_find(reg, "nope"));
    metrics_registry_free(reg);
}

static void test_empty_registry_renders_empty_text(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    size_t len = 5;
    char *text = metrics_render(reg, &len);
    assert_non_null(text);
    assert_int_equal(len, 0);
    assert_string_equal(text, "");
    free(text);
    metrics_registry_free(reg);
}

/* ---------- escaping ---------- */

static void test_label_values_and_help_are_escaped(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *c;
    MetricOpts o = {.name = "esc_total",
                    .help = "Back\\slash, \"quotes\" stay,\nnew line.",
                    .labels = (const char *[]){"v", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &o, &c), 0);
    metrics_counter_inc(c, (const char *[]){"a\"b\\c\nd"});
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP esc_total Back\\\\slash, \"quotes\" stay,\\nnew line.\n"
                              "# TYPE esc_total counter\n"
                              "esc_total{v=\"a\\\"b\\\\c\\nd\"} 1\n");
    free(text);
    metrics_registry_free(reg);
}

/* ---------- pre-initialisation and cardinality ---------- */

static void test_preinitialised_children_render_zero(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *c;
    MetricOpts o = {
        .name = "gc_total", .help = "g", .labels = (const char *[]){"kind", "ok", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &o, &c), 0);
    static const char *const k[] = {"Full", "Incr", NULL};
    static const char *const s[] = {"false", "true", NULL};
    assert_int_equal(metrics_touch_all(c, (const char *const *const[]){k, s}), 0);
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP gc_total g\n# TYPE gc_total counter\n"
                              "gc_total{kind=\"Full\",ok=\"false\"} 0\n"
                              "gc_total{kind=\"Full\",ok=\"true\"} 0\n"
                              "gc_total{kind=\"Incr\",ok=\"false\"} 0\n"
                              "gc_total{kind=\"Incr\",ok=\"true\"} 0\n");
    free(text);
    /* Touching again keeps values. */
    metrics_counter_inc(c, (const char *[]){"Incr", "true"});
    assert_int_equal(metrics_touch(c, (const char *[]){"Incr", "true"}), 0);
    double v;
    assert_int_equal(metrics_get(c, (const char *[]){"Incr", "true"}, &v), 0);
    assert_true(v == 1);
    assert_int_equal(metrics_get(c, (const char *[]){"Chunk", "true"}, &v), ERR_NOT_FOUND);
    metrics_registry_free(reg);
}

static void test_cardinality_cap_folds_into_other(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *c;
    MetricOpts o = {.name = "fail_total",
                    .help = "f",
                    .labels = (const char *[]){"error", NULL},
                    .max_children = 3};
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &o, &c), 0);
    char msg[64];
    for (int i = 0; i < 100; i++) {
        snprintf(msg, sizeof msg, "dial tcp 10.0.0.%d:2379: connection refused", i % 10);
        metrics_counter_inc(c, (const char *[]){msg});
    }
    char *text = render_checked(reg);
    /* Three distinct values fit (10 each); the other seven values (70 events) share "other". */
    assert_string_equal(text,
                        "# HELP fail_total f\n# TYPE fail_total counter\n"
                        "fail_total{error=\"dial tcp 10.0.0.0:2379: connection refused\"} 10\n"
                        "fail_total{error=\"dial tcp 10.0.0.1:2379: connection refused\"} 10\n"
                        "fail_total{error=\"dial tcp 10.0.0.2:2379: connection refused\"} 10\n"
                        "fail_total{error=\"other\"} 70\n");
    free(text);
    /* Existing children keep counting after the cap is reached. */
    metrics_counter_inc(c, (const char *[]){"dial tcp 10.0.0.1:2379: connection refused"});
    double v;
    assert_int_equal(
        metrics_get(c, (const char *[]){"dial tcp 10.0.0.1:2379: connection refused"}, &v), 0);
    assert_true(v == 11);
    /* Lookups of overflowing values read the "other" child. */
    assert_int_equal(metrics_get(c, (const char *[]){"never seen"}, &v), 0);
    assert_true(v == 70);
    metrics_registry_free(reg);
}

static void test_invalid_or_long_label_values_fold_into_other(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *c;
    MetricOpts o = {.name = "x_total", .help = "x", .labels = (const char *[]){"v", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &o, &c), 0);
    char longv[METRICS_MAX_LABEL_VALUE_LEN + 2];
    memset(longv, 'a', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    metrics_counter_inc(c, (const char *[]){longv});
    metrics_counter_inc(c, (const char *[]){"bad \xff utf8"});
    metrics_counter_inc(c, (const char *[]){"overlong \xc0\xaf"});
    metrics_counter_inc(c, (const char *[]){"ok \xc3\xa9t\xc3\xa9"}); /* "été" */
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP x_total x\n# TYPE x_total counter\n"
                              "x_total{v=\"ok \xc3\xa9t\xc3\xa9\"} 1\n"
                              "x_total{v=\"other\"} 3\n");
    free(text);
    metrics_registry_free(reg);
}

/* ---------- registration errors ---------- */

static void test_registration_rejects_bad_input(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *m = (Metric *)1;
    MetricOpts bad_name = {.name = "9lives"};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &bad_name, &m), ERR_INVALID);
    assert_null(m);
    MetricOpts dash = {.name = "a-b"};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &dash, &m), ERR_INVALID);
    MetricOpts reserved = {.name = "a", .labels = (const char *[]){"__x", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &reserved, &m), ERR_INVALID);
    MetricOpts colon_label = {.name = "a", .labels = (const char *[]){"a:b", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &colon_label, &m), ERR_INVALID);
    MetricOpts twice = {.name = "a", .labels = (const char *[]){"x", "x", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &twice, &m), ERR_INVALID);
    MetricOpts le = {.name = "h", .labels = (const char *[]){"le", NULL}};
    assert_int_equal(metrics_register(reg, METRIC_HISTOGRAM, &le, &m), ERR_INVALID);
    MetricOpts unsorted = {.name = "h", .buckets = (const double[]){1, 0.5}, .nbuckets = 2};
    assert_int_equal(metrics_register(reg, METRIC_HISTOGRAM, &unsorted, &m), ERR_INVALID);
    MetricOpts inf_only = {.name = "h", .buckets = (const double[]){INFINITY}, .nbuckets = 1};
    assert_int_equal(metrics_register(reg, METRIC_HISTOGRAM, &inf_only, &m), ERR_INVALID);
    MetricOpts with_inf = {.name = "h", .buckets = (const double[]){1, INFINITY}, .nbuckets = 2};
    assert_int_equal(metrics_register(reg, METRIC_HISTOGRAM, &with_inf, &m), 0);
    MetricOpts dup = {.name = "h"};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &dup, &m), ERR_EXISTS);
    assert_non_null(strstr(err_msg(), "h"));
    assert_int_equal(metrics_register_func(reg, METRIC_HISTOGRAM, "f", "", NULL, NULL, &m),
                     ERR_INVALID);
    /* Updates of the wrong type or a NULL handle are ignored. */
    Metric *g;
    MetricOpts go = {.name = "g", .help = ""};
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &go, &g), 0);
    err_set(ERR_IO, "caller's message");
    metrics_counter_inc(g, NULL);
    metrics_histogram_observe(g, NULL, 1);
    metrics_gauge_set(NULL, NULL, 1);
    metrics_counter_inc(g, (const char *[]){"extra"}); /* wrong type, ignored */
    assert_string_equal(err_msg(), "caller's message");
    double v;
    assert_int_equal(metrics_get(g, NULL, &v), 0);
    assert_true(v == 0);
    char *text = render_checked(reg);
    free(text);
    metrics_registry_free(reg);
    metrics_registry_free(NULL);
}

/* ---------- concurrency ---------- */

typedef struct ThreadArg {
    MetricsRegistry *reg;
    Metric *c, *g, *h;
    int id;
} ThreadArg;

#define PER_THREAD 20000

static void *hammer(void *p) {
    ThreadArg *a = p;
    const char *kind[] = {(a->id & 1) ? "odd" : "even"};
    for (int i = 0; i < PER_THREAD; i++) {
        metrics_counter_inc(a->c, kind);
        metrics_gauge_add(a->g, NULL, 1);
        metrics_histogram_observe(a->h, NULL, (i % 2) ? 0.2 : 3);
        if (i % 1000 == 0) free(metrics_render(a->reg, NULL));
    }
    return NULL;
}

static void test_concurrent_updates_sum_correctly(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    ThreadArg args[4];
    MetricOpts co = {.name = "c_total", .help = "", .labels = (const char *[]){"k", NULL}};
    MetricOpts go = {.name = "g", .help = ""};
    MetricOpts ho = {.name = "h_seconds", .help = ""};
    Metric *c, *g, *h;
    assert_int_equal(metrics_register(reg, METRIC_COUNTER, &co, &c), 0);
    assert_int_equal(metrics_register(reg, METRIC_GAUGE, &go, &g), 0);
    assert_int_equal(metrics_register(reg, METRIC_HISTOGRAM, &ho, &h), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (ThreadArg){reg, c, g, h, i};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    double v;
    assert_int_equal(metrics_get(c, (const char *[]){"odd"}, &v), 0);
    assert_true(v == 2 * PER_THREAD);
    assert_int_equal(metrics_get(c, (const char *[]){"even"}, &v), 0);
    assert_true(v == 2 * PER_THREAD);
    assert_int_equal(metrics_get(g, NULL, &v), 0);
    assert_true(v == 4 * PER_THREAD);
    assert_int_equal(metrics_get(h, NULL, &v), 0);
    assert_true(v == 4 * PER_THREAD);
    char *text = render_checked(reg);
    assert_non_null(strstr(text, "h_seconds_bucket{le=\"0.25\"} 40000\n"));
    assert_non_null(strstr(text, "h_seconds_bucket{le=\"5\"} 80000\n"));
    assert_non_null(strstr(text, "h_seconds_count 80000\n"));
    const char *sum = strstr(text, "\nh_seconds_sum ");
    assert_non_null(sum);
    assert_true(fabs(strtod(sum + 15, NULL) - 128000) < 1e-3); /* 40000*3 + 40000*0.2 */
    free(text);
    metrics_registry_free(reg);
}

/* ---------- callbacks and /proc/net/dev ---------- */

static double forty_two(void *arg) {
    (void)arg;
    return 42;
}

static void test_callback_metric_is_evaluated_at_render(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *m;
    assert_int_equal(
        metrics_register_func(reg, METRIC_COUNTER, "cb_bytes", "Callback.", forty_two, NULL, &m),
        0);
    char *text = render_checked(reg);
    assert_string_equal(text, "# HELP cb_bytes Callback.\n# TYPE cb_bytes counter\ncb_bytes 42\n");
    free(text);
    assert_int_equal(metrics_touch(m, NULL), ERR_INVALID);
    metrics_registry_free(reg);
}

static void test_net_dev_sums_all_interfaces(void **state) {
    (void)state;
    char path[] = "/tmp/test_metrics_netdev_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *body =
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
        "errs drop fifo colls carrier compressed\n"
        "    lo:  1000      10    0    0    0     0          0         0     1000      10    0 "
        "   0    0     0       0          0\n"
        "  eth0: 18446744073709551615 5 0 0 0 0 0 0 250 3 0 0 0 0 0 0\n"
        "eth1:5 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n";
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    double rx, tx;
    assert_int_equal(metrics_read_net_dev(path, &rx, &tx), 0);
    assert_true(rx == 1000 + 18446744073709551615.0 + 5);
    assert_true(tx == 1000 + 250 + 7);
    FILE *f = fopen(path, "a");
    fputs("  bad: 1 2 3\n", f);
    fclose(f);
    assert_int_equal(metrics_read_net_dev(path, &rx, &tx), ERR_CORRUPT);
    unlink(path);
    assert_int_equal(metrics_read_net_dev(path, &rx, &tx), ERR_IO);
}

/* ---------- the etcdbr catalogue ---------- */

static const struct {
    const char *name, *type;
    int samples; /* lines for the pre-initialised children */
} etcdbr_expected[] = {
    {"etcdbr_snapshot_gc_total", "counter", 6},
    {"etcdbr_snapshot_latest_revision", "gauge", 3},
    {"etcdbr_snapshot_latest_timestamp", "gauge", 3},
    {"etcdbr_snapshot_required", "gauge", 3},
    {"etcdbr_snapshot_duration_seconds", "histogram", 6 * 14},
    {"etcdbr_validation_duration_seconds", "histogram", 2 * 14},
    {"etcdbr_restoration_duration_seconds", "histogram", 4 * 14},
    {"etcdbr_defragmentation_duration_seconds", "histogram", 2 * 14},
    {"etcdbr_snapstore_latest_deltas_total", "gauge", 1},
    {"etcdbr_snapstore_latest_deltas_revisions_total", "gauge", 1},
    {"etcdbr_snapshotter_failure", "counter", 15},
    {"etcdbr_cluster_size", "gauge", 1},
    {"etcdbr_is_learner", "gauge", 1},
    {"etcdbr_is_learner_count_total", "counter", 2},
    {"etcdbr_add_learner_duration_seconds", "histogram", 2 * 14},
    {"etcdbr_member_remove_duration_seconds", "histogram", 2 * 14},
    {"etcdbr_member_promote_duration_seconds", "histogram", 2 * 14},
    {"etcdbr_network_transmitted_bytes", "counter", 1},
    {"etcdbr_network_received_bytes", "counter", 1},
    {"etcdbr_snapshot_last_success_timestamp_seconds", "gauge", 2},
    {"etcdbr_last_error_timestamp_seconds", "gauge", 6},
    {"etcdbr_snapshot_chain_rejected_total", "counter", 4},
};

/* Number of sample lines of family name in text. */
static int count_samples(const char *text, const char *name) {
    int n = 0;
    size_t nl = strlen(name);
    for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
        if (*p != '#' && strncmp(p, name, nl) == 0) {
            const char *rest = p + nl;
            if (strncmp(rest, "_bucket", 7) == 0)
                rest += 7;
            else if (strncmp(rest, "_sum", 4) == 0)
                rest += 4;
            else if (strncmp(rest, "_count", 6) == 0)
                rest += 6;
            if (*rest == '{' || *rest == ' ') n++;
        }
    }
    return n;
}

static void test_etcdbr_catalogue_renders_every_metric(void **state) {
    (void)state;
    MetricsRegistry *reg = new_reg();
    Metric *h[ETCDBR_M_COUNT];
    assert_int_equal(etcdbr_metrics_register(reg, h), 0);
    char *text = render_checked(reg);
    size_t nexp = sizeof etcdbr_expected / sizeof *etcdbr_expected;
    assert_int_equal(nexp, ETCDBR_M_COUNT);
    for (size_t i = 0; i < nexp; i++) {
        char line[256];
        snprintf(line, sizeof line, "\n# TYPE %s %s\n", etcdbr_expected[i].name,
                 etcdbr_expected[i].type);
        if (!strstr(text, line)) fail_msg("missing TYPE line for %s", etcdbr_expected[i].name);
        snprintf(line, sizeof line, "# HELP %s ", etcdbr_expected[i].name);
        assert_non_null(strstr(text, line));
        assert_int_equal(count_samples(text, etcdbr_expected[i].name), etcdbr_expected[i].samples);
        assert_string_equal(etcdbr_metric_name((EtcdbrMetricId)i), etcdbr_expected[i].name);
        assert_non_null(h[i]);
    }
    /* The §11 pre-initialised label combinations, as zeros. */
    static const char *const want[] = {
        "etcdbr_snapshot_gc_total{kind=\"Chunk\",succeeded=\"false\"} 0\n",
        "etcdbr_snapshot_gc_total{kind=\"Incr\",succeeded=\"true\"} 0\n",
        "etcdbr_snapshot_required{kind=\"Full\"} 0\n",
        "etcdbr_snapshot_duration_seconds_bucket{kind=\"Full\",succeeded=\"true\",le=\"0.005\"} "
        "0\n",
        "etcdbr_snapshot_duration_seconds_count{kind=\"Chunk\",succeeded=\"false\"} 0\n",
        "etcdbr_restoration_duration_seconds_count{restore=\"single_member\",succeeded=\"true\"} "
        "0\n",
        "etcdbr_restoration_duration_seconds_sum{restore=\"single_node\",succeeded=\"false\"} 0\n",
        "etcdbr_defragmentation_duration_seconds_bucket{endpoint=\"\",succeeded=\"false\","
        "le=\"+Inf\"} 0\n",
        "etcdbr_validation_duration_seconds_count{succeeded=\"true\"} 0\n",
        "etcdbr_snapshotter_failure{error=\"\"} 0\n",
        "etcdbr_snapshotter_failure{error=\"etcd\"} 0\n",
        "etcdbr_snapshotter_failure{error=\"store\"} 0\n",
        "etcdbr_snapstore_latest_deltas_total 0\n",
        "etcdbr_is_learner 0\n",
        "etcdbr_cluster_size 0\n",
        "etcdbr_is_learner_count_total{succeeded=\"false\"} 0\n",
        "etcdbr_member_promote_duration_seconds_count{succeeded=\"true\"} 0\n",
        "etcdbr_snapshot_last_success_timestamp_seconds{kind=\"Incr\"} 0\n",
        "etcdbr_last_error_timestamp_seconds{operation=\"defragmentation\"} 0\n",
        "etcdbr_last_error_timestamp_seconds{operation=\"full_snapshot\"} 0\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(text, want[i])) fail_msg("missing line: %s", want[i]);
    /* Network counters are numbers (or NaN without /proc). */
    const char *tx = strstr(text, "\netcdbr_network_transmitted_bytes ");
    assert_non_null(tx);
    if (access("/proc/self/net/dev", R_OK) == 0) assert_true(strtod(tx + 34, NULL) >= 0);
    free(text);
    /* Registering twice in the same registry is refused. */
    assert_int_equal(etcdbr_metrics_register(reg, NULL), ERR_EXISTS);
    metrics_registry_free(reg);
}

static void test_error_classes_are_bounded(void **state) {
    (void)state;
    assert_string_equal(etcdbr_metrics_error_class(ERR_ETCD), "etcd");
    assert_string_equal(etcdbr_metrics_error_class(ERR_TIMEOUT), "timeout");
    assert_string_equal(etcdbr_metrics_error_class(ERR_CORRUPT), "corrupt");
    assert_string_equal(etcdbr_metrics_error_class(ERR_COMPACTED), "compacted");
    assert_string_equal(etcdbr_metrics_error_class(-999), "other");
    assert_string_equal(etcdbr_metrics_error_class(0), "other");
    for (int code = 0; code >= -12; code--) {
        const char *cls = etcdbr_metrics_error_class(code);
        assert_true(strlen(cls) < 16);
    }
    assert_string_equal(etcdbr_operation_name(ETCDBR_OP_GC), "gc");
    assert_null(etcdbr_operation_name(ETCDBR_OP_COUNT));
    assert_null(etcdbr_metric_name(ETCDBR_M_COUNT));
}

/* The default-registry helpers: set points of §11 and the operator metrics. This test owns the
 * default registry (other tests use their own). */
static void test_etcdbr_set_points_on_default_registry(void **state) {
    (void)state;
    assert_null(etcdbr_metric(ETCDBR_M_IS_LEARNER)); /* before init: NULL, updates no-ops */
    metrics_gauge_set(etcdbr_metric(ETCDBR_M_IS_LEARNER), NULL, 1);
    assert_int_equal(etcdbr_metrics_init(), 0);
    assert_int_equal(etcdbr_metrics_init(), 0); /* idempotent */
    Metric *rev = etcdbr_metric(ETCDBR_M_SNAPSHOT_LATEST_REVISION);
    Metric *ts = etcdbr_metric(ETCDBR_M_SNAPSHOT_LATEST_TIMESTAMP);
    Metric *ok = etcdbr_metric(ETCDBR_M_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS);
    Metric *deltas = etcdbr_metric(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_TOTAL);
    Metric *revs = etcdbr_metric(ETCDBR_M_SNAPSTORE_LATEST_DELTAS_REVISIONS_TOTAL);
    Metric *req = etcdbr_metric(ETCDBR_M_SNAPSHOT_REQUIRED);
    Metric *fail = etcdbr_metric(ETCDBR_M_SNAPSHOTTER_FAILURE);
    Metric *lasterr = etcdbr_metric(ETCDBR_M_LAST_ERROR_TIMESTAMP_SECONDS);
    assert_ptr_equal(rev, metrics_find(metrics_default(), "etcdbr_snapshot_latest_revision"));
    const char *const full[] = {"Full"}, *const incr[] = {"Incr"};
    double v;

    EtcdbrLatestSet l = {.has_full = 1,
                         .full_last_revision = 100,
                         .full_created_on = 1710460800,
                         .ndeltas = 2,
                         .delta_last_revision = 130,
                         .delta_created_on = 1710461000,
                         .delta_revisions = 28};
    etcdbr_metrics_snapshotter_started(&l);
    assert_int_equal(metrics_get(rev, full, &v), 0), assert_true(v == 100);
    assert_int_equal(metrics_get(rev, incr, &v), 0), assert_true(v == 130);
    assert_int_equal(metrics_get(ts, incr, &v), 0), assert_true(v == 1710461000);
    assert_int_equal(metrics_get(ok, full, &v), 0), assert_true(v == 1710460800);
    assert_int_equal(metrics_get(deltas, NULL, &v), 0), assert_true(v == 2);
    assert_int_equal(metrics_get(revs, NULL, &v), 0), assert_true(v == 28);

    metrics_gauge_set(req, incr, 1);
    metrics_gauge_set(req, full, 1);
    double before = (double)time(NULL);
    etcdbr_metrics_snapshot_saved(1, 131, 140, 1710461020);
    assert_int_equal(metrics_get(rev, incr, &v), 0), assert_true(v == 140);
    assert_int_equal(metrics_get(deltas, NULL, &v), 0), assert_true(v == 3);
    assert_int_equal(metrics_get(revs, NULL, &v), 0), assert_true(v == 28 + 9);
    assert_int_equal(metrics_get(req, incr, &v), 0), assert_true(v == 0);
    assert_int_equal(metrics_get(req, full, &v), 0), assert_true(v == 1);
    assert_int_equal(metrics_get(ok, incr, &v), 0), assert_true(v >= before && v < before + 60);

    etcdbr_metrics_snapshot_saved(0, 0, 150, 1710464400);
    assert_int_equal(metrics_get(rev, full, &v), 0), assert_true(v == 150);
    assert_int_equal(metrics_get(ts, full, &v), 0), assert_true(v == 1710464400);
    assert_int_equal(metrics_get(deltas, NULL, &v), 0), assert_true(v == 0);
    assert_int_equal(metrics_get(revs, NULL, &v), 0), assert_true(v == 0);
    assert_int_equal(metrics_get(req, full, &v), 0), assert_true(v == 0);
    assert_int_equal(metrics_get(ok, full, &v), 0), assert_true(v >= before);

    etcdbr_metrics_record_error(ETCDBR_OP_DELTA_SNAPSHOT, etcdbr_metrics_error_class(ERR_ETCD));
    etcdbr_metrics_record_error(ETCDBR_OP_GC, "store");
    etcdbr_metrics_record_error(ETCDBR_OP_RESTORE, "corrupt"); /* timestamp only */
    etcdbr_metrics_record_error(ETCDBR_OP_COUNT, "x");         /* ignored */
    assert_int_equal(metrics_get(fail, (const char *[]){"etcd"}, &v), 0), assert_true(v == 1);
    assert_int_equal(metrics_get(fail, (const char *[]){"store"}, &v), 0), assert_true(v == 1);
    assert_int_equal(metrics_get(fail, (const char *[]){"corrupt"}, &v), 0), assert_true(v == 0);
    assert_int_equal(metrics_get(lasterr, (const char *[]){"restore"}, &v), 0);
    assert_true(v >= before);
    assert_int_equal(metrics_get(lasterr, (const char *[]){"validation"}, &v), 0);
    assert_true(v == 0);

    metrics_histogram_observe(etcdbr_metric(ETCDBR_M_SNAPSHOT_DURATION_SECONDS),
                              (const char *[]){"Full", "true"}, 12.5);
    metrics_histogram_observe(etcdbr_metric(ETCDBR_M_DEFRAGMENTATION_DURATION_SECONDS),
                              (const char *[]){"true", "https://etcd-main-0:2379"}, 0.3);
    char *text = render_checked(metrics_default());
    assert_non_null(strstr(text, "etcdbr_snapshot_duration_seconds_bucket{kind=\"Full\","
                                 "succeeded=\"true\",le=\"10\"} 0\n"));
    assert_non_null(strstr(text, "etcdbr_snapshot_duration_seconds_bucket{kind=\"Full\","
                                 "succeeded=\"true\",le=\"+Inf\"} 1\n"));
    assert_non_null(strstr(text, "etcdbr_defragmentation_duration_seconds_count{endpoint="
                                 "\"https://etcd-main-0:2379\",succeeded=\"true\"} 1\n"));
    assert_non_null(strstr(text, "etcdbr_snapshot_latest_revision{kind=\"Full\"} 150\n"));
    assert_non_null(strstr(text, "etcdbr_snapshot_latest_timestamp{kind=\"Full\"} "
                                 "1.7104644e+09\n"));
    free(text);
}

/* ---------- Go-tool compatibility: restore label, cluster size, process collector ---------- */

static double get_or_fail(Metric *m, const char *const *lv) {
    double v = -1;
    assert_non_null(m);
    assert_int_equal(metrics_get(m, lv, &v), 0);
    return v;
}

/* Runs after test_etcdbr_set_points_on_default_registry (which must see the default registry
 * uninitialised); etcdbr_metrics_init is idempotent, so this one also runs alone. */
static void test_initialization_restore_is_labelled_single_node(void **state) {
    (void)state;
    assert_int_equal(etcdbr_metrics_init(), 0);
    Metric *r = etcdbr_metric(ETCDBR_M_RESTORATION_DURATION_SECONDS);
    Metric *val = etcdbr_metric(ETCDBR_M_VALIDATION_DURATION_SECONDS);
    Metric *lasterr = etcdbr_metric(ETCDBR_M_LAST_ERROR_TIMESTAMP_SECONDS);
    const char *const node_ok[] = {"single_node", "true"}, *const node_bad[] = {"single_node",
                                                                                "false"};
    const char *const member_ok[] = {"single_member", "true"}, *const member_bad[] = {
                                                                   "single_member", "false"};
    const char *const vtrue[] = {"true"}, *const vfalse[] = {"false"};
    double n_ok = get_or_fail(r, node_ok), n_bad = get_or_fail(r, node_bad);
    double v_ok = get_or_fail(val, vtrue), v_bad = get_or_fail(val, vfalse);
    double before = (double)time(NULL);

    /* a data dir that failed validation, restored from the store */
    etcdbr_metrics_initialization(1, 0.25, 1, 1, 3.5);
    assert_true(get_or_fail(r, node_ok) == n_ok + 1);
    assert_true(get_or_fail(val, vtrue) == v_ok + 1);
    /* a valid data dir: validation only */
    etcdbr_metrics_initialization(1, 0.1, 0, 0, 0);
    assert_true(get_or_fail(r, node_ok) == n_ok + 1);
    assert_true(get_or_fail(r, node_bad) == n_bad);
    assert_true(get_or_fail(val, vtrue) == v_ok + 2);
    /* a failed restore: succeeded="false" and the restore error time stamp */
    etcdbr_metrics_initialization(0, 0.1, 1, 0, 0.5);
    assert_true(get_or_fail(r, node_bad) == n_bad + 1);
    assert_true(get_or_fail(val, vfalse) == v_bad + 1);
    assert_true(get_or_fail(lasterr, (const char *[]){"restore"}) >= before);
    /* the Go tool's multi-node label is never written, only pre-initialised */
    assert_true(get_or_fail(r, member_ok) == 0);
    assert_true(get_or_fail(r, member_bad) == 0);
    assert_string_equal(ETCDBR_RESTORE_SINGLE_NODE, "single_node");

    char *text = render_checked(metrics_default());
    char line[160];
    snprintf(line, sizeof line,
             "\netcdbr_restoration_duration_seconds_count{restore=\"single_node\","
             "succeeded=\"true\"} %d\n",
             (int)n_ok + 1);
    assert_non_null(strstr(text, line));
    assert_non_null(strstr(text, "\netcdbr_restoration_duration_seconds_count{restore=\""
                                 "single_member\",succeeded=\"true\"} 0\n"));
    free(text);
}

static void test_cluster_size_setter_sets_the_gauge(void **state) {
    (void)state;
    assert_int_equal(etcdbr_metrics_init(), 0);
    Metric *m = etcdbr_metric(ETCDBR_M_CLUSTER_SIZE);
    etcdbr_metrics_set_cluster_size(3);
    assert_true(get_or_fail(m, NULL) == 3);
    char *text = render_checked(metrics_default());
    assert_non_null(strstr(text, "\n# HELP etcdbr_cluster_size Current Etcd cluster size.\n"
                                 "# TYPE etcdbr_cluster_size gauge\netcdbr_cluster_size 3\n"));
    free(text);
    etcdbr_metrics_set_cluster_size(1); /* a member removed: the gauge follows down */
    assert_true(get_or_fail(m, NULL) == 1);
    etcdbr_metrics_set_cluster_size(0);
    assert_true(get_or_fail(m, NULL) == 0);
}

/* The value of the unlabelled sample name in text; fails when absent. */
static double sample_value(const char *text, const char *name) {
    char key[160];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(text, key);
    if (!p) fail_msg("no sample %s", name);
    double v;
    char tok[64];
    assert_int_equal(sscanf(p + strlen(key), "%63s", tok), 1);
    if (!parse_value(tok, &v)) fail_msg("bad value of %s: %s", name, tok);
    return v;
}

static void test_process_metrics_match_go_and_have_sane_values(void **state) {
    (void)state;
    if (access("/proc/self/stat", R_OK) != 0)
        testutil_skip("no /proc/self/stat"); /* not Linux: the callbacks give NaN */
    MetricsRegistry *reg = new_reg();
    assert_int_equal(metrics_register_process(reg), 0);
    assert_int_equal(metrics_register_process(reg), ERR_EXISTS);
    double now = (double)time(NULL);
    char *text = render_checked(reg);
    /* HELP and TYPE exactly as client_golang's process collector */
    static const char *const go[] = {
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
        "# TYPE process_cpu_seconds_total counter\n",
        "# HELP process_max_fds Maximum number of open file descriptors.\n"
        "# TYPE process_max_fds gauge\n",
        "# HELP process_open_fds Number of open file descriptors.\n"
        "# TYPE process_open_fds gauge\n",
        "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
        "# TYPE process_resident_memory_bytes gauge\n",
        "# HELP process_start_time_seconds Start time of the process since unix epoch in "
        "seconds.\n# TYPE process_start_time_seconds gauge\n",
        "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
        "# TYPE process_virtual_memory_bytes gauge\n",
        "# HELP process_virtual_memory_max_bytes Maximum amount of virtual memory available in "
        "bytes.\n# TYPE process_virtual_memory_max_bytes gauge\n",
    };
    for (size_t i = 0; i < sizeof go / sizeof *go; i++)
        if (!strstr(text, go[i])) fail_msg("missing or different: %s", go[i]);
    double rss = sample_value(text, "process_resident_memory_bytes");
    double vsize = sample_value(text, "process_virtual_memory_bytes");
    double cpu = sample_value(text, "process_cpu_seconds_total");
    double start = sample_value(text, "process_start_time_seconds");
    double fds = sample_value(text, "process_open_fds");
    double max_fds = sample_value(text, "process_max_fds");
    double max_vsize = sample_value(text, "process_virtual_memory_max_bytes");
    free(text);
    assert_true(rss > 0 && rss == floor(rss));
    assert_true(vsize >= rss);
    assert_true(cpu >= 0 && cpu < 3600);
    /* btime is whole seconds, so the start may read up to 1 s early; never in the future */
    assert_true(start > now - 3600 && start <= now + 1);
    assert_true(fds >= 3 && fds <= max_fds); /* stdin, stdout, stderr at least */
    assert_true(max_fds >= 1);
    assert_true(max_vsize > 0);

    /* computed at scrape time: one more open file is one more fd */
    Metric *open_fds = metrics_find(reg, "process_open_fds");
    double a = get_or_fail(open_fds, NULL);
    FILE *f = fopen("/dev/null", "r");
    assert_non_null(f);
    double b = get_or_fail(open_fds, NULL);
    fclose(f);
    assert_true(b == a + 1);
    assert_true(get_or_fail(open_fds, NULL) == a);

    /* the one-shot reader agrees */
    MetricsProcessStats ps;
    assert_int_equal(metrics_read_process(&ps), 0);
    assert_true(ps.resident_bytes > 0 && ps.open_fds >= 3);
    assert_true(fabs(ps.start_time - start) < 1e-6);
    assert_true(ps.cpu_seconds >= cpu);
    assert_true(ps.max_fds == max_fds && ps.max_virtual_bytes == max_vsize);
    metrics_registry_free(reg);
}

static void test_default_registry_serves_process_metrics(void **state) {
    (void)state;
    assert_int_equal(etcdbr_metrics_init(), 0);
    char *text = render_checked(metrics_default());
    if (access("/proc/self/stat", R_OK) == 0)
        assert_true(sample_value(text, "process_resident_memory_bytes") > 0);
    else
        assert_non_null(strstr(text, "\nprocess_resident_memory_bytes NaN\n"));
    assert_non_null(strstr(text, "\nprocess_start_time_seconds "));
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_renders_exact_text),
        cmocka_unit_test(test_gauge_renders_values_in_go_float_form),
        cmocka_unit_test(test_gauge_without_labels_renders_before_use),
        cmocka_unit_test(test_histogram_buckets_are_cumulative),
        cmocka_unit_test(test_histogram_default_buckets),
        cmocka_unit_test(test_families_sorted_by_name_and_empty_ones_left_out),
        cmocka_unit_test(test_empty_registry_renders_empty_text),
        cmocka_unit_test(test_label_values_and_help_are_escaped),
        cmocka_unit_test(test_preinitialised_children_render_zero),
        cmocka_unit_test(test_cardinality_cap_folds_into_other),
        cmocka_unit_test(test_invalid_or_long_label_values_fold_into_other),
        cmocka_unit_test(test_registration_rejects_bad_input),
        cmocka_unit_test(test_concurrent_updates_sum_correctly),
        cmocka_unit_test(test_callback_metric_is_evaluated_at_render),
        cmocka_unit_test(test_net_dev_sums_all_interfaces),
        cmocka_unit_test(test_etcdbr_catalogue_renders_every_metric),
        cmocka_unit_test(test_error_classes_are_bounded),
        cmocka_unit_test(test_etcdbr_set_points_on_default_registry),
        cmocka_unit_test(test_initialization_restore_is_labelled_single_node),
        cmocka_unit_test(test_cluster_size_setter_sets_the_gauge),
        cmocka_unit_test(test_process_metrics_match_go_and_have_sane_values),
        cmocka_unit_test(test_default_registry_serves_process_metrics),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
