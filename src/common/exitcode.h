/* exitcode: the process exit codes of every command (docs/exit-codes.md), also returned by the
 * sidecar's set-up functions so a command can exit with them as they are. */
#ifndef ETCDBR_EXITCODE_H
#define ETCDBR_EXITCODE_H

enum {
    EXIT_OK = 0,         /* success */
    EXIT_FAIL = 1,       /* the operation failed */
    EXIT_USAGE = 2,      /* unknown flag, bad value */
    EXIT_EXISTS = 3,     /* refused to touch existing data (a non-empty data dir) */
    EXIT_NO_SNAPSHOT = 4 /* nothing to restore: no full snapshot in the store */
};

#endif
