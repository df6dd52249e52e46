/* fuzz_gc: libFuzzer target over gc_plan. Input: a 10-byte header (policy, max-backups,
 * retention u32 seconds, now offset i32 seconds; little endian) then 4-byte records (flags: kind,
 * chunk, revision step, time direction; 24-bit time offset in seconds). Snapshots are built with
 * non-decreasing revisions and sorted as the store sorts them. Checks: the plan succeeds, never
 * touches a chunk, the newest full or a delta after it; older deltas go iff older than the
 * retention; LimitBased keeps exactly min(fulls, max-backups) fulls; Exponential keeps >= 1. */
#include "backup/gc.h"
#include "store/snapname.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SNAPS 256
#define BASE_TIME INT64_C(1700000000)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_gc: check failed: %s (line %d)\n", #cond, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 10) return 0;
    GcPolicy policy = (data[0] & 1) ? GC_LIMIT_BASED : GC_EXPONENTIAL;
    int max_backups = 1 + data[1] % 16;
    int64_t retention = le32(data + 2);
    int64_t now = BASE_TIME + (int32_t)le32(data + 6);
    data += 10;
    size -= 10;

    size_t n = size / 4;
    if (n > MAX_SNAPS) n = MAX_SNAPS;
    Snapshot *snaps = calloc(n ? n : 1, sizeof *snaps);
    uint8_t *rm = calloc(n ? n : 1, 1);
    if (!snaps || !rm) goto done;

    int64_t rev = (n && (data[0] & 0x80)) ? INT64_C(123456789012) : 1;
    int64_t t = BASE_TIME - 40 * 86400;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *r = data + 4 * i;
        Snapshot *s = &snaps[i];
        s->kind = (r[0] & 3) == 0 ? SNAP_FULL : SNAP_INCR;
        s->is_chunk = (r[0] & 0x1c) == 0x1c;
        int64_t last = rev + ((r[0] >> 5) & 1);
        s->start_revision = s->kind == SNAP_FULL ? 0 : rev;
        s->last_revision = last;
        int64_t off = (int64_t)r[1] | (int64_t)r[2] << 8 | (int64_t)r[3] << 16;
        t += (r[0] & 0x40) ? -off / 16 : off / 4; /* mostly forward, sometimes back (skew) */
        s->created_on = t;
        s->version = 2;
        char name[200];
        CHECK(snapname_format(s->kind, s->start_revision, s->last_revision, t < 0 ? 0 : t, "", 0,
                              name, sizeof name) == 0);
        snprintf(s->key, sizeof s->key, "v2/%s%s", name, s->is_chunk ? "/0000000001" : "");
        rev = last + 1;
    }
    snapname_sort(snaps, n);

    CHECK(gc_plan(snaps, n, policy, max_backups, retention, now, rm) == 0);

    ptrdiff_t latest = -1;
    for (size_t i = n; i-- > 0;) {
        if (!snaps[i].is_chunk && snaps[i].kind == SNAP_FULL) {
            latest = (ptrdiff_t)i;
            break;
        }
    }
    size_t fulls = 0, kept = 0;
    for (size_t i = 0; i < n; i++) {
        const Snapshot *s = &snaps[i];
        if (s->is_chunk || latest < 0 || (ptrdiff_t)i >= latest) {
            CHECK(!rm[i]);
            if (s->is_chunk || s->kind != SNAP_FULL) continue;
        }
        if (s->kind == SNAP_INCR) {
            CHECK(rm[i] == (s->created_on < now - retention));
            continue;
        }
        fulls++;
        kept += !rm[i];
    }
    if (policy == GC_LIMIT_BASED)
        CHECK(kept == (fulls < (size_t)max_backups ? fulls : (size_t)max_backups));
    else
        CHECK(kept >= (fulls ? 1u : 0u));

done:
    free(snaps);
    free(rm);
    return 0;
}
