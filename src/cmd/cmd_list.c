/* cmd_list: `etcdbrctl list`: the store's backup sets and the objects in no set
 * (restore/setlist.h), as a table for people (text) or JSON with -o json. */
#include "cmd.h"
#include "server_common.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../restore/setlist.h"

#include <stdio.h>
#include <string.h>

int cmd_list(const Opts *o) {
    int json = strcmp(opts_values(o)->output, "json") == 0;
    Store *store = NULL;
    int code = setup_store(o, 0, &store);
    if (code) return code;
    opts_log_effective(o, "list");
    SetList *l = NULL;
    int rc = setlist_build(store, &l);
    if (!rc) rc = json ? setlist_write_json(l, stdout) : setlist_write_table(l, stdout);
    if (rc) log_error("list: %s", err_msg());
    setlist_free(l);
    store_free(store);
    return rc ? EXIT_FAIL : EXIT_OK;
}
