/* restorer: see restorer.h. The restore is a pipeline of stages, each a module of its own with
 * its own state: the targets (restore_swap: data dirs checked and locked; restore_write: the
 * members' identities) -> the plan (restore_plan: the set, checked) -> the work dirs (the
 * "<data-dir>.part" dirs and the private scratch dir) -> the fetch (restore_fetch: the full
 * snapshot, then a pool of threads for the deltas) -> the db (restore_build) -> the member dirs
 * (restore_write) -> the swap into place (restore_swap). This file runs them in order and
 * holds what they share. */
#include "restorer.h"
#include "restore_build.h"
#include "restore_fetch.h"
#include "restore_plan.h"
#include "restore_stage.h"
#include "restore_swap.h"
#include "restore_write.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/mem.h"
#include "../common/phase.h"
#include "../common/progress.h"
#include "../common/timeutil.h"
#include "../format/bbolt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int restorer_check_bump(int64_t rev, int64_t bump) {
    if (bump <= 0) return 0;
    if (rev < 0 || bump > INT64_MAX - 1 - rev)
        return err_set(ERR_INVALID,
                       "--bump-revision %lld on top of revision %lld overflows int64 (at most "
                       "%lld here): etcd could write no revision after it",
                       (long long)bump, (long long)rev,
                       rev >= 0 ? (long long)(INT64_MAX - 1 - rev) : 0LL);
    return 0;
}

#define SCRATCH_PREFIX "etcdbr-restore."

/* One restore's state: each stage's own, and what the stages hand on. */
typedef struct {
    const RestoreConfig *cfg;
    RestoreResult *out;
    RestoreMember single; /* the member of a one-member restore */
    const RestoreMember *ms;
    size_t nm;
    int own_dirs; /* the member dirs are ours (not etcd's tool's, not a db sink) */
    RestoreSwap swap;
    InitialCluster ic;   /* own_dirs: --initial-cluster (restore_write_plan) */
    MemberDbItems items; /* own_dirs: its membership in the db */
    RestorePlan plan;
    char *scratch, *db_path, *tool_log; /* the private scratch dir; the new db; the tool's log */
    int scratch_lock, made_temp_dir;
    RestoreFetchConfig fetch_cfg;
    RestoreFullDb full;
    RestoreFetch *fetch;
    Progress *progress; /* the download's (stage_fetch) */
    int64_t final_rev;
} RestoreRun;

static void run_init(RestoreRun *r, const RestoreConfig *cfg, RestoreResult *out) {
    memset(r, 0, sizeof *r);
    memset(out, 0, sizeof *out);
    r->cfg = cfg;
    r->out = out;
    r->full.fd = r->scratch_lock = -1;
    /* the member dirs are ours unless --etcdutl-bin asks for etcd's tool (or a sink takes the
     * db) */
    r->own_dirs = !cfg->db_sink && !(cfg->etcdutl_bin && *cfg->etcdutl_bin);
    r->single = (RestoreMember){cfg->name, cfg->data_dir, cfg->initial_advertise_peer_urls};
    r->ms = cfg->n_members ? cfg->members : &r->single;
    r->nm = cfg->db_sink ? 0 : cfg->n_members ? cfg->n_members : 1;
}

/* Stage 1, the targets: the flags agree, each data dir is distinct and empty, its parent locked
 * (restore_swap_lock), and our member dirs' identities planned (restore_write_plan). */
static int stage_targets(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    if (cfg->target_revision && cfg->target_time_ns) {
        r->out->target_refused = 1;
        return err_set(ERR_INVALID, "a target revision and a target time exclude each other");
    }
    if (cfg->mark_compacted && cfg->bump_revision <= 0) {
        r->out->target_refused = 1;
        return err_set(ERR_INVALID, "marking compacted needs a revision bump (as etcdutl)");
    }
    int rc = restore_swap_lock(&r->swap, r->ms, r->nm, &r->out->target_refused);
    if (rc || !r->own_dirs) return rc;
    return restore_write_plan(cfg, r->ms, r->nm, &r->ic, &r->items, &r->out->target_refused);
}

