/* store_s3_wire: the S3 answers the driver reads (store_s3.h): STS AssumeRoleWithWebIdentity,
 * ListObjectsV2 pages, InitiateMultipartUpload; and the part-size rule. Every length is bounded
 * and every entity checked: these bytes come from the server. */
#include "store_s3.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/timeutil.h"
#include "objhttp.h"
#include "store_driver.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

int64_t s3_part_size(int64_t min_chunk, int64_t known_size, int part_no) {
    if (min_chunk <= 0) min_chunk = 5 << 20;
    if (known_size >= 0) {
        int64_t s = (known_size + S3_MAX_PARTS - 2) / (S3_MAX_PARTS - 1);
        return s > min_chunk ? s : min_chunk;
    }
    int shift = part_no > 0 ? (part_no - 1) / 1000 : 0;
    return min_chunk << shift;
}

/* ---- STS response parser ---- */

void s3_sts_creds_clear(S3StsCreds *c) {
    if (!c) return;
    FREE_SECRETS(c->access_key, c->secret_key, c->session_token);
    memset(c, 0, sizeof *c);
}

static const char *xml_find(const char *s, const char *e, const char *tag, size_t *n);

/* "2019-11-09T13:34:41Z" (fractional seconds allowed) to unix seconds; -1 if malformed. */
static int64_t iso8601_utc(const char *s) {
    int y, mo, d, h, mi, sec, used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 ||
        used != 19)
        return -1;
    const char *p = s + 19;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) {
        }
    if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0) return -1;
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 60)
        return -1;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec};
    return (int64_t)timegm(&tm);
}

int s3_sts_parse(const char *xml, size_t len, S3StsCreds *out) {
    memset(out, 0, sizeof *out);
    const char *end = xml + len;
    size_t n = 0;
    const char *cr = memmem(xml, len, "<AssumeRoleWithWebIdentityResponse", 34)
                         ? xml_find(xml, end, "Credentials", &n)
                         : NULL;
    if (!cr) return err_set(ERR_CORRUPT, "STS: not an AssumeRoleWithWebIdentity response");
    const char *ce = cr + n;
    static const char *const tags[] = {"AccessKeyId", "SecretAccessKey", "SessionToken",
                                       "Expiration"};
    char *v[4] = {0};
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++) {
        size_t vn = 0;
        const char *t = xml_find(cr, ce, tags[i], &vn);
        if (!t || vn == 0) {
            rc = err_set(ERR_CORRUPT, "STS: the response has no %s", tags[i]);
        } else if (!(v[i] = objhttp_xml_text(t, vn))) {
            rc = err_set(ERR_CORRUPT, "STS: %s is not valid XML text", tags[i]);
        }
    }
    if (rc == 0 && (out->expiration = iso8601_utc(v[3])) < 0)
        rc = err_set(ERR_CORRUPT, "STS: Expiration is not an ISO 8601 UTC time");
    if (rc == 0) {
        out->access_key = v[0];
        out->secret_key = v[1];
        out->session_token = v[2];
        v[0] = v[1] = v[2] = NULL;
    } else {
        out->expiration = 0;
    }
    for (int i = 0; i < 4; i++)
        objhttp_free_secret(v[i]);
    return rc;
}

/* ---- listing parser ---- */

/* The text between <tag> and </tag> within [s, e), or NULL; *n its length. */
static const char *xml_find(const char *s, const char *e, const char *tag, size_t *n) {
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    size_t ol = strlen(open), cl = strlen(close);
    for (const char *p = s; p + ol <= e; p++) {
        if (memcmp(p, open, ol) != 0) continue;
        const char *v = p + ol;
        for (const char *q = v; q + cl <= e; q++) {
            if (memcmp(q, close, cl) == 0) {
                *n = (size_t)(q - v);
                return v;
            }
        }
        return NULL;
    }
    return NULL;
}

int s3_list_parse(const char *xml, size_t len, S3ListCb cb, void *ctx, int *truncated,
                  char **next_token) {
    *truncated = 0;
    *next_token = NULL;
    const char *end = xml + len;
    if (!memmem(xml, len, "<ListBucketResult", 17))
        return err_set(ERR_CORRUPT, "S3 listing: no ListBucketResult element");
    const char *p = xml;
    for (;;) {
        size_t n;
        const char *c = xml_find(p, end, "Contents", &n);
        if (!c) break;
        const char *ce = c + n;
        size_t kn, sn;
        const char *k = xml_find(c, ce, "Key", &kn);
        if (!k) return err_set(ERR_CORRUPT, "S3 listing: an entry without a Key");
        char *key = objhttp_xml_text(k, kn);
        if (!key)
            return err_set(
                ERR_CORRUPT,
                "S3 listing: a Key with a bad XML entity or a NUL (refused, not cut short)");
        int64_t size = -1;
        const char *sz = xml_find(c, ce, "Size", &sn);
        if (sz && sn > 0 && sn < 20 && objhttp_size_text(sz, sn, &size) != 0) {
            free(key);
            return err_set(ERR_CORRUPT, "S3 listing: bad Size");
        }
        int rc = cb(ctx, key, size);
        free(key);
        if (rc != 0) return rc;
        p = ce + strlen("</Contents>");
        if (p > end) break;
    }
    return objhttp_xml_page_end(xml, end, "NextContinuationToken", objhttp_xml_text_pct, 0,
                                "S3 listing", truncated, next_token);
}

int s3_parse_upload_id(const char *xml, size_t len, char **upload_id) {
    return objhttp_xml_upload_id(xml, len, NULL, "S3", upload_id);
}
