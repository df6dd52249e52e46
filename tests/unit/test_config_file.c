/* test_config_file: the --config-file YAML (the Go tool's BackupRestoreComponentConfig) mapped
 * onto our options: every key of the table, precedence below the command line and environment,
 * Go-style case-insensitive keys, warnings for unknown keys, and ERR_INVALID with a position for
 * malformed files, wrong types and the size, depth and alias limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmd/config_file.h"
#include "cmd/opts.h"
#include "common/err.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static Opts *new_opts(unsigned cmd, int argc, char **argv) {
    Opts *o = NULL;
    int help = 0;
    assert_int_equal(opts_parse(cmd, argc, argv, &o, &help), 0);
    return o;
}

static int apply(Opts *o, const char *yaml, ConfigFileStats *st) {
    return config_file_apply_buffer(o, yaml, strlen(yaml), "test.yaml", st);
}

/* Captures what is written to stderr (the log) between begin and end. */
typedef struct {
    int saved;
    FILE *f;
} Capture;

static void capture_begin(Capture *c) {
    fflush(stderr);
    c->f = tmpfile();
    assert_non_null(c->f);
    c->saved = dup(2);
    assert_true(c->saved >= 0);
    assert_true(dup2(fileno(c->f), 2) >= 0);
}

/* Returns the captured text (caller frees). */
static char *capture_end(Capture *c) {
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    long n = ftell(c->f);
    char *s = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    rewind(c->f);
    if (n > 0) assert_int_equal(fread(s, 1, (size_t)n, c->f), (size_t)n);
    fclose(c->f);
    return s;
}

/* Asserts the current error message starts "test.yaml:<line>:<col>: " (or name). */
static void assert_positioned(const char *name) {
    char pattern[256];
    snprintf(pattern, sizeof pattern, "^%s:[0-9]+:[0-9]+: ", name);
    regex_t re;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    if (regexec(&re, err_msg(), 0, NULL, 0) != 0) fail_msg("no position in: %s", err_msg());
    regfree(&re);
}

static void assert_invalid_at(const char *yaml, const char *want_in_msg, const char *line_col) {
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(apply(o, yaml, NULL), ERR_INVALID);
    assert_positioned("test\\.yaml");
    if (want_in_msg && !strstr(err_msg(), want_in_msg))
        fail_msg("\"%s\" not in: %s", want_in_msg, err_msg());
    if (line_col) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "test.yaml:%s: ", line_col);
        if (strncmp(err_msg(), prefix, strlen(prefix)) != 0)
            fail_msg("expected position %s in: %s", line_col, err_msg());
    }
    opts_free(o);
}

