/* abs_contract: the store contract checks run against the ABS driver on a real server (azurite,
 * started by tests/integration/test_abs_contract.sh): put/get, reads from an offset, listing over
 * several pages, a sibling prefix not listed, remove, missing keys, abort, no replace, a
 * multi-block object compared by SHA-256, odd characters in keys, a wrong key (403, named),
 * a missing container, credentials rotated on disk, and the generic Store API on top.
 * Usage: abs_contract ENDPOINT CONTAINER CREDS_JSON WORKDIR. Prints one line per check; exit 0
 * when every check passed, 1 otherwise. */
#include "common/err.h"
#include "common/log.h"
#include "store/snapname.h"
#include "store/store.h"
#include "store/store_abs.h"
#include "store/store_driver.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_failed;
static const char *g_endpoint, *g_container, *g_creds, *g_work;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __func__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (last error: %s)\n", err_msg());                                     \
            g_failed = 1;                                                                          \
            return;                                                                                \
        }                                                                                          \
    } while (0)

static int open_drv(const char *creds, const char *container, int64_t chunk, int par,
                    StoreDriver **d) {
    StoreConfig c = {.provider = "ABS",
                     .container = container ? container : g_container,
                     .endpoint_override = g_endpoint,
                     .credentials = creds ? creds : g_creds,
                     .min_chunk_size = chunk,
                     .max_parallel_chunk_uploads = par,
                     .timeout_ms = 30000};
    return store_abs_driver_new(&c, d);
}

static int put(StoreDriver *d, const char *key, const void *buf, size_t len) {
    StoreDriverWriter *w;
    int rc = d->vt->open_write(d, key, &w);
    if (rc) return rc;
    IoWriter *io = w->vt->io(w);
    const unsigned char *p = buf;
    /* odd-sized writes cross block boundaries */
    for (size_t off = 0; off < len;) {
        size_t n = len - off < 777777 ? len - off : 777777;
        rc = io_write(io, p + off, n);
        if (rc) {
            w->vt->abort(w);
            return rc;
        }
        off += n;
    }
    if ((rc = io_finish(io)) != 0) {
        w->vt->abort(w);
        return rc;
    }
    return w->vt->commit(w);
}

/* Reads key from offset into a malloc'ed buffer (*len). */
static int get(StoreDriver *d, const char *key, uint64_t offset, unsigned char **out, size_t *len) {
    IoReader *r;
    *out = NULL;
    *len = 0;
    int rc = d->vt->open_read(d, key, offset, &r);
    if (rc) return rc;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (;;) {
        if (n == cap) b = realloc(b, cap *= 2);
        size_t got;
        rc = io_read(r, b + n, cap - n, &got);
        if (rc || got == 0) break;
        n += got;
    }
    io_reader_free(r);
    if (rc) {
        free(b);
        return rc;
    }
    *out = b;
    *len = n;
    return 0;
}

typedef struct Listing {
    char keys[64][256];
    int64_t sizes[64];
    int n;
} Listing;

static int list_cb(void *ctx, const char *key, int64_t size) {
    Listing *l = ctx;
    if (l->n >= 64) return ERR_INVALID;
    snprintf(l->keys[l->n], sizeof l->keys[0], "%s", key);
    l->sizes[l->n++] = size;
    return 0;
}

static int listed(const Listing *l, const char *key, int64_t *size) {
    int found = 0;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->keys[i], key) == 0) {
            found++;
            if (size) *size = l->sizes[i];
        }
    return found;
}

static void sha(const void *b, size_t n, unsigned char out[32]) {
    unsigned int l;
    EVP_Digest(b, n, out, &l, EVP_sha256(), NULL);
}

