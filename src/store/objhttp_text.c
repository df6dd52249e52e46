/* objhttp_text: the text the drivers put on the wire and read back (objhttp.h): RFC 3986
 * percent-encoding, sorted queries, URL redaction for messages, key checks, and the small
 * bounded XML reader and writer the S3-like protocols need. */
#include "objhttp.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- percent-encoding, queries, redaction ---- */

static int unreserved(unsigned char c) {
    return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

char *objhttp_pct_encode(const char *s, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1), *p = o;
    if (!o) return NULL;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c < 0x80 && unreserved(*c)) || (keep_slash && *c == '/')) {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 15];
        }
    }
    *p = '\0';
    return o;
}

typedef struct {
    char *name, *value;
} QPair;

static int qpair_cmp(const void *a, const void *b) {
    const QPair *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

char *objhttp_query(const char *const *names, const char *const *values, size_t n) {
    QPair *q = calloc(n ? n : 1, sizeof *q);
    char *out = NULL;
    if (!q) return NULL;
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        q[i].name = objhttp_pct_encode(names[i], 0);
        q[i].value = objhttp_pct_encode(values[i] ? values[i] : "", 0);
        if (!q[i].name || !q[i].value) goto done;
        total += strlen(q[i].name) + strlen(q[i].value) + 2;
    }
    qsort(q, n, sizeof *q, qpair_cmp);
    out = malloc(total);
    if (!out) goto done;
    char *p = out;
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%s=%s", i ? "&" : "", q[i].name, q[i].value);
    *p = '\0';
done:
    for (size_t i = 0; i < n; i++) {
        free(q[i].name);
        free(q[i].value);
    }
    free(q);
    return out;
}

static int secret_param(const char *name, size_t len) {
    static const char *const words[] = {"sig", "credential", "token", "secret", "password"};
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t wl = strlen(words[w]);
        for (size_t i = 0; i + wl <= len; i++)
            if (strncasecmp(name + i, words[w], wl) == 0) return 1;
    }
    return 0;
}

char *objhttp_redact_url(const char *url) {
    size_t n = strlen(url);
    char *o = malloc(n + 1 + 16 * (n / 2 + 1)), *p = o;
    if (!o) return NULL;
    const char *s = url;
    /* scheme://[userinfo@]host... : drop userinfo */
    const char *sch = strstr(s, "://");
    if (sch) {
        const char *auth = sch + 3;
        size_t alen = strcspn(auth, "/?#");
        const char *at = memchr(auth, '@', alen);
        memcpy(p, s, (size_t)(auth - s));
        p += auth - s;
        s = at ? at + 1 : auth;
    }
    const char *q = strchr(s, '?');
    size_t head = q ? (size_t)(q - s) : strlen(s);
    memcpy(p, s, head);
    p += head;
    if (q) {
        s = q + 1;
        *p++ = '?';
        while (*s) {
            size_t plen = strcspn(s, "&#");
            const char *eq = memchr(s, '=', plen);
            size_t nlen = eq ? (size_t)(eq - s) : plen;
            memcpy(p, s, nlen);
            p += nlen;
            if (eq) {
                if (secret_param(s, nlen)) {
                    p += sprintf(p, "=REDACTED");
                } else {
                    memcpy(p, eq, plen - nlen);
                    p += plen - nlen;
                }
            }
            s += plen;
            if (*s == '&') {
                *p++ = '&';
                s++;
            } else {
                break; /* '#' or end: a fragment is never sent */
            }
        }
    }
    *p = '\0';
    return o;
}

int objhttp_key_ok(const char *what, const char *op, const char *key, size_t max,
                   int no_leading_slash) {
    size_t l = strlen(key);
    if (l == 0 || l > max || (no_leading_slash && (key[0] == '/' || key[0] == '\\')))
        return err_set(ERR_INVALID, "%s %s: key \"%.64s\" must have 1 to %zu bytes%s", what, op,
                       key, max, no_leading_slash ? " and not start with / or \\" : "");
    return 0;
}

/* "<tag" followed by '>', ' ' or '/' in [p, end); NULL if none. */
const char *objhttp_xml_open(const char *p, const char *end, const char *tag) {
    size_t tl = strlen(tag);
    while (p < end) {
        p = memchr(p, '<', (size_t)(end - p));
        if (!p || (size_t)(end - p) < tl + 2) return NULL;
        if (memcmp(p + 1, tag, tl) == 0 &&
            (p[tl + 1] == '>' || p[tl + 1] == ' ' || p[tl + 1] == '/'))
            return p;
        p++;
    }
    return NULL;
}