static const OptDef *find_def(const char *name) {
    size_t n;
    const OptDef *t = opts_table(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

/* ---- the Go tool's shipped example -------------------------------------------------------- */

static const char go_example[] = "etcdConnectionConfig:\n"
                                 "  endpoints:\n"
                                 "  - \"http://localhost:2379\"\n"
                                 "  # username: admin\n"
                                 "  connectionTimeout: 10s\n"
                                 "  snapshotTimeout: 8m\n"
                                 "  defragTimeout: 8m\n"
                                 "\n"
                                 "serverConfig:\n"
                                 "  port: 8080\n"
                                 "  # enableProfiling: true\n"
                                 "\n"
                                 "snapshotterConfig:\n"
                                 "  schedule: \"0 */1 * * *\"\n"
                                 "  deltaSnapshotPeriod: 20s\n"
                                 "\n"
                                 "snapstoreConfig:\n"
                                 "  provider: \"Local\"\n"
                                 "  #container: \"backup\"\n"
                                 "  maxParallelChunkUploads: 5\n"
                                 "  tempDir: \"/tmp\"\n"
                                 "\n"
                                 "restorationConfig:\n"
                                 "  initialCluster: \"default=http://localhost:2380\"\n"
                                 "  initialClusterToken: \"etcd-cluster\"\n"
                                 "  restoreDataDir: \"default.etcd\"\n"
                                 "  initialAdvertisePeerURLs:\n"
                                 "    - \"http://localhost:2380\"\n"
                                 "  name: \"default\"\n"
                                 "  skipHashCheck: false\n"
                                 "  maxFetchers: 6\n"
                                 "  embeddedEtcdQuotaBytes: 8589934592\n"
                                 "\n"
                                 "defragmentationSchedule: \"0 0 */3 * *\"";

static void test_config_file_applies_go_shipped_example(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    ConfigFileStats st;
    Capture cap;
    capture_begin(&cap);
    int rc = apply(o, go_example, &st);
    char *log = capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_int_equal(st.applied, 18);
    assert_int_equal(st.overridden, 0);
    assert_int_equal(st.ignored, 1); /* restoreDataDir */
    assert_non_null(strstr(log, "unknown key restorationConfig.restoreDataDir"));
    size_t n;
    const char *const *eps = opt_list(o, "endpoints", &n);
    assert_int_equal(n, 1);
    assert_string_equal(eps[0], "http://localhost:2379");
    assert_int_equal(opt_duration_ms(o, "etcd-connection-timeout"), 10000);
    assert_int_equal(opt_duration_ms(o, "etcd-snapshot-timeout"), 480000);
    assert_int_equal(opt_duration_ms(o, "etcd-defrag-timeout"), 480000);
    assert_int_equal(opt_int(o, "server-port"), 8080);
    assert_string_equal(opt_str(o, "schedule"), "0 */1 * * *");
    assert_int_equal(opt_duration_ms(o, "delta-snapshot-period"), 20000);
    assert_string_equal(opt_str(o, "storage-provider"), "Local");
    assert_int_equal(opt_int(o, "max-parallel-chunk-uploads"), 5);
    assert_string_equal(opt_str(o, "snapstore-temp-directory"), "/tmp");
    assert_string_equal(opt_str(o, "initial-cluster"), "default=http://localhost:2380");
    assert_string_equal(opt_str(o, "initial-cluster-token"), "etcd-cluster");
    const char *const *peers = opt_list(o, "initial-advertise-peer-urls", &n);
    assert_int_equal(n, 1);
    assert_string_equal(peers[0], "http://localhost:2380");
    assert_string_equal(opt_str(o, "name"), "default");
    assert_false(opt_bool(o, "skip-hash-check"));
    assert_int_equal(opt_int(o, "max-fetchers"), 6);
    assert_int_equal(opt_int(o, "embedded-etcd-quota-bytes"), 8589934592LL);
    assert_string_equal(opt_str(o, "defragmentation-schedule"), "0 0 */3 * *");
    /* the quirk key maps to nothing: --data-dir keeps its default */
    assert_string_equal(opt_str(o, "data-dir"), "default.etcd");
    free(log);
    opts_free(o);
}

/* ---- every key of the table -------------------------------------------------------------- */

/* Builds a YAML document that sets every leaf of the key table to a non-default value. */
static char *every_key_yaml(void) {
    size_t n;
    const ConfigFileKey *k = config_file_keys(&n);
    size_t cap = 64 * 1024, off = 0;
    char *y = malloc(cap);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++) {
        int depth = 0;
        for (const char *p = k[i].path; *p; p++)
            depth += *p == '.';
        const char *leaf = strrchr(k[i].path, '.');
        leaf = leaf ? leaf + 1 : k[i].path;
        off += (size_t)snprintf(y + off, cap - off, "%*s%s:", depth * 2, "", leaf);
        const char *opt = k[i].option ? k[i].option : "none";
        const OptDef *d = k[i].option ? find_def(k[i].option) : NULL;
        switch (k[i].kind) {
        case CONFIG_KIND_SECTION:
            off += (size_t)snprintf(y + off, cap - off, "\n");
            break;
        case CONFIG_KIND_STRING:
            off += (size_t)snprintf(y + off, cap - off, " \"s-%s\"\n", opt);
            break;
        case CONFIG_KIND_BOOL:
            off += (size_t)snprintf(y + off, cap - off, " %s\n",
                                    d && !strcmp(d->def, "true") ? "false" : "true");
            break;
        case CONFIG_KIND_INT:
        case CONFIG_KIND_UINT:
            off += (size_t)snprintf(y + off, cap - off, " 4242\n");
            break;
        case CONFIG_KIND_DURATION:
            off += (size_t)snprintf(y + off, cap - off, " 7m\n");
            break;
        case CONFIG_KIND_LIST:
            off += (size_t)snprintf(y + off, cap - off, " [\"a-%s\", \"b-%s\"]\n", opt, opt);
            break;
        }
        assert_true(off < cap);
    }
    return y;
}

static void test_config_file_applies_every_mapped_key(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    char *y = every_key_yaml();
    ConfigFileStats st;
    Capture cap;
    capture_begin(&cap);
    int rc = apply(o, y, &st);
    char *log = capture_end(&cap);
    if (rc) fail_msg("%s\n%s", err_msg(), y);

    size_t n, leaves = 0, unmapped = 0;
    const ConfigFileKey *k = config_file_keys(&n);
    for (size_t i = 0; i < n; i++) {
        if (k[i].kind == CONFIG_KIND_SECTION) continue;
        if (!k[i].option) {
            unmapped++;
            assert_non_null(strstr(log, k[i].path));
            continue;
        }
        leaves++;
        const OptDef *d = find_def(k[i].option);
        char want[128];
        size_t nl;
        const char *const *items;
        switch (k[i].kind) {
        case CONFIG_KIND_STRING:
            snprintf(want, sizeof want, "s-%s", k[i].option);
            assert_string_equal(opt_str(o, k[i].option), want);
            break;
        case CONFIG_KIND_BOOL:
            assert_int_equal(opt_bool(o, k[i].option), strcmp(d->def, "true") != 0);
            break;
        case CONFIG_KIND_INT:
        case CONFIG_KIND_UINT:
            assert_int_equal(opt_int(o, k[i].option), 4242);
            break;
        case CONFIG_KIND_DURATION:
            assert_int_equal(opt_duration_ms(o, k[i].option), 7 * 60 * 1000);
            break;
        case CONFIG_KIND_LIST:
            items = opt_list(o, k[i].option, &nl);
            assert_int_equal(nl, 2);
            snprintf(want, sizeof want, "a-%s", k[i].option);
            assert_string_equal(items[0], want);
            snprintf(want, sizeof want, "b-%s", k[i].option);
            assert_string_equal(items[1], want);
            break;
        default:
            break;
        }
    }
    assert_int_equal(st.applied, leaves);
    assert_int_equal(st.ignored, unmapped);
    assert_int_equal(st.overridden, 0);
    free(log);
    free(y);
    opts_free(o);
}

/* Each mapped option exists for server with the type the key's YAML kind produces. */
static void test_config_file_key_kinds_match_option_types(void **state) {
    (void)state;
    size_t n;
    const ConfigFileKey *k = config_file_keys(&n);
    for (size_t i = 0; i < n; i++) {
        if (!k[i].option) continue;
        const OptDef *d = find_def(k[i].option);
        if (!d) fail_msg("%s maps to --%s, which is not in the table", k[i].path, k[i].option);
        if (!(d->commands & CMD_SERVER)) fail_msg("--%s is not a server option", d->name);
        OptType want = k[i].kind == CONFIG_KIND_BOOL       ? OPT_BOOL
                       : k[i].kind == CONFIG_KIND_DURATION ? OPT_DURATION
                       : k[i].kind == CONFIG_KIND_LIST     ? OPT_LIST
                       : k[i].kind == CONFIG_KIND_STRING   ? OPT_STRING
                                                           : OPT_INT;
        if (d->type != want) fail_msg("%s: kind does not match --%s", k[i].path, d->name);
    }
}

/* ---- precedence ---------------------------------------------------------------------------- */

static void test_config_file_command_line_wins_over_file(void **state) {
    (void)state;
    char *argv[] = {"--schedule", "*/5 * * * *", "--delta-snapshot-period=1m"};
    Opts *o = new_opts(CMD_SERVER, 3, argv);
    ConfigFileStats st;
    assert_int_equal(apply(o,
                           "snapshotterConfig:\n"
                           "  schedule: \"0 1 * * *\"\n"
                           "  deltaSnapshotPeriod: 5s\n"
                           "  maxBackups: 3\n",
                           &st),
                     0);
    assert_string_equal(opt_str(o, "schedule"), "*/5 * * * *");
    assert_int_equal(opt_duration_ms(o, "delta-snapshot-period"), 60000);
    assert_int_equal(opt_int(o, "max-backups"), 3);
    assert_int_equal(st.overridden, 2);
    assert_int_equal(st.applied, 1);
    opts_free(o);
}

static void test_config_file_environment_wins_over_file(void **state) {
    (void)state;
    setenv("STORAGE_CONTAINER", "from-env", 1);
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    unsetenv("STORAGE_CONTAINER");
    ConfigFileStats st;
    assert_int_equal(apply(o, "snapstoreConfig:\n  container: from-file\n  prefix: p\n", &st), 0);
    assert_string_equal(opt_str(o, "store-container"), "from-env");
    assert_string_equal(opt_str(o, "store-prefix"), "p");
    assert_int_equal(st.overridden, 1);
    opts_free(o);
}

static void test_config_file_overrides_defaults_only(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(apply(o, "compressionConfig: {enabled: false, policy: zlib}\n", NULL), 0);
    assert_false(opt_bool(o, "compress-snapshots"));
    assert_string_equal(opt_str(o, "compression-policy"), "zlib");
    assert_false(opt_is_set(o, "compression-policy")); /* not "given on the command line" */
    opts_free(o);
}

/* ---- keys ---------------------------------------------------------------------------------- */

static void test_config_file_unknown_keys_warn_and_succeed(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    ConfigFileStats st;
    Capture cap;
    capture_begin(&cap);
    int rc = apply(o,
                   "someFutureSection:\n"
                   "  deep: {nested: [1, 2]}\n"
                   "snapshotterConfig:\n"
                   "  schedule: \"1 * * * *\"\n"
                   "  fooBar: 3\n"
                   "snapstoreConfig:\n"
                   "  envPrefix: SECONDARY\n",
                   &st);
    char *log = capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_int_equal(st.ignored, 3);
    assert_int_equal(st.applied, 1);
    assert_non_null(strstr(log, "level=warning"));
    assert_non_null(strstr(log, "unknown key someFutureSection"));
    assert_non_null(strstr(log, "test.yaml:5:3: unknown key snapshotterConfig.fooBar"));
    assert_non_null(strstr(log, "snapstoreConfig.envPrefix has no etcdbr option"));
    assert_string_equal(opt_str(o, "schedule"), "1 * * * *");
    free(log);
    opts_free(o);
}

static void test_config_file_restore_data_dir_quirk_is_unknown(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    ConfigFileStats st;
    Capture cap;
    capture_begin(&cap);
    int rc = apply(o, "restorationConfig:\n  restoreDataDir: /var/etcd/data\n", &st);
    char *log = capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_int_equal(st.ignored, 1);
    assert_int_equal(st.applied, 0);
    assert_non_null(strstr(log, "unknown key restorationConfig.restoreDataDir"));
    assert_non_null(strstr(log, "dataDir"));
    assert_string_equal(opt_str(o, "data-dir"), "default.etcd");
    free(log);
    /* the real key does set it */
    assert_int_equal(apply(o, "restorationConfig:\n  dataDir: /var/etcd/data\n", NULL), 0);
    assert_string_equal(opt_str(o, "data-dir"), "/var/etcd/data");
    opts_free(o);
}

static void test_config_file_keys_match_case_insensitively(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    ConfigFileStats st;
    assert_int_equal(apply(o,
                           "SnapshotterConfig:\n"
                           "  deltasnapshotperiod: 45s\n"
                           "  SCHEDULE: \"2 * * * *\"\n"
                           "restorationconfig:\n"
                           "  maxtxnops: 99\n"
                           "  MAXREQUESTBYTES: 1024\n"
                           "SERVERCONFIG:\n"
                           "  Server-Cert: /c.pem\n"
                           "secondarysnapstoreconfig:\n"
                           "  storeconfig: {Provider: Local}\n"
                           /* Go's folding: U+212A KELVIN SIGN is 'k', U+017F LONG S is 's' */
                           "\xc5\xbfnapstoreConfig: {\xe2\x84\xaa"
                           "eyFile: x}\n"
                           "etcdConnectionConfig: {\xe2\x84\xaa"
                           "eyFile: /k.pem}\n",
                           &st),
                     0);
    assert_int_equal(opt_duration_ms(o, "delta-snapshot-period"), 45000);
    assert_string_equal(opt_str(o, "schedule"), "2 * * * *");
    assert_int_equal(opt_int(o, "max-txn-ops"), 99);
    assert_int_equal(opt_int(o, "max-request-bytes"), 1024);
    assert_string_equal(opt_str(o, "server-cert"), "/c.pem");
    assert_string_equal(opt_str(o, "secondary-storage-provider"), "Local");
    assert_string_equal(opt_str(o, "key"), "/k.pem");
    assert_int_equal(st.ignored, 1); /* snapstoreConfig has no keyFile */
    opts_free(o);
}

static void test_config_file_endpoint_lists(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(apply(o,
                           "etcdConnectionConfig:\n"
                           "  endpoints:\n"
                           "    - https://etcd-0:2379\n"
                           "    - 'https://etcd-1:2379'\n"
                           "    - \"https://etcd-2:2379\"\n"
                           "  serviceEndpoints: [https://etcd-client:2379]\n",
                           NULL),
                     0);
    size_t n;
    const char *const *eps = opt_list(o, "endpoints", &n);
    assert_int_equal(n, 3);
    assert_string_equal(eps[0], "https://etcd-0:2379");
    assert_string_equal(eps[1], "https://etcd-1:2379");
    assert_string_equal(eps[2], "https://etcd-2:2379");
    eps = opt_list(o, "service-endpoints", &n);
    assert_int_equal(n, 1);
    assert_string_equal(eps[0], "https://etcd-client:2379");
    /* a second file replaces the list instead of appending */
    assert_int_equal(apply(o, "etcdConnectionConfig: {endpoints: [http://x:2379]}\n", NULL), 0);
    eps = opt_list(o, "endpoints", &n);
    assert_int_equal(n, 1);
    assert_string_equal(eps[0], "http://x:2379");
    opts_free(o);
}

static void test_config_file_options_of_other_commands_are_skipped(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_RESTORE, 0, NULL);
    ConfigFileStats st;
    Capture cap;
    capture_begin(&cap);
    int rc = apply(o,
                   "snapshotterConfig: {schedule: \"1 * * * *\"}\n"
                   "restorationConfig: {dataDir: /data, maxFetchers: 2}\n",
                   &st);
    char *log = capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_int_equal(st.applied, 2);
    assert_int_equal(st.ignored, 1);
    assert_non_null(strstr(log, "snapshotterConfig.schedule (--schedule) does not apply"));
    assert_string_equal(opt_str(o, "data-dir"), "/data");
    assert_int_equal(opt_int(o, "max-fetchers"), 2);
    free(log);
    opts_free(o);
}

