/* memberdir: see memberdir.h. JSON is written as Go's encoding/json writes it (struct fields in
 * declaration order, map keys sorted, strings HTML-escaped); inputs are checked first so that
 * only the escapes of printable text and valid UTF-8 are needed. */
#include "memberdir.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/mem.h"
#include "../common/strbuf.h"
#include "../format/wal_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define RAFT_TERM 1 /* the term of the restored cluster's first entries (saveWALAndSnap) */

/* ---------------- checks ---------------- */

/* Length of the valid UTF-8 sequence at s (1-4), 0 if invalid (as Go's utf8 rejects: overlong
 * forms, surrogates, beyond U+10FFFF); *cp its code point. */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp) {
    unsigned char c = s[0];
    size_t n = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
    if (!n) return 0;
    uint32_t v = n == 1 ? c : c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return n;
}

/* A member name: 1..MEMBERDIR_MAX_NAME bytes of valid UTF-8 without control characters. */
static int check_name(const char *name) {
    size_t len = strlen(name);
    if (!len || len > MEMBERDIR_MAX_NAME)
        return err_set(ERR_INVALID, "member name of %zu bytes: 1 to %d allowed", len,
                       MEMBERDIR_MAX_NAME);
    for (const unsigned char *p = (const unsigned char *)name; *p;) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p, &cp);
        if (!n || cp < 0x20 || cp == 0x7f)
            return err_set(ERR_INVALID,
                           "member name \"%s\" is not UTF-8 text without control characters", name);
        p += n;
    }
    return 0;
}

