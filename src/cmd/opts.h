/* opts: the one table of command-line options (name, type, default, environment variable,
 * commands, secret, help) that drives parsing, --help and docs/flags.md. Flag syntax as Go's
 * pflag: --name=value, --name value, -x value, bool --name or --name=false, lists
 * comma-separated and repeatable. The parsed set is immutable once threads start. */
#ifndef ETCDBR_OPTS_H
#define ETCDBR_OPTS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { OPT_STRING, OPT_BOOL, OPT_INT, OPT_DURATION, OPT_LIST } OptType;

enum {
    CMD_SNAPSHOT = 1 << 0,
    CMD_RESTORE = 1 << 1,
    CMD_SERVER = 1 << 2,
    CMD_INITIALIZE = 1 << 3,
    CMD_COMPACT = 1 << 4,
    CMD_COPY = 1 << 5,
};

typedef struct OptDef {
    const char *name;
    char short_name; /* 0 = none */
    OptType type;
    const char *def; /* default as text ("" for none) */
    const char *env; /* environment variable consulted when the flag is absent, or NULL */
    unsigned commands;
    int secret; /* never logged */
    const char *help;
} OptDef;

typedef struct Opts Opts;

/* Parses argv (after the command name) for command cmd. Positional arguments are refused.
 * "--help"/"-h" sets *help_requested. Returns 0 or ERR_INVALID (unknown flag, missing or
 * malformed value; message names the flag). *out owned (opts_free). */
int opts_parse(unsigned cmd, int argc, char **argv, Opts **out, int *help_requested);
void opts_free(Opts *o);

/* Accessors; the name must be in the table for this command (else abort(): a programming
 * error). Values were validated by opts_parse. Strings borrowed from o. */
const char *opt_str(const Opts *o, const char *name);
int opt_bool(const Opts *o, const char *name);
int64_t opt_int(const Opts *o, const char *name);
int64_t opt_duration_ms(const Opts *o, const char *name);
/* List items (borrowed); *n set. */
const char *const *opt_list(const Opts *o, const char *name, size_t *n);
/* 1 if the option is defined for the parsed command (so the accessors may be called), else 0. */
int opts_has(const Opts *o, const char *name);

/* 1 if given on the command line or by its environment variable. */
int opt_is_set(const Opts *o, const char *name);

/* Sets name from a config file: applied only when the flag was not given on the command line
 * or by its environment variable (command line > environment > config file > default; the Go
 * tool instead lets a config file silently replace every flag). 0, or ERR_INVALID if the name
 * is unknown for this command or the value is malformed (message names the option). */
int opts_set_from_config(Opts *o, const char *name, const char *value);

/* The table itself, for docs and config-file key mapping; *n set. */
const OptDef *opts_table(size_t *n);

/* Go's strconv.ParseBool forms (1 t T TRUE true True / 0 f F FALSE false False) -> 0/1.
 * 0 or ERR_INVALID (message names the text). */
int opts_parse_bool(const char *s, int *out);

/* Prints the options of cmd with defaults and help to stdout. */
void opts_print_help(unsigned cmd);

/* Logs "effective options" at info level, secrets redacted. */
void opts_log_effective(const Opts *o, const char *command);

#endif