/* ---- values -------------------------------------------------------------------------------- */

static void test_config_file_scalar_conversions(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(apply(o,
                           "snapshotterConfig:\n"
                           "  maxBackups: 0x10\n"
                           "  deltaSnapshotMemoryLimit: 1_048_576\n"
                           "  deltaSnapshotRetentionPeriod: 0\n"
                           "  garbageCollectionPeriod: \"1h30m\"\n"
                           "snapstoreConfig: {minChunkSize: 010, maxParallelChunkUploads: 09}\n"
                           "compressionConfig: {enabled: off}\n"
                           "serverConfig: {enableProfiling: yes, port: +9090}\n"
                           "restorationConfig: {name: 12, autoCompactionRetention: 1h}\n"
                           "useEtcdWrapper: True\n",
                           NULL),
                     0);
    assert_int_equal(opt_int(o, "max-backups"), 16);
    assert_int_equal(opt_int(o, "delta-snapshot-memory-limit"), 1048576);
    assert_int_equal(opt_duration_ms(o, "delta-snapshot-retention-period"), 0);
    assert_int_equal(opt_duration_ms(o, "garbage-collection-period"), 5400000);
    assert_int_equal(opt_int(o, "min-chunk-size"), 8); /* YAML 1.1 octal, as the Go tool */
    assert_int_equal(opt_int(o, "max-parallel-chunk-uploads"), 9);
    assert_false(opt_bool(o, "compress-snapshots"));
    assert_true(opt_bool(o, "enable-profiling"));
    assert_int_equal(opt_int(o, "server-port"), 9090);
    assert_string_equal(opt_str(o, "name"), "12");
    assert_string_equal(opt_str(o, "auto-compaction-retention"), "1h");
    assert_true(opt_bool(o, "use-etcd-wrapper"));
    opts_free(o);
}

