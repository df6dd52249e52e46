/* cmd_restore: `etcdbrctl restore`: the latest full snapshot plus every later delta into
 * --data-dir (docs/go-tool.md §1.9), or the state at --revision / --time. Unlike the Go tool, a
 * store without a full snapshot is an error (exit 4), not a silent success. With --all-members,
 * every member of --initial-cluster gets its data dir from the same download of the same set (one
 * restorer_run; docs/runbook-quorum-loss.md). --name must be in --initial-cluster; the peer URLs
 * default to the ones it names there. */
#include "cmd.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/proc.h"
#include "../restore/cluster.h"
#include "../restore/restorer.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NAME_VAR "{name}"

/* tmpl with every NAME_VAR replaced by name; owned, NULL when out of memory */
static char *data_dir_for(const char *tmpl, const char *name) {
    size_t n = 0;
    for (const char *p = strstr(tmpl, NAME_VAR); p; p = strstr(p + 1, NAME_VAR))
        n++;
    char *out = malloc(strlen(tmpl) + n * strlen(name) + 1), *w = out;
    if (!out) return NULL;
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, NAME_VAR, strlen(NAME_VAR)) == 0) {
            w = stpcpy(w, name);
            p += strlen(NAME_VAR);
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return out;
}

/* Fills rc's member fields from --initial-cluster: the members to write and their data dirs
 * (dirs[i] owned by the caller), the token check. EXIT_OK or EXIT_USAGE/EXIT_FAIL (logged). */
static int plan_members(const Opts *o, const InitialCluster *ic, RestoreConfig *rc,
                        RestoreMember *members, char **dirs) {
    if (opts_values(o)->all_members) {
        if (opts_given(o)->name || opts_given(o)->initial_advertise_peer_urls) {
            log_error("--all-members restores every member of --initial-cluster with the name and "
                      "peer URLs it gives there: leave out --name and "
                      "--initial-advertise-peer-urls");
            return EXIT_USAGE;
        }
        if (ic->n > 1 && !strstr(rc->data_dir, NAME_VAR)) {
            log_error("--all-members writes one data dir per member: put " NAME_VAR
                      " in --data-dir (e.g. --data-dir=/var/lib/etcd-restore/" NAME_VAR ".etcd)");
            return EXIT_USAGE;
        }
        for (size_t i = 0; i < ic->n; i++) {
            if (!(dirs[i] = data_dir_for(rc->data_dir, ic->members[i].name))) return EXIT_FAIL;
            members[i] = (RestoreMember){ic->members[i].name, dirs[i], ic->members[i].peer_urls};
        }
        rc->members = members;
        rc->n_members = ic->n;
    } else {
        const ClusterMember *me = initial_cluster_find(ic, rc->name);
        if (!me) {
            log_error("--name %s is not a member of --initial-cluster %s: give this member's name "
                      "as --initial-cluster spells it (or --all-members to restore every member)",
                      rc->name, rc->initial_cluster);
            return EXIT_USAGE;
        }
        if (!opts_given(o)->initial_advertise_peer_urls)
            rc->initial_advertise_peer_urls = me->peer_urls;
        if (!(dirs[0] = data_dir_for(rc->data_dir, rc->name))) return EXIT_FAIL;
        rc->data_dir = dirs[0];
    }
    /* a cluster gets a new token when restored (etcd's disaster-recovery guide); with one member
     * and its old peer URLs the old token is harmless, hence only a warning there */
    rc->check_old_token = ic->n > 1 ? 2 : 1;
    if (ic->n > 1 && !opts_given(o)->initial_cluster_token)
        log_warn("--initial-cluster-token is the default \"%s\": give a restored cluster a token "
                 "of its own (docs/runbook-quorum-loss.md)",
                 rc->initial_cluster_token);
    return EXIT_OK;
}

int cmd_restore(const Opts *o) {
    Store *store = NULL;
    char *peer_urls = NULL, **dirs = NULL;
    RestoreConfig rc;
    InitialCluster ic = {0};
    RestoreMember *members = NULL;
    atomic_int *stop = cmd_install_stop_signals(); /* stop, clean up, say so */
    int code = setup_restore_config(o, &rc, &peer_urls);
    if (code) return code;
    if (initial_cluster_parse(rc.initial_cluster, rc.initial_cluster_token, &ic)) {
        log_error("%s", err_msg());
        code = EXIT_USAGE;
        goto done;
    }
    members = calloc(ic.n, sizeof *members);
    dirs = calloc(ic.n, sizeof *dirs);
    if (!members || !dirs) {
        code = EXIT_FAIL;
        goto done;
    }
    if ((code = plan_members(o, &ic, &rc, members, dirs))) goto done;
    opts_log_effective(o, "restore");
    code = setup_store(o, 0, &store);
    if (code) goto done;
    rc.store = store;
    rc.stop = stop;
    RestoreResult res;
    int r = restorer_run(&rc, &res);
    if (r) {
        if (r == ERR_CANCELED)
            log_error("%s: no data dir was written and our scratch files were removed", err_msg());
        else
            log_error("restore failed: %s", err_msg());
        code = r == ERR_EXISTS      ? EXIT_EXISTS
               : r == ERR_NOT_FOUND ? EXIT_NO_SNAPSHOT
               : res.target_refused ? EXIT_USAGE
                                    : EXIT_FAIL;
        goto done;
    }
    /* what `etcdctl member list` must show once the members run (cluster.h) */
    for (size_t i = 0; i < ic.n; i++) {
        const ClusterMember *m = &ic.members[i];
        const char *dir = NULL;
        for (size_t k = 0; k < rc.n_members; k++)
            if (members[k].name == m->name) dir = members[k].data_dir;
        if (!rc.n_members && strcmp(m->name, rc.name) == 0) dir = rc.data_dir;
        log_info("member %s: ID %llx, peer URLs %s%s%s", m->name, (unsigned long long)m->id,
                 m->peer_urls, dir ? ", data dir " : " (not written by this run)", dir ? dir : "");
    }
    log_info("cluster ID %llx (token \"%s\"): start %s with --initial-cluster-state=new and this "
             "--initial-cluster and --initial-cluster-token",
             (unsigned long long)ic.cluster_id, rc.initial_cluster_token,
             ic.n > 1 ? "every member" : "the member");
    log_info("restore done: %s at revision %lld (full snapshot %s at %lld, %zu deltas, %llu "
             "revisions, %llu events, db built in %.3fs, total %.3fs, peak RSS %lld KiB)",
             rc.n_members ? "every member" : rc.data_dir, (long long)res.revision, res.base_name,
             (long long)res.base_revision, res.deltas_applied,
             (unsigned long long)res.revisions_applied, (unsigned long long)res.events_applied,
             res.seconds_build, res.seconds_total, (long long)proc_peak_rss_kib());
done:
    for (size_t i = 0; dirs && i < ic.n; i++)
        free(dirs[i]);
    free(dirs);
    free(members);
    initial_cluster_free(&ic);
    free(peer_urls);
    store_free(store);
    return code;
}