const char *objhttp_xml_element(const char *p, const char *end, const char *tag, size_t *len,
                                const char **after) {
    const char *o = objhttp_xml_open(p, end, tag);
    if (!o) return NULL;
    const char *gt = memchr(o, '>', (size_t)(end - o));
    if (!gt) return NULL;
    if (gt[-1] == '/') { /* <tag/> */
        *len = 0;
        if (after) *after = gt + 1;
        return gt + 1;
    }
    size_t tl = strlen(tag);
    for (const char *c = gt + 1; c < end;) {
        c = memchr(c, '<', (size_t)(end - c));
        if (!c || (size_t)(end - c) < tl + 3) return NULL;
        if (c[1] == '/' && memcmp(c + 2, tag, tl) == 0 && c[tl + 2] == '>') {
            *len = (size_t)(c - (gt + 1));
            if (after) *after = c + tl + 3;
            return gt + 1;
        }
        c++;
    }
    return NULL;
}

static int xml_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *objhttp_xml_text_pct(const char *s, size_t n, int pct) {
    char *o = malloc(n + 1);
    size_t k = 0;
    if (!o) return NULL;
    for (size_t i = 0; i < n;) {
        if (s[i] == '\0') goto bad; /* a NUL would cut the name short: a name that lies */
        if (pct && s[i] == '%' && i + 2 < n && xml_hex(s[i + 1]) >= 0 && xml_hex(s[i + 2]) >= 0) {
            o[k] = (char)(xml_hex(s[i + 1]) * 16 + xml_hex(s[i + 2]));
            if (o[k++] == '\0') goto bad; /* "%00" */
            i += 3;
            continue;
        }
        if (s[i] != '&') {
            o[k++] = s[i++];
            continue;
        }
        const char *semi = memchr(s + i, ';', n - i);
        if (!semi || semi - (s + i) > 12) goto bad;
        const char *e = s + i + 1;
        size_t el = (size_t)(semi - e);
        static const struct {
            const char *name;
            char c;
        } ents[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
        int done = 0;
        for (size_t j = 0; j < sizeof ents / sizeof ents[0] && !done; j++) {
            if (strlen(ents[j].name) == el && memcmp(e, ents[j].name, el) == 0) {
                o[k++] = ents[j].c;
                done = 1;
            }
        }
        if (!done) {
            if (el < 2 || e[0] != '#') goto bad;
            int hex = e[1] == 'x' || e[1] == 'X';
            size_t j = hex ? 2 : 1;
            if (j >= el) goto bad;
            unsigned long cp = 0;
            for (; j < el; j++) {
                int v = hex ? xml_hex(e[j]) : (e[j] >= '0' && e[j] <= '9' ? e[j] - '0' : -1);
                if (v < 0) goto bad;
                cp = cp * (hex ? 16 : 10) + (unsigned long)v;
                if (cp > 0x10FFFF) goto bad;
            }
            if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
            /* "&#N;" takes at least 4 bytes, its UTF-8 at most 4: the output never outgrows n */
            if (cp < 0x80) {
                o[k++] = (char)cp;
            } else if (cp < 0x800) {
                o[k++] = (char)(0xC0 | (cp >> 6));
                o[k++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                o[k++] = (char)(0xE0 | (cp >> 12));
                o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                o[k++] = (char)(0x80 | (cp & 0x3F));
            } else {
                o[k++] = (char)(0xF0 | (cp >> 18));
                o[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                o[k++] = (char)(0x80 | (cp & 0x3F));
            }
        }
        i = (size_t)(semi - s) + 1;
    }
    o[k] = '\0';
    return o;
bad:
    free(o);
    return NULL;
}

char *objhttp_xml_text(const char *s, size_t n) {
    return objhttp_xml_text_pct(s, n, 0);
}

int objhttp_size_text(const char *s, size_t n, int64_t *size) {
    *size = -1;
    if (n == 0 || n >= 20) return -1;
    char num[24];
    memcpy(num, s, n);
    num[n] = '\0';
    char *ep;
    long long v = strtoll(num, &ep, 10);
    if (*ep != '\0' || v < 0) return -1;
    *size = v;
    return 0;
}

int objhttp_xml_page_end(const char *xml, const char *end, const char *next_tag,
                         ObjHttpXmlTextFn text, int arg, const char *what, int *truncated,
                         char **next) {
    size_t tl;
    const char *t = objhttp_xml_element(xml, end, "IsTruncated", &tl, NULL);
    *truncated = t && tl == 4 && memcmp(t, "true", 4) == 0;
    *next = NULL;
    t = objhttp_xml_element(xml, end, next_tag, &tl, NULL);
    if (t && tl > 0) {
        *next = text(t, tl, arg);
        if (!*next) return err_set(ERR_CORRUPT, "%s: bad %s", what, next_tag);
    }
    if (*truncated && !*next)
        return err_set(ERR_CORRUPT, "%s: truncated page without a %s", what, next_tag);
    return 0;
}

int objhttp_xml_upload_id(const char *xml, size_t len, const char *root, const char *what,
                          char **upload_id) {
    *upload_id = NULL;
    const char *end = xml + len;
    size_t tl;
    if (root && !objhttp_xml_element(xml, end, root, &tl, NULL))
        return err_set(ERR_CORRUPT, "%s: not an %s document", what, root);
    const char *t = objhttp_xml_element(xml, end, "UploadId", &tl, NULL);
    if (!t || tl == 0) return err_set(ERR_CORRUPT, "%s: no UploadId in the answer", what);
    if (tl > OBJHTTP_ID_MAX)
        return err_set(ERR_CORRUPT,
                       "%s: the UploadId in the answer has %zu bytes, more than the %zu accepted",
                       what, tl, OBJHTTP_ID_MAX);
    *upload_id = objhttp_xml_text(t, tl);
    if (!*upload_id)
        return err_set(ERR_CORRUPT, "%s: the UploadId in the answer is not valid XML text", what);
    return 0;
}

int objhttp_complete_xml(const char *const *etags, int n, const char *what, char **out,
                         size_t *len) {
    StrBuf b = {0};
    *out = NULL;
    *len = 0;
    strbuf_str(&b, "<CompleteMultipartUpload>");
    for (int i = 0; i < n; i++) {
        const char *e = etags[i];
        if (!e) {
            free(b.d);
            return err_set(ERR_IO, "%s: part %d has no ETag", what, i + 1);
        }
        char num[64];
        snprintf(num, sizeof num, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
        strbuf_str(&b, num);
        for (; *e; e++) {
            static const char *const ent[] = {['"'] = "&quot;",
                                              ['&'] = "&amp;",
                                              ['<'] = "&lt;",
                                              ['>'] = "&gt;",
                                              ['\''] = "&apos;"};
            unsigned char c = (unsigned char)*e;
            if (c < sizeof ent / sizeof ent[0] && ent[c])
                strbuf_str(&b, ent[c]);
            else
                strbuf_add(&b, e, 1);
        }
        strbuf_str(&b, "</ETag></Part>");
    }
    strbuf_str(&b, "</CompleteMultipartUpload>");
    if (b.oom) {
        free(b.d);
        return err_set(ERR_NOMEM, "%s: out of memory", what);
    }
    *out = b.d;
    *len = b.n;
    return 0;
}

void objhttp_query_append(StrBuf *b, const char *const *names, const char *const *values, size_t n,
                          int *first) {
    for (size_t i = 0; i < n && !b->oom; i++) {
        strbuf_str(b, *first ? "?" : "&");
        *first = 0;
        char *en = objhttp_pct_encode(names[i], 0);
        char *ev = values && values[i] ? objhttp_pct_encode(values[i], 0) : NULL;
        if (!en || (values && values[i] && !ev)) {
            b->oom = 1;
        } else {
            strbuf_str(b, en);
            if (ev) {
                strbuf_str(b, "=");
                strbuf_str(b, ev);
            }
        }
        free(en);
        free(ev);
    }
}

const char *objhttp_header_value(const char *const *h, size_t n, const char *name, size_t *len) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++) {
        if (strncasecmp(h[i], name, nl) != 0 || h[i][nl] != ':') continue;
        const char *v = h[i] + nl + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t l = strlen(v);
        while (l > 0 && (v[l - 1] == ' ' || v[l - 1] == '\t'))
            l--;
        *len = l;
        return v;
    }
    return NULL;
}

static int canon_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void objhttp_canon_headers(StrBuf *b, const char *const *h, size_t n, const char *prefix) {
    size_t pl = strlen(prefix), nx = 0;
    char **x = calloc(n + 1, sizeof *x);
    if (!x) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *colon = strchr(h[i], ':');
        if (!colon || strncasecmp(h[i], prefix, pl) != 0) continue;
        size_t nl = (size_t)(colon - h[i]), vl;
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        vl = strlen(v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        char *e = malloc(nl + vl + 2);
        if (!e) {
            b->oom = 1;
            break;
        }
        for (size_t k = 0; k < nl; k++)
            e[k] = (char)tolower((unsigned char)h[i][k]);
        e[nl] = ':';
        memcpy(e + nl + 1, v, vl);
        e[nl + 1 + vl] = '\0';
        x[nx++] = e;
    }
    qsort(x, nx, sizeof *x, canon_cmp);
    for (size_t i = 0; i < nx; i++) {
        strbuf_str(b, x[i]);
        strbuf_str(b, "\n");
        free(x[i]);
    }
    free(x);
}
