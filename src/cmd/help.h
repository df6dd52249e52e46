/* help: what `etcdbrctl --help`, `etcdbrctl help [command]` and `etcdbrctl <command> --help`
 * print, every line at most HELP_WIDTH columns (long texts wrapped with a hanging indent). */
#ifndef ETCDBR_HELP_H
#define ETCDBR_HELP_H

#include "commands.h"

#include <stddef.h>
#include <stdio.h>

/* The widest line any help text has, in columns (ASCII text: one byte a column). */
#define HELP_WIDTH 100

/* Writes text to f, the cursor being at column col (0-based, what the caller already wrote on
 * this line), wrapped at HELP_WIDTH on spaces: each continuation line starts with indent spaces
 * (a hanging indent; capped at HELP_WIDTH / 2). A word longer than a line is split. Runs of
 * spaces collapse to one; ends with a newline. Write errors are left in f's error indicator. */
void help_wrap(FILE *f, const char *text, size_t col, size_t indent);

/* The top-level help: the commands with their summaries, the global flags, the exit codes. */
void help_print_usage(FILE *f);

/* What `etcdbrctl <c> --help` prints: the summary, usage, and the command's flags (opts.h
 * opts_print_help), or for help, completion and version their own arguments. */
void help_print_command(FILE *f, const CmdInfo *c);

/* `etcdbrctl help [command]`, argv being the words after "help" (argc of them): no word or
 * "help" prints the top-level help, a command's name that command's help, both to stdout
 * (EXIT_OK). An unknown command, or more than one word, is a usage error: the message and the
 * top-level help on stderr, EXIT_USAGE (as for `etcdbrctl <unknown>`). */
int cmd_help(int argc, char **argv);

/* Says on stderr that name is no command, then the top-level help; returns EXIT_USAGE. */
int help_unknown_command(const char *name);

#endif
