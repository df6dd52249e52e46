/* server_verify: the server's scheduled verification of its store (--verify-schedule, and with
 * --verify-restore-test a restore test against this etcd), run only while this member is the
 * backup leader, on its own thread, with the result as metrics:
 * - etcdbr_verify_success: 1 the last verification passed, 0 it failed (NaN: none yet);
 * - etcdbr_verify_last_revision: the latest set's revision the last passing one verified;
 * - etcdbr_verify_last_timestamp_seconds: Unix time the last verification ended (0: none yet);
 * - etcdbr_verify_faults: faults the last verification found;
 * - etcdbr_verify_duration_seconds: seconds the last verification took;
 * - etcdbr_verify_restore_test_match: 1 the last restore test matched etcd's HashKV, 0 it failed
 *   or differed, NaN not run or not compared. */
#ifndef ETCDBR_SERVER_VERIFY_H
#define ETCDBR_SERVER_VERIFY_H

#include "setup.h"
#include "../restore/verifier.h"

typedef struct ServerVerify ServerVerify;

/* The verification flags (strings borrowed until server_verify_stop). */
typedef struct ServerVerifyConfig {
    const char *schedule; /* --verify-schedule (cron; "" = none) */
    int restore_test;     /* --verify-restore-test */
    const char *etcd_bin; /* --restore-test-etcd-bin */
} ServerVerifyConfig;

/* Registers the metrics and, when --verify-schedule is set and a store is configured, starts the
 * scheduler thread (stop signals blocked in it). setup is borrowed and must outlive
 * server_verify_stop. *out NULL when nothing is scheduled. EXIT_OK or EXIT_USAGE (a bad cron
 * schedule, logged) / EXIT_FAIL. */
int server_verify_start(const ServerVerifyConfig *cfg, const ServerSetup *setup,
                        ServerVerify **out);

/* Whether this member leads backups now: verifications run only while it does. Any thread. */
void server_verify_set_leading(ServerVerify *v, int leading);

/* Cancels a running verification (its scratch etcd stopped, scratch dirs removed), stops and
 * joins the thread, frees v. NULL-safe. */
void server_verify_stop(ServerVerify *v);

/* Publishes one verification's result in the metrics (rc: verify_run's). For the thread and
 * tests. */
void server_verify_publish(const VerifyReport *r, int rc);

#endif
