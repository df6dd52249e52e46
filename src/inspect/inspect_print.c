/* inspect_print: see inspect_print.h. */
#include "inspect_print.h"
#include "../backup/delta.h"
#include "../common/err.h"
#include "../common/mem.h"
#include "../format/bbolt.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* One record kept beyond the sorter's next call: a key's state at a view. */
typedef struct Kept {
    int has;
    InspectRec h;
    uint8_t *bytes; /* key then value */
    size_t cap;
} Kept;

static int kept_set(Kept *k, const InspectRec *h, const uint8_t *key, const uint8_t *value) {
    size_t need = (size_t)h->key_len + h->value_len;
    if (need > k->cap) {
        uint8_t *p = realloc(k->bytes, need);
        if (!p) return err_set(ERR_NOMEM, "out of memory for a %zu-byte record", need);
        k->bytes = p;
        k->cap = need;
    }
    if (h->key_len) memcpy(k->bytes, key, h->key_len);
    if (h->value_len) memcpy(k->bytes + h->key_len, value, h->value_len);
    k->h = *h;
    k->has = 1;
    return 0;
}

static const uint8_t *kept_key(const Kept *k) {
    return k->bytes;
}
static const uint8_t *kept_value(const Kept *k) {
    return k->bytes + k->h.key_len;
}
static int kept_alive(const Kept *k) {
    return k->has && !k->h.tombstone;
}

static int same_key(const Kept *k, const uint8_t *key, size_t len) {
    return k->has && bbolt_key_cmp(kept_key(k), k->h.key_len, key, len) == 0;
}

/* n bytes as padded standard base64 (what Go's encoding/json writes for []byte). */
static void put_b64(FILE *f, const uint8_t *p, size_t n) {
    unsigned char buf[4 * 1024 + 1];
    while (n) {
        size_t take = n < 3 * 1024 ? n : 3 * 1024;
        int w = EVP_EncodeBlock(buf, p, (int)take);
        fwrite(buf, 1, (size_t)w, f);
        p += take;
        n -= take;
    }
}

/* ,"name":v when v is not zero (Go's omitempty); first: no comma before it. */
static void put_num(FILE *f, const char *name, int64_t v, int *first) {
    if (!v) return;
    fprintf(f, "%s\"%s\":%" PRId64, *first ? "" : ",", name, v);
    *first = 0;
}

static int end_output(FILE *f, int rc) {
    if (!rc && (ferror(f) || fflush(f)))
        rc = err_set(ERR_IO, "write the output: %s", strerror(errno ? errno : EIO));
    return rc;
}

/* Bytes as text for people: printable ASCII as it is, any other byte as \xNN. */
static void put_text(FILE *f, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
            fputc(p[i], f);
        else
            fprintf(f, "\\x%02x", p[i]);
    }
}

/* ---------- get ---------- */

typedef struct GetOut {
    FILE *f;
    InspectFormat fmt;
    int keys_only;
    int64_t limit;
    uint64_t count, printed;
} GetOut;

static void get_emit(GetOut *g, const Kept *k) {
    if (!kept_alive(k)) return;
    g->count++;
    if (g->limit && g->printed >= (uint64_t)g->limit) return;
    const InspectRec *h = &k->h;
    FILE *f = g->f;
    if (g->fmt == INSPECT_SIMPLE) {
        fwrite(kept_key(k), 1, h->key_len, f);
        fputc('\n', f);
        if (!g->keys_only) fwrite(kept_value(k), 1, h->value_len, f);
        fputc('\n', f);
    } else if (g->fmt == INSPECT_JSON) {
        fputs(g->printed ? ",{\"key\":\"" : ",\"kvs\":[{\"key\":\"", f);
        put_b64(f, kept_key(k), h->key_len);
        fputc('"', f);
        int first = 0;
        put_num(f, "create_revision", h->create_revision, &first);
        put_num(f, "mod_revision", h->main, &first);
        put_num(f, "version", h->version, &first);
        if (!g->keys_only && h->value_len) {
            fputs(",\"value\":\"", f);
            put_b64(f, kept_value(k), h->value_len);
            fputc('"', f);
        }
        put_num(f, "lease", h->lease, &first);
        fputc('}', f);
    } else {
        char type[256];
        if (!inspect_kube_type(kept_value(k), h->value_len, type, sizeof type))
            snprintf(type, sizeof type, "-");
        fprintf(f, "%-10" PRId64 " %-10" PRId64 " %-7" PRId64 " %-10" PRIu64 " %-40s ", h->main,
                h->create_revision, h->version, h->value_size, type);
        put_text(f, kept_key(k), h->key_len);
        fputc('\n', f);
    }
    g->printed++;
}