static void test_config_file_nulls_keep_defaults(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    ConfigFileStats st;
    assert_int_equal(apply(o,
                           "snapshotterConfig:\n"
                           "  schedule:\n"
                           "  deltaSnapshotPeriod: ~\n"
                           "etcdConnectionConfig: null\n"
                           "restorationConfig: {initialAdvertisePeerURLs: NULL}\n",
                           &st),
                     0);
    assert_int_equal(st.applied, 0);
    assert_string_equal(opt_str(o, "schedule"), "0 */1 * * *");
    assert_int_equal(opt_duration_ms(o, "delta-snapshot-period"), 20000);
    size_t n;
    opt_list(o, "initial-advertise-peer-urls", &n);
    assert_int_equal(n, 1);
    assert_int_equal(apply(o, "", NULL), 0);
    assert_int_equal(apply(o, "# only a comment\n", NULL), 0);
    assert_int_equal(apply(o, "---\n...\n", NULL), 0);
    opts_free(o);
}

static void test_config_file_aliases_and_merge_keys(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(apply(o,
                           "x-store: &store\n"
                           "  provider: S3\n"
                           "  prefix: base\n"
                           "snapstoreConfig:\n"
                           "  <<: *store\n"
                           "  prefix: own\n"
                           "secondarySnapstoreConfig:\n"
                           "  StoreConfig: *store\n"
                           "etcdConnectionConfig:\n"
                           "  endpoints: &eps [http://a:2379]\n"
                           "  serviceEndpoints: *eps\n",
                           NULL),
                     0);
    assert_string_equal(opt_str(o, "storage-provider"), "S3");
    assert_string_equal(opt_str(o, "store-prefix"), "own"); /* explicit key beats merged */
    assert_string_equal(opt_str(o, "secondary-storage-provider"), "S3");
    assert_string_equal(opt_str(o, "secondary-store-prefix"), "base");
    size_t n;
    assert_string_equal(opt_list(o, "service-endpoints", &n)[0], "http://a:2379");
    opts_free(o);
}

