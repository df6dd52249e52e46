/* store_oss_wire: what the OSS driver reads from the server and the endpoint (store_oss.h): the
 * ListObjects page, the InitiateMultipartUpload result, error codes, and the base URL. Every
 * length is bounded and every escape checked: these bytes come from outside. */
#include "store_oss.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "objhttp.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- XML ---- */

static int hexv(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Entity-decoded text, then URL-decoded ('+' is a space, as Go's url.QueryUnescape that
 * Alibaba's SDK uses) when url; owned, NULL on a bad entity or escape. */
static char *text_of(const char *s, size_t n, int url) {
    char *t = objhttp_xml_text(s, n);
    if (!t || !url) return t;
    size_t k = 0;
    for (size_t i = 0; t[i];) {
        if (t[i] == '%') {
            int h = hexv((unsigned char)t[i + 1]), l = h >= 0 ? hexv((unsigned char)t[i + 2]) : -1;
            if (h < 0 || l < 0) {
                free(t);
                return NULL;
            }
            t[k++] = (char)(h * 16 + l);
            i += 3;
        } else {
            t[k++] = t[i] == '+' ? ' ' : t[i];
            i++;
        }
    }
    t[k] = '\0';
    return t;
}

int oss_parse_list(const char *xml, size_t len, StoreDriverListCb cb, void *ctx, int *truncated,
                   char **next_marker) {
    *truncated = 0;
    *next_marker = NULL;
    const char *end = xml + len;
    size_t tl;
    const char *t;
    if (!objhttp_xml_element(xml, end, "ListBucketResult", &tl, NULL))
        return err_set(ERR_CORRUPT, "OSS list: not a ListBucketResult document");
    int url = 0;
    t = objhttp_xml_element(xml, end, "EncodingType", &tl, NULL);
    if (t && tl == 3 && memcmp(t, "url", 3) == 0) url = 1;
    const char *p = xml;
    const char *c;
    size_t cl;
    while ((c = objhttp_xml_element(p, end, "Contents", &cl, &p)) != NULL) {
        const char *ce = c + cl;
        t = objhttp_xml_element(c, ce, "Key", &tl, NULL);
        if (!t) return err_set(ERR_CORRUPT, "OSS list: <Contents> without <Key>");
        char *key = text_of(t, tl, url);
        if (!key) return err_set(ERR_CORRUPT, "OSS list: a key with a bad escape (or no memory)");
        int64_t size = -1;
        t = objhttp_xml_element(c, ce, "Size", &tl, NULL);
        if (t) (void)objhttp_size_text(t, tl, &size); /* -1 when it is not a size */
        int rc = cb(ctx, key, size);
        free(key);
        if (rc) return rc;
    }
    return objhttp_xml_page_end(xml, end, "NextMarker", text_of, url, "OSS list", truncated,
                                next_marker);
}

int oss_parse_upload_id(const char *xml, size_t len, char **upload_id) {
    return objhttp_xml_upload_id(xml, len, "InitiateMultipartUploadResult", "OSS", upload_id);
}

const char *oss_parse_error_code(const char *xml, size_t len, char *code, size_t cap) {
    if (cap == 0) return code;
    code[0] = '\0';
    if (!xml) return code;
    const char *end = xml + len;
    size_t el, tl;
    const char *e = objhttp_xml_element(xml, end, "Error", &el, NULL);
    if (!e) return code;
    const char *t = objhttp_xml_element(e, e + el, "Code", &tl, NULL);
    if (!t) return code;
    char *s = objhttp_xml_text(t, tl);
    if (s) snprintf(code, cap, "%s", s);
    free(s);
    return code;
}

int oss_host_is_ip(const char *host, size_t len) {
    char buf[64];
    if (len == 0 || len >= sizeof buf) return 0;
    if (host[0] == '[') {
        if (len < 3 || host[len - 1] != ']') return 0;
        memcpy(buf, host + 1, len - 2);
        buf[len - 2] = '\0';
        unsigned char a[16];
        return inet_pton(AF_INET6, buf, a) == 1;
    }
    memcpy(buf, host, len);
    buf[len] = '\0';
    unsigned char a[4];
    return inet_pton(AF_INET, buf, a) == 1;
}

int oss_base_url(const char *ep, const char *bucket, char **out) {
    const char *scheme = "https", *hp = ep;
    const char *sep = strstr(ep, "://");
    if (sep) {
        size_t sl = (size_t)(sep - ep);
        if (sl == 4 && strncasecmp(ep, "http", 4) == 0)
            scheme = "http";
        else if (!(sl == 5 && strncasecmp(ep, "https", 5) == 0))
            return err_set(ERR_INVALID, "OSS: storageEndpoint %s: the scheme must be http or https",
                           ep);
        hp = sep + 3;
    }
    size_t hl = strlen(hp);
    while (hl > 0 && hp[hl - 1] == '/')
        hl--;
    if (hl == 0 || memchr(hp, '/', hl) || memchr(hp, '?', hl) || memchr(hp, '@', hl) ||
        memchr(hp, ' ', hl))
        return err_set(ERR_INVALID,
                       "OSS: storageEndpoint \"%s\" is not host[:port] or "
                       "scheme://host[:port]",
                       ep);
    size_t host_len = hl;
    if (hp[0] == '[') {
        const char *rb = memchr(hp, ']', hl);
        host_len = rb ? (size_t)(rb - hp) + 1 : hl;
    } else {
        const char *colon = memchr(hp, ':', hl);
        if (colon) host_len = (size_t)(colon - hp);
    }
    int path_style = oss_host_is_ip(hp, host_len);
    size_t n = strlen(scheme) + hl + strlen(bucket) + 8;
    *out = malloc(n);
    if (!*out) return err_set(ERR_NOMEM, "OSS: out of memory");
    if (path_style)
        snprintf(*out, n, "%s://%.*s/%s", scheme, (int)hl, hp, bucket);
    else
        snprintf(*out, n, "%s://%s.%.*s", scheme, bucket, (int)hl, hp);
    return 0;
}
