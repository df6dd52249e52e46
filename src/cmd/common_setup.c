/* common_setup: option handling shared by commands. */
#include "cmd.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "../store/objhttp.h"

#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cmd_setup_logging(const Opts *o) {
    LogLevel lvl;
    if (log_parse_level(opts_values(o)->log_level, &lvl)) {
        fprintf(stderr, "Error: --log-level: %s\n", err_msg());
        return EXIT_USAGE;
    }
    const char *fmt = opts_values(o)->log_format;
    if (strcmp(fmt, "text") && strcmp(fmt, "json")) {
        fprintf(stderr, "Error: --log-format must be text or json, not \"%s\"\n", fmt);
        return EXIT_USAGE;
    }
    log_setup(lvl, strcmp(fmt, "json") == 0);
    return EXIT_OK;
}

/* the process stop flag (timeutil.h): every layer's waits read it */
static void on_stop_signal(int sig) {
    (void)sig;
    atomic_int *stop = process_stop_flag();
    if (atomic_load(stop)) _exit(EXIT_FAIL);
    atomic_store(stop, 1);
}

atomic_int *cmd_install_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    objhttp_set_stop(process_stop_flag()); /* store listings end soon after a signal */
    return process_stop_flag();
}