/* A peer URL as types.NewURLs accepts it and url.URL.String() prints it unchanged. */
static int check_url(const char *u) {
    size_t len = strlen(u);
    if (!len || len > MEMBERDIR_MAX_URL)
        return err_set(ERR_INVALID, "peer URL of %zu bytes: 1 to %d allowed", len,
                       MEMBERDIR_MAX_URL);
    for (const char *p = u; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || strchr("\"\\%?#@", *p))
            return err_set(ERR_INVALID,
                           "peer URL \"%s\": only printable ASCII without spaces, quotes, "
                           "backslashes and %%?#@ is accepted here",
                           u);
    const char *rest = NULL;
    if (strncmp(u, "http://", 7) == 0) rest = u + 7;
    if (strncmp(u, "https://", 8) == 0) rest = u + 8;
    if (!rest) {
        if (strncmp(u, "unix://", 7) == 0 || strncmp(u, "unixs://", 8) == 0) return 0;
        return err_set(ERR_INVALID,
                       "peer URL \"%s\": the scheme must be http, https, unix or "
                       "unixs (lowercase)",
                       u);
    }
    if (strchr(rest, '/'))
        return err_set(ERR_INVALID, "peer URL \"%s\" must not contain a path", u);
    const char *colon = strrchr(rest, ':');
    const char *close = strrchr(rest, ']');
    int port_ok = colon && colon > rest && colon[1] && (!close || close < colon);
    for (const char *p = colon ? colon + 1 : ""; port_ok && *p; p++)
        port_ok = *p >= '0' && *p <= '9';
    if (!port_ok)
        return err_set(ERR_INVALID, "peer URL \"%s\" does not have the form scheme://host:port", u);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The URLs of a comma-joined list, sorted as Go's sort.Strings (types.NewURLs sorts them). */
typedef struct {
    char **v; /* n entries, pointing into copy */
    size_t n;
    char *copy;
} UrlList;

static int split_sorted(const char *csv, UrlList *out) {
    memset(out, 0, sizeof *out);
    size_t cap = 1;
    for (const char *p = csv; *p; p++)
        cap += *p == ',';
    out->v = calloc(cap, sizeof *out->v);
    out->copy = strdup(csv);
    if (!out->v || !out->copy) {
        free(out->v);
        free(out->copy);
        memset(out, 0, sizeof *out);
        return err_set(ERR_NOMEM, "out of memory");
    }
    char *save = NULL;
    for (char *t = strtok_r(out->copy, ",", &save); t && out->n < cap;
         t = strtok_r(NULL, ",", &save))
        out->v[out->n++] = t;
    qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return 0;
}

static void free_urls(UrlList *l) {
    free(l->v);
    free(l->copy);
    memset(l, 0, sizeof *l);
}

/* One URL with its host resolved to a numeric address (etcd's netutil.URLStringsEqual compares
 * resolved addresses), into out; the URL itself when it does not resolve. */
static void resolved(const char *url, char *out, size_t cap) {
    snprintf(out, cap, "%s", url);
    const char *host = strstr(url, "://");
    const char *colon = strrchr(url, ':');
    if (!host || !colon || colon <= host + 3) return;
    host += 3;
    char h[MEMBERDIR_MAX_URL + 1];
    size_t hl = (size_t)(colon - host);
    if (hl >= sizeof h) return;
    memcpy(h, host, hl);
    h[hl] = '\0';
    if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
        memmove(h, h + 1, hl - 2);
        h[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(h, NULL, &hints, &ai) != 0 || !ai) return;
    const struct addrinfo *pick = ai; /* the first IPv4 address, as Go's net.ResolveTCPAddr */
    for (const struct addrinfo *a = ai; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    char num[NI_MAXHOST];
    if (getnameinfo(pick->ai_addr, pick->ai_addrlen, num, sizeof num, NULL, 0, NI_NUMERICHOST) == 0)
        snprintf(out, cap, "%.*s%s%s", (int)(host - url), url, num, colon);
    freeaddrinfo(ai);
}

/* --initial-advertise-peer-urls against the member's URLs in --initial-cluster, as etcd's
 * advertiseMatchesCluster: the same sorted lists, as written or once resolved. */
static int check_advertised(const ClusterMember *m, const char *peer_urls) {
    UrlList a = {0}, b = {0};
    int rc = split_sorted(m->peer_urls, &a);
    if (!rc) rc = split_sorted(peer_urls, &b);
    int same = !rc && a.n == b.n;
    for (size_t i = 0; same && i < a.n; i++)
        same = strcmp(a.v[i], b.v[i]) == 0;
    if (!rc && !same && a.n == b.n) {
        same = 1;
        for (size_t i = 0; same && i < a.n; i++) {
            char x[MEMBERDIR_MAX_URL + NI_MAXHOST], y[MEMBERDIR_MAX_URL + NI_MAXHOST];
            resolved(a.v[i], x, sizeof x);
            resolved(b.v[i], y, sizeof y);
            same = strcmp(x, y) == 0;
        }
    }
    if (!rc && !same)
        rc = err_set(ERR_INVALID,
                     "--initial-cluster has %s=%s but --initial-advertise-peer-urls is %s: they "
                     "must name the same peer URLs",
                     m->name, m->peer_urls, peer_urls);
    free_urls(&a);
    free_urls(&b);
    return rc;
}

int memberdir_check(const InitialCluster *ic, const char *name, const char *peer_urls) {
    if (!ic->n || ic->n > MEMBERDIR_MAX_MEMBERS)
        return err_set(ERR_INVALID, "--initial-cluster names %zu members: 1 to %d allowed", ic->n,
                       MEMBERDIR_MAX_MEMBERS);
    for (size_t i = 0; i < ic->n; i++) {
        const ClusterMember *m = &ic->members[i];
        int rc = check_name(m->name);
        UrlList urls = {0};
        if (!rc) rc = split_sorted(m->peer_urls, &urls);
        for (size_t k = 0; !rc && k < urls.n; k++)
            rc = check_url(urls.v[k]);
        free_urls(&urls);
        if (rc) return err_wrap(rc, "--initial-cluster member %s", m->name);
        if (!m->id) return err_set(ERR_INVALID, "member %s: ID 0 is not allowed", m->name);
        for (size_t k = 0; k < i; k++)
            if (ic->members[k].id == m->id)
                return err_set(ERR_INVALID, "members %s and %s have the same ID %llx",
                               ic->members[k].name, m->name, (unsigned long long)m->id);
    }
    if (!name) return 0;
    const ClusterMember *me = initial_cluster_find(ic, name);
    if (!me)
        return err_set(ERR_INVALID,
                       "couldn't find local name \"%s\" in the initial cluster configuration",
                       name);
    return peer_urls ? check_advertised(me, peer_urls) : 0;
}

/* ---------------- JSON ---------------- */

/* A Go encoding/json string of s (valid UTF-8, checked before). */
static void json_str(StrBuf *o, const char *s) {
    strbuf_add(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p, &cp);
        if (!n) n = 1; /* not reached: checked */
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            strbuf_add(o, esc, 2);
        } else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&' || cp == 0x2028 ||
                   cp == 0x2029) {
            snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
            strbuf_add(o, esc, 6);
        } else {
            strbuf_add(o, (const char *)p, n);
        }
        p += n;
    }
    strbuf_add(o, "\"", 1);
}

