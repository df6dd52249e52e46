/* verifier: see verifier.h. Objects are checked one at a time on the calling thread: a full
 * snapshot is staged in a file of the private scratch directory (bbolt needs random access), a
 * delta goes through the delta reader's spool file. A TapReader between snapobj and the checks
 * tells a decoding error (the store or decompression) from a hash mismatch found after it. */
#include "verifier.h"
#include "keystate.h"
#include "restorer.h"
#include "../backup/delta.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/names.h"
#include "../common/progress.h"
#include "../common/timeutil.h"
#include "../etcd/etcd_proc.h"
#include "../format/bbolt.h"
#include "../format/snapshot_file.h"
#include "../store/snapobj.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *verify_fault_kind_name(VerifyFaultKind k) {
    static const char *const names[] = {
        [VERIFY_NO_FULL] = "no-full-snapshot",
        [VERIFY_GAP] = "gap",
        [VERIFY_OVERLAP] = "overlap",
        [VERIFY_BAD_HASH] = "bad-hash",
        [VERIFY_UNDECODABLE] = "undecodable",
        [VERIFY_UNREADABLE] = "unreadable",
        [VERIFY_WRONG_REVISIONS] = "wrong-revisions",
        [VERIFY_OTHER_HISTORY] = "other-history",
        [VERIFY_RESTORE_FAILED] = "restore-failed",
        [VERIFY_RESTORE_MISMATCH] = "restore-mismatch",
        [VERIFY_UNENCRYPTED_AFTER_ENCRYPTED] = "unencrypted-after-encrypted",
        [VERIFY_INCONSISTENT_EVENTS] = "inconsistent-events",
    };
    return NAME_AT(names, k, "unknown");
}

const char *restore_test_result_name(RestoreTestResult r) {
    static const char *const names[] = {
        [RESTORE_TEST_NOT_RUN] = "not-run",   [RESTORE_TEST_MATCH] = "match",
        [RESTORE_TEST_MISMATCH] = "mismatch", [RESTORE_TEST_NOT_COMPARED] = "not-compared",
        [RESTORE_TEST_FAILED] = "failed",
    };
    return NAME_AT(names, r, "unknown");
}

int verify_add_fault(VerifyReport *r, VerifyFaultKind kind, int warning, const char *object,
                     const char *other, int64_t from, int64_t to, const char *fmt, ...) {
    VerifyFault *f = realloc(r->faults, (r->n_faults + 1) * sizeof *f);
    if (!f) return err_set(ERR_NOMEM, "out of memory");
    r->faults = f;
    f = &r->faults[r->n_faults++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->warning = warning;
    snprintf(f->object, sizeof f->object, "%s", object ? object : "");
    snprintf(f->other, sizeof f->other, "%s", other ? other : "");
    f->from = from;
    f->to = to;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    if (!warning) r->n_errors++;
    return 0;
}

/* ---------- planning (pure) ---------- */

/* verify_check_contiguity; older_set: the set is not the latest, so a hole right after its full
 * snapshot is what garbage collection leaves when it removes the deltas of older sets older than
 * --delta-snapshot-retention-period (gc.h; oldest first): a warning. */
static int check_contiguity(const Snapshot *full, const Snapshot *const *deltas, size_t n,
                            int older_set, VerifyReport *r) {
    int64_t next = full->last_revision + 1;
    const Snapshot *prev = full;
    int added = 0, rc;
    for (size_t i = 0; i < n; i++) {
        const Snapshot *d = deltas[i];
        if (d->start_revision > next && older_set && prev == full) {
            rc = verify_add_fault(r, VERIFY_GAP, 1, d->key, prev->key, next, d->start_revision - 1,
                                  "revisions %lld-%lld are missing between %s and %s, the first "
                                  "delta left of this older set (garbage collection removes the "
                                  "older deltas of older sets): a restore to those revisions fails",
                                  (long long)next, (long long)(d->start_revision - 1), prev->key,
                                  d->key);
            if (rc) return rc;
        } else if (d->start_revision > next) {
            rc = verify_add_fault(r, VERIFY_GAP, 0, d->key, prev->key, next, d->start_revision - 1,
                                  "revisions %lld-%lld are missing between %s and %s",
                                  (long long)next, (long long)(d->start_revision - 1), prev->key,
                                  d->key);
            if (rc) return rc;
            added++;
        } else if (d->start_revision < next) {
            int64_t to = d->last_revision < next - 1 ? d->last_revision : next - 1;
            rc = verify_add_fault(r, VERIFY_OVERLAP, 1, d->key, prev->key, d->start_revision, to,
                                  "revisions %lld-%lld are in both %s and %s (a restore applies "
                                  "each revision once, from the first)",
                                  (long long)d->start_revision, (long long)to, prev->key, d->key);
            if (rc) return rc;
        }
        if (d->last_revision + 1 > next) {
            next = d->last_revision + 1;
            prev = d;
        }
    }
    return added;
}

int verify_check_contiguity(const Snapshot *full, const Snapshot *const *deltas, size_t n,
                            VerifyReport *r) {
    return check_contiguity(full, deltas, n, 0, r);
}

void verify_plan_free(VerifyPlanSet *sets, size_t n) {
    if (!sets) return;
    for (size_t i = 0; i < n; i++)
        free(sets[i].deltas);
    free(sets);
}

static int hist_compatible(const char *a, const char *b) {
    return !a[0] || !b[0] || strcmp(a, b) == 0;
}

static int is_full(const Snapshot *s) {
    return !s->is_chunk && s->kind == SNAP_FULL;
}

static int is_delta(const Snapshot *s) {
    return !s->is_chunk && s->kind == SNAP_INCR;
}

/* Once the store holds an encrypted object, every later one (in name order) must be encrypted
 * too: a snapshotter with keys writes nothing else, so a plain object after it was written
 * without the keys (a restart that lost them: its contents are in the clear) or planted by
 * whoever can write the store (it needs no key). A restore leaves such objects out
 * (snapname_drop_plain_after_encrypted). Plain objects before the first encrypted one are a
 * store that turned encryption on later. */
static int check_encryption_kept(const Snapshot *snaps, size_t n, VerifyReport *r) {
    const Snapshot *enc = NULL;
    for (size_t i = 0; i < n; i++) {
        const Snapshot *d = &snaps[i];
        if (d->is_chunk) continue;
        if (d->encrypted) {
            if (!enc) enc = d;
            continue;
        }
        if (!enc) continue;
        int rc = verify_add_fault(
            r, VERIFY_UNENCRYPTED_AFTER_ENCRYPTED, 0, d->key, enc->key, d->start_revision,
            d->last_revision,
            "%s is not encrypted, but %s before it is: it was written without the encryption "
            "keys or put there by someone who has none (a restore leaves it out)",
            d->key, enc->key);
        if (rc) return rc;
    }
    return 0;
}

/* Plans the set of the full snapshot snaps[f], up to end (the next full snapshot's revision, or
 * INT64_MAX), adding its history and contiguity faults to r. */
/* Index of the store's first encrypted object (chunks aside), n when none. */
static size_t first_encrypted(const Snapshot *snaps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!snaps[i].is_chunk && snaps[i].encrypted) return i;
    return n;
}