int inspect_print_get(RecSort *sort, FILE *out, InspectFormat fmt, int keys_only, int64_t limit,
                      int64_t revision, uint64_t *count) {
    GetOut g = {out, fmt, keys_only, limit, 0, 0};
    Kept state = {0};
    int rc = 0;
    if (fmt == INSPECT_JSON) fprintf(out, "{\"header\":{\"revision\":%" PRId64 "}", revision);
    if (fmt == INSPECT_TABLE)
        fprintf(out, "%-10s %-10s %-7s %-10s %-40s %s\n", "MOD_REV", "CREATE_REV", "VERSION",
                "SIZE", "TYPE", "KEY");
    for (;;) {
        const InspectRec *h;
        const uint8_t *key, *value;
        int got = 0;
        if ((rc = recsort_next(sort, &h, &key, &value, &got)) || !got) break;
        if (!(h->views & 1u)) continue;
        if (state.has && !same_key(&state, key, h->key_len)) get_emit(&g, &state);
        if ((rc = kept_set(&state, h, key, value))) break;
    }
    if (!rc && state.has) get_emit(&g, &state);
    if (fmt == INSPECT_JSON) {
        if (g.printed) fputc(']', out);
        if (g.limit && g.count > g.printed) fputs(",\"more\":true", out);
        if (g.count) fprintf(out, ",\"count\":%" PRIu64, g.count);
        fputs("}\n", out);
    }
    free(state.bytes);
    *count = g.count;
    return end_output(out, rc);
}

/* ---------- diff ---------- */

typedef struct DiffOut {
    FILE *f;
    InspectFormat fmt;
    int64_t from;
    uint64_t listed;
    uint64_t events;             /* puts and deletes of the key after from, up to to */
    int64_t last_main, last_sub; /* the last such record counted (a record may come twice) */
} DiffOut;

static void diff_state_json(FILE *f, const char *name, const Kept *k) {
    const InspectRec *h = &k->h;
    fprintf(f,
            ",\"%s\":{\"create_revision\":%" PRId64 ",\"mod_revision\":%" PRId64
            ",\"version\":%" PRId64 ",\"lease\":%" PRId64 ",\"value_size\":%" PRIu64 "}",
            name, h->create_revision, h->main, h->version, h->lease, h->value_size);
}

static void diff_emit(DiffOut *d, const Kept *a, const Kept *b) {
    int in_a = kept_alive(a), in_b = kept_alive(b);
    if (!in_a && !in_b) return;
    if (in_a && in_b && a->h.main == b->h.main && a->h.sub == b->h.sub) return;
    const char *what = !in_a ? "created" : !in_b ? "deleted" : "changed";
    const Kept *k = in_a ? a : b;
    FILE *f = d->f;
    if (d->fmt == INSPECT_JSON) {
        fputs(d->listed ? ",{\"key\":\"" : "{\"key\":\"", f);
        put_b64(f, kept_key(k), k->h.key_len);
        fprintf(f, "\",\"change\":\"%s\"", what);
        if (in_a) diff_state_json(f, "from", a);
        if (in_b) diff_state_json(f, "to", b);
        if (!in_b && b->has) fprintf(f, ",\"deleted_revision\":%" PRId64, b->h.main);
        fprintf(f, ",\"events\":%" PRIu64 "}", d->events);
    } else {
        fprintf(f, "%-8s ", what);
        put_text(f, kept_key(k), k->h.key_len);
        if (!in_a)
            fprintf(f, "  created at %" PRId64, b->h.create_revision);
        else if (!in_b && b->has)
            fprintf(f, "  deleted at %" PRId64, b->h.main);
        else if (!in_b)
            fprintf(f, "  deleted (the revision is compacted away)");
        else
            fprintf(f, "  mod revision %" PRId64 " -> %" PRId64, a->h.main, b->h.main);
        fprintf(f, "  (%" PRIu64 " puts and deletes between)\n", d->events);
    }
    d->listed++;
}

