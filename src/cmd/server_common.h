/* server_common: the engines' configurations built from the options once, shared by the commands
 * (snapshot, restore, server, initialize, compact, copy, verify, list); the sidecar's own
 * (sidecar/setup.h) by server_setup. Every function logs a clear error and returns an EXIT_*. */
#ifndef ETCDBR_SERVER_COMMON_H
#define ETCDBR_SERVER_COMMON_H

#include "../sidecar/member.h"
#include "../sidecar/setup.h"
#include "opts.h"
#include "../backup/snapshotter.h"
#include "../restore/initializer.h"
#include "../restore/restorer.h"

/* Parts, each logging a clear error and returning an EXIT_* code. */
int setup_etcd_config(const Opts *o, EtcdConfig *out);
int setup_snapshotter_config(const Opts *o, SnapshotterConfig *out, CronSchedule *defrag);
int setup_restore_config(const Opts *o, RestoreConfig *out, char **peer_urls_owned);
/* A target time flag (restore --time, get/history --time, diff --from-time/--to-time): text ""
 * leaves *ns at 0 (no target); else its Unix nanoseconds (delta_parse_time), a time at or before
 * the Unix epoch taken as 1 ns after it (before every backup, never 0 = no target). EXIT_OK, or
 * EXIT_USAGE logged naming --flag. */
int setup_parse_time(const char *flag, const char *text, int64_t *ns);

/* An external program a command will run, checked before the command does anything else (a
 * missing tool found only after a download is an hour lost): bin as execvp finds it
 * (fs_check_executable). EXIT_OK, or EXIT_USAGE with an error line naming `flag` (how the
 * operator gave it, e.g. "--etcdutl-bin") and why. */
int setup_check_program(const char *flag, const char *bin);

/* The etcd binary of a restore test (verify --restore-test, the server's --verify-restore-test):
 * --restore-test-etcd-bin, else $ETCDBR_ETCD_BIN, else etcd from $PATH, as etcd_proc runs it;
 * setup_check_program's result. */
int setup_check_restore_test_etcd(const Opts *o);
/* The member flags of o for member_ctl_new, into *out (borrowing from o and peer_urls, the
 * comma-joined --initial-advertise-peer-urls of setup_restore_config); returns out. */
const MemberFlags *setup_member_flags(const Opts *o, const char *peer_urls, MemberFlags *out);
/* Opens the store. A --store-container (or STORAGE_CONTAINER) without --storage-provider is the
 * Local store. With allow_none, neither given gives *out = NULL (server, initialize). */
int setup_store(const Opts *o, int allow_none, Store **out);
/* setup_store for the store of the flags "<flag_prefix>storage-provider"... (flag_prefix "",
 * "source-" for copy's source: an empty provider, prefix or temp directory is then the
 * destination's, docs/go-tool.md §1.12; "secondary-" for the server's secondary store), whose
 * driver reads environment variables with env_prefix ("", "SOURCE_", "SECONDARY_"; docs/go-tool.md
 * §12). role names it in log lines ("source store"). Only the store of flag_prefix "" gets the
 * encryption keys (setup_keyring): the others are copied raw. */
int setup_store_as(const Opts *o, const char *flag_prefix, const char *env_prefix, const char *role,
                   int allow_none, Store **out);
/* The encryption keys from --encryption-key-file (ETCDBR_ENCRYPTION_KEY_FILE) or else the
 * variable ETCDBR_ENCRYPTION_KEYS (the same text; wiped from the environment once read), for a
 * command's stores; setup_store already gives its Store these (store_set_keyring). *out NULL when
 * neither is set; owned otherwise. Logs a clear error (never a key) and returns EXIT_USAGE for
 * both set or malformed keys, EXIT_FAIL for an unreadable file; warns when the file may be read
 * by group or others. The variable is gone after the first call: a command with two stores
 * (copy) calls setup_store once and gives the second store keyring_copy(store_keyring(first)). */
int setup_keyring(const Opts *o, Keyring **out);

/* Everything the server needs (sidecar/setup.h), from o; EXIT_OK or EXIT_USAGE/EXIT_FAIL.
 * server_teardown frees. */
int server_setup(const Opts *o, ServerSetup *out);

#endif