/* A plain object sorted after the first encrypted one, at first_enc (check_encryption_kept's
 * fault). */
static int plain_after_encrypted(const Snapshot *snaps, size_t first_enc, size_t i) {
    return i > first_enc && !snaps[i].encrypted;
}

static int plan_one(const Snapshot *snaps, size_t n, size_t f, int64_t end, VerifyPlanSet *ps,
                    VerifySet *vs, VerifyReport *r) {
    const Snapshot *full = &snaps[f];
    size_t errors_before = r->n_errors;
    char hist[HISTORY_ID_LEN + 1];
    snprintf(hist, sizeof hist, "%s", full->history);
    ps->full = f;
    ps->end_revision = end;
    ps->deltas = calloc(n ? n : 1, sizeof *ps->deltas);
    const Snapshot **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    int rc = 0;
    if (!ps->deltas || !ptrs) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = f + 1; i < n; i++) {
        const Snapshot *d = &snaps[i];
        if (!is_delta(d) || d->last_revision <= full->last_revision) continue;
        if (end != INT64_MAX && d->start_revision > end) continue;
        if (!hist_compatible(hist, d->history)) {
            rc = verify_add_fault(
                r, VERIFY_OTHER_HISTORY, 0, d->key, full->key, d->start_revision, d->last_revision,
                "%s belongs to history %s but the set of %s is history %s: a restore of that set "
                "leaves it out (revisions %lld-%lld), so two histories write into this store",
                d->key, d->history, full->key, hist, (long long)d->start_revision,
                (long long)d->last_revision);
            if (rc) goto done;
            continue;
        }
        if (!hist[0] && d->history[0]) {
            snprintf(hist, sizeof hist, "%s", d->history); /* untagged full, tagged deltas */
        }
        ps->deltas[ps->n_deltas] = i;
        ptrs[ps->n_deltas++] = d;
    }
    int added = check_contiguity(full, ptrs, ps->n_deltas, end != INT64_MAX, r);
    if (added < 0) {
        rc = added;
        goto done;
    }
    memset(vs, 0, sizeof *vs);
    snprintf(vs->full_key, sizeof vs->full_key, "%s", full->key);
    snprintf(vs->history, sizeof vs->history, "%s", hist);
    vs->first_revision = full->last_revision;
    vs->last_revision = full->last_revision;
    for (size_t k = 0; k < ps->n_deltas; k++)
        if (ptrs[k]->last_revision > vs->last_revision) vs->last_revision = ptrs[k]->last_revision;
    vs->n_deltas = ps->n_deltas;
    vs->latest = end == INT64_MAX;
    size_t first_enc = first_encrypted(snaps, n);
    vs->ok = r->n_errors == errors_before && !plain_after_encrypted(snaps, first_enc, f);
    for (size_t k = 0; k < ps->n_deltas && vs->ok; k++)
        vs->ok = !plain_after_encrypted(snaps, first_enc, ps->deltas[k]);
done:
    free(ptrs);
    return rc;
}

