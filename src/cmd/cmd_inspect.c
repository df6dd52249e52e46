/* cmd_inspect: `etcdbrctl get`, `diff` and `history`: a backup read in place of a restore
 * (inspect/inspect_read.h), answered as etcdctl would answer on the live cluster at that revision
 * (inspect/inspect_print.h; docs/inspect.md). */
#include "cmd.h"
#include "server_common.h"
#include "../backup/delta.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/proc.h"
#include "../inspect/inspect_print.h"
#include "../inspect/inspect_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCRATCH_PREFIX "etcdbr-inspect-"

/* What one command reads and how it answers. */
typedef struct Inspect {
    const Opts *o;
    const char *what; /* the command's name */
    KeyRange range;
    InspectView views[INSPECT_MAX_VIEWS];
    size_t n_views;
    int keep_values;
    int older_deltas;
    InspectFormat fmt;
    Store *store;
    char *scratch;
    const char *temp_dir; /* where scratch is: --cache-dir or --snapstore-temp-directory */
    int lock_fd, made_temp;
    RecSort *sort;
    InspectResult res;
} Inspect;

/* --revision or --time (never both) into the one view of get and history. */
static int parse_point(Inspect *in) {
    const OptValues *v = opts_values(in->o);
    int code = setup_parse_time("time", v->time, &in->views[0].time_ns);
    if (!code && v->revision && in->views[0].time_ns) {
        log_error("--revision and --time exclude each other");
        code = EXIT_USAGE;
    }
    in->views[0].revision = v->revision;
    return code;
}

