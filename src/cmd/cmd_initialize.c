/* cmd_initialize: `etcdbrctl initialize`: validate the data dir once (--validation-mode full or
 * sanity) and restore it from the store when it is missing, corrupt or older than the store
 * (docs/go-tool.md §1.11, §9). Unlike the Go tool it needs no POD_NAME/POD_NAMESPACE. */
#include "cmd.h"
#include "../sidecar/member.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../restore/initializer.h"
#include "../restore/validator.h"

#include <stdlib.h>
#include <string.h>

int cmd_initialize(const Opts *o) {
    const char *mode = opts_values(o)->validation_mode;
    if (strcmp(mode, "full") && strcmp(mode, "sanity")) {
        log_error("--validation-mode must be full or sanity, not \"%s\"", mode);
        return EXIT_USAGE;
    }
    InitConfig ic;
    memset(&ic, 0, sizeof ic);
    char *peer_urls = NULL;
    Store *store = NULL;
    MemberCtl *member = NULL;
    int code = setup_restore_config(o, &ic.restore, &peer_urls);
    if (code) return code;
    opts_log_effective(o, "initialize");
    code = setup_store(o, 1, &store);
    if (code) goto done;
    ic.restore.store = store;
    ic.restore.stop = cmd_install_stop_signals(); /* a restore stops cleanly on SIGTERM/SIGINT */
    ic.full_mode = strcmp(mode, "full") == 0;
    ic.max_invalid_copies = (int)opts_values(o)->max_invalid_copies;
    EtcdConfig ec;
    MemberFlags mf;
    if ((code = setup_etcd_config(o, &ec)) ||
        (code = member_ctl_new(setup_member_flags(o, peer_urls, &mf), &ec, NULL, 0, ic.restore.stop,
                               &member)))
        goto done;
    ic.member = member_ctl_init_hooks(member);
    /* a running etcd holds its data dir's locks: the validator would wait 120 s for them */
    if (data_dir_in_use(ic.restore.data_dir)) {
        log_error("initialization refused: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    InitResult res;
    if (initializer_run(&ic, &res)) {
        log_error("initialization failed: %s", err_msg());
        code = EXIT_FAIL;
        goto done;
    }
    log_info("initialization done: %s", res.summary);
done:
    member_ctl_free(member);
    store_free(store);
    free(peer_urls);
    return code;
}