int verify_plan(const Snapshot *snaps, size_t n, int all, VerifyPlanSet **sets, size_t *n_sets,
                VerifyReport *r) {
    *sets = NULL;
    *n_sets = 0;
    size_t n_full = 0, n_delta = 0;
    for (size_t i = 0; i < n; i++) {
        n_full += is_full(&snaps[i]);
        n_delta += is_delta(&snaps[i]);
    }
    if (!n_full)
        return verify_add_fault(r, VERIFY_NO_FULL, 0, NULL, NULL, 0, 0,
                                "no full snapshot in the store (%zu delta snapshots): nothing "
                                "can be restored",
                                n_delta);
    int erc = check_encryption_kept(snaps, n, r);
    if (erc) return erc;
    size_t want = all ? n_full : 1;
    VerifyPlanSet *ps = calloc(want, sizeof *ps);
    VerifySet *vs = calloc(want, sizeof *vs);
    if (!ps || !vs) {
        free(ps);
        free(vs);
        return err_set(ERR_NOMEM, "out of memory");
    }
    /* the full snapshots, ascending; the latest one is the last (snapname_latest_set) */
    size_t k = 0, seen = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!is_full(&snaps[i])) continue;
        seen++;
        if (seen <= n_full - want) continue;
        int64_t end = INT64_MAX;
        for (size_t j = i + 1; j < n; j++) {
            if (is_full(&snaps[j])) {
                end = snaps[j].last_revision;
                break;
            }
        }
        rc = plan_one(snaps, n, i, end, &ps[k], &vs[k], r);
        k++;
    }
    if (rc) {
        verify_plan_free(ps, k);
        free(vs);
        return rc;
    }
    free(r->sets);
    r->sets = vs;
    r->n_sets = k;
    r->latest_revision = vs[k - 1].last_revision;
    snprintf(r->latest_history, sizeof r->latest_history, "%s", vs[k - 1].history);
    *sets = ps;
    *n_sets = k;
    return 0;
}

/* ---------- object checks ---------- */

/* Reads from the object's plain stream, remembering its first error (a decoding or store error,
 * as opposed to what the consumer finds in good bytes), counting. (The progress counts the
 * store's bytes: snapobj_open_read_progress.) */
typedef struct {
    IoReader base;
    IoReader *src;
    int err;
    char msg[1024];
    uint64_t n;
    atomic_int *stop;
} TapReader;

static int tap_read(IoReader *rd, void *buf, size_t cap, size_t *got) {
    TapReader *t = (TapReader *)rd;
    if (t->stop && *t->stop) return err_set(ERR_CANCELED, "verify stopped by a signal");
    int rc = io_read(t->src, buf, cap, got);
    if (rc) {
        if (!t->err) {
            t->err = rc;
            snprintf(t->msg, sizeof t->msg, "%s", err_msg());
        }
        return rc;
    }
    t->n += *got;
    return 0;
}

static void tap_free(IoReader *rd) {
    (void)rd; /* on the stack */
}

static const IoReaderVt tap_vt = {tap_read, tap_free};

typedef struct {
    const VerifyConfig *cfg;
    VerifyReport *r;
    const char *scratch;
    Progress *progress; /* one for the whole run (bytes read from the store), or NULL */
    KeyState *ks;       /* the keyspace of the set being checked (keystate.h) */
    long ks_set;        /* the plan set ks belongs to, -1 = none */
    long cur_set;       /* the plan set of the object being checked, -1 = none */
} Checker;

/* Records why reading the object failed: the store's error or a decoding error. */
static int read_fault(Checker *c, const Snapshot *s, int rc, const char *msg) {
    if (rc == ERR_CANCELED || rc == ERR_NOMEM) return rc;
    VerifyFaultKind k =
        rc == ERR_CORRUPT || rc == ERR_UNSUPPORTED ? VERIFY_UNDECODABLE : VERIFY_UNREADABLE;
    return verify_add_fault(c->r, k, 0, s->key, NULL, 0, 0, "%s %s: %s",
                            k == VERIFY_UNDECODABLE ? "undecodable" : "unreadable", s->key, msg);
}

/* io_copy_tick's tick: the scratch file system's free-space reserve (fs_space_guard_check) */
static int space_tick(void *ctx, uint64_t n) {
    return fs_space_guard_check(ctx, n);
}