int inspect_print_diff(RecSort *sort, FILE *out, InspectFormat fmt, int64_t from, int64_t to,
                       uint64_t *count) {
    DiffOut d = {out, fmt, from, 0, 0, 0, 0};
    Kept a = {0}, b = {0}, cur = {0}; /* states at from and to; cur: the key being read */
    int rc = 0;
    if (fmt == INSPECT_JSON)
        fprintf(out, "{\"from_revision\":%" PRId64 ",\"to_revision\":%" PRId64 ",\"changes\":[",
                from, to);
    for (;;) {
        const InspectRec *h;
        const uint8_t *key, *value;
        int got = 0;
        if ((rc = recsort_next(sort, &h, &key, &value, &got)) || !got) break;
        if (cur.has && !same_key(&cur, key, h->key_len)) {
            diff_emit(&d, &a, &b);
            a.has = b.has = 0;
            d.events = 0;
            d.last_main = d.last_sub = 0;
        }
        if ((rc = kept_set(&cur, h, key, NULL))) break;
        cur.h.value_len = 0;
        if ((h->views & 1u) && (rc = kept_set(&a, h, key, NULL))) break;
        if ((h->views & 2u) && (rc = kept_set(&b, h, key, NULL))) break;
        if ((h->views & 2u) && h->main > from && (h->main != d.last_main || h->sub != d.last_sub)) {
            d.events++;
            d.last_main = h->main;
            d.last_sub = h->sub;
        }
    }
    if (!rc && cur.has) diff_emit(&d, &a, &b);
    if (fmt == INSPECT_JSON) fputs("]}\n", out);
    FREE_ALL(a.bytes, b.bytes, cur.bytes);
    *count = d.listed;
    return end_output(out, rc);
}

/* ---------- history ---------- */

int inspect_print_history(RecSort *sort, FILE *out, InspectFormat fmt, const uint8_t *key_asked,
                          size_t key_len, const Snapshot *objects, uint64_t *count) {
    int rc = 0;
    uint64_t n = 0;
    int64_t last_main = 0, last_sub = -1;
    if (fmt == INSPECT_JSON) {
        fputs("{\"key\":\"", out);
        put_b64(out, key_asked, key_len);
        fputs("\",\"events\":[", out);
    }
    for (;;) {
        const InspectRec *h;
        const uint8_t *key, *value;
        int got = 0;
        if ((rc = recsort_next(sort, &h, &key, &value, &got)) || !got) break;
        if (!(h->views & 1u) || (h->main == last_main && h->sub == last_sub)) continue;
        last_main = h->main;
        last_sub = h->sub;
        char when[48] = "-";
        if (h->time_ns && delta_format_time(h->time_ns, when)) snprintf(when, sizeof when, "-");
        const char *type = h->tombstone ? "DELETE" : "PUT";
        const char *obj = objects[h->object].snap_name;
        if (fmt == INSPECT_JSON) {
            fprintf(out, "%s{\"type\":\"%s\",\"revision\":%" PRId64, n ? "," : "", type, h->main);
            int first = 0;
            put_num(out, "create_revision", h->create_revision, &first);
            put_num(out, "version", h->version, &first);
            put_num(out, "lease", h->lease, &first);
            fprintf(out, ",\"value_size\":%" PRIu64, h->value_size);
            if (h->time_ns) fprintf(out, ",\"time\":\"%s\"", when);
            fprintf(out, ",\"object\":\"%s\"}", obj);
        } else {
            fprintf(out, "%-10" PRId64 " %-6s version %-6" PRId64 " size %-9" PRIu64 " %-32s %s\n",
                    h->main, type, h->version, h->value_size, when, obj);
        }
        n++;
    }
    if (fmt == INSPECT_JSON) fputs("]}\n", out);
    *count = n;
    return end_output(out, rc);
}
