/* manpage: etcdbrctl(1), a roff man page generated from the command list (commands.h) and the
 * flag table (opts_table.h): one subsection per command with its usage and flags (each with
 * the description --help shows), the exit codes and the flags' environment variables.
 * `etcdbrctl __man > etcdbrctl.1`; CMake builds it as build/etcdbrctl.1 and installs it to
 * share/man/man1. */
#ifndef ETCDBR_MANPAGE_H
#define ETCDBR_MANPAGE_H

#include "version.h"

#include <stdio.h>

/* Writes the page to f; its header carries bi's version and the date part of bi's build date.
 * Text is escaped for roff (backslashes, hyphens as \-, a leading dot or quote, non-ASCII as
 * \[uXXXX]). 0, or ERR_IO when writing f failed. */
int man_write(FILE *f, const BuildInfo *bi);

#endif
