/* fuzz_bbolt_stream: libFuzzer target for the streaming db check of the one-pass full snapshot
 * (format/bbolt_stream.h): the input is etcd's snapshot stream (a db, maybe with the 32-byte
 * trailer), fed in chunks whose sizes follow from the input's length. Every call must return 0
 * or a documented error, never crash, hang or allocate without bound; and the stream check must
 * never give a wrong answer: where it finishes, and bbolt's own reader (format/bbolt.h) opens
 * and checks the same bytes, the revision and the wanted key's value must be the reader's.
 * Each input also runs with its meta checksums recomputed, so mutated meta fields get past the
 * FNV-1a check. Seeds in fuzz/corpus/bbolt_stream/: the bbolt target's dbs. */
#include "common/byteorder.h"
#include "common/err.h"
#include "format/bbolt.h"
#include "format/bbolt_stream.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_fd = -1;

/* The reference: bbolt's reader on the same bytes. 0 with *rev and the wanted value when the
 * db opens and passes bbolt_check; -1 otherwise. */
static int reference(const uint8_t *data, size_t db_len, int64_t *rev, char *val, size_t cap,
                     size_t *vlen, int *val_rc) {
    if (fuzz_fd < 0 && (fuzz_fd = memfd_create("fuzz_bbolt_stream", MFD_CLOEXEC)) < 0) abort();
    if (ftruncate(fuzz_fd, 0) != 0) abort();
    for (size_t off = 0; off < db_len;) {
        ssize_t n = pwrite(fuzz_fd, data + off, db_len - off, (off_t)off);
        if (n <= 0) abort();
        off += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fuzz_fd);
    BboltDb *db = NULL;
    if (bbolt_open(path, db_len, &db) != 0) return -1;
    uint64_t pages = 0;
    int ok = bbolt_check(db, &pages) == 0 && bbolt_etcd_revision(db, rev) == 0;
    if (ok) *val_rc = bbolt_get(db, "meta", "consistent_index", 16, val, cap, vlen);
    bbolt_close(db);
    return ok ? 0 : -1;
}

static void run_stream(const uint8_t *data, size_t size) {
    BboltStream *s = NULL;
    if (bbolt_stream_new(&s) != 0) abort();
    if (bbolt_stream_want(s, "meta", "consistent_index") != 0) abort();
    uint32_t x = (uint32_t)size * 2654435761u; /* chunk sizes 1..64 KiB from the length */
    size_t off = 0;
    int rc = 0;
    while (off < size && rc == 0) {
        x = x * 1103515245u + 12345u;
        size_t n = 1 + (x >> 16) % 65536;
        if (n > size - off) n = size - off;
        rc = bbolt_stream_feed(s, data + off, n);
        off += n;
    }
    if (rc != 0 && rc != ERR_CORRUPT && rc != ERR_NOMEM) abort();
    size_t db_len = size % 512 == 32 ? size - 32 : size; /* etcd's trailer, as fullsnap reads it */
    int64_t rev = -1;
    if (rc == 0) rc = bbolt_stream_finish(s, db_len, &rev);
    if (rc != 0 && rc != ERR_CORRUPT && rc != ERR_UNSUPPORTED && rc != ERR_NOMEM) abort();
    char val[64], ref_val[64];
    size_t vlen = 0, ref_vlen = 0;
    int vrc =
        rc == 0 ? bbolt_stream_get(s, "meta", "consistent_index", val, sizeof val, &vlen) : -1;
    if (rc == 0 && vrc != 0 && vrc != ERR_NOT_FOUND && vrc != ERR_UNSUPPORTED) abort();
    int64_t ref_rev = -1;
    int ref_vrc = -1;
    if (rc == 0 && db_len > 0 &&
        reference(data, db_len, &ref_rev, ref_val, sizeof ref_val, &ref_vlen, &ref_vrc) == 0) {
        if (rev != ref_rev) abort(); /* a wrong revision would name a full snapshot wrongly */
        if (vrc == 0 && (ref_vrc != 0 || vlen != ref_vlen ||
                         memcmp(val, ref_val, vlen < sizeof val ? vlen : sizeof val) != 0))
            abort();
        if (vrc == ERR_NOT_FOUND && ref_vrc == 0) abort();
    }
    bbolt_stream_free(s);
}

/* Rewrites the FNV-1a checksum of the meta at page offset off (bbolt's meta.sum64); 1 if it
 * changed. */
static int fix_meta(uint8_t *d, size_t size, size_t off) {
    if (off + 16 + 64 > size) return 0;
    uint8_t *m = d + off + 16;
    uint64_t h = bbolt_fnv1a64(m, 56);
    if (get_le64(m + 56) == h) return 0;
    put_le64(m + 56, h);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_stream(data, size);
    if (size < 16 + 64) return 0;
    uint8_t *copy = malloc(size);
    if (!copy) abort();
    memcpy(copy, data, size);
    uint32_t ps = get_le32(copy + 24);
    int changed = fix_meta(copy, size, 0);
    if (ps >= 512 && ps <= 65536 && (ps & (ps - 1)) == 0) changed |= fix_meta(copy, size, ps);
    if (changed) run_stream(copy, size);
    free(copy);
    return 0;
}