static int check_full(Checker *c, const Snapshot *s, TapReader *tap) {
    char *path = fs_join(c->scratch, "full.db");
    if (!path) return err_set(ERR_NOMEM, "out of memory");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int rc = err_set(ERR_IO, "create %s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    SnapshotSpool sp;
    int rc = snapshot_spool_start(&sp, path, fd);
    uint64_t total = 0, db_len = 0;
    FsSpaceGuard space = {c->scratch, 0};
    if (!rc) rc = io_copy_tick(&tap->base, sp.checker, &total, space_tick, &space);
    if (rc) {
        if (tap->err) rc = read_fault(c, s, tap->err, tap->msg);
        /* else a local write failed (ERR_IO, scratch disk): the verification cannot go on */
        else
            err_wrap(rc, "%s", s->key);
        goto done;
    }
    if (total == 0) {
        rc = verify_add_fault(c->r, VERIFY_UNDECODABLE, 0, s->key, NULL, 0, 0,
                              "undecodable %s: empty", s->key);
        goto done;
    }
    if (total % 512 != 32) {
        rc = verify_add_fault(c->r, VERIFY_UNDECODABLE, 0, s->key, NULL, 0, 0,
                              "undecodable %s: %llu bytes is not db pages plus a 32-byte sha256 "
                              "trailer (size %% 512 != 32): the hash is missing",
                              s->key, (unsigned long long)total);
        goto done;
    }
    if (trailer_check_result(sp.checker, &db_len)) {
        rc = verify_add_fault(c->r, VERIFY_BAD_HASH, 0, s->key, NULL, 0, 0,
                              "bad hash in %s: the sha256 of its %llu db bytes does not match its "
                              "trailer (%s)",
                              s->key, (unsigned long long)db_len, err_msg());
        goto done;
    }
    BboltDb *db = NULL;
    int64_t rev = 0;
    int brc = bbolt_open(path, db_len, &db);
    if (!brc) brc = bbolt_check(db, NULL);
    if (!brc) brc = bbolt_etcd_revision(db, &rev);
    bbolt_close(db);
    if (brc) {
        rc = verify_add_fault(c->r, VERIFY_UNDECODABLE, 0, s->key, NULL, 0, 0,
                              "undecodable %s: its sha256 matches but it is not a valid etcd db: "
                              "%s",
                              s->key, err_msg());
        goto done;
    }
    /* The Go tool names a full snapshot by a revision read before the stream, so its db may hold
     * a few later revisions (docs/go-tool.md §3; its next delta holds them too and restore applies
     * them once). An older db than the name says misses revisions; ours are named from the db,
     * so a later one is a lie too (restore_fetch.c: check_full_revision). */
    if (rev < s->last_revision)
        rc = verify_add_fault(c->r, VERIFY_WRONG_REVISIONS, 0, s->key, NULL, rev + 1,
                              s->last_revision,
                              "%s holds the db at revision %lld, but its name says %lld: revisions "
                              "%lld-%lld are missing",
                              s->key, (long long)rev, (long long)s->last_revision,
                              (long long)(rev + 1), (long long)s->last_revision);
    else if (rev > s->last_revision && s->history[0]) /* a restore refuses it */
        rc = verify_add_fault(c->r, VERIFY_WRONG_REVISIONS, 0, s->key, NULL, s->last_revision + 1,
                              rev,
                              "%s holds the db at revision %lld, after the %lld its name says "
                              "(etcdbr names full snapshots from their db: the name does not "
                              "match the contents)",
                              s->key, (long long)rev, (long long)s->last_revision);
    c->ks_set = -1;
    if (!rc && c->cur_set >= 0) { /* the keyspace its set's deltas must continue */
        int krc = keystate_load_db(c->ks, path, db_len, rev);
        if (krc == ERR_NOMEM) rc = krc;
        if (!krc && keystate_ok(c->ks)) c->ks_set = c->cur_set;
        if (!krc && !keystate_ok(c->ks))
            log_warn("%s holds more than %u keys: its set's deltas are not checked against its "
                     "keyspace",
                     s->key, KEYSTATE_MAX_KEYS);
    }
done:
    snapshot_spool_discard(&sp);
    return rc;
}

/* Applies a delta's event to its set's keyspace (keystate.h): 1 when it contradicts it (the
 * fault is added, *rc its result) or when applying failed (*rc ERR_NOMEM); else 0. A delta of
 * another set than the keyspace's, or after a hole, is not checked. */
static int keyspace_fault(Checker *c, const Snapshot *s, const DeltaEvent *ev, int *rc) {
    if (c->ks_set < 0 || c->ks_set != c->cur_set || !keystate_ok(c->ks)) return 0;
    if (s->start_revision > keystate_revision(c->ks) + 1) { /* a gap, reported by the plan */
        keystate_invalidate(c->ks);
        return 0;
    }
    int krc = keystate_apply(c->ks, ev);
    if (!krc) return 0;
    if (krc == ERR_NOMEM) {
        *rc = krc;
        return 1;
    }
    *rc = verify_add_fault(c->r, VERIFY_INCONSISTENT_EVENTS, 0, s->key, NULL, ev->mod_revision,
                           ev->mod_revision,
                           "%s does not continue the keyspace before it: %s (objects of two "
                           "clusters or histories in one chain)",
                           s->key, err_msg());
    return 1;
}

static int check_delta(Checker *c, const Snapshot *s, TapReader *tap) {
    DeltaReader *dr = NULL;
    int rc = delta_reader_open(&tap->base, c->scratch, &dr);
    if (rc) {
        if (tap->err) return read_fault(c, s, tap->err, tap->msg);
        if (rc != ERR_CORRUPT) return err_wrap(rc, "%s", s->key); /* the local spool */
        if (tap->n <= SHA256_LEN)
            return verify_add_fault(c->r, VERIFY_UNDECODABLE, 0, s->key, NULL, 0, 0,
                                    "undecodable %s: %s", s->key, err_msg());
        return verify_add_fault(c->r, VERIFY_BAD_HASH, 0, s->key, NULL, 0, 0, "bad hash in %s: %s",
                                s->key, err_msg());
    }
    int64_t prev = 0;
    uint64_t events = 0;
    if (c->ks_set >= 0 && c->ks_set == c->cur_set) keystate_begin_delta(c->ks);
    for (;;) {
        DeltaEvent ev;
        int got = 0;
        if ((rc = delta_reader_next(dr, &ev, &got))) {
            rc = verify_add_fault(c->r, VERIFY_UNDECODABLE, 0, s->key, NULL, 0, 0,
                                  "undecodable %s: its sha256 matches but event %llu does not "
                                  "decode: %s",
                                  s->key, (unsigned long long)events + 1, err_msg());
            goto done;
        }
        if (!got) break;
        int64_t rev = ev.mod_revision;
        if (rev < s->start_revision || rev > s->last_revision) {
            rc = verify_add_fault(c->r, VERIFY_WRONG_REVISIONS, 0, s->key, NULL, rev, rev,
                                  "%s holds an event at revision %lld, outside its name's "
                                  "revisions %lld-%lld",
                                  s->key, (long long)rev, (long long)s->start_revision,
                                  (long long)s->last_revision);
            goto done;
        }
        if (prev && rev < prev) {
            rc = verify_add_fault(c->r, VERIFY_WRONG_REVISIONS, 0, s->key, NULL, rev, prev,
                                  "%s: event %llu is at revision %lld, after one at %lld (events "
                                  "out of order)",
                                  s->key, (unsigned long long)events + 1, (long long)rev,
                                  (long long)prev);
            goto done;
        }
        int64_t expect = prev ? prev + 1 : s->start_revision;
        if (rev > expect) {
            rc = verify_add_fault(c->r, VERIFY_GAP, 0, s->key, NULL, expect, rev - 1,
                                  "revisions %lld-%lld are missing inside %s (its events jump "
                                  "to %lld)",
                                  (long long)expect, (long long)(rev - 1), s->key, (long long)rev);
            goto done;
        }
        if (delta_event_check(&ev)) { /* what a restore refuses */
            rc = verify_add_fault(c->r, VERIFY_UNDECODABLE, 0, s->key, NULL, rev, rev,
                                  "undecodable %s: event %llu: %s", s->key,
                                  (unsigned long long)events + 1, err_msg());
            goto done;
        }
        if (keyspace_fault(c, s, &ev, &rc)) goto done;
        prev = rev;
        events++;
    }
    if (!events)
        rc = verify_add_fault(c->r, VERIFY_UNDECODABLE, 0, s->key, NULL, 0, 0,
                              "undecodable %s: it holds no events (a delta never does)", s->key);
    else if (prev != s->last_revision)
        rc = verify_add_fault(c->r, VERIFY_GAP, 0, s->key, NULL, prev + 1, s->last_revision,
                              "revisions %lld-%lld are missing inside %s (its last event is at "
                              "%lld, its name says %lld)",
                              (long long)(prev + 1), (long long)s->last_revision, s->key,
                              (long long)prev, (long long)s->last_revision);
done:
    delta_reader_close(dr);
    return rc;
}

/* The run's progress: bytes read from the store of the in-scope objects' listed sizes (an
 * unknown total when the listing lacks one). */
static Progress *verify_progress(const VerifyReport *out, const Snapshot *list, size_t n,
                                 const uint8_t *in_scope) {
    uint64_t total = 0;
    int unknown = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in_scope[i]) continue;
        if (list[i].size < 0)
            unknown = 1;
        else
            total += (uint64_t)list[i].size;
    }
    char what[1300];
    snprintf(what, sizeof what, "verify %s", out->store);
    ProgressOptions o = {.what = what,
                         .total = total,
                         .total_kind = unknown ? PROGRESS_TOTAL_UNKNOWN : PROGRESS_TOTAL_EXACT,
                         .counts_bytes = 1};
    return progress_start_opts(&o);
}

