/* store: the generic snapshot-store layer over a StoreDriver (store_driver.h). It owns the store
 * prefix (cleaned once at open), the key layout ("<prefix>/v2/<name>" for writes, v1 and v2 read),
 * name parsing and ordering. Listing asks the driver only for "<prefix>/v2/" and "<prefix>/v1/",
 * so stores whose prefixes share a string prefix never see each other's objects (docs/go-tool.md
 * §15.2). A Store holds no mutable state after open (its keyring is set once, before any reader or
 * writer): it is as thread-safe as its driver. */
#include "store.h"
#include "../codec/crypt.h"
#include "../common/mem.h"
#include "../common/array.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "snapname.h"
#include "store_abs.h"
#include "store_driver.h"
#include "store_oss.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct Store {
    StoreDriver *drv;
    char *prefix;       /* cleaned: "" or "a/b" (no leading, trailing or duplicate '/') */
    char *describe;     /* "<driver describe>[/<prefix>]" */
    char *scope;        /* describe, endpoint override, credentials, region (store_scope) */
    pthread_mutex_t mu; /* the pinned listing; every driver call of a driver without
                           STORE_FEAT_THREAD_SAFE (the feature bit enforced) */
    int serialize;      /* the driver is not thread-safe */
    int pins;           /* store_pin_listing depth */
    int pinned_valid;   /* pinned_* hold the listing made while pinned */
    Snapshot *pinned;   /* every object, abandoned ones included, annotated */
    size_t n_pinned;
    HistoryRecord *pinned_recs;
    size_t n_pinned_recs;
    Keyring *keyring; /* owned; NULL = no encryption keys */
};

/* Driver calls through the feature bits: serialized for a driver that is not thread-safe. */
static void drv_lock(Store *s) {
    if (s->serialize) pthread_mutex_lock(&s->mu);
}
static void drv_unlock(Store *s) {
    if (s->serialize) pthread_mutex_unlock(&s->mu);
}
static int drv_list(Store *s, const char *kp, StoreDriverListCb cb, void *ctx) {
    drv_lock(s);
    int rc = s->drv->vt->list(s->drv, kp, cb, ctx);
    drv_unlock(s);
    return rc;
}
static int drv_open_read(Store *s, const char *key, uint64_t offset, IoReader **out) {
    drv_lock(s);
    int rc = s->drv->vt->open_read(s->drv, key, offset, out);
    drv_unlock(s);
    return rc;
}
static int drv_open_write(Store *s, const char *key, StoreDriverWriter **out) {
    drv_lock(s);
    int rc = s->drv->vt->open_write(s->drv, key, out);
    drv_unlock(s);
    return rc;
}
static int drv_stat(Store *s, const char *key, int64_t *size) {
    drv_lock(s);
    int rc = s->drv->vt->stat(s->drv, key, size);
    drv_unlock(s);
    return rc;
}
static int drv_remove(Store *s, const char *key) {
    drv_lock(s);
    int rc = s->drv->vt->remove(s->drv, key);
    drv_unlock(s);
    return rc;
}

/* Drops the pinned listing; caller holds mu. */
static void drop_pinned_locked(Store *s) {
    free(s->pinned);
    free(s->pinned_recs);
    s->pinned = NULL;
    s->pinned_recs = NULL;
    s->n_pinned = s->n_pinned_recs = 0;
    s->pinned_valid = 0;
}

/* Anything written or removed makes a pinned listing stale. */
static void unpin_cache(Store *s) {
    pthread_mutex_lock(&s->mu);
    drop_pinned_locked(s);
    pthread_mutex_unlock(&s->mu);
}

struct StoreWriter {
    StoreDriverWriter *dw;
};

/* Cleans a store prefix like Go's path.Join would for our purposes. Owned result in *out. */
static int clean_prefix(const char *in, char **out) {
    if (!in) in = "";
    size_t n = strlen(in);
    if (n > 400) return err_set(ERR_INVALID, "store prefix longer than 400 bytes");
    char *p = malloc(n + 1);
    if (!p) return err_set(ERR_NOMEM, "store prefix: out of memory");
    size_t o = 0;
    const char *s = in;
    while (*s) {
        while (*s == '/')
            s++;
        if (!*s) break;
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 1 && s[0] == '.') {
            /* "." components vanish, as in path.Join */
        } else if (len == 2 && s[0] == '.' && s[1] == '.') {
            free(p);
            return err_set(ERR_INVALID, "store prefix \"%s\": \"..\" components are not allowed",
                           in);
        } else {
            if (o > 0) p[o++] = '/';
            memcpy(p + o, s, len);
            o += len;
        }
        s += len;
    }
    p[o] = '\0';
    *out = p;
    return 0;
}

