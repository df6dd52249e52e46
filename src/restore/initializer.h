/* initializer: what runs before etcd starts (seed-spec §9.2, single member): validate the data
 * dir; when it is missing, corrupt or older than the store, restore the store's latest set.
 * The restore goes to a side directory first and is swapped in only when complete; an invalid
 * data dir is kept aside as "<data-dir>.invalid" (one generation), never deleted blindly. */
#ifndef ETCDBR_INITIALIZER_H
#define ETCDBR_INITIALIZER_H

#include "restorer.h"

typedef struct InitConfig {
    RestoreConfig restore; /* store may be NULL: validation only, no restore */
    int full_mode;         /* 1: full validation (page walk, WAL); 0: sanity */
} InitConfig;

typedef struct InitResult {
    int validation_ok; /* the data dir was valid as it was */
    int restored;      /* a restore happened */
    double validation_seconds, restore_seconds;
    int64_t revision;  /* data dir revision after initialization, 0 if unknown */
    char summary[768]; /* what happened, for logs */
} InitResult;

/* 0 when the data dir is ready for etcd (valid, restored, or absent with nothing to restore);
 * otherwise an ERR_* with the reason (validation refused to continue, or restore failed). */
int initializer_run(const InitConfig *cfg, InitResult *out);

#endif
