/* bbolt_stream: see bbolt_stream.h. The stream is cut into page-size blocks kept in a ring
 * window; every block is tried as a page start (a freed page may hold anything, and a live page
 * may follow a stale header claiming overflow over it), and a page with overflow is handled once
 * its last block arrived. What the tree needs is kept by page id and resolved at finish, since
 * parents may come before or after their children in the file. */
#include "bbolt_stream.h"
#include "bbolt.h"
#include "bbolt_layout.h"
#include "../common/byteorder.h"
#include "../common/err.h"
#include "../common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    BB_REV_KEY = 17, /* etcd's revision key: 8-byte main, '_', 8-byte sub (+ 't' tombstone) */
    N_INTERNAL = 3,  /* meta's compaction revisions and consistent_index (a marker) */
};

typedef struct {
    uint64_t pgid, child; /* a branch page and its last child */
} BranchEnt;

typedef struct {
    uint64_t pgid;
    int64_t rev; /* main revision of the last key; -1 for an empty leaf */
} LeafEnt;

typedef struct {
    uint64_t pgid;
    uint8_t *data;
    size_t len;
} Capture;

typedef struct {
    uint64_t pgid;
    uint32_t overflow;
} Pending;

struct BboltStream {
    int err; /* sticky */
    uint8_t head[BB_PAGE_HEADER + BB_META_SIZE];
    size_t head_len;
    uint32_t ps;
    uint32_t win_blocks;
    uint8_t *win, *scratch;
    size_t partial;  /* bytes of the block being filled */
    uint64_t blocks; /* complete blocks so far: the next block's page id */
    BbMeta meta[2];
    const BbMeta *m; /* chosen after block 1 */
    Pending *pend;
    size_t npend;
    BranchEnt *br;
    size_t nbr, capbr;
    int br_dropped, br_sorted;
    LeafEnt *leaf; /* min-heap on rev */
    size_t nleaf;
    Capture cap[BBOLT_STREAM_MAX_CAPTURES];
    size_t ncap;
    int cap_dropped;
    uint8_t *rootpg;
    size_t rootpg_len;
    char *want_bucket[BBOLT_STREAM_MAX_WANTS], *want_key[BBOLT_STREAM_MAX_WANTS];
    size_t nwant;
    int finished;
};

static const char *const internal_keys[N_INTERNAL] = {"finishedCompactRev", "scheduledCompactRev",
                                                      "consistent_index"};

int bbolt_stream_new(BboltStream **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return err_set(ERR_NOMEM, "bbolt stream: out of memory");
    (*out)->leaf = malloc(BBOLT_STREAM_LEAF_CANDIDATES * sizeof *(*out)->leaf);
    if (!(*out)->leaf) {
        free(*out);
        *out = NULL;
        return err_set(ERR_NOMEM, "bbolt stream: out of memory");
    }
    return 0;
}

void bbolt_stream_free(BboltStream *s) {
    if (!s) return;
    FREE_ALL(s->win, s->scratch, s->pend, s->br, s->leaf);
    for (size_t i = 0; i < s->ncap; i++)
        free(s->cap[i].data);
    free(s->rootpg);
    for (size_t i = 0; i < s->nwant; i++) {
        free(s->want_bucket[i]);
        free(s->want_key[i]);
    }
    free(s);
}

int bbolt_stream_want(BboltStream *s, const char *bucket, const char *key) {
    if (s->nwant >= BBOLT_STREAM_MAX_WANTS || s->head_len || strlen(bucket) > 255 ||
        strlen(key) > 255)
        return err_set(ERR_INVALID, "bbolt stream: cannot ask for %s/%s", bucket, key);
    s->want_bucket[s->nwant] = strdup(bucket);
    s->want_key[s->nwant] = strdup(key);
    if (!s->want_bucket[s->nwant] || !s->want_key[s->nwant]) {
        free(s->want_bucket[s->nwant]);
        free(s->want_key[s->nwant]);
        return err_set(ERR_NOMEM, "bbolt stream: out of memory");
    }
    s->nwant++;
    return 0;
}

uint32_t bbolt_stream_page_size(const BboltStream *s) {
    return s->ps;
}

static int fail(BboltStream *s, int rc) {
    s->err = rc;
    return rc;
}

