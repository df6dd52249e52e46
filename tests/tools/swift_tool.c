/* swift_tool: drives the Swift driver one call at a time, for tests/integration/test_swift_*.sh,
 * which check what lands in the container with raw Swift requests (curl):
 *   swift_tool CONTAINER put KEY SIZE SEED    write SIZE pseudo-random bytes (seeded) and commit
 *   swift_tool CONTAINER abort KEY SIZE SEED  write SIZE bytes, then abort
 *   swift_tool CONTAINER sha KEY OFFSET       SHA-256 (hex) of the object's bytes from OFFSET
 *   swift_tool CONTAINER gen SIZE SEED OFFSET SHA-256 of what put would write, from OFFSET
 *   swift_tool CONTAINER ls PREFIX            the listed keys and sizes, one "key size" a line
 *   swift_tool CONTAINER rm KEY               remove
 *   swift_tool CONTAINER stat KEY             the size
 *   swift_tool CONTAINER reauth KEY READY GO  open (authenticate), create file READY, wait up to
 *                                             60 s for file GO (the test revokes the token
 *                                             meanwhile), then write and read back KEY
 * Credentials from the usual environment (OPENSTACK_APPLICATION_CREDENTIALS_JSON...);
 * SWIFT_TOOL_MIN_CHUNK (bytes per segment) and SWIFT_TOOL_PARALLEL set the writer's knobs.
 * SWIFT_TOOL_PROVIDER=S3 drives the S3 driver instead (Swift's s3api;
 * AWS_APPLICATION_CREDENTIALS_JSON, SWIFT_TOOL_ENDPOINT the endpoint override). Exit 0 on success,
 * 1 with the error on stderr, 2 on usage. */
#include "codec/sha256.h"
#include "common/err.h"
#include "store/store_driver.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void die(const char *what, int rc) {
    fprintf(stderr, "swift_tool: %s: %s (%s)\n", what, err_msg(), err_name(rc));
    exit(1);
}

