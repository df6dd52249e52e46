/* filter_group: see filter_group.h. Filters are recorded when added and built at the first use:
 * a write group from the sink back (each writer wraps the next one, so the first added is the
 * outermost), a read group from the source on (each reader wraps the one before it). */
#include "filter_group.h"
#include "crypt.h"
#include "../common/err.h"
#include "../common/names.h"

#include <stdlib.h>
#include <string.h>

#define GROUP_MAX 8

typedef enum { F_COUNT, F_SHA256, F_COMPRESS, F_DECOMPRESS, F_ENCRYPT, F_DECRYPT } FilterKind;

/* Read mode: count and SHA-256 are a tap on the bytes read through them. */
typedef struct {
    IoReader base;
    IoReader *src;
    uint64_t count;
    Sha256 *sha; /* NULL: counting only */
} TapReader;

typedef struct {
    FilterKind kind;
    char name[32];
    CompressKind compression;
    const Keyring *keyring;              /* F_ENCRYPT, F_DECRYPT (borrowed) */
    char binding[CRYPT_BINDING_MAX + 1]; /* F_ENCRYPT, F_DECRYPT: the name bound ("" = none) */
    DecompressLimit limit;               /* F_DECOMPRESS */
    IoWriter *w;                         /* write mode: built writer */
    IoReader *r;                         /* read mode: built reader */
    uint64_t *count;                     /* F_COUNT: the counter's total */
    uint64_t read_count; /* read mode, count and SHA-256: bytes read through, at the end */
    uint8_t digest[SHA256_LEN];
} Filter;

struct IoFilterGroup {
    IoWriter *sink;
    IoReader *src;   /* read mode */
    IoReader *front; /* read mode: the reader handed out (a GroupReader) */
    int at_end;      /* read mode: the last filter returned the end of the stream */
    Filter f[GROUP_MAX];
    size_t n;
    int built, build_failed, finished;
};

IoFilterGroup *io_filter_group_new(IoWriter *sink) {
    IoFilterGroup *g = calloc(1, sizeof *g);
    if (g) g->sink = sink;
    return g;
}

IoFilterGroup *io_filter_group_new_reader(IoReader *src) {
    IoFilterGroup *g = calloc(1, sizeof *g);
    if (g) g->src = src;
    return g;
}

static const char *kind_name(FilterKind kind) {
    static const char *const names[] = {
        [F_COMPRESS] = "compression",
        [F_DECOMPRESS] = "decompression",
        [F_ENCRYPT] = "encryption",
        [F_DECRYPT] = "decryption",
    };
    return NAME_AT(names, kind, "filter"); /* F_COUNT, F_SHA256 */
}

static int add(IoFilterGroup *g, FilterKind kind, const char *name, CompressKind ck) {
    if (g->built) return err_set(ERR_INVALID, "filter group: filters are added before use");
    if (((kind == F_COMPRESS || kind == F_ENCRYPT) && g->src) ||
        ((kind == F_DECOMPRESS || kind == F_DECRYPT) && !g->src))
        return err_set(ERR_INVALID, "filter group: %s in a %s group", kind_name(kind),
                       g->src ? "read" : "write");
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

int io_filter_group_add_decompress(IoFilterGroup *g, CompressKind kind) {
    return io_filter_group_add_decompress_limited(g, kind, NULL);
}

int io_filter_group_add_decompress_limited(IoFilterGroup *g, CompressKind kind,
                                           const DecompressLimit *lim) {
    int rc = add(g, F_DECOMPRESS, "decompress", kind);
    if (!rc && lim) g->f[g->n - 1].limit = *lim;
    return rc;
}

static int add_crypt(IoFilterGroup *g, FilterKind kind, const Keyring *kr, const char *binding) {
    if (keyring_count(kr) == 0)
        return err_set(ERR_INVALID, "filter group: %s without a key", kind_name(kind));
    if (binding && (!*binding || strlen(binding) > CRYPT_BINDING_MAX))
        return err_set(ERR_INVALID, "filter group: the name to bind is empty or over %d bytes",
                       CRYPT_BINDING_MAX);
    int rc = add(g, kind, kind == F_ENCRYPT ? "encrypt" : "decrypt", COMPRESS_NONE);
    if (rc) return rc;
    g->f[g->n - 1].keyring = kr;
    if (binding) strcpy(g->f[g->n - 1].binding, binding);
    return 0;
}

int io_filter_group_add_encrypt(IoFilterGroup *g, const Keyring *kr) {
    return add_crypt(g, F_ENCRYPT, kr, NULL);
}

int io_filter_group_add_decrypt(IoFilterGroup *g, const Keyring *kr) {
    return add_crypt(g, F_DECRYPT, kr, NULL);
}

int io_filter_group_add_encrypt_bound(IoFilterGroup *g, const Keyring *kr, const char *binding) {
    return add_crypt(g, F_ENCRYPT, kr, binding ? binding : "");
}

int io_filter_group_add_decrypt_bound(IoFilterGroup *g, const Keyring *kr, const char *binding) {
    return add_crypt(g, F_DECRYPT, kr, binding ? binding : "");
}

static int tap_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    TapReader *t = (TapReader *)r;
    int rc = io_read(t->src, buf, cap, got);
    if (rc) return rc;
    t->count += *got;
    if (t->sha && *got) sha256_update(t->sha, buf, *got);
    return 0;
}