/* Meta 0 from the first bytes: fixes the page size and allocates the window. */
static int start_pages(BboltStream *s) {
    bbolt_meta_parse(s->head, 0, BB_META_ANY_OFFSET, &s->meta[0]);
    if (!s->meta[0].valid)
        return fail(s, err_set(ERR_CORRUPT, "not a bbolt db: meta page 0: %s", s->meta[0].why));
    s->ps = s->meta[0].page_size;
    s->win_blocks = (uint32_t)(BBOLT_STREAM_WINDOW / s->ps);
    s->win = malloc(BBOLT_STREAM_WINDOW);
    s->scratch = malloc(BBOLT_STREAM_WINDOW);
    s->pend = malloc(s->win_blocks * sizeof *s->pend);
    if (!s->win || !s->scratch || !s->pend)
        return fail(s, err_set(ERR_NOMEM, "bbolt stream: out of memory"));
    memcpy(s->win, s->head, s->head_len);
    s->partial = s->head_len;
    return 0;
}

static int choose_meta(BboltStream *s, const uint8_t *b) {
    bbolt_meta_parse(b, 1, BB_META_ANY_OFFSET, &s->meta[1]);
    if (s->meta[1].valid && s->meta[1].page_size != s->ps) s->meta[1].valid = 0;
    s->m = s->meta[1].valid && s->meta[1].txid > s->meta[0].txid ? &s->meta[1] : &s->meta[0];
    return 0;
}

static void heap_swap(LeafEnt *a, LeafEnt *b) {
    LeafEnt t = *a;
    *a = *b;
    *b = t;
}

/* Keeps the BBOLT_STREAM_LEAF_CANDIDATES leaves with the highest last revisions. */
static void leaf_add(BboltStream *s, uint64_t pgid, int64_t rev) {
    LeafEnt *h = s->leaf;
    size_t i;
    if (s->nleaf < BBOLT_STREAM_LEAF_CANDIDATES) {
        i = s->nleaf++;
        h[i] = (LeafEnt){pgid, rev};
        while (i > 0 && h[(i - 1) / 2].rev > h[i].rev) {
            heap_swap(&h[(i - 1) / 2], &h[i]);
            i = (i - 1) / 2;
        }
        return;
    }
    if (rev <= h[0].rev) return;
    h[0] = (LeafEnt){pgid, rev};
    for (i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->nleaf && h[l].rev < h[m].rev) m = l;
        if (r < s->nleaf && h[r].rev < h[m].rev) m = r;
        if (m == i) break;
        heap_swap(&h[m], &h[i]);
        i = m;
    }
}

static void branch_add(BboltStream *s, uint64_t pgid, uint64_t child) {
    if (s->nbr == s->capbr) {
        size_t cap = s->capbr ? s->capbr * 2 : 256;
        BranchEnt *n = cap <= BBOLT_STREAM_MAX_BRANCHES ? realloc(s->br, cap * sizeof *n) : NULL;
        if (!n) {
            s->br_dropped = 1;
            return;
        }
        s->br = n;
        s->capbr = cap;
    }
    s->br[s->nbr++] = (BranchEnt){pgid, child};
}

/* Element i of the leaf page at p (len bytes): key and value bounds-checked. 0 or -1. */
static int leaf_elem(const uint8_t *p, size_t len, unsigned i, uint32_t *flags, const uint8_t **k,
                     uint32_t *ks, const uint8_t **v, uint32_t *vs) {
    uint64_t e = BB_PAGE_HEADER + (uint64_t)i * BB_ELEM_SIZE;
    if (e + BB_ELEM_SIZE > len) return -1;
    uint64_t pos = get_le32(p + e + 4), ksize = get_le32(p + e + 8), vsize = get_le32(p + e + 12);
    if (e + pos + ksize + vsize > len) return -1;
    *flags = get_le32(p + e);
    *k = p + e + pos;
    *ks = (uint32_t)ksize;
    *v = *k + ksize;
    *vs = (uint32_t)vsize;
    return 0;
}

static int key_wanted(const BboltStream *s, const uint8_t *k, uint32_t ks) {
    for (size_t i = 0; i < s->nwant + N_INTERNAL; i++) {
        const char *w = i < s->nwant ? s->want_key[i] : internal_keys[i - s->nwant];
        if (strlen(w) == ks && memcmp(w, k, ks) == 0) return 1;
    }
    return 0;
}

/* A copy of the page run p (len bytes) into *dst (owned by s). 0 or ERR_NOMEM. */
static int capture(BboltStream *s, const uint8_t *p, size_t len, uint8_t **dst, size_t *dlen) {
    uint8_t *c = malloc(len);
    if (!c) return fail(s, err_set(ERR_NOMEM, "bbolt stream: out of memory"));
    memcpy(c, p, len);
    *dst = c;
    *dlen = len;
    return 0;
}