/* Checks one object; a fault found is added to the report (0 returned). An error return means
 * the verification itself cannot go on (out of memory, scratch disk, canceled). */
static int check_object(Checker *c, const Snapshot *s, size_t ordinal, size_t total) {
    SnapObjReader *obj = NULL;
    size_t errors_before = c->r->n_errors;
    int rc = snapobj_open_read_progress(c->cfg->store, s, c->progress, &obj);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", err_msg());
        return read_fault(c, s, rc, msg);
    }
    progress_set_items(c->progress, ordinal - 1, total);
    TapReader tap = {.base = {&tap_vt}, .src = snapobj_reader(obj), .stop = c->cfg->stop};
    rc = s->kind == SNAP_FULL ? check_full(c, s, &tap) : check_delta(c, s, &tap);
    if (c->r->n_errors != errors_before) keystate_invalidate(c->ks); /* no cascade of faults */
    progress_set_items(c->progress, ordinal, total);
    uint64_t stored = 0, plain = 0;
    if (!rc && c->r->n_errors == errors_before && snapobj_counts(obj, &stored, &plain) == 0) {
        c->r->stored_bytes += stored;
        c->r->plain_bytes += plain;
    }
    c->r->objects_checked++;
    snapobj_close(obj);
    if (!rc && c->r->n_errors == errors_before)
        log_debug("verified %s: %llu bytes stored, %llu plain", s->key, (unsigned long long)stored,
                  (unsigned long long)plain);
    return rc;
}

/* ---------- restore test ---------- */

static void restore_note(VerifyReport *r, RestoreTestResult res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void restore_note(VerifyReport *r, RestoreTestResult res, const char *fmt, ...) {
    r->restore_test = res;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->restore_note, sizeof r->restore_note, fmt, ap);
    va_end(ap);
}

/* "compact revision R" or "never compacted" (HashKV gives -1 then). */
static const char *compact_text(int64_t rev, char *buf, size_t cap) {
    if (rev > 0)
        snprintf(buf, cap, "compact revision %lld", (long long)rev);
    else
        snprintf(buf, cap, "never compacted");
    return buf;
}

/* The restore test's comparison: HashKV of the restored etcd (scratch_c: h_r, compacted at c_r)
 * and of the live cluster at r->restore_revision, once both are compacted alike; the outcome in
 * r's restore note, a mismatch or failure also as a fault (its rc). */