static void test_config_file_only_first_document(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(apply(o,
                           "snapshotterConfig: {schedule: \"3 * * * *\"}\n"
                           "---\n"
                           "snapshotterConfig: {schedule: [not: valid\n",
                           NULL),
                     0);
    assert_string_equal(opt_str(o, "schedule"), "3 * * * *");
    opts_free(o);
}

/* ---- errors -------------------------------------------------------------------------------- */

static void test_config_file_wrong_types_are_invalid(void **state) {
    (void)state;
    assert_invalid_at("snapshotterConfig:\n  schedule:\n    every: hour\n",
                      "snapshotterConfig.schedule: expected a string, found a mapping", "3:5");
    assert_invalid_at("snapshotterConfig: every hour\n",
                      "snapshotterConfig: expected a mapping, found a scalar", "1:20");
    assert_invalid_at("etcdConnectionConfig:\n  endpoints: http://a:2379\n",
                      "expected a list of strings", "2:14");
    assert_invalid_at("etcdConnectionConfig:\n  endpoints: [[a]]\n", "list items must be strings",
                      "2:15");
    assert_invalid_at("etcdConnectionConfig:\n  endpoints: [\"a,b\"]\n", "no comma", NULL);
    assert_invalid_at("compressionConfig:\n  enabled: \"true\"\n", "expected a boolean", "2:12");
    assert_invalid_at("compressionConfig:\n  enabled: maybe\n", "expected a boolean", NULL);
    assert_invalid_at("snapshotterConfig:\n  maxBackups: \"7\"\n", "integer", "2:15");
    assert_invalid_at("snapshotterConfig:\n  maxBackups: -1\n", "non-negative integer", NULL);
    assert_invalid_at("snapshotterConfig:\n  maxBackups: 7.5\n", "integer", NULL);
    assert_invalid_at("serverConfig: {port: 99999999999999999999}\n", "integer", NULL);
    assert_invalid_at("[1, 2]\n", "the top level must be a mapping", "1:1");
    assert_invalid_at("just text\n", "the top level must be a mapping", "1:1");
    assert_invalid_at("? [a, b]\n: c\n", "mapping keys must be scalars", NULL);
    assert_invalid_at("snapstoreConfig: {<<: 5}\n", "merge key", NULL);
}