/* "<prefix>/<rest>" or "<rest>" for the empty prefix; owned. */
static char *prefixed(const Store *s, const char *rest) {
    size_t n = strlen(s->prefix) + strlen(rest) + 2;
    char *k = malloc(n);
    if (!k) return NULL;
    if (s->prefix[0])
        snprintf(k, n, "%s/%s", s->prefix, rest);
    else
        snprintf(k, n, "%s", rest);
    return k;
}

int store_new_with_driver(StoreDriver *drv, const char *prefix, Store **out) {
    *out = NULL;
    int rc = 0;
    Store *s = NULL;
    if (!drv) return err_set(ERR_INVALID, "store: no driver");
    s = calloc(1, sizeof *s);
    if (!s) {
        rc = err_set(ERR_NOMEM, "store: out of memory");
        goto done;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->serialize = !(drv->vt->features & STORE_FEAT_THREAD_SAFE);
    s->drv = drv;
    drv = NULL;
    rc = clean_prefix(prefix, &s->prefix);
    if (rc != 0) goto done;
    const char *d = s->drv->vt->describe(s->drv);
    size_t n = strlen(d) + strlen(s->prefix) + 2;
    s->describe = malloc(n);
    if (!s->describe) {
        rc = err_set(ERR_NOMEM, "store: out of memory");
        goto done;
    }
    if (s->prefix[0])
        snprintf(s->describe, n, "%s/%s", d, s->prefix);
    else
        snprintf(s->describe, n, "%s", d);
    *out = s;
    s = NULL;
done:
    store_driver_free(drv);
    store_free(s);
    return rc;
}

const char *store_env_prefix(const StoreConfig *cfg) {
    return cfg && cfg->env_prefix ? cfg->env_prefix : "";
}

const char *store_env(const StoreConfig *cfg, const char *name) {
    char full[256];
    int n = snprintf(full, sizeof full, "%s%s", store_env_prefix(cfg), name);
    if (n < 0 || (size_t)n >= sizeof full) return NULL;
    const char *v = getenv(full);
    return v && v[0] ? v : NULL;
}

static int local_open(const StoreConfig *cfg, StoreDriver **out) {
    const char *container =
        cfg->container && cfg->container[0] ? cfg->container : store_env(cfg, "STORAGE_CONTAINER");
    return store_local_driver_new(container ? container : "default.bkp", out);
}

/* The registry: every provider name the Go tool accepts, and its driver (NULL: not yet). */
static const struct {
    const char *name;
    StoreDriverOpen open;
} providers[] = {
    {"Local", local_open},         {"S3", store_s3_driver_new},       {"ABS", store_abs_driver_new},
    {"GCS", store_gcs_driver_new}, {"Swift", store_swift_driver_new}, {"OSS", store_oss_driver_new},
    {"ECS", store_s3_driver_new},  {"OCS", store_s3_driver_new},
};

const char *store_providers(void) {
    return "Local (or empty), S3, ABS, GCS, Swift, OSS, ECS and OCS";
}

int store_driver_open(const StoreConfig *cfg, StoreDriver **out) {
    *out = NULL;
    if (!cfg) return err_set(ERR_INVALID, "store: no configuration");
    const char *provider = cfg->provider && cfg->provider[0] ? cfg->provider : "Local";
    for (size_t i = 0; i < sizeof providers / sizeof providers[0]; i++) {
        if (strcmp(provider, providers[i].name) != 0) continue;
        if (!providers[i].open)
            return err_set(ERR_UNSUPPORTED, "storage provider %s is not supported yet", provider);
        return providers[i].open(cfg, out);
    }
    return err_set(ERR_INVALID,
                   "unknown storage provider \"%s\": valid are %s (names are case-sensitive)",
                   provider, store_providers());
}

int store_open(const StoreConfig *cfg, Store **out) {
    *out = NULL;
    StoreDriver *drv = NULL;
    int rc = store_driver_open(cfg, &drv);
    if (rc != 0) return rc;
    if ((rc = store_new_with_driver(drv, cfg->prefix, out))) return rc;
    Store *s = *out;
    const char *part[] = {s->describe, cfg->endpoint_override, cfg->credentials, cfg->region,
                          cfg->env_prefix};
    StrBuf b = {0};
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
        strbuf_str(&b, i ? "|" : "");
        strbuf_str(&b, part[i] ? part[i] : "");
    }
    s->scope = b.d;
    if (!b.oom) return 0;
    store_free(s);
    *out = NULL;
    return err_set(ERR_NOMEM, "store: out of memory");
}