/* A leaf page run (the page with its overflow) at pgid. */
static int leaf_run(BboltStream *s, uint64_t pgid, const uint8_t *p, size_t len) {
    unsigned count = get_le16(p + 10);
    uint32_t fl, ks, vs;
    const uint8_t *k, *v;
    if (pgid == s->m->root) return capture(s, p, len, &s->rootpg, &s->rootpg_len);
    if (count == 0) {
        leaf_add(s, pgid, -1);
    } else if (leaf_elem(p, len, count - 1, &fl, &k, &ks, &v, &vs) == 0 && !(fl & BB_LEAF_BUCKET) &&
               (ks == BB_REV_KEY || ks == BB_REV_KEY + 1) && k[8] == '_' &&
               get_be64(k) <= INT64_MAX) {
        leaf_add(s, pgid, (int64_t)get_be64(k));
        return 0; /* a page of bucket "key": nothing wanted in it */
    }
    if (len > BBOLT_STREAM_CAPTURE_MAX) return 0;
    for (unsigned i = 0; i < count; i++) {
        if (leaf_elem(p, len, i, &fl, &k, &ks, &v, &vs) != 0) return 0;
        if ((fl & BB_LEAF_BUCKET) || !key_wanted(s, k, ks)) continue;
        if (s->ncap == BBOLT_STREAM_MAX_CAPTURES) {
            s->cap_dropped = 1;
            return 0;
        }
        Capture *c = &s->cap[s->ncap];
        c->pgid = pgid;
        if (capture(s, p, len, &c->data, &c->len)) return s->err;
        s->ncap++;
        return 0;
    }
    return 0;
}

static int run_done(BboltStream *s, uint64_t pgid, const uint8_t *p, size_t len) {
    uint16_t flags = get_le16(p + 8);
    if (flags == BB_FLAG_LEAF) return leaf_run(s, pgid, p, len);
    unsigned count = get_le16(p + 10);
    uint64_t e = BB_PAGE_HEADER + (uint64_t)(count ? count - 1 : 0) * BB_ELEM_SIZE;
    if (count > 0 && e + BB_ELEM_SIZE <= len) branch_add(s, pgid, get_le64(p + e + 8));
    return 0;
}

/* The run of n blocks starting at page pgid, contiguous (copied to scratch if it wraps). */
static const uint8_t *run_bytes(BboltStream *s, uint64_t pgid, uint64_t n) {
    uint64_t slot = pgid % s->win_blocks;
    if (slot + n <= s->win_blocks) return s->win + slot * s->ps;
    size_t first = (size_t)(s->win_blocks - slot) * s->ps;
    memcpy(s->scratch, s->win + slot * s->ps, first);
    memcpy(s->scratch + first, s->win, (size_t)n * s->ps - first);
    return s->scratch;
}

/* Block pgid is complete in the window. */
static int on_block(BboltStream *s, uint64_t pgid) {
    const uint8_t *b = s->win + (pgid % s->win_blocks) * s->ps;
    if (pgid == 1) return choose_meta(s, b);
    if (pgid == 0 || pgid >= s->m->pgid) return 0;
    uint16_t flags = get_le16(b + 8);
    uint32_t overflow = get_le32(b + 12);
    if (get_le64(b) == pgid && (flags == BB_FLAG_LEAF || flags == BB_FLAG_BRANCH)) {
        if (overflow == 0) {
            int rc = run_done(s, pgid, b, s->ps);
            if (rc) return rc;
        } else if (overflow < s->win_blocks && pgid + overflow < s->m->pgid) {
            s->pend[s->npend++] = (Pending){pgid, overflow};
        }
    }
    for (size_t i = 0; i < s->npend;) {
        Pending pd = s->pend[i];
        if (pd.pgid + pd.overflow != pgid) {
            i++;
            continue;
        }
        s->pend[i] = s->pend[--s->npend];
        uint64_t n = (uint64_t)pd.overflow + 1;
        int rc = run_done(s, pd.pgid, run_bytes(s, pd.pgid, n), (size_t)n * s->ps);
        if (rc) return rc;
    }
    return 0;
}

int bbolt_stream_feed(BboltStream *s, const void *buf, size_t len) {
    const uint8_t *p = buf;
    if (s->err) return s->err;
    if (s->finished) return fail(s, err_set(ERR_INVALID, "bbolt stream: fed after finish"));
    while (len > 0) {
        if (s->ps == 0) {
            mem_fill(s->head, sizeof s->head, &s->head_len, &p, &len);
            if (s->head_len == sizeof s->head && start_pages(s)) return s->err;
            continue;
        }
        mem_fill(s->win + (s->blocks % s->win_blocks) * s->ps, s->ps, &s->partial, &p, &len);
        if (s->partial < s->ps) continue;
        s->partial = 0;
        int rc = on_block(s, s->blocks);
        s->blocks++;
        if (rc) return fail(s, rc);
    }
    return 0;
}

