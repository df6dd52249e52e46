/* cmd_compact: `etcdbrctl compact` (docs/go-tool.md §1.10, §10.2): the store's latest set (full
 * snapshot plus deltas) becomes one new full snapshot `Full-00000000-<R>-<now>`, built with the
 * restore engine and no etcd, then read back and checked before success is reported. The old
 * objects are left to garbage collection, as in the Go tool. Unlike the Go tool the new snapshot
 * keeps every revision of the set (no mvcc compaction at R): a restore from it equals a restore of
 * the set, revisions, versions, leases and HashKV included (docs/compact.md). */
#include "cmd.h"
#include "../backup/fullsnap.h"
#include "../codec/compress.h"
#include "../codec/sha256.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/progress.h"
#include "../common/timeutil.h"
#include "../restore/restorer.h"
#include "../store/snapobj.h"
#include "server_common.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    Store *store;
    char name[256];
    uint64_t stored_bytes, db_bytes;
    int64_t revision;
    int64_t created_on; /* Unix s in the new snapshot's name */
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
    c->revision = res->revision;
    c->db_bytes = (uint64_t)st.st_size;
    /* ".enc" first when the store has an encryption key (docs/encryption.md) */
    c->created_on = now_unix_s();
    rc =
        snapname_format(SNAP_FULL, 0, res->revision, c->created_on,
                        store_name_suffix(c->store, kind), full->is_final, c->name, sizeof c->name);
    if (rc) return rc;
    /* the new full snapshot continues the set's history (history.h); an untagged set (the Go
     * tool's) gets an untagged snapshot, as the Go tool's compact would write */
    if (full->history[0] && (rc = store_history_tag(c->store, full->history, c->name)))
        return err_wrap(rc, "tagging %s", c->name);
    char what[320];
    snprintf(what, sizeof what, "compact: storing %s", c->name);
    rc = fullsnap_store_db_file(c->store, c->name, kind, db_path, what, &c->stored_bytes);
    if (rc) {
        if (full->history[0]) {
            Snapshot tagged;
            if (store_snapshot_for_name(c->store, c->name, &tagged) == 0) {
                snprintf(tagged.history, sizeof tagged.history, "%s", full->history);
                store_history_untag(c->store, &tagged);
            }
        }
        return err_wrap(rc, "storing %s", c->name);
    }
    return 0;
}

int cmd_compact(const Opts *o) {
    Store *store = NULL;
    atomic_int *stop = cmd_install_stop_signals();
    opts_log_effective(o, "compact");
    int code = setup_store(o, 0, &store);
    if (code) return code;
    store_pin_listing(store); /* the check below and the restore list the store once */
    Snapshot *list = NULL;
    size_t n = 0;
    int rc = store_list(store, &list, &n);
    if (rc) {
        log_error("compact: listing %s: %s", store_describe(store), err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    size_t *idx = calloc(n ? n : 1, sizeof *idx);
    ptrdiff_t full_i = -1;
    size_t n_deltas = 0;
    if (idx) snapname_set_at(list, n, 0, 0, &full_i, idx, &n_deltas);
    size_t newer = 0;
    for (size_t i = 0; idx && full_i >= 0 && i < n_deltas; i++)
        if (list[idx[i]].last_revision > list[full_i].last_revision) newer++;
    free(idx);
    if (full_i < 0) {
        log_error("compact: no full snapshot in %s: nothing to compact (exit %d)",
                  store_describe(store), EXIT_NO_SNAPSHOT);
        code = EXIT_NO_SNAPSHOT;
        goto done;
    }
    if (!newer) {
        log_info("compact: the latest set of %s is already one full snapshot (%s at revision "
                 "%lld) without later deltas; nothing to do",
                 store_describe(store), list[full_i].key, (long long)list[full_i].last_revision);
        goto done;
    }
    log_info("compact: full snapshot %s and %zu later deltas -> one full snapshot",
             list[full_i].key, newer);

    CompactCtx ctx = {.store = store};
    RestoreConfig rcfg = {
        .store = store,
        .temp_dir = opt_str(o, "restoration-temp-snapshots-dir"),
        .skip_hash_check = opt_bool(o, "skip-hash-check"),
        .max_fetchers = (int)opt_int(o, "max-fetchers"),
        .new_lease_ttl = opt_duration_ms(o, "new-lease-ttl") / 1000,
        .quota_bytes = opt_int(o, "embedded-etcd-quota-bytes"),
        .stop = stop,
        .db_sink = store_db,
        .db_sink_ctx = &ctx,
    };
    if (rcfg.new_lease_ttl < 1) rcfg.new_lease_ttl = 1;
    RestoreResult res;
    rc = restorer_run(&rcfg, &res);
    if (!rc && !*stop) rc = read_back(store, ctx.name, ctx.db_bytes);
    if (rc) {
        log_error("compact failed: %s; the store's earlier snapshots are untouched", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    log_info("compact done: %s at revision %lld (full snapshot %s at %lld + %zu deltas, %llu "
             "revisions; %.1f MiB db, %.1f MiB stored, read back and checked; %.3fs); the old "
             "objects are left to garbage collection",
             ctx.name, (long long)ctx.revision, res.base_name, (long long)res.base_revision,
             res.deltas_applied, (unsigned long long)res.revisions_applied,
             (double)ctx.db_bytes / 1048576.0, (double)ctx.stored_bytes / 1048576.0,
             res.seconds_total);
    /* as the Go tool: a failed Lease update is a warning, the compaction stands */
    if (opt_bool(o, "enable-snapshot-lease-renewal"))
        lease_update_full_now(o, ctx.revision, ctx.created_on);
    int64_t wait_ms = opt_duration_ms(o, "metrics-scrape-wait-duration");
    if (wait_ms > 0) {
        log_info("compact: waiting %lld ms (--metrics-scrape-wait-duration)", (long long)wait_ms);
        int64_t end = now_mono_ms() + wait_ms;
        while (!*stop && now_mono_ms() < end)
            usleep(100000);
    }
done:
    free(list);
    store_unpin_listing(store);
    store_free(store);
    return code;
}
