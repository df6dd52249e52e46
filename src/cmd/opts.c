/* opts: the options table and its parser; see opts.h. Names, defaults, ranges and allowed
 * values are the Go tool's (docs/go-tool.md §1) except where docs/flags.md says we differ
 * (insecure-skip-tls-verify defaults to false: the Go tool's true default silently disables
 * certificate checks). A flag the code does not read is marked UNIMPLEMENTED or IGNORED here,
 * never left to look as if it worked. */
#include "opts.h"
#include "../common/strbuf.h"
#include "help.h"
#include "../codec/crypt.h"
#include "../common/err.h"
#include "../common/goparse.h"
#include "../common/log.h"
#include "../common/names.h"
#include "../common/timeutil.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the commands that read a backup without restoring it (get, diff, history; docs/inspect.md) */
#define INSPECT (CMD_GET | CMD_DIFF | CMD_HISTORY)
/* verify talks to etcd only for --restore-test */
#define ETCD (CMD_SNAPSHOT | CMD_SERVER | CMD_INITIALIZE | CMD_VERIFY)
#define STORE                                                                                      \
    (CMD_SNAPSHOT | CMD_RESTORE | CMD_SERVER | CMD_INITIALIZE | CMD_COMPACT | CMD_COPY |           \
     CMD_VERIFY | CMD_LIST | INSPECT)
#define SNAP (CMD_SNAPSHOT | CMD_SERVER)
#define RESTORE (CMD_RESTORE | CMD_SERVER | CMD_INITIALIZE | CMD_COMPACT)
#define ALL (STORE | ETCD | RESTORE)

/* Every entry ends with its support status and, where the Go tool has one, its range or
 * allowed values: opts_parse, opts_finish, --help and docs/flags.md all read them from here. */
#define ACTIVE .support = OPT_ACTIVE
#define UNIMPLEMENTED .support = OPT_UNIMPLEMENTED
#define IGNORED(why) .support = OPT_IGNORED, .ignored = (why)
#define AT_LEAST(v) .has_min = 1, .min = (v)
#define BETWEEN(lo, hi) .has_min = 1, .min = (lo), .has_max = 1, .max = (hi)
#define ONE_OF(list) .choices = (list)
#define IGNORED_IN(mask, why) .ignored_in = (mask), .ignored_in_why = (why)

#define MIN_CHUNK_SIZE 5242880      /* 5 MiB: the Go tool's minimum (S3's smallest part) */
#define MAX_CHUNK_SIZE 5368709120LL /* 5 GiB: S3's largest part */
#define MAX_PARALLEL 256            /* threads or requests in flight: far above any use */
#define MAX_COUNT 1000000           /* counts of backups, kept in an int */
/* every duration flag: not negative, at most 100 years (so ms x 1e6 still fits int64 ns) */
#define DURATION_MAX_MS (100LL * 365 * 24 * 3600 * 1000)
#define NO_ETCD_RUNS "restore builds the db offline and starts no etcd"
#define NO_MEMBER "compact writes a full snapshot into the store, not a member's data dir"

static const char *const LOG_LEVELS[] = {
    "error", "warn", "warning", "info", "debug", "trace", "0", "1", "2", "3", "4", "5", "6", NULL};
static const char *const LOG_FORMATS[] = {"text", "json", NULL};
/* the Go tool's providers (its test fake FAILED aside); store_open refuses those this build
 * does not implement yet */
static const char *const PROVIDERS[] = {"",      "Local", "S3",  "ABS", "GCS",
                                        "Swift", "OSS",   "ECS", "OCS", NULL};
static const char *const GC_POLICIES[] = {"Exponential", "LimitBased", NULL};
static const char *const COMPRESSION_POLICIES[] = {"gzip", "zlib", "lzw", "zstd", NULL};
static const char *const GZIP_MODES[] = {"parallel", "single", NULL};
static const char *const COMPACTION_MODES[] = {"periodic", "revision", NULL};
static const char *const VALIDATION_MODES[] = {"full", "sanity", NULL};
static const char *const OUTPUT_FORMATS[] = {"text", "json", "simple", "table", NULL};

static const OptDef opt_table[] = {
#define OPT(field, type, ...) __VA_ARGS__,
#include "opts_table.h"
#undef OPT
};
#define N_OPTS (sizeof opt_table / sizeof opt_table[0])