static void check_put_get_offset_stat_remove(void) {
    StoreDriver *d;
    CHECK(open_drv(NULL, NULL, 0, 0, &d) == 0, "open");
    const char *k = "basic/hello";
    CHECK(put(d, k, "hello world", 11) == 0, "put");
    unsigned char *b;
    size_t n;
    CHECK(get(d, k, 0, &b, &n) == 0 && n == 11 && memcmp(b, "hello world", 11) == 0, "get");
    free(b);
    CHECK(get(d, k, 6, &b, &n) == 0 && n == 5 && memcmp(b, "world", 5) == 0, "get from 6");
    free(b);
    CHECK(get(d, k, 11, &b, &n) == 0 && n == 0, "get at the end: empty");
    free(b);
    CHECK(get(d, k, 100, &b, &n) == 0 && n == 0, "get past the end: empty");
    free(b);
    int64_t sz = -1;
    CHECK(d->vt->stat(d, k, &sz) == 0 && sz == 11, "stat %lld", (long long)sz);
    CHECK(put(d, k, "other", 5) == ERR_EXISTS, "second commit refused");
    CHECK(get(d, k, 0, &b, &n) == 0 && n == 11, "first object kept");
    free(b);
    CHECK(put(d, "basic/empty", "", 0) == 0, "empty object");
    CHECK(d->vt->stat(d, "basic/empty", &sz) == 0 && sz == 0, "empty stat");
    CHECK(d->vt->remove(d, k) == 0, "remove");
    CHECK(d->vt->remove(d, "basic/empty") == 0, "remove empty");
    CHECK(d->vt->stat(d, k, &sz) == ERR_NOT_FOUND, "stat removed");
    CHECK(d->vt->remove(d, k) == ERR_NOT_FOUND, "remove removed");
    IoReader *r = NULL;
    CHECK(d->vt->open_read(d, "basic/missing", 0, &r) == ERR_NOT_FOUND && !r, "read missing");
    CHECK(d->vt->open_read(d, "basic/missing", 5, &r) == ERR_NOT_FOUND && !r,
          "read missing at offset");
    store_driver_free(d);
    printf("ok put/get/offset/stat/no-replace/remove/missing\n");
}

static void check_list_pages_and_sibling_prefix(void) {
    setenv("ETCDBR_ABS_LIST_PAGE_SIZE", "2", 1);
    StoreDriver *d;
    int rc = open_drv(NULL, NULL, 0, 0, &d);
    unsetenv("ETCDBR_ABS_LIST_PAGE_SIZE");
    CHECK(rc == 0, "open");
    char k[64];
    for (int i = 0; i < 7; i++) {
        snprintf(k, sizeof k, "a/b/obj-%d", i);
        CHECK(put(d, k, "0123456789", (size_t)i + 1) == 0, "put %s", k);
    }
    CHECK(put(d, "a/b-other/x", "x", 1) == 0, "sibling");
    CHECK(put(d, "a/bb", "x", 1) == 0, "sibling 2");
    Listing l = {0};
    CHECK(d->vt->list(d, "a/b/", list_cb, &l) == 0, "list");
    CHECK(l.n == 7, "7 listed, got %d", l.n);
    for (int i = 0; i < 7; i++) {
        int64_t sz = -1;
        snprintf(k, sizeof k, "a/b/obj-%d", i);
        CHECK(listed(&l, k, &sz) == 1 && sz == i + 1, "%s once with size %d", k, i + 1);
    }
    Listing none = {0};
    CHECK(d->vt->list(d, "nothing-here/", list_cb, &none) == 0 && none.n == 0, "empty prefix");
    /* an in-progress (uncommitted) write is not listed */
    StoreDriverWriter *w;
    CHECK(d->vt->open_write(d, "a/b/pending", &w) == 0, "open_write");
    CHECK(io_write(w->vt->io(w), "p", 1) == 0, "write");
    Listing l2 = {0};
    CHECK(d->vt->list(d, "a/b/", list_cb, &l2) == 0 && l2.n == 7, "pending not listed");
    w->vt->abort(w);
    for (int i = 0; i < 7; i++) {
        snprintf(k, sizeof k, "a/b/obj-%d", i);
        CHECK(d->vt->remove(d, k) == 0, "remove %s", k);
    }
    Listing l3 = {0};
    CHECK(d->vt->list(d, "a/", list_cb, &l3) == 0 && l3.n == 2, "after remove: %d", l3.n);
    CHECK(listed(&l3, "a/b-other/x", NULL) == 1 && listed(&l3, "a/bb", NULL) == 1, "siblings");
    d->vt->remove(d, "a/b-other/x");
    d->vt->remove(d, "a/bb");
    store_driver_free(d);
    printf("ok list over pages of 2, sibling prefixes not listed, pending write not listed\n");
}

static void check_abort(void) {
    StoreDriver *d;
    CHECK(open_drv(NULL, NULL, 5 << 20, 2, &d) == 0, "open");
    size_t big = (5 << 20) * 2 + 1000;
    unsigned char *b = malloc(big);
    memset(b, 'z', big);
    const char *keys[] = {"abort/small", "abort/multi"};
    size_t lens[] = {100, big};
    for (int i = 0; i < 2; i++) {
        StoreDriverWriter *w;
        CHECK(d->vt->open_write(d, keys[i], &w) == 0, "open_write");
        CHECK(io_write(w->vt->io(w), b, lens[i]) == 0, "write");
        w->vt->abort(w);
        int64_t sz;
        CHECK(d->vt->stat(d, keys[i], &sz) == ERR_NOT_FOUND, "aborted %s invisible", keys[i]);
    }
    Listing l = {0};
    CHECK(d->vt->list(d, "abort/", list_cb, &l) == 0 && l.n == 0, "nothing listed");
    /* an aborted multi-block upload leaves no trace that blocks a later write of the key */
    CHECK(put(d, "abort/multi", b, 3000) == 0, "write after abort");
    d->vt->remove(d, "abort/multi");
    free(b);
    store_driver_free(d);
    printf("ok abort (small and multi-block) leaves nothing visible\n");
}

