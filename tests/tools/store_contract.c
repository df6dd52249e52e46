/* store_contract: the store-driver contract (one contract suite runs against every store
 * driver; CONTRIBUTING.md), run against any provider:
 *   store_contract --provider Local|S3|ECS|OCS|ABS|GCS|Swift|OSS --container C [--endpoint URL]
 *                  [--prefix P]
 *                  [--min-chunk BYTES] [--parallel N] [--list-count N]
 * Credentials come from the provider's usual environment (AWS_APPLICATION_CREDENTIALS_JSON...).
 * Every key lives under "<prefix>/contract-<pid>-<time>/", removed at the end. Checks: put/get,
 * get from an offset (inside, at and past the end), stat, list through several pages (set
 * ETCDBR_S3_LIST_PAGE_SIZE small), a sibling prefix never listed, remove, missing keys
 * (ERR_NOT_FOUND from read, stat, remove), abort of a small and of a multipart write (nothing
 * visible), a multipart object of 3 parts + a tail (byte-exact, SHA-256 compared, read from an
 * offset inside part 2), odd characters in keys (ETCDBR_CONTRACT_SKIP_XML_SPECIAL=1 leaves out
 * the key with & < > ', for servers that mangle them in listings). Prints one line per check; exit
 * 0 when all pass, 1 on the first failure (the message on stderr), 2 on usage. */
#include "codec/sha256.h"
#include "common/err.h"
#include "store/store_abs.h"
#include "store/store_driver.h"
#include "store/store_oss.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static StoreDriver *drv;
static char base[512];

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define OK(call, what)                                                                             \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        CHECK(rc_ == 0, "%s: %s (%s)", what, err_msg(), err_name(rc_));                            \
    } while (0)

static char *k(const char *rel) {
    static char buf[8][1024];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 1024, "%s%s", base, rel);
    return b;
}

static void put(const char *key, const void *data, size_t len, size_t chunk) {
    StoreDriverWriter *w = NULL;
    OK(drv->vt->open_write(drv, key, &w), key);
    IoWriter *io = w->vt->io(w);
    for (size_t o = 0; o < len;) {
        size_t n = len - o < chunk ? len - o : chunk;
        OK(io_write(io, (const char *)data + o, n), key);
        o += n;
    }
    OK(io_finish(io), key);
    OK(w->vt->commit(w), key);
}

static unsigned char *get(const char *key, uint64_t off, size_t *len) {
    IoReader *r = NULL;
    OK(drv->vt->open_read(drv, key, off, &r), key);
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (;;) {
        if (n == cap) b = realloc(b, cap *= 2);
        CHECK(b, "out of memory");
        size_t got = 0;
        OK(io_read(r, b + n, cap - n, &got), key);
        if (got == 0) break;
        n += got;
    }
    io_reader_free(r);
    *len = n;
    return b;
}

typedef struct {
    char **keys;
    size_t n;
    int64_t *sizes;
} Listed;

static int list_cb(void *ctx, const char *key, int64_t size) {
    Listed *l = ctx;
    l->keys = realloc(l->keys, (l->n + 1) * sizeof *l->keys);
    l->sizes = realloc(l->sizes, (l->n + 1) * sizeof *l->sizes);
    l->keys[l->n] = strdup(key);
    l->sizes[l->n++] = size;
    return 0;
}

static Listed list(const char *prefix) {
    Listed l = {0};
    OK(drv->vt->list(drv, prefix, list_cb, &l), prefix);
    return l;
}

static int listed_has(const Listed *l, const char *key, int64_t size) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->keys[i], key) == 0) return size < 0 || l->sizes[i] < 0 || l->sizes[i] == size;
    return 0;
}

static void listed_free(Listed *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->keys[i]);
    free(l->keys);
    free(l->sizes);
}

static void expect_missing(const char *key) {
    IoReader *r = NULL;
    int64_t size;
    int rc = drv->vt->open_read(drv, key, 0, &r);
    io_reader_free(r);
    CHECK(rc == ERR_NOT_FOUND, "read of missing %s: %s, not ERR_NOT_FOUND", key, err_name(rc));
    rc = drv->vt->stat(drv, key, &size);
    CHECK(rc == ERR_NOT_FOUND, "stat of missing %s: %s, not ERR_NOT_FOUND", key, err_name(rc));
}

static void fill(unsigned char *b, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        b[i] = (unsigned char)(seed >> 56);
    }
}