/* Where a value came from; the order is the precedence. */
typedef enum { FROM_DEFAULT = 0, FROM_CONFIG, FROM_ENV, FROM_CLI } OptOrigin;

typedef struct {
    char *value; /* owned; NULL = default */
    OptOrigin origin;
    char **items; /* OPT_LIST split */
    size_t n_items;
} OptValue;

struct Opts {
    unsigned cmd;
    OptValue v[N_OPTS];
    OptValues vals; /* typed, filled from v by fill_values */
    OptGiven given;
    const char *args[OPTS_MAX_ARGS]; /* positional arguments, borrowed from argv */
    size_t n_args;
};

#define OPT_OFFSET_OPT_STRING(f) offsetof(OptValues, f)
#define OPT_OFFSET_OPT_BOOL(f) offsetof(OptValues, f)
#define OPT_OFFSET_OPT_INT(f) offsetof(OptValues, f)
#define OPT_OFFSET_OPT_DURATION(f) offsetof(OptValues, f##_ms)
#define OPT_OFFSET_OPT_LIST(f) offsetof(OptValues, f)
/* Where each row's value lives in OptValues and OptGiven, in table order. */
static const size_t value_offsets[] = {
#define OPT(field, type, ...) OPT_OFFSET_##type(field),
#include "opts_table.h"
#undef OPT
};
static const size_t given_offsets[] = {
#define OPT(field, type, ...) offsetof(OptGiven, field),
#include "opts_table.h"
#undef OPT
};
_Static_assert(sizeof value_offsets / sizeof value_offsets[0] == N_OPTS, "one offset per row");
/* Each row's type as its OPT(field, type, ...) says: the field's C type follows it, so it must be
 * the initializer's (checked at every parse: a mismatch is a programming error). */
static const OptType row_types[] = {
#define OPT(field, type, ...) type,
#include "opts_table.h"
#undef OPT
};

/* o->vals and o->given from o->v (values were validated when set). */
/* A value of any option type, as its OptValues field holds it. */
typedef union {
    int b;     /* OPT_BOOL */
    int64_t i; /* OPT_INT; OPT_DURATION in ms */
    OptList l; /* OPT_LIST: the items of ov, borrowed */
    const char *s;
} OptField;

/* The typed value of text (ov's, or the default) into *f; returns its size in bytes. */
static size_t parse_field(const OptValue *ov, OptType type, const char *text, OptField *f) {
    switch (type) {
    case OPT_BOOL:
        f->b = 0;
        go_parse_bool(text, &f->b);
        return sizeof f->b;
    case OPT_INT:
        f->i = strtoll(text, NULL, 10);
        return sizeof f->i;
    case OPT_DURATION:
        f->i = 0;
        duration_parse_ms(text, &f->i);
        return sizeof f->i;
    case OPT_LIST:
        f->l = (OptList){(const char *const *)ov->items, ov->n_items};
        return sizeof f->l;
    default:
        f->s = text;
        return sizeof f->s;
    }
}

static void fill_values(Opts *o) {
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptValue *ov = &o->v[i];
        const char *text = ov->value ? ov->value : opt_table[i].def;
        if (row_types[i] != opt_table[i].type) abort();
        char *dst = (char *)&o->vals + value_offsets[i];
        ((unsigned char *)&o->given)[given_offsets[i]] = ov->origin >= FROM_ENV;
        OptField f;
        size_t n = parse_field(ov, opt_table[i].type, text, &f);
        memcpy(dst, &f, n);
    }
}

const OptValues *opts_values(const Opts *o) {
    return &o->vals;
}

const OptGiven *opts_given(const Opts *o) {
    return &o->given;
}

/* The commands users type, for messages and docs ("run" shares the server's flags). */
static const struct {
    unsigned bit;
    const char *names;
} cmd_names[] = {
    {CMD_SNAPSHOT, "snapshot"},
    {CMD_RESTORE, "restore"},
    {CMD_SERVER, "server, run"},
    {CMD_INITIALIZE, "initialize"},
    {CMD_COMPACT, "compact"},
    {CMD_COPY, "copy"},
    {CMD_VERIFY, "verify"},
    {CMD_LIST, "list"},
    {CMD_GET, "get"},
    {CMD_DIFF, "diff"},
    {CMD_HISTORY, "history"},
};

