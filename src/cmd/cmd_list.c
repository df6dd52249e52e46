/* cmd_list: `etcdbrctl list` (being built; issue 9). */
#include "cmd.h"
#include "../common/log.h"

int cmd_list(const Opts *o) {
    (void)o;
    log_error("etcdbrctl list is not implemented yet");
    return EXIT_FAIL;
}
