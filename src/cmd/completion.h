/* completion: `etcdbrctl completion bash|zsh|fish`, shell completion scripts generated from the
 * command list (commands.h) and the flag table (opts_table.h): the commands, each command's
 * flags (long and short), and the values of flags that take a fixed set (--storage-provider,
 * --compression-policy, -o, ...); other flags that take a value complete file names (bash,
 * zsh) or nothing, and after `run --` nothing is completed (etcd's own flags). */
#ifndef ETCDBR_COMPLETION_H
#define ETCDBR_COMPLETION_H

#include <stdio.h>

/* Writes the script for shell ("bash", "zsh" or "fish") to f. 0, ERR_INVALID for another shell
 * (the message lists the three), or ERR_IO when writing f failed. */
int completion_write(FILE *f, const char *shell);

/* `etcdbrctl completion <shell>`, argv the words after "completion" (argc of them): the script
 * on stdout and EXIT_OK; EXIT_USAGE (message on stderr) without exactly one known shell;
 * EXIT_FAIL when stdout cannot be written. */
int cmd_completion(int argc, char **argv);

#endif