/* "snapshot, server, run" for the commands in mask; "" if none. */
static void commands_text(unsigned mask, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof cmd_names / sizeof cmd_names[0]; i++) {
        if (!(mask & cmd_names[i].bit)) continue;
        int w = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", cmd_names[i].names);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

static const OptDef *find_long(const char *name, size_t len, unsigned cmd, size_t *idx) {
    for (size_t i = 0; i < N_OPTS; i++) {
        if ((opt_table[i].commands & cmd) && strlen(opt_table[i].name) == len &&
            strncmp(opt_table[i].name, name, len) == 0) {
            *idx = i;
            return &opt_table[i];
        }
    }
    return NULL;
}

static const OptDef *find_short(char c, unsigned cmd, size_t *idx) {
    for (size_t i = 0; i < N_OPTS; i++) {
        if ((opt_table[i].commands & cmd) && opt_table[i].short_name == c) {
            *idx = i;
            return &opt_table[i];
        }
    }
    return NULL;
}

/* ---------- ranges and allowed values ---------- */

/* A bound as the user writes it: "5242880", or for durations Go's "1h2m3s" / "250ms". */
static void bound_text(const OptDef *d, int64_t v, char *out, size_t cap) {
    if (d->type != OPT_DURATION) {
        snprintf(out, cap, "%" PRId64, v);
        return;
    }
    if (v == 0 || v % 1000) {
        snprintf(out, cap, "%" PRId64 "%s", v, v ? "ms" : "s");
        return;
    }
    int64_t s = v / 1000, h = s / 3600, m = s / 60 % 60;
    size_t n = 0;
    out[0] = '\0';
    if (h) n += (size_t)snprintf(out + n, cap - n, "%" PRId64 "h", h);
    if (m && n < cap) n += (size_t)snprintf(out + n, cap - n, "%" PRId64 "m", m);
    if (s % 60 && n < cap) snprintf(out + n, cap - n, "%" PRId64 "s", s % 60);
}

/* "at least 1", "between 0 and 65535", "one of gzip, zlib, lzw, zstd", or "" (no restriction).
 * quote wraps values in backticks (markdown). */
static void allowed_text(const OptDef *d, int quote, char *out, size_t cap) {
    char lo[32], hi[32];
    const char *q = quote ? "`" : "";
    out[0] = '\0';
    if (d->choices) {
        size_t n = (size_t)snprintf(out, cap, "one of ");
        for (size_t i = 0; d->choices[i] && n < cap; i++) {
            const char *c = d->choices[i];
            n += (size_t)snprintf(out + n, cap - n, "%s%s%s%s", i ? ", " : "", c[0] ? q : "",
                                  c[0] ? c : "\"\" (empty)", c[0] ? q : "");
        }
        if (d->choices_nocase && n < cap) snprintf(out + n, cap - n, "; any case");
        return;
    }
    if (d->has_min) bound_text(d, d->min, lo, sizeof lo);
    if (d->has_max) bound_text(d, d->max, hi, sizeof hi);
    if (d->has_min && d->has_max)
        snprintf(out, cap, "between %s%s%s and %s%s%s", q, lo, q, q, hi, q);
    else if (d->has_min)
        snprintf(out, cap, "at least %s%s%s", q, lo, q);
    else if (d->has_max)
        snprintf(out, cap, "at most %s%s%s", q, hi, q);
}

/* Checks v against d's allowed values or range. from follows the flag's name in the message
 * ("", " (config file)", " (environment variable X)"). 0 or ERR_INVALID naming the flag, the
 * value and what is allowed. */
static int check_allowed(const OptDef *d, const char *v, const char *from) {
    char allowed[256];
    if (d->choices) {
        for (size_t i = 0; d->choices[i]; i++)
            if (d->choices_nocase ? !strcasecmp(v, d->choices[i]) : !strcmp(v, d->choices[i]))
                return 0;
        allowed_text(d, 0, allowed, sizeof allowed);
        return err_set(ERR_INVALID, "--%s%s: invalid value \"%s\": must be %s", d->name, from, v,
                       allowed);
    }
    if (!d->has_min && !d->has_max) return 0;
    int64_t x = 0;
    if (d->type == OPT_INT)
        x = strtoll(v, NULL, 10);
    else if (d->type == OPT_DURATION)
        duration_parse_ms(v, &x);
    else
        return 0;
    if ((d->has_min && x < d->min) || (d->has_max && x > d->max)) {
        allowed_text(d, 0, allowed, sizeof allowed);
        return err_set(ERR_INVALID, "--%s%s: %s is out of range: must be %s", d->name, from, v,
                       allowed);
    }
    return 0;
}

static int validate_value(const OptDef *d, const char *v) {
    char *end;
    int b;
    int64_t ms;
    switch (d->type) {
    case OPT_BOOL:
        if (go_parse_bool(v, &b))
            return err_set(ERR_INVALID, "--%s: invalid boolean \"%s\"", d->name, v);
        break;
    case OPT_INT:
        errno = 0;
        strtoll(v, &end, 10);
        if (!*v || *end || errno == ERANGE)
            return err_set(ERR_INVALID, "--%s: invalid integer \"%s\"", d->name, v);
        break;
    case OPT_DURATION:
        if (duration_parse_ms(v, &ms))
            return err_set(ERR_INVALID, "--%s: invalid duration \"%s\" (e.g. 20s, 1h30m)", d->name,
                           v);
        if (ms < 0 || ms > DURATION_MAX_MS)
            return err_set(ERR_INVALID,
                           "--%s: duration \"%s\" is out of range: must be between 0 and 100 "
                           "years",
                           d->name, v);
        break;
    default:
        break;
    }
    return 0;
}

static const char *origin_text(const OptDef *d, OptOrigin origin, char *buf, size_t cap) {
    switch (origin) {
    case FROM_ENV:
        snprintf(buf, cap, " (environment variable %s)", d->env);
        return buf;
    case FROM_CONFIG:
        return " (config file)";
    default:
        return "";
    }
}

/* Type check, then (unless the value comes from a config file: opts_finish checks those) the
 * range and allowed values; then stores it. */
static int set_value(Opts *o, size_t idx, const char *v, OptOrigin origin) {
    OptValue *ov = &o->v[idx];
    const OptDef *d = &opt_table[idx];
    char from[96];
    int rc = validate_value(d, v);
    if (!rc && origin != FROM_CONFIG)
        rc = check_allowed(d, v, origin_text(d, origin, from, sizeof from));
    if (rc) return rc;
    if (d->type == OPT_LIST) {
        /* repeatable: a flag given again appends */
        char *copy = strdup(v);
        for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
            ov->items = realloc(ov->items, (ov->n_items + 1) * sizeof *ov->items);
            ov->items[ov->n_items++] = strdup(tok);
        }
        free(copy);
    }
    free(ov->value);
    ov->value = strdup(v);
    ov->origin = origin;
    return 0;
}