void store_free(Store *s) {
    if (!s) return;
    store_driver_free(s->drv);
    keyring_free(s->keyring);
    pthread_mutex_destroy(&s->mu);
    FREE_ALL(s->prefix, s->describe, s->scope, s->pinned, s->pinned_recs, s);
}

void store_set_keyring(Store *s, Keyring *kr) {
    if (s->keyring != kr) keyring_free(s->keyring);
    s->keyring = kr;
}

const Keyring *store_keyring(const Store *s) {
    return s->keyring;
}

const char *store_name_suffix(const Store *s, CompressKind compression) {
    /* static strings, one per compression, plain and with ".enc" first (snapname.h) */
    static const char *const plain[] = {"", ".gz", ".zlib", ".Z", ".zst"};
    static const char *const enc[] = {".enc", ".enc.gz", ".enc.zlib", ".enc.Z", ".enc.zst"};
    size_t i = (size_t)compression < sizeof plain / sizeof plain[0] ? (size_t)compression : 0;
    return s && s->keyring ? enc[i] : plain[i];
}

void store_pin_listing(Store *s) {
    pthread_mutex_lock(&s->mu);
    s->pins++;
    pthread_mutex_unlock(&s->mu);
}

void store_unpin_listing(Store *s) {
    pthread_mutex_lock(&s->mu);
    if (s->pins > 0 && --s->pins == 0) drop_pinned_locked(s);
    pthread_mutex_unlock(&s->mu);
}

const char *store_scope(const Store *s) {
    return s->scope ? s->scope : s->describe;
}

const char *store_describe(const Store *s) {
    return s->describe;
}

typedef struct {
    const Store *s;
    const char *kp; /* the prefix listed now */
    Snapshot *v;
    size_t n, cap;
    size_t foreign;      /* objects under kp that are not snapshots (counted, never kept) */
    char first[160];     /* the first of them, for the one log line */
    char first_why[160]; /* and why it is not a snapshot */
} ListCtx;

static int list_cb(void *ctx, const char *key, int64_t size) {
    ListCtx *c = ctx;
    Snapshot snap;
    if (snapname_parse(key, c->s->prefix, &snap) != 0) {
        if (c->foreign++ ==
            0) { /* one line per listing, not one per object (list_snapshots logs it) */
            snprintf(c->first, sizeof c->first, "%s", key);
            snprintf(c->first_why, sizeof c->first_why, "%s", err_msg());
        }
        return 0;
    }
    snap.size = size;
    if (c->n >= STORE_LIST_MAX_SNAPSHOTS)
        return err_set(ERR_IO,
                       "store %s: more than %d snapshots under %s (the cap of one listing): "
                       "remove old ones (garbage collection) or use another prefix",
                       c->s->describe, STORE_LIST_MAX_SNAPSHOTS, c->kp);
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        if (ncap > STORE_LIST_MAX_SNAPSHOTS) ncap = STORE_LIST_MAX_SNAPSHOTS;
        Snapshot *nv = realloc(c->v, ncap * sizeof *nv);
        if (!nv) return err_set(ERR_NOMEM, "store list: out of memory");
        c->v = nv;
        c->cap = ncap;
    }
    c->v[c->n++] = snap;
    return 0;
}

