/* test_opts: the option table as the one source of flags: ranges and allowed values refused as
 * usage errors naming the flag (command line and config file), suggestions for mistyped flags,
 * warnings for flags that do nothing, --help and docs/flags.md from the table (the checked-in
 * file must match), and a source scan: active flags are read somewhere, unimplemented ones not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmd/opts.h"
#include "common/err.h"
#include "common/log.h"
#include "support/testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const unsigned ALL_CMDS[] = {CMD_SNAPSHOT, CMD_RESTORE, CMD_SERVER, CMD_INITIALIZE};
#define N_CMDS (sizeof ALL_CMDS / sizeof ALL_CMDS[0])

/* opts_parse of a NULL-terminated argument list; *o set on success. */
static int parse(unsigned cmd, Opts **o, ...) {
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, o);
    for (char *a; (a = va_arg(ap, char *)) && argc < 32;)
        argv[argc++] = a;
    va_end(ap);
    int help = 0;
    *o = NULL;
    return opts_parse(cmd, argc, argv, o, &help);
}

/* Expects opts_parse of the one argument to fail with a message holding each of the parts. */
static void expect_refused(unsigned cmd, const char *arg, const char *part1, const char *part2) {
    Opts *o = NULL;
    int rc = parse(cmd, &o, arg, NULL);
    if (rc != ERR_INVALID) fail_msg("%s was accepted", arg);
    if (!strstr(err_msg(), part1) || (part2 && !strstr(err_msg(), part2)))
        fail_msg("%s: message \"%s\" lacks \"%s\" / \"%s\"", arg, err_msg(), part1,
                 part2 ? part2 : "");
    assert_null(o);
}

static void expect_accepted(unsigned cmd, const char *arg) {
    Opts *o = NULL;
    if (parse(cmd, &o, arg, NULL)) fail_msg("%s refused: %s", arg, err_msg());
    opts_free(o);
}

/* Captures stderr (the log) between begin and end. */
typedef struct {
    int saved;
    FILE *f;
} Capture;

static void capture_begin(Capture *c, int fd) {
    fflush(fd == 1 ? stdout : stderr);
    c->f = tmpfile();
    assert_non_null(c->f);
    c->saved = dup(fd);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->f), fd) >= 0);
}

static char *capture_end(Capture *c, int fd) {
    fflush(fd == 1 ? stdout : stderr);
    dup2(c->saved, fd);
    close(c->saved);
    long n = ftell(c->f);
    char *s = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    rewind(c->f);
    if (n > 0) assert_int_equal(fread(s, 1, (size_t)n, c->f), (size_t)n);
    fclose(c->f);
    return s;
}

static const char *source_dir(void) {
    const char *d = getenv("ETCDBR_SOURCE_DIR");
    return d && *d ? d : NULL;
}

/* ---- the table itself ---------------------------------------------------------------------- */

static void test_table_entries_are_consistent(void **state) {
    (void)state;
    size_t n = 0;
    const OptDef *t = opts_table(&n);
    assert_true(n > 50);
    for (size_t i = 0; i < n; i++) {
        const OptDef *d = &t[i];
        if (d->choices) assert_int_equal(d->type, OPT_STRING);
        if (d->has_min || d->has_max) assert_true(d->type == OPT_INT || d->type == OPT_DURATION);
        if (d->has_min && d->has_max) assert_true(d->min <= d->max);
        assert_int_equal(d->support == OPT_IGNORED, d->ignored != NULL);
        assert_non_null(d->help);
        assert_non_null(d->def);
        for (size_t j = i + 1; j < n; j++) {
            if (!(d->commands & t[j].commands)) continue;
            if (!strcmp(d->name, t[j].name)) fail_msg("--%s defined twice", d->name);
            if (d->short_name && d->short_name == t[j].short_name)
                fail_msg("-%c used by --%s and --%s", d->short_name, d->name, t[j].name);
        }
    }
}

static void test_every_default_passes_its_own_checks(void **state) {
    (void)state;
    for (size_t c = 0; c < N_CMDS; c++) {
        Opts *o = NULL;
        if (parse(ALL_CMDS[c], &o, NULL)) fail_msg("defaults refused: %s", err_msg());
        size_t n = 0;
        const OptDef *t = opts_table(&n);
        /* the default of each flag, given explicitly, is accepted too */
        for (size_t i = 0; i < n; i++) {
            if (!(t[i].commands & ALL_CMDS[c]) || !t[i].def[0]) continue;
            char arg[256];
            snprintf(arg, sizeof arg, "--%s=%s", t[i].name, t[i].def);
            expect_accepted(ALL_CMDS[c], arg);
        }
        assert_int_equal(opts_finish(o), 0);
        opts_free(o);
    }
}

