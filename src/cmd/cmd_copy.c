/* cmd_copy: `etcdbrctl copy` (being built; issue 9). */
#include "cmd.h"
#include "../common/log.h"

int cmd_copy(const Opts *o) {
    (void)o;
    log_error("etcdbrctl copy is not implemented yet");
    return EXIT_FAIL;
}