static int list_snapshots(Store *s, Snapshot **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    ListCtx c = {.s = s};
    int rc = 0;
    static const char *const versions[] = {"v1/", "v2/"};
    for (size_t i = 0; i < 2; i++) {
        char *kp = prefixed(s, versions[i]);
        if (!kp) {
            rc = err_set(ERR_NOMEM, "store list: out of memory");
            goto done;
        }
        c.kp = kp;
        c.foreign = 0;
        rc = drv_list(s, kp, list_cb, &c);
        if (c.foreign)
            log_warn("store %s: %zu objects under %s are not snapshots and are skipped, e.g. %s "
                     "(%s)",
                     s->describe, c.foreign, kp, c.first, c.first_why);
        free(kp);
        if (rc != 0) goto done;
    }
    snapname_sort(c.v, c.n);
    *out = c.v;
    *n_out = c.n;
    c.v = NULL;
done:
    free(c.v);
    return rc;
}

#define HISTORY_DIR "etcdbr/history/"
#define HISTORY_RECORD "record.json"

typedef struct {
    HistoryTag *tags;
    size_t n, cap;
    char (*rec_ids)[HISTORY_ID_LEN + 1]; /* histories with a record.json */
    size_t n_rec, cap_rec;
    size_t skip; /* bytes of "<prefix>/etcdbr/history/" */
} TagCtx;

static int tag_cb(void *ctx, const char *key, int64_t size) {
    (void)size;
    TagCtx *c = ctx;
    if (strlen(key) <= c->skip) return 0;
    const char *rel = key + c->skip; /* "<id>/<name>" */
    const char *slash = strchr(rel, '/');
    if (!slash || (size_t)(slash - rel) != HISTORY_ID_LEN) return 0;
    char id[HISTORY_ID_LEN + 1];
    memcpy(id, rel, HISTORY_ID_LEN);
    id[HISTORY_ID_LEN] = '\0';
    const char *name = slash + 1;
    if (!history_id_valid(id) || !*name || strchr(name, '/') || strlen(name) >= 256) return 0;
    if (strcmp(name, HISTORY_RECORD) == 0) {
        if (c->n_rec >= STORE_LIST_MAX_HISTORIES)
            return err_set(ERR_IO, "more than %d history records (the cap of one listing)",
                           STORE_LIST_MAX_HISTORIES);
        int rc =
            array_reserve(&c->rec_ids, &c->cap_rec, c->n_rec, sizeof *c->rec_ids, 16, "store list");
        if (rc) return rc;
        memcpy(c->rec_ids[c->n_rec++], id, sizeof id);
        return 0;
    }
    if (c->n >= STORE_LIST_MAX_SNAPSHOTS)
        return err_set(ERR_IO, "more than %d history tags (the cap of one listing)",
                       STORE_LIST_MAX_SNAPSHOTS);
    int rc = array_reserve(&c->tags, &c->cap, c->n, sizeof *c->tags, 16, "store list");
    if (rc) return rc;
    HistoryTag *t = &c->tags[c->n++];
    memcpy(t->history, id, sizeof id);
    snprintf(t->name, sizeof t->name, "%s", name);
    return 0;
}

/* Reads a small object fully (at most cap - 1 bytes, NUL-terminated). */
static int read_small(Store *s, const char *key, char *buf, size_t cap, size_t *len) {
    IoReader *r = NULL;
    int rc = drv_open_read(s, key, 0, &r);
    if (rc) return rc;
    size_t got = 0;
    rc = io_read_full(r, buf, cap - 1, &got);
    if (!rc && got == cap - 1) rc = err_set(ERR_CORRUPT, "%s: larger than %zu bytes", key, cap - 2);
    io_reader_free(r);
    buf[got] = '\0';
    *len = got;
    return rc;
}

