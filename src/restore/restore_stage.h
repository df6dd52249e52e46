/* restore_stage: what the restore's stages (restore_plan, restore_fetch, restore_build,
 * restore_swap, restore_write; restorer.h runs them in order) share: the stop check and the
 * period of their progress lines. */
#ifndef ETCDBR_RESTORE_STAGE_H
#define ETCDBR_RESTORE_STAGE_H

#include <stdatomic.h>
#include <stdint.h>

/* Milliseconds between progress lines: progress_log_every_ms() (5000, or
 * ETCDBR_PROGRESS_EVERY_MS, 10-600000, for operators who want them more or less often, and for
 * tests). */
int64_t restore_progress_every_ms(void);

/* ERR_CANCELED ("restore stopped by a signal") when *stop is set (stop borrowed, may be NULL:
 * never), else 0. */
int restore_stopped(const atomic_int *stop);

#endif
