/* config_file: reads the Go tool's --config-file YAML (BackupRestoreComponentConfig,
 * docs/go-tool.md §1.7) and sets the matching options through opts_set_from_config, so the
 * precedence is command line > environment > config file > default. Keys match as Go's
 * encoding/json does (case-insensitively); keys we do not map are logged as warnings and skipped.
 * Bounded: at most 1 MiB, nesting 16, 64 aliases. See docs/config-file.md for the key table. */
#ifndef ETCDBR_CONFIG_FILE_H
#define ETCDBR_CONFIG_FILE_H

#include "opts.h"

#include <stddef.h>

#define CONFIG_FILE_MAX_BYTES (1024 * 1024)
#define CONFIG_FILE_MAX_DEPTH 16
#define CONFIG_FILE_MAX_ALIASES 64

/* What a YAML value must be for a key; the Go field type decides (wrappers.Duration accepts
 * only strings, uint fields refuse negative numbers). */
typedef enum {
    CONFIG_KIND_SECTION,  /* a mapping of further keys */
    CONFIG_KIND_STRING,   /* any scalar, taken as written */
    CONFIG_KIND_BOOL,     /* plain true/false (YAML 1.1 forms yes/no/on/off/y/n too) */
    CONFIG_KIND_INT,      /* plain integer */
    CONFIG_KIND_UINT,     /* plain integer >= 0 */
    CONFIG_KIND_DURATION, /* Go duration string ("30s"); a bare 0 is accepted */
    CONFIG_KIND_LIST,     /* sequence of scalars, handed to the option comma-joined */
} ConfigKind;

typedef struct ConfigFileKey {
    const char *path; /* Go JSON key path, dot-separated: "snapstoreConfig.provider" */
    ConfigKind kind;
    const char *option; /* our long option name; NULL = the Go tool's key has no equivalent */
} ConfigFileKey;

/* Counts of one application, for callers and tests. */
typedef struct ConfigFileStats {
    unsigned applied;    /* values handed to opts_set_from_config and taken */
    unsigned overridden; /* values skipped because the flag or its environment variable was set */
    unsigned ignored;    /* keys skipped with a warning (unknown, unmapped, other command) */
} ConfigFileStats;

/* Reads path (at most CONFIG_FILE_MAX_BYTES) and applies it to o. Only the first YAML document
 * is read, as the Go tool does. All values are checked before any is set: on error o is
 * unchanged. Returns 0 (warnings logged for ignored keys), ERR_IO (cannot open or read; message
 * names the path), or ERR_INVALID (too large, malformed YAML, too deep, too many aliases, a value
 * of the wrong type; message "<path>:<line>:<column>: ..." naming the key). Secret values never
 * appear in messages. Not thread-safe with other users of o. */
int config_file_apply(Opts *o, const char *path);

/* As config_file_apply over len bytes of buf (borrowed; need not be NUL-terminated). name is
 * used in messages only. stats may be NULL. */
int config_file_apply_buffer(Opts *o, const char *buf, size_t len, const char *name,
                             ConfigFileStats *stats);

/* The key table (static storage), sections included, in document order; *n set. */
const ConfigFileKey *config_file_keys(size_t *n);

#endif