/* ---------- resolution ---------- */

typedef struct {
    uint64_t root;      /* 0: inline */
    const uint8_t *inl; /* inline page */
    size_t inl_len;
} BucketRef;

static int leaf_find(const uint8_t *p, size_t len, const void *key, size_t klen, int want_bucket,
                     const uint8_t **v, uint32_t *vs) {
    unsigned count = get_le16(p + 10);
    for (unsigned i = 0; i < count; i++) {
        uint32_t fl, ks;
        const uint8_t *k;
        if (leaf_elem(p, len, i, &fl, &k, &ks, v, vs) != 0)
            return err_set(ERR_CORRUPT, "bbolt page: element %u out of bounds", i);
        if (ks == klen && memcmp(k, key, klen) == 0)
            return !(fl & BB_LEAF_BUCKET) == !want_bucket ? 0 : ERR_NOT_FOUND;
    }
    return ERR_NOT_FOUND;
}

static int root_bucket(BboltStream *s, const char *name, BucketRef *out) {
    const uint8_t *v;
    uint32_t vs;
    int rc = leaf_find(s->rootpg, s->rootpg_len, name, strlen(name), 1, &v, &vs);
    if (rc == ERR_NOT_FOUND) return rc;
    if (rc) return err_wrap(rc, "root bucket page %llu", (unsigned long long)s->m->root);
    if (vs < BB_BUCKET_HEADER)
        return err_set(ERR_CORRUPT, "bucket %s: header of %u bytes", name, vs);
    out->root = get_le64(v);
    out->inl = v + BB_BUCKET_HEADER;
    out->inl_len = vs - BB_BUCKET_HEADER;
    if (out->root == 0 &&
        (out->inl_len < BB_PAGE_HEADER || (get_le16(out->inl + 8) & BB_FLAG_LEAF) == 0))
        return err_set(ERR_CORRUPT, "bucket %s: inline page is not a leaf", name);
    if (out->root != 0 && (out->root < 2 || out->root >= s->m->pgid))
        return err_set(ERR_CORRUPT, "bucket %s: root page %llu outside the db", name,
                       (unsigned long long)out->root);
    return 0;
}

static int br_cmp(const void *a, const void *b) {
    const BranchEnt *x = a, *y = b;
    return x->pgid < y->pgid ? -1 : x->pgid > y->pgid;
}

static const BranchEnt *branch_find(BboltStream *s, uint64_t pgid) {
    if (!s->br_sorted) {
        if (s->nbr) qsort(s->br, s->nbr, sizeof *s->br, br_cmp);
        s->br_sorted = 1;
    }
    BranchEnt k = {pgid, 0};
    return s->nbr ? bsearch(&k, s->br, s->nbr, sizeof *s->br, br_cmp) : NULL;
}

/* The page of a small bucket (root a disk page): one kept leaf page. */
static int bucket_page(BboltStream *s, const char *name, const BucketRef *b, const uint8_t **p,
                       size_t *len) {
    if (b->root == 0) {
        *p = b->inl;
        *len = b->inl_len;
        return 0;
    }
    for (size_t i = 0; i < s->ncap; i++)
        if (s->cap[i].pgid == b->root) {
            *p = s->cap[i].data;
            *len = s->cap[i].len;
            return 0;
        }
    return err_set(ERR_UNSUPPORTED, "bucket %s: its page %llu was not kept while streaming%s", name,
                   (unsigned long long)b->root,
                   branch_find(s, b->root) ? " (it spans several pages)" : "");
}

static int bucket_get(BboltStream *s, const char *bucket, const char *key, const uint8_t **v,
                      uint32_t *vs) {
    BucketRef b;
    const uint8_t *p = NULL;
    size_t len = 0;
    int rc = root_bucket(s, bucket, &b);
    if (!rc) rc = bucket_page(s, bucket, &b, &p, &len);
    if (!rc) rc = leaf_find(p, len, key, strlen(key), 0, v, vs);
    return rc;
}

