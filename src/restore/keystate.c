/* keystate: see keystate.h. i64map cannot remove a key: an absent key is create_revision 0. */
#include "keystate.h"
#include "../common/err.h"
#include "../common/i64map.h"
#include "../format/bbolt.h"
#include "../format/mvcc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct KeyState {
    I64Map *create, *version; /* key hash -> create_revision (0 = absent), version */
    int64_t base; /* events up to here are in the state already (the db, or earlier deltas) */
    int64_t rev;  /* the last revision applied */
    int ok;
};

int keystate_new(KeyState **out) {
    KeyState *ks = calloc(1, sizeof *ks);
    if (!ks || i64map_new(&ks->create) || i64map_new(&ks->version)) {
        keystate_free(ks);
        return err_set(ERR_NOMEM, "out of memory");
    }
    *out = ks;
    return 0;
}

void keystate_free(KeyState *ks) {
    if (!ks) return;
    i64map_free(ks->create);
    i64map_free(ks->version);
    free(ks);
}

void keystate_reset(KeyState *ks) {
    i64map_clear(ks->create);
    i64map_clear(ks->version);
    ks->base = ks->rev = 0;
    ks->ok = 0;
}

int keystate_ok(const KeyState *ks) {
    return ks->ok;
}

int64_t keystate_revision(const KeyState *ks) {
    return ks->rev;
}

void keystate_begin_delta(KeyState *ks) {
    ks->base = ks->rev;
}

void keystate_invalidate(KeyState *ks) {
    ks->ok = 0;
}

static int64_t key_hash(const uint8_t *key, size_t len) {
    uint64_t h = bbolt_fnv1a64(key, len);
    return h ? (int64_t)h : 1; /* 0 is i64map's empty marker */
}

/* Sets a key's state; the cap makes the state give up instead of growing. */
static int set_key(KeyState *ks, int64_t h, int64_t create, int64_t version) {
    if (i64map_count(ks->create) >= KEYSTATE_MAX_KEYS && !i64map_get(ks->create, h, NULL)) {
        ks->ok = 0;
        return 0;
    }
    int rc = i64map_put(ks->create, h, create);
    if (!rc) rc = i64map_put(ks->version, h, version);
    return rc;
}

int keystate_load_db(KeyState *ks, const char *path, uint64_t db_len, int64_t rev) {
    keystate_reset(ks);
    BboltDb *db = NULL;
    BboltCursor *cur = NULL;
    const BboltName bucket = {MVCC_BUCKET_KEY, strlen(MVCC_BUCKET_KEY)};
    int rc = bbolt_open(path, db_len, &db);
    if (!rc) rc = bbolt_cursor_open(db, &bucket, 1, &cur);
    ks->ok = 1;
    for (int got = 1; !rc && got && ks->ok;) {
        BboltItem it;
        if ((rc = bbolt_cursor_next(cur, &it, &got)) || !got) break;
        int tomb = 0;
        MvccKeyValue kv;
        if ((rc = mvcc_rev_parse(it.key, it.key_len, NULL, NULL, &tomb))) break;
        if (it.is_bucket) {
            rc = err_set(ERR_CORRUPT, "a bucket inside bucket \"key\"");
            break;
        }
        if ((rc = mvcc_kv_unmarshal(it.value, it.value_len, &kv))) break;
        int64_t h = key_hash(kv.key, kv.key_len);
        rc = tomb ? set_key(ks, h, 0, 0) : set_key(ks, h, kv.create_revision, kv.version);
    }
    bbolt_cursor_close(cur);
    bbolt_close(db);
    if (rc) {
        keystate_reset(ks);
        return rc;
    }
    ks->base = ks->rev = rev;
    return 0;
}

/* The key's bytes for a message: printable ASCII, others as '?', at most 64. */
static void key_text(const DeltaEvent *ev, char out[72]) {
    size_t n = ev->key_len < 64 ? ev->key_len : 64;
    for (size_t i = 0; i < n; i++)
        out[i] = ev->key[i] >= 0x20 && ev->key[i] < 0x7f ? (char)ev->key[i] : '?';
    snprintf(out + n, 72 - n, "%s", ev->key_len > 64 ? "..." : "");
}

int keystate_apply(KeyState *ks, const DeltaEvent *ev) {
    if (!ks->ok || ev->mod_revision <= ks->base) return 0;
    int64_t h = key_hash(ev->key, ev->key_len), create = 0, version = 0;
    if (i64map_get(ks->create, h, &create) && create) i64map_get(ks->version, h, &version);
    char k[72], before[96];
    key_text(ev, k);
    if (create)
        snprintf(before, sizeof before, "was live (created at revision %lld, version %lld)",
                 (long long)create, (long long)version);
    else
        snprintf(before, sizeof before, "was absent");
    ks->rev = ev->mod_revision;
    if (ev->type == ETCD_OP_DELETE) {
        if (!create) {
            ks->ok = 0;
            return err_set(ERR_CORRUPT, "its delete of key \"%s\" at revision %lld, but the key %s",
                           k, (long long)ev->mod_revision, before);
        }
        return set_key(ks, h, 0, 0);
    }
    int follows =
        ev->version == 1 ? !create : create == ev->create_revision && version == ev->version - 1;
    if (!follows) {
        ks->ok = 0;
        return err_set(ERR_CORRUPT,
                       "its put of key \"%s\" at revision %lld (created at revision %lld, version "
                       "%lld), but the key %s",
                       k, (long long)ev->mod_revision, (long long)ev->create_revision,
                       (long long)ev->version, before);
    }
    return set_key(ks, h, ev->create_revision, ev->version);
}
