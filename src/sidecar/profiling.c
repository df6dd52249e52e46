/* profiling: see profiling.h. Each document is a jansson object; the text view is rendered from
 * it (one "key: value" line per scalar, one line per element of a list of objects), so the two
 * never say different things. */
#include "profiling.h"
#include "../common/err.h"
#include "../common/phase.h"
#include "../common/proc.h"
#include "../store/objhttp.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* A KiB count as bytes, or null when unknown (< 0). */
static json_t *kib_bytes(int64_t kib) {
    return kib < 0 ? json_null() : json_integer(kib * 1024);
}

static json_t *bytes_or_null(int64_t b) {
    return b < 0 ? json_null() : json_integer(b);
}

static json_t *doc_memory(void) {
    ProcStatus st;
    ProcHeap h;
    proc_status_read(&st);
    proc_heap(&h);
    return json_pack("{s:o, s:o, s:o, s:o, s:{s:s, s:o, s:o, s:o, s:o, s:o}}", "rss_bytes",
                     kib_bytes(st.vm_rss_kib), "rss_peak_bytes", kib_bytes(st.vm_hwm_kib),
                     "vm_size_bytes", kib_bytes(st.vm_size_kib), "threads",
                     st.threads < 0 ? json_null() : json_integer(st.threads), "heap", "source",
                     proc_heap_source(), "arena_bytes", bytes_or_null(h.arena), "in_use_bytes",
                     bytes_or_null(h.in_use), "free_bytes", bytes_or_null(h.free), "mmapped_bytes",
                     bytes_or_null(h.mmapped), "releasable_bytes", bytes_or_null(h.releasable));
}

static json_t *doc_threads(void) {
    ProcThread *t = calloc(PROFILING_THREADS_MAX, sizeof *t);
    size_t n = 0, total = 0;
    if (!t || proc_threads(t, PROFILING_THREADS_MAX, &n, &total)) {
        free(t);
        return NULL;
    }
    json_t *list = json_array(), *states = json_object();
    for (size_t i = 0; i < n; i++) {
        char st[2] = {t[i].state, '\0'};
        json_array_append_new(list,
                              json_pack("{s:i, s:s, s:s, s:s}", "tid", t[i].tid, "name", t[i].name,
                                        "state", st, "state_name", proc_state_name(t[i].state)));
        json_t *c = json_object_get(states, st);
        json_object_set_new(states, st, json_integer(c ? json_integer_value(c) + 1 : 1));
    }
    free(t);
    return json_pack("{s:i, s:I, s:I, s:b, s:o, s:o}", "pid", (int)getpid(), "count",
                     (json_int_t)total, "listed", (json_int_t)n, "truncated", total > n, "states",
                     states, "threads", list);
}

static json_t *doc_fds(void) {
    ProcFd *f = calloc(PROFILING_FDS_MAX, sizeof *f);
    size_t n = 0, total = 0;
    if (!f || proc_fds(f, PROFILING_FDS_MAX, &n, &total)) {
        free(f);
        return NULL;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_pack("{s:i, s:s}", "fd", f[i].fd, "target", f[i].target));
    free(f);
    struct rlimit rl;
    json_t *lim = json_null();
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        lim = json_integer((json_int_t)rl.rlim_cur);
    return json_pack("{s:I, s:I, s:b, s:o, s:o}", "count", (json_int_t)total, "listed",
                     (json_int_t)n, "truncated", total > n, "limit", lim, "fds", list);
}

static json_t *doc_store(void) {
    ObjHttpInflight in[OBJHTTP_INFLIGHT_SLOTS];
    ObjHttpInflightStats st;
    objhttp_inflight_list(in, OBJHTTP_INFLIGHT_SLOTS, &st);
    json_t *list = json_array(), *by = json_object();
    for (size_t i = 0; i < st.n; i++) {
        json_array_append_new(list,
                              json_pack("{s:s, s:s, s:I}", "provider", in[i].provider, "method",
                                        in[i].method, "age_ms", (json_int_t)in[i].age_ms));
        json_t *c = json_object_get(by, in[i].provider);
        json_object_set_new(by, in[i].provider, json_integer(c ? json_integer_value(c) + 1 : 1));
    }
    return json_pack("{s:I, s:I, s:I, s:b, s:o, s:o}", "in_flight", (json_int_t)st.in_flight,
                     "started", (json_int_t)st.started, "finished", (json_int_t)st.finished,
                     "truncated", st.in_flight > st.n, "by_provider", by, "requests", list);
}

static double ms(int64_t ns) {
    return (double)ns / 1e6;
}

static json_t *timer_json(const PhaseTimer *t) {
    json_t *list = json_array();
    for (size_t i = 0; i < t->n; i++)
        json_array_append_new(list,
                              json_pack("{s:s, s:f}", "name", t->v[i].name, "ms", ms(t->v[i].ns)));
    if (t->dropped_ns)
        json_array_append_new(list,
                              json_pack("{s:s, s:f}", "name", "other", "ms", ms(t->dropped_ns)));
    return json_pack("{s:b, s:s, s:I, s:f, s:f, s:o}", "ok", t->ok, "label", t->label, "ended_unix",
                     (json_int_t)t->ended_unix_s, "total_ms", ms(t->total_ns), "sum_ms",
                     ms(phase_sum_ns(t)), "phases", list);
}

static json_t *doc_phases(void) {
    json_t *d = json_object();
    for (int k = 0; k < PHASE_LAST_N; k++) {
        PhaseTimer t;
        json_object_set_new(d, phase_last_name((PhaseLastKind)k),
                            phase_last_get((PhaseLastKind)k, &t) ? timer_json(&t) : json_null());
    }
    return d;
}