static void json_u64(StrBuf *o, uint64_t v) {
    char b[24];
    int n = snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    strbuf_add(o, b, (size_t)n);
}

/* "peerURLs":[...] of m, sorted (types.NewURLs sorts them) */
static int json_peer_urls(StrBuf *o, const ClusterMember *m) {
    UrlList urls = {0};
    int rc = split_sorted(m->peer_urls, &urls);
    if (rc) return rc;
    strbuf_str(o, "\"peerURLs\":[");
    for (size_t i = 0; i < urls.n; i++) {
        if (i) strbuf_add(o, ",", 1);
        json_str(o, urls.v[i]);
    }
    strbuf_add(o, "]", 1);
    free_urls(&urls);
    return 0;
}

/* membership.Member: {"id":N,"peerURLs":[...],"name":"..."} (isLearner and clientURLs omitted:
 * false and empty) */
static int json_member(StrBuf *o, const ClusterMember *m) {
    strbuf_str(o, "{\"id\":");
    json_u64(o, m->id);
    strbuf_add(o, ",", 1);
    int rc = json_peer_urls(o, m);
    strbuf_str(o, ",\"name\":");
    json_str(o, m->name);
    strbuf_add(o, "}", 1);
    return rc;
}

/* membership.RaftAttributes: {"peerURLs":[...]}, as a C string (owned) */
static char *raft_attributes(const ClusterMember *m) {
    StrBuf o = {0};
    strbuf_add(&o, "{", 1);
    int rc = json_peer_urls(&o, m);
    strbuf_add(&o, "}", 1);
    if (rc || o.oom) {
        free(o.d);
        return NULL;
    }
    return o.d;
}

/* ---------------- members in ID order ---------------- */

typedef struct {
    const ClusterMember *m;
    char hex[17];   /* types.ID.String(): lowercase hex without leading zeros */
    uint64_t index; /* v2 store index of its creation: its position in ID order, from 1 */
} Sorted;

static int cmp_id(const void *a, const void *b) {
    uint64_t x = ((const Sorted *)a)->m->id, y = ((const Sorted *)b)->m->id;
    return x < y ? -1 : x > y;
}

static int cmp_hex(const void *a, const void *b) {
    return strcmp(((const Sorted *)a)->hex, ((const Sorted *)b)->hex);
}