static int compare_with_live(const VerifyConfig *cfg, VerifyReport *r, EtcdClient *scratch_c,
                             uint32_t h_r, int64_t c_r) {
    EtcdClient *live_c = NULL;
    uint32_t h_l = 0;
    int64_t c_l = 0;
    int rc = 0, rrc;
    if (!cfg->live || !cfg->live->n_endpoints) {
        restore_note(r, RESTORE_TEST_NOT_COMPARED,
                     "the restore succeeded (HashKV %u at revision %lld) but no live cluster was "
                     "given to compare with",
                     h_r, (long long)r->restore_revision);
        goto out;
    }
    if ((rrc = etcd_client_new(cfg->live, &live_c))) {
        restore_note(r, RESTORE_TEST_NOT_COMPARED, "the restore succeeded, not compared: %s",
                     err_msg());
        goto out;
    }
    rrc = etcd_hash_kv(live_c, r->restore_revision, &h_l, &c_l, NULL);
    if (rrc == ERR_COMPACTED) {
        restore_note(r, RESTORE_TEST_NOT_COMPARED,
                     "the restore succeeded, but the live cluster (%s) has compacted past "
                     "revision %lld, so its HashKV there cannot be compared: %s",
                     etcd_client_endpoint(live_c), (long long)r->restore_revision, err_msg());
        goto out;
    }
    if (rrc) {
        restore_note(r, RESTORE_TEST_NOT_COMPARED,
                     "the restore succeeded, but HashKV at revision %lld on the live cluster "
                     "failed (unreachable, or its revision is older): %s",
                     (long long)r->restore_revision, err_msg());
        goto out;
    }
    r->hash_live = h_l;
    r->compact_live = c_l;
    if (c_l > c_r) { /* compact the scratch etcd the same way so both hash the same revisions */
        log_info("restore test: the live cluster is compacted at revision %lld, the restored "
                 "etcd at %lld: compacting the restored etcd to %lld",
                 (long long)c_l, (long long)c_r, (long long)c_l);
        if ((rrc = etcd_compact(scratch_c, c_l, 1)) ||
            (rrc = etcd_hash_kv(scratch_c, r->restore_revision, &h_r, &c_r, NULL))) {
            restore_note(r, RESTORE_TEST_FAILED,
                         "the restore succeeded but compacting it to revision %lld failed: %s",
                         (long long)c_l, err_msg());
            rc = verify_add_fault(r, VERIFY_RESTORE_FAILED, 0, NULL, NULL, 0, r->restore_revision,
                                  "restore test: %s", r->restore_note);
            goto out;
        }
        r->hash_restored = h_r;
        r->compact_restored = c_r;
    } else if (c_l < c_r) {
        restore_note(r, RESTORE_TEST_NOT_COMPARED,
                     "the restore succeeded, but it is compacted at revision %lld and the live "
                     "cluster only at %lld: their HashKV cannot be compared",
                     (long long)c_r, (long long)c_l);
        goto out;
    }
    char ctext[64];
    if (h_r == h_l) {
        restore_note(r, RESTORE_TEST_MATCH,
                     "HashKV at revision %lld: restored %u = live %u (%s, %s)",
                     (long long)r->restore_revision, h_r, h_l, etcd_client_endpoint(live_c),
                     compact_text(c_l, ctext, sizeof ctext));
    } else {
        restore_note(r, RESTORE_TEST_MISMATCH,
                     "HashKV at revision %lld differs: restored %u, live %u (%s, %s): the "
                     "store's latest set does not hold what the cluster held at that revision",
                     (long long)r->restore_revision, h_r, h_l, etcd_client_endpoint(live_c),
                     compact_text(c_l, ctext, sizeof ctext));
        rc = verify_add_fault(r, VERIFY_RESTORE_MISMATCH, 0, NULL, NULL, 0, r->restore_revision,
                              "restore test: %s", r->restore_note);
    }
out:
    etcd_client_free(live_c);
    return rc;
}

static int restore_test(const VerifyConfig *cfg, const char *scratch, VerifyReport *r) {
    char *data_dir = fs_join(scratch, "restore-test.etcd");
    char *tmp = fs_join(scratch, "restore-test.tmp");
    char *etcd_log = fs_join(scratch, "restore-test-etcd.log");
    EtcdProc *proc = NULL;
    EtcdClient *scratch_c = NULL;
    int rc = 0;
    if (!data_dir || !tmp || !etcd_log) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    r->restore_revision = r->latest_revision;
    RestoreConfig rcfg = {
        .store = cfg->store,
        .data_dir = data_dir,
        .temp_dir = tmp,
        .name = "etcdbr-verify",
        .initial_cluster = "etcdbr-verify=http://127.0.0.1:2380",
        .initial_cluster_token = "etcdbr-verify",
        .initial_advertise_peer_urls = "http://127.0.0.1:2380",
        .max_fetchers = cfg->max_fetchers > 0 ? cfg->max_fetchers : 4,
        .etcdutl_bin = cfg->etcdutl_bin,
        .target_revision = r->latest_revision,
        .new_lease_ttl = cfg->new_lease_ttl > 0 ? cfg->new_lease_ttl : 3600,
        .stop = cfg->stop,
    };
    RestoreResult res;
    log_info("restore test: restoring the latest set up to revision %lld into a scratch dir",
             (long long)r->latest_revision);
    int rrc = restorer_run(&rcfg, &res);
    if (rrc == ERR_CANCELED) {
        rc = rrc;
        goto done;
    }
    if (rrc) {
        restore_note(r, RESTORE_TEST_FAILED, "the restore failed: %s", err_msg());
        rc = verify_add_fault(r, VERIFY_RESTORE_FAILED, 0, NULL, NULL, 0, r->latest_revision,
                              "restore test: the restore of the latest set failed: %s",
                              r->restore_note + strlen("the restore failed: "));
        goto done;
    }
    EtcdProcConfig pc = {.etcd_bin = cfg->etcd_bin,
                         .data_dir = data_dir,
                         .name = "etcdbr-verify",
                         .log_path = etcd_log,
                         .unsafe_no_fsync = 1};
    if ((rrc = etcd_proc_start(&pc, &proc))) {
        restore_note(r, RESTORE_TEST_FAILED,
                     "the restore succeeded (revision %lld) but etcd did not start on it: %s",
                     (long long)res.revision, err_msg());
        rc = verify_add_fault(r, VERIFY_RESTORE_FAILED, 0, NULL, NULL, 0, res.revision,
                              "restore test: %s", r->restore_note);
        goto done;
    }
    const char *url = etcd_proc_client_url(proc);
    EtcdConfig sc = {.endpoints = &url, .n_endpoints = 1};
    uint32_t h_r = 0;
    int64_t c_r = 0;
    if ((rrc = etcd_client_new(&sc, &scratch_c)) ||
        (rrc = etcd_hash_kv(scratch_c, r->restore_revision, &h_r, &c_r, NULL))) {
        restore_note(r, RESTORE_TEST_FAILED,
                     "the restore succeeded but HashKV at revision %lld on the restored etcd "
                     "failed: %s",
                     (long long)r->restore_revision, err_msg());
        rc = verify_add_fault(r, VERIFY_RESTORE_FAILED, 0, NULL, NULL, 0, r->restore_revision,
                              "restore test: %s", r->restore_note);
        goto done;
    }
    r->hash_restored = h_r;
    r->compact_restored = c_r;
    rc = compare_with_live(cfg, r, scratch_c, h_r, c_r);
done:
    etcd_client_free(scratch_c);
    if (proc && etcd_proc_stop(proc))
        log_warn("restore test: the scratch etcd did not stop cleanly");
    if (data_dir) fs_remove_tree(data_dir);
    if (tmp) fs_remove_tree(tmp);
    FREE_ALL(data_dir, tmp, etcd_log);
    return rc;
}