/* ---------- unknown flags ---------- */

#define SUGGEST_MAX_LEN 64

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions, so a swapped
 * pair of letters costs 1). a and b at most SUGGEST_MAX_LEN bytes. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    size_t d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The flag of cmd nearest to name[0..len), or NULL when none is close: within an edit
 * distance of a quarter of the name (1 to 3), or the only flag that name is a prefix of. */
static const OptDef *nearest_flag(const char *name, size_t len, unsigned cmd) {
    if (len == 0 || len > SUGGEST_MAX_LEN) return NULL;
    size_t limit = len / 4 < 1 ? 1 : len / 4 > 3 ? 3 : len / 4;
    const OptDef *best = NULL, *prefix_of = NULL;
    size_t best_d = limit + 1, n_prefix = 0;
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & cmd)) continue;
        size_t dl = strlen(d->name);
        if (dl <= SUGGEST_MAX_LEN) {
            size_t dist = edit_distance(name, len, d->name, dl);
            if (dist < best_d) {
                best_d = dist;
                best = d;
            }
        }
        if (len >= 3 && dl > len && !strncmp(d->name, name, len)) {
            prefix_of = d;
            n_prefix++;
        }
    }
    if (best) return best;
    return n_prefix == 1 ? prefix_of : NULL;
}