/* ---- ranges ---------------------------------------------------------------------------------- */

static void test_min_chunk_size_below_5mib_is_a_usage_error(void **state) {
    (void)state;
    expect_refused(CMD_SNAPSHOT, "--min-chunk-size=1", "--min-chunk-size",
                   "between 5242880 and 5368709120");
    expect_refused(CMD_RESTORE, "--min-chunk-size=5242879", "--min-chunk-size", "5242880");
    expect_accepted(CMD_RESTORE, "--min-chunk-size=5242880");
    expect_refused(CMD_SERVER, "--secondary-min-chunk-size=0", "--secondary-min-chunk-size",
                   "5242880");
}

static void test_zero_parallel_chunk_uploads_is_a_usage_error(void **state) {
    (void)state;
    expect_refused(CMD_SNAPSHOT, "--max-parallel-chunk-uploads=0", "--max-parallel-chunk-uploads",
                   "between 1 and 256");
    expect_refused(CMD_SNAPSHOT, "--max-parallel-chunk-uploads=-3", "between 1 and 256", NULL);
    expect_refused(CMD_SNAPSHOT, "--max-parallel-chunk-uploads=4294967297", "between 1 and 256",
                   NULL);
    expect_accepted(CMD_SNAPSHOT, "--max-parallel-chunk-uploads=1");
}

static void test_int_ranges_of_the_go_tool(void **state) {
    (void)state;
    expect_refused(CMD_SERVER, "--server-port=65536", "--server-port", "between 0 and 65535");
    expect_refused(CMD_SERVER, "--server-port=-1", "--server-port", "between 0 and 65535");
    expect_accepted(CMD_SERVER, "--server-port=0");
    expect_accepted(CMD_SERVER, "--server-port=65535");
    expect_refused(CMD_RESTORE, "--max-fetchers=0", "--max-fetchers", "between 1 and 256");
    expect_refused(CMD_RESTORE, "--max-fetchers=4294967297", "--max-fetchers", "between 1 and 256");
    expect_refused(CMD_RESTORE, "--max-fetchers=99999999999999999999", "--max-fetchers",
                   "invalid integer");
    expect_refused(CMD_RESTORE, "--embedded-etcd-quota-bytes=0", "--embedded-etcd-quota-bytes",
                   NULL);
    expect_refused(CMD_RESTORE, "--max-call-send-message-size=0", "--max-call-send-message-size",
                   NULL);
    expect_refused(CMD_SNAPSHOT, "--backoff-multiplier=0", "--backoff-multiplier",
                   "between 1 and 1000");
    expect_refused(CMD_SNAPSHOT, "--backoff-attempt-limit=0", "--backoff-attempt-limit", NULL);
    expect_refused(CMD_SNAPSHOT, "--max-backups=-1", "--max-backups", "between 0 and 1000000");
    expect_refused(CMD_SNAPSHOT, "--max-backups=2147483648", "--max-backups",
                   "between 0 and 1000000");
    expect_refused(CMD_SNAPSHOT, "--delta-snapshot-period=-5s", "--delta-snapshot-period",
                   "between 0 and 100 years");
    expect_refused(CMD_SNAPSHOT, "--garbage-collection-period=1000000h",
                   "--garbage-collection-period", "between 0 and 100 years");
    expect_refused(CMD_SNAPSHOT, "--max-changes-per-delta-snapshot=-1",
                   "--max-changes-per-delta-snapshot", NULL);
    expect_refused(CMD_RESTORE, "--revision=-5", "--revision", "at least 0");
    expect_refused(CMD_RESTORE, "--bump-revision=-1", "--bump-revision", NULL);
    /* an integer beyond int64 is malformed, not silently clamped */
    expect_refused(CMD_RESTORE, "--max-fetchers=99999999999999999999", "invalid integer", NULL);
}

static void test_duration_minimums_are_shown_as_durations(void **state) {
    (void)state;
    expect_refused(CMD_RESTORE, "--new-lease-ttl=999ms", "--new-lease-ttl", "at least 1s");
    expect_accepted(CMD_RESTORE, "--new-lease-ttl=1s");
    expect_refused(CMD_SNAPSHOT, "--etcd-connection-timeout=0s", "--etcd-connection-timeout",
                   "at least 1ms");
    expect_refused(CMD_SNAPSHOT, "--backoff-threshold-time=0", "--backoff-threshold-time", NULL);
}