/* ---------- the run ---------- */

#define SCRATCH_PREFIX "etcdbr-verify."

/* A private scratch directory inside temp_dir, locked for this process (fs_scratch_create). */
static int make_scratch(const char *temp_dir, char **out, int *lock_fd, int *made_temp_dir) {
    return fs_scratch_create(temp_dir, SCRATCH_PREFIX, "verification", out, lock_fd, made_temp_dir);
}

void verify_report_free(VerifyReport *r) {
    if (!r) return;
    free(r->sets);
    free(r->faults);
    r->sets = NULL;
    r->faults = NULL;
    r->n_sets = r->n_faults = 0;
}

int verify_report_passed(const VerifyReport *r) {
    return r->n_errors == 0 && r->restore_test != RESTORE_TEST_FAILED &&
           r->restore_test != RESTORE_TEST_MISMATCH;
}

/* Marks the sets whose objects (or contiguity) have a fault. */
static void mark_sets(VerifyReport *r, const Snapshot *list, const VerifyPlanSet *ps) {
    for (size_t i = 0; i < r->n_sets; i++) {
        for (size_t f = 0; f < r->n_faults && r->sets[i].ok; f++) {
            const VerifyFault *vf = &r->faults[f];
            if (vf->warning || !vf->object[0]) continue;
            if (strcmp(vf->object, list[ps[i].full].key) == 0) r->sets[i].ok = 0;
            for (size_t k = 0; k < ps[i].n_deltas; k++)
                if (strcmp(vf->object, list[ps[i].deltas[k]].key) == 0) r->sets[i].ok = 0;
        }
    }
}

int verify_run(const VerifyConfig *cfg, VerifyReport *out) {
    int64_t t0 = now_mono_ms();
    memset(out, 0, sizeof *out);
    snprintf(out->store, sizeof out->store, "%s", store_describe(cfg->store));
    out->all_sets = cfg->all_sets;
    Snapshot *list = NULL;
    size_t n = 0, n_sets = 0;
    VerifyPlanSet *ps = NULL;
    char *scratch = NULL;
    uint8_t *in_scope = NULL;
    long *set_of = NULL; /* list index -> plan set, -1 = none */
    KeyState *ks = NULL;
    int lock_fd = -1, made_temp_dir = 0;
    int rc = store_list(cfg->store, &list, &n);
    if (rc) goto done;
    if ((rc = verify_plan(list, n, cfg->all_sets, &ps, &n_sets, out))) goto done;
    in_scope = calloc(n ? n : 1, 1);
    if (!in_scope) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    if (cfg->all_sets) { /* every object, in a set or not */
        for (size_t i = 0; i < n; i++)
            in_scope[i] = !list[i].is_chunk;
    } else {
        for (size_t i = 0; i < n_sets; i++) {
            in_scope[ps[i].full] = 1;
            for (size_t k = 0; k < ps[i].n_deltas; k++)
                in_scope[ps[i].deltas[k]] = 1;
        }
    }
    for (size_t i = 0; i < n; i++)
        out->objects_in_scope += in_scope[i];

    set_of = malloc((n ? n : 1) * sizeof *set_of);
    if (!set_of || keystate_new(&ks)) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        set_of[i] = -1;
    for (size_t i = 0; i < n_sets; i++) {
        set_of[ps[i].full] = (long)i;
        for (size_t k = 0; k < ps[i].n_deltas; k++)
            set_of[ps[i].deltas[k]] = (long)i;
    }
    if ((rc = make_scratch(cfg->temp_dir, &scratch, &lock_fd, &made_temp_dir))) goto done;
    Checker c = {cfg, out, scratch, NULL, ks, -1, -1};
    /* one status line for the run: bytes read from the store of the listed total, objects done
     * of how many */
    if (cfg->show_progress && out->objects_in_scope)
        c.progress = verify_progress(out, list, n, in_scope);
    size_t ordinal = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!in_scope[i]) continue;
        if (cfg->stop && *cfg->stop) {
            rc = err_set(ERR_CANCELED, "verify stopped by a signal");
            break;
        }
        c.cur_set = set_of[i];
        rc = check_object(&c, &list[i], ++ordinal, out->objects_in_scope);
    }
    progress_finish(c.progress);
    if (rc) goto done;
    mark_sets(out, list, ps);
    if (cfg->restore_test) {
        if (out->n_errors) {
            restore_note(out, RESTORE_TEST_NOT_RUN,
                         "the store's checks found %zu faults, so a restore is known "
                         "to fail or be wrong",
                         out->n_errors);
        } else if (!n_sets) {
            restore_note(out, RESTORE_TEST_NOT_RUN, "no set to restore");
        } else {
            rc = restore_test(cfg, scratch, out);
        }
    }
