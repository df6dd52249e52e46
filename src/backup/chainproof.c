/* chainproof: see chainproof.h. Both sides reduce the events at one revision to a Sample: their
 * count and, for the first CHAIN_PROOF_MAX_EVENTS, the fields etcd's mvccpb.KeyValue carries
 * (key and value as SHA-256 digests, so memory is bounded by the cap, never by value sizes). */
#include "chainproof.h"
#include "delta.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../format/bbolt.h"
#include "../format/mvcc.h"
#include "../format/snapshot_file.h"
#include "../store/snapobj.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int del;
    int64_t create, mod, version, lease;
    uint8_t key_sha[SHA256_LEN], value_sha[SHA256_LEN];
    char key_text[64]; /* printable start of the key, for the message */
} ProofEvent;

typedef struct {
    int64_t rev;  /* revision of the events held; 0 = none yet */
    size_t total; /* events seen at rev (may exceed the cap) */
    ProofEvent *ev;
    Sha256 *sha;
} Sample;

static const char *const verdict_names[CHAIN_VERDICT_COUNT] = {
    [CHAIN_PROVEN] = "proven", [CHAIN_MISMATCH] = "mismatch",     [CHAIN_COMPACTED] = "compacted",
    [CHAIN_AHEAD] = "ahead",   [CHAIN_UNREADABLE] = "unreadable",
};

const char *chain_verdict_name(ChainVerdict v) {
    return (int)v >= 0 && v < CHAIN_VERDICT_COUNT ? verdict_names[v] : "unknown";
}

static int sample_init(Sample *s) {
    memset(s, 0, sizeof *s);
    s->ev = calloc(CHAIN_PROOF_MAX_EVENTS, sizeof *s->ev);
    s->sha = sha256_new();
    if (!s->ev || !s->sha) return err_set(ERR_NOMEM, "out of memory");
    return 0;
}

static void sample_free(Sample *s) {
    free(s->ev);
    sha256_free(s->sha);
}

/* Adds one event at revision rev; an event of a later revision starts the sample again (only the
 * last revision's events are kept). A delete keeps its key only, as etcd stores a tombstone. */
static void sample_add(Sample *s, int64_t rev, int del, const EtcdKeyValue *kv) {
    if (rev != s->rev) {
        s->rev = rev;
        s->total = 0;
    }
    size_t i = s->total++;
    if (i >= CHAIN_PROOF_MAX_EVENTS) return;
    ProofEvent *e = &s->ev[i];
    memset(e, 0, sizeof *e);
    e->del = del;
    e->mod = rev;
    sha256_update(s->sha, kv->key, kv->key_len);
    sha256_final(s->sha, e->key_sha);
    size_t n = kv->key_len < sizeof e->key_text - 1 ? kv->key_len : sizeof e->key_text - 1;
    for (size_t k = 0; k < n; k++)
        e->key_text[k] = kv->key[k] >= 0x20 && kv->key[k] < 0x7f ? (char)kv->key[k] : '?';
    if (del) return;
    e->create = kv->create_revision;
    e->version = kv->version;
    e->lease = kv->lease;
    sha256_update(s->sha, kv->value, kv->value_len);
    sha256_final(s->sha, e->value_sha);
}

/* The stored side of a delta: its events at its last revision. 0 with *verdict set, or ERR_*. */
static int sample_delta(Store *store, const Snapshot *snap, const char *tmp_dir, Sample *s,
                        ChainProof *out) {
    SnapObjReader *obj = NULL;
    DeltaReader *dr = NULL;
    int rc = snapobj_open_read(store, snap, &obj);
    if (!rc) rc = delta_reader_open(snapobj_reader(obj), tmp_dir, &dr);
    for (int got = 1; !rc && got;) {
        DeltaEvent ev;
        if ((rc = delta_reader_next(dr, &ev, &got)) || !got) break;
        if (ev.mod_revision < s->rev) {
            rc = err_set(ERR_CORRUPT, "event at revision %lld after one at %lld",
                         (long long)ev.mod_revision, (long long)s->rev);
            break;
        }
        EtcdKeyValue kv = {ev.key,          ev.key_len, ev.value, ev.value_len, ev.create_revision,
                           ev.mod_revision, ev.version, ev.lease};
        sample_add(s, ev.mod_revision, ev.type == ETCD_OP_DELETE, &kv);
    }
    delta_reader_close(dr);
    snapobj_close(obj);
    if (rc == ERR_CORRUPT || rc == ERR_UNSUPPORTED || rc == ERR_INVALID) {
        out->verdict = CHAIN_UNREADABLE;
        snprintf(out->why, sizeof out->why, "%s does not decode: %s", snap->key, err_msg());
        return 0;
    }
    if (!rc && s->rev != snap->last_revision) {
        out->verdict = CHAIN_UNREADABLE;
        snprintf(out->why, sizeof out->why, "%s ends at revision %lld, but its name says %lld",
                 snap->key, (long long)s->rev, (long long)snap->last_revision);
    }
    return rc;
}

