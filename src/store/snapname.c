/* snapname: parsing, formatting, ordering and latest-set selection of snapshot object names
 * (docs/go-tool.md §3). Parsing is stricter than the Go tool's: the version directory must be the
 * path component right after the store prefix, revisions and times are plain non-negative decimals
 * that fit int64, and no component may be empty, so foreign objects are reported, not misread.
 * All functions are pure (no I/O, no globals) and thread-safe. */
#include "snapname.h"
#include "../common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUFFIX_MAX_CHARS 14 /* ".<14 chars>" + NUL fills Snapshot.compression_suffix */
#define CHUNK_DIGITS 10

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static int is_alnum(char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Plain decimal (digits only, leading zeros allowed) into a non-negative int64. */
static int parse_dec(const char *s, size_t len, int64_t *out) {
    if (len == 0) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i])) return -1;
        int d = s[i] - '0';
        if (v > (INT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int all_digits(const char *s, size_t len) {
    if (len == 0) return 0;
    for (size_t i = 0; i < len; i++)
        if (!is_digit(s[i])) return 0;
    return 1;
}

/* A compression suffix as stored: "" or "." followed by 1..SUFFIX_MAX_CHARS letters/digits. */
static int compression_suffix_valid(const char *sfx) {
    if (sfx[0] == '\0') return 1;
    size_t n = strlen(sfx);
    if (sfx[0] != '.' || n < 2 || n - 1 > SUFFIX_MAX_CHARS) return 0;
    for (size_t i = 1; i < n; i++)
        if (!is_alnum(sfx[i])) return 0;
    return 1;
}

#define ENC_LEN (sizeof SNAPNAME_ENC_SUFFIX - 1)

/* snapname_format's suffix: [".enc"] then a compression suffix other than ".enc" or ".final". */
static int suffix_valid(const char *sfx) {
    if (strncmp(sfx, SNAPNAME_ENC_SUFFIX, ENC_LEN) == 0 &&
        (sfx[ENC_LEN] == '\0' || sfx[ENC_LEN] == '.'))
        sfx += ENC_LEN;
    return compression_suffix_valid(sfx) && strcmp(sfx, SNAPNAME_ENC_SUFFIX) != 0 &&
           strcmp(sfx, ".final") != 0;
}

int snapname_suffix(int encrypted, const char *compression_suffix, char *out, size_t cap) {
    if (!compression_suffix) compression_suffix = "";
    int n = snprintf(out, cap, "%s%s", encrypted ? SNAPNAME_ENC_SUFFIX : "", compression_suffix);
    if (n < 0 || (size_t)n >= cap) {
        if (cap) out[0] = '\0';
        return err_set(ERR_INVALID, "snapshot name suffix: does not fit in %zu bytes", cap);
    }
    return 0;
}

int snapname_format(SnapKind kind, int64_t start, int64_t last, int64_t created_on,
                    const char *suffix, int is_final, char *out, size_t cap) {
    const char *compression_suffix = suffix ? suffix : "";
    if (!out || cap == 0) return err_set(ERR_INVALID, "snapshot name: no output buffer");
    out[0] = '\0';
    if (kind != SNAP_FULL && kind != SNAP_INCR)
        return err_set(ERR_INVALID, "snapshot name: unknown kind %d", (int)kind);
    if (start < 0 || last < 0 || created_on < 0)
        return err_set(ERR_INVALID, "snapshot name: negative revision or time (%lld, %lld, %lld)",
                       (long long)start, (long long)last, (long long)created_on);
    if (start > last)
        return err_set(ERR_INVALID, "snapshot name: start revision %lld > last revision %lld",
                       (long long)start, (long long)last);
    if (last > SNAPNAME_REVISION_MAX || created_on > SNAPNAME_TIME_MAX)
        return err_set(ERR_INVALID, "snapshot name: revision %lld or time %lld out of range",
                       (long long)last, (long long)created_on);
    if (!suffix_valid(compression_suffix))
        return err_set(ERR_INVALID,
                       "snapshot name: bad suffix \"%s\" (want [.enc][.<compression>])",
                       compression_suffix);
    int n = snprintf(out, cap, "%s-%08lld-%08lld-%lld%s%s", kind == SNAP_FULL ? "Full" : "Incr",
                     (long long)start, (long long)last, (long long)created_on, compression_suffix,
                     is_final ? ".final" : "");
    if (n < 0 || (size_t)n >= cap) {
        out[0] = '\0';
        return err_set(ERR_INVALID, "snapshot name: does not fit in %zu bytes", cap);
    }
    return 0;
}

int snapname_new(SnapKind kind, int64_t start, int64_t last, int64_t created_on, const char *suffix,
                 int is_final, const char *key_prefix, Snapshot *out) {
    memset(out, 0, sizeof *out);
    out->size = -1;
    if (!suffix) suffix = "";
    if (!key_prefix) key_prefix = "";
    size_t kp = strlen(key_prefix);
    if (kp < 3 || strcmp(key_prefix + kp - 3, "v2/") != 0 || (kp > 3 && key_prefix[kp - 4] != '/'))
        return err_set(ERR_INVALID, "snapshot key prefix \"%s\": not \"v2/\" or \"<prefix>/v2/\"",
                       key_prefix);
    if (kp >= sizeof out->prefix)
        return err_set(ERR_INVALID, "snapshot key prefix longer than %zu bytes",
                       sizeof out->prefix - 1);
    int rc = snapname_format(kind, start, last, created_on, suffix, is_final, out->snap_name,
                             sizeof out->snap_name);
    if (rc) return rc;
    int n = snprintf(out->key, sizeof out->key, "%s%s", key_prefix, out->snap_name);
    if (n < 0 || (size_t)n >= sizeof out->key) {
        memset(out, 0, sizeof *out);
        out->size = -1;
        return err_set(ERR_INVALID, "snapshot key %s<name>: longer than %zu bytes", key_prefix,
                       sizeof out->key - 1);
    }
    memcpy(out->prefix, key_prefix, kp + 1);
    out->kind = kind;
    out->start_revision = start;
    out->last_revision = last;
    out->created_on = created_on;
    out->is_final = is_final ? 1 : 0;
    out->version = 2;
    /* suffix_valid (in snapname_format) allowed only [".enc"] then one compression suffix */
    if (strncmp(suffix, SNAPNAME_ENC_SUFFIX, ENC_LEN) == 0 &&
        (suffix[ENC_LEN] == '\0' || suffix[ENC_LEN] == '.')) {
        out->encrypted = 1;
        suffix += ENC_LEN;
    }
    snprintf(out->compression_suffix, sizeof out->compression_suffix, "%s", suffix);
    return 0;
}

/* Splits len bytes at p on sep into at most max parts (el[i], elen[i]; *n set): 0, or -1 when
 * there are more than max. A part may be empty. */
static int split_parts(const char *p, size_t len, char sep, size_t max, const char **el,
                       size_t *elen, size_t *n) {
    const char *end = p + len;
    for (*n = 0;; p++) {
        const char *cut = memchr(p, sep, (size_t)(end - p));
        if (*n == max) return -1;
        el[*n] = p;
        elen[*n] = (size_t)((cut ? cut : end) - p);
        (*n)++;
        if (!cut) return 0;
        p = cut;
    }
}

/* A name's last token: <secs>[.enc][.<compression>][.final], into s. */
static int parse_time_token(const char *key, const char *tok, size_t tlen, Snapshot *s) {
    const char *el[4];
    size_t elen[4], ne = 0;
    if (split_parts(tok, tlen, '.', 4, el, elen, &ne))
        return err_set(ERR_INVALID,
                       "snapshot key %s: too many '.' suffixes after the time (want at most "
                       "enc.<compression>.final)",
                       key);
    for (size_t i = 0; i < ne; i++)
        if (elen[i] == 0)
            return err_set(ERR_INVALID, "snapshot key %s: empty '.'-separated part in \"%.*s\"",
                           key, (int)tlen, tok);
    if (parse_dec(el[0], elen[0], &s->created_on) != 0)
        return err_set(ERR_INVALID,
                       "snapshot key %s: creation time \"%.*s\" is not non-negative decimal Unix "
                       "seconds",
                       key, (int)elen[0], el[0]);
    if (s->created_on > SNAPNAME_TIME_MAX)
        return err_set(ERR_INVALID,
                       "snapshot key %s: creation time %lld is after %lld (Unix seconds beyond "
                       "int64 nanoseconds, the year 2262)",
                       key, (long long)s->created_on, (long long)SNAPNAME_TIME_MAX);
    size_t n_sfx = ne - 1;
    size_t first = 1; /* the compression's element */
    if (n_sfx > 0 && elen[ne - 1] == 5 && memcmp(el[ne - 1], "final", 5) == 0) {
        s->is_final = 1;
        n_sfx--;
    }
    if (n_sfx > 0 && elen[1] == 3 && memcmp(el[1], "enc", 3) == 0) {
        s->encrypted = 1;
        n_sfx--;
        first = 2;
    }
    if (n_sfx > 1)
        return err_set(ERR_INVALID,
                       "snapshot key %s: more than one compression suffix (\".enc\" must come "
                       "first, \".final\" last)",
                       key);
    if (n_sfx == 1) {
        const char *c = el[first];
        size_t cl = elen[first];
        if (cl == 5 && memcmp(c, "final", 5) == 0)
            return err_set(ERR_INVALID, "snapshot key %s: \".final\" given twice", key);
        if (cl == 3 && memcmp(c, "enc", 3) == 0)
            return err_set(ERR_INVALID, "snapshot key %s: \".enc\" given twice", key);
        if (cl > SUFFIX_MAX_CHARS)
            return err_set(ERR_INVALID, "snapshot key %s: compression suffix \".%.*s\" too long",
                           key, (int)cl, c);
        for (size_t i = 0; i < cl; i++)
            if (!is_alnum(c[i]))
                return err_set(ERR_INVALID,
                               "snapshot key %s: compression suffix \".%.*s\" has characters "
                               "other than letters and digits",
                               key, (int)cl, c);
        s->compression_suffix[0] = '.';
        memcpy(s->compression_suffix + 1, c, cl);
        s->compression_suffix[cl + 1] = '\0';
    }
    return 0;
}

/* Parses the name part "<Kind>-<start>-<last>-<secs>[.enc][.<compression>][.final]" (len bytes at
 * name, no '/') into s. key is only used in messages. */
static int parse_name(const char *key, const char *name, size_t len, Snapshot *s) {
    const char *tok[4];
    size_t tlen[4], nt = 0;
    if (split_parts(name, len, '-', 4, tok, tlen, &nt))
        return err_set(ERR_INVALID, "snapshot key %s: name has more than 4 '-'-separated parts",
                       key);
    if (nt != 4)
        return err_set(ERR_INVALID,
                       "snapshot key %s: name has %zu '-'-separated parts, want 4 "
                       "(<Kind>-<start>-<last>-<time>)",
                       key, nt);

    if (tlen[0] == 4 && memcmp(tok[0], "Full", 4) == 0)
        s->kind = SNAP_FULL;
    else if (tlen[0] == 4 && memcmp(tok[0], "Incr", 4) == 0)
        s->kind = SNAP_INCR;
    else
        return err_set(ERR_INVALID, "snapshot key %s: unknown kind \"%.*s\" (want Full or Incr)",
                       key, (int)tlen[0], tok[0]);

    if (parse_dec(tok[1], tlen[1], &s->start_revision) != 0)
        return err_set(ERR_INVALID,
                       "snapshot key %s: start revision \"%.*s\" is not a non-negative decimal "
                       "int64",
                       key, (int)tlen[1], tok[1]);
    if (parse_dec(tok[2], tlen[2], &s->last_revision) != 0)
        return err_set(ERR_INVALID,
                       "snapshot key %s: last revision \"%.*s\" is not a non-negative decimal "
                       "int64",
                       key, (int)tlen[2], tok[2]);
    if (s->start_revision > s->last_revision)
        return err_set(ERR_INVALID, "snapshot key %s: start revision %lld > last revision %lld",
                       key, (long long)s->start_revision, (long long)s->last_revision);
    if (s->last_revision > SNAPNAME_REVISION_MAX)
        return err_set(ERR_INVALID,
                       "snapshot key %s: last revision %lld is above %lld (no revision could "
                       "follow it in int64)",
                       key, (long long)s->last_revision, (long long)SNAPNAME_REVISION_MAX);

    return parse_time_token(key, tok[3], tlen[3], s);
}

int snapname_parse(const char *key, const char *store_prefix, Snapshot *out) {
    memset(out, 0, sizeof *out);
    out->size = -1;
    if (!key) return err_set(ERR_INVALID, "snapshot key: NULL");
    if (!store_prefix) store_prefix = "";
    size_t klen = strlen(key);
    if (klen >= sizeof out->key)
        return err_set(ERR_INVALID, "snapshot key %.64s...: longer than %zu bytes", key,
                       sizeof out->key - 1);

    size_t plen = strlen(store_prefix);
    while (plen > 0 && store_prefix[plen - 1] == '/')
        plen--;
    const char *rest = key;
    if (plen > 0) {
        if (strncmp(key, store_prefix, plen) != 0 || key[plen] != '/')
            return err_set(ERR_INVALID, "snapshot key %s: not under the store prefix \"%.*s/\"",
                           key, (int)plen, store_prefix);
        rest = key + plen + 1;
    }
    if (strncmp(rest, "v2/", 3) == 0)
        out->version = 2;
    else if (strncmp(rest, "v1/", 3) == 0)
        out->version = 1;
    else
        return err_set(ERR_INVALID,
                       "snapshot key %s: no version directory (\"v1/\" or \"v2/\") right after "
                       "the store prefix \"%.*s\"",
                       key, (int)plen, store_prefix);
    const char *body = rest + 3;
    size_t prefix_len = (size_t)(body - key);
    if (prefix_len >= sizeof out->prefix)
        return err_set(ERR_INVALID, "snapshot key %s: prefix longer than %zu bytes", key,
                       sizeof out->prefix - 1);

    /* Path components below the version directory. */
    const char *part[4];
    size_t plens[4];
    size_t np = 0;
    const char *p = body, *end = key + klen;
    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *stop = slash ? slash : end;
        if (np == 3)
            return err_set(ERR_INVALID, "snapshot key %s: too many path components below v%d/", key,
                           out->version);
        part[np] = p;
        plens[np] = (size_t)(stop - p);
        if (plens[np] == 0)
            return err_set(ERR_INVALID, "snapshot key %s: empty path component", key);
        np++;
        if (!slash) break;
        p = slash + 1;
    }

    size_t name_i;
    if (out->version == 2) {
        if (np > 2)
            return err_set(ERR_INVALID,
                           "snapshot key %s: v2 keys are <name> or <name>/<chunk>, found %zu "
                           "components",
                           key, np);
        name_i = 0;
    } else {
        if (np < 2)
            return err_set(ERR_INVALID,
                           "snapshot key %s: a v1 backup directory, not a snapshot (want "
                           "v1/Backup-<time>/<name>)",
                           key);
        if (plens[0] <= 7 || memcmp(part[0], "Backup-", 7) != 0 ||
            !all_digits(part[0] + 7, plens[0] - 7))
            return err_set(ERR_INVALID,
                           "snapshot key %s: v1 directory \"%.*s\" is not Backup-<unix seconds>",
                           key, (int)plens[0], part[0]);
        if (plens[0] >= sizeof out->snap_dir)
            return err_set(ERR_INVALID, "snapshot key %s: v1 directory name too long", key);
        name_i = 1;
    }
    if (np > name_i + 1) {
        const char *c = part[name_i + 1];
        size_t cl = plens[name_i + 1];
        if (cl != CHUNK_DIGITS || !all_digits(c, cl))
            return err_set(ERR_INVALID,
                           "snapshot key %s: \"%.*s\" below the name is not a chunk number "
                           "(%d digits)",
                           key, (int)cl, c, CHUNK_DIGITS);
        out->is_chunk = 1;
    }
    /* snap_name runs from the name to the end of the key (chunks keep "/<number>", as in Go). */
    size_t sn_len = (size_t)(end - part[name_i]);
    if (sn_len >= sizeof out->snap_name)
        return err_set(ERR_INVALID, "snapshot key %s: name longer than %zu bytes", key,
                       sizeof out->snap_name - 1);

    int rc = parse_name(key, part[name_i], plens[name_i], out);
    if (rc != 0) {
        int version = out->version;
        memset(out, 0, sizeof *out);
        out->size = -1;
        out->version = version;
        return rc;
    }

    memcpy(out->key, key, klen + 1);
    memcpy(out->prefix, key, prefix_len);
    out->prefix[prefix_len] = '\0';
    if (out->version == 1) {
        memcpy(out->snap_dir, part[0], plens[0]);
        out->snap_dir[plens[0]] = '\0';
    }
    memcpy(out->snap_name, part[name_i], sn_len);
    out->snap_name[sn_len] = '\0';
    return 0;
}

static int snap_cmp(const void *pa, const void *pb) {
    const Snapshot *a = pa, *b = pb;
    if (a->last_revision != b->last_revision) return a->last_revision < b->last_revision ? -1 : 1;
    if (a->is_chunk != b->is_chunk) return a->is_chunk ? 1 : -1;
    if (a->created_on != b->created_on) return a->created_on < b->created_on ? -1 : 1;
    int c = strcmp(a->key, b->key);
    if (c != 0) return c;
    /* Equal keys only when callers built entries by hand; keep the order total anyway. */
    if (a->start_revision != b->start_revision)
        return a->start_revision < b->start_revision ? -1 : 1;
    if (a->kind != b->kind) return a->kind == SNAP_FULL ? -1 : 1;
    return 0;
}

void snapname_sort(Snapshot *snaps, size_t n) {
    if (snaps && n > 1) qsort(snaps, n, sizeof *snaps, snap_cmp);
}

void snapname_set_at(const Snapshot *snaps, size_t n, int64_t max_revision, int64_t max_created_on,
                     ptrdiff_t *full_idx, size_t *delta_idx, size_t *n_deltas) {
    ptrdiff_t full = -1;
    for (size_t i = n; i-- > 0;) {
        if (snaps[i].is_chunk || snaps[i].kind != SNAP_FULL) continue;
        if (max_revision > 0 && snaps[i].last_revision > max_revision) continue;
        if (snaps[i].created_on > max_created_on) continue;
        full = (ptrdiff_t)i;
        break;
    }
    size_t k = 0;
    const char *hist = full >= 0 ? snaps[full].history : "";
    for (size_t i = (size_t)(full + 1); i < n; i++) {
        if (snaps[i].is_chunk || snaps[i].kind != SNAP_INCR) continue;
        if (hist[0] && snaps[i].history[0] && strcmp(hist, snaps[i].history) != 0) continue;
        delta_idx[k++] = i;
    }
    *full_idx = full;
    *n_deltas = k;
}

void snapname_latest_set(const Snapshot *snaps, size_t n, ptrdiff_t *full_idx, size_t *delta_idx,
                         size_t *n_deltas) {
    snapname_set_at(snaps, n, 0, SNAPNAME_ANY_TIME, full_idx, delta_idx, n_deltas);
}

int snapname_identity(const Snapshot *s, char *out, size_t cap) {
    return snapname_format(s->kind, s->start_revision, s->last_revision, s->created_on, "", 0, out,
                           cap);
}

int snapname_drop_plain_after_encrypted(Snapshot *snaps, size_t n, size_t *kept_out) {
    size_t first_enc = n, plain = 0;
    for (size_t i = 0; i < n; i++) {
        int is_plain = !snaps[i].is_chunk && !snaps[i].encrypted;
        if (first_enc == n && !snaps[i].is_chunk && snaps[i].encrypted) first_enc = i;
        if (first_enc < n && is_plain) plain++;
    }
    *kept_out = n;
    if (plain == 0) return 0;
    Snapshot *left = malloc(plain * sizeof *left);
    if (!left) return err_set(ERR_NOMEM, "out of memory for %zu snapshot names", plain);
    size_t kept = first_enc, k = 0;
    for (size_t i = first_enc; i < n; i++) {
        if (!snaps[i].is_chunk && !snaps[i].encrypted)
            left[k++] = snaps[i];
        else if (i != kept)
            snaps[kept++] = snaps[i];
        else
            kept++;
    }
    memcpy(&snaps[kept], left, plain * sizeof *left);
    free(left);
    *kept_out = kept;
    return 0;
}