done:
    if (scratch) {
        if (fs_remove_marked_tree(scratch, FS_SCRATCH_MARKER))
            log_warn("cannot remove the scratch directory %s: %s", scratch, err_msg());
        else
            fs_scratch_temp_dir_release(cfg->temp_dir, made_temp_dir);
        free(scratch);
    }
    if (lock_fd >= 0) close(lock_fd);
    free(in_scope);
    free(set_of);
    keystate_free(ks);
    verify_plan_free(ps, n_sets);
    free(list);
    out->seconds = (double)(now_mono_ms() - t0) / 1000.0;
    return rc;
}

/* ---------- reports ---------- */

static const char *hist_text(const char *h) {
    return h[0] ? h : "untagged";
}

void verify_report_print(const VerifyReport *r, FILE *f) {
    fprintf(f, "store: %s\n", r->store);
    fprintf(f, "scope: %s (%zu objects, %zu checked, %.1f MiB stored, %.1f MiB plain)\n",
            r->all_sets ? "every set" : "the latest set", r->objects_in_scope, r->objects_checked,
            (double)r->stored_bytes / 1048576.0, (double)r->plain_bytes / 1048576.0);
    for (size_t i = 0; i < r->n_sets; i++) {
        const VerifySet *s = &r->sets[i];
        fprintf(f, "set %s%s: revisions %lld-%lld, %zu deltas, history %s: %s\n", s->full_key,
                s->latest ? " (latest)" : "", (long long)s->first_revision,
                (long long)s->last_revision, s->n_deltas, hist_text(s->history),
                s->ok ? "ok" : "FAULTY");
    }
    for (size_t i = 0; i < r->n_faults; i++) {
        const VerifyFault *vf = &r->faults[i];
        fprintf(f, "%s [%s] %s\n", vf->warning ? "WARNING" : "FAULT",
                verify_fault_kind_name(vf->kind), vf->message);
    }
    if (r->restore_test != RESTORE_TEST_NOT_RUN || r->restore_note[0])
        fprintf(f, "restore test: %s: %s\n", restore_test_result_name(r->restore_test),
                r->restore_note);
    if (!verify_report_passed(r))
        fprintf(f, "result: FAILED (%zu fault%s)\n", r->n_errors, r->n_errors == 1 ? "" : "s");
    else if (r->restore_test == RESTORE_TEST_MATCH)
        fprintf(f,
                "result: verified up to revision %lld, restore tested and matched the live "
                "cluster\n",
                (long long)r->latest_revision);
    else if (r->restore_test == RESTORE_TEST_NOT_COMPARED)
        fprintf(f,
                "result: objects and contiguity verified up to revision %lld; the restore ran "
                "and succeeded, but it was NOT compared with the live cluster\n",
                (long long)r->latest_revision);
    else
        fprintf(f, "result: verified up to revision %lld (objects, hashes, contiguity, history)\n",
                (long long)r->latest_revision);
}

json_t *verify_report_json(const VerifyReport *r) {
    json_t *sets = json_array(), *faults = json_array();
    for (size_t i = 0; i < r->n_sets; i++) {
        const VerifySet *s = &r->sets[i];
        json_array_append_new(
            sets, json_pack("{s:s,s:s,s:I,s:I,s:I,s:b,s:b}", "full", s->full_key, "history",
                            s->history, "first_revision", (json_int_t)s->first_revision,
                            "last_revision", (json_int_t)s->last_revision, "deltas",
                            (json_int_t)s->n_deltas, "latest", s->latest, "ok", s->ok));
    }
    for (size_t i = 0; i < r->n_faults; i++) {
        const VerifyFault *vf = &r->faults[i];
        json_array_append_new(faults, json_pack("{s:s,s:b,s:s,s:s,s:I,s:I,s:s}", "kind",
                                                verify_fault_kind_name(vf->kind), "warning",
                                                vf->warning, "object", vf->object, "other",
                                                vf->other, "from", (json_int_t)vf->from, "to",
                                                (json_int_t)vf->to, "message", vf->message));
    }
    json_t *rt = json_pack("{s:s,s:s,s:I}", "result", restore_test_result_name(r->restore_test),
                           "note", r->restore_note, "revision", (json_int_t)r->restore_revision);
    if (rt && (r->restore_test == RESTORE_TEST_MATCH || r->restore_test == RESTORE_TEST_MISMATCH)) {
        json_object_set_new(rt, "hash_restored", json_integer(r->hash_restored));
        json_object_set_new(rt, "hash_live", json_integer(r->hash_live));
        json_object_set_new(rt, "compact_revision", json_integer(r->compact_live));
    }
    return json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:s,s:o,s:o,s:o,s:f}", "store", r->store,
                     "scope", r->all_sets ? "all" : "latest", "passed", verify_report_passed(r),
                     "objects_in_scope", (json_int_t)r->objects_in_scope, "objects_checked",
                     (json_int_t)r->objects_checked, "stored_bytes", (json_int_t)r->stored_bytes,
                     "plain_bytes", (json_int_t)r->plain_bytes, "latest_revision",
                     (json_int_t)r->latest_revision, "latest_history", r->latest_history, "sets",
                     sets, "faults", faults, "restore_test", rt ? rt : json_null(), "seconds",
                     r->seconds);
}
