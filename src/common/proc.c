/* proc: see proc.h. */
#include "proc.h"

#include <stdio.h>
#include <string.h>

int64_t proc_peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            sscanf(line + 6, "%lld", &kib);
            break;
        }
    }
    fclose(f);
    return kib;
}