/* One listing: every object (abandoned ones marked) and the records. */
static int list_fresh(Store *s, Snapshot **out, size_t *n_out, HistoryRecord **recs_out,
                      size_t *n_recs_out) {
    Snapshot *v = NULL;
    size_t n = 0;
    TagCtx t = {0};
    HistoryRecord *recs = NULL;
    size_t n_recs = 0;
    int rc = list_snapshots(s, &v, &n);
    if (rc) return rc;
    char *kp = prefixed(s, HISTORY_DIR);
    if (!kp) {
        rc = err_set(ERR_NOMEM, "store list: out of memory");
        goto done;
    }
    t.skip = strlen(kp);
    rc = drv_list(s, kp, tag_cb, &t);
    if (rc) {
        err_wrap(rc, "listing the history tags under %s", kp);
        goto done;
    }
    recs = calloc(t.n_rec ? t.n_rec : 1, sizeof *recs);
    if (!recs) {
        rc = err_set(ERR_NOMEM, "store list: out of memory");
        goto done;
    }
    for (size_t i = 0; i < t.n_rec; i++) {
        char key[600], buf[8192];
        size_t len = 0;
        snprintf(key, sizeof key, "%s%s/" HISTORY_RECORD, kp, t.rec_ids[i]);
        int r = read_small(s, key, buf, sizeof buf, &len);
        if (!r) r = history_record_parse(buf, len, &recs[n_recs]);
        if (!r && strcmp(recs[n_recs].id, t.rec_ids[i]) != 0)
            r = err_set(ERR_CORRUPT, "names history %s", recs[n_recs].id);
        if (r) {
            log_warn("store %s: history record %s ignored: %s", s->describe, key, err_msg());
            continue;
        }
        n_recs++;
    }
    history_annotate(v, n, t.tags, t.n, recs, n_recs);
    *out = v;
    *n_out = n;
    v = NULL;
    *recs_out = recs;
    *n_recs_out = n_recs;
    recs = NULL;
done:
    free(kp);
    free(t.tags);
    free(t.rec_ids);
    free(recs);
    free(v);
    return rc;
}

static void *dup_array(const void *v, size_t n, size_t elem) {
    void *d = malloc(n ? n * elem : 1);
    if (d && n) memcpy(d, v, n * elem);
    return d;
}

int store_list_ex(Store *s, int include_abandoned, Snapshot **out, size_t *n_out,
                  HistoryRecord **recs_out, size_t *n_recs_out) {
    *out = NULL;
    *n_out = 0;
    if (recs_out) *recs_out = NULL;
    if (n_recs_out) *n_recs_out = 0;
    Snapshot *v = NULL;
    HistoryRecord *recs = NULL;
    size_t n = 0, n_recs = 0;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    int pinned = s->pins > 0, cached = s->pinned_valid;
    if (cached) {
        v = dup_array(s->pinned, s->n_pinned, sizeof *v);
        recs = dup_array(s->pinned_recs, s->n_pinned_recs, sizeof *recs);
        n = s->n_pinned;
        n_recs = s->n_pinned_recs;
    }
    pthread_mutex_unlock(&s->mu);
    if (cached && (!v || !recs)) rc = err_set(ERR_NOMEM, "store list: out of memory");
    if (!cached && !rc) {
        rc = list_fresh(s, &v, &n, &recs, &n_recs);
        if (!rc && pinned) { /* keep a copy for the next calls while pinned */
            Snapshot *cv = dup_array(v, n, sizeof *v);
            HistoryRecord *cr = dup_array(recs, n_recs, sizeof *recs);
            pthread_mutex_lock(&s->mu);
            if (cv && cr && s->pins > 0 && !s->pinned_valid) {
                s->pinned = cv;
                s->pinned_recs = cr;
                s->n_pinned = n;
                s->n_pinned_recs = n_recs;
                s->pinned_valid = 1;
                cv = NULL;
                cr = NULL;
            }
            pthread_mutex_unlock(&s->mu);
            free(cv);
            free(cr);
        }
    }
    if (rc) {
        free(v);
        free(recs);
        return rc;
    }
    if (!include_abandoned) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!v[i].abandoned) v[k++] = v[i];
        n = k;
    }
    if (n == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    *n_out = n;
    if (recs_out) {
        *recs_out = recs;
        *n_recs_out = n_recs;
    } else {
        free(recs);
    }
    return 0;
}

int store_list(Store *s, Snapshot **out, size_t *n_out) {
    return store_list_ex(s, 0, out, n_out, NULL, NULL);
}

/* Writes a small object under key; ERR_EXISTS when it is there already. */
static int put_small(Store *s, const char *key, const void *data, size_t len) {
    StoreDriverWriter *w = NULL;
    int64_t size = 0;
    unpin_cache(s);
    int rc = drv_stat(s, key, &size);
    if (rc == 0) return ERR_EXISTS;
    if (rc != ERR_NOT_FOUND) return rc;
    rc = drv_open_write(s, key, &w);
    if (rc) return rc;
    IoWriter *io = w->vt->io(w);
    rc = len ? io_write(io, data, len) : 0;
    if (!rc) rc = io_finish(io);
    if (rc) {
        w->vt->abort(w);
        return rc;
    }
    return w->vt->commit(w);
}