/* ---- allowed values ------------------------------------------------------------------------ */

static void test_enum_flags_refuse_other_values_listing_the_allowed_ones(void **state) {
    (void)state;
    static const struct {
        unsigned cmd;
        const char *arg, *listed;
    } cases[] = {
        {CMD_SNAPSHOT, "--storage-provider=s3", "Local, S3, ABS, GCS, Swift, OSS, ECS, OCS"},
        {CMD_SERVER, "--secondary-storage-provider=Azure", "Local, S3"},
        {CMD_SNAPSHOT, "--compression-policy=bzip2", "gzip, zlib, lzw, zstd"},
        {CMD_SNAPSHOT, "--garbage-collection-policy=exponential", "Exponential, LimitBased"},
        {CMD_RESTORE, "--log-level=loud", "error, warn"},
        {CMD_RESTORE, "--log-format=yaml", "text, json"},
        {CMD_INITIALIZE, "--validation-mode=quick", "full, sanity"},
        {CMD_RESTORE, "--auto-compaction-mode=sometimes", "periodic, revision"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(cases[i].arg, "="), cases[i].arg);
        expect_refused(cases[i].cmd, cases[i].arg, flag, cases[i].listed);
        assert_non_null(strstr(err_msg(), "must be one of"));
    }
}

static void test_log_level_ignores_case_other_enums_do_not(void **state) {
    (void)state;
    expect_accepted(CMD_RESTORE, "--log-level=INFO");
    expect_accepted(CMD_RESTORE, "--log-level=Debug");
    expect_accepted(CMD_RESTORE, "--log-level=5");
    expect_accepted(CMD_RESTORE, "--storage-provider=");
    expect_accepted(CMD_RESTORE, "--storage-provider=Local");
    expect_refused(CMD_RESTORE, "--storage-provider=local", "--storage-provider", "Local");
}

/* ---- config file values ------------------------------------------------------------------- */

static void test_config_file_value_out_of_range_fails_at_finish(void **state) {
    (void)state;
    Opts *o = NULL;
    assert_int_equal(parse(CMD_SERVER, &o, NULL), 0);
    /* config_file.c takes an error from opts_set_from_config for "not this command": the range
     * must be checked later, by opts_finish */
    assert_int_equal(opts_set_from_config(o, "min-chunk-size", "1"), 0);
    assert_int_equal(opts_finish(o), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "--min-chunk-size (config file)"));
    assert_non_null(strstr(err_msg(), "between 5242880 and 5368709120"));
    opts_free(o);

    assert_int_equal(parse(CMD_SERVER, &o, NULL), 0);
    assert_int_equal(opts_set_from_config(o, "compression-policy", "rar"), 0);
    assert_int_equal(opts_finish(o), ERR_INVALID);
    assert_non_null(strstr(err_msg(), "--compression-policy (config file)"));
    assert_non_null(strstr(err_msg(), "gzip, zlib, lzw, zstd"));
    opts_free(o);

    /* the command line wins over the file, so a bad file value it overrides is not checked */
    assert_int_equal(parse(CMD_SERVER, &o, "--min-chunk-size=6000000", NULL), 0);
    assert_int_equal(opts_set_from_config(o, "min-chunk-size", "1"), 0);
    assert_int_equal(opt_int(o, "min-chunk-size"), 6000000);
    log_setup(LOG_ERROR, 0); /* the warning for --min-chunk-size is not what this tests */
    assert_int_equal(opts_finish(o), 0);
    opts_free(o);
}

/* ---- mistyped flags ------------------------------------------------------------------------- */

static void test_mistyped_flag_suggests_the_nearest_one(void **state) {
    (void)state;
    expect_refused(CMD_RESTORE, "--store-contianer=x",
                   "unknown flag: --store-contianer; did you mean --store-container?", NULL);
    expect_refused(CMD_SNAPSHOT, "--endpoint=http://x", "did you mean --endpoints?", NULL);
    expect_refused(CMD_RESTORE, "--data-dri", "did you mean --data-dir?", NULL);
    expect_refused(CMD_SERVER, "--snapstore-temp-dir=/tmp",
                   "did you mean --snapstore-temp-directory?", NULL);
    expect_refused(CMD_SNAPSHOT, "--garbage-colection-period=1m",
                   "did you mean --garbage-collection-period?", NULL);
    /* nothing close: no guess */
    expect_refused(CMD_RESTORE, "--no-such-flag", "unknown flag: --no-such-flag", NULL);
    assert_null(strstr(err_msg(), "did you mean"));
    expect_refused(CMD_RESTORE,
                   "--zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
                   "unknown flag", NULL);
}