/* Entries of the db's "key" bucket in revision order into s (the last revision's remain). */
static int sample_db(const char *path, uint64_t db_len, Sample *s) {
    BboltDb *db = NULL;
    BboltCursor *cur = NULL;
    const BboltName key_bucket = {MVCC_BUCKET_KEY, strlen(MVCC_BUCKET_KEY)};
    int rc = bbolt_open(path, db_len, &db);
    if (!rc) rc = bbolt_cursor_open(db, &key_bucket, 1, &cur);
    for (int got = 1; !rc && got;) {
        BboltItem it;
        if ((rc = bbolt_cursor_next(cur, &it, &got)) || !got) break;
        int64_t main_rev = 0;
        int tomb = 0;
        MvccKeyValue mkv;
        if ((rc = mvcc_rev_parse(it.key, it.key_len, &main_rev, NULL, &tomb))) break;
        if (it.is_bucket || (rc = mvcc_kv_unmarshal(it.value, it.value_len, &mkv))) {
            if (!rc) rc = err_set(ERR_CORRUPT, "a bucket inside bucket \"key\"");
            break;
        }
        EtcdKeyValue kv = {mkv.key,  mkv.key_len, mkv.value, mkv.value_len, mkv.create_revision,
                           main_rev, mkv.version, mkv.lease};
        sample_add(s, main_rev, tomb, &kv);
    }
    bbolt_cursor_close(cur);
    bbolt_close(db);
    if (rc == ERR_NOT_FOUND) rc = err_set(ERR_CORRUPT, "no \"key\" bucket: not an etcd db");
    return rc;
}

/* The stored side of a full snapshot: the entries at its db's highest revision. */
static int sample_full(Store *store, const Snapshot *snap, const char *tmp_dir, Sample *s,
                       ChainProof *out) {
    char *path = NULL;
    int fd = fs_mkstemp_locked(tmp_dir, "etcdbr-full-", &path);
    if (fd < 0) return fd;
    SnapObjReader *obj = NULL;
    SnapshotSpool sp;
    uint64_t total = 0, db_len = 0;
    int rc = snapshot_spool_start(&sp, path, fd);
    if (!rc) rc = snapobj_open_read(store, snap, &obj);
    if (!rc) rc = io_copy(snapobj_reader(obj), sp.checker, &total);
    if (!rc && total % 512 == 32) /* a db with etcd's sha256 trailer (fullsnap.h) */
        rc = trailer_check_result(sp.checker, &db_len);
    else if (!rc)
        db_len = total;
    if (!rc) rc = sample_db(sp.path, db_len, s);
    if (rc == ERR_CORRUPT || rc == ERR_UNSUPPORTED || rc == ERR_INVALID) {
        out->verdict = CHAIN_UNREADABLE;
        snprintf(out->why, sizeof out->why, "%s does not decode as an etcd db: %s", snap->key,
                 err_msg());
        rc = 0;
    } else if (!rc && s->total == 0) {
        out->verdict = CHAIN_UNREADABLE;
        snprintf(out->why, sizeof out->why, "%s holds no keys to compare", snap->key);
    }
    snapobj_close(obj);
    snapshot_spool_discard(&sp);
    return rc;
}

/* The live side: etcd's events at revision rev (one Watch from rev). 0 with *verdict set for a
 * compacted revision, or ERR_*. */