int store_history_put_record(Store *s, const HistoryRecord *r) {
    char rest[128];
    snprintf(rest, sizeof rest, HISTORY_DIR "%s/" HISTORY_RECORD, r->id);
    char *key = prefixed(s, rest);
    char *json = NULL;
    size_t len = 0;
    int rc = key ? history_record_format(r, &json, &len) : err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = put_small(s, key, json, len);
    if (rc == ERR_EXISTS) rc = 0;
    if (rc) err_wrap(rc, "writing history record %s in %s", key ? key : "", s->describe);
    free(json);
    free(key);
    return rc;
}

int store_history_tag(Store *s, const char *history, const char *snap_name) {
    if (!history_id_valid(history) || !snap_name || !*snap_name || strchr(snap_name, '/'))
        return err_set(ERR_INVALID, "history tag: bad history or name");
    char rest[400];
    snprintf(rest, sizeof rest, HISTORY_DIR "%s/%s", history, snap_name);
    char *key = prefixed(s, rest);
    if (!key) return err_set(ERR_NOMEM, "out of memory");
    int rc = put_small(s, key, NULL, 0);
    if (rc == ERR_EXISTS) rc = 0;
    if (rc) err_wrap(rc, "writing history tag %s in %s", key, s->describe);
    free(key);
    return rc;
}

int store_history_untag(Store *s, const Snapshot *snap) {
    if (!snap->history[0] || snap->is_chunk || snap->version != 2) return 0;
    char rest[400];
    snprintf(rest, sizeof rest, HISTORY_DIR "%s/%s", snap->history, snap->snap_name);
    char *key = prefixed(s, rest);
    if (!key) return err_set(ERR_NOMEM, "out of memory");
    unpin_cache(s);
    int rc = drv_remove(s, key);
    if (rc == ERR_NOT_FOUND) rc = 0;
    free(key);
    return rc;
}

int store_open_read_at(Store *s, const Snapshot *snap, uint64_t offset, IoReader **out) {
    *out = NULL;
    if (!snap || !snap->key[0]) return err_set(ERR_INVALID, "store read: no snapshot key");
    return drv_open_read(s, snap->key, offset, out);
}

int store_open_file(Store *s, const Snapshot *snap, int *fd) {
    *fd = -1;
    if (!snap || !snap->key[0]) return err_set(ERR_INVALID, "store read: no snapshot key");
    if (!s->drv->vt->open_file)
        return err_set(ERR_UNSUPPORTED, "%s: objects are not local files", store_describe(s));
    drv_lock(s);
    int rc = s->drv->vt->open_file(s->drv, snap->key, fd);
    drv_unlock(s);
    return rc;
}

int store_open_read(Store *s, const Snapshot *snap, IoReader **out) {
    return store_open_read_at(s, snap, 0, out);
}

int store_v2_key_prefix(const Store *s, char *out, size_t cap) {
    int n = snprintf(out, cap, "%s%sv2/", s->prefix, s->prefix[0] ? "/" : "");
    if (n < 0 || (size_t)n >= cap)
        return err_set(ERR_INVALID, "store prefix \"%s\" is too long", s->prefix);
    return 0;
}

int store_snapshot_for_name(const Store *s, const char *snap_name, Snapshot *out) {
    char rest[300];
    if (!snap_name || strchr(snap_name, '/'))
        return err_set(ERR_INVALID, "bad snapshot name \"%s\"", snap_name ? snap_name : "(null)");
    int n = snprintf(rest, sizeof rest, "v2/%s", snap_name);
    if (n < 0 || (size_t)n >= sizeof rest) return err_set(ERR_INVALID, "snapshot name too long");
    char *key = prefixed(s, rest);
    if (!key) return err_set(ERR_NOMEM, "out of memory");
    int rc = snapname_parse(key, s->prefix, out);
    free(key);
    return rc;
}