/* ic's members sorted by ID (*by_id) and by their hex key (*by_hex). Owned (free both). */
static int sort_members(const InitialCluster *ic, Sorted **by_id, Sorted **by_hex) {
    int rc = memberdir_check(ic, NULL, NULL);
    if (rc) return rc;
    Sorted *s = calloc(ic->n, sizeof *s), *h = calloc(ic->n, sizeof *h);
    if (!s || !h) {
        free(s);
        free(h);
        return err_set(ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < ic->n; i++) {
        s[i].m = &ic->members[i];
        snprintf(s[i].hex, sizeof s[i].hex, "%llx", (unsigned long long)ic->members[i].id);
    }
    qsort(s, ic->n, sizeof *s, cmp_id);
    for (size_t i = 0; i < ic->n; i++)
        s[i].index = i + 1;
    memcpy(h, s, ic->n * sizeof *s);
    qsort(h, ic->n, sizeof *h, cmp_hex);
    *by_id = s;
    *by_hex = h;
    return 0;
}

/* ---------------- the v2 store of the snap file ---------------- */

#define V2_EXPIRE "\"ExpireTime\":\"0001-01-01T00:00:00Z\""
#define V2_HISTORY 1000 /* v2store's event history capacity (newWatchHub(1000)) */

/* v2store's node: {"Path":..,"CreatedIndex":i,"ModifiedIndex":i,"ExpireTime":..,"Value":..,
 * "Children": (left open for the caller) */
static void v2_node(StrBuf *o, const char *path, uint64_t index, const char *value) {
    strbuf_str(o, "{\"Path\":");
    json_str(o, path);
    strbuf_str(o, ",\"CreatedIndex\":");
    json_u64(o, index);
    strbuf_str(o, ",\"ModifiedIndex\":");
    json_u64(o, index);
    strbuf_str(o, "," V2_EXPIRE ",\"Value\":");
    json_str(o, value);
    strbuf_str(o, ",\"Children\":");
}

static void v2_member_node(StrBuf *o, const Sorted *s, const char *attrs) {
    char path[64];
    snprintf(path, sizeof path, "/0/members/%s", s->hex);
    json_str(o, s->hex);
    strbuf_add(o, ":", 1);
    v2_node(o, path, s->index, "");
    strbuf_str(o, "{\"raftAttributes\":");
    snprintf(path, sizeof path, "/0/members/%s/raftAttributes", s->hex);
    v2_node(o, path, s->index, attrs);
    strbuf_str(o, "null}}}");
}

static void v2_stats(StrBuf *o, size_t creates) {
    strbuf_str(o, "\"Stats\":{\"getsSuccess\":0,\"getsFail\":0,\"setsSuccess\":0,\"setsFail\":0,"
                  "\"deleteSuccess\":0,\"deleteFail\":0,\"updateSuccess\":0,\"updateFail\":0,"
                  "\"createSuccess\":");
    json_u64(o, creates);
    strbuf_str(o, ",\"createFail\":0,\"compareAndSwapSuccess\":0,\"compareAndSwapFail\":0,"
                  "\"compareAndDeleteSuccess\":0,\"compareAndDeleteFail\":0,\"expireCount\":0,"
                  "\"watchers\":0}");
}

/* The watcher hub's event history: one "create" event per member in ID order, then the empty
 * slots of its ring. */
static void v2_history(StrBuf *o, const Sorted *by_id, char **attrs, size_t n) {
    strbuf_str(o, "\"WatcherHub\":{\"EventHistory\":{\"Queue\":{\"Events\":[");
    for (size_t i = 0; i < V2_HISTORY; i++) {
        if (i) strbuf_add(o, ",", 1);
        if (i >= n) {
            strbuf_str(o, "null");
            continue;
        }
        char key[64];
        snprintf(key, sizeof key, "/0/members/%s/raftAttributes", by_id[i].hex);
        strbuf_str(o, "{\"action\":\"create\",\"node\":{\"key\":");
        json_str(o, key);
        strbuf_str(o, ",\"value\":");
        json_str(o, attrs[i]);
        strbuf_str(o, ",\"modifiedIndex\":");
        json_u64(o, by_id[i].index);
        strbuf_str(o, ",\"createdIndex\":");
        json_u64(o, by_id[i].index);
        strbuf_str(o, "}}");
    }
    strbuf_str(o, "],\"Size\":");
    json_u64(o, n);
    strbuf_str(o, ",\"Front\":0,\"Back\":");
    json_u64(o, n);
    strbuf_str(o, ",\"Capacity\":1000},\"StartIndex\":1,\"LastIndex\":");
    json_u64(o, n);
    strbuf_str(o, "}}");
}

int memberdir_v2_store_json(const InitialCluster *ic, StrBuf *o) {
    Sorted *by_id = NULL, *by_hex = NULL;
    int rc = sort_members(ic, &by_id, &by_hex);
    if (rc) return rc;
    size_t n = ic->n; /* <= MEMBERDIR_MAX_MEMBERS < V2_HISTORY: the ring never wraps */
    char **attrs = calloc(n, sizeof *attrs), **attrs_hex = calloc(n, sizeof *attrs_hex);
    for (size_t i = 0; attrs && attrs_hex && i < n; i++) {
        attrs[i] = raft_attributes(by_id[i].m);
        for (size_t k = 0; k < n; k++)
            if (by_hex[k].m == by_id[i].m) attrs_hex[k] = attrs[i];
        if (!attrs[i]) rc = err_set(ERR_NOMEM, "out of memory");
    }
    if (!attrs || !attrs_hex) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) {
        strbuf_str(o, "{\"Root\":");
        v2_node(o, "/", 0, "");
        strbuf_str(o, "{\"0\":");
        v2_node(o, "/0", 0, "");
        strbuf_str(o, "{\"members\":");
        v2_node(o, "/0/members", 1, "");
        strbuf_add(o, "{", 1);
        for (size_t k = 0; k < n; k++) {
            if (k) strbuf_add(o, ",", 1);
            v2_member_node(o, &by_hex[k], attrs_hex[k]);
        }
        strbuf_str(o, "}}}},\"1\":");
        v2_node(o, "/1", 0, "");
        strbuf_str(o, "{}}}},");
        v2_history(o, by_id, attrs, n);
        strbuf_str(o, ",\"CurrentIndex\":");
        json_u64(o, n);
        strbuf_add(o, ",", 1);
        v2_stats(o, n);
        strbuf_str(o, ",\"CurrentVersion\":2}");
        if (o->oom) rc = err_set(ERR_NOMEM, "out of memory for the v2 store");
    }
    for (size_t i = 0; attrs && i < n; i++)
        free(attrs[i]);
    FREE_ALL(attrs, attrs_hex, by_id, by_hex);
    return rc;
}

