/* bbolt_writer: one-pass bulk loader of a bbolt db; see bbolt_writer.h for the layout.
 * Invariants: pages are appended at file_off in page-id order (next_pgid x page size is the
 * file offset of the next page, counting bytes still in the write buffer); each open bucket
 * holds only the open right-most page of each of its tree levels; keys within a bucket are
 * strictly ascending (checked against a copy of the previous key), so appending to the
 * right-most page keeps every page and every branch range sorted. */
#include "bbolt_writer.h"
#include "bbolt.h"
#include "bbolt_layout.h"
#include "../common/byteorder.h"
#include "../common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BW_MAX_VALUE (((uint64_t)1 << 31) - 2) /* bucket.go MaxValueSize */

enum {
    BW_MIN_PAGE = 1024,
    BW_DEFAULT_PAGE = 4096,
    BW_MAX_LEVELS = 64,      /* each level has at most half the pages of the one below */
    BW_WBUF = 1 << 20,       /* write buffer: holds the largest page that is not a big leaf */
    BW_LEAF_BRANCH_LEVEL = 1 /* level of the branch pages right above the leaves */
};

/* An element of an open page; key (and value) bytes are at data + off. */
typedef struct {
    uint32_t off;
    uint32_t ksize;
    uint32_t vsize; /* leaf only */
    uint32_t flags; /* leaf only */
    uint64_t child; /* branch only */
} BwElem;

/* The open right-most page of one tree level (0 = leaves). Buffers grow on demand: a leaf
 * page holds at most page-size bytes, a branch page may hold two elements with overflow. */
typedef struct {
    BwElem *elems;
    unsigned count;
    unsigned elem_cap;
    uint8_t *data;
    size_t data_len;
    size_t data_cap;
} BwLevel;

typedef struct {
    BwLevel lv[BW_MAX_LEVELS];
    unsigned nlv;  /* levels in use: 1 + the highest level holding a page */
    uint8_t *name; /* name in the parent (owned; NULL for the root bucket) */
    size_t name_len;
    uint8_t *last; /* copy of the previous key or bucket name (owned) */
    size_t last_len;
    size_t last_cap;
    int has_last;
    uint64_t seq;
} BwBucket;

struct BboltWriter {
    int fd;
    char *path;
    uint32_t ps;
    uint8_t *wbuf; /* BW_WBUF bytes, flushed at file_off */
    size_t wlen;
    uint64_t file_off; /* file offset of wbuf[0] */
    uint64_t next_pgid;
    uint64_t keys;
    BwBucket **bk; /* open buckets: bk[0] is the root bucket, bk[nbk - 1] the current one */
    size_t nbk;
    size_t bk_cap;
    int failed;   /* an error left the file incomplete: only free is allowed */
    int finished; /* the file is a complete db: free keeps it */
    int no_sync;  /* finish does not fsync (an intermediate file) */
};

/* Printable form of name for messages: non-printing bytes as \xNN, long names cut. */
static void name_fmt(char *buf, size_t cap, const uint8_t *p, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < cap; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
            buf[o++] = (char)p[i];
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", p[i]);
    }
    if (o + 8 >= cap && len > 0) o += (size_t)snprintf(buf + o, cap - o, "...");
    buf[o] = '\0';
}

/* "bucket \"a/b\"" for the current bucket, or "the root bucket". */
static const char *bucket_desc(const BboltWriter *w, char *buf, size_t cap) {
    if (w->nbk <= 1) {
        snprintf(buf, cap, "the root bucket");
        return buf;
    }
    size_t o = (size_t)snprintf(buf, cap, "bucket \"");
    for (size_t i = 1; i < w->nbk && o + 16 < cap; i++) {
        if (i > 1) buf[o++] = '/';
        name_fmt(buf + o, cap - o - 2, w->bk[i]->name, w->bk[i]->name_len);
        o += strlen(buf + o);
    }
    snprintf(buf + o, cap - o, "\"");
    return buf;
}

/* Marks the writer failed (the file is incomplete) and returns rc. */
static int fail(BboltWriter *w, int rc) {
    if (rc) w->failed = 1;
    return rc;
}

