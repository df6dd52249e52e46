/* cmd_copy: `etcdbrctl copy` (docs/go-tool.md §1.12, §10.3): copies the backups of a source store
 * (--source-* flags, SOURCE_-prefixed credentials) that the destination store (the STORE flags)
 * lacks, byte for byte, with their backup history (copier.h). Nothing in the destination is
 * replaced or removed. Exit 0 when every selected object is there afterwards, 1 when any copy
 * failed (all failures reported), 2 for bad flags or stores. */
#include "cmd.h"
#include "server_common.h"
#include "../backup/copier.h"
#include "../common/err.h"
#include "../common/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int cmd_copy(const Opts *o) {
    Store *src = NULL, *dst = NULL;
    atomic_int *stop = cmd_install_stop_signals();
    opts_log_effective(o, "copy");
    int code = setup_store_as(o, "", "", "destination store", 0, &dst);
    if (!code) code = setup_store_as(o, "source-", "SOURCE_", "source store", 0, &src);
    if (code) goto done;
    if (store_keyring(dst))
        log_warn("copy: the encryption keys are not used: copy neither encrypts nor decrypts, it "
                 "copies the stored bytes as they are; objects the source holds unencrypted "
                 "arrive unencrypted (docs/copy.md)");
    CopierConfig cc = {
        .source = src,
        .dest = dst,
        .max_backups = (int)opts_values(o)->max_backups_to_copy,
        .max_backup_age_days = (int)opts_values(o)->max_backup_age,
        .workers = (int)opts_values(o)->max_parallel_copy_operations,
        .wait_final = opts_values(o)->wait_for_final_snapshot,
        .wait_final_timeout_ms = opts_values(o)->wait_for_final_snapshot_timeout_ms,
        .progress = 1,
        .stop = stop,
    };
    /* tests wait for a final snapshot without 15 s polls */
    const char *poll = getenv("ETCDBR_COPY_FINAL_POLL_MS");
    if (poll && *poll) cc.wait_final_poll_ms = atoll(poll);
    if (strcmp(store_describe(src), store_describe(dst)) == 0) {
        log_error("copy: the source and the destination are the same store (%s)",
                  store_describe(dst));
        code = EXIT_USAGE;
        goto done;
    }
    CopierResult res;
    int rc = copier_run(&cc, &res);
    if (rc) {
        log_error("copy failed: %s (%zu objects copied, %zu failed, %zu already there)", err_msg(),
                  res.copied, res.failed, res.present);
        code = EXIT_FAIL;
        goto done;
    }
    if (res.backups == 0 && cc.max_backups != 0)
        log_warn("copy: no backup selected in the source %s (no full snapshot there%s): nothing "
                 "was copied; check --source-store-container and --source-store-prefix",
                 store_describe(src), cc.max_backup_age_days >= 0 ? " young enough" : "");
    log_info("copy done: %zu backups, %zu objects copied (%.1f MiB), %zu already there, %.3fs",
             res.backups, res.copied, (double)res.bytes / 1048576.0, res.present, res.seconds);
done:
    store_free(src);
    store_free(dst);
    return code;
}
