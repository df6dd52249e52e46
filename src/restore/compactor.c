/* compactor: see compactor.h. */
#include "compactor.h"
#include "../backup/fullsnap.h"
#include "../codec/compress.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/progress.h"
#include "../common/timeutil.h"
#include "../store/snapobj.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    Store *store;
    CompactResult *out;
} CompactCtx;

static int progress_tick(void *ctx, uint64_t n) {
    progress_set(ctx, n);
    return 0;
}

/* Reads the stored object back through the same decoding a restore uses and checks its SHA-256
 * trailer and length: success is reported only for a snapshot that restores. */
static int read_back(Store *store, const char *name, uint64_t db_bytes) {
    Snapshot snap;
    SnapObjReader *r = NULL;
    int rc = store_snapshot_for_name(store, name, &snap);
    if (!rc) rc = snapobj_open_read(store, &snap, &r);
    if (rc) return err_wrap(rc, "reading back %s", name);
    IoWriter *checker = trailer_checker_new(NULL, 0);
    uint64_t plain = 0, stored = 0, payload = 0;
    Progress *p = progress_start("compact: reading the new snapshot back", 0, 1);
    if (!checker) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = io_copy_tick(snapobj_reader(r), checker, NULL, progress_tick, p);
    progress_finish(p);
    if (!rc) rc = snapobj_counts(r, &stored, &plain);
    if (!rc) rc = trailer_check_result(checker, &payload);
    if (!rc && payload != db_bytes)
        rc = err_set(ERR_CORRUPT, "holds %llu db bytes, %llu were written",
                     (unsigned long long)payload, (unsigned long long)db_bytes);
    io_writer_free(checker);
    snapobj_close(r);
    if (rc) return err_wrap(rc, "reading back %s", name);
    return 0;
}

static int store_db(void *ctx, const char *db_path, const Snapshot *full,
                    const RestoreResult *res) {
    CompactCtx *c = ctx;
    /* compression as the Go tool: the last delta's, else the full snapshot's */
    const char *suffix = res->last_delta_suffix[0] || res->deltas_applied
                             ? res->last_delta_suffix
                             : full->compression_suffix;
    CompressKind kind;
    int rc = compress_from_suffix(suffix, &kind);
    if (rc) return err_set(ERR_UNSUPPORTED, "unknown compression suffix \"%s\"", suffix);
    struct stat st;
    if (stat(db_path, &st) != 0) return err_set(ERR_IO, "stat %s: %s", db_path, strerror(errno));
    CompactResult *o = c->out;
    o->revision = res->revision;
    o->db_bytes = (uint64_t)st.st_size;
    /* ".enc" first when the store has an encryption key (docs/encryption.md) */
    o->created_on = now_unix_s();
    rc =
        snapname_format(SNAP_FULL, 0, res->revision, o->created_on,
                        store_name_suffix(c->store, kind), full->is_final, o->name, sizeof o->name);
    if (rc) return rc;
    /* the new full snapshot continues the set's history (history.h); an untagged set (the Go
     * tool's) gets an untagged snapshot, as the Go tool's compact would write */
    if (full->history[0] && (rc = store_history_tag(c->store, full->history, o->name)))
        return err_wrap(rc, "tagging %s", o->name);
    char what[320];
    snprintf(what, sizeof what, "compact: storing %s", o->name);
    rc = fullsnap_store_db_file(c->store, o->name, kind, db_path, what, &o->stored_bytes);
    if (rc) {
        if (full->history[0]) {
            Snapshot tagged;
            if (store_snapshot_for_name(c->store, o->name, &tagged) == 0) {
                snprintf(tagged.history, sizeof tagged.history, "%s", full->history);
                store_history_untag(c->store, &tagged);
            }
        }
        return err_wrap(rc, "storing %s", o->name);
    }
    return 0;
}

/* The number of deltas of the latest set after its full snapshot's revision, into *newer; the
 * full snapshot's index in *full_i (-1: none). One listing (pinned by the caller). */
static int latest_set(Store *store, Snapshot **list, size_t *n, ptrdiff_t *full_i, size_t *newer) {
    int rc = store_list(store, list, n);
    if (rc) return err_wrap(rc, "listing %s", store_describe(store));
    size_t *idx = calloc(*n ? *n : 1, sizeof *idx);
    if (!idx) return err_set(ERR_NOMEM, "out of memory");
    size_t n_deltas = 0;
    *full_i = -1;
    *newer = 0;
    snapname_set_at(*list, *n, 0, SNAPNAME_ANY_TIME, full_i, idx, &n_deltas);
    for (size_t i = 0; *full_i >= 0 && i < n_deltas; i++)
        if ((*list)[idx[i]].last_revision > (*list)[*full_i].last_revision) (*newer)++;
    free(idx);
    return 0;
}

int compactor_run(const RestoreConfig *cfg, CompactResult *out) {
    memset(out, 0, sizeof *out);
    Store *store = cfg->store;
    store_pin_listing(store); /* the check below and the restore list the store once */
    Snapshot *list = NULL;
    size_t n = 0, newer = 0;
    ptrdiff_t full_i = -1;
    int rc = latest_set(store, &list, &n, &full_i, &newer);
    if (!rc && full_i < 0)
        rc = err_set(ERR_NOT_FOUND, "no full snapshot in %s: nothing to compact",
                     store_describe(store));
    if (!rc && !newer) {
        log_info("compact: the latest set of %s is already one full snapshot (%s at revision "
                 "%lld) without later deltas; nothing to do",
                 store_describe(store), list[full_i].key, (long long)list[full_i].last_revision);
        out->nothing_to_do = 1;
    } else if (!rc) {
        log_info("compact: full snapshot %s and %zu later deltas -> one full snapshot",
                 list[full_i].key, newer);
        CompactCtx ctx = {.store = store, .out = out};
        RestoreConfig rcfg = *cfg;
        rcfg.db_sink = store_db;
        rcfg.db_sink_ctx = &ctx;
        rc = restorer_run(&rcfg, &out->restore);
        if (!rc && !(cfg->stop && *cfg->stop)) rc = read_back(store, out->name, out->db_bytes);
    }
    free(list);
    store_unpin_listing(store);
    return rc;
}
