/* setlist: see setlist.h. */
#include "setlist.h"
#include "verifier.h"
#include "../common/err.h"
#include "../common/mem.h"

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

struct SetList {
    Store *store; /* borrowed */
    Snapshot *all, *live;
    size_t n_all, n_live, n_sets;
    size_t *live_to_all;
    int *set_of; /* per object of all: set number (1-based), 0 = none */
    ObjStatus *status;
    VerifyPlanSet *ps;
    VerifyReport plan; /* the sets (and faults) of verify's plan */
};

void setlist_free(SetList *l) {
    if (!l) return;
    verify_plan_free(l->ps, l->n_sets);
    verify_report_free(&l->plan);
    FREE_ALL(l->status, l->set_of, l->live_to_all, l->live, l->all, l);
}

/* Marks each object of l->all with its set or why it is in none. */
static void classify(SetList *l) {
    for (size_t k = 0; k < l->n_sets; k++) {
        size_t fi = l->live_to_all[l->ps[k].full];
        l->set_of[fi] = (int)k + 1;
        l->status[fi] = IN_SET;
        for (size_t d = 0; d < l->ps[k].n_deltas; d++) {
            size_t di = l->live_to_all[l->ps[k].deltas[d]];
            if (!l->set_of[di]) l->set_of[di] = (int)k + 1;
            l->status[di] = IN_SET;
        }
    }
    for (size_t f = 0; f < l->plan.n_faults; f++) {
        if (l->plan.faults[f].kind != VERIFY_OTHER_HISTORY) continue;
        for (size_t i = 0; i < l->n_all; i++)
            if (l->status[i] != IN_SET && !l->all[i].abandoned &&
                strcmp(l->all[i].key, l->plan.faults[f].object) == 0)
                l->status[i] = OTHER_HISTORY;
    }
}

int setlist_build(Store *store, SetList **out) {
    *out = NULL;
    SetList *l = calloc(1, sizeof *l);
    if (!l) return err_set(ERR_NOMEM, "out of memory");
    l->store = store;
    int rc = store_list_ex(store, 1, &l->all, &l->n_all, NULL, NULL);
    if (rc) goto fail;
    l->live = calloc(l->n_all + 1, sizeof *l->live);
    l->live_to_all = calloc(l->n_all + 1, sizeof *l->live_to_all);
    l->set_of = calloc(l->n_all + 1, sizeof *l->set_of);
    l->status = calloc(l->n_all + 1, sizeof *l->status);
    if (!l->live || !l->live_to_all || !l->set_of || !l->status) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < l->n_all; i++) {
        if (l->all[i].is_chunk) continue;
        if (l->all[i].abandoned) {
            l->status[i] = ABANDONED;
            continue;
        }
        l->live_to_all[l->n_live] = i;
        l->live[l->n_live++] = l->all[i];
        l->status[i] = NO_FULL_BEFORE; /* until a set takes it */
    }
    /* the sets as verify and restore see them; faults (gaps...) are verify's business */
    if ((rc = verify_plan(l->live, l->n_live, 1, &l->ps, &l->n_sets, &l->plan))) goto fail;
    classify(l);
    *out = l;
    return 0;
fail:
    setlist_free(l);
    return rc;
}

int setlist_write_json(const SetList *l, FILE *f) {
    json_t *root = json_object(), *sets = json_array(), *others = json_array();
    for (size_t k = 0; k < l->n_sets; k++) {
        const VerifySet *vs = &l->plan.sets[k];
        json_t *deltas = json_array();
        int64_t bytes = l->all[l->live_to_all[l->ps[k].full]].size;
        for (size_t d = 0; d < l->ps[k].n_deltas; d++) {
            const Snapshot *s = &l->all[l->live_to_all[l->ps[k].deltas[d]]];
            json_array_append_new(deltas, obj_json(s));
            if (bytes >= 0 && s->size >= 0) bytes += s->size;
        }
        json_array_append_new(
            sets, json_pack("{s:I,s:b,s:s,s:I,s:I,s:I,s:o,s:o}", "set", (json_int_t)k + 1, "latest",
                            vs->latest, "history", vs->history, "first_revision",
                            (json_int_t)vs->first_revision, "last_revision",
                            (json_int_t)vs->last_revision, "size", (json_int_t)bytes, "full",
                            obj_json(&l->all[l->live_to_all[l->ps[k].full]]), "deltas", deltas));
    }
    for (size_t i = 0; i < l->n_all; i++) {
        if (l->all[i].is_chunk || l->status[i] == IN_SET) continue;
        json_t *oj = obj_json(&l->all[i]);
        json_object_set_new(oj, "status", json_string(status_name(l->status[i])));
        json_array_append_new(others, oj);
    }
    json_object_set_new(root, "store", json_string(store_describe(l->store)));
    json_object_set_new(root, "sets", sets);
    json_object_set_new(root, "other_objects", others);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return err_set(ERR_NOMEM, "out of memory");
    fprintf(f, "%s\n", text);
    free(text);
    return fflush(f) == 0 ? 0 : err_set(ERR_IO, "write the list: output error");
}

int setlist_write_table(const SetList *l, FILE *f) {
    fprintf(f, "store: %s\n", store_describe(l->store));
    fprintf(f, "%-6s %-5s %-19s %-20s %10s  %-11s %-9s %-16s %-14s %s\n", "SET", "KIND",
            "REVISIONS", "CREATED (UTC)", "SIZE", "COMPRESSION", "ENCRYPTED", "HISTORY", "STATUS",
            "NAME");
    for (size_t k = 0; k < l->n_sets; k++) {
        char set[24];
        snprintf(set, sizeof set, "%zu", k + 1);
        const char *st = l->plan.sets[k].latest ? "latest" : "";
        row(f, set, &l->all[l->live_to_all[l->ps[k].full]], st);
        for (size_t d = 0; d < l->ps[k].n_deltas; d++)
            row(f, set, &l->all[l->live_to_all[l->ps[k].deltas[d]]], st);
    }
    size_t others = 0;
    for (size_t i = 0; i < l->n_all; i++) {
        if (l->all[i].is_chunk || l->status[i] == IN_SET) continue;
        row(f, "-", &l->all[i], status_name(l->status[i]));
        others++;
    }
    fprintf(f, "%zu sets", l->n_sets);
    if (l->n_sets) {
        const VerifySet *last = &l->plan.sets[l->n_sets - 1];
        fprintf(f, ", the latest: revisions %lld-%lld (history %s)",
                (long long)last->first_revision, (long long)last->last_revision,
                last->history[0] ? last->history : "untagged");
    }
    fprintf(f, "; %zu objects in no set%s\n", others,
            others ? " (marked -: abandoned, other-history or no-full-before)" : "");
    return fflush(f) == 0 ? 0 : err_set(ERR_IO, "write the list: output error");
}
