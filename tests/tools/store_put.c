/* store_put: one driver call from the command line, for tests that need a single operation and
 * its exact error (fault injection through a fake server, wrong credentials):
 *   store_put --provider Local|S3|ECS|OCS|ABS|GCS|Swift|OSS --container C [--endpoint URL]
 *             [--min-chunk BYTES] [--parallel N] CMD ARGS
 *   CMD: put KEY FILE | get KEY FILE [OFFSET] | stat KEY | rm KEY | list PREFIX
 * Credentials come from the provider's usual environment. put streams FILE in 64 KiB writes and
 * commits; get writes the object (from OFFSET) to FILE; stat prints the size; list prints
 * "key size" lines. Exit 0 on success; 1 with "store_put: <ERR_NAME>: <message>" on stderr;
 * 2 on usage errors. */
#include "common/err.h"
#include "store/store_abs.h"
#include "store/store_driver.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(int rc) {
    fprintf(stderr, "store_put: %s: %s\n", err_name(rc), err_msg());
    return 1;
}

static int print_entry(void *ctx, const char *key, int64_t size) {
    (void)ctx;
    printf("%s %lld\n", key, (long long)size);
    return 0;
}

static int run(StoreDriver *drv, int argc, char **argv) {
    const char *cmd = argv[0];
    int rc;
    if (strcmp(cmd, "put") == 0 && argc == 3) {
        FILE *f = fopen(argv[2], "rb");
        if (!f) return err_set(ERR_IO, "cannot open %s", argv[2]);
        StoreDriverWriter *w = NULL;
        rc = drv->vt->open_write(drv, argv[1], &w);
        static char buf[1 << 16];
        size_t n;
        while (rc == 0 && (n = fread(buf, 1, sizeof buf, f)) > 0)
            rc = io_write(w->vt->io(w), buf, n);
        fclose(f);
        if (rc == 0) rc = io_finish(w->vt->io(w));
        if (rc == 0) return w->vt->commit(w);
        if (w) {
            char msg[2048];
            snprintf(msg, sizeof msg, "%s", err_msg());
            w->vt->abort(w);
            err_set(rc, "%s", msg);
        }
        return rc;
    }
    if (strcmp(cmd, "get") == 0 && (argc == 3 || argc == 4)) {
        IoReader *r = NULL;
        rc = drv->vt->open_read(drv, argv[1], argc == 4 ? strtoull(argv[3], NULL, 10) : 0, &r);
        if (rc) return rc;
        FILE *f = fopen(argv[2], "wb");
        if (!f) {
            io_reader_free(r);
            return err_set(ERR_IO, "cannot create %s", argv[2]);
        }
        static char buf[1 << 16];
        size_t got = 0;
        while ((rc = io_read(r, buf, sizeof buf, &got)) == 0 && got > 0)
            fwrite(buf, 1, got, f);
        io_reader_free(r);
        if (fclose(f) != 0 && rc == 0) rc = err_set(ERR_IO, "write %s", argv[2]);
        return rc;
    }
    if (strcmp(cmd, "stat") == 0 && argc == 2) {
        int64_t size = -1;
        rc = drv->vt->stat(drv, argv[1], &size);
        if (rc == 0) printf("%lld\n", (long long)size);
        return rc;
    }
    if (strcmp(cmd, "rm") == 0 && argc == 2) return drv->vt->remove(drv, argv[1]);
    if (strcmp(cmd, "list") == 0 && argc == 2)
        return drv->vt->list(drv, argv[1], print_entry, NULL);
    return 2;
}

int main(int argc, char **argv) {
    StoreConfig cfg = {0};
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--provider") == 0)
            cfg.provider = argv[i + 1];
        else if (strcmp(argv[i], "--container") == 0)
            cfg.container = argv[i + 1];
        else if (strcmp(argv[i], "--endpoint") == 0)
            cfg.endpoint_override = argv[i + 1];
        else if (strcmp(argv[i], "--min-chunk") == 0)
            cfg.min_chunk_size = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--parallel") == 0)
            cfg.max_parallel_chunk_uploads = atoi(argv[i + 1]);
        else
            break;
    }
    if (!cfg.provider || !cfg.container || i >= argc) {
        fprintf(stderr, "usage: see the comment at the top of store_put.c\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    StoreDriver *drv = NULL;
    int rc = store_driver_open(&cfg, &drv);
    if (rc == 0) rc = run(drv, argc - i, argv + i);
    int code = rc == 2 ? 2 : rc ? fail(rc) : 0;
    if (rc == 2) fprintf(stderr, "usage: see the comment at the top of store_put.c\n");
    store_driver_free(drv);
    curl_global_cleanup();
    return code;
}
