/* fuzz_config_file: libFuzzer target over config_file_apply_buffer, the reader of --config-file
 * YAML. The input is the file. It is applied to fresh server and restore option sets; a failure
 * must be ERR_INVALID (or ERR_NOMEM) with a "<name>:<line>:<column>: " position and leave every
 * option as it was; a success must leave every option valid for its type. */
#include "cmd/config_file.h"
#include "cmd/opts.h"
#include "common/err.h"
#include "common/log.h"
#include "common/timeutil.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_config_file: check failed: %s (line %d)\n", #cond, __LINE__);    \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_positioned(const char *msg) {
    const char *p = msg;
    CHECK(strncmp(p, "fuzz.yaml:", 10) == 0);
    p += 10;
    CHECK(isdigit((unsigned char)*p));
    while (isdigit((unsigned char)*p))
        p++;
    CHECK(*p++ == ':');
    CHECK(isdigit((unsigned char)*p));
    while (isdigit((unsigned char)*p))
        p++;
    CHECK(p[0] == ':' && p[1] == ' ');
}

static void check_valid(const Opts *o, const OptDef *d) {
    const char *v = opt_str(o, d->name);
    char *end;
    int64_t ms;
    switch (d->type) {
    case OPT_BOOL:
        CHECK(opt_bool(o, d->name) == 0 || opt_bool(o, d->name) == 1);
        CHECK(!strcmp(v, "true") || !strcmp(v, "false"));
        break;
    case OPT_INT:
        strtoll(v, &end, 10);
        CHECK(*v && !*end);
        break;
    case OPT_DURATION:
        CHECK(duration_parse_ms(v, &ms) == 0);
        break;
    case OPT_LIST: {
        size_t n;
        const char *const *items = opt_list(o, d->name, &n);
        for (size_t i = 0; i < n; i++)
            CHECK(items[i][0] && !strchr(items[i], ','));
        break;
    }
    default:
        break;
    }
}

static void run(unsigned cmd, const uint8_t *data, size_t size) {
    Opts *o = NULL, *fresh = NULL;
    int help;
    CHECK(opts_parse(cmd, 0, NULL, &o, &help) == 0);
    CHECK(opts_parse(cmd, 0, NULL, &fresh, &help) == 0);
    ConfigFileStats st;
    int rc = config_file_apply_buffer(o, (const char *)data, size, "fuzz.yaml", &st);
    CHECK(rc == 0 || rc == ERR_INVALID || rc == ERR_NOMEM);
    if (rc == ERR_INVALID) check_positioned(err_msg());

    size_t n;
    const OptDef *t = opts_table(&n);
    for (size_t i = 0; i < n; i++) {
        if (!(t[i].commands & cmd)) continue;
        if (rc) {
            CHECK(strcmp(opt_str(o, t[i].name), opt_str(fresh, t[i].name)) == 0);
        } else {
            check_valid(o, &t[i]);
            CHECK(opt_is_set(o, t[i].name) == opt_is_set(fresh, t[i].name));
        }
    }
    opts_free(fresh);
    opts_free(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int quiet;
    if (!quiet) {
        log_setup(LOG_ERROR, 0); /* unknown-key warnings would drown the fuzzer's output */
        quiet = 1;
    }
    run(CMD_SERVER, data, size);
    run(CMD_RESTORE, data, size);
    return 0;
}