static int unknown_flag(const char *name, size_t len, unsigned cmd) {
    const OptDef *near = nearest_flag(name, len, cmd);
    size_t idx;
    const OptDef *elsewhere = find_long(name, len, ~0u, &idx);
    char cmds[128];
    if (elsewhere) commands_text(elsewhere->commands, cmds, sizeof cmds);
    if (elsewhere && cmds[0])
        return err_set(ERR_INVALID, "unknown flag: --%.*s (a flag of %s only)", (int)len, name,
                       cmds);
    if (near)
        return err_set(ERR_INVALID, "unknown flag: --%.*s; did you mean --%s?", (int)len, name,
                       near->name);
    return err_set(ERR_INVALID, "unknown flag: --%.*s", (int)len, name);
}

/* ---------- parsing ---------- */

/* Keeps a positional argument of an OPTS_ARGS_CMDS command; ERR_INVALID otherwise. */
static int take_arg(Opts *o, const char *a) {
    if (!(o->cmd & OPTS_ARGS_CMDS) || a[0] == '-')
        return err_set(ERR_INVALID, "unexpected argument \"%s\"", a);
    if (o->n_args == OPTS_MAX_ARGS)
        return err_set(ERR_INVALID,
                       "unexpected argument \"%s\": at most %d arguments (KEY "
                       "[RANGE_END])",
                       a, OPTS_MAX_ARGS);
    o->args[o->n_args++] = a;
    return 0;
}

int opts_parse(unsigned cmd, int argc, char **argv, Opts **out, int *help_requested) {
    Opts *o = calloc(1, sizeof *o);
    if (!o) return err_set(ERR_NOMEM, "out of memory");
    o->cmd = cmd;
    *help_requested = 0;
    int rc = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        size_t idx = 0;
        const OptDef *d = NULL;
        const char *val = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help_requested = 1;
            continue;
        }
        if (!strcmp(a, "--") && (cmd & OPTS_ARGS_CMDS)) { /* the rest are arguments */
            while (!rc && ++i < argc)
                rc = take_arg(o, argv[i]);
            if (rc) goto done;
            break;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            d = find_long(a + 2, len, cmd, &idx);
            if (!d) {
                rc = unknown_flag(a + 2, len, cmd);
                goto done;
            }
            if (eq) val = eq + 1;
        } else if (a[0] == '-' && a[1] && a[2] == '\0') {
            d = find_short(a[1], cmd, &idx);
            if (!d) {
                rc = err_set(ERR_INVALID, "unknown shorthand flag: '%c' in %s", a[1], a);
                goto done;
            }
        } else if (a[0] == '-' && a[1] && a[2] == '=') {
            d = find_short(a[1], cmd, &idx);
            if (!d) {
                rc = err_set(ERR_INVALID, "unknown shorthand flag: '%c' in %s", a[1], a);
                goto done;
            }
            val = a + 3;
        } else {
            if ((rc = take_arg(o, a))) goto done;
            continue;
        }
        if (!val) {
            if (d->type == OPT_BOOL) {
                val = "true";
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                rc = err_set(ERR_INVALID, "flag needs an argument: --%s", d->name);
                goto done;
            }
        }
        rc = set_value(o, idx, val, FROM_CLI);
        if (rc) goto done;
    }
    /* environment fallbacks, then defaults for lists */
    for (size_t i = 0; i < N_OPTS; i++) {
        if (!(opt_table[i].commands & cmd) || o->v[i].origin == FROM_CLI) continue;
        const char *env = opt_table[i].env ? getenv(opt_table[i].env) : NULL;
        if (env && *env) {
            rc = set_value(o, i, env, FROM_ENV);
            if (rc) goto done;
        } else if (opt_table[i].type == OPT_LIST && opt_table[i].def[0]) {
            rc = set_value(o, i, opt_table[i].def, FROM_DEFAULT);
            if (rc) goto done;
        }
    }
done:
    if (rc) {
        opts_free(o);
        return rc;
    }
    fill_values(o);
    *out = o;
    return 0;
}

int opts_set_from_config(Opts *o, const char *name, const char *value) {
    size_t idx;
    if (!find_long(name, strlen(name), o->cmd, &idx))
        return err_set(ERR_INVALID, "config file: option %s does not apply to this command", name);
    OptValue *ov = &o->v[idx];
    if (ov->origin >= FROM_ENV) return 0; /* the command line or environment wins */
    for (size_t j = 0; j < ov->n_items; j++)
        free(ov->items[j]);
    free(ov->items);
    ov->items = NULL;
    ov->n_items = 0;
    int rc = set_value(o, idx, value, FROM_CONFIG);
    fill_values(o);
    if (rc) return err_wrap(rc, "config file");
    return 0;
}