/* Main revision of the last key of bucket "key" into *rev (unchanged when it is empty). */
static int key_bucket_rev(BboltStream *s, int64_t *rev) {
    BucketRef b;
    int rc = root_bucket(s, "key", &b);
    if (rc == ERR_NOT_FOUND) return err_set(ERR_CORRUPT, "no bucket \"key\" (not an etcd db)");
    if (rc) return rc;
    if (b.root == 0) {
        unsigned count = get_le16(b.inl + 10);
        uint32_t fl, ks, vs;
        const uint8_t *k, *v;
        if (count == 0) return 0;
        if (leaf_elem(b.inl, b.inl_len, count - 1, &fl, &k, &ks, &v, &vs) != 0 || ks < 8)
            return err_set(ERR_CORRUPT, "bucket \"key\": inline last key unreadable");
        if (get_be64(k) > INT64_MAX) return err_set(ERR_CORRUPT, "bucket \"key\": bad revision");
        if ((int64_t)get_be64(k) > *rev) *rev = (int64_t)get_be64(k);
        return 0;
    }
    uint64_t pg = b.root;
    for (int depth = 0; depth <= BB_MAX_DEPTH; depth++) {
        const BranchEnt *e = branch_find(s, pg);
        if (e) {
            if (e->child < 2 || e->child >= s->m->pgid)
                return err_set(ERR_CORRUPT, "branch page %llu: child %llu outside the db",
                               (unsigned long long)pg, (unsigned long long)e->child);
            pg = e->child;
            continue;
        }
        for (size_t i = 0; i < s->nleaf; i++)
            if (s->leaf[i].pgid == pg) {
                if (s->leaf[i].rev > *rev) *rev = s->leaf[i].rev;
                return 0;
            }
        return err_set(ERR_UNSUPPORTED,
                       "bucket \"key\": its last leaf page %llu was not kept while streaming",
                       (unsigned long long)pg);
    }
    return err_set(ERR_CORRUPT, "bucket \"key\": deeper than %d levels", BB_MAX_DEPTH);
}

int bbolt_stream_finish(BboltStream *s, uint64_t db_len, int64_t *revision) {
    if (s->err) return s->err;
    s->finished = 1;
    if (!s->m)
        return fail(s, err_set(ERR_CORRUPT, "not a bbolt db: %llu bytes, no meta pages",
                               (unsigned long long)db_len));
    uint64_t want = s->m->pgid * s->ps;
    if (db_len != want || s->blocks < s->m->pgid)
        return fail(s, err_set(ERR_CORRUPT,
                               "db of %llu bytes, but its meta says %llu pages of %u bytes "
                               "(%llu bytes)",
                               (unsigned long long)db_len, (unsigned long long)s->m->pgid, s->ps,
                               (unsigned long long)want));
    if (!s->rootpg)
        return fail(s, err_set(ERR_UNSUPPORTED,
                               "root bucket page %llu is not one leaf page (or unreadable)",
                               (unsigned long long)s->m->root));
    if (s->rootpg_len < BB_PAGE_HEADER || get_le64(s->rootpg) != s->m->root)
        return fail(s, err_set(ERR_CORRUPT, "root bucket page %llu: bad header",
                               (unsigned long long)s->m->root));
    int64_t rev = 1;
    int rc = key_bucket_rev(s, &rev);
    for (int i = 0; !rc && i < 2; i++) {
        const uint8_t *v;
        uint32_t vs;
        int r = bucket_get(s, "meta", internal_keys[i], &v, &vs);
        if (r == ERR_NOT_FOUND) continue;
        if (!r && (vs < 8 || get_be64(v) > INT64_MAX))
            r = err_set(ERR_CORRUPT, "meta/%s: not a revision", internal_keys[i]);
        if (r)
            rc = r;
        else if ((int64_t)get_be64(v) > rev)
            rev = (int64_t)get_be64(v);
    }
    if (rc) return fail(s, rc);
    *revision = rev;
    return 0;
}

int bbolt_stream_get(BboltStream *s, const char *bucket, const char *key, void *val, size_t cap,
                     size_t *vlen) {
    size_t i;
    for (i = 0; i < s->nwant; i++)
        if (!strcmp(s->want_bucket[i], bucket) && !strcmp(s->want_key[i], key)) break;
    if (i == s->nwant || !s->finished || s->err)
        return err_set(ERR_INVALID, "bbolt stream: %s/%s was not asked for", bucket, key);
    const uint8_t *v;
    uint32_t vs;
    int rc = bucket_get(s, bucket, key, &v, &vs);
    if (rc) return rc == ERR_NOT_FOUND ? err_set(ERR_NOT_FOUND, "no %s/%s", bucket, key) : rc;
    if (val && cap) memcpy(val, v, vs < cap ? vs : cap);
    if (vlen) *vlen = vs;
    return 0;
}