static int sample_live(EtcdClient *client, int64_t rev, atomic_int *stop, Sample *s,
                       ChainProof *out) {
    static const uint8_t all[1] = {0};
    EtcdWatch *w = NULL;
    int rc = etcd_watch_open(client, all, 1, all, 1, rev, 0, &w);
    if (rc == ERR_COMPACTED) goto compacted;
    if (rc) return err_wrap(rc, "watch from revision %lld", (long long)rev);
    int64_t deadline = now_mono_ms() + CHAIN_PROOF_WATCH_MS;
    for (;;) {
        if (stop && *stop) {
            rc = err_set(ERR_CANCELED, "stopped by a signal");
            break;
        }
        if (now_mono_ms() >= deadline) {
            rc = err_set(ERR_TIMEOUT, "etcd delivered no events of revision %lld in %d ms",
                         (long long)rev, CHAIN_PROOF_WATCH_MS);
            break;
        }
        EtcdWatchResponse r;
        int got = 0;
        if ((rc = etcd_watch_next(w, 200, &r, &got))) break;
        if (!got) continue;
        if (r.compact_revision > 0) {
            etcd_watch_close(w);
            goto compacted;
        }
        if (r.canceled) {
            rc = err_set(ERR_ETCD, "watch from revision %lld canceled: %s", (long long)rev,
                         r.cancel_reason);
            break;
        }
        if (!r.n_events) continue;
        /* one revision's events always come in one response (etcd's watcher batches) */
        for (size_t i = 0; i < r.n_events && r.events[i].kv.mod_revision == rev; i++)
            sample_add(s, rev, r.events[i].type == ETCD_OP_DELETE, &r.events[i].kv);
        break;
    }
    etcd_watch_close(w);
    return rc;
compacted:
    out->verdict = CHAIN_COMPACTED;
    snprintf(out->why, sizeof out->why, "etcd has compacted revision %lld", (long long)rev);
    return 0;
}

/* Compares the two samples; fills out->why with the first difference. */
static void compare(const Sample *st, const Sample *live, const char *key, ChainProof *out) {
    out->verdict = CHAIN_MISMATCH;
    if (live->total != st->total) {
        snprintf(out->why, sizeof out->why,
                 "%s holds %zu events at revision %lld, etcd has %zu there", key, st->total,
                 (long long)st->rev, live->total);
        return;
    }
    size_t n = st->total < CHAIN_PROOF_MAX_EVENTS ? st->total : CHAIN_PROOF_MAX_EVENTS;
    for (size_t i = 0; i < n; i++) {
        const ProofEvent *a = &st->ev[i], *b = &live->ev[i];
        const char *what = a->del != b->del                                      ? "type"
                           : memcmp(a->key_sha, b->key_sha, SHA256_LEN) != 0     ? "key"
                           : a->create != b->create                              ? "create_revision"
                           : a->version != b->version                            ? "version"
                           : a->lease != b->lease                                ? "lease"
                           : memcmp(a->value_sha, b->value_sha, SHA256_LEN) != 0 ? "value"
                                                                                 : NULL;
        if (what) {
            snprintf(out->why, sizeof out->why,
                     "event %zu of revision %lld differs in its %s (stored %s \"%s\", etcd %s "
                     "\"%s\")",
                     i + 1, (long long)st->rev, what, a->del ? "delete" : "put", a->key_text,
                     b->del ? "delete" : "put", b->key_text);
            return;
        }
    }
    out->verdict = CHAIN_PROVEN;
    snprintf(out->why, sizeof out->why, "its %zu events at revision %lld are etcd's", st->total,
             (long long)st->rev);
}

int chain_prove(EtcdClient *client, Store *store, const Snapshot *last, const char *tmp_dir,
                atomic_int *stop, ChainProof *out) {
    memset(out, 0, sizeof *out);
    out->verdict = CHAIN_PROVEN;
    int64_t cur = 0;
    int rc = etcd_get_revision(client, &cur);
    if (rc) return err_wrap(rc, "etcd's current revision");
    if (last->last_revision > cur) {
        out->verdict = CHAIN_AHEAD;
        snprintf(out->why, sizeof out->why, "it ends at revision %lld, after etcd's %lld",
                 (long long)last->last_revision, (long long)cur);
        return 0;
    }
    Sample st, live;
    rc = sample_init(&st);
    if (!rc) rc = sample_init(&live);
    if (!rc)
        rc = last->kind == SNAP_FULL ? sample_full(store, last, tmp_dir, &st, out)
                                     : sample_delta(store, last, tmp_dir, &st, out);
    if (rc) rc = err_wrap(rc, "reading %s", last->key);
    if (!rc && out->verdict == CHAIN_PROVEN && st.rev > cur) {
        out->verdict = CHAIN_AHEAD;
        snprintf(out->why, sizeof out->why, "its events reach revision %lld, after etcd's %lld",
                 (long long)st.rev, (long long)cur);
    }
    if (!rc && out->verdict == CHAIN_PROVEN) rc = sample_live(client, st.rev, stop, &live, out);
    if (!rc && out->verdict == CHAIN_PROVEN) compare(&st, &live, last->key, out);
    out->revision = st.rev;
    out->events = st.total;
    sample_free(&st);
    sample_free(&live);
    return rc;
}
