/* cmd_verify: `etcdbrctl verify`: checks the store's latest set (every set with --all-sets)
 * without etcd, and with --restore-test restores it and compares HashKV with the live cluster
 * (restore/verifier.h). The report goes to stdout (text, or JSON with -o json); exit 0 only when
 * nothing is wrong, 1 for a fault or a failed check, 2 for a usage error. */
#include "cmd.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../restore/verifier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_verify(const Opts *o) {
    Store *store = NULL;
    EtcdConfig live;
    VerifyReport rep;
    memset(&rep, 0, sizeof rep);
    atomic_int *stop = cmd_install_stop_signals();
    int json = strcmp(opts_values(o)->output, "json") == 0;
    int restore_test = opts_values(o)->restore_test;
    int code = EXIT_OK;
    if (restore_test && (code = setup_etcd_config(o, &live))) return code;
    /* the programs a restore test runs, before anything is read from the store */
    if (restore_test && (code = setup_check_restore_test_etcd(o))) return code;
    if (restore_test && *opts_values(o)->etcdutl_bin &&
        (code = setup_check_program("--etcdutl-bin", opts_values(o)->etcdutl_bin)))
        return code;
    opts_log_effective(o, "verify");
    if ((code = setup_store(o, 0, &store))) goto done;
    VerifyConfig cfg = {
        .store = store,
        .temp_dir = opts_values(o)->snapstore_temp_directory,
        .all_sets = opts_values(o)->all_sets,
        .show_progress = 1,
        .restore_test = restore_test,
        .live = restore_test ? &live : NULL,
        .etcd_bin = opts_values(o)->restore_test_etcd_bin,
        .etcdutl_bin = opts_values(o)->etcdutl_bin,
        .max_fetchers = (int)opts_values(o)->max_fetchers,
        .stop = stop,
    };
    int rc = verify_run(&cfg, &rep);
    if (rc) {
        log_error("verify could not run to the end: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    if (json) {
        json_t *j = verify_report_json(&rep);
        char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(j);
        if (!text) {
            log_error("verify: out of memory writing the report");
            code = EXIT_FAIL;
            goto done;
        }
        printf("%s\n", text);
        free(text);
    } else {
        verify_report_print(&rep, stdout);
    }
    fflush(stdout);
    int passed = verify_report_passed(&rep);
    if (passed)
        log_info("verify passed: %s, %zu objects checked, latest revision %lld, restore test %s, "
                 "%.3fs",
                 rep.store, rep.objects_checked, (long long)rep.latest_revision,
                 restore_test_result_name(rep.restore_test), rep.seconds);
    else
        log_error("verify FAILED: %zu faults in %s (%zu objects checked)", rep.n_errors, rep.store,
                  rep.objects_checked);
    code = passed ? EXIT_OK : EXIT_FAIL;
done:
    verify_report_free(&rep);
    store_free(store);
    return code;
}
