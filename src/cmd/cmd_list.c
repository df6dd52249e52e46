/* cmd_list: `etcdbrctl list`: the store's backup sets (a full snapshot and the deltas after it
 * up to the next full snapshot, as verify plans them), oldest first, and the objects in no set:
 * abandoned by a newer history, of another history than the set they fall in, or deltas before
 * the first full snapshot. A table for people (text), or JSON with -o json. Read-only: one
 * listing of the store, no object is downloaded. */
#include "cmd.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../restore/verifier.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *compression_name(const char *suffix) {
    if (!suffix[0]) return "none";
    if (strcmp(suffix, ".gz") == 0) return "gzip";
    if (strcmp(suffix, ".zlib") == 0) return "zlib";
    if (strcmp(suffix, ".Z") == 0) return "lzw";
    if (strcmp(suffix, ".zst") == 0) return "zstd";
    return suffix;
}

static void time_text(int64_t unix_s, char *buf, size_t cap) {
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, cap, "%lld", (long long)unix_s);
}

static void size_text(int64_t n, char *buf, size_t cap) {
    if (n < 0)
        snprintf(buf, cap, "?");
    else if (n < 1024)
        snprintf(buf, cap, "%lld B", (long long)n);
    else if (n < 1048576)
        snprintf(buf, cap, "%.1f KiB", (double)n / 1024.0);
    else if (n < 1073741824LL)
        snprintf(buf, cap, "%.1f MiB", (double)n / 1048576.0);
    else
        snprintf(buf, cap, "%.2f GiB", (double)n / 1073741824.0);
}

/* What an object outside every set is. */
typedef enum { IN_SET = 0, ABANDONED, OTHER_HISTORY, NO_FULL_BEFORE } ObjStatus;

static const char *status_name(ObjStatus s) {
    return s == ABANDONED ? "abandoned" : s == OTHER_HISTORY ? "other-history" : "no-full-before";
}

static json_t *obj_json(const Snapshot *s) {
    char when[40];
    time_text(s->created_on, when, sizeof when);
    return json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:s,s:I,s:s,s:b,s:s,s:b,s:b}", "key", s->key, "name",
                     s->snap_name, "kind", s->kind == SNAP_FULL ? "full" : "delta",
                     "start_revision", (json_int_t)s->start_revision, "last_revision",
                     (json_int_t)s->last_revision, "created", (json_int_t)s->created_on,
                     "created_time", when, "size", (json_int_t)s->size, "compression",
                     compression_name(s->compression_suffix), "encrypted", s->encrypted, "history",
                     s->history, "final", s->is_final, "abandoned", s->abandoned);
}

static void row(FILE *f, const char *set, const Snapshot *s, const char *status) {
    char when[40], size[32], revs[48];
    time_text(s->created_on, when, sizeof when);
    size_text(s->size, size, sizeof size);
    snprintf(revs, sizeof revs, "%lld-%lld", (long long)s->start_revision,
             (long long)s->last_revision);
    fprintf(f, "%-6s %-5s %-19s %-20s %10s  %-11s %-9s %-16s %-14s %s\n", set,
            s->kind == SNAP_FULL ? "full" : "delta", revs, when, size,
            compression_name(s->compression_suffix), s->encrypted ? "yes" : "no",
            s->history[0] ? s->history : "untagged", status, s->snap_name);
}

