/* cmd: one function per command over the core library; main.c only dispatches.
 * Exit codes (docs/exit-codes.md): 0 success, 1 the operation failed, 2 usage error (unknown
 * flag, bad value), 3 refused to touch existing data (non-empty data dir), 4 nothing to restore
 * (no full snapshot in the store). */
#ifndef ETCDBR_CMD_H
#define ETCDBR_CMD_H

#include "opts.h"
#include "../common/exitcode.h"

#include <stdatomic.h>
#include <signal.h>

/* Each command runs to completion on the calling thread with the parsed options (borrowed) and
 * returns an EXIT_* code; errors are logged, not returned. snapshot, server and run return only
 * after SIGTERM/SIGINT (cmd_install_stop_signals) or a failure. */
int cmd_snapshot(const Opts *o);
int cmd_restore(const Opts *o);
int cmd_server(const Opts *o);
int cmd_initialize(const Opts *o);
int cmd_compact(const Opts *o);
int cmd_copy(const Opts *o);
int cmd_verify(const Opts *o);
int cmd_list(const Opts *o);
int cmd_get(const Opts *o); /* cmd_inspect.c: get, diff, history (docs/inspect.md) */
int cmd_diff(const Opts *o);
int cmd_history(const Opts *o);
/* etcd_argv: the etcd command line after "--" (NULL-terminated, borrowed). */
int cmd_run(const Opts *o, char **etcd_argv);

/* Shared setup: logging from --log-level/--log-format. EXIT_OK or EXIT_USAGE. */
int cmd_setup_logging(const Opts *o);

/* SIGTERM/SIGINT set the returned flag (a clean stop: last delta, child etcd stopped); a second
 * one exits at once with 1, as the Go tool does. SIGPIPE is ignored. */
atomic_int *cmd_install_stop_signals(void);

#endif