/* Stage 2, the plan (restore_plan_make), and what it says into the result and the log. */
static int stage_plan(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    RestoreTarget t = {cfg->store, cfg->target_revision, cfg->target_time_ns, cfg->bump_revision};
    RestorePlan *p = &r->plan;
    int rc = restore_plan_make(&t, p);
    if (p->target_refused) r->out->target_refused = 1;
    if (rc) return rc;
    snprintf(r->out->base_name, sizeof r->out->base_name, "%s", p->full->snap_name);
    /* one statement of where the restore goes: a --time target's revision is known only once
     * the deltas' events are read, so it is not announced as the set's last revision */
    char to[96];
    if (cfg->target_revision)
        snprintf(to, sizeof to, "to revision %lld", (long long)cfg->target_revision);
    else if (cfg->target_time_ns)
        snprintf(to, sizeof to, "to the last revision written at or before the --time given");
    else
        snprintf(to, sizeof to, "to revision %lld, the newest backed up", (long long)p->store_last);
    log_info("restoring from %s %s: full snapshot %s and %zu delta snapshots",
             store_describe(cfg->store), to, p->full->key, p->n_deltas);
    if (p->n_deltas) {
        const Snapshot *ld = &p->deltas[p->n_deltas - 1];
        r->out->last_delta_revision = ld->last_revision;
        snprintf(r->out->last_delta_suffix, sizeof r->out->last_delta_suffix, "%s",
                 ld->compression_suffix);
    }
    return 0;
}

/* Stage 3, the work dirs: each member's "<data-dir>.part", the private scratch dir
 * (fs_scratch_create: locked for this process), and the db's place (ours: built in place in
 * the first member's member/snap). */
static int stage_prepare(RestoreRun *r) {
    int rc = restore_swap_prepare(&r->swap);
    if (!rc)
        rc = fs_scratch_create(r->cfg->temp_dir, SCRATCH_PREFIX, "restore", &r->scratch,
                               &r->scratch_lock, &r->made_temp_dir);
    if (rc) return rc;
    if (r->own_dirs && (rc = memberdir_make_dirs(r->swap.part_data[0]))) return rc;
    r->db_path =
        r->own_dirs ? memberdir_db_path(r->swap.part_data[0]) : fs_join(r->scratch, "restored.db");
    r->tool_log = fs_join(r->scratch, "snapshot-restore.log");
    if (!r->db_path || !r->tool_log) return err_set(ERR_NOMEM, "out of memory");
    return 0;
}

/* The download's progress (progress.h): bytes read from the store of the set's total as the
 * listing gives it (stored bytes: compressed, encrypted), or an unknown total when the listing
 * lacks an object's size. */
static Progress *download_progress(const RestorePlan *p) {
    uint64_t total = p->full->size >= 0 ? (uint64_t)p->full->size : 0;
    size_t unknown = p->full->size < 0;
    for (size_t i = 0; i < p->n_deltas; i++) {
        if (p->deltas[i].size < 0)
            unknown++;
        else
            total += (uint64_t)p->deltas[i].size;
    }
    char what[128];
    snprintf(what, sizeof what, "downloading the backup set (full snapshot and %zu deltas)",
             p->n_deltas);
    if (unknown)
        log_info("the store listed no size for %zu of the set's %zu objects: the download's "
                 "total is unknown",
                 unknown, p->n_deltas + 1);
    ProgressOptions o = {.what = what,
                         .total = total,
                         .total_kind = unknown ? PROGRESS_TOTAL_UNKNOWN : PROGRESS_TOTAL_EXACT,
                         .counts_bytes = 1};
    Progress *pr = progress_start_opts(&o);
    progress_set_items(pr, 0, p->n_deltas + 1);
    return pr;
}

/* Stage 4, the fetch: the full snapshot made local and checked, then up to --max-fetchers
 * threads fetching the deltas ahead of the build; one progress for the whole download. */
static int stage_fetch(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    r->progress = download_progress(&r->plan);
    r->fetch_cfg = (RestoreFetchConfig){.store = cfg->store,
                                        .scratch = r->scratch,
                                        .max_fetchers = cfg->max_fetchers,
                                        .skip_hash_check = cfg->skip_hash_check,
                                        .stop = cfg->stop,
                                        .progress = r->progress,
                                        .n_objects = r->plan.n_deltas + 1};
    int rc = restore_fetch_full(&r->fetch_cfg, r->plan.full, cfg->target_revision, &r->full);
    r->out->base_revision = r->full.revision; /* also when it does not match the name */
    if (rc) return rc;
    return restore_fetch_start(&r->fetch_cfg, r->plan.deltas, r->plan.n_deltas, &r->fetch);
}

/* Stage 5, the db: the old token refused or warned about (restore_plan_check_token, on the
 * full snapshot's db), then the db built (restore_build_db); the full snapshot's local copy
 * is let go either way. */
