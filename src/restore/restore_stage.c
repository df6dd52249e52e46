/* restore_stage: see restore_stage.h. */
#include "restore_stage.h"
#include "../common/err.h"
#include "../common/progress.h"

int64_t restore_progress_every_ms(void) {
    return progress_log_every_ms();
}

int restore_stopped(const atomic_int *stop) {
    if (stop && *stop) return err_set(ERR_CANCELED, "restore stopped by a signal");
    return 0;
}