static int usable(BboltWriter *w) {
    if (w->failed)
        return err_set(ERR_INVALID, "%s: the bbolt writer failed earlier; only free is allowed",
                       w->path);
    if (w->finished)
        return err_set(ERR_INVALID, "%s: the bbolt writer has already finished", w->path);
    return 0;
}

/* ---- the write buffer ---- */

static int write_at(BboltWriter *w, const uint8_t *p, size_t n, uint64_t off) {
    while (n > 0) {
        ssize_t r = pwrite(w->fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return err_set(ERR_IO, "write %s at byte %llu: %s", w->path, (unsigned long long)off,
                           strerror(errno));
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int wb_flush(BboltWriter *w) {
    int rc = write_at(w, w->wbuf, w->wlen, w->file_off);
    if (rc) return rc;
    w->file_off += w->wlen;
    w->wlen = 0;
    return 0;
}

/* Appends n bytes; large runs (a big value) go straight from the caller's memory. */
static int wb_put(BboltWriter *w, const void *p, size_t n) {
    if (n <= BW_WBUF - w->wlen) {
        if (n) memcpy(w->wbuf + w->wlen, p, n);
        w->wlen += n;
        return 0;
    }
    int rc = wb_flush(w);
    if (rc) return rc;
    if (n < BW_WBUF) {
        memcpy(w->wbuf, p, n);
        w->wlen = n;
        return 0;
    }
    rc = write_at(w, p, n, w->file_off);
    if (rc) return rc;
    w->file_off += n;
    return 0;
}

static int wb_zero(BboltWriter *w, size_t n) {
    while (n > 0) {
        if (w->wlen == BW_WBUF) {
            int rc = wb_flush(w);
            if (rc) return rc;
        }
        size_t k = BW_WBUF - w->wlen < n ? BW_WBUF - w->wlen : n;
        memset(w->wbuf + w->wlen, 0, k);
        w->wlen += k;
        n -= k;
    }
    return 0;
}

/* n contiguous bytes (n <= BW_WBUF) at the end of the write buffer. */
static int wb_reserve(BboltWriter *w, size_t n, uint8_t **p) {
    if (n > BW_WBUF - w->wlen) {
        int rc = wb_flush(w);
        if (rc) return rc;
    }
    *p = w->wbuf + w->wlen;
    w->wlen += n;
    return 0;
}

/* ---- tree levels ---- */

static int level_grow(BboltWriter *w, BwLevel *l, size_t more) {
    if (l->count == l->elem_cap) {
        unsigned cap = l->elem_cap ? l->elem_cap * 2 : w->ps / BB_ELEM_SIZE + 2;
        BwElem *ne = realloc(l->elems, (size_t)cap * sizeof *ne);
        if (!ne) return err_set(ERR_NOMEM, "%s: out of memory for a page", w->path);
        l->elems = ne;
        l->elem_cap = cap;
    }
    if (l->data_len + more > l->data_cap) {
        size_t cap = l->data_cap ? l->data_cap : w->ps;
        while (cap < l->data_len + more)
            cap *= 2;
        uint8_t *nd = realloc(l->data, cap);
        if (!nd) return err_set(ERR_NOMEM, "%s: out of memory for a %zu-byte page", w->path, cap);
        l->data = nd;
        l->data_cap = cap;
    }
    return 0;
}

static void level_free(BwLevel *l) {
    free(l->elems);
    free(l->data);
    memset(l, 0, sizeof *l);
}

/* Bytes of the page if it took one more element of n key+value bytes. */
static size_t level_size_with(const BwLevel *l, size_t n) {
    return BB_PAGE_HEADER + (size_t)(l->count + 1) * BB_ELEM_SIZE + l->data_len + n;
}

/* Writes the open page of level l (a leaf when leaf is set) as the next page(s) of the file
 * (node.go write) and sets *id. The level keeps its elements: the caller resets it. */
static int level_write(BboltWriter *w, const BwLevel *l, int leaf, uint64_t *id) {
    size_t base = BB_PAGE_HEADER + (size_t)l->count * BB_ELEM_SIZE;
    size_t bytes = base + l->data_len;
    uint64_t npages = (bytes + w->ps - 1) / w->ps;
    size_t total = (size_t)npages * w->ps;
    uint8_t *p;
    int rc = wb_reserve(w, total, &p);
    if (rc) return rc;
    put_le64(p, w->next_pgid);
    put_le16(p + 8, leaf ? BB_FLAG_LEAF : BB_FLAG_BRANCH);
    put_le16(p + 10, (uint16_t)l->count);
    put_le32(p + 12, (uint32_t)(npages - 1));
    for (unsigned i = 0; i < l->count; i++) {
        uint8_t *e = p + BB_PAGE_HEADER + (size_t)i * BB_ELEM_SIZE;
        const BwElem *el = &l->elems[i];
        /* pos: from the element to its key */
        uint32_t pos = (uint32_t)(base + el->off - (BB_PAGE_HEADER + (size_t)i * BB_ELEM_SIZE));
        if (leaf) {
            put_le32(e, el->flags);
            put_le32(e + 4, pos);
            put_le32(e + 8, el->ksize);
            put_le32(e + 12, el->vsize);
        } else {
            put_le32(e, pos);
            put_le32(e + 4, el->ksize);
            put_le64(e + 8, el->child);
        }
    }
    if (l->data_len) memcpy(p + base, l->data, l->data_len);
    memset(p + bytes, 0, total - bytes);
    *id = w->next_pgid;
    w->next_pgid += npages;
    return 0;
}

static int branch_add(BboltWriter *w, BwBucket *b, unsigned level, const uint8_t *key, size_t k,
                      uint64_t child);

/* Writes the open page of a level below the top, adds it to the level above (its first key)
 * and empties the level. */
static int level_flush(BboltWriter *w, BwBucket *b, unsigned level) {
    BwLevel *l = &b->lv[level];
    uint64_t id;
    int rc = level_write(w, l, level == 0, &id);
    if (rc) return rc;
    rc = branch_add(w, b, level + 1, l->data + l->elems[0].off, l->elems[0].ksize, id);
    if (rc) return rc;
    l->count = 0;
    l->data_len = 0;
    return 0;
}

/* Adds child (first key key[0..k)) to the open branch page of level. A branch page takes two
 * elements whatever their size, so each level has at most half the pages of the one below. */
static int branch_add(BboltWriter *w, BwBucket *b, unsigned level, const uint8_t *key, size_t k,
                      uint64_t child) {
    if (level >= BW_MAX_LEVELS)
        return err_set(ERR_INVALID, "%s: tree deeper than %d levels", w->path, BW_MAX_LEVELS);
    if (level >= b->nlv) b->nlv = level + 1;
    BwLevel *l = &b->lv[level];
    int rc;
    if (l->count >= 2 && level_size_with(l, k) > w->ps && (rc = level_flush(w, b, level)))
        return rc;
    if ((rc = level_grow(w, l, k))) return rc;
    l->elems[l->count++] =
        (BwElem){.off = (uint32_t)l->data_len, .ksize = (uint32_t)k, .child = child};
    memcpy(l->data + l->data_len, key, k);
    l->data_len += k;
    return 0;
}

/* An element that does not fit in an empty page: a leaf page of its own with overflow pages,
 * written from the caller's memory. */
static int leaf_big(BboltWriter *w, BwBucket *b, const uint8_t *key, size_t k, const void *val,
                    size_t v, uint32_t flags) {
    uint64_t bytes = BB_PAGE_HEADER + BB_ELEM_SIZE + (uint64_t)k + v;
    uint64_t npages = (bytes + w->ps - 1) / w->ps;
    uint64_t id = w->next_pgid;
    uint8_t head[BB_PAGE_HEADER + BB_ELEM_SIZE];
    put_le64(head, id);
    put_le16(head + 8, BB_FLAG_LEAF);
    put_le16(head + 10, 1);
    put_le32(head + 12, (uint32_t)(npages - 1));
    put_le32(head + 16, flags);
    put_le32(head + 20, BB_ELEM_SIZE); /* pos: the key follows the only element */
    put_le32(head + 24, (uint32_t)k);
    put_le32(head + 28, (uint32_t)v);
    int rc = wb_put(w, head, sizeof head);
    if (!rc) rc = wb_put(w, key, k);
    if (!rc) rc = wb_put(w, val, v);
    if (!rc) rc = wb_zero(w, (size_t)(npages * w->ps - bytes));
    if (rc) return rc;
    w->next_pgid += npages;
    return branch_add(w, b, BW_LEAF_BRANCH_LEVEL, key, k, id);
}

/* Appends an element to the bucket's open leaf (order already checked). */
static int leaf_add(BboltWriter *w, BwBucket *b, const uint8_t *key, size_t k, const void *val,
                    size_t v, uint32_t flags) {
    BwLevel *l = &b->lv[0];
    int rc;
    if (level_size_with(l, k + v) > w->ps) {
        if (l->count > 0 && (rc = level_flush(w, b, 0))) return rc;
        if (level_size_with(l, k + v) > w->ps) return leaf_big(w, b, key, k, val, v, flags);
    }
    if ((rc = level_grow(w, l, k + v))) return rc;
    l->elems[l->count++] = (BwElem){
        .off = (uint32_t)l->data_len, .ksize = (uint32_t)k, .vsize = (uint32_t)v, .flags = flags};
    memcpy(l->data + l->data_len, key, k);
    if (v) memcpy(l->data + l->data_len + k, val, v);
    l->data_len += k + v;
    return 0;
}

/* Writes what the bucket still holds, bottom-up, and sets *root to its root page: the only
 * page of the top level, or the child of a top branch with one element. */
static int bucket_finish(BboltWriter *w, BwBucket *b, uint64_t *root) {
    for (unsigned level = 0;; level++) {
        BwLevel *l = &b->lv[level];
        int rc;
        if (level + 1 >= b->nlv) {
            if (level > 0 && l->count == 1) {
                *root = l->elems[0].child;
            } else if ((rc = level_write(w, l, level == 0, root))) {
                return rc;
            }
            l->count = 0;
            l->data_len = 0;
            return 0;
        }
        if (l->count > 0 && (rc = level_flush(w, b, level))) return rc;
    }
}

static void bucket_free(BwBucket *b) {
    if (!b) return;
    for (unsigned i = 0; i < BW_MAX_LEVELS; i++)
        level_free(&b->lv[i]);
    free(b->name);
    free(b->last);
    free(b);
}

/* Checks that key sorts after the bucket's previous key and records it. */
static int bucket_order(BboltWriter *w, BwBucket *b, const void *key, size_t k, const char *what) {
    if (b->has_last && bbolt_key_cmp(key, k, b->last, b->last_len) <= 0) {
        char d[200], kb[100], pb[100];
        int dup = bbolt_key_cmp(key, k, b->last, b->last_len) == 0;
        name_fmt(kb, sizeof kb, key, k);
        name_fmt(pb, sizeof pb, b->last, b->last_len);
        return err_set(ERR_INVALID, "%s: %s: %s \"%s\" %s \"%s\" (keys must be strictly ascending)",
                       w->path, bucket_desc(w, d, sizeof d), what, kb,
                       dup ? "repeats the previous key" : "sorts before the previous key", pb);
    }
    if (k > b->last_cap) {
        size_t cap = k < 64 ? 64 : k;
        uint8_t *nl = realloc(b->last, cap);
        if (!nl) return err_set(ERR_NOMEM, "%s: out of memory for a %zu-byte key", w->path, k);
        b->last = nl;
        b->last_cap = cap;
    }
    memcpy(b->last, key, k);
    b->last_len = k;
    b->has_last = 1;
    return 0;
}

static int check_key(BboltWriter *w, size_t k, const char *what) {
    char d[200];
    if (k == 0)
        return err_set(ERR_INVALID, "%s: %s: empty %s", w->path, bucket_desc(w, d, sizeof d), what);
    if (k > BB_MAX_KEY)
        return err_set(ERR_INVALID, "%s: %s: %s of %zu bytes, bbolt allows %d", w->path,
                       bucket_desc(w, d, sizeof d), what, k, BB_MAX_KEY);
    return 0;
}

/* ---- public ---- */

int bbolt_writer_open(const char *path, uint32_t page_size, BboltWriter **out) {
    BboltWriter *w = NULL;
    int rc = 0;
    *out = NULL;
    if (page_size == 0) page_size = BW_DEFAULT_PAGE;
    if (page_size < BW_MIN_PAGE || page_size > BB_MAX_PAGE || (page_size & (page_size - 1)))
        return err_set(ERR_INVALID, "%s: page size %u: want a power of two in [%d, %d]", path,
                       page_size, BW_MIN_PAGE, BB_MAX_PAGE);
    w = calloc(1, sizeof *w);
    if (!w) return err_set(ERR_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->ps = page_size;
    w->next_pgid = 2; /* pages 0 and 1: the meta pages, written by finish */
    w->file_off = 2 * (uint64_t)page_size;
    w->path = strdup(path);
    w->wbuf = malloc(BW_WBUF);
    w->bk_cap = 8;
    w->bk = calloc(w->bk_cap, sizeof *w->bk);
    if (w->bk) {
        w->bk[0] = calloc(1, sizeof **w->bk);
        w->nbk = 1; /* the root bucket, freed by bbolt_writer_free */
    }
    if (!w->path || !w->wbuf || !w->bk || !w->bk[0]) {
        rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    w->bk[0]->nlv = 1;
    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (w->fd < 0) {
        rc = err_set(errno == EEXIST ? ERR_EXISTS : ERR_IO, "create %s: %s", path, strerror(errno));
        goto done;
    }
done:
    if (rc) {
        w->finished = 1; /* not ours to remove: we did not create it */
        bbolt_writer_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int bbolt_writer_begin_bucket(BboltWriter *w, const void *name, size_t len) {
    int rc = usable(w);
    if (!rc) rc = check_key(w, len, "bucket name");
    if (rc) return rc;
    BwBucket *parent = w->bk[w->nbk - 1];
    BwBucket *b = calloc(1, sizeof *b);
    if (!b || !(b->name = malloc(len))) {
        free(b);
        return err_set(ERR_NOMEM, "%s: out of memory for a bucket", w->path);
    }
    memcpy(b->name, name, len);
    b->name_len = len;
    b->nlv = 1;
    if (w->nbk == w->bk_cap) {
        BwBucket **nb = realloc(w->bk, w->bk_cap * 2 * sizeof *nb);
        if (!nb) {
            bucket_free(b);
            return err_set(ERR_NOMEM, "%s: out of memory for a bucket", w->path);
        }
        w->bk = nb;
        w->bk_cap *= 2;
    }
    rc = bucket_order(w, parent, name, len, "bucket");
    if (rc) {
        bucket_free(b);
        return rc;
    }
    w->bk[w->nbk++] = b;
    return 0;
}

/* 0 when w is usable and a bucket below the root is open for op; else the error, naming op and
 * adding root_note (may be "") on what the root bucket does not take. */
static int need_bucket(BboltWriter *w, const char *op, const char *root_note) {
    int rc = usable(w);
    if (rc) return rc;
    if (w->nbk <= 1)
        return err_set(ERR_INVALID, "%s: %s with no bucket open%s", w->path, op, root_note);
    return 0;
}

int bbolt_writer_put(BboltWriter *w, const void *key, size_t key_len, const void *value,
                     size_t value_len) {
    char d[200];
    int rc = need_bucket(w, "put", " (the root bucket holds buckets only)");
    if (rc) return rc;
    if ((rc = check_key(w, key_len, "key"))) return rc;
    if ((uint64_t)value_len > BW_MAX_VALUE)
        return err_set(ERR_INVALID, "%s: %s: value of %zu bytes, bbolt allows %llu", w->path,
                       bucket_desc(w, d, sizeof d), value_len, (unsigned long long)BW_MAX_VALUE);
    BwBucket *b = w->bk[w->nbk - 1];
    if ((rc = bucket_order(w, b, key, key_len, "key"))) return rc;
    rc = leaf_add(w, b, key, key_len, value, value_len, 0);
    if (rc) return fail(w, rc);
    w->keys++;
    return 0;
}

int bbolt_writer_end_bucket(BboltWriter *w) {
    int rc = need_bucket(w, "end_bucket", "");
    if (rc) return rc;
    BwBucket *b = w->bk[w->nbk - 1];
    uint64_t root = 0;
    uint8_t val[BB_BUCKET_HEADER];
    rc = bucket_finish(w, b, &root);
    if (rc) return fail(w, rc);
    put_le64(val, root);
    put_le64(val + 8, b->seq);
    w->nbk--;
    rc = leaf_add(w, w->bk[w->nbk - 1], b->name, b->name_len, val, sizeof val, BB_LEAF_BUCKET);
    bucket_free(b);
    return fail(w, rc);
}

int bbolt_writer_set_sequence(BboltWriter *w, uint64_t seq) {
    int rc = need_bucket(w, "set_sequence", " (the root bucket's sequence is 0)");
    if (rc) return rc;
    w->bk[w->nbk - 1]->seq = seq;
    return 0;
}

int bbolt_writer_finish(BboltWriter *w) {
    char d[200];
    uint8_t *meta = NULL, *p;
    uint64_t root = 0, freelist;
    int rc = usable(w);
    if (rc) return rc;
    if (w->nbk > 1)
        return err_set(ERR_INVALID, "%s: finish with %s still open", w->path,
                       bucket_desc(w, d, sizeof d));
    if ((rc = bucket_finish(w, w->bk[0], &root))) goto done;
    /* an empty freelist page: every page below the high-water mark is in use */
    freelist = w->next_pgid;
    if ((rc = wb_reserve(w, w->ps, &p))) goto done;
    memset(p, 0, w->ps);
    put_le64(p, freelist);
    put_le16(p + 8, BB_FLAG_FREELIST);
    w->next_pgid++;
    if ((rc = wb_flush(w))) goto done;
    if (!w->no_sync && fdatasync(w->fd) != 0) {
        rc = err_set(ERR_IO, "fdatasync %s: %s", w->path, strerror(errno));
        goto done;
    }
    /* the meta pages last, so a db whose metas are valid has all its pages on disk */
    meta = calloc(2, w->ps);
    if (!meta) {
        rc = err_set(ERR_NOMEM, "%s: out of memory", w->path);
        goto done;
    }
    for (uint64_t i = 0; i < 2; i++) {
        uint8_t *pg = meta + i * w->ps, *m = pg + BB_PAGE_HEADER;
        put_le64(pg, i); /* page id = txid % 2 (db.go meta.write) */
        put_le16(pg + 8, BB_FLAG_META);
        put_le32(m, BB_MAGIC);
        put_le32(m + 4, BB_VERSION);
        put_le32(m + 8, w->ps);
        put_le32(m + 12, 0);    /* flags */
        put_le64(m + 16, root); /* root bucket: root pgid */
        put_le64(m + 24, 0);    /* root bucket: sequence */
        put_le64(m + 32, freelist);
        put_le64(m + 40, w->next_pgid); /* high-water mark: pages in the file */
        put_le64(m + 48, i);            /* txid: meta 0 -> 0, meta 1 -> 1 (the newer) */
        put_le64(m + BB_META_SUM_LEN, bbolt_fnv1a64(m, BB_META_SUM_LEN));
    }
    if ((rc = write_at(w, meta, 2 * (size_t)w->ps, 0))) goto done;
    if (!w->no_sync && fsync(w->fd) != 0) {
        rc = err_set(ERR_IO, "fsync %s: %s", w->path, strerror(errno));
        goto done;
    }
    w->finished = 1;
done:
    free(meta);
    return fail(w, rc);
}

int bbolt_writer_set_sync(BboltWriter *w, int sync) {
    if (!w) return err_set(ERR_INVALID, "bbolt_writer_set_sync: no writer");
    w->no_sync = !sync;
    return 0;
}

void bbolt_writer_free(BboltWriter *w) {
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        if (!w->finished) unlink(w->path);
    }
    for (size_t i = 0; w->bk && i < w->nbk; i++)
        bucket_free(w->bk[i]);
    free(w->bk);
    free(w->wbuf);
    free(w->path);
    free(w);
}

uint64_t bbolt_writer_pages(const BboltWriter *w) {
    return w->next_pgid;
}

uint64_t bbolt_writer_keys(const BboltWriter *w) {
    return w->keys;
}

uint64_t bbolt_writer_bytes(const BboltWriter *w) {
    return w->next_pgid * w->ps;
}