/* The byte at position i of the stream seeded by seed (cheap, not constant per block). */
static unsigned char gen_byte(uint64_t seed, uint64_t i) {
    uint64_t x = (i / 8 + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (unsigned char)(x >> ((i % 8) * 8));
}

static void fill(unsigned char *b, size_t n, uint64_t seed, uint64_t at) {
    for (size_t i = 0; i < n; i++)
        b[i] = gen_byte(seed, at + i);
}

static void hex(const uint8_t d[SHA256_LEN]) {
    for (int i = 0; i < SHA256_LEN; i++)
        printf("%02x", d[i]);
    printf("\n");
}

static int ls_cb(void *ctx, const char *key, int64_t size) {
    (void)ctx;
    printf("%s %lld\n", key, (long long)size);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: see the comment at the top of swift_tool.c\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    StoreConfig cfg = {0};
    const char *prov = getenv("SWIFT_TOOL_PROVIDER");
    cfg.provider = prov && prov[0] ? prov : "Swift";
    cfg.endpoint_override = getenv("SWIFT_TOOL_ENDPOINT");
    cfg.container = argv[1];
    const char *mc = getenv("SWIFT_TOOL_MIN_CHUNK"), *par = getenv("SWIFT_TOOL_PARALLEL");
    cfg.min_chunk_size = mc ? atoll(mc) : 0;
    cfg.max_parallel_chunk_uploads = par ? atoi(par) : 0;
    const char *cmd = argv[2];
    StoreDriver *drv = NULL;
    int rc;
    if (strcmp(cmd, "gen") != 0 &&
        (rc = strcmp(cfg.provider, "Swift") == 0 ? store_swift_driver_new(&cfg, &drv)
                                                 : store_s3_driver_new(&cfg, &drv)) != 0)
        die("open", rc);
    static unsigned char buf[1 << 16];
    if ((strcmp(cmd, "put") == 0 || strcmp(cmd, "abort") == 0) && argc == 6) {
        uint64_t size = strtoull(argv[4], NULL, 10), seed = strtoull(argv[5], NULL, 10);
        StoreDriverWriter *w = NULL;
        if ((rc = drv->vt->open_write(drv, argv[3], &w)) != 0) die("open_write", rc);
        IoWriter *io = w->vt->io(w);
        for (uint64_t o = 0; o < size;) {
            size_t n = size - o < sizeof buf ? (size_t)(size - o) : sizeof buf;
            fill(buf, n, seed, o);
            if ((rc = io_write(io, buf, n)) != 0) die("write", rc);
            o += n;
        }
        if (strcmp(cmd, "abort") == 0) {
            w->vt->abort(w);
        } else {
            if ((rc = io_finish(io)) != 0) die("finish", rc);
            if ((rc = w->vt->commit(w)) != 0) die("commit", rc);
        }
    } else if (strcmp(cmd, "gen") == 0 && argc == 6) {
        uint64_t size = strtoull(argv[3], NULL, 10), seed = strtoull(argv[4], NULL, 10);
        uint64_t off = strtoull(argv[5], NULL, 10);
        Sha256 *h = sha256_new();
        if (!h) return 1;
        for (uint64_t o = off; o < size;) {
            size_t n = size - o < sizeof buf ? (size_t)(size - o) : sizeof buf;
            fill(buf, n, seed, o);
            sha256_update(h, buf, n);
            o += n;
        }
        uint8_t d[SHA256_LEN];
        sha256_final(h, d);
        sha256_free(h);
        hex(d);
    } else if (strcmp(cmd, "sha") == 0 && argc == 5) {
        IoReader *r = NULL;
        if ((rc = drv->vt->open_read(drv, argv[3], strtoull(argv[4], NULL, 10), &r)) != 0)
            die("open_read", rc);
        Sha256 *h = sha256_new();
        if (!h) return 1;
        for (;;) {
            size_t got = 0;
            if ((rc = io_read(r, buf, sizeof buf, &got)) != 0) die("read", rc);
            if (got == 0) break;
            sha256_update(h, buf, got);
        }
        io_reader_free(r);
        uint8_t d[SHA256_LEN];
        sha256_final(h, d);
        sha256_free(h);
        hex(d);
    } else if (strcmp(cmd, "ls") == 0 && argc == 4) {
        if ((rc = drv->vt->list(drv, argv[3], ls_cb, NULL)) != 0) die("list", rc);
    } else if (strcmp(cmd, "rm") == 0 && argc == 4) {
        if ((rc = drv->vt->remove(drv, argv[3])) != 0) die("remove", rc);
    } else if (strcmp(cmd, "stat") == 0 && argc == 4) {
        int64_t size;
        if ((rc = drv->vt->stat(drv, argv[3], &size)) != 0) die("stat", rc);
        printf("%lld\n", (long long)size);
    } else if (strcmp(cmd, "reauth") == 0 && argc == 6) {
        FILE *f = fopen(argv[4], "w");
        if (!f) return 1;
        fclose(f);
        for (int i = 0; i < 600 && access(argv[5], F_OK) != 0; i++)
            usleep(100000);
        StoreDriverWriter *w = NULL;
        if ((rc = drv->vt->open_write(drv, argv[3], &w)) != 0) die("open_write", rc);
        if ((rc = io_write(w->vt->io(w), "0123456789", 10)) != 0) die("write", rc);
        if ((rc = w->vt->commit(w)) != 0) die("commit after the token was revoked", rc);
        int64_t size = 0;
        if ((rc = drv->vt->stat(drv, argv[3], &size)) != 0 || size != 10) die("stat", rc);
    } else {
        fprintf(stderr, "usage: see the comment at the top of swift_tool.c\n");
        return 2;
    }
    store_driver_free(drv);
    curl_global_cleanup();
    return 0;
}
