/* gcs_contract: GCS-specific driver checks beyond the shared store contract, run by
 * tests/integration/test_gcs_contract.sh against fake-gcs-server:
 *   gcs_contract ENDPOINT BUCKET [--rotate WRONG_KEY_FILE]
 * No replace: a second writer of an existing key gets ERR_EXISTS at commit and the first
 * object's bytes stay (the single media upload's ifGenerationMatch=0; fake-gcs-server ignores the
 * condition on compose, so multi-chunk commits are not checked here); a key shaped like a chunk
 * object is refused; a write with chunks open in parallel and then aborted leaves nothing.
 * With --rotate (test_gcs_auth_fake.sh, authentication on): the key file rotated under a live
 * driver is re-read (see rotate()).
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

/* Replaces the file at path with data (a new inode, new mtime: as a secret update does). */
static void swap_file(const char *path, const char *data, size_t len) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    FILE *f = fopen(tmp, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "write %s", tmp);
    CHECK(rename(tmp, path) == 0, "rename %s", tmp);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f, "open %s", path);
    char *b = malloc(1 << 20);
    CHECK(b, "out of memory");
    *len = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

/* --rotate WRONG: the key file ($GOOGLE_APPLICATION_CREDENTIALS) changes under a live driver:
 * garbage (kept the old key, a warning), a key the token endpoint refuses (re-read: writes fail
 * with its message), the right key again (writes work). */
static void rotate(StoreDriver *d, const char *base, const char *wrong_path) {
    const char *path = getenv("GOOGLE_APPLICATION_CREDENTIALS");
    CHECK(path, "GOOGLE_APPLICATION_CREDENTIALS is not set");
    size_t good_len, wrong_len;
    char *good = slurp(path, &good_len), *wrong = slurp(wrong_path, &wrong_len);
    char key[256];
    snprintf(key, sizeof key, "%srot-1", base);
    CHECK(put(d, key, "1", 1) == 0, "put with the first key: %s", err_msg());
    swap_file(path, "{not json", 9);
    snprintf(key, sizeof key, "%srot-2", base);
    CHECK(put(d, key, "2", 1) == 0, "an unreadable new key file must keep the old key: %s",
          err_msg());
    sleep(1); /* a new mtime second for file systems with coarse timestamps */
    swap_file(path, wrong, wrong_len);
    snprintf(key, sizeof key, "%srot-3", base);
    int rc = put(d, key, "3", 1);
    CHECK(rc != 0 && strstr(err_msg(), "refused the service account"),
          "a rotated (wrong) key was not used: %s (%s)", err_name(rc), err_msg());
    sleep(1);
    swap_file(path, good, good_len);
    CHECK(put(d, key, "3", 1) == 0, "the right key again: %s", err_msg());
    for (int i = 1; i <= 3; i++) {
        snprintf(key, sizeof key, "%srot-%d", base, i);
        CHECK(d->vt->remove(d, key) == 0, "remove %s: %s", key, err_msg());
    }
    free(good);
    free(wrong);
    printf("ok credentials rotated on disk: re-read, an unreadable file keeps the old key\n");
}

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 5 && strcmp(argv[3], "--rotate") == 0)) {
        fprintf(stderr, "usage: gcs_contract ENDPOINT BUCKET [--rotate WRONG_KEY_FILE]\n");
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
    if (argc == 5) {
        rotate(d, base, argv[4]);
        store_driver_free(d);
        curl_global_cleanup();
        return 0;
    }

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
