/* main: parses the command line and dispatches to a command; nothing else. */
#include "cmd.h"
#include "config_file.h"
#include "../common/err.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *name;
    unsigned bit;
    int (*run)(const Opts *o);
    const char *summary;
} Command;

static const Command commands[] = {
    {"snapshot", CMD_SNAPSHOT, cmd_snapshot,
     "take full snapshots on a schedule and delta snapshots of a running etcd"},
    {"restore", CMD_RESTORE, cmd_restore,
     "restore a data dir from the latest full snapshot and its deltas"},
    {"server", CMD_SERVER, cmd_server,
     "run beside an etcd member: HTTP API, data-dir initialization, snapshots while leader"},
    {"initialize", CMD_INITIALIZE, cmd_initialize,
     "validate the data dir and restore it from the store when needed"},
    {"compact", CMD_COMPACT, cmd_compact,
     "replace the latest full snapshot and its deltas by one new full snapshot, without etcd"},
    {"copy", CMD_COPY, cmd_copy, "copy backups from a source store (--source-*) into the store"},
    {"verify", CMD_VERIFY, cmd_verify,
     "check the latest set's objects (every set with --all-sets), hashes and contiguity without "
     "etcd; --restore-test also restores it and compares HashKV with the live cluster"},
    {"list", CMD_LIST, cmd_list, "list the store's backup sets (-o json for JSON)"},
    {"run", CMD_SERVER, NULL,
     "supervise etcd: initialize, start `-- etcd ...` as a child, back it up, restart it"},
};

/* run mode: etcd's own flags for the member (data dir, name, cluster) also configure the
 * restore, unless given to us explicitly with another value. */
static int take_etcd_flags(Opts *o, char **etcd_argv) {
    static const char *const names[] = {"data-dir", "name", "initial-cluster",
                                        "initial-cluster-token", "initial-advertise-peer-urls"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t len = strlen(names[k]);
        for (char **a = etcd_argv; *a; a++) {
            const char *v = NULL;
            const char *p = *a;
            if (p[0] == '-' && p[1] == '-')
                p += 2;
            else if (p[0] == '-')
                p += 1;
            else
                continue;
            if (strncmp(p, names[k], len)) continue;
            if (p[len] == '=')
                v = p + len + 1;
            else if (p[len] == '\0' && a[1])
                v = a[1];
            if (!v) continue;
            if (opt_is_set(o, names[k])) {
                if (strcmp(opt_str(o, names[k]), v)) {
                    fprintf(stderr, "Error: --%s is %s for etcdbrctl but %s for etcd\n", names[k],
                            opt_str(o, names[k]), v);
                    return EXIT_USAGE;
                }
            } else if (opts_set_from_config(o, names[k], v)) {
                fprintf(stderr, "Error: %s\n", err_msg());
                return EXIT_USAGE;
            }
        }
    }
    return EXIT_OK;
}

static void usage(FILE *f) {
    fprintf(f,
            "etcdbrctl %s: etcd backup and restore\n\nUsage:\n  etcdbrctl <command> [flags]\n\n"
            "Commands:\n",
            ETCDBR_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nFlags:\n  -v, --version   print the version\n  -h, --help      this help\n\n"
               "Use \"etcdbrctl <command> --help\" for a command's flags.\n"
               "Exit codes: 0 ok, 1 failed, 2 usage error, 3 data dir not empty, 4 no full "
               "snapshot to restore.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-v") || !strcmp(argv[1], "version")) {
        printf("etcdbrctl version %s\n", ETCDBR_VERSION);
        return EXIT_OK;
    }
    if (!strcmp(argv[1], "__flags-md")) { /* hidden: regenerates docs/flags.md */
        opts_write_markdown(stdout);
        return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        Opts *o = NULL;
        int help = 0;
        int n_own = argc - 2;
        char **etcd_argv = NULL;
        if (!strcmp(commands[i].name, "run")) {
            for (int k = 2; k < argc; k++) {
                if (!strcmp(argv[k], "--")) {
                    n_own = k - 2;
                    etcd_argv = argv + k + 1;
                    break;
                }
            }
        }
        if (opts_parse(commands[i].bit, n_own, argv + 2, &o, &help)) {
            fprintf(stderr, "Error: %s\nRun 'etcdbrctl %s --help' for usage.\n", err_msg(),
                    commands[i].name);
            return EXIT_USAGE;
        }
        if (help) {
            printf("%s\n\nUsage:\n  etcdbrctl %s [flags]%s\n\n", commands[i].summary,
                   commands[i].name, commands[i].run ? "" : " -- etcd [etcd flags]");
            opts_print_help(commands[i].bit);
            opts_free(o);
            return EXIT_OK;
        }
        int code = cmd_setup_logging(o);
        /* --config-file: below the command line and the environment (opts.h) */
        if (code == EXIT_OK && (commands[i].bit & CMD_SERVER) && *opts_values(o)->config_file &&
            config_file_apply(o, opts_values(o)->config_file)) {
            fprintf(stderr, "Error: %s\n", err_msg());
            code = EXIT_USAGE;
        }
        /* config-file values against the table; warnings for flags that do nothing */
        if (code == EXIT_OK && opts_finish(o)) {
            fprintf(stderr, "Error: %s\nRun 'etcdbrctl %s --help' for usage.\n", err_msg(),
                    commands[i].name);
            code = EXIT_USAGE;
        }
        if (code == EXIT_OK) {
            umask(077); /* as the Go tool: snapshots and data dirs are private */
            curl_global_init(CURL_GLOBAL_DEFAULT);
            if (commands[i].run) {
                code = commands[i].run(o);
            } else {
                code = etcd_argv ? take_etcd_flags(o, etcd_argv) : EXIT_OK;
                if (code == EXIT_OK) code = cmd_run(o, etcd_argv);
            }
            curl_global_cleanup();
        }
        opts_free(o);
        return code;
    }
    fprintf(stderr, "Error: unknown command \"%s\" for \"etcdbrctl\"\n\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