/* ---------------- db items ---------------- */

int memberdir_db_items(const InitialCluster *ic, MemberDbItems *out) {
    memset(out, 0, sizeof *out);
    Sorted *by_id = NULL, *by_hex = NULL;
    int rc = sort_members(ic, &by_id, &by_hex);
    if (rc) return rc;
    StrBuf text = {0};
    size_t *off = calloc(ic->n * 2 + 1, sizeof *off);
    out->members = calloc(ic->n, sizeof *out->members);
    if (!off || !out->members) rc = err_set(ERR_NOMEM, "out of memory");
    for (size_t k = 0; !rc && k < ic->n; k++) { /* keys in byte order: by_hex */
        off[2 * k] = text.n;
        strbuf_str(&text, by_hex[k].hex);
        off[2 * k + 1] = text.n;
        rc = json_member(&text, by_hex[k].m);
    }
    off[ic->n * 2] = text.n;
    if (!rc && text.oom) rc = err_set(ERR_NOMEM, "out of memory");
    for (size_t k = 0; !rc && k < ic->n; k++) { /* pointers only once the text stopped moving */
        const uint8_t *t = (const uint8_t *)text.d;
        out->members[k] = (MemberDbItem){t + off[2 * k], off[2 * k + 1] - off[2 * k],
                                         t + off[2 * k + 1], off[2 * k + 2] - off[2 * k + 1]};
    }
    out->text = text.d;
    out->n_members = ic->n;
    for (int i = 0; i < 8; i++) {
        out->cindex[i] = (uint8_t)((uint64_t)ic->n >> (56 - 8 * i));
        out->term[i] = (uint8_t)((uint64_t)RAFT_TERM >> (56 - 8 * i));
    }
    FREE_ALL(off, by_id, by_hex);
    if (rc) memberdir_db_items_free(out);
    return rc;
}

void memberdir_db_items_free(MemberDbItems *items) {
    if (!items) return;
    free(items->members);
    free(items->text);
    memset(items, 0, sizeof *items);
}

/* ---------------- files ---------------- */

char *memberdir_db_path(const char *data_dir) {
    char *member = fs_join(data_dir, "member/snap");
    char *db = member ? fs_join(member, "db") : NULL;
    free(member);
    return db;
}