int store_sweep_leftovers(Store *s) {
    if (!s->drv->vt->sweep_leftovers) return 0;
    char *kp = prefixed(s, "v2/");
    if (!kp) return err_set(ERR_NOMEM, "out of memory");
    unpin_cache(s);
    drv_lock(s);
    int rc = s->drv->vt->sweep_leftovers(s->drv, kp);
    drv_unlock(s);
    free(kp);
    return rc;
}

int store_snapshot_stat(Store *s, const Snapshot *snap, int64_t *size) {
    if (!snap || !snap->key[0]) return err_set(ERR_INVALID, "store stat: no snapshot key");
    int64_t n = 0;
    int rc = drv_stat(s, snap->key, &n);
    if (rc == 0 && size) *size = n;
    return rc;
}

int store_open_write(Store *s, const char *snap_name, StoreWriter **out) {
    *out = NULL;
    int rc = 0;
    char *key = NULL;
    StoreWriter *w = NULL;
    Snapshot check;
    int64_t size = 0;
    if (!snap_name || !snap_name[0] || strchr(snap_name, '/'))
        return err_set(ERR_INVALID, "store write: bad snapshot name \"%s\"",
                       snap_name ? snap_name : "(null)");
    char rest[300];
    int n = snprintf(rest, sizeof rest, "v2/%s", snap_name);
    if (n < 0 || (size_t)n >= sizeof rest)
        return err_set(ERR_INVALID, "store write: snapshot name too long");
    key = prefixed(s, rest);
    if (!key) return err_set(ERR_NOMEM, "store write: out of memory");
    /* Only names that list back as snapshots may be written: anything else would be invisible
     * to restore and GC. */
    rc = snapname_parse(key, s->prefix, &check);
    if (rc != 0) {
        err_wrap(rc, "store write");
        goto done;
    }
    unpin_cache(s);
    rc = drv_stat(s, key, &size);
    if (rc == 0) {
        rc = err_set(ERR_EXISTS, "store write %s: object %s already exists (%lld bytes)",
                     s->describe, key, (long long)size);
        goto done;
    }
    if (rc != ERR_NOT_FOUND) goto done;
    w = calloc(1, sizeof *w);
    if (!w) {
        rc = err_set(ERR_NOMEM, "store write: out of memory");
        goto done;
    }
    rc = drv_open_write(s, key, &w->dw);
    if (rc != 0) goto done;
    *out = w;
    w = NULL;
done:
    free(w);
    free(key);
    return rc;
}

IoWriter *store_writer_io(StoreWriter *w) {
    return w->dw->vt->io(w->dw);
}

int store_writer_commit(StoreWriter *w) {
    if (!w) return err_set(ERR_INVALID, "store commit: no writer");
    int rc = w->dw->vt->commit(w->dw);
    free(w);
    return rc;
}

void store_writer_abort(StoreWriter *w) {
    if (!w) return;
    w->dw->vt->abort(w->dw);
    free(w);
}

/* Removes dir_key if the driver has directories and it became empty. Failures are ignored: an
 * empty directory left behind is harmless and the object itself is already gone. */
static void prune_dir(Store *s, const char *dir_key) {
    if (!(s->drv->vt->features & STORE_FEAT_DIRECTORIES) || !s->drv->vt->remove_dir) return;
    (void)s->drv->vt->remove_dir(s->drv, dir_key);
}

int store_remove(Store *s, const Snapshot *snap) {
    if (!snap || !snap->key[0]) return err_set(ERR_INVALID, "store remove: no snapshot key");
    unpin_cache(s);
    int rc = drv_remove(s, snap->key);
    if (rc != 0) return rc;
    if (!(s->drv->vt->features & STORE_FEAT_DIRECTORIES)) return 0;
    /* Leave no empty chunk directory or v1 Backup-<ts> directory behind (as the Go tool does
     * for v1). Never prune the version directory itself. */
    char dir[sizeof snap->key];
    snprintf(dir, sizeof dir, "%s", snap->key);
    if (snap->is_chunk) {
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = '\0';
            prune_dir(s, dir);
        }
    }
    if (snap->version == 1 && snap->snap_dir[0]) {
        snprintf(dir, sizeof dir, "%s%s", snap->prefix, snap->snap_dir);
        prune_dir(s, dir);
    }
    return 0;
}
