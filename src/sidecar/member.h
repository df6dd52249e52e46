/* member: this member's place in a multi-member etcd cluster (docs/go-tool.md §9.2 pre-step,
 * §10.4): the initializer's cluster operations (is this member listed, remove it, add it as a
 * learner) and the promotion of a learner to a voting member. Only this member is ever removed, and
 * only while the other voting members have quorum. Where the Go tool also consults the member's
 * Kubernetes Lease ("was member in cluster?"), etcdbr uses etcd's member list only.
 * docs/cluster.md describes the behaviour for operators. Threads: the initializer hooks run on
 * one thread at a time (the server's initialization thread, or run mode's main thread), and
 * member_ctl_tick on the main thread; the two touch disjoint state (the configuration both read
 * is fixed at member_ctl_new). */
#ifndef ETCDBR_MEMBER_H
#define ETCDBR_MEMBER_H

#include "../etcd/etcd_client.h"
#include "../restore/initializer.h"

#include <stdatomic.h>

typedef struct MemberCtl MemberCtl;

/* This member's flags as given (strings borrowed for the call only). A value whose *_set is 0 is
 * the flag's default: etcd's command line and the etcd config file come before it. */
typedef struct MemberFlags {
    const char *name; /* --name */
    int name_set;
    const char *peer_urls; /* --initial-advertise-peer-urls, comma-joined */
    int peer_urls_set;
    const char *initial_cluster; /* --initial-cluster */
    int initial_cluster_set;
    const char *const *service_endpoints; /* --service-endpoints */
    size_t n_service_endpoints;
} MemberFlags;

/* Resolves this member and the way to reach the cluster, each from the first source that gives
 * it: name and peer URLs from --name / --initial-advertise-peer-urls when given, else from
 * etcd's command line (run mode, etcd_argv non-NULL), else the etcd config file (ETCD_CONF, else
 * /var/etcd/config/etcd.conf.yaml, with POD_NAME), else the flags' defaults; the initial cluster
 * likewise from --initial-cluster; the cluster's client URLs from --service-endpoints, else the
 * etcd config file's advertise-client-urls (every member's), else --endpoints after the first.
 * etcd (borrowed, copied) gives TLS and credentials; its endpoints[0] is this member's own.
 * period_ms is the promotion retry period (--reelection-period); stop (may be NULL) ends
 * waits between retries. *out owned (member_ctl_free). EXIT_OK, or EXIT_FAIL (logged). */
int member_ctl_new(const MemberFlags *f, const EtcdConfig *etcd, char *const *etcd_argv,
                   int64_t period_ms, atomic_int *stop, MemberCtl **out);
void member_ctl_free(MemberCtl *m);

/* The hooks for InitConfig.member (borrowed from m); NULL when m is NULL. */
const InitMember *member_ctl_init_hooks(MemberCtl *m);

/* Run mode: the etcd command line for the next start. After this member joined as a learner:
 * argv with "--initial-cluster-state=existing" and "--initial-cluster=<the current members>"
 * appended (etcd takes the last value of a repeated flag), owned by m until the next call;
 * otherwise argv itself. Call once per start. */
char *const *member_ctl_etcd_argv(MemberCtl *m, char *const *argv);

/* Promotion, called after each Status of this member's etcd (status_rc 0: st is its answer):
 * while this member is a learner, sets etcdbr_is_learner 1 and, at most once per period, sends
 * MemberPromote to the other members' endpoints (a learner does not serve it); "not in sync
 * yet" is retried quietly. Logs the outcome; observes etcdbr_member_promote_duration_seconds.
 * "promoted member <name> (<id>)" is logged, and etcdbr_is_learner set to 0, only once this
 * member's own Status says it is no longer a learner (it then serves writes): MemberPromote
 * returns when the leader applied the change, the member applies it later. That is polled for
 * up to 10 s (ends on stop; logs what it waits for after 5 s), then at each later call.
 * NULL m: nothing. */
void member_ctl_tick(MemberCtl *m, int status_rc, const EtcdStatus *st);

#endif
