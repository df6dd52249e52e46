/* restore_write: the member dirs of a restore (restorer.h), written around the db the build
 * made, into each member's "<data-dir>.part/data-dir" (restore_swap.h): ours (memberdir.h: WAL,
 * snap file, the membership in the db; docs/member-dir.md), or with --etcdutl-bin etcd's own
 * restore tool run once per member (a fallback). */
#ifndef ETCDBR_RESTORE_WRITE_H
#define ETCDBR_RESTORE_WRITE_H

#include "cluster.h"
#include "memberdir.h"
#include "restorer.h"

#include <stddef.h>

/* For member dirs of ours: cfg->initial_cluster parsed (*ic, owned: initial_cluster_free) and
 * checked for each of ms[0..n) as etcd's tool checks it (memberdir_check), and the db items of
 * its membership (*items, owned: memberdir_db_items_free). Before anything is downloaded.
 * ERR_INVALID with *refused set (a usage error), ERR_NOMEM. */
int restore_write_plan(const RestoreConfig *cfg, const RestoreMember *ms, size_t n,
                       InitialCluster *ic, MemberDbItems *items, int *refused);

/* Writes the member dir of each of ms[0..n) into part_data[i] (parts[i] is its
 * "<data-dir>.part"), everything fsynced. Ours (cfg->etcdutl_bin NULL or ""): member 0's db was
 * built in place at db_path, every other member gets a copy, then each its WAL and snap file
 * (ic: restore_write_plan's). Else cfg->etcdutl_bin ("snapshot restore" of etcdutl, or of
 * etcdctl 3.4) writes each from db_path, its output in tool_log; a tool that fails is ERR_IO
 * with the end of its output. ERR_CANCELED when cfg->stop is set (the tool is stopped with
 * SIGTERM); with several members errors name the member. */
int restore_write_members(const RestoreConfig *cfg, const RestoreMember *ms, size_t n, char **parts,
                          char **part_data, const InitialCluster *ic, const char *db_path,
                          const char *tool_log);

#endif
