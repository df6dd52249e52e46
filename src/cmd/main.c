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
};

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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        Opts *o = NULL;
        int help = 0;
        if (opts_parse(commands[i].bit, argc - 2, argv + 2, &o, &help)) {
            fprintf(stderr, "Error: %s\nRun 'etcdbrctl %s --help' for usage.\n", err_msg(),
                    commands[i].name);
            return EXIT_USAGE;
        }
        if (help) {
            printf("%s\n\nUsage:\n  etcdbrctl %s [flags]\n\n", commands[i].summary,
                   commands[i].name);
            opts_print_help(commands[i].bit);
            opts_free(o);
            return EXIT_OK;
        }
        int code = cmd_setup_logging(o);
        /* --config-file: below the command line and the environment (opts.h) */
        if (code == EXIT_OK && (commands[i].bit & CMD_SERVER) && *opt_str(o, "config-file") &&
            config_file_apply(o, opt_str(o, "config-file"))) {
            fprintf(stderr, "Error: %s\n", err_msg());
            code = EXIT_USAGE;
        }
        if (code == EXIT_OK) {
            umask(077); /* as the Go tool: snapshots and data dirs are private */
            curl_global_init(CURL_GLOBAL_DEFAULT);
            code = commands[i].run(o);
            curl_global_cleanup();
        }
        opts_free(o);
        return code;
    }
    fprintf(stderr, "Error: unknown command \"%s\" for \"etcdbrctl\"\n\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
