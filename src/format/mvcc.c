/* mvcc: etcd's key/lease bucket encoding; see mvcc.h. Varints are protobuf base-128, int64
 * fields as their two's-complement uint64 (a negative value takes 10 bytes), as gogoproto
 * writes them. */
#include "mvcc.h"
#include "../common/byteorder.h"
#include "../common/err.h"

#include <string.h>

size_t mvcc_rev_key(int64_t main_rev, int64_t sub_rev, int tombstone,
                    uint8_t out[MVCC_MARK_BYTES]) {
    put_be64(out, (uint64_t)main_rev);
    out[8] = '_';
    put_be64(out + 9, (uint64_t)sub_rev);
    if (!tombstone) return MVCC_REV_BYTES;
    out[17] = 't';
    return MVCC_MARK_BYTES;
}

int mvcc_rev_parse(const uint8_t *key, size_t len, int64_t *main_rev, int64_t *sub_rev,
                   int *tombstone) {
    if (len != MVCC_REV_BYTES && len != MVCC_MARK_BYTES)
        return err_set(ERR_CORRUPT, "revision key of %zu bytes (want 17 or 18)", len);
    if (key[8] != '_') return err_set(ERR_CORRUPT, "revision key without '_' separator");
    if (len == MVCC_MARK_BYTES && key[17] != 't')
        return err_set(ERR_CORRUPT, "revision key with unknown mark 0x%02x", key[17]);
    if (main_rev) *main_rev = (int64_t)get_be64(key);
    if (sub_rev) *sub_rev = (int64_t)get_be64(key + 9);
    if (tombstone) *tombstone = len == MVCC_MARK_BYTES;
    return 0;
}

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t varint_put(uint8_t *p, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static int varint_get(const uint8_t *p, size_t len, size_t *pos, uint64_t *v) {
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*pos >= len) return -1;
        uint8_t b = p[(*pos)++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* tag + varint for a nonzero int64 field; 0 bytes for zero (proto3 omits it) */
static size_t int_field_len(int64_t v) {
    return v ? 1 + varint_len((uint64_t)v) : 0;
}

static size_t bytes_field_len(size_t n) {
    return n ? 1 + varint_len(n) + n : 0;
}

size_t mvcc_kv_size(const MvccKeyValue *kv) {
    return bytes_field_len(kv->key_len) + int_field_len(kv->create_revision) +
           int_field_len(kv->mod_revision) + int_field_len(kv->version) +
           bytes_field_len(kv->value_len) + int_field_len(kv->lease);
}

static size_t put_int_field(uint8_t *p, unsigned field, int64_t v) {
    if (!v) return 0;
    p[0] = (uint8_t)(field << 3); /* wire type 0 */
    return 1 + varint_put(p + 1, (uint64_t)v);
}

static size_t put_bytes_field(uint8_t *p, unsigned field, const uint8_t *b, size_t n) {
    if (!n) return 0;
    p[0] = (uint8_t)(field << 3 | 2);
    size_t k = 1 + varint_put(p + 1, n);
    memcpy(p + k, b, n);
    return k + n;
}

size_t mvcc_kv_marshal(const MvccKeyValue *kv, uint8_t *out) {
    size_t n = 0;
    n += put_bytes_field(out + n, 1, kv->key, kv->key_len);
    n += put_int_field(out + n, 2, kv->create_revision);
    n += put_int_field(out + n, 3, kv->mod_revision);
    n += put_int_field(out + n, 4, kv->version);
    n += put_bytes_field(out + n, 5, kv->value, kv->value_len);
    n += put_int_field(out + n, 6, kv->lease);
    return n;
}

/* Skips a field of wire type wt at *pos. 0 or -1. */
static int skip_field(const uint8_t *p, size_t len, size_t *pos, unsigned wt) {
    uint64_t v;
    switch (wt) {
    case 0:
        return varint_get(p, len, pos, &v);
    case 1:
        if (len - *pos < 8) return -1;
        *pos += 8;
        return 0;
    case 2:
        if (varint_get(p, len, pos, &v) || v > len - *pos) return -1;
        *pos += (size_t)v;
        return 0;
    case 5:
        if (len - *pos < 4) return -1;
        *pos += 4;
        return 0;
    default:
        return -1;
    }
}

int mvcc_kv_unmarshal(const uint8_t *buf, size_t len, MvccKeyValue *out) {
    memset(out, 0, sizeof *out);
    size_t pos = 0;
    while (pos < len) {
        uint64_t tag, v;
        if (varint_get(buf, len, &pos, &tag)) goto bad;
        unsigned field = (unsigned)(tag >> 3), wt = (unsigned)(tag & 7);
        if ((field == 1 || field == 5) && wt == 2) {
            if (varint_get(buf, len, &pos, &v) || v > len - pos) goto bad;
            if (field == 1) {
                out->key = buf + pos;
                out->key_len = (size_t)v;
            } else {
                out->value = buf + pos;
                out->value_len = (size_t)v;
            }
            pos += (size_t)v;
        } else if (field >= 2 && field <= 6 && field != 5 && wt == 0) {
            if (varint_get(buf, len, &pos, &v)) goto bad;
            int64_t *dst = field == 2   ? &out->create_revision
                           : field == 3 ? &out->mod_revision
                           : field == 4 ? &out->version
                                        : &out->lease;
            *dst = (int64_t)v;
        } else if (field == 0 || skip_field(buf, len, &pos, wt)) {
            goto bad;
        }
    }
    return 0;
bad:
    return err_set(ERR_CORRUPT, "mvccpb.KeyValue of %zu bytes is malformed at byte %zu", len, pos);
}

size_t mvcc_lease_marshal(int64_t id, int64_t ttl, int64_t remaining_ttl,
                          uint8_t out[MVCC_LEASE_MAX]) {
    size_t n = 0;
    n += put_int_field(out + n, 1, id);
    n += put_int_field(out + n, 2, ttl);
    n += put_int_field(out + n, 3, remaining_ttl);
    return n;
}

int mvcc_lease_unmarshal(const uint8_t *buf, size_t len, int64_t *id, int64_t *ttl,
                         int64_t *remaining_ttl) {
    int64_t vals[4] = {0, 0, 0, 0};
    size_t pos = 0;
    while (pos < len) {
        uint64_t tag, v;
        if (varint_get(buf, len, &pos, &tag)) goto bad;
        unsigned field = (unsigned)(tag >> 3), wt = (unsigned)(tag & 7);
        if (field >= 1 && field <= 3 && wt == 0) {
            if (varint_get(buf, len, &pos, &v)) goto bad;
            vals[field] = (int64_t)v;
        } else if (field == 0 || skip_field(buf, len, &pos, wt)) {
            goto bad;
        }
    }
    if (id) *id = vals[1];
    if (ttl) *ttl = vals[2];
    if (remaining_ttl) *remaining_ttl = vals[3];
    return 0;
bad:
    return err_set(ERR_CORRUPT, "leasepb.Lease of %zu bytes is malformed at byte %zu", len, pos);
}

void mvcc_lease_key(int64_t id, uint8_t out[8]) {
    put_be64(out, (uint64_t)id);
}