static void test_flag_of_another_command_names_the_commands_taking_it(void **state) {
    (void)state;
    expect_refused(CMD_RESTORE, "--schedule=@hourly", "unknown flag: --schedule",
                   "a flag of snapshot, server, run only");
    expect_refused(CMD_SNAPSHOT, "--validation-mode=full", "a flag of initialize only", NULL);
}

/* ---- warnings for flags that do nothing -------------------------------------------------- */

static void test_unimplemented_and_ignored_flags_warn_once_at_start(void **state) {
    (void)state;
    setenv("ETCDBR_ETCD_BIN", "/usr/bin/etcd", 1);
    Opts *o = NULL;
    assert_int_equal(parse(CMD_SERVER, &o, "--enable-profiling", "--max-txn-ops=5",
                           "--store-prefix=p", "--enable-member-lease-renewal",
                           "--secondary-min-chunk-size=5242880", NULL),
                     0);
    assert_int_equal(opts_set_from_config(o, "use-etcd-wrapper", "true"), 0);
    assert_int_equal(opts_set_from_config(o, "full-snapshot-lease-name", "s"), 0);
    assert_int_equal(opts_set_from_config(o, "secondary-store-prefix", "s"), 0);
    log_setup(LOG_INFO, 0);
    Capture cap;
    capture_begin(&cap, 2);
    int rc = opts_finish(o);
    char *log = capture_end(&cap, 2);
    unsetenv("ETCDBR_ETCD_BIN");
    assert_int_equal(rc, 0);
    fprintf(stderr, "%s", log);
    /* implemented since the profiling documents (docs/server.md, "Profiling") */
    assert_null(strstr(log, "enable-profiling"));
    assert_non_null(strstr(log, "--max-txn-ops=5 (command line): ignored: restore builds the db "
                                "offline and starts no etcd"));
    assert_non_null(
        strstr(log, "--etcd-bin=/usr/bin/etcd (environment variable ETCDBR_ETCD_BIN): ignored"));
    /* one warning line names them all */
    const char *w = strstr(log, "flags without effect");
    assert_non_null(w);
    assert_null(strstr(w + 1, "flags without effect"));
    const char *eol = strchr(w, '\n');
    assert_true(eol && strstr(w, "--max-txn-ops") < eol && strstr(w, "--etcd-bin") < eol);
    /* implemented: the secondary store's flags, the Lease flags (docs/kubernetes.md) and
     * --use-etcd-wrapper (docs/cluster.md) */
    assert_null(strstr(log, "secondary"));
    assert_null(strstr(log, "lease"));
    assert_null(strstr(log, "use-etcd-wrapper"));
    /* implemented flags and flags left alone say nothing */
    assert_null(strstr(log, "store-prefix=p"));
    assert_null(strstr(log, "--k8s-heartbeat-duration"));
    assert_null(strstr(log, "--auto-compaction-mode"));
    int lines = 0;
    for (const char *p = log; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 1); /* one warning names them all */
    free(log);
    opts_free(o);
}

/* ---- --help and docs ------------------------------------------------------------------------ */

static const char *line_of(const char *text, const char *needle, char *out, size_t cap) {
    const char *p = strstr(text, needle);
    if (!p) return NULL;
    while (p > text && p[-1] != '\n')
        p--;
    size_t n = strcspn(p, "\n");
    snprintf(out, cap, "%.*s", (int)n, p);
    return out;
}

/* The whole entry of a flag in --help: its line and the continuation lines of its wrapped text
 * (those starting with more than 8 spaces; a flag's line starts with at most 6), joined by one
 * space. */
static const char *entry_of(const char *text, const char *needle, char *out, size_t cap) {
    char first[1024];
    if (!line_of(text, needle, first, sizeof first)) return NULL;
    size_t n = (size_t)snprintf(out, cap, "%s", first);
    const char *p = strstr(text, first) + strlen(first);
    while (*p == '\n' && strspn(p + 1, " ") > 8 && n < cap) {
        p++;
        p += strspn(p, " ");
        size_t len = strcspn(p, "\n");
        n += (size_t)snprintf(out + n, cap - n, " %.*s", (int)len, p);
        p += len;
    }
    return out;
}