static void digest(const void *b, size_t n, uint8_t out[SHA256_LEN]) {
    Sha256 *s = sha256_new();
    sha256_update(s, b, n);
    sha256_final(s, out);
    sha256_free(s);
}

int main(int argc, char **argv) {
    StoreConfig cfg = {0};
    const char *prefix = "";
    int list_count = 25;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--provider") == 0)
            cfg.provider = argv[i + 1];
        else if (strcmp(argv[i], "--container") == 0)
            cfg.container = argv[i + 1];
        else if (strcmp(argv[i], "--endpoint") == 0)
            cfg.endpoint_override = argv[i + 1];
        else if (strcmp(argv[i], "--prefix") == 0)
            prefix = argv[i + 1];
        else if (strcmp(argv[i], "--min-chunk") == 0)
            cfg.min_chunk_size = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--parallel") == 0)
            cfg.max_parallel_chunk_uploads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--list-count") == 0)
            list_count = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: see the comment at the top of store_contract.c\n");
            return 2;
        }
    }
    if (!cfg.provider || !cfg.container) {
        fprintf(stderr, "store_contract: --provider and --container are required\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    OK(store_driver_open(&cfg, &drv), "open");
    snprintf(base, sizeof base, "%s%scontract-%d-%lld/", prefix, prefix[0] ? "/" : "",
             (int)getpid(), (long long)time(NULL));
    printf("contract on %s under %s\n", drv->vt->describe(drv), base);

    /* put, get, stat */
    const char *hello = "hello, object store";
    size_t hl = strlen(hello), n;
    put(k("small"), hello, hl, 4);
    unsigned char *b = get(k("small"), 0, &n);
    CHECK(n == hl && memcmp(b, hello, n) == 0, "small object read back differs");
    free(b);
    int64_t size = -1;
    OK(drv->vt->stat(drv, k("small"), &size), "stat");
    CHECK(size == (int64_t)hl, "stat size %lld, want %zu", (long long)size, hl);
    printf("ok put/get/stat\n");

    /* offsets */
    b = get(k("small"), 7, &n);
    CHECK(n == hl - 7 && memcmp(b, hello + 7, n) == 0, "read from offset 7 differs");
    free(b);
    b = get(k("small"), hl, &n);
    CHECK(n == 0, "read from the end gave %zu bytes", n);
    free(b);
    b = get(k("small"), hl + 100, &n);
    CHECK(n == 0, "read past the end gave %zu bytes", n);
    free(b);
    printf("ok get from offsets\n");

    /* empty object */
    put(k("empty"), "", 0, 1);
    OK(drv->vt->stat(drv, k("empty"), &size), "stat empty");
    CHECK(size == 0, "empty object has size %lld", (long long)size);
    printf("ok empty object\n");

    /* list over pages */
    char rel[64];
    for (int i = 0; i < list_count; i++) {
        snprintf(rel, sizeof rel, "many/obj-%04d", i);
        put(k(rel), rel, strlen(rel), 64);
    }
    Listed l = list(k("many/"));
    CHECK(l.n == (size_t)list_count, "listed %zu objects under many/, want %d", l.n, list_count);
    for (int i = 0; i < list_count; i++) {
        snprintf(rel, sizeof rel, "many/obj-%04d", i);
        CHECK(listed_has(&l, k(rel), (int64_t)strlen(rel)), "%s not listed (or wrong size)",
              k(rel));
    }
    listed_free(&l);
    printf("ok list of %d objects\n", list_count);

    /* sibling prefix */
    put(k("a/b/x"), "x", 1, 1);
    put(k("a/b-other/y"), "y", 1, 1);
    l = list(k("a/b/"));
    CHECK(l.n == 1 && strcmp(l.keys[0], k("a/b/x")) == 0, "list a/b/ gave %zu objects", l.n);
    listed_free(&l);
    printf("ok sibling prefix not listed\n");

    /* odd characters */
    static const char *const odd[] = {"odd/with space", "odd/plus+eq=pct%25%", "odd/ünïcödé-日本",
                                      "odd/semi;colon:at@,dollar$!*()~\"", "odd/amp&lt<>'"};
    size_t n_odd = sizeof odd / sizeof odd[0];
    /* s3rver 4.0.4 escapes & < > ' twice in its listings (real S3 once): its tests skip the
     * last key by setting ETCDBR_CONTRACT_SKIP_XML_SPECIAL=1 */
    const char *skip_xml = getenv("ETCDBR_CONTRACT_SKIP_XML_SPECIAL");
    if (skip_xml && strcmp(skip_xml, "1") == 0) n_odd--;
    for (size_t i = 0; i < n_odd; i++)
        put(k(odd[i]), odd[i], strlen(odd[i]), 3);
    l = list(k("odd/"));
    CHECK(l.n == n_odd, "listed %zu odd keys, want %zu", l.n, n_odd);
    for (size_t i = 0; i < n_odd; i++) {
        CHECK(listed_has(&l, k(odd[i]), (int64_t)strlen(odd[i])), "odd key \"%s\" not listed",
              odd[i]);
        b = get(k(odd[i]), 0, &n);
        CHECK(n == strlen(odd[i]) && memcmp(b, odd[i], n) == 0, "odd key \"%s\" read back differs",
              odd[i]);
        free(b);
    }
    listed_free(&l);
    printf("ok odd characters in keys\n");

    /* remove and missing keys */
    OK(drv->vt->remove(drv, k("small")), "remove");
    expect_missing(k("small"));
    int rc = drv->vt->remove(drv, k("small"));
    CHECK(rc == ERR_NOT_FOUND, "second remove: %s, not ERR_NOT_FOUND", err_name(rc));
    expect_missing(k("never-written"));
    printf("ok remove, missing keys give ERR_NOT_FOUND\n");

    /* abort */
    int64_t chunk = cfg.min_chunk_size > 0 ? cfg.min_chunk_size : (int64_t)5 << 20;
    size_t big = (size_t)(3 * chunk + chunk / 3 + 7);
    unsigned char *data = malloc(big);
    CHECK(data, "out of memory");
    fill(data, big, 42);
    StoreDriverWriter *w = NULL;
    OK(drv->vt->open_write(drv, k("aborted-small"), &w), "open aborted-small");
    OK(io_write(w->vt->io(w), data, 1000), "write aborted-small");
    w->vt->abort(w);
    w = NULL;
    OK(drv->vt->open_write(drv, k("aborted-big"), &w), "open aborted-big");
    OK(io_write(w->vt->io(w), data, (size_t)chunk * 2 + 5), "write aborted-big");
    w->vt->abort(w);
    expect_missing(k("aborted-small"));
    expect_missing(k("aborted-big"));
    l = list(base);
    for (size_t i = 0; i < l.n; i++)
        CHECK(!strstr(l.keys[i], "aborted"), "aborted object %s listed", l.keys[i]);
    listed_free(&l);
    printf("ok abort leaves nothing visible\n");

    /* multipart */
    put(k("large"), data, big, 1000003);
    OK(drv->vt->stat(drv, k("large"), &size), "stat large");
    CHECK(size == (int64_t)big, "large object size %lld, want %zu", (long long)size, big);
    b = get(k("large"), 0, &n);
    uint8_t d1[SHA256_LEN], d2[SHA256_LEN];
    digest(data, big, d1);
    digest(b, n, d2);
    CHECK(n == big && memcmp(d1, d2, SHA256_LEN) == 0, "large object read back differs (%zu bytes)",
          n);
    free(b);
    size_t off = (size_t)chunk + 12345;
    b = get(k("large"), off, &n);
    CHECK(n == big - off && memcmp(b, data + off, n) == 0, "large object from offset differs");
    free(b);
    free(data);
    printf("ok multipart object of %zu bytes (part size %lld) byte-exact\n", big, (long long)chunk);

    /* cleanup */
    l = list(base);
    for (size_t i = 0; i < l.n; i++)
        OK(drv->vt->remove(drv, l.keys[i]), l.keys[i]);
    listed_free(&l);
    l = list(base);
    CHECK(l.n == 0, "%zu objects left after cleanup", l.n);
    listed_free(&l);
    if (drv->vt->features & STORE_FEAT_DIRECTORIES) {
        /* Local: leave no empty directories behind */
        const char *dirs[] = {"many", "a/b", "a/b-other", "a", "odd", ""};
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
            char dk[1024];
            snprintf(dk, sizeof dk, "%s%s", base, dirs[i]);
            size_t dl = strlen(dk);
            if (dl && dk[dl - 1] == '/') dk[dl - 1] = '\0';
            (void)drv->vt->remove_dir(drv, dk);
        }
    }
    printf("all store contract checks passed on %s\n", drv->vt->describe(drv));
    store_driver_free(drv);
    curl_global_cleanup();
    return 0;
}
