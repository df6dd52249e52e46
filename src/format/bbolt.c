/* bbolt: read-only reader of etcd's bbolt backend file; see bbolt.h. Layout (go.etcd.io/bbolt,
 * little-endian hosts): page header {id u64, flags u16, count u16, overflow u32}, meta at page
 * offset 16, element arrays right after the header with key/value offsets relative to each
 * element. Nothing read from the file is trusted: every access is bounds-checked, walks stop at
 * BB_MAX_DEPTH and a page budget, buffers are capped. A BboltDb is immutable after open and all
 * reads use pread, so calls on one handle from several threads are safe. */
#include "bbolt.h"
#include "bbolt_layout.h"
#include "../common/byteorder.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BB_MAX_READ ((uint64_t)64 << 20)   /* one page with its overflow */
#define BB_MAX_BUFFERS ((size_t)256 << 20) /* all page buffers of one walk */

struct BboltDb {
    int fd;
    char *path;
    uint32_t page_size;
    uint64_t file_pages; /* whole pages inside size_limit */
    uint64_t high_water; /* meta pgid: the db is pages [0, high_water) */
    uint64_t root;       /* root page of the root bucket */
    uint64_t freelist;
    uint64_t txid;
};

/* A page in memory: a disk page with its overflow, or an inline bucket's page inside a value. */
typedef struct {
    const uint8_t *data;
    uint64_t len; /* bytes valid at data */
    uint64_t id;  /* disk page id; for an inline page, the page holding the bucket value */
    int is_inline;
    uint16_t flags;
    uint16_t count;
    uint32_t overflow;
} BbPage;

typedef struct {
    const uint8_t *key;
    uint32_t ksize;
    const uint8_t *val; /* leaf only */
    uint32_t vsize;
    uint32_t flags; /* leaf only */
    uint64_t child; /* branch only */
} BbElem;

/* A bucket: a tree rooted at a disk page, or (root == 0) an inline leaf page. */
typedef struct {
    uint64_t root;
    BbPage inl;
} BbBucket;

typedef struct {
    const uint8_t *p;
    uint32_t n;
    int set;
} BbKey;

/* State of one walk (one public call): per-depth page buffers, a page budget that stops cycles
 * in walks without a visited map, and for bbolt_check the visited/free bitmaps. */
typedef struct {
    BboltDb *db;
    uint8_t *buf[BB_MAX_DEPTH + 1];
    size_t cap[BB_MAX_DEPTH + 1];
    size_t mem;
    uint64_t budget;
    uint8_t *visited; /* bbolt_check only */
    uint8_t *freed;   /* bbolt_check only, when the freelist is synced */
    uint64_t visited_count;
} BbWalk;

uint64_t bbolt_fnv1a64(const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int bbolt_key_cmp(const void *a, size_t an, const void *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c) return c;
    return an < bn ? -1 : an > bn;
}

static int bit_get(const uint8_t *map, uint64_t i) {
    return (map[i >> 3] >> (i & 7)) & 1;
}