/* opts_print_help(f, cmd) into a string (owned) */
static char *help_text(unsigned cmd) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    opts_print_help(f, cmd);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void test_help_shows_status_ranges_and_allowed_values(void **state) {
    (void)state;
    char *help = help_text(CMD_SERVER);
    char line[4096];
    assert_non_null(entry_of(help, "--enable-profiling ", line, sizeof line));
    assert_null(strstr(line, "not implemented"));
    assert_non_null(strstr(line, "/debug/pprof/"));
    assert_non_null(entry_of(help, "--secondary-min-chunk-size ", line, sizeof line));
    assert_null(strstr(line, "not implemented"));
    assert_non_null(strstr(line, "(between 5242880 and 5368709120)"));
    /* the S3 driver honours the object-store flags */
    assert_non_null(entry_of(help, "--min-chunk-size ", line, sizeof line));
    assert_null(strstr(line, "not implemented"));
    assert_non_null(strstr(line, "(between 5242880 and 5368709120)"));
    assert_non_null(entry_of(help, "--compression-policy ", line, sizeof line));
    assert_non_null(strstr(line, "(one of gzip, zlib, lzw, zstd)"));
    assert_null(strstr(line, "not implemented"));
    assert_non_null(entry_of(help, "--max-txn-ops ", line, sizeof line));
    assert_non_null(strstr(line, "(ignored: restore builds the db offline and starts no etcd)"));
    assert_non_null(entry_of(help, "--new-lease-ttl ", line, sizeof line));
    assert_non_null(strstr(line, "(at least 1s)"));
    free(help);
}