static void tap_free(IoReader *r) {
    TapReader *t = (TapReader *)r;
    if (!t) return;
    sha256_free(t->sha);
    free(t);
}

static const IoReaderVt tap_vt = {tap_read, tap_free};

static IoReader *tap_new(IoReader *src, int hash) {
    TapReader *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->base.vt = &tap_vt;
    t->src = src;
    if (hash && !(t->sha = sha256_new())) {
        free(t);
        return NULL;
    }
    return &t->base;
}

/* The end of the read chain; reaching the end of the stream finishes the group. */
static int group_read(IoReader *r, void *buf, size_t cap, size_t *got);
static void group_reader_free(IoReader *r) {
    (void)r; /* embedded in the group */
}
static const IoReaderVt group_reader_vt = {group_read, group_reader_free};

typedef struct {
    IoReader base;
    IoFilterGroup *g;
} GroupReader;

IoReader *io_filter_group_reader(IoFilterGroup *g) {
    if (!g->src) return NULL;
    if (!g->built && !g->build_failed) {
        IoReader *prev = g->src;
        for (size_t i = 0; i < g->n; i++) {
            Filter *f = &g->f[i];
            if (f->kind == F_DECOMPRESS)
                f->r = decompress_reader_new_limited(f->compression, prev, &f->limit);
            else if (f->kind == F_DECRYPT)
                f->r = crypt_reader_new_bound(f->keyring, f->binding[0] ? f->binding : NULL, prev);
            else
                f->r = tap_new(prev, f->kind == F_SHA256);
            if (!f->r) {
                g->build_failed = 1;
                return NULL;
            }
            prev = f->r;
        }
        GroupReader *gr = calloc(1, sizeof *gr);
        if (!gr) {
            g->build_failed = 1;
            return NULL;
        }
        gr->base.vt = &group_reader_vt;
        gr->g = g;
        g->front = &gr->base;
        g->built = 1;
    }
    return g->build_failed ? NULL : g->front;
}

static int group_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    IoFilterGroup *g = ((GroupReader *)r)->g;
    IoReader *last = g->n ? g->f[g->n - 1].r : g->src;
    *got = 0;
    if (g->at_end) return 0;
    int rc = io_read(last, buf, cap, got);
    if (rc == 0 && *got == 0 && cap > 0) {
        g->at_end = 1;
        for (size_t i = 0; i < g->n; i++) {
            Filter *f = &g->f[i];
            TapReader *t = (TapReader *)f->r;
            if (f->kind == F_COUNT || f->kind == F_SHA256) f->read_count = t->count;
            if (f->kind == F_SHA256) sha256_final(t->sha, f->digest);
        }
        g->finished = 1;
    }
    return rc;
}

IoWriter *io_filter_group_io(IoFilterGroup *g) {
    if (g->src) return NULL;
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
            case F_ENCRYPT:
                f->w =
                    crypt_writer_new_bound(f->keyring, 0, f->binding[0] ? f->binding : NULL, next);
                break;
            case F_DECOMPRESS:
            case F_DECRYPT:
                break; /* refused by add */
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
    if (g->src) {
        if (!g->finished)
            return err_set(ERR_INVALID, "filter group: finished before the end of the stream");
        return 0;
    }
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
    if (f) *out = g->src ? f->read_count : *f->count;
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
    for (size_t i = g->n; i-- > 0;) {
        io_writer_free(g->f[i].w);
        io_reader_free(g->f[i].r);
    }
    free(g->front);
    free(g);
}
