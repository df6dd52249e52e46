/* cmd_verify: `etcdbrctl verify` (being built; issue 9). */
#include "cmd.h"
#include "../common/log.h"

int cmd_verify(const Opts *o) {
    (void)o;
    log_error("etcdbrctl verify is not implemented yet");
    return EXIT_FAIL;
}
