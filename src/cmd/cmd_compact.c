/* cmd_compact: `etcdbrctl compact` (being built; issue 9). */
#include "cmd.h"
#include "../common/log.h"

int cmd_compact(const Opts *o) {
    (void)o;
    log_error("etcdbrctl compact is not implemented yet");
    return EXIT_FAIL;
}
