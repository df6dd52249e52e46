/* gcs_contract: GCS-specific driver checks beyond the shared store contract, run by
 * tests/integration/test_gcs_contract.sh against fake-gcs-server:
 *   gcs_contract ENDPOINT BUCKET
 * No replace: a second writer of an existing key gets ERR_EXISTS at commit and the first
 * object's bytes stay (the single media upload's ifGenerationMatch=0; fake-gcs-server ignores the
 * condition on compose, so multi-chunk commits are not checked here); a key shaped like a chunk
 * object is refused; a write with chunks open in parallel and then aborted leaves nothing.
 * Exit 0 when all pass, 1 on the first failure (message on stderr). */
#include "common/err.h"
#include "store/store_driver.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int put(StoreDriver *d, const char *key, const char *data, size_t len) {
    StoreDriverWriter *w = NULL;
    int rc = d->vt->open_write(d, key, &w);
    if (rc) return rc;
    rc = io_write(w->vt->io(w), data, len);
    if (rc) {
        w->vt->abort(w);
        return rc;
    }
    return w->vt->commit(w);
}

static int count_cb(void *ctx, const char *key, int64_t size) {
    (void)key;
    (void)size;
    (*(int *)ctx)++;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gcs_contract ENDPOINT BUCKET\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    StoreConfig cfg = {.provider = "GCS",
                       .container = argv[2],
                       .endpoint_override = argv[1],
                       .min_chunk_size = 65536,
                       .max_parallel_chunk_uploads = 3};
    StoreDriver *d = NULL;
    int rc = store_gcs_driver_new(&cfg, &d);
    CHECK(rc == 0, "open: %s", err_msg());
    CHECK(d->vt->features & STORE_FEAT_NO_REPLACE, "GCS must claim STORE_FEAT_NO_REPLACE");
    char base[128], key[256];
    snprintf(base, sizeof base, "gcs-contract-%d-%lld/", (int)getpid(), (long long)time(NULL));

    /* no replace: two writers of one key, the second commit loses */
    snprintf(key, sizeof key, "%sonce", base);
    StoreDriverWriter *late = NULL;
    CHECK(d->vt->open_write(d, key, &late) == 0, "open_write: %s", err_msg());
    CHECK(put(d, key, "first", 5) == 0, "first put: %s", err_msg());
    CHECK(io_write(late->vt->io(late), "second!", 7) == 0, "write: %s", err_msg());
    rc = late->vt->commit(late);
    CHECK(rc == ERR_EXISTS, "second commit: %s (%s), want ERR_EXISTS", err_name(rc), err_msg());
    CHECK(strstr(err_msg(), "already exists"), "message: %s", err_msg());
    int64_t size = -1;
    CHECK(d->vt->stat(d, key, &size) == 0 && size == 5, "the first object was replaced (size %lld)",
          (long long)size);
    printf("ok no replace: %s\n", err_msg());

    /* chunk-shaped keys are refused: they would never be listed */
    snprintf(key, sizeof key, "%sobj/0000000001", base);
    StoreDriverWriter *w = NULL;
    rc = d->vt->open_write(d, key, &w);
    CHECK(rc == ERR_INVALID && !w, "a chunk-shaped key was accepted: %s", err_name(rc));
    printf("ok chunk-shaped key refused\n");

    /* abort with chunks uploading in parallel: nothing stays */
    snprintf(key, sizeof key, "%sbig", base);
    CHECK(d->vt->open_write(d, key, &w) == 0, "open_write big: %s", err_msg());
    char *buf = calloc(1, 65536 * 7 + 3);
    CHECK(buf, "out of memory");
    CHECK(io_write(w->vt->io(w), buf, 65536 * 7 + 3) == 0, "write big: %s", err_msg());
    w->vt->abort(w);
    free(buf);
    snprintf(key, sizeof key, "%sonce", base);
    CHECK(d->vt->remove(d, key) == 0, "remove: %s", err_msg());
    int n = 0;
    CHECK(d->vt->list(d, base, count_cb, &n) == 0, "list: %s", err_msg());
    CHECK(n == 0, "%d objects listed after the abort and the cleanup", n);
    printf("ok abort of a write with 7 chunks\n");
    store_driver_free(d);
    curl_global_cleanup();
    printf("all GCS driver checks passed\n");
    return 0;
}