/* The flag's support status for command cmd (0: whatever command), or NULL when it works. */
static const char *support_text_for(const OptDef *d, unsigned cmd, char *buf, size_t cap) {
    if (d->support == OPT_UNIMPLEMENTED) return "not implemented yet: ignored";
    if (d->support == OPT_IGNORED) {
        snprintf(buf, cap, "ignored: %s", d->ignored);
        return buf;
    }
    if (cmd & d->ignored_in) {
        snprintf(buf, cap, "ignored here: %s", d->ignored_in_why);
        return buf;
    }
    return NULL;
}

static const char *support_text(const OptDef *d, char *buf, size_t cap) {
    return support_text_for(d, 0, buf, cap);
}

/* A value as logs may show it: secrets redacted, and so is any value holding key material (the
 * keys given as --encryption-key-file instead of a file name: docs/encryption.md). */
static const char *value_shown(const OptDef *d, const char *v) {
    if (v[0] && (d->secret || crypt_text_holds_key(v, strlen(v)))) return "<redacted>";
    return v;
}

int opts_finish(const Opts *o) {
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        const OptValue *ov = &o->v[i];
        if (!(d->commands & o->cmd) || ov->origin != FROM_CONFIG) continue;
        int rc = check_allowed(d, ov->value, " (config file)");
        if (rc) return rc;
    }
    /* one line naming every flag given that has no effect here (a druid-made command line
     * carries several), not one warning each */
    StrBuf b = {0};
    int n = 0;
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        const OptValue *ov = &o->v[i];
        char why[256], from[96];
        const char *status = support_text_for(d, o->cmd, why, sizeof why);
        if (!(d->commands & o->cmd) || !status || ov->origin == FROM_DEFAULT) continue;
        const char *src = ov->origin == FROM_CLI ? " (command line)"
                                                 : origin_text(d, ov->origin, from, sizeof from);
        strbuf_str(&b, n++ ? "; --" : "--");
        strbuf_str(&b, d->name);
        strbuf_str(&b, "=");
        strbuf_str(&b, value_shown(d, ov->value));
        strbuf_str(&b, src);
        strbuf_str(&b, ": ");
        strbuf_str(&b, status);
    }
    if (n)
        log_warn("%d flag%s without effect (accepted for the Go tool's command lines): %s", n,
                 n == 1 ? "" : "s", b.oom ? "(out of memory)" : b.d);
    free(b.d);
    return 0;
}

const OptDef *opts_table(size_t *n) {
    *n = N_OPTS;
    return opt_table;
}

void opts_free(Opts *o) {
    if (!o) return;
    for (size_t i = 0; i < N_OPTS; i++) {
        free(o->v[i].value);
        for (size_t j = 0; j < o->v[i].n_items; j++)
            free(o->v[i].items[j]);
        free(o->v[i].items);
    }
    free(o);
}

const char *const *opts_args(const Opts *o, size_t *n) {
    *n = o->n_args;
    return o->args;
}

static size_t lookup(const Opts *o, const char *name) {
    size_t idx;
    if (!find_long(name, strlen(name), o->cmd, &idx)) {
        fprintf(stderr, "internal error: option --%s not defined for this command\n", name);
        abort();
    }
    return idx;
}

const char *opt_str(const Opts *o, const char *name) {
    size_t i = lookup(o, name);
    return o->v[i].value ? o->v[i].value : opt_table[i].def;
}

int opt_bool(const Opts *o, const char *name) {
    int b = 0;
    go_parse_bool(opt_str(o, name), &b);
    return b;
}

int64_t opt_int(const Opts *o, const char *name) {
    return strtoll(opt_str(o, name), NULL, 10);
}

int64_t opt_duration_ms(const Opts *o, const char *name) {
    int64_t ms = 0;
    duration_parse_ms(opt_str(o, name), &ms);
    return ms;
}

const char *const *opt_list(const Opts *o, const char *name, size_t *n) {
    size_t i = lookup(o, name);
    *n = o->v[i].n_items;
    return (const char *const *)o->v[i].items;
}