int memberdir_make_dirs(const char *data_dir) {
    char *member = fs_join(data_dir, "member");
    char *snap = member ? fs_join(member, "snap") : NULL;
    char *wal = member ? fs_join(member, "wal") : NULL;
    int rc = snap && wal ? 0 : err_set(ERR_NOMEM, "out of memory");
    const char *dirs[] = {data_dir, member, snap, wal};
    for (size_t i = 0; !rc && i < 4; i++)
        if (mkdir(dirs[i], 0700) != 0) /* fileutil.PrivateDirMode */
            rc = err_set(errno == EEXIST ? ERR_EXISTS : ERR_IO, "mkdir %s: %s", dirs[i],
                         strerror(errno));
    FREE_ALL(member, snap, wal);
    return rc;
}

/* copies src_fd's len bytes to dst_fd: copy_file_range, read/write where it is refused */
static int copy_fd(int in, int out, int64_t len, const char *src, const char *dst) {
    int64_t done = 0;
    int use_cfr = 1;
    enum { BUF = 1 << 16 };
    char *buf = NULL;
    while (done < len) {
        size_t want = (size_t)(len - done < (int64_t)1 << 30 ? len - done : (int64_t)1 << 30);
        ssize_t n = -1;
        if (use_cfr) {
            n = copy_file_range(in, NULL, out, NULL, want, 0);
            if (n < 0 &&
                (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL)) {
                use_cfr = 0;
                continue;
            }
        } else {
            if (!buf && !(buf = malloc(BUF))) return err_set(ERR_NOMEM, "out of memory");
            n = read(in, buf, want < BUF ? want : BUF);
            for (ssize_t w = 0, k; n > 0 && w < n; w += k)
                if ((k = write(out, buf + w, (size_t)(n - w))) <= 0) {
                    free(buf);
                    return err_set(ERR_IO, "write %s: %s", dst, k < 0 ? strerror(errno) : "0");
                }
        }
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            free(buf);
            return err_set(ERR_IO, "copy %s to %s: %s", src, dst,
                           n < 0 ? strerror(errno) : "the file ended early");
        }
        done += n;
    }
    free(buf);
    return 0;
}

int memberdir_copy_db(const char *src, const char *data_dir) {
    char *dst = memberdir_db_path(data_dir);
    if (!dst) return err_set(ERR_NOMEM, "out of memory");
    int rc = 0, out = -1, in = open(src, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0) {
        rc = err_set(ERR_IO, "open %s: %s", src, strerror(errno));
        goto done;
    }
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        rc = err_set(errno == EEXIST ? ERR_EXISTS : ERR_IO, "create %s: %s", dst, strerror(errno));
        goto done;
    }
    rc = copy_fd(in, out, (int64_t)st.st_size, src, dst);
    if (!rc && fsync(out) != 0) rc = err_set(ERR_IO, "fsync %s: %s", dst, strerror(errno));
done:
    if (out >= 0 && close(out) != 0 && !rc)
        rc = err_set(ERR_IO, "close %s: %s", dst, strerror(errno));
    if (in >= 0) close(in);
    free(dst);
    return rc;
}