static void test_config_file_bad_durations_are_invalid(void **state) {
    (void)state;
    assert_invalid_at("snapshotterConfig:\n  deltaSnapshotPeriod: soon\n",
                      "snapshotterConfig.deltaSnapshotPeriod: expected a duration", "2:24");
    assert_invalid_at("snapshotterConfig:\n  deltaSnapshotPeriod: 20\n", "needs a unit", "2:24");
    /* Go's time.Duration JSON form (nanoseconds) is refused by wrappers.Duration too */
    assert_invalid_at("etcdConnectionConfig: {connectionTimeout: 30000000000}\n", "bare number",
                      NULL);
    assert_invalid_at("exponentialBackoffConfig: {thresholdTime: [1s]}\n", "found a list", NULL);
}

static void test_config_file_invalid_yaml_is_invalid(void **state) {
    (void)state;
    assert_invalid_at("snapshotterConfig:\n  schedule: \"0 * * * *\n", "invalid YAML", NULL);
    assert_invalid_at("a: b\n c: d\n", "invalid YAML", "2:3");
    assert_invalid_at("a: [1, 2\n", "invalid YAML", NULL);
    assert_invalid_at("a: *nowhere\n", "invalid YAML", NULL); /* undefined alias */
    assert_invalid_at("a: b\n\t- c\n", "invalid YAML", NULL);
    assert_invalid_at("a: \"\\xff\\x00\"\nb: \xff\xfe\n", "invalid YAML", "2:4");
}

