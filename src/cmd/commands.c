/* commands: the command list; see commands.h. */
#include "commands.h"
#include "cmd.h"

#include <string.h>

static const CmdInfo commands[] = {
    {"snapshot", CMD_SNAPSHOT, cmd_snapshot, "[flags]",
     "take full snapshots on a schedule and delta snapshots of a running etcd"},
    {"restore", CMD_RESTORE, cmd_restore, "[flags]",
     "restore a data dir from the latest full snapshot and its deltas"},
    {"server", CMD_SERVER, cmd_server, "[flags]",
     "run beside an etcd member: HTTP API, data-dir initialization, snapshots while leader"},
    {"initialize", CMD_INITIALIZE, cmd_initialize, "[flags]",
     "validate the data dir and restore it from the store when needed"},
    {"compact", CMD_COMPACT, cmd_compact, "[flags]",
     "replace the latest full snapshot and its deltas by one new full snapshot, without etcd"},
    {"copy", CMD_COPY, cmd_copy, "[flags]",
     "copy backups from a source store (--source-*) into the store"},
    {"verify", CMD_VERIFY, cmd_verify, "[flags]",
     "check the latest set's objects (every set with --all-sets), hashes and contiguity without "
     "etcd; --restore-test also restores it and compares HashKV with the live cluster"},
    {"list", CMD_LIST, cmd_list, "[flags]", "list the store's backup sets (-o json for JSON)"},
    {"get", CMD_GET, cmd_get, "KEY [RANGE_END] [flags]",
     "print keys of the backups at a revision or time, without restoring (as etcdctl get)"},
    {"diff", CMD_DIFF, cmd_diff, "[KEY [RANGE_END]] [flags]",
     "list the keys created, changed or deleted between two revisions or times of the backups"},
    {"history", CMD_HISTORY, cmd_history, "KEY [flags]",
     "list every put and delete of one key that the backups hold"},
    {"run", CMD_SERVER, NULL, "[flags] -- etcd [etcd flags]",
     "supervise etcd: initialize, start `-- etcd ...` as a child, back it up, restart it"},
    {"help", 0, NULL, "[command]", "help about any command"},
    {"completion", 0, NULL, "bash|zsh|fish",
     "print the shell completion script of etcdbrctl for bash, zsh or fish"},
    {"version", 0, NULL, "",
     "print the version, git commit, build date, compiler and linked libraries"},
};

const CmdInfo *cmd_infos(size_t *n) {
    *n = sizeof commands / sizeof commands[0];
    return commands;
}

const CmdInfo *cmd_info_find(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}