/* wal.Create, then Save(HardState, entries), then SaveSnapshot, into e (saveWALAndSnap) */
static int build_wal(WalEncoder *e, const InitialCluster *ic, const ClusterMember *me,
                     const Sorted *by_id, const uint64_t *voters) {
    size_t n = ic->n;
    StrBuf m = {0};
    wal_pb_metadata(&m, me->id, ic->cluster_id);
    int rc = wal_encoder_record(e, WAL_REC_CRC, NULL, 0);
    if (!rc && m.oom) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = wal_encoder_record(e, WAL_REC_METADATA, (const uint8_t *)m.d, m.n);
    free(m.d);
    StrBuf s = {0};
    wal_pb_wal_snapshot(&s, 0, 0, NULL, 0);
    if (!rc && s.oom) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = wal_encoder_record(e, WAL_REC_SNAPSHOT, (const uint8_t *)s.d, s.n);
    for (size_t i = 0; !rc && i < n; i++) {
        StrBuf ctx = {0}, cc = {0}, ent = {0};
        rc = json_member(&ctx, by_id[i].m);
        wal_pb_conf_change_add(&cc, by_id[i].m->id, (const uint8_t *)ctx.d, ctx.n);
        wal_pb_entry(&ent, WAL_ENTRY_CONF_CHANGE, RAFT_TERM, i + 1, (const uint8_t *)cc.d, cc.n);
        if (!rc && (ctx.oom || cc.oom || ent.oom)) rc = err_set(ERR_NOMEM, "out of memory");
        if (!rc) rc = wal_encoder_record(e, WAL_REC_ENTRY, (const uint8_t *)ent.d, ent.n);
        FREE_ALL(ctx.d, cc.d, ent.d);
    }
    WalHardState hs = {.term = RAFT_TERM, .vote = voters[0], .commit = n};
    StrBuf h = {0};
    wal_pb_hardstate(&h, &hs);
    if (!rc) rc = wal_encoder_record(e, WAL_REC_STATE, (const uint8_t *)h.d, h.n);
    free(h.d);
    s.n = 0;
    wal_pb_wal_snapshot(&s, n, RAFT_TERM, voters, n);
    if (!rc && s.oom) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = wal_encoder_record(e, WAL_REC_SNAPSHOT, (const uint8_t *)s.d, s.n);
    free(s.d);
    return rc;
}

/* the snap file: raftpb.Snapshot of the v2 store at index n, term 1 */
static int write_snap(const char *snap_dir, const InitialCluster *ic, const uint64_t *voters) {
    StrBuf v2 = {0}, snap = {0};
    int rc = memberdir_v2_store_json(ic, &v2);
    if (!rc) {
        wal_pb_raft_snapshot(&snap, (const uint8_t *)v2.d, v2.n, ic->n, RAFT_TERM, voters, ic->n);
        if (snap.oom) rc = err_set(ERR_NOMEM, "out of memory");
    }
    char name[40];
    char *path = rc ? NULL : fs_join(snap_dir, wal_snap_name(RAFT_TERM, ic->n, name));
    if (!rc && !path) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = wal_snap_write(path, (const uint8_t *)snap.d, snap.n);
    FREE_ALL(path, v2.d, snap.d);
    return rc;
}

int memberdir_write_raft(const char *data_dir, const InitialCluster *ic, const char *name) {
    int rc = memberdir_check(ic, name, NULL);
    if (rc) return rc;
    const ClusterMember *me = initial_cluster_find(ic, name);
    Sorted *by_id = NULL, *by_hex = NULL;
    if ((rc = sort_members(ic, &by_id, &by_hex))) return rc;
    uint64_t *voters = calloc(ic->n, sizeof *voters);
    char *member = fs_join(data_dir, "member");
    char *snap = member ? fs_join(member, "snap") : NULL;
    char *wal = member ? fs_join(member, "wal") : NULL;
    char seg[40];
    char *seg_path = wal ? fs_join(wal, wal_segment_name(0, 0, seg)) : NULL;
    WalEncoder e = {0};
    if (!voters || !snap || !seg_path) rc = err_set(ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < ic->n; i++)
        voters[i] = by_id[i].m->id;
    if (!rc) rc = build_wal(&e, ic, me, by_id, voters);
    if (!rc) rc = wal_write_segment(seg_path, &e);
    if (!rc) rc = write_snap(snap, ic, voters);
    const char *dirs[] = {wal, snap, member, data_dir};
    for (size_t i = 0; !rc && i < 4; i++)
        rc = fs_fsync_dir(dirs[i]);
    char *parent = rc ? NULL : fs_dirname(data_dir);
    if (!rc) rc = parent ? fs_fsync_dir(parent) : err_set(ERR_NOMEM, "out of memory");
    if (rc) err_wrap(rc, "member %s: writing its member dir in %s", name, data_dir);
    wal_encoder_free(&e);
    FREE_ALL(parent, seg_path, wal, snap, member, voters, by_id, by_hex);
    return rc;
}