static void test_config_file_limits(void **state) {
    (void)state;
    /* 17 nested mappings */
    char deep[256] = "";
    for (int i = 0; i < 17; i++)
        strcat(deep, "{a: ");
    strcat(deep, "1");
    for (int i = 0; i < 17; i++)
        strcat(deep, "}");
    assert_invalid_at(deep, "nesting deeper than 16", "1:65");
    /* 16 levels are fine */
    char ok[256] = "";
    for (int i = 0; i < 16; i++)
        strcat(ok, "{a: ");
    strcat(ok, "1");
    for (int i = 0; i < 16; i++)
        strcat(ok, "}");
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    Capture cap;
    capture_begin(&cap);
    int rc = apply(o, ok, NULL);
    free(capture_end(&cap));
    assert_int_equal(rc, 0);
    opts_free(o);
    /* an alias bomb, and a self-referencing alias through merge keys */
    assert_invalid_at("a: &a [x, x, x, x, x, x, x, x]\n"
                      "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                      "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                      "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
                      "more than 64 aliases", "5:69");
    assert_invalid_at("snapstoreConfig: &s {<<: *s}\n", "nesting deeper than 16", NULL);
    assert_invalid_at("m0: &m0 {prefix: p}\n"
                      "m1: &m1 {<<: [*m0, *m0, *m0, *m0, *m0, *m0, *m0, *m0]}\n"
                      "m2: &m2 {<<: [*m1, *m1, *m1, *m1, *m1, *m1, *m1, *m1]}\n"
                      "m3: &m3 {<<: [*m2, *m2, *m2, *m2, *m2, *m2, *m2, *m2]}\n"
                      "m4: &m4 {<<: [*m3, *m3, *m3, *m3, *m3, *m3, *m3, *m3]}\n"
                      "snapstoreConfig: {<<: [*m4, *m4, *m4, *m4, *m4, *m4, *m4, *m4]}\n",
                      "aliases expand to too many entries", NULL);
}

