/* commands: the one list of etcdbrctl's commands (name, the flag table's command bit, summary,
 * arguments), read by the dispatcher (main.c), the help texts, the shell completions and the
 * man page, so a command added here appears in all of them. */
#ifndef ETCDBR_COMMANDS_H
#define ETCDBR_COMMANDS_H

#include "opts.h"

#include <stddef.h>

typedef struct CmdInfo {
    const char *name;
    /* the command's bit in the flag table (opts.h CMD_*): its flags are the rows carrying it;
     * 0 for the commands about etcdbrctl itself (help, completion, version), which take none */
    unsigned bit;
    int (*run)(const Opts *o); /* NULL for run (cmd_run takes etcd's argv) and bit 0 */
    const char *args;          /* what follows the name in "Usage:", e.g. "[flags]" */
    const char *summary;       /* one sentence, no final period */
} CmdInfo;

/* Every command, in the order help lists them (static storage); *n set. */
const CmdInfo *cmd_infos(size_t *n);

/* The command named name, or NULL (static storage). */
const CmdInfo *cmd_info_find(const char *name);

#endif
