/* cmd_server: `etcdbrctl server` and `etcdbrctl run`: the sidecar (sidecar/sidecar.h) with the
 * configuration its flags give (docs/go-tool.md §1.7); run also starts etcd as its child. */
#include "cmd.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../sidecar/sidecar.h"

#include <string.h>

/* --endpoints given on the command line, by environment or by --config-file (a value other than
 * the table's default). */
static int endpoints_given(const Opts *o) {
    if (opt_is_set(o, "endpoints")) return 1;
    size_t n = 0, nt = 0;
    const char *const *eps = opt_list(o, "endpoints", &n);
    const OptDef *t = opts_table(&nt);
    for (size_t i = 0; i < nt; i++)
        if (!strcmp(t[i].name, "endpoints")) return n != 1 || strcmp(eps[0], t[i].def) != 0;
    return 1;
}

static int server_main(const Opts *o, char **etcd_argv) {
    ServerSetup setup;
    int code = server_setup(o, &setup);
    if (code != EXIT_OK) return code;
    if (etcd_argv && !endpoints_given(o) && server_take_etcd_client_urls(&setup, etcd_argv)) {
        log_error("%s", err_msg());
        server_teardown(&setup);
        return EXIT_USAGE;
    }
    SidecarOptions so = {
        .reelection_ms = opt_duration_ms(o, "reelection-period"),
        .max_invalid_copies = (int)opt_int(o, "max-invalid-copies"),
        .server_address = opt_str(o, "server-address"),
        .server_port = (int)opt_int(o, "server-port"),
        .server_cert = opt_str(o, "server-cert"),
        .server_key = opt_str(o, "server-key"),
        .use_etcd_wrapper = opt_bool(o, "use-etcd-wrapper"),
        .verify = {.schedule = opt_str(o, "verify-schedule"),
                   .restore_test = opt_bool(o, "verify-restore-test"),
                   .etcd_bin = opt_str(o, "restore-test-etcd-bin")},
        .stop = cmd_install_stop_signals(),
    };
    setup_member_flags(o, setup.peer_urls, &so.member);
    return sidecar_run(&setup, &so, etcd_argv);
}

int cmd_server(const Opts *o) {
    return server_main(o, NULL);
}

int cmd_run(const Opts *o, char **etcd_argv) {
    if (!etcd_argv || !etcd_argv[0]) {
        log_error("run: give the etcd command after --, e.g. etcdbrctl run [flags] -- etcd "
                  "--data-dir=...");
        return EXIT_USAGE;
    }
    return server_main(o, etcd_argv);
}