static void test_docs_flags_md_is_generated_from_the_table(void **state) {
    (void)state;
    const char *src = source_dir();
    if (!src) testutil_skip("ETCDBR_SOURCE_DIR is not set (run it through ctest)");
    char *gen = NULL;
    size_t gen_len = 0;
    FILE *f = open_memstream(&gen, &gen_len);
    assert_non_null(f);
    opts_write_markdown(f);
    assert_int_equal(fclose(f), 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/flags.md", src);
    if (access(path, R_OK) != 0)
        fail_msg("%s is missing: run `etcdbrctl __flags-md > docs/flags.md`", path);
    size_t len = 0;
    char *doc = (char *)read_file(path, &len);
    if (len != gen_len || memcmp(doc, gen, len) != 0) {
        size_t i = 0, line = 1;
        while (i < len && i < gen_len && doc[i] == gen[i])
            if (doc[i++] == '\n') line++;
        fail_msg("docs/flags.md is stale (first difference on line %zu): regenerate it with "
                 "`build/etcdbrctl __flags-md > docs/flags.md`",
                 line);
    }
    /* and it says what matters */
    assert_non_null(
        strstr(gen, "| `--min-chunk-size` | int | `5242880` | between `5242880` and `5368709120`"));
    /* every flag is implemented or ignored on purpose: the section says so */
    assert_null(strstr(gen, "**not implemented yet: ignored.**"));
    assert_non_null(strstr(gen, "## Not implemented yet\n\nAccepted for compatibility; their "
                                "features are not built yet.\n\nNone.\n"));
    free(doc);
    free(gen);
}

static void test_binary_exits_2_naming_the_flag(void **state) {
    (void)state;
    const char *bin = getenv("ETCDBR_BIN");
    if (!bin || !*bin) testutil_skip("ETCDBR_BIN is not set (run it through ctest)");
    char out[4096];
    assert_int_equal(sh(out, sizeof out, "'%s' restore --min-chunk-size=1 2>&1", bin), 2);
    assert_non_null(
        strstr(out, "--min-chunk-size: 1 is out of range: must be between 5242880 and 5368709120"));
    assert_int_equal(sh(out, sizeof out, "'%s' snapshot --store-contianer=b 2>&1", bin), 2);
    assert_non_null(strstr(out, "did you mean --store-container?"));
    char dir[] = "/tmp/etcdbr-test-opts-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cfg[256];
    snprintf(cfg, sizeof cfg, "%s/c.yaml", dir);
    const char *yaml = "snapstoreConfig: {maxParallelChunkUploads: 0}\n";
    write_file(cfg, yaml, strlen(yaml));
    assert_int_equal(sh(out, sizeof out, "'%s' server --config-file='%s' 2>&1", bin, cfg), 2);
    assert_non_null(strstr(out, "--max-parallel-chunk-uploads (config file): 0 is out of range"));
    unlink(cfg);
    rmdir(dir);
    /* the generator the docs test names */
    assert_int_equal(sh(out, sizeof out, "'%s' __flags-md | head -1", bin), 0);
    assert_string_equal(out, "# Flags reference\n");
}

/* ---- every active flag is read; no unimplemented flag is ---------------------------------- */

static char *g_sources; /* all of src/ except the option table and the config-file mapping */
static size_t g_sources_len;

static int collect_source(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    size_t n = strlen(path);
    if (type != FTW_F || n < 2 || strcmp(path + n - 2, ".c")) return 0;
    if (strstr(path, "/cmd/opts.c") || strstr(path, "/cmd/config_file.c")) return 0;
    size_t len = 0;
    char *text = (char *)read_file(path, &len);
    g_sources = realloc(g_sources, g_sources_len + len + 1);
    memcpy(g_sources + g_sources_len, text, len);
    g_sources_len += len;
    g_sources[g_sources_len] = '\0';
    free(text);
    return 0;
}

/* 1 when text reads the typed field of flag name through opts_values(x)->field (or ->x_ms for a
 * duration) or opts_given(x)->field, not as the prefix of a longer name. */
static int reads_field(const char *text, const char *name, OptType type) {
    char pat[160];
    size_t k =
        (size_t)snprintf(pat, sizeof pat, ")->%s%s", name, type == OPT_DURATION ? "_ms" : "");
    for (size_t i = 3; i < k; i++)
        if (pat[i] == '-') pat[i] = '_';
    for (const char *p = strstr(text, pat); p; p = strstr(p + 1, pat)) {
        char c = p[k];
        if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
            continue;
        const char *open = p;
        while (open > text && open[-1] != '(' && p - open < 64)
            open--;
        if (open - text >= 12 &&
            (strncmp(open - 12, "opts_values(", 12) == 0 ||
             (open - text >= 11 && strncmp(open - 11, "opts_given(", 11) == 0)))
            return 1;
    }
    return 0;
}

static void test_active_flags_are_read_and_unimplemented_ones_are_not(void **state) {
    (void)state;
    const char *src = source_dir();
    if (!src) testutil_skip("ETCDBR_SOURCE_DIR is not set (run it through ctest)");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/src", src);
    assert_int_equal(nftw(dir, collect_source, 16, FTW_PHYS), 0);
    assert_non_null(g_sources);
    size_t n = 0;
    const OptDef *t = opts_table(&n);
    for (size_t i = 0; i < n; i++) {
        char quoted[128];
        snprintf(quoted, sizeof quoted, "\"%s\"", t[i].name);
        int read =
            strstr(g_sources, quoted) != NULL || reads_field(g_sources, t[i].name, t[i].type);
        if (t[i].support == OPT_ACTIVE && !read)
            fail_msg("--%s is marked active but no code reads it: implement it or mark it "
                     "UNIMPLEMENTED in src/cmd/opts_table.h",
                     t[i].name);
        if (t[i].support != OPT_ACTIVE && read)
            fail_msg("--%s is read by code but marked %s: update its entry in src/cmd/opts_table.h",
                     t[i].name, t[i].support == OPT_IGNORED ? "IGNORED" : "UNIMPLEMENTED");
    }
    free(g_sources);
    g_sources = NULL;
    g_sources_len = 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_entries_are_consistent),
        cmocka_unit_test(test_every_default_passes_its_own_checks),
        cmocka_unit_test(test_min_chunk_size_below_5mib_is_a_usage_error),
        cmocka_unit_test(test_zero_parallel_chunk_uploads_is_a_usage_error),
        cmocka_unit_test(test_int_ranges_of_the_go_tool),
        cmocka_unit_test(test_duration_minimums_are_shown_as_durations),
        cmocka_unit_test(test_enum_flags_refuse_other_values_listing_the_allowed_ones),
        cmocka_unit_test(test_log_level_ignores_case_other_enums_do_not),
        cmocka_unit_test(test_config_file_value_out_of_range_fails_at_finish),
        cmocka_unit_test(test_mistyped_flag_suggests_the_nearest_one),
        cmocka_unit_test(test_flag_of_another_command_names_the_commands_taking_it),
        cmocka_unit_test(test_unimplemented_and_ignored_flags_warn_once_at_start),
        cmocka_unit_test(test_help_shows_status_ranges_and_allowed_values),
        cmocka_unit_test(test_docs_flags_md_is_generated_from_the_table),
        cmocka_unit_test(test_binary_exits_2_naming_the_flag),
        cmocka_unit_test(test_active_flags_are_read_and_unimplemented_ones_are_not),
    };
    return testutil_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