/* KEY [RANGE_END] and --prefix/--from-key into in->range; a key is required unless optional. */
static int parse_range(Inspect *in, int optional) {
    size_t n = 0;
    const char *const *args = opts_args(in->o, &n);
    const OptValues *v = opts_values(in->o);
    int prefix = opts_has(in->o, "prefix") && v->prefix;
    int from_key = opts_has(in->o, "from-key") && v->from_key;
    if (n == 0 && !optional) {
        log_error("%s: give the KEY (etcdbrctl help %s)", in->what, in->what);
        return EXIT_USAGE;
    }
    if (n > 1 && !strcmp(in->what, "history")) {
        log_error("history takes one KEY");
        return EXIT_USAGE;
    }
    if (n == 0) prefix = 1; /* diff without a key: every key */
    if (keyrange_make(n ? args[0] : "", n > 1 ? args[1] : NULL, prefix, from_key, &in->range)) {
        log_error("%s: %s", in->what, err_msg());
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

static void parse_format(Inspect *in) {
    const char *f = opts_values(in->o)->output;
    in->fmt = !strcmp(f, "json")    ? INSPECT_JSON
              : !strcmp(f, "table") ? INSPECT_TABLE
                                    : INSPECT_SIMPLE;
    if (in->fmt == INSPECT_TABLE && strcmp(in->what, "get"))
        in->fmt = INSPECT_SIMPLE; /* one form */
}

/* The store, the scratch dir and the sorter; then the records read. */
static int run_read(Inspect *in) {
    const OptValues *v = opts_values(in->o);
    int code = setup_store(in->o, 0, &in->store);
    if (code) return code;
    opts_log_effective(in->o, in->what);
    const char *cache = *opts_values(in->o)->cache_dir ? opts_values(in->o)->cache_dir : NULL;
    in->temp_dir = cache ? cache : v->snapstore_temp_directory;
    int rc = fs_scratch_create(in->temp_dir, SCRATCH_PREFIX, in->what, &in->scratch, &in->lock_fd,
                               &in->made_temp);
    if (!rc) rc = recsort_new(in->scratch, 0, &in->sort);
    InspectConfig c = {.store = in->store,
                       .scratch = in->scratch,
                       .max_fetchers = (int)v->max_fetchers,
                       .stop = cmd_install_stop_signals(),
                       .range = &in->range,
                       .keep_values = in->keep_values,
                       .views = in->views,
                       .n_views = in->n_views,
                       .cache_dir = cache,
                       .older_deltas = in->older_deltas};
    if (!rc) rc = inspect_read(&c, in->sort, &in->res);
    if (!rc) rc = recsort_finish(in->sort);
    if (!rc) return EXIT_OK;
    log_error("%s: %s", in->what, err_msg());
    return rc == ERR_NOT_FOUND ? EXIT_NO_SNAPSHOT : in->res.target_refused ? EXIT_USAGE : EXIT_FAIL;
}

static int finish(Inspect *in, int code, int rc, uint64_t count, const char *counted) {
    if (rc) {
        log_error("%s: %s", in->what, err_msg());
        code = EXIT_FAIL;
    } else if (code == EXIT_OK) {
        log_info("%s done: %llu %s, %llu records read from %zu objects (%zu sort runs spilled), "
                 "peak RSS %lld KiB",
                 in->what, (unsigned long long)count, counted, (unsigned long long)in->res.records,
                 in->res.n_objects, in->sort ? recsort_spills(in->sort) : 0,
                 (long long)proc_peak_rss_kib());
    }
    recsort_free(in->sort);
    inspect_result_free(&in->res);
    if (in->scratch) {
        fs_scratch_dir_remove(in->scratch, in->what);
        fs_scratch_temp_dir_release(in->temp_dir, in->made_temp);
    }
    if (in->lock_fd >= 0) close(in->lock_fd);
    free(in->scratch);
    store_free(in->store);
    keyrange_free(&in->range);
    return code;
}

int cmd_get(const Opts *o) {
    Inspect in = {.o = o, .what = "get", .n_views = 1, .lock_fd = -1};
    int code = parse_range(&in, 0);
    parse_format(&in);
    if (!code) code = parse_point(&in);
    in.keep_values = !opts_values(o)->keys_only || in.fmt == INSPECT_TABLE;
    if (!code) code = run_read(&in);
    uint64_t count = 0;
    int rc = 0;
    if (!code)
        rc = inspect_print_get(in.sort, stdout, in.fmt, opts_values(o)->keys_only,
                               opts_values(o)->limit, in.res.revision[0], &count);
    return finish(&in, code, rc, count, "keys");
}

int cmd_diff(const Opts *o) {
    Inspect in = {.o = o, .what = "diff", .n_views = 2, .lock_fd = -1};
    int code = parse_range(&in, 1);
    parse_format(&in);
    if (!code)
        code = setup_parse_time("from-time", opts_values(o)->from_time, &in.views[0].time_ns);
    if (!code) code = setup_parse_time("to-time", opts_values(o)->to_time, &in.views[1].time_ns);
    in.views[0].revision = opts_values(o)->from_revision;
    in.views[1].revision = opts_values(o)->to_revision;
    if (!code && (!in.views[0].revision == !in.views[0].time_ns ||
                  (in.views[1].revision && in.views[1].time_ns))) {
        log_error("diff: give --from-revision or --from-time, and at most one of --to-revision "
                  "and --to-time (neither: the latest)");
        code = EXIT_USAGE;
    }
    if (!code && in.views[1].revision && in.views[0].revision > in.views[1].revision) {
        log_error("diff: --from-revision %lld is after --to-revision %lld",
                  (long long)in.views[0].revision, (long long)in.views[1].revision);
        code = EXIT_USAGE;
    }
    if (!code) code = run_read(&in);
    uint64_t count = 0;
    int rc = 0;
    if (!code && in.res.revision[0] > in.res.revision[1]) {
        log_error("diff: the from point (revision %lld) is after the to point (revision %lld)",
                  (long long)in.res.revision[0], (long long)in.res.revision[1]);
        code = EXIT_USAGE;
    }
    if (!code)
        rc = inspect_print_diff(in.sort, stdout, in.fmt, in.res.revision[0], in.res.revision[1],
                                &count);
    return finish(&in, code, rc, count, "keys changed");
}

int cmd_history(const Opts *o) {
    Inspect in = {.o = o, .what = "history", .n_views = 1, .lock_fd = -1, .older_deltas = 1};
    int code = parse_range(&in, 0);
    parse_format(&in);
    if (!code) code = parse_point(&in);
    if (!code) code = run_read(&in);
    uint64_t count = 0;
    int rc = 0;
    if (!code)
        rc = inspect_print_history(in.sort, stdout, in.fmt, in.range.key, in.range.key_len,
                                   in.res.objects, &count);
    return finish(&in, code, rc, count, "events");
}
