/* main: dispatches to a command (commands.h); nothing else. */
#include "cmd.h"
#include "commands.h"
#include "completion.h"
#include "config_file.h"
#include "help.h"
#include "manpage.h"
#include "version.h"
#include "../common/err.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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

/* A command of the flag table: parse, set up, run. argv: the words after the command's name. */
static int run_command(const CmdInfo *c, int argc, char **argv) {
    Opts *o = NULL;
    int help = 0;
    int n_own = argc;
    char **etcd_argv = NULL;
    if (!c->run) { /* run: etcd's command line follows "--" */
        for (int k = 0; k < argc; k++) {
            if (!strcmp(argv[k], "--")) {
                n_own = k;
                etcd_argv = argv + k + 1;
                break;
            }
        }
    }
    if (opts_parse(c->bit, n_own, argv, &o, &help)) {
        fprintf(stderr, "Error: %s\nRun 'etcdbrctl %s --help' for usage.\n", err_msg(), c->name);
        return EXIT_USAGE;
    }
    if (help) {
        help_print_command(stdout, c);
        opts_free(o);
        return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
    }
    int code = cmd_setup_logging(o);
    /* --config-file: below the command line and the environment (opts.h) */
    if (code == EXIT_OK && (c->bit & CMD_SERVER) && *opts_values(o)->config_file &&
        config_file_apply(o, opts_values(o)->config_file)) {
        fprintf(stderr, "Error: %s\n", err_msg());
        code = EXIT_USAGE;
    }
    /* config-file values against the table; warnings for flags that do nothing */
    if (code == EXIT_OK && opts_finish(o)) {
        fprintf(stderr, "Error: %s\nRun 'etcdbrctl %s --help' for usage.\n", err_msg(), c->name);
        code = EXIT_USAGE;
    }
    if (code == EXIT_OK) {
        umask(077); /* as the Go tool: snapshots and data dirs are private */
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (c->run) {
            code = c->run(o);
        } else {
            code = etcd_argv ? take_etcd_flags(o, etcd_argv) : EXIT_OK;
            if (code == EXIT_OK) code = cmd_run(o, etcd_argv);
        }
        curl_global_cleanup();
    }
    opts_free(o);
    return code;
}

/* help, completion, version: the commands about etcdbrctl itself. */
static int run_meta(const CmdInfo *c, int argc, char **argv) {
    if (!strcmp(c->name, "help")) return cmd_help(argc, argv);
    for (int k = 0; k < argc; k++) {
        if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) {
            help_print_command(stdout, c);
            return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
        }
    }
    if (!strcmp(c->name, "completion")) return cmd_completion(argc, argv);
    if (argc) {
        fprintf(stderr, "Error: unexpected argument \"%s\"\nRun 'etcdbrctl %s --help' for usage.\n",
                argv[0], c->name);
        return EXIT_USAGE;
    }
    version_print(stdout, &etcdbr_build_info);
    return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        help_print_usage(stderr);
        return EXIT_USAGE;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        help_print_usage(stdout);
        return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
    }
    if (!strcmp(a, "--version") || !strcmp(a, "-v")) a = "version";
    if (!strcmp(a, "__flags-md")) { /* hidden: regenerates docs/flags.md */
        opts_write_markdown(stdout);
        return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
    }
    if (!strcmp(a, "__man")) { /* hidden: the man page, built by CMake as etcdbrctl.1 */
        if (man_write(stdout, &etcdbr_build_info) == 0) return EXIT_OK;
        fprintf(stderr, "Error: %s\n", err_msg());
        return EXIT_FAIL;
    }
    const CmdInfo *c = cmd_info_find(a);
    if (!c) return help_unknown_command(a);
    return c->bit ? run_command(c, argc - 2, argv + 2) : run_meta(c, argc - 2, argv + 2);
}
