/* fetch_cache: see fetch_cache.h. */
#include "fetch_cache.h"
#include "../common/log.h"
#include "../format/bbolt.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void fetch_cache_path(const char *dir, Store *store, const Snapshot *snap, char *out, size_t cap) {
    const char *d = store_scope(store);
    uint64_t h = bbolt_fnv1a64(d, strlen(d)) * 31 ^ bbolt_fnv1a64(snap->key, strlen(snap->key));
    int full = snap->kind == SNAP_FULL;
    snprintf(out, cap, "%s/%s-%016llx.%s", dir, full ? "full" : "delta", (unsigned long long)h,
             full ? "db" : "json");
}

int fetch_cache_wants(const Snapshot *snap) {
    return !snap->encrypted;
}

int fetch_cache_lookup(const char *path, const Snapshot *snap, char *extra, size_t cap) {
    char ok[4200], line[1200], want[1200];
    if (cap) extra[0] = '\0';
    if (!fetch_cache_wants(snap)) return 0;
    snprintf(ok, sizeof ok, "%s.ok", path);
    FILE *f = fopen(ok, "r");
    if (!f) return 0;
    int hit = fgets(line, sizeof line, f) != NULL;
    if (hit && fgets(extra, (int)cap, f)) {
        extra[strcspn(extra, "\n")] = '\0';
    } else if (cap) {
        extra[0] = '\0';
    }
    fclose(f);
    snprintf(want, sizeof want, "%s %lld\n", snap->key, (long long)snap->size);
    return hit && strcmp(line, want) == 0 && access(path, R_OK) == 0;
}

void fetch_cache_commit(const char *path, const Snapshot *snap, const char *extra) {
    char ok[4200];
    snprintf(ok, sizeof ok, "%s.ok", path);
    FILE *f = fopen(ok, "w");
    int bad = !f || fprintf(f, "%s %lld\n%s\n", snap->key, (long long)snap->size, extra) < 0;
    if (f && fclose(f)) bad = 1;
    if (!bad) return;
    log_warn("could not keep %s in the cache (%s)", snap->key, ok);
    unlink(ok);
}