static void check_large_multi_block(void) {
    StoreDriver *d;
    CHECK(open_drv(NULL, NULL, 5 << 20, 2, &d) == 0, "open");
    size_t len = (size_t)3 * (5 << 20) + 123457;
    unsigned char *b = malloc(len);
    unsigned long long x = (unsigned long long)time(NULL) | 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
    }
    const char *k = "large/object.bin";
    CHECK(put(d, k, b, len) == 0, "put %zu bytes", len);
    int64_t sz;
    CHECK(d->vt->stat(d, k, &sz) == 0 && (size_t)sz == len, "stat");
    unsigned char *g;
    size_t n;
    unsigned char h1[32], h2[32];
    CHECK(get(d, k, 0, &g, &n) == 0 && n == len, "get");
    sha(b, len, h1);
    sha(g, n, h2);
    free(g);
    CHECK(memcmp(h1, h2, 32) == 0, "sha256 equal");
    size_t off = (5 << 20) + 7;
    CHECK(get(d, k, off, &g, &n) == 0 && n == len - off, "get from %zu", off);
    sha(b + off, len - off, h1);
    sha(g, n, h2);
    free(g);
    CHECK(memcmp(h1, h2, 32) == 0, "sha256 of the tail equal");
    CHECK(put(d, k, b, len) == ERR_EXISTS, "multi-block commit does not replace");
    CHECK(d->vt->remove(d, k) == 0, "remove");
    free(b);
    store_driver_free(d);
    printf("ok 3 blocks of 5 MiB + tail, sha256 equal, also from an offset; no replace\n");
}

static void check_odd_keys(void) {
    StoreDriver *d;
    CHECK(open_drv(NULL, NULL, 0, 0, &d) == 0, "open");
    const char *keys[] = {"odd/with space", "odd/plus+equals=percent%25%", "odd/amp&lt<gt>'\"",
                          "odd/\xC3\xBCnic\xC3\xB6"
                          "de-\xE2\x98\xBA",
                          "odd/q?hash#semi;"};
    size_t nk = sizeof keys / sizeof keys[0];
    for (size_t i = 0; i < nk; i++)
        CHECK(put(d, keys[i], keys[i], strlen(keys[i])) == 0, "put %s", keys[i]);
    Listing l = {0};
    CHECK(d->vt->list(d, "odd/", list_cb, &l) == 0 && l.n == (int)nk, "listed %d", l.n);
    for (size_t i = 0; i < nk; i++) {
        int64_t sz;
        CHECK(listed(&l, keys[i], &sz) == 1 && sz == (int64_t)strlen(keys[i]), "listed %s",
              keys[i]);
        unsigned char *b;
        size_t n;
        CHECK(get(d, keys[i], 0, &b, &n) == 0 && n == strlen(keys[i]) && memcmp(b, keys[i], n) == 0,
              "get %s", keys[i]);
        free(b);
        CHECK(d->vt->remove(d, keys[i]) == 0, "remove %s", keys[i]);
    }
    store_driver_free(d);
    printf("ok odd characters in keys (space + = %% & < > ' \" unicode ? # ;)\n");
}

static void write_creds(const char *path, const char *key) {
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"storageAccount\":\"devstoreaccount1\",\"storageKey\":\"%s\"}\n", key);
    fclose(f);
}

