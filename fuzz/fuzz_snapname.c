/* fuzz_snapname: libFuzzer target over snapname_parse, the parser of object keys listed from a
 * store. Input: first line = store prefix, each further line = one key. Every key that parses
 * must satisfy the Snapshot invariants and survive a format -> parse round trip; all parsed
 * keys are then sorted and a latest set is chosen, and both results are checked. A parsed name
 * must be safe as a local file name (no "..", backslash or control character). */
#include "store/snapname.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KEYS 64

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_snapname: check failed: %s (line %d)\n", #cond, __LINE__);       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_parsed(const Snapshot *s, const char *key, const char *prefix) {
    CHECK(s->kind == SNAP_FULL || s->kind == SNAP_INCR);
    CHECK(s->version == 1 || s->version == 2);
    CHECK(s->start_revision >= 0 && s->start_revision <= s->last_revision);
    CHECK(s->created_on >= 0);
    CHECK(strcmp(s->key, key) == 0);
    CHECK(strncmp(s->key, s->prefix, strlen(s->prefix)) == 0);
    CHECK(s->version == 1 ? s->snap_dir[0] != '\0' : s->snap_dir[0] == '\0');
    CHECK(memchr(s->compression_suffix, '\0', sizeof s->compression_suffix) != NULL);
    /* a parsed name is safe as a local file name: no "..", backslash or control character */
    CHECK(strstr(s->snap_name, "..") == NULL && strchr(s->snap_name, '\\') == NULL);
    for (const char *c = s->snap_name; *c; c++)
        CHECK((unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);

    /* Round trip through the v2 name. */
    char name[256], key2[1024], sfx[32];
    CHECK(strcmp(s->compression_suffix, SNAPNAME_ENC_SUFFIX) != 0);
    CHECK(snapname_suffix(s->encrypted, s->compression_suffix, sfx, sizeof sfx) == 0);
    CHECK(snapname_format(s->kind, s->start_revision, s->last_revision, s->created_on, sfx,
                          s->is_final, name, sizeof name) == 0);
    /* Same store prefix as parsed (s->prefix ends in "v1/" or "v2/"), now in the v2 layout. */
    size_t pl = strlen(s->prefix);
    CHECK(pl >= 3);
    int n = snprintf(key2, sizeof key2, "%.*sv2/%s", (int)(pl - 3), s->prefix, name);
    if (n < 0 || (size_t)n >= sizeof key2) return; /* long prefix: nothing more to check */
    Snapshot t;
    CHECK(snapname_parse(key2, prefix, &t) == 0);
    CHECK(t.kind == s->kind && t.start_revision == s->start_revision);
    CHECK(t.last_revision == s->last_revision && t.created_on == s->created_on);
    CHECK(t.is_final == s->is_final && !t.is_chunk && t.version == 2);
    CHECK(strcmp(t.compression_suffix, s->compression_suffix) == 0);
    CHECK(t.encrypted == s->encrypted);
    CHECK(strcmp(t.snap_name, name) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    Snapshot *snaps = malloc(MAX_KEYS * sizeof *snaps);
    size_t *idx = malloc(MAX_KEYS * sizeof *idx);
    if (!snaps || !idx) goto done;

    char *line = buf, *nl = strchr(line, '\n');
    const char *prefix = "";
    if (nl) {
        *nl = '\0';
        prefix = line;
        line = nl + 1;
    }
    size_t n = 0;
    while (line && n < MAX_KEYS) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (snapname_parse(line, prefix, &snaps[n]) == 0) {
            check_parsed(&snaps[n], line, prefix);
            n++;
        }
        line = nl ? nl + 1 : NULL;
    }

    snapname_sort(snaps, n);
    for (size_t i = 1; i < n; i++) {
        const Snapshot *a = &snaps[i - 1], *b = &snaps[i];
        CHECK(a->last_revision <= b->last_revision);
        if (a->last_revision == b->last_revision) CHECK(a->is_chunk <= b->is_chunk);
    }
    ptrdiff_t full = -2;
    size_t nd = 0;
    snapname_latest_set(snaps, n, &full, idx, &nd);
    CHECK(full >= -1 && full < (ptrdiff_t)n);
    if (full >= 0) {
        CHECK(snaps[full].kind == SNAP_FULL && !snaps[full].is_chunk);
        for (size_t i = (size_t)full + 1; i < n; i++)
            CHECK(snaps[i].is_chunk || snaps[i].kind == SNAP_INCR);
    }
    CHECK(nd <= n);
    for (size_t k = 0; k < nd; k++) {
        CHECK(idx[k] < n && (ptrdiff_t)idx[k] > full);
        CHECK(snaps[idx[k]].kind == SNAP_INCR && !snaps[idx[k]].is_chunk);
        if (k > 0) CHECK(idx[k] > idx[k - 1]);
    }
done:
    free(idx);
    free(snaps);
    free(buf);
    return 0;
}
