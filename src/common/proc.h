/* proc: facts about this process for end-of-job log lines. */
#ifndef ETCDBR_PROC_H
#define ETCDBR_PROC_H

#include <stdint.h>

/* Peak resident set size of this process in KiB (VmHWM from /proc/self/status), or -1.
 * Child processes (a temporary etcd) are not included. */
int64_t proc_peak_rss_kib(void);

#endif