static void check_wrong_key_missing_container_rotation(void) {
    char bad[1024], rot[1024];
    snprintf(bad, sizeof bad, "%s/bad-creds.json", g_work);
    write_creds(bad, "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25nIGtleQ==");
    StoreDriver *d = NULL;
    int rc = open_drv(bad, NULL, 0, 0, &d);
    CHECK(rc == ERR_IO && !d, "wrong key refused at open: %d", rc);
    CHECK(strstr(err_msg(), "HTTP 403") && strstr(err_msg(), "storageKey"), "403 named");
    CHECK(strstr(err_msg(), "ABS refused the credentials for bucket "),
          "provider and bucket named: %s", err_msg());
    CHECK(!strstr(err_msg(), "d3Jvbmcga2V5"), "key not in the message");
    rc = open_drv(NULL, "no-such-container", 0, 0, &d);
    CHECK(rc == ERR_NOT_FOUND && strstr(err_msg(), "no-such-container") &&
              strstr(err_msg(), "does not exist"),
          "missing container: %d", rc);

    /* credentials re-read when the file changes */
    snprintf(rot, sizeof rot, "%s/rot-creds.json", g_work);
    FILE *in = fopen(g_creds, "r");
    char good[1024] = "";
    size_t gn = fread(good, 1, sizeof good - 1, in);
    fclose(in);
    good[gn] = '\0';
    FILE *out = fopen(rot, "w");
    fputs(good, out);
    fclose(out);
    CHECK(open_drv(rot, NULL, 0, 0, &d) == 0, "open with a good key");
    CHECK(put(d, "rot/1", "x", 1) == 0, "put");
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    write_creds(rot, "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXkgd3Jvbmcga2V5IHdyb25nIGtleQ==");
    int64_t sz;
    rc = d->vt->stat(d, "rot/1", &sz);
    CHECK(rc == ERR_IO && strstr(err_msg(), "403"), "rotated to a bad key: %d", rc);
    nanosleep(&ts, NULL);
    out = fopen(rot, "w");
    fputs(good, out);
    fclose(out);
    CHECK(d->vt->stat(d, "rot/1", &sz) == 0 && sz == 1, "rotated back");
    d->vt->remove(d, "rot/1");
    store_driver_free(d);
    printf("ok wrong key: HTTP 403 named, key not shown; missing container named; credentials "
           "re-read on change\n");
}

static void check_connection_string(void) {
    /* AccountName/AccountKey/BlobEndpoint as azurite documents it, no other credentials */
    char cs[1024];
    snprintf(cs, sizeof cs,
             "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;"
             "BlobEndpoint=%s/devstoreaccount1;",
             "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
             "KBHBeksoGMGw==",
             g_endpoint);
    setenv("AZURE_STORAGE_CONNECTION_STRING", cs, 1);
    StoreConfig c = {.provider = "ABS", .container = g_container};
    StoreDriver *d = NULL;
    int rc = store_abs_driver_new(&c, &d);
    unsetenv("AZURE_STORAGE_CONNECTION_STRING");
    CHECK(rc == 0, "open with a connection string");
    CHECK(put(d, "cs/1", "abc", 3) == 0, "put");
    int64_t sz;
    CHECK(d->vt->stat(d, "cs/1", &sz) == 0 && sz == 3, "stat");
    CHECK(d->vt->remove(d, "cs/1") == 0, "remove");
    store_driver_free(d);
    printf("ok connection string (AccountName, AccountKey, BlobEndpoint)\n");
}

static void check_store_api(void) {
    StoreConfig c = {.provider = "ABS",
                     .container = g_container,
                     .prefix = "etcd-main",
                     .endpoint_override = g_endpoint,
                     .credentials = g_creds};
    Store *s = NULL;
    CHECK(store_open(&c, &s) == 0, "store_open ABS");
    CHECK(strncmp(store_describe(s), "ABS:", 4) == 0, "describe %s", store_describe(s));
    char name[128];
    CHECK(snapname_format(SNAP_FULL, 0, 42, 1700000000, ".gz", 0, name, sizeof name) == 0, "name");
    StoreWriter *w;
    CHECK(store_open_write(s, name, &w) == 0, "open_write %s", name);
    CHECK(io_write(store_writer_io(w), "snapshot-bytes", 14) == 0, "write");
    CHECK(io_finish(store_writer_io(w)) == 0, "finish");
    CHECK(store_writer_commit(w) == 0, "commit");
    Snapshot *list = NULL;
    size_t n = 0;
    CHECK(store_list(s, &list, &n) == 0 && n == 1 && list[0].last_revision == 42, "list %zu", n);
    IoReader *r;
    CHECK(store_open_read(s, &list[0], &r) == 0, "read");
    char buf[64];
    size_t got;
    CHECK(io_read_full(r, buf, sizeof buf, &got) == 0 && got == 14, "read %zu", got);
    io_reader_free(r);
    CHECK(store_open_write(s, name, &w) == ERR_EXISTS, "second write refused");
    CHECK(store_remove(s, &list[0]) == 0, "remove");
    free(list);
    store_free(s);
    printf("ok Store API over ABS (write, list, read, no replace, remove)\n");
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s ENDPOINT CONTAINER CREDS_JSON WORKDIR\n", argv[0]);
        return 2;
    }
    g_endpoint = argv[1];
    g_container = argv[2];
    g_creds = argv[3];
    g_work = argv[4];
    log_setup(LOG_WARN, 0);
    check_put_get_offset_stat_remove();
    check_list_pages_and_sibling_prefix();
    check_abort();
    check_large_multi_block();
    check_odd_keys();
    check_wrong_key_missing_container_rotation();
    check_connection_string();
    check_store_api();
    printf(g_failed ? "FAILED\n" : "all checks passed\n");
    return g_failed ? 1 : 0;
}
