/* help: the help texts; see help.h. */
#include "help.h"
#include "cmd.h"

#include <string.h>

#define NAME_COL 14 /* where the summaries of the top-level command list start */

void help_wrap(FILE *f, const char *text, size_t col, size_t indent) {
    const size_t width = HELP_WIDTH;
    if (indent > width / 2) indent = width / 2;
    int line_empty = 1; /* no word on this line yet */
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        size_t wl = strcspn(p, " ");
        size_t sep = line_empty ? 0 : 1;
        if (col + sep + wl > width && (!line_empty || col > indent)) {
            fprintf(f, "\n%*s", (int)indent, "");
            col = indent;
            line_empty = 1;
            sep = 0;
        }
        if (col + wl > width) { /* longer than a whole line: split it */
            size_t room = width - col;
            fwrite(p, 1, room, f);
            p += room;
            fprintf(f, "\n%*s", (int)indent, "");
            col = indent;
            continue;
        }
        if (sep) fputc(' ', f);
        fwrite(p, 1, wl, f);
        col += sep + wl;
        p += wl;
        line_empty = 0;
    }
    fputc('\n', f);
}

void help_print_usage(FILE *f) {
    fprintf(f,
            "etcdbrctl %s: etcd backup and restore\n\nUsage:\n  etcdbrctl <command> [flags]\n\n"
            "Commands:\n",
            ETCDBR_VERSION);
    size_t n = 0;
    const CmdInfo *cmds = cmd_infos(&n);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "  %-*s", NAME_COL - 2, cmds[i].name);
        help_wrap(f, cmds[i].summary, NAME_COL, NAME_COL);
    }
    fputs("\nFlags:\n  -v, --version   print the version (as `etcdbrctl version`)\n"
          "  -h, --help      this help\n\n",
          f);
    help_wrap(f,
              "Use \"etcdbrctl <command> --help\" or \"etcdbrctl help <command>\" for a command's "
              "flags.",
              0, 0);
    help_wrap(f,
              "Exit codes: 0 ok, 1 failed, 2 usage error, 3 data dir not empty, 4 no full "
              "snapshot to restore.",
              0, 0);
}

/* The arguments and flags of help, completion and version, after their usage line. */
static void print_own_args(FILE *f, const CmdInfo *c) {
    if (!strcmp(c->name, "completion")) {
        fputs("Shells:\n", f);
        static const char *const shells[][2] = {
            {"bash", "source <(etcdbrctl completion bash), or save it as "
                     "/usr/share/bash-completion/completions/etcdbrctl"},
            {"zsh", "after compinit: source <(etcdbrctl completion zsh), or save it as "
                    "_etcdbrctl in a directory of $fpath"},
            {"fish", "etcdbrctl completion fish | source, or save it as "
                     "~/.config/fish/completions/etcdbrctl.fish"},
        };
        for (size_t i = 0; i < sizeof shells / sizeof shells[0]; i++) {
            fprintf(f, "  %-6s", shells[i][0]);
            help_wrap(f, shells[i][1], 8, 8);
        }
        fputs("\n", f);
    }
    fputs("Flags:\n  -h, --help   help for ", f);
    fprintf(f, "%s\n", c->name);
}

void help_print_command(FILE *f, const CmdInfo *c) {
    help_wrap(f, c->summary, 0, 0);
    fprintf(f, "\nUsage:\n  etcdbrctl %s%s%s\n\n", c->name, c->args[0] ? " " : "", c->args);
    if (c->bit)
        opts_print_help(f, c->bit);
    else
        print_own_args(f, c);
}

int help_unknown_command(const char *name) {
    fprintf(stderr, "Error: unknown command \"%s\" for \"etcdbrctl\"\n\n", name);
    help_print_usage(stderr);
    return EXIT_USAGE;
}

int cmd_help(int argc, char **argv) {
    if (argc > 1) {
        fprintf(stderr, "Error: help takes one command, not %d words\n\n", argc);
        help_print_usage(stderr);
        return EXIT_USAGE;
    }
    const CmdInfo *c = argc ? cmd_info_find(argv[0]) : NULL;
    if (argc && !c && strcmp(argv[0], "--help") && strcmp(argv[0], "-h"))
        return help_unknown_command(argv[0]);
    if (!c || !strcmp(c->name, "help"))
        help_print_usage(stdout);
    else
        help_print_command(stdout, c);
    return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
}
