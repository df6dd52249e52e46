/* opts: the one table of command-line options (opts_table.h: name, type, default, environment
 * variable, commands, secret, help, allowed range or values, whether it is implemented) that
 * drives parsing, validation, --help, docs/flags.md (opts_write_markdown) and the typed values
 * the commands read (OptValues: opts_values(o)->field). Flag syntax as Go's
 * pflag: --name=value, --name value, -x value, bool --name or --name=false, lists
 * comma-separated and repeatable. The parsed set is immutable once threads start. */
#ifndef ETCDBR_OPTS_H
#define ETCDBR_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { OPT_STRING, OPT_BOOL, OPT_INT, OPT_DURATION, OPT_LIST } OptType;

enum {
    CMD_SNAPSHOT = 1 << 0,
    CMD_RESTORE = 1 << 1,
    CMD_SERVER = 1 << 2,
    CMD_INITIALIZE = 1 << 3,
    CMD_COMPACT = 1 << 4,
    CMD_COPY = 1 << 5,
    CMD_VERIFY = 1 << 6,   /* ours: checks a store without etcd */
    CMD_LIST = 1 << 7,     /* ours: the store's backup sets */
    CMD_GET = 1 << 8,      /* ours: keys of a backup at a revision, without restoring */
    CMD_DIFF = 1 << 9,     /* ours: keys changed between two revisions of the backups */
    CMD_HISTORY = 1 << 10, /* ours: every put and delete of one key the backups hold */
};

/* The commands that take positional arguments (KEY [RANGE_END]) and how many at most. */
#define OPTS_ARGS_CMDS (CMD_GET | CMD_DIFF | CMD_HISTORY)
#define OPTS_MAX_ARGS 2

/* Whether a flag does what its help says. Anything but OPT_ACTIVE is shown in --help and the
 * docs, and opts_finish warns when such a flag is given (whatever the value). */
typedef enum {
    OPT_ACTIVE = 0,    /* read and honoured */
    OPT_UNIMPLEMENTED, /* accepted for compatibility with the Go tool; does nothing yet */
    OPT_IGNORED,       /* deliberately without effect here; OptDef.ignored says why */
} OptSupport;

typedef struct OptDef {
    const char *name;
    char short_name; /* 0 = none */
    OptType type;
    const char *def; /* default as text ("" for none) */
    const char *env; /* environment variable consulted when the flag is absent, or NULL */
    unsigned commands;
    int secret; /* never logged */
    const char *help;
    OptSupport support;
    const char *ignored; /* OPT_IGNORED: the reason, completing "ignored: ..." */
    /* OPT_INT: inclusive bounds; OPT_DURATION: inclusive bounds in milliseconds */
    int has_min, has_max;
    int64_t min, max;
    const char *const *choices; /* OPT_STRING: NULL-terminated allowed values, or NULL = any */
    int choices_nocase;         /* choices compare case-insensitively */
    /* commands of the flag's group for which it has no meaning (e.g. compact writes no data dir)
     * and the reason: said in their --help and docs, warned about when given */
    unsigned ignored_in;
    const char *ignored_in_why;
} OptDef;

typedef struct Opts Opts;

/* A list flag's items (borrowed from the Opts). */
typedef struct OptList {
    const char *const *v;
    size_t n;
} OptList;

#define OPT_FIELD_OPT_STRING(f) const char *f;
#define OPT_FIELD_OPT_BOOL(f) int f;
#define OPT_FIELD_OPT_INT(f) int64_t f;
#define OPT_FIELD_OPT_DURATION(f) int64_t f##_ms;
#define OPT_FIELD_OPT_LIST(f) OptList f;
/* Every option's value, typed, one field per row of opts_table.h (the flag's name with '_' for
 * '-'; durations in milliseconds as <field>_ms; strings and lists borrowed from the Opts): what
 * the command line, the environment, the config file or the default gave, for the flags of the
 * parsed command; for the others the table's default (a list flag of another command: empty). */
