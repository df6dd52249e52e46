/* initializer: what runs before etcd starts (docs/go-tool.md §9.2): validate the data dir; when it
 * is missing, corrupt or older than the store, restore the store's latest set. A member of a
 * multi-member cluster whose other members have quorum instead rejoins as a learner (removed
 * from the member list, data dir aside, re-added), and a member new to a running cluster joins
 * as a learner without validation (scale-up); docs/cluster.md.
 * The restore goes to a side directory first and is swapped in only when complete; an invalid
 * data dir is kept aside as "<data-dir>.invalid.<UTC yyyymmddThhmmssZ>", never deleted blindly
 * (only the oldest of our marked copies beyond max_invalid_copies, each removal logged). */
#ifndef ETCDBR_INITIALIZER_H
#define ETCDBR_INITIALIZER_H

#include "restorer.h"

/* What a member of a multi-member cluster is, as seen from the other members (docs/go-tool.md §9.2
 * pre-step). */
typedef enum {
    INIT_MEMBER_UNKNOWN = 0, /* single member, the cluster cannot be reached, or a bootstrap
                                member that never started: the single-member rules apply
                                (validate, restore from the store) */
    INIT_MEMBER_ABSENT,      /* not in the member list of a cluster with quorum: scale-up */
    INIT_MEMBER_LISTED,      /* in the member list of a cluster whose other members have quorum */
    INIT_MEMBER_NO_QUORUM,   /* the member list was read but the others have no quorum: a valid
                                data dir starts as is; an invalid one is an error (neither
                                restored nor started empty: once quorum returns, the leader would
                                replay its raft log onto it under the same member ID) */
} InitMemberState;

/* The cluster operations of a member of a multi-member cluster, implemented above this layer
 * (src/sidecar/member.c). Each call blocks (network, retries) and returns 0 or an ERR_*. */
typedef struct InitMember {
    void *ctx;
    InitMemberState (*probe)(void *ctx);
    int (*remove_self)(void *ctx); /* removes this member if listed; never another one */
    int (*add_learner)(void *ctx); /* adds this member (its peer URLs) as a learner */
} InitMember;

typedef struct InitConfig {
    RestoreConfig restore;    /* store may be NULL: validation only, no restore */
    int full_mode;            /* 1: full validation (page walk, WAL); 0: sanity */
    const InitMember *member; /* borrowed; NULL: single-member rules only */
    /* copies of invalid data dirs kept aside ("<data-dir>.invalid.<UTC time>", marked as
     * etcdbr's): beyond this many the oldest are removed (--max-invalid-copies); 0 = no bound */
    int max_invalid_copies;
} InitConfig;

typedef struct InitResult {
    int validation_ok;     /* the data dir was valid as it was */
    int restored;          /* a restore happened */
    int joined_as_learner; /* added to the cluster as a learner: etcd must start with an empty
                              data dir and --initial-cluster-state=existing */
    double validation_seconds, restore_seconds;
    PhaseTimer restore_phases; /* the restore's (RestoreResult.phases); n == 0 with no restore */
    int64_t revision;          /* data dir revision after initialization, 0 if unknown */
    char summary[768];         /* what happened, for logs */
} InitResult;

/* 0 when the data dir is ready for etcd (valid, restored, or absent with nothing to restore);
 * otherwise an ERR_* with the reason (validation refused to continue, or restore failed). */
int initializer_run(const InitConfig *cfg, InitResult *out);

#endif