int cmd_list(const Opts *o) {
    Store *store = NULL;
    Snapshot *all = NULL, *live = NULL;
    size_t n_all = 0, n_live = 0, n_sets = 0;
    size_t *live_to_all = NULL;
    int *set_of = NULL; /* per object of all: set number (1-based), 0 = none */
    ObjStatus *status = NULL;
    VerifyPlanSet *ps = NULL;
    VerifyReport scratch;
    memset(&scratch, 0, sizeof scratch);
    int json = strcmp(opt_str(o, "output"), "json") == 0;
    int code = setup_store(o, 0, &store);
    if (code) return code;
    opts_log_effective(o, "list");
    int rc = store_list_ex(store, 1, &all, &n_all, NULL, NULL);
    if (rc) {
        log_error("list: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    live = calloc(n_all + 1, sizeof *live);
    live_to_all = calloc(n_all + 1, sizeof *live_to_all);
    set_of = calloc(n_all + 1, sizeof *set_of);
    status = calloc(n_all + 1, sizeof *status);
    if (!live || !live_to_all || !set_of || !status) {
        log_error("list: out of memory");
        code = EXIT_FAIL;
        goto done;
    }
    for (size_t i = 0; i < n_all; i++) {
        if (all[i].is_chunk) continue;
        if (all[i].abandoned) {
            status[i] = ABANDONED;
            continue;
        }
        live_to_all[n_live] = i;
        live[n_live++] = all[i];
        status[i] = NO_FULL_BEFORE; /* until a set takes it */
    }
    /* the sets as verify and restore see them; faults (gaps...) are verify's business */
    if ((rc = verify_plan(live, n_live, 1, &ps, &n_sets, &scratch))) {
        log_error("list: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    for (size_t k = 0; k < n_sets; k++) {
        size_t fi = live_to_all[ps[k].full];
        set_of[fi] = (int)k + 1;
        status[fi] = IN_SET;
        for (size_t d = 0; d < ps[k].n_deltas; d++) {
            size_t di = live_to_all[ps[k].deltas[d]];
            if (!set_of[di]) set_of[di] = (int)k + 1;
            status[di] = IN_SET;
        }
    }
    for (size_t f = 0; f < scratch.n_faults; f++) {
        if (scratch.faults[f].kind != VERIFY_OTHER_HISTORY) continue;
        for (size_t i = 0; i < n_all; i++)
            if (status[i] != IN_SET && !all[i].abandoned &&
                strcmp(all[i].key, scratch.faults[f].object) == 0)
                status[i] = OTHER_HISTORY;
    }

    if (json) {
        json_t *root = json_object(), *sets = json_array(), *others = json_array();
        for (size_t k = 0; k < n_sets; k++) {
            const VerifySet *vs = &scratch.sets[k];
            json_t *deltas = json_array();
            int64_t bytes = all[live_to_all[ps[k].full]].size;
            for (size_t d = 0; d < ps[k].n_deltas; d++) {
                const Snapshot *s = &all[live_to_all[ps[k].deltas[d]]];
                json_array_append_new(deltas, obj_json(s));
                if (bytes >= 0 && s->size >= 0) bytes += s->size;
            }
            json_array_append_new(
                sets, json_pack("{s:I,s:b,s:s,s:I,s:I,s:I,s:o,s:o}", "set", (json_int_t)k + 1,
                                "latest", vs->latest, "history", vs->history, "first_revision",
                                (json_int_t)vs->first_revision, "last_revision",
                                (json_int_t)vs->last_revision, "size", (json_int_t)bytes, "full",
                                obj_json(&all[live_to_all[ps[k].full]]), "deltas", deltas));
        }
        for (size_t i = 0; i < n_all; i++) {
            if (all[i].is_chunk || status[i] == IN_SET) continue;
            json_t *oj = obj_json(&all[i]);
            json_object_set_new(oj, "status", json_string(status_name(status[i])));
            json_array_append_new(others, oj);
        }
        json_object_set_new(root, "store", json_string(store_describe(store)));
        json_object_set_new(root, "sets", sets);
        json_object_set_new(root, "other_objects", others);
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
        if (!text) {
            log_error("list: out of memory");
            code = EXIT_FAIL;
            goto done;
        }
        printf("%s\n", text);
        free(text);
    } else {
        printf("store: %s\n", store_describe(store));
        printf("%-6s %-5s %-19s %-20s %10s  %-11s %-9s %-16s %-14s %s\n", "SET", "KIND",
               "REVISIONS", "CREATED (UTC)", "SIZE", "COMPRESSION", "ENCRYPTED", "HISTORY",
               "STATUS", "NAME");
        for (size_t k = 0; k < n_sets; k++) {
            char set[24];
            snprintf(set, sizeof set, "%zu", k + 1);
            const char *st = scratch.sets[k].latest ? "latest" : "";
            row(stdout, set, &all[live_to_all[ps[k].full]], st);
            for (size_t d = 0; d < ps[k].n_deltas; d++)
                row(stdout, set, &all[live_to_all[ps[k].deltas[d]]], st);
        }
        size_t others = 0;
        for (size_t i = 0; i < n_all; i++) {
            if (all[i].is_chunk || status[i] == IN_SET) continue;
            row(stdout, "-", &all[i], status_name(status[i]));
            others++;
        }
        printf("%zu sets", n_sets);
        if (n_sets)
            printf(", the latest: revisions %lld-%lld (history %s)",
                   (long long)scratch.sets[n_sets - 1].first_revision,
                   (long long)scratch.sets[n_sets - 1].last_revision,
                   scratch.sets[n_sets - 1].history[0] ? scratch.sets[n_sets - 1].history
                                                       : "untagged");
        printf("; %zu objects in no set%s\n", others,
               others ? " (marked -: abandoned, other-history or no-full-before)" : "");
    }
    fflush(stdout);
done:
    verify_plan_free(ps, n_sets);
    verify_report_free(&scratch);
    free(status);
    free(set_of);
    free(live_to_all);
    free(live);
    free(all);
    store_free(store);
    return code;
}