static void bit_set(uint8_t *map, uint64_t i) {
    map[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static int pread_full(BboltDb *db, uint8_t *buf, size_t n, uint64_t off, uint64_t page_id) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(db->fd, buf + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return err_set(ERR_IO, "%s: read page %llu: %s", db->path, (unsigned long long)page_id,
                           strerror(errno));
        }
        if (r == 0)
            return err_set(ERR_CORRUPT, "%s: page %llu: file ends at byte %llu", db->path,
                           (unsigned long long)page_id, (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return 0;
}

static int walk_buf(BbWalk *w, unsigned depth, size_t need, uint64_t page_id) {
    if (w->cap[depth] >= need) return 0;
    if (w->mem - w->cap[depth] + need > BB_MAX_BUFFERS)
        return err_set(ERR_CORRUPT, "%s: page %llu: page buffers would exceed %zu MiB", w->db->path,
                       (unsigned long long)page_id, BB_MAX_BUFFERS >> 20);
    uint8_t *nb = realloc(w->buf[depth], need);
    if (!nb)
        return err_set(ERR_NOMEM, "%s: page %llu: out of memory for %zu bytes", w->db->path,
                       (unsigned long long)page_id, need);
    w->mem = w->mem - w->cap[depth] + need;
    w->buf[depth] = nb;
    w->cap[depth] = need;
    return 0;
}

static void walk_free(BbWalk *w) {
    for (unsigned i = 0; i <= BB_MAX_DEPTH; i++)
        free(w->buf[i]);
    free(w->visited);
    free(w->freed);
}

/* Reads page id with its overflow into the buffer of depth and checks the header: the page
 * names itself id, lies below the high-water mark and fits the read cap. `from` is the page
 * that referenced it (for messages). Page type is checked by the caller. */
static int read_page(BbWalk *w, unsigned depth, uint64_t id, uint64_t from, BbPage *pg) {
    BboltDb *db = w->db;
    uint32_t ps = db->page_size;
    if (depth > BB_MAX_DEPTH)
        return err_set(ERR_CORRUPT, "%s: page %llu (from page %llu): tree deeper than %d levels",
                       db->path, (unsigned long long)id, (unsigned long long)from, BB_MAX_DEPTH);
    if (id < 2 || id >= db->high_water)
        return err_set(ERR_CORRUPT,
                       "%s: page %llu (from page %llu): page id outside the data pages 2..%llu",
                       db->path, (unsigned long long)id, (unsigned long long)from,
                       (unsigned long long)(db->high_water - 1));
    if (w->budget == 0)
        return err_set(ERR_CORRUPT,
                       "%s: page %llu (from page %llu): more page reads than the file has pages "
                       "(reference cycle)",
                       db->path, (unsigned long long)id, (unsigned long long)from);
    int rc = walk_buf(w, depth, ps, id);
    if (rc) return rc;
    uint8_t *b = w->buf[depth];
    rc = pread_full(db, b, ps, id * ps, id);
    if (rc) return rc;
    pg->id = get_le64(b);
    pg->flags = get_le16(b + 8);
    pg->count = get_le16(b + 10);
    pg->overflow = get_le32(b + 12);
    pg->is_inline = 0;
    if (pg->id != id)
        return err_set(ERR_CORRUPT, "%s: page %llu (from page %llu): header names page %llu",
                       db->path, (unsigned long long)id, (unsigned long long)from,
                       (unsigned long long)pg->id);
    uint64_t npages = (uint64_t)pg->overflow + 1;
    if (npages > db->high_water - id)
        return err_set(ERR_CORRUPT, "%s: page %llu: %u overflow pages run past the last page %llu",
                       db->path, (unsigned long long)id, pg->overflow,
                       (unsigned long long)(db->high_water - 1));
    if (npages * ps > BB_MAX_READ)
        return err_set(ERR_CORRUPT, "%s: page %llu: %u overflow pages exceed the %llu MiB cap",
                       db->path, (unsigned long long)id, pg->overflow,
                       (unsigned long long)(BB_MAX_READ >> 20));
    if (npages > w->budget)
        return err_set(ERR_CORRUPT,
                       "%s: page %llu: more page reads than the file has pages (reference cycle)",
                       db->path, (unsigned long long)id);
    w->budget -= npages;
    if (npages > 1) {
        rc = walk_buf(w, depth, (size_t)(npages * ps), id);
        if (rc) return rc;
        b = w->buf[depth];
        rc = pread_full(db, b + ps, (size_t)((npages - 1) * ps), (id + 1) * ps, id);
        if (rc) return rc;
    }
    pg->data = b;
    pg->len = npages * ps;
    return 0;
}

static const char *page_kind(const BbPage *pg) {
    return pg->is_inline ? "inline page in page" : "page";
}

/* Checks that the element array fits; elements themselves are checked by page_elem. */
static int page_check_count(BboltDb *db, const BbPage *pg) {
    if (BB_PAGE_HEADER + (uint64_t)pg->count * BB_ELEM_SIZE > pg->len)
        return err_set(ERR_CORRUPT, "%s: %s %llu: %u elements do not fit in %llu bytes", db->path,
                       page_kind(pg), (unsigned long long)pg->id, pg->count,
                       (unsigned long long)pg->len);
    return 0;
}

static int page_elem(BboltDb *db, const BbPage *pg, unsigned i, BbElem *e) {
    uint64_t off = BB_PAGE_HEADER + (uint64_t)i * BB_ELEM_SIZE;
    const uint8_t *p = pg->data + off;
    uint64_t start, end;
    memset(e, 0, sizeof *e);
    if (pg->flags == BB_FLAG_BRANCH) {
        uint32_t pos = get_le32(p);
        e->ksize = get_le32(p + 4);
        e->child = get_le64(p + 8);
        start = off + pos;
        end = start + e->ksize;
    } else {
        e->flags = get_le32(p);
        uint32_t pos = get_le32(p + 4);
        e->ksize = get_le32(p + 8);
        e->vsize = get_le32(p + 12);
        start = off + pos;
        end = start + e->ksize + e->vsize;
    }
    if (end > pg->len)
        return err_set(ERR_CORRUPT,
                       "%s: %s %llu: element %u (key %u bytes, value %u bytes) ends at byte %llu "
                       "past the page end %llu",
                       db->path, page_kind(pg), (unsigned long long)pg->id, i, e->ksize, e->vsize,
                       (unsigned long long)end, (unsigned long long)pg->len);
    e->key = pg->data + start;
    e->val = e->key + e->ksize;
    return 0;
}

/* Parses a bucket value (bucket header, then an inline page when root == 0). The result
 * borrows value. holder: page holding the value (for messages). */
static int bucket_from_value(BboltDb *db, const uint8_t *val, uint32_t vsize, uint64_t holder,
                             BbBucket *bk) {
    memset(bk, 0, sizeof *bk);
    if (vsize < BB_BUCKET_HEADER)
        return err_set(ERR_CORRUPT,
                       "%s: page %llu: bucket value of %u bytes is shorter than its header",
                       db->path, (unsigned long long)holder, vsize);
    bk->root = get_le64(val);
    if (bk->root != 0) return 0;
    if (vsize < BB_BUCKET_HEADER + BB_PAGE_HEADER)
        return err_set(ERR_CORRUPT, "%s: page %llu: inline bucket value of %u bytes has no page",
                       db->path, (unsigned long long)holder, vsize);
    BbPage *pg = &bk->inl;
    pg->data = val + BB_BUCKET_HEADER;
    pg->len = vsize - BB_BUCKET_HEADER;
    pg->id = holder;
    pg->is_inline = 1;
    pg->flags = get_le16(pg->data + 8);
    pg->count = get_le16(pg->data + 10);
    pg->overflow = get_le32(pg->data + 12);
    if (pg->flags != BB_FLAG_LEAF)
        return err_set(ERR_CORRUPT, "%s: inline page in page %llu: flags 0x%x, want leaf", db->path,
                       (unsigned long long)holder, pg->flags);
    return page_check_count(db, pg);
}

static int expect_tree_page(BboltDb *db, const BbPage *pg, uint64_t from) {
    if (pg->flags != BB_FLAG_BRANCH && pg->flags != BB_FLAG_LEAF)
        return err_set(ERR_CORRUPT,
                       "%s: page %llu (from page %llu): flags 0x%x, want branch or leaf", db->path,
                       (unsigned long long)pg->id, (unsigned long long)from, pg->flags);
    if (pg->flags == BB_FLAG_BRANCH && pg->count == 0)
        return err_set(ERR_CORRUPT, "%s: page %llu: branch page with no elements", db->path,
                       (unsigned long long)pg->id);
    return page_check_count(db, pg);
}

/* read_page, then expect_tree_page: page id, reached from page from, as a branch or a leaf. */
static int read_tree_page(BbWalk *w, unsigned depth, uint64_t id, uint64_t from, BbPage *pg) {
    int rc = read_page(w, depth, id, from, pg);
    if (rc) return rc;
    return expect_tree_page(w->db, pg, from);
}

/* Looks key up in bucket bk (Cursor.Seek then exact match). On a hit, *val_out is a malloc'd
 * copy of the value (owned by the caller), *flags_out the element flags. *found = 0 on a miss. */
static int bucket_get_n(BbWalk *w, const BbBucket *bk, const uint8_t *k, uint32_t klen, int *found,
                        uint32_t *flags_out, uint8_t **val_out, uint32_t *vsize_out) {
    BboltDb *db = w->db;
    BbPage pg;
    uint64_t id = bk->root, from = 0;
    int rc;
    *found = 0;
    *val_out = NULL;
    w->budget = db->high_water;
    for (unsigned depth = 0;; depth++) {
        if (bk->root == 0) {
            pg = bk->inl;
        } else {
            rc = read_tree_page(w, depth, id, from, &pg);
            if (rc) return rc;
        }
        BbElem e;
        if (pg.flags == BB_FLAG_BRANCH) {
            /* largest element with key <= target, else the first (bbolt's search) */
            unsigned lo = 0, hi = pg.count; /* first index with key > target in [lo, hi) */
            while (lo < hi) {
                unsigned mid = lo + (hi - lo) / 2;
                rc = page_elem(db, &pg, mid, &e);
                if (rc) return rc;
                if (bbolt_key_cmp(e.key, e.ksize, k, klen) <= 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            rc = page_elem(db, &pg, lo > 0 ? lo - 1 : 0, &e);
            if (rc) return rc;
            from = id;
            id = e.child;
            continue;
        }
        for (unsigned i = 0; i < pg.count; i++) {
            rc = page_elem(db, &pg, i, &e);
            if (rc) return rc;
            if (bbolt_key_cmp(e.key, e.ksize, k, klen) != 0) continue;
            uint8_t *copy = malloc(e.vsize ? e.vsize : 1);
            if (!copy)
                return err_set(ERR_NOMEM, "%s: page %llu: out of memory for a %u-byte value",
                               db->path, (unsigned long long)pg.id, e.vsize);
            memcpy(copy, e.val, e.vsize);
            *found = 1;
            *flags_out = e.flags;
            *val_out = copy;
            *vsize_out = e.vsize;
            return 0;
        }
        return 0;
    }
}

static int bucket_get(BbWalk *w, const BbBucket *bk, const char *key, int *found,
                      uint32_t *flags_out, uint8_t **val_out, uint32_t *vsize_out) {
    return bucket_get_n(w, bk, (const uint8_t *)key, (uint32_t)strlen(key), found, flags_out,
                        val_out, vsize_out);
}

/* Last key of the subtree at page id (reverse depth-first, skipping empty leaves as
 * Cursor.Last does). Copies up to 8 key bytes to head and the key length to *ksize. */
static int tree_last_key(BbWalk *w, unsigned depth, uint64_t id, uint64_t from, int *found,
                         uint8_t head[8], uint32_t *ksize) {
    BboltDb *db = w->db;
    BbPage pg;
    int rc = read_tree_page(w, depth, id, from, &pg);
    if (rc) return rc;
    BbElem e;
    if (pg.flags == BB_FLAG_LEAF) {
        if (pg.count == 0) return 0;
        rc = page_elem(db, &pg, pg.count - 1u, &e);
        if (rc) return rc;
        memcpy(head, e.key, e.ksize < 8 ? e.ksize : 8);
        *ksize = e.ksize;
        *found = 1;
        return 0;
    }
    for (unsigned i = pg.count; i-- > 0 && !*found;) {
        /* the child read reuses deeper buffers only, so pg stays valid */
        rc = page_elem(db, &pg, i, &e);
        if (rc) return rc;
        rc = tree_last_key(w, depth + 1, e.child, id, found, head, ksize);
        if (rc) return rc;
    }
    return 0;
}

static int bucket_last_key(BbWalk *w, const BbBucket *bk, int *found, uint8_t head[8],
                           uint32_t *ksize) {
    *found = 0;
    w->budget = w->db->high_water;
    if (bk->root != 0) return tree_last_key(w, 0, bk->root, 0, found, head, ksize);
    const BbPage *pg = &bk->inl;
    if (pg->count == 0) return 0;
    BbElem e;
    int rc = page_elem(w->db, pg, pg->count - 1u, &e);
    if (rc) return rc;
    memcpy(head, e.key, e.ksize < 8 ? e.ksize : 8);
    *ksize = e.ksize;
    *found = 1;
    return 0;
}

/* Finds sub-bucket name of parent. *val_out (owned) backs the returned bucket. */
static int bucket_child(BbWalk *w, const BbBucket *parent, const char *name, int *found,
                        uint8_t **val_out, BbBucket *child) {
    uint32_t flags = 0, vsize = 0;
    int rc = bucket_get(w, parent, name, found, &flags, val_out, &vsize);
    if (rc || !*found) return rc;
    if (!(flags & BB_LEAF_BUCKET))
        return err_set(ERR_CORRUPT, "%s: \"%s\" is a plain key, not a bucket", w->db->path, name);
    return bucket_from_value(w->db, *val_out, vsize, parent->root, child);
}

static int meta_rev(BbWalk *w, const BbBucket *meta, const char *name, int64_t *rev) {
    int found = 0;
    uint32_t flags = 0, vsize = 0;
    uint8_t *val = NULL;
    int rc = bucket_get(w, meta, name, &found, &flags, &val, &vsize);
    if (rc || !found) goto done;
    if ((flags & BB_LEAF_BUCKET) || vsize < 8) {
        rc = err_set(ERR_CORRUPT, "%s: meta/%s: value of %u bytes is not a revision", w->db->path,
                     name, vsize);
        goto done;
    }
    uint64_t v = get_be64(val);
    if (v > INT64_MAX) {
        rc = err_set(ERR_CORRUPT, "%s: meta/%s: revision %llu out of range", w->db->path, name,
                     (unsigned long long)v);
        goto done;
    }
    if ((int64_t)v > *rev) *rev = (int64_t)v;
done:
    free(val);
    return rc;
}

static void walk_init(BbWalk *w, BboltDb *db) {
    memset(w, 0, sizeof *w);
    w->db = db;
    w->budget = db->high_water;
}

/* Like etcd's store.restore(): currentRev starts at 1, becomes the main revision of the last key
 * of bucket "key", then is raised to the compaction revisions in bucket "meta". So an empty
 * store gives 1 (what etcd and the Go tool report), not 0 as bbolt.h's comment says. */
int bbolt_etcd_revision(BboltDb *db, int64_t *rev_out) {
    BbWalk w;
    BbBucket root = {.root = db->root}, keyb, metab;
    uint8_t *keyval = NULL, *metaval = NULL;
    uint8_t head[8] = {0};
    uint32_t ksize = 0;
    int found = 0, rc;
    int64_t rev = 1; /* etcd's currentRev for a store with no keys */
    walk_init(&w, db);

    rc = bucket_child(&w, &root, "key", &found, &keyval, &keyb);
    if (rc) goto done;
    if (!found) {
        rc = err_set(ERR_NOT_FOUND, "%s: no bucket \"key\" (not an etcd db)", db->path);
        goto done;
    }
    rc = bucket_last_key(&w, &keyb, &found, head, &ksize);
    if (rc) goto done;
    if (found) {
        if (ksize < 8) {
            rc = err_set(ERR_CORRUPT,
                         "%s: last key of bucket \"key\" has %u bytes, want a 17-byte revision",
                         db->path, ksize);
            goto done;
        }
        uint64_t v = get_be64(head);
        if (v > INT64_MAX) {
            rc = err_set(ERR_CORRUPT, "%s: last key of bucket \"key\": revision %llu out of range",
                         db->path, (unsigned long long)v);
            goto done;
        }
        if ((int64_t)v > rev) rev = (int64_t)v;
    }

    /* keys up to a compaction revision may all be gone; etcd raises currentRev to it */
    rc = bucket_child(&w, &root, "meta", &found, &metaval, &metab);
    if (rc) goto done;
    if (found) {
        rc = meta_rev(&w, &metab, "finishedCompactRev", &rev);
        if (rc) goto done;
        rc = meta_rev(&w, &metab, "scheduledCompactRev", &rev);
        if (rc) goto done;
    }
    *rev_out = rev;
done:
    free(keyval);
    free(metaval);
    walk_free(&w);
    return rc;
}

/* Copies the value of key in top-level bucket `bucket` (see bbolt.h). */
int bbolt_get(BboltDb *db, const char *bucket, const void *key, size_t klen, void *val, size_t cap,
              size_t *vlen) {
    BbWalk w;
    BbBucket root = {.root = db->root}, bk;
    uint8_t *bval = NULL, *v = NULL;
    uint32_t flags = 0, vsize = 0;
    int found = 0, rc;
    walk_init(&w, db);
    if (klen > BB_MAX_KEY) {
        rc = err_set(ERR_INVALID, "%s: key of %zu bytes is longer than bbolt allows", db->path,
                     klen);
        goto done;
    }
    rc = bucket_child(&w, &root, bucket, &found, &bval, &bk);
    if (rc) goto done;
    if (!found) {
        rc = err_set(ERR_NOT_FOUND, "%s: no bucket \"%s\"", db->path, bucket);
        goto done;
    }
    rc = bucket_get_n(&w, &bk, key, (uint32_t)klen, &found, &flags, &v, &vsize);
    if (rc) goto done;
    if (!found || (flags & BB_LEAF_BUCKET)) {
        rc = err_set(ERR_NOT_FOUND, "%s: bucket \"%s\": %s", db->path, bucket,
                     found ? "the key names a nested bucket" : "no such key");
        goto done;
    }
    if (val && cap) memcpy(val, v, vsize < cap ? vsize : cap);
    if (vlen) *vlen = vsize;
done:
    free(bval);
    free(v);
    walk_free(&w);
    return rc;
}

/* ---- cursor ---- */

/* The walk's per-depth buffers hold the path of pages from the bucket's root (depth 0) to the
 * current leaf; stack[d] is the page in buffer d and the index of its next element. Reading a
 * child at depth d reuses buffer d only, so the pages above it stay valid. */
struct BboltCursor {
    BbWalk w;
    BbBucket bk;     /* the bucket iterated; an inline one points into bval */
    uint8_t *bval;   /* owned copy of the bucket's value in its parent (NULL for the root) */
    int root_bucket; /* iterating the root bucket: every item must name a bucket */
    int started;
    int done;
    unsigned depth; /* pages on the stack */
    struct {
        BbPage pg;
        unsigned next;
    } stack[BB_MAX_DEPTH + 1];
};

/* Printable form of a bucket name for messages: non-printing bytes as \xNN, long names cut. */
static const char *name_fmt(char *buf, size_t cap, const void *name, size_t len) {
    const uint8_t *p = name;
    size_t o = 0;
    for (size_t i = 0; i < len && o + 8 < cap; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
            buf[o++] = (char)p[i];
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", p[i]);
    }
    if (o + 8 >= cap && len > 0) o += (size_t)snprintf(buf + o, cap - o, "...");
    buf[o] = '\0';
    return buf;
}

int bbolt_cursor_open(BboltDb *db, const BboltName *path, size_t depth, BboltCursor **out) {
    BboltCursor *c = calloc(1, sizeof *c);
    uint8_t *val = NULL;
    char nb[160];
    int rc = 0;
    *out = NULL;
    if (!c) return err_set(ERR_NOMEM, "%s: out of memory for a cursor", db->path);
    walk_init(&c->w, db);
    c->bk.root = db->root;
    c->root_bucket = depth == 0;
    for (size_t i = 0; i < depth; i++) {
        int found = 0;
        uint32_t flags = 0, vsize = 0;
        uint64_t holder = c->bk.root ? c->bk.root : c->bk.inl.id;
        if (path[i].len > BB_MAX_KEY) {
            rc = err_set(ERR_INVALID,
                         "%s: bucket name %zu of the path has %zu bytes, more than "
                         "bbolt allows",
                         db->path, i, path[i].len);
            goto done;
        }
        if (path[i].len > 0) {
            rc = bucket_get_n(&c->w, &c->bk, path[i].name, (uint32_t)path[i].len, &found, &flags,
                              &val, &vsize);
            if (rc) goto done;
        }
        if (!found || !(flags & BB_LEAF_BUCKET)) {
            rc = err_set(ERR_NOT_FOUND, "%s: bucket \"%s\" (name %zu of the path): %s", db->path,
                         name_fmt(nb, sizeof nb, path[i].name, path[i].len), i,
                         found ? "a plain key, not a bucket" : "no such bucket");
            goto done;
        }
        BbBucket child;
        rc = bucket_from_value(db, val, vsize, holder, &child);
        if (rc) goto done;
        free(c->bval); /* backed the parent, no longer needed */
        c->bval = val;
        val = NULL;
        c->bk = child;
    }
done:
    free(val);
    RETURN_BUILT(rc, out, c, bbolt_cursor_close(c));
}

/* Pushes the page id (referenced by page `from`) at the cursor's depth. */
static int cursor_push(BboltCursor *c, uint64_t id, uint64_t from) {
    BboltDb *db = c->w.db;
    for (unsigned d = 0; d < c->depth; d++) {
        const BbPage *s = &c->stack[d].pg;
        if (!s->is_inline && id >= s->id && id - s->id <= s->overflow)
            return err_set(ERR_CORRUPT,
                           "%s: page %llu (from page %llu) is already on the path from the "
                           "bucket root",
                           db->path, (unsigned long long)id, (unsigned long long)from);
    }
    BbPage pg;
    int rc = read_tree_page(&c->w, c->depth, id, from, &pg);
    if (rc) return rc;
    c->stack[c->depth].pg = pg;
    c->stack[c->depth].next = 0;
    c->depth++;
    return 0;
}

int bbolt_cursor_next(BboltCursor *c, BboltItem *item, int *got) {
    BboltDb *db = c->w.db;
    int rc = 0;
    *got = 0;
    memset(item, 0, sizeof *item);
    if (c->done) return 0;
    if (!c->started) {
        c->started = 1;
        c->w.budget = db->high_water; /* an in-order walk reads each page once */
        if (c->bk.root == 0) {
            c->stack[0].pg = c->bk.inl;
            c->stack[0].next = 0;
            c->depth = 1;
        } else if ((rc = cursor_push(c, c->bk.root, 0))) {
            goto fail;
        }
    }
    while (c->depth > 0) {
        BbPage *pg = &c->stack[c->depth - 1].pg;
        unsigned i = c->stack[c->depth - 1].next;
        if (i >= pg->count) {
            c->depth--;
            continue;
        }
        c->stack[c->depth - 1].next = i + 1;
        BbElem e;
        if ((rc = page_elem(db, pg, i, &e))) goto fail;
        if (pg->flags == BB_FLAG_BRANCH) {
            if ((rc = cursor_push(c, e.child, pg->id))) goto fail;
            continue;
        }
        if (e.flags & ~(uint32_t)BB_LEAF_BUCKET) {
            rc = err_set(ERR_CORRUPT, "%s: %s %llu: element %u: unknown flags 0x%x", db->path,
                         page_kind(pg), (unsigned long long)pg->id, i, e.flags);
            goto fail;
        }
        if (c->root_bucket && !(e.flags & BB_LEAF_BUCKET)) {
            rc = err_set(ERR_CORRUPT, "%s: %s %llu: element %u: plain key in the root bucket",
                         db->path, page_kind(pg), (unsigned long long)pg->id, i);
            goto fail;
        }
        item->key = e.key;
        item->key_len = e.ksize;
        item->is_bucket = (e.flags & BB_LEAF_BUCKET) != 0;
        if (!item->is_bucket) {
            item->value = e.val;
            item->value_len = e.vsize;
        }
        *got = 1;
        return 0;
    }
    c->done = 1;
    return 0;
fail:
    c->done = 1;
    return rc;
}

void bbolt_cursor_close(BboltCursor *c) {
    if (!c) return;
    walk_free(&c->w);
    free(c->bval);
    free(c);
}

/* ---- consistency check ---- */

static int mark_pages(BbWalk *w, const BbPage *pg, uint64_t from) {
    BboltDb *db = w->db;
    for (uint64_t i = 0; i <= pg->overflow; i++) {
        uint64_t id = pg->id + i;
        if (bit_get(w->visited, id))
            return err_set(ERR_CORRUPT, "%s: page %llu (from page %llu) is reached twice", db->path,
                           (unsigned long long)id, (unsigned long long)from);
        if (w->freed && bit_get(w->freed, id))
            return err_set(ERR_CORRUPT, "%s: page %llu (from page %llu) is reachable but free",
                           db->path, (unsigned long long)id, (unsigned long long)from);
        bit_set(w->visited, id);
        w->visited_count++;
    }
    return 0;
}

static int check_tree(BbWalk *w, unsigned depth, uint64_t id, uint64_t from, BbKey lo, BbKey hi,
                      int root_bucket);

/* Key order of element i: >= lo (first), > the previous key, < hi (bbolt's tx.Check rules). */
static int check_key(BboltDb *db, const BbPage *pg, unsigned i, const BbElem *e, const BbKey *prev,
                     const BbKey *hi) {
    if (e->ksize > BB_MAX_KEY)
        return err_set(ERR_CORRUPT, "%s: %s %llu: element %u: key of %u bytes exceeds %d", db->path,
                       page_kind(pg), (unsigned long long)pg->id, i, e->ksize, BB_MAX_KEY);
    if (prev->set) {
        int c = bbolt_key_cmp(prev->p, prev->n, e->key, e->ksize);
        if (i == 0 ? c > 0 : c >= 0)
            return err_set(ERR_CORRUPT, "%s: %s %llu: element %u: key out of order (%s)", db->path,
                           page_kind(pg), (unsigned long long)pg->id, i,
                           i == 0 ? "below its parent's key" : "not above the previous key");
    }
    if (hi->set && bbolt_key_cmp(e->key, e->ksize, hi->p, hi->n) >= 0)
        return err_set(
            ERR_CORRUPT,
            "%s: %s %llu: element %u: key out of order (not below the parent's next key)", db->path,
            page_kind(pg), (unsigned long long)pg->id, i);
    return 0;
}

/* Leaf elements (disk or inline page): flags, key order, and nested buckets. */
static int check_leaf(BbWalk *w, unsigned depth, const BbPage *pg, BbKey lo, BbKey hi,
                      int root_bucket) {
    BboltDb *db = w->db;
    BbKey prev = lo;
    for (unsigned i = 0; i < pg->count; i++) {
        BbElem e;
        int rc = page_elem(db, pg, i, &e);
        if (rc) return rc;
        rc = check_key(db, pg, i, &e, &prev, &hi);
        if (rc) return rc;
        prev = (BbKey){e.key, e.ksize, 1};
        if (e.flags & ~(uint32_t)BB_LEAF_BUCKET)
            return err_set(ERR_CORRUPT, "%s: %s %llu: element %u: unknown flags 0x%x", db->path,
                           page_kind(pg), (unsigned long long)pg->id, i, e.flags);
        if (!(e.flags & BB_LEAF_BUCKET)) {
            if (root_bucket)
                return err_set(ERR_CORRUPT,
                               "%s: page %llu: element %u: plain key in the root bucket", db->path,
                               (unsigned long long)pg->id, i);
            continue;
        }
        BbBucket bk;
        rc = bucket_from_value(db, e.val, e.vsize, pg->id, &bk);
        if (rc) return rc;
        BbKey none = {0};
        if (bk.root != 0) {
            rc = check_tree(w, depth + 1, bk.root, pg->id, none, none, 0);
        } else {
            if (depth + 1 > BB_MAX_DEPTH)
                return err_set(ERR_CORRUPT, "%s: page %llu: buckets nested deeper than %d levels",
                               db->path, (unsigned long long)pg->id, BB_MAX_DEPTH);
            rc = check_leaf(w, depth + 1, &bk.inl, none, none, 0);
        }
        if (rc) return rc;
    }
    return 0;
}

static int check_tree(BbWalk *w, unsigned depth, uint64_t id, uint64_t from, BbKey lo, BbKey hi,
                      int root_bucket) {
    BboltDb *db = w->db;
    BbPage pg;
    int rc = read_page(w, depth, id, from, &pg);
    if (rc) return rc;
    rc = mark_pages(w, &pg, from);
    if (rc) return rc;
    rc = expect_tree_page(db, &pg, from);
    if (rc) return rc;
    if (pg.flags == BB_FLAG_LEAF) return check_leaf(w, depth, &pg, lo, hi, root_bucket);
    BbKey prev = lo;
    for (unsigned i = 0; i < pg.count; i++) {
        BbElem e, next;
        rc = page_elem(db, &pg, i, &e);
        if (rc) return rc;
        rc = check_key(db, &pg, i, &e, &prev, &hi);
        if (rc) return rc;
        BbKey child_hi = hi;
        if (i + 1u < pg.count) {
            rc = page_elem(db, &pg, i + 1, &next);
            if (rc) return rc;
            child_hi = (BbKey){next.key, next.ksize, 1};
        }
        rc = check_tree(w, depth + 1, e.child, id, (BbKey){e.key, e.ksize, 1}, child_hi,
                        root_bucket);
        if (rc) return rc;
        prev = (BbKey){e.key, e.ksize, 1};
    }
    return 0;
}

static int check_freelist(BbWalk *w) {
    BboltDb *db = w->db;
    BbPage pg;
    int rc = read_page(w, 0, db->freelist, 0, &pg);
    if (rc) return rc;
    if (pg.flags != BB_FLAG_FREELIST)
        return err_set(ERR_CORRUPT, "%s: page %llu: flags 0x%x, want freelist", db->path,
                       (unsigned long long)pg.id, pg.flags);
    rc = mark_pages(w, &pg, 0);
    if (rc) return rc;
    uint64_t n = pg.count, first = 0;
    uint64_t slots = (pg.len - BB_PAGE_HEADER) / 8;
    if (pg.count == 0xFFFF) { /* the real count is the first element */
        if (slots < 1)
            return err_set(ERR_CORRUPT, "%s: freelist page %llu: no room for its count", db->path,
                           (unsigned long long)pg.id);
        n = get_le64(pg.data + BB_PAGE_HEADER);
        first = 1;
    }
    if (n > slots - first)
        return err_set(ERR_CORRUPT, "%s: freelist page %llu: %llu ids do not fit in %llu bytes",
                       db->path, (unsigned long long)pg.id, (unsigned long long)n,
                       (unsigned long long)pg.len);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t fid = get_le64(pg.data + BB_PAGE_HEADER + (first + i) * 8);
        if (fid < 2 || fid >= db->high_water)
            return err_set(ERR_CORRUPT, "%s: freelist page %llu: free page id %llu outside 2..%llu",
                           db->path, (unsigned long long)pg.id, (unsigned long long)fid,
                           (unsigned long long)(db->high_water - 1));
        if (bit_get(w->freed, fid))
            return err_set(ERR_CORRUPT, "%s: freelist page %llu: page %llu listed twice", db->path,
                           (unsigned long long)pg.id, (unsigned long long)fid);
        if (bit_get(w->visited, fid))
            return err_set(ERR_CORRUPT, "%s: freelist page %llu: lists page %llu that is in use",
                           db->path, (unsigned long long)pg.id, (unsigned long long)fid);
        bit_set(w->freed, fid);
    }
    return 0;
}

int bbolt_check(BboltDb *db, uint64_t *pages_out) {
    BbWalk w;
    int rc;
    walk_init(&w, db);
    size_t bytes = (size_t)((db->high_water + 7) / 8);
    w.visited = calloc(bytes, 1);
    if (!w.visited) {
        rc = err_set(ERR_NOMEM, "%s: out of memory for a %zu-byte page map", db->path, bytes);
        goto done;
    }
    bit_set(w.visited, 0);
    bit_set(w.visited, 1);
    w.visited_count = 2;
    if (db->freelist != BB_NO_FREELIST) {
        w.freed = calloc(bytes, 1);
        if (!w.freed) {
            rc = err_set(ERR_NOMEM, "%s: out of memory for a %zu-byte page map", db->path, bytes);
            goto done;
        }
        rc = check_freelist(&w);
        if (rc) goto done;
    }
    BbKey none = {0};
    rc = check_tree(&w, 0, db->root, 0, none, none, 1);
    if (rc) goto done;
    if (w.freed) { /* with a synced freelist every page is in use or free (bbolt's check) */
        for (uint64_t id = 2; id < db->high_water; id++) {
            if (!bit_get(w.visited, id) && !bit_get(w.freed, id)) {
                rc = err_set(ERR_CORRUPT, "%s: page %llu is neither reachable nor free", db->path,
                             (unsigned long long)id);
                goto done;
            }
        }
    }
    if (pages_out) *pages_out = w.visited_count;
done:
    walk_free(&w);
    return rc;
}

/* ---- open ---- */

void bbolt_meta_parse(const uint8_t *b, unsigned index, uint64_t off, BbMeta *m) {
    const uint8_t *mp = b + BB_PAGE_HEADER;
    memset(m, 0, sizeof *m);
    uint32_t magic = get_le32(mp), version = get_le32(mp + 4);
    m->page_size = get_le32(mp + 8);
    m->root = get_le64(mp + 16);
    m->freelist = get_le64(mp + 32);
    m->pgid = get_le64(mp + 40);
    m->txid = get_le64(mp + 48);
    if (magic != BB_MAGIC) {
        snprintf(m->why, sizeof m->why, "bad magic 0x%08x", magic);
    } else if (version != BB_VERSION) {
        snprintf(m->why, sizeof m->why, "version %u, want %u", version, BB_VERSION);
    } else if (get_le64(mp + BB_META_SUM_LEN) != bbolt_fnv1a64(mp, BB_META_SUM_LEN)) {
        snprintf(m->why, sizeof m->why, "checksum mismatch");
    } else if (get_le16(b + 8) != BB_FLAG_META || get_le64(b) != index) {
        snprintf(m->why, sizeof m->why, "page header id %llu flags 0x%x",
                 (unsigned long long)get_le64(b), get_le16(b + 8));
    } else if (m->page_size < BB_MIN_PAGE || m->page_size > BB_MAX_PAGE ||
               (m->page_size & (m->page_size - 1)) != 0) {
        snprintf(m->why, sizeof m->why, "page size %u", m->page_size);
    } else if (index == 1 && off != BB_META_ANY_OFFSET && off != m->page_size) {
        snprintf(m->why, sizeof m->why, "page size %u but found at byte %llu", m->page_size,
                 (unsigned long long)off);
    } else if (m->pgid < 3 || m->root < 2 || m->root >= m->pgid ||
               (m->freelist != BB_NO_FREELIST && (m->freelist < 2 || m->freelist >= m->pgid))) {
        snprintf(m->why, sizeof m->why, "root %llu freelist %llu outside high water %llu",
                 (unsigned long long)m->root, (unsigned long long)m->freelist,
                 (unsigned long long)m->pgid);
    } else {
        m->valid = 1;
    }
}

/* Reads and validates the meta page at off, which must be page `index` (0 or 1). */
static void meta_read(BboltDb *db, uint64_t off, uint64_t limit, unsigned index, BbMeta *m) {
    uint8_t b[BB_PAGE_HEADER + BB_META_SIZE];
    memset(m, 0, sizeof *m);
    if (off + sizeof b > limit) {
        snprintf(m->why, sizeof m->why, "beyond the end of the file");
        return;
    }
    if (pread_full(db, b, sizeof b, off, index) != 0) {
        snprintf(m->why, sizeof m->why, "unreadable (%s)", err_msg());
        return;
    }
    bbolt_meta_parse(b, index, off, m);
}

int bbolt_open(const char *path, uint64_t size_limit, BboltDb **out) {
    BboltDb *db = calloc(1, sizeof *db);
    int rc = 0;
    *out = NULL;
    if (!db) return err_set(ERR_NOMEM, "%s: out of memory", path);
    db->fd = -1;
    if (!(db->path = strdup(path))) {
        free(db);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat st;
    if ((rc = fs_open_regular(path, NULL, path, FS_OPEN_BLOCK_OK, &db->fd, &st))) goto done;
    uint64_t limit = (uint64_t)st.st_size;
    if (size_limit != 0 && size_limit < limit) limit = size_limit;

    BbMeta m0, m1;
    meta_read(db, 0, limit, 0, &m0);
    if (m0.valid) {
        meta_read(db, m0.page_size, limit, 1, &m1);
    } else { /* page size unknown: try each possible offset of meta 1 */
        for (uint32_t ps = BB_MIN_PAGE; ps <= BB_MAX_PAGE; ps *= 2) {
            meta_read(db, ps, limit, 1, &m1);
            if (m1.valid) break;
        }
    }
    if (m0.valid && m1.valid && m1.page_size != m0.page_size) m1.valid = 0;
    const BbMeta *m = NULL;
    if (m0.valid && (!m1.valid || m0.txid >= m1.txid))
        m = &m0;
    else if (m1.valid)
        m = &m1;
    if (!m) {
        rc = err_set(ERR_CORRUPT, "%s: no valid bbolt meta page (meta 0: %s; meta 1: %s)", path,
                     m0.why, m1.why);
        goto done;
    }
    db->page_size = m->page_size;
    db->root = m->root;
    db->freelist = m->freelist;
    db->high_water = m->pgid;
    db->txid = m->txid;
    db->file_pages = limit / m->page_size;
    if (m->pgid > db->file_pages) {
        rc = err_set(ERR_CORRUPT,
                     "%s: truncated: meta (txid %llu) says %llu pages of %u bytes, the file holds "
                     "%llu bytes",
                     path, (unsigned long long)m->txid, (unsigned long long)m->pgid, m->page_size,
                     (unsigned long long)limit);
        goto done;
    }
done:
    RETURN_BUILT(rc, out, db, bbolt_close(db));
}

void bbolt_close(BboltDb *db) {
    if (!db) return;
    if (db->fd >= 0) close(db->fd);
    free(db->path);
    free(db);
}

uint32_t bbolt_page_size(const BboltDb *db) {
    return db->page_size;
}

uint64_t bbolt_txid(const BboltDb *db) {
    return db->txid;
}
