/* fuzz_bbolt: libFuzzer target for the bbolt reader. The input is a whole db file, handed over
 * through an in-memory file (memfd) and its /proc/self/fd path; bbolt_open, bbolt_etcd_revision,
 * bbolt_check and a cursor over every bucket (nested ones too) must return 0 or a project error,
 * never crash, hang or allocate without bound; on a db that bbolt_check passes the cursor must
 * not fail.
 * Each input also runs with its meta checksums recomputed, so mutated meta fields get past the
 * FNV-1a check. Seeds in fuzz/corpus/bbolt/: small real etcd 3.4 snapshots, synthetic dbs. */
#include "common/err.h"
#include "format/bbolt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_fd = -1;

#define CURSOR_MAX_NESTING 8
#define CURSOR_MAX_ITEMS 100000 /* per db, all buckets together */
#define CURSOR_MAX_OPENS 256    /* per db: buckets sharing pages could multiply the reads */
#define CURSOR_MAX_NAME 32768   /* bbolt's MaxKeySize: longer names cannot be opened */

static uint8_t cursor_names[CURSOR_MAX_NESTING][CURSOR_MAX_NAME];

typedef struct {
    size_t items;
    size_t opens;
} CursorBudget;

/* Iterates the bucket at path[0..depth) and, depth-first, every bucket nested in it. */
static void cursor_walk(BboltDb *db, BboltName *path, size_t depth, int check_ok, CursorBudget *b) {
    BboltCursor *c = NULL;
    if (++b->opens > CURSOR_MAX_OPENS) return;
    int rc = bbolt_cursor_open(db, path, depth, &c);
    if (rc) {
        if (c != NULL || check_ok || (rc != ERR_CORRUPT && rc != ERR_NOT_FOUND)) abort();
        return;
    }
    while (b->items < CURSOR_MAX_ITEMS) {
        BboltItem it;
        int got = 0;
        rc = bbolt_cursor_next(c, &it, &got);
        if (rc) {
            if (check_ok || rc != ERR_CORRUPT) abort();
            break;
        }
        if (!got) break;
        b->items++;
        if (!it.is_bucket) continue;
        if (it.value != NULL || it.value_len != 0) abort();
        if (depth < CURSOR_MAX_NESTING && it.key_len <= CURSOR_MAX_NAME) {
            memcpy(cursor_names[depth], it.key, it.key_len);
            path[depth] = (BboltName){cursor_names[depth], it.key_len};
            cursor_walk(db, path, depth + 1, check_ok, b);
        }
    }
    bbolt_cursor_close(c);
}

static void run_db(const uint8_t *data, size_t size) {
    if (fuzz_fd < 0) {
        fuzz_fd = memfd_create("fuzz_bbolt", MFD_CLOEXEC);
        if (fuzz_fd < 0) abort();
    }
    if (ftruncate(fuzz_fd, 0) != 0) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t n = pwrite(fuzz_fd, data + off, size - off, (off_t)off);
        if (n <= 0) abort();
        off += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fuzz_fd);

    /* the last 32 bytes may be a snapshot's sha256 trailer: also try without them */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t limit = pass == 0 ? 0 : (size > 32 ? size - 32 : 1);
        BboltDb *db = NULL;
        int rc = bbolt_open(path, limit, &db);
        if (rc != 0) {
            if (db != NULL || rc != ERR_CORRUPT) abort();
            continue;
        }
        int64_t rev = -1;
        rc = bbolt_etcd_revision(db, &rev);
        if (rc != 0 && rc != ERR_CORRUPT && rc != ERR_NOT_FOUND) abort();
        if (rc == 0 && rev < 1) abort();
        uint64_t pages = 0;
        rc = bbolt_check(db, &pages);
        if (rc != 0 && rc != ERR_CORRUPT) abort();
        if (rc == 0 && pages > (uint64_t)size / bbolt_page_size(db)) abort();
        BboltName names[CURSOR_MAX_NESTING];
        CursorBudget budget = {0, 0};
        cursor_walk(db, names, 0, rc == 0, &budget);
        bbolt_close(db);
    }
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Rewrites the FNV-1a checksum of the meta at page offset off; 1 if it changed. */
static int fix_meta(uint8_t *d, size_t size, size_t off) {
    if (off + 16 + 64 > size) return 0;
    uint8_t *m = d + off + 16;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 56; i++)
        h = (h ^ m[i]) * 0x100000001b3ull;
    if (le64(m + 56) == h) return 0;
    for (int i = 0; i < 8; i++)
        m[56 + i] = (uint8_t)(h >> (8 * i));
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_db(data, size);
    if (size < 16 + 64) return 0;
    uint8_t *copy = malloc(size);
    if (!copy) abort();
    memcpy(copy, data, size);
    uint32_t ps = (uint32_t)copy[24] | (uint32_t)copy[25] << 8 | (uint32_t)copy[26] << 16 |
                  (uint32_t)copy[27] << 24;
    int changed = fix_meta(copy, size, 0);
    if (ps >= 512 && ps <= 65536 && (ps & (ps - 1)) == 0) changed |= fix_meta(copy, size, ps);
    if (changed) run_db(copy, size);
    free(copy);
    return 0;
}
