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
    if (opts_given(o)->endpoints) return 1;
    size_t nt = 0, n = opts_values(o)->endpoints.n;
    const char *const *eps = opts_values(o)->endpoints.v;
    const OptDef *t = opts_table(&nt);
    for (size_t i = 0; i < nt; i++)
        if (!strcmp(t[i].name, "endpoints")) return n != 1 || strcmp(eps[0], t[i].def) != 0;
    return 1;
}

/* --server-client-ca-file and --server-auth-token-file, checked before anything starts: the
 * client CA needs HTTPS; the token file must hold a token now (*token, owned by the caller). */
static int server_auth_setup(const Opts *o, AuthToken **token) {
    *token = NULL;
    const char *ca = opts_values(o)->server_client_ca_file;
    const char *token_file = opts_values(o)->server_auth_token_file;
    if (*ca && (!*opts_values(o)->server_cert || !*opts_values(o)->server_key)) {
        log_error("--server-client-ca-file %s needs --server-cert and --server-key: client "
                  "certificates exist only over HTTPS",
                  ca);
        return EXIT_USAGE;
    }
    if (*token_file && auth_token_open(token_file, token)) {
        log_error("--server-auth-token-file: %s", err_msg());
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* The programs the sidecar will run, before it starts anything: etcd (run), the etcd of the
 * scheduled restore test (--verify-restore-test with --verify-schedule). */
static int check_programs(const Opts *o, char **etcd_argv) {
    if (etcd_argv && setup_check_program("run: the etcd command after --", etcd_argv[0]))
        return EXIT_USAGE;
    if (opts_values(o)->verify_restore_test && *opts_values(o)->verify_schedule)
        return setup_check_restore_test_etcd(o);
    return EXIT_OK;
}

static int server_main(const Opts *o, char **etcd_argv) {
    AuthToken *token = NULL;
    int code = check_programs(o, etcd_argv);
    if (code != EXIT_OK) return code;
    code = server_auth_setup(o, &token);
    if (code != EXIT_OK) return code;
    ServerSetup setup;
    code = server_setup(o, &setup);
    if (code != EXIT_OK) {
        auth_token_free(token);
        return code;
    }
    if (etcd_argv && !endpoints_given(o) && server_take_etcd_client_urls(&setup, etcd_argv)) {
        log_error("%s", err_msg());
        server_teardown(&setup);
        auth_token_free(token);
        return EXIT_USAGE;
    }
    SidecarOptions so = {
        .reelection_ms = opts_values(o)->reelection_period_ms,
        .max_invalid_copies = (int)opts_values(o)->max_invalid_copies,
        .server_address = opts_values(o)->server_address,
        .server_port = (int)opts_values(o)->server_port,
        .server_cert = opts_values(o)->server_cert,
        .server_key = opts_values(o)->server_key,
        .server_client_ca = opts_values(o)->server_client_ca_file,
        .server_token = token,
        .use_etcd_wrapper = opts_values(o)->use_etcd_wrapper,
        .enable_profiling = opts_values(o)->enable_profiling,
        .verify = {.schedule = opts_values(o)->verify_schedule,
                   .restore_test = opts_values(o)->verify_restore_test,
                   .etcd_bin = opts_values(o)->restore_test_etcd_bin},
        .stop = cmd_install_stop_signals(),
    };
    setup_member_flags(o, setup.peer_urls, &so.member);
    code = sidecar_run(&setup, &so, etcd_argv);
    auth_token_free(token);
    return code;
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