typedef struct {
    const char *name;       /* path under the prefix */
    json_t *(*build)(void); /* new reference, NULL on failure (err_msg says why) */
    const char *what;
} Doc;

static const Doc docs[] = {
    {"memory", doc_memory, "RSS, peak RSS and virtual size (/proc/self/status); the C heap"},
    {"threads", doc_threads, "every thread: tid, name, state (/proc/self/task)"},
    {"fds", doc_fds, "open file descriptors and what each is (/proc/self/fd)"},
    {"store", doc_store, "object store HTTP requests in flight: provider, method, age"},
    {"phases", doc_phases, "time per phase of the last full and delta snapshot and restore"},
};
#define N_DOCS (sizeof docs / sizeof docs[0])

static json_t *doc_index(void) {
    json_t *list = json_array();
    for (size_t i = 0; i < N_DOCS; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s%s", PROFILING_PREFIX, docs[i].name);
        json_array_append_new(list, json_pack("{s:s, s:s}", "path", path, "what", docs[i].what));
    }
    return json_pack("{s:o, s:s}", "documents", list, "formats",
                     "JSON; plain text with ?format=text or Accept: text/plain");
}

/* ---------- the text view ---------- */

static void text_scalar(FILE *f, json_t *v) {
    if (json_is_string(v))
        fputs(json_string_value(v), f);
    else if (json_is_integer(v))
        fprintf(f, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        fprintf(f, "%.3f", json_real_value(v));
    else if (json_is_boolean(v))
        fputs(json_is_true(v) ? "true" : "false", f);
    else
        fputs("-", f);
}

static void text_value(FILE *f, const char *key, json_t *v, int depth);

/* An object's members: scalars on one line "k=v ..." when inline, else one per line. */
static void text_object(FILE *f, json_t *o, int depth, int inline_) {
    const char *k;
    json_t *v;
    int first = 1;
    json_object_foreach(o, k, v) {
        if (inline_ && !json_is_object(v) && !json_is_array(v)) {
            fprintf(f, "%s%s=", first ? "" : " ", k);
            text_scalar(f, v);
            first = 0;
        } else if (!inline_) {
            text_value(f, k, v, depth);
        }
    }
    if (inline_) fputc('\n', f);
    json_object_foreach(o, k, v) {
        if (inline_ && (json_is_object(v) || json_is_array(v))) text_value(f, k, v, depth + 1);
    }
}

static void text_value(FILE *f, const char *key, json_t *v, int depth) {
    fprintf(f, "%*s%s:", depth * 2, "", key);
    if (json_is_object(v)) {
        fputc('\n', f);
        text_object(f, v, depth + 1, 0);
    } else if (json_is_array(v)) {
        fprintf(f, " %zu\n", json_array_size(v));
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            fprintf(f, "%*s- ", (depth + 1) * 2, "");
            if (json_is_object(e)) {
                text_object(f, e, depth + 2, 1);
            } else {
                text_scalar(f, e);
                fputc('\n', f);
            }
        }
    } else {
        fputc(' ', f);
        text_scalar(f, v);
        fputc('\n', f);
    }
}

/* 1 when the caller asked for text: ?format=text, or (without ?format) an Accept naming
 * text/plain and not application/json. */
static int wants_text(const HttpRequest *req) {
    const char *fmt = http_request_query(req, "format");
    if (fmt) return !strcmp(fmt, "text");
    const char *acc = http_request_header(req, "Accept");
    return acc && strstr(acc, "text/plain") && !strstr(acc, "application/json");
}

static void respond_doc(const HttpRequest *req, HttpResponse *resp, json_t *d) {
    char *body = NULL;
    size_t len = 0;
    const char *type = "application/json";
    if (wants_text(req)) {
        FILE *f = open_memstream(&body, &len);
        if (f) {
            text_object(f, d, 0, 0);
            fclose(f);
        }
        type = "text/plain; charset=utf-8";
    } else {
        body = json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(9));
        len = body ? strlen(body) : 0;
    }
    json_decref(d);
    if (!body) {
        http_respond(resp, 500, NULL, "out of memory\n");
        return;
    }
    free(resp->body);
    resp->status = 200;
    resp->content_type = type;
    resp->body = body;
    resp->body_len = len;
}

int profiling_handle(const HttpRequest *req, HttpResponse *resp) {
    const char *path = http_request_path(req);
    size_t pl = strlen(PROFILING_PREFIX);
    if (strcmp(path, "/debug/pprof") && strncmp(path, PROFILING_PREFIX, pl)) return 0;
    const char *m = http_request_method(req);
    if (strcmp(m, "GET") && strcmp(m, "HEAD")) {
        http_respond(resp, 405, NULL, "method not allowed\n");
        resp->allow = "GET, HEAD";
        return 1;
    }
    const char *name = strlen(path) > pl ? path + pl : "";
    json_t *d = NULL;
    if (!*name) {
        d = doc_index();
    } else {
        size_t i = 0;
        while (i < N_DOCS && strcmp(docs[i].name, name))
            i++;
        if (i == N_DOCS) {
            http_respond(resp, 404, NULL, "404 page not found\n");
            return 1;
        }
        err_set(ERR_NOMEM, "out of memory"); /* unless the builder says otherwise */
        d = docs[i].build();
    }
    if (!d) {
        char msg[600];
        snprintf(msg, sizeof msg, "cannot build %s: %s\n", path, err_msg());
        http_respond(resp, 500, NULL, msg);
        return 1;
    }
    respond_doc(req, resp, d);
    return 1;
}