int opt_is_set(const Opts *o, const char *name) {
    return o->v[lookup(o, name)].origin >= FROM_ENV;
}

int opts_has(const Opts *o, const char *name) {
    size_t idx;
    return find_long(name, strlen(name), o->cmd, &idx) != NULL;
}

/* ---------- help and docs ---------- */

static const char *type_name(OptType t) {
    static const char *const names[] = {
        [OPT_STRING] = "string",     [OPT_BOOL] = "bool",    [OPT_INT] = "int",
        [OPT_DURATION] = "duration", [OPT_LIST] = "strings",
    };
    return NAME_AT(names, t, "string");
}

/* Appends printf text at out[*n] (cap bytes in all), truncating to fit; *n stays < cap. */
static void __attribute__((format(printf, 4, 5)))
append(char *out, size_t cap, size_t *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (w > 0) *n = (size_t)w < cap - *n ? *n + (size_t)w : cap - 1;
}

size_t opts_describe(const OptDef *d, unsigned cmd, char *out, size_t cap) {
    char allowed[256], why[256];
    size_t n = 0;
    out[0] = '\0';
    append(out, cap, &n, "%s", d->help);
    const char *status = support_text_for(d, cmd, why, sizeof why);
    if (status) append(out, cap, &n, " (%s)", status);
    allowed_text(d, 0, allowed, sizeof allowed);
    if (allowed[0]) append(out, cap, &n, " (%s)", allowed);
    if (d->def[0]) append(out, cap, &n, " (default \"%s\")", d->def);
    if (d->env) append(out, cap, &n, " [env %s]", d->env);
    return n;
}

const char *opts_value_name(const OptDef *d) {
    return d->type == OPT_BOOL ? "" : type_name(d->type);
}

/* "  -e, --endpoints strings" or "      --data-dir string": a flag's left column in --help. */
static void help_left(const OptDef *d, char *out, size_t cap) {
    const char *type = opts_value_name(d);
    if (d->short_name)
        snprintf(out, cap, "  -%c, --%s%s%s", d->short_name, d->name, *type ? " " : "", type);
    else
        snprintf(out, cap, "      --%s%s%s", d->name, *type ? " " : "", type);
}

/* where the help texts start: after the widest left column, but never past HELP_COL_MAX */
#define HELP_COL_MAX 48

void opts_print_help(FILE *f, unsigned cmd) {
    char left[128], text[2048];
    size_t col = sizeof "  -h, --help" - 1;
    for (size_t i = 0; i < N_OPTS; i++) {
        if (!(opt_table[i].commands & cmd)) continue;
        help_left(&opt_table[i], left, sizeof left);
        if (strlen(left) > col) col = strlen(left);
    }
    col += 3;
    if (col > HELP_COL_MAX) col = HELP_COL_MAX;
    fprintf(f, "Flags:\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & cmd)) continue;
        help_left(d, left, sizeof left);
        opts_describe(d, cmd, text, sizeof text);
        if (strlen(left) + 1 > col) /* too wide: the text starts on the next line */
            fprintf(f, "%s\n%*s", left, (int)col, "");
        else
            fprintf(f, "%-*s", (int)col, left);
        help_wrap(f, text, col, col);
    }
    fprintf(f, "%-*s", (int)col, "  -h, --help");
    help_wrap(f, "help for this command", col, col);
}

/* Markdown table cell text: '|', '<' and '>' escaped, no line breaks. */
static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '\n')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

