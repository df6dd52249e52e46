/* store_oss_sign: OSS credentials (ALICLOUD_APPLICATION_CREDENTIALS(_JSON), as the Go tool
 * reads them: docs/go-tool.md §12) and signature V1 (store_oss.h). */
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

/* ---- credentials ---- */

void oss_creds_clear(OssCreds *c) {
    if (!c) return;
    free(c->endpoint);
    FREE_SECRETS(c->access_key, c->secret);
    memset(c, 0, sizeof *c);
}

int oss_creds_load(const char *path, OssCreds *out) {
    memset(out, 0, sizeof *out);
    static const char *const fields[] = {"storageEndpoint", "accessKeyID", "accessKeySecret"};
    char *v[3];
    int rc = objhttp_creds_read(path, "OSS", fields, 3, v);
    if (rc != 0) return rc;
    out->endpoint = v[0];
    out->access_key = v[1];
    out->secret = v[2];
    for (int i = 0; i < 3; i++) {
        if (!v[i] || !v[i][0]) {
            oss_creds_clear(out);
            return err_set(ERR_INVALID, "OSS credentials %s: %s is missing", path, fields[i]);
        }
    }
    /* the endpoint is a host name: white space around it (a file ending in a newline) is not
     * part of it; the keys stay verbatim, as the Go tool reads them */
    char *e = out->endpoint;
    size_t l = strlen(e), b = 0;
    while (l > 0 && strchr(" \t\r\n", e[l - 1]))
        e[--l] = '\0';
    while (e[b] && strchr(" \t\r\n", e[b]))
        b++;
    memmove(e, e + b, l - b + 1);
    if (!e[0]) {
        oss_creds_clear(out);
        return err_set(ERR_INVALID, "OSS credentials %s: storageEndpoint is missing", path);
    }
    return 0;
}

/* ---- signing ---- */

typedef struct {
    const char *name, *value;
} SubRes;

static int sub_cmp(const void *a, const void *b) {
    return strcmp(((const SubRes *)a)->name, ((const SubRes *)b)->name);
}

char *oss_string_to_sign(const char *method, const char *const *headers, size_t n_headers,
                         const char *bucket, const char *key, const char *const *sub_names,
                         const char *const *sub_values, size_t n_sub) {
    StrBuf b = {0};
    SubRes *sr = calloc(n_sub + 1, sizeof *sr);
    if (!sr) goto fail;
    strbuf_str(&b, method);
    strbuf_str(&b, "\n");
    static const char *const std[] = {"Content-MD5", "Content-Type", "Date"};
    for (size_t i = 0; i < 3; i++) {
        size_t l;
        const char *v = objhttp_header_value(headers, n_headers, std[i], &l);
        if (v) strbuf_add(&b, v, l);
        strbuf_str(&b, "\n");
    }
    objhttp_canon_headers(&b, headers, n_headers, "x-oss-");
    strbuf_str(&b, "/");
    strbuf_str(&b, bucket);
    strbuf_str(&b, "/");
    if (key) strbuf_str(&b, key);
    for (size_t i = 0; i < n_sub; i++) {
        sr[i].name = sub_names[i];
        sr[i].value = sub_values ? sub_values[i] : NULL;
    }
    qsort(sr, n_sub, sizeof *sr, sub_cmp);
    for (size_t i = 0; i < n_sub; i++) {
        strbuf_str(&b, i == 0 ? "?" : "&");
        strbuf_str(&b, sr[i].name);
        if (sr[i].value && sr[i].value[0]) {
            strbuf_str(&b, "=");
            strbuf_str(&b, sr[i].value);
        }
    }
    free(sr);
    if (b.oom) {
        free(b.d);
        return NULL;
    }
    return b.d;
fail:
    free(sr);
    free(b.d);
    return NULL;
}

int oss_sign(const char *secret, const char *sts, char *out, size_t cap) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    if (cap < 29 || !HMAC(EVP_sha1(), secret, (int)strlen(secret), (const unsigned char *)sts,
                          strlen(sts), mac, &ml))
        return err_set(ERR_INVALID, "OSS: signing failed");
    EVP_EncodeBlock((unsigned char *)out, mac, (int)ml);
    OPENSSL_cleanse(mac, sizeof mac);
    return 0;
}