static void test_config_file_two_mib_file_is_invalid(void **state) {
    (void)state;
    char path[] = "/tmp/test_config_file_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char line[] = "# padding padding padding padding padding padding padding pad\n";
    const char head[] = "snapshotterConfig: {schedule: \"9 * * * *\"}\n";
    assert_int_equal(write(fd, head, sizeof head - 1), (ssize_t)(sizeof head - 1));
    for (size_t done = 0; done < 2u * 1024 * 1024; done += sizeof line - 1)
        assert_int_equal(write(fd, line, sizeof line - 1), (ssize_t)(sizeof line - 1));
    close(fd);
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(config_file_apply(o, path), ERR_INVALID);
    char name[64];
    snprintf(name, sizeof name, "%s", path);
    assert_positioned(name);
    assert_non_null(strstr(err_msg(), "larger than"));
    assert_string_equal(opt_str(o, "schedule"), "0 */1 * * *");
    unlink(path);
    opts_free(o);
}

static void test_config_file_reads_a_file(void **state) {
    (void)state;
    char path[] = "/tmp/test_config_file_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char y[] = "etcdConnectionConfig:\n  password: hunter2\n  username: root\n";
    assert_int_equal(write(fd, y, sizeof y - 1), (ssize_t)(sizeof y - 1));
    close(fd);
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(config_file_apply(o, path), 0);
    assert_string_equal(opt_str(o, "etcd-password"), "hunter2");
    assert_string_equal(opt_str(o, "etcd-username"), "root");
    unlink(path);
    assert_int_equal(config_file_apply(o, path), ERR_IO);
    assert_non_null(strstr(err_msg(), path));
    opts_free(o);
}

static void test_config_file_error_leaves_options_unchanged(void **state) {
    (void)state;
    Opts *o = new_opts(CMD_SERVER, 0, NULL);
    assert_int_equal(apply(o,
                           "snapshotterConfig:\n"
                           "  schedule: \"5 * * * *\"\n"
                           "  maxBackups: 3\n"
                           "  garbageCollectionPeriod: whenever\n",
                           NULL),
                     ERR_INVALID);
    assert_string_equal(opt_str(o, "schedule"), "0 */1 * * *");
    assert_int_equal(opt_int(o, "max-backups"), 7);
    opts_free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_file_applies_go_shipped_example),
        cmocka_unit_test(test_config_file_applies_every_mapped_key),
        cmocka_unit_test(test_config_file_key_kinds_match_option_types),
        cmocka_unit_test(test_config_file_command_line_wins_over_file),
        cmocka_unit_test(test_config_file_environment_wins_over_file),
        cmocka_unit_test(test_config_file_overrides_defaults_only),
        cmocka_unit_test(test_config_file_unknown_keys_warn_and_succeed),
        cmocka_unit_test(test_config_file_restore_data_dir_quirk_is_unknown),
        cmocka_unit_test(test_config_file_keys_match_case_insensitively),
        cmocka_unit_test(test_config_file_endpoint_lists),
        cmocka_unit_test(test_config_file_options_of_other_commands_are_skipped),
        cmocka_unit_test(test_config_file_scalar_conversions),
        cmocka_unit_test(test_config_file_nulls_keep_defaults),
        cmocka_unit_test(test_config_file_aliases_and_merge_keys),
        cmocka_unit_test(test_config_file_only_first_document),
        cmocka_unit_test(test_config_file_wrong_types_are_invalid),
        cmocka_unit_test(test_config_file_bad_durations_are_invalid),
        cmocka_unit_test(test_config_file_invalid_yaml_is_invalid),
        cmocka_unit_test(test_config_file_limits),
        cmocka_unit_test(test_config_file_two_mib_file_is_invalid),
        cmocka_unit_test(test_config_file_reads_a_file),
        cmocka_unit_test(test_config_file_error_leaves_options_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