typedef struct OptValues {
#define OPT(field, type, ...) OPT_FIELD_##type(field)
#include "opts_table.h"
#undef OPT
} OptValues;

/* Whether each option was given on the command line or by its environment variable (not by a
 * config file), one field per row of opts_table.h. */
typedef struct OptGiven {
#define OPT(field, type, ...) unsigned char field;
#include "opts_table.h"
#undef OPT
} OptGiven;

/* Parses argv (after the command name) for command cmd, then the environment variables of the
 * flags not given. Positional arguments are refused, except for the commands of OPTS_ARGS_CMDS,
 * which take up to OPTS_MAX_ARGS of them anywhere among the flags (and every argument after
 * "--", e.g. a key that starts with '-'): opts_args. "--help"/"-h" sets *help_requested.
 * Returns 0 or ERR_INVALID: unknown flag (the message suggests the nearest flag of cmd, or names
 * the commands that take it), missing or malformed value, value outside the table's range or
 * allowed values (the message names the flag and the range or values). *out owned (opts_free). */
int opts_parse(unsigned cmd, int argc, char **argv, Opts **out, int *help_requested);

/* The one step every command passes through after opts_parse, cmd_setup_logging and the
 * config file: checks the values set by opts_set_from_config against the table's ranges and
 * allowed values (ERR_INVALID naming the flag and "config file"), then logs a warning for each
 * unimplemented or ignored flag given on the command line, by its environment variable or in
 * the config file. Returns 0 or ERR_INVALID. */
int opts_finish(const Opts *o);
void opts_free(Opts *o);

/* The typed values and given-flags of o (borrowed from o, current after each opts_parse and
 * opts_set_from_config). Use sites read fields: opts_values(o)->store_prefix. */
const OptValues *opts_values(const Opts *o);

/* The positional arguments in order (borrowed from the argv given to opts_parse, which must
 * outlive o); *n set (0 for the commands outside OPTS_ARGS_CMDS). */
const char *const *opts_args(const Opts *o, size_t *n);
const OptGiven *opts_given(const Opts *o);

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

/* 1 if given on the command line or by its environment variable (not by a config file). */
int opt_is_set(const Opts *o, const char *name);

/* Sets name from a config file: applied only when the flag was not given on the command line
 * or by its environment variable (command line > environment > config file > default; the Go
 * tool instead lets a config file silently replace every flag). 0, or ERR_INVALID if the name
 * is unknown for this command or the value is malformed (message names the option). Ranges and
 * allowed values are checked later, by opts_finish: config_file.c takes any error here for
 * "does not apply to this command". */
int opts_set_from_config(Opts *o, const char *name, const char *value);

/* The table itself, for docs and config-file key mapping; *n set. */
const OptDef *opts_table(size_t *n);

/* Prints "Flags:" and the options of cmd to f, each with its help, support status, range or
 * allowed values, default and environment variable (opts_describe), wrapped at HELP_WIDTH
 * (help.h) with a hanging indent at the column where the help texts start. */
void opts_print_help(FILE *f, unsigned cmd);

/* The whole description of d as --help shows it for command cmd (0: whatever command): its
 * help, then "(support status)", "(allowed values or range)", "(default \"x\")", "[env X]" as
 * they apply. Written into out (cap bytes, NUL-terminated, truncated to fit); returns its
 * length. The man page and shell completions use it too. */
size_t opts_describe(const OptDef *d, unsigned cmd, char *out, size_t cap);

/* The name of d's value in help ("string", "int", "duration", "strings"), "" for a bool flag,
 * which takes none (static storage). */
const char *opts_value_name(const OptDef *d);

/* Writes docs/flags.md (the flags reference, generated from the table) to f. The unit test
 * test_opts fails when the checked-in file differs; regenerate with
 * `etcdbrctl __flags-md > docs/flags.md`. */
void opts_write_markdown(FILE *f);

/* Logs the command and version with the settings given (not defaults) at info, and every
 * setting, one per line, at debug; secrets redacted. */
void opts_log_effective(const Opts *o, const char *command);

#endif