static int stage_build(RestoreRun *r) {
    const RestoreConfig *cfg = r->cfg;
    int rc = 0;
    if (cfg->check_old_token) {
        BboltDb *src = NULL;
        rc = bbolt_open(r->full.path, r->full.db_len, &src);
        if (!rc)
            rc = restore_plan_check_token(src, r->ms, r->nm, cfg->initial_cluster_token,
                                          cfg->check_old_token, &r->out->target_refused);
        bbolt_close(src);
        if (rc) return rc;
    }
    RestoreBuildInput in = {.src_path = r->full.path,
                            .src_len = r->full.db_len,
                            .full = r->plan.full,
                            .base_revision = r->full.revision,
                            .deltas = r->plan.deltas,
                            .n_deltas = r->plan.n_deltas,
                            .fetch = r->fetch,
                            .last_revision =
                                cfg->target_revision ? cfg->target_revision : r->plan.store_last,
                            .db_path = r->db_path,
                            .membership = r->own_dirs ? &r->items : NULL};
    rc = restore_build_db(cfg, &in, r->out, &r->final_rev);
    restore_full_db_release(&r->full);
    return rc;
}

/* Stage 6, the member dirs around the db (restore_write_members), then the swap: every
 * "<data-dir>.part" renamed into place once all are written (restore_swap_commit). */
static int stage_member_dirs_and_swap(RestoreRun *r, int64_t *lap) {
    int rc = restore_write_members(r->cfg, r->ms, r->nm, r->swap.parts, r->swap.part_data, &r->ic,
                                   r->db_path, r->tool_log);
    if (!rc && !r->own_dirs) unlink(r->db_path);
    phase_lap(&r->out->phases, "member_dirs", lap);
    if (rc) return rc;
    rc = restore_swap_commit(&r->swap);
    phase_lap(&r->out->phases, "swap", lap);
    if (rc) return rc;
    r->out->revision = r->final_rev;
    return 0;
}

/* Stops the fetchers and frees what r holds; on failure (rc) removes every "<data-dir>.part"
 * this restore made and says which data dirs were already committed (restore_swap_abort). */
static void run_finish(RestoreRun *r, int rc) {
    restore_fetch_stop(r->fetch);
    progress_finish(r->progress); /* after the fetchers, who feed it */
    restore_swap_abort(&r->swap, rc);
    if (r->scratch && (rc == 0 || !getenv("ETCDBR_KEEP_TEMP")) &&
        fs_remove_marked_tree(r->scratch, FS_SCRATCH_MARKER) == 0)
        fs_scratch_temp_dir_release(r->cfg->temp_dir, r->made_temp_dir);
    if (r->scratch_lock >= 0) close(r->scratch_lock);
    restore_swap_free(&r->swap);
    if (r->full.fd >= 0) close(r->full.fd);
    FREE_ALL(r->scratch, r->db_path, r->tool_log);
    initial_cluster_free(&r->ic);
    memberdir_db_items_free(&r->items);
    restore_plan_free(&r->plan);
}

/* Runs stage (one of the above) unless rc already failed, adding its time to the phase name. */
static int timed_stage(RestoreRun *r, int rc, int (*stage)(RestoreRun *), const char *name,
                       int64_t *lap) {
    if (rc) return rc;
    rc = stage(r);
    phase_lap(&r->out->phases, name, lap);
    return rc;
}

int restorer_run(const RestoreConfig *cfg, RestoreResult *out) {
    int64_t t0 = now_mono_ms();
    RestoreRun r;
    run_init(&r, cfg, out);
    phase_timer_begin(&out->phases);
    int64_t lap = out->phases.start_ns;
    int rc = timed_stage(&r, 0, stage_targets, "plan", &lap);
    rc = timed_stage(&r, rc, stage_plan, "plan", &lap);
    rc = timed_stage(&r, rc, stage_prepare, "prepare", &lap);
    rc = timed_stage(&r, rc, stage_fetch, "fetch", &lap);
    rc = timed_stage(&r, rc, stage_build, "build", &lap);
    if (!rc && cfg->db_sink) { /* compact: the db goes to the sink, no member dirs */
        out->revision = r.final_rev;
        if ((rc = restore_stopped(cfg->stop)) == 0)
            rc = cfg->db_sink(cfg->db_sink_ctx, r.db_path, r.plan.full, out);
        phase_lap(&out->phases, "sink", &lap);
    } else if (!rc) {
        rc = stage_member_dirs_and_swap(&r, &lap);
    }
    run_finish(&r, rc);
    phase_lap(&out->phases, "cleanup", &lap);
    out->seconds_total = (double)(now_mono_ms() - t0) / 1000.0;
    phase_timer_end(&out->phases, rc == 0, cfg->n_members ? NULL : cfg->data_dir);
    return rc;
}
