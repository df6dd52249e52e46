/* snapobj: see snapobj.h. The read chain is one IoFilterGroup over the store's reader:
 * stored bytes counted -> decrypted when the name says ".enc" -> decompressed by the name's
 * compression suffix, at most the limit of its kind -> plain bytes counted. */
#include "snapobj.h"
#include "../codec/compress.h"
#include "../codec/filter_group.h"
#include "../common/err.h"
#include "../common/mem.h"

#include <stdatomic.h>
#include <stdlib.h>

static _Atomic uint64_t max_delta_bytes = SNAPOBJ_MAX_DELTA_DEFAULT;
static _Atomic uint64_t max_full_bytes = SNAPOBJ_MAX_FULL_DEFAULT;

void snapobj_set_limits(uint64_t max_delta, uint64_t max_full) {
    atomic_store(&max_delta_bytes, max_delta ? max_delta : SNAPOBJ_MAX_DELTA_DEFAULT);
    atomic_store(&max_full_bytes, max_full ? max_full : SNAPOBJ_MAX_FULL_DEFAULT);
}

/* The store's bytes as they are read, added to a progress. */
typedef struct {
    IoReader base;
    IoReader *src; /* borrowed */
    Progress *progress;
} CountingReader;

static int counting_read(IoReader *rd, void *buf, size_t cap, size_t *got) {
    CountingReader *c = (CountingReader *)rd;
    int rc = io_read(c->src, buf, cap, got);
    if (!rc) progress_add(c->progress, *got);
    return rc;
}

static void counting_free(IoReader *rd) {
    (void)rd; /* inside SnapObjReader */
}

static const IoReaderVt counting_vt = {counting_read, counting_free};

struct SnapObjReader {
    IoReader *raw;
    CountingReader counting;
    IoFilterGroup *g;
};

int snapobj_open_read(Store *s, const Snapshot *snap, SnapObjReader **out) {
    return snapobj_open_read_progress(s, snap, NULL, out);
}

int snapobj_open_read_progress(Store *s, const Snapshot *snap, Progress *progress,
                               SnapObjReader **out) {
    *out = NULL;
    CompressKind kind;
    if (compress_from_suffix(snap->compression_suffix, &kind))
        return err_set(ERR_UNSUPPORTED, "%s: unknown compression suffix \"%s\"", snap->key,
                       snap->compression_suffix);
    const Keyring *kr = store_keyring(s);
    if (snap->encrypted && !kr)
        return err_set(ERR_INVALID,
                       "%s is encrypted and no encryption keys were given "
                       "(--encryption-key-file, ETCDBR_ENCRYPTION_KEY_FILE or "
                       "ETCDBR_ENCRYPTION_KEYS)",
                       snap->key);
    SnapObjReader *r = calloc(1, sizeof *r);
    if (!r) return err_set(ERR_NOMEM, "out of memory");
    int rc = store_open_read(s, snap, &r->raw);
    if (rc) {
        free(r);
        return err_wrap(rc, "%s", snap->key);
    }
    r->counting = (CountingReader){{&counting_vt}, r->raw, progress};
    r->g = io_filter_group_new_reader(progress ? &r->counting.base : r->raw);
    rc = r->g ? 0 : err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = io_filter_group_add_count(r->g, "stored-bytes");
    char ident[128];
    if (!rc && snap->encrypted && !(rc = snapname_identity(snap, ident, sizeof ident)))
        rc = io_filter_group_add_decrypt_bound(r->g, kr, ident);
    DecompressLimit lim = {atomic_load(&max_full_bytes), "--max-full-size"};
    if (snap->kind != SNAP_FULL)
        lim = (DecompressLimit){atomic_load(&max_delta_bytes), "--max-delta-size"};
    if (!rc) rc = io_filter_group_add_decompress_limited(r->g, kind, &lim);
    if (!rc) rc = io_filter_group_add_count(r->g, "plain-bytes");
    if (!rc && !io_filter_group_reader(r->g)) rc = err_set(ERR_NOMEM, "out of memory");
    RETURN_BUILT(rc, out, r, snapobj_close(r));
}

IoReader *snapobj_reader(SnapObjReader *r) {
    return io_filter_group_reader(r->g);
}

int snapobj_counts(const SnapObjReader *r, uint64_t *stored, uint64_t *plain) {
    int rc = io_filter_group_count(r->g, "stored-bytes", stored);
    if (!rc) rc = io_filter_group_count(r->g, "plain-bytes", plain);
    return rc;
}

void snapobj_close(SnapObjReader *r) {
    if (!r) return;
    io_filter_group_free(r->g);
    io_reader_free(r->raw);
    free(r);
}
