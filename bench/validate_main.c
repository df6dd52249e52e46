/* validate_main: times validate_data_dir on a data dir (benchmark helper; not a test, not
 * shipped; bench/validate_1gib.sh builds it against build/libetcdbr_core.a).
 *   validate_main DATA_DIR full|sanity [STORE_REVISION]
 * With STORE_REVISION, a temporary Local store holding one well-named (fake) full backup at that
 * revision is compared against, so the revision check and, when the backup is ahead of the db,
 * the WAL scan run too. Prints one line: mode, status, seconds, message. */
#include "common/err.h"
#include "common/fsutil.h"
#include "restore/validator.h"
#include "store/snapname.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    ValidationMode mode;
    if (argc < 3 || validation_mode_parse(argv[2], &mode) != 0) {
        fprintf(stderr, "usage: %s DATA_DIR full|sanity [STORE_REVISION]\n", argv[0]);
        return 2;
    }
    Store *store = NULL;
    char root[] = "/tmp/validate_main.XXXXXX";
    if (argc > 3) {
        if (!mkdtemp(root)) return 1;
        StoreConfig cfg = {
            .provider = "Local", .container = root, .prefix = "bench", .temp_dir = "/tmp"};
        char name[128];
        StoreWriter *w = NULL;
        if (store_open(&cfg, &store) != 0 ||
            snapname_format(SNAP_FULL, 0, atoll(argv[3]), 1800000000, "", 0, name, sizeof name) ||
            store_open_write(store, name, &w) != 0 || io_write(store_writer_io(w), "x", 1) != 0 ||
            io_finish(store_writer_io(w)) != 0 || store_writer_commit(w) != 0) {
            fprintf(stderr, "store: %s\n", err_msg());
            return 1;
        }
    }
    ValidationResult r;
    validate_data_dir(argv[1], mode, store, &r);
    printf("%-6s %-28s %7.3f s  %s\n", argv[2], data_dir_status_name(r.status), r.seconds,
           r.message);
    store_free(store);
    if (argc > 3) fs_remove_tree(root);
    return r.status == DATA_DIR_VALID ? 0 : 3;
}
