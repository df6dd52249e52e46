/* filter_group: see filter_group.h. Filters are recorded when added and built at the first write
 * from the sink back (each writer wraps the next one), so the first added is the outermost. */
#include "filter_group.h"
#include "../common/err.h"

#include <stdlib.h>
#include <string.h>

#define GROUP_MAX 8

typedef enum { F_COUNT, F_SHA256, F_COMPRESS } FilterKind;

typedef struct {
    FilterKind kind;
    char name[32];
    CompressKind compression;
    IoWriter *w;     /* built writer */
    uint64_t *count; /* F_COUNT: the counter's total */
    uint8_t digest[SHA256_LEN];
} Filter;

struct IoFilterGroup {
    IoWriter *sink;
    Filter f[GROUP_MAX];
    size_t n;
    int built, build_failed, finished;
};

IoFilterGroup *io_filter_group_new(IoWriter *sink) {
    IoFilterGroup *g = calloc(1, sizeof *g);
    if (g) g->sink = sink;
    return g;
}

static int add(IoFilterGroup *g, FilterKind kind, const char *name, CompressKind ck) {
    if (g->built) return err_set(ERR_INVALID, "filter group: filters are added before writing");
    if (g->n == GROUP_MAX)
        return err_set(ERR_INVALID, "filter group: more than %d filters", GROUP_MAX);
    if (strlen(name) >= sizeof g->f[0].name)
        return err_set(ERR_INVALID, "filter group: name \"%s\" too long", name);
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->f[i].name, name) == 0)
            return err_set(ERR_INVALID, "filter group: two filters named \"%s\"", name);
    Filter *f = &g->f[g->n++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->compression = ck;
    strcpy(f->name, name);
    return 0;
}

int io_filter_group_add_count(IoFilterGroup *g, const char *name) {
    return add(g, F_COUNT, name, COMPRESS_NONE);
}

int io_filter_group_add_sha256(IoFilterGroup *g, const char *name) {
    return add(g, F_SHA256, name, COMPRESS_NONE);
}

int io_filter_group_add_compress(IoFilterGroup *g, CompressKind kind) {
    return add(g, F_COMPRESS, "compress", kind);
}

IoWriter *io_filter_group_io(IoFilterGroup *g) {
    if (!g->built && !g->build_failed) {
        IoWriter *next = g->sink;
        for (size_t i = g->n; i-- > 0;) {
            Filter *f = &g->f[i];
            switch (f->kind) {
            case F_COUNT:
                f->w = io_counter_new(next, &f->count);
                break;
            case F_SHA256:
                f->w = sha256_writer_new(next);
                break;
            case F_COMPRESS:
                f->w = compress_writer_new(f->compression, next);
                break;
            }
            if (!f->w) {
                g->build_failed = 1;
                return NULL;
            }
            next = f->w;
        }
        g->built = 1;
    }
    if (g->build_failed) return NULL;
    return g->n ? g->f[0].w : g->sink;
}

int io_filter_group_finish(IoFilterGroup *g) {
    if (!io_filter_group_io(g)) return err_set(ERR_NOMEM, "filter group: out of memory");
    for (size_t i = 0; i < g->n; i++) {
        int rc = io_finish(g->f[i].w);
        if (rc) return rc;
        if (g->f[i].kind == F_SHA256) sha256_writer_digest(g->f[i].w, g->f[i].digest);
    }
    g->finished = 1;
    return 0;
}

static const Filter *find(const IoFilterGroup *g, const char *name, FilterKind kind, int *rc) {
    for (size_t i = 0; i < g->n; i++) {
        if (strcmp(g->f[i].name, name) != 0 || g->f[i].kind != kind) continue;
        if (!g->finished) {
            *rc = err_set(ERR_INVALID, "filter group: \"%s\" read before finish", name);
            return NULL;
        }
        return &g->f[i];
    }
    *rc = err_set(ERR_NOT_FOUND, "filter group: no filter \"%s\" of that kind", name);
    return NULL;
}

int io_filter_group_count(const IoFilterGroup *g, const char *name, uint64_t *out) {
    int rc = 0;
    const Filter *f = find(g, name, F_COUNT, &rc);
    if (f) *out = *f->count;
    return rc;
}

int io_filter_group_sha256(const IoFilterGroup *g, const char *name, uint8_t out[SHA256_LEN]) {
    int rc = 0;
    const Filter *f = find(g, name, F_SHA256, &rc);
    if (f) memcpy(out, f->digest, SHA256_LEN);
    return rc;
}

void io_filter_group_free(IoFilterGroup *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n; i++)
        io_writer_free(g->f[i].w);
    free(g);
}
