/* restore_stage: see restore_stage.h. */
#include "restore_stage.h"
#include "../common/err.h"

#include <stdlib.h>

int64_t restore_progress_every_ms(void) {
    static int64_t every;
    if (every) return every;
    const char *e = getenv("ETCDBR_PROGRESS_EVERY_MS");
    long long v = e && *e ? strtoll(e, NULL, 10) : 0;
    every = v >= 10 && v <= 600000 ? v : 5000;
    return every;
}

int restore_stopped(const atomic_int *stop) {
    if (stop && *stop) return err_set(ERR_CANCELED, "restore stopped by a signal");
    return 0;
}