void opts_write_markdown(FILE *f) {
    fputs("# Flags reference\n\n"
          "<!-- Generated from the option table in src/cmd/opts_table.h by `etcdbrctl __flags-md > "
          "docs/flags.md`;\n"
          "     do not edit by hand: the unit test test_opts fails when this file and the table "
          "differ. -->\n\n"
          "Every flag of every command, generated from the one option table that also drives the "
          "parser\nand `--help`. Flag syntax is the Go tool's (pflag): `--name=value`, "
          "`--name value`, `-x value`;\na bool flag alone means true (`--name=false` to turn it "
          "off); list flags take comma-separated\nvalues and may be repeated. Durations use Go's "
          "syntax (`20s`, `1h30m`, `500ms`).\n\n"
          "Precedence: command line > environment variable > config file (`--config-file`, "
          "`server` and\n`run`; docs/config-file.md) > default.\n\n"
          "A value outside a flag's range or allowed values is a usage error (exit 2) naming the "
          "flag and\nwhat it allows, wherever it was given. A mistyped flag gets the nearest "
          "flag of the command\nsuggested.\n\n"
          "Flags marked **not implemented yet** or **ignored** are accepted so that the Go "
          "tool's command\nlines and config files keep working, but they have no effect; giving "
          "one (command line,\nenvironment or config file) logs a warning at start.\n\n",
          f);
    fputs("## Flags\n\n"
          "| flag | type | default | allowed | environment | commands | description |\n"
          "|---|---|---|---|---|---|---|\n",
          f);
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        char cmds[128], allowed[256], why[256];
        commands_text(d->commands, cmds, sizeof cmds);
        if (!cmds[0]) continue; /* only for commands not built yet (compact, copy) */
        fputs("| ", f);
        if (d->short_name) fprintf(f, "`-%c`, ", d->short_name);
        fprintf(f, "`--%s` | %s | ", d->name, type_name(d->type));
        if (d->def[0]) {
            fputc('`', f);
            md_cell(f, d->def);
            fputc('`', f);
        }
        allowed_text(d, 1, allowed, sizeof allowed);
        fputs(" | ", f);
        md_cell(f, allowed);
        fputs(" | ", f);
        if (d->env) fprintf(f, "`%s`", d->env);
        fprintf(f, " | %s | ", cmds);
        const char *status = support_text(d, why, sizeof why);
        if (status) {
            fputs("**", f);
            md_cell(f, status);
            fputs(".** ", f);
        }
        md_cell(f, d->help);
        if (d->ignored_in) {
            char in[128];
            commands_text(d->ignored_in, in, sizeof in);
            fputs(" **Ignored by ", f);
            md_cell(f, in);
            fputs(": ", f);
            md_cell(f, d->ignored_in_why);
            fputs(".**", f);
        }
        fputs(" |\n", f);
    }
    static const OptSupport kinds[] = {OPT_UNIMPLEMENTED, OPT_IGNORED};
    static const char *const titles[] = {
        "## Not implemented yet\n\nAccepted for compatibility; their features are not built "
        "yet.\n\n",
        "## Ignored on purpose\n\nThe Go tool's settings that have no meaning here.\n\n"};
    for (size_t k = 0; k < 2; k++) {
        fprintf(f, "\n%s", titles[k]);
        size_t listed = 0;
        for (size_t i = 0; i < N_OPTS; i++) {
            const OptDef *d = &opt_table[i];
            char cmds[128];
            commands_text(d->commands, cmds, sizeof cmds);
            if (kinds[k] == OPT_IGNORED && d->support != OPT_IGNORED && d->ignored_in) {
                commands_text(d->ignored_in, cmds, sizeof cmds);
                fprintf(f, "- `--%s` (%s): %s\n", d->name, cmds, d->ignored_in_why);
                listed++;
                continue;
            }
            if (d->support != kinds[k] || !cmds[0]) continue;
            fprintf(f, "- `--%s` (%s)", d->name, cmds);
            if (d->support == OPT_IGNORED) fprintf(f, ": %s", d->ignored);
            fputs("\n", f);
            listed++;
        }
        if (!listed) fputs("None.\n", f);
    }
}

void opts_log_effective(const Opts *o, const char *command) {
    char line[16384];
    size_t n = 0;
    line[0] = '\0';
    for (size_t i = 0; i < N_OPTS; i++) {
        const OptDef *d = &opt_table[i];
        if (!(d->commands & o->cmd)) continue;
        const char *v = value_shown(d, o->v[i].value ? o->v[i].value : d->def);
        /* every setting at debug, one per line; at info only what was set */
        log_debug("setting %s = %s%s", d->name, v, o->v[i].origin ? "" : " (default)");
        if (o->v[i].origin == FROM_DEFAULT || n >= sizeof line - 1) continue;
        int w = snprintf(line + n, sizeof line - n, " --%s=%s", d->name, v);
        if (w > 0) n += (size_t)w;
    }
    log_info("etcdbrctl %s %s; set:%s (every setting at --log-level=debug)", command,
             ETCDBR_VERSION, n ? line : " nothing, all defaults");
}
