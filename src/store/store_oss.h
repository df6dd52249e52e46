/* store_oss: the Alibaba Cloud OSS driver ("OSS"), on objhttp. Signature V1 (HMAC-SHA1), native
 * multipart uploads, ListObjects (v1, marker paging). The parts that do not talk to a server
 * (credentials, string-to-sign, signature, XML parsers) are declared here so unit tests and fuzz
 * targets can pin them; the driver is reached through store_oss_driver_new or store_open("OSS"). */
#ifndef ETCDBR_STORE_OSS_H
#define ETCDBR_STORE_OSS_H

#include "store_driver.h"

#include <stddef.h>
#include <stdint.h>

/* Credentials as the Go tool reads them (docs/go-tool.md §12): strings owned, wiped by
 * oss_creds_clear. */
typedef struct OssCreds {
    char *endpoint;   /* "storageEndpoint": host[:port] or scheme://host[:port] */
    char *access_key; /* "accessKeyID" */
    char *secret;     /* "accessKeySecret" (secret) */
} OssCreds;

/* Loads path: a JSON file, or a directory (its first "*.json" file, else one file per field,
 * contents verbatim). storageEndpoint, accessKeyID and accessKeySecret are required; bucketName
 * and unknown fields are ignored. 0, ERR_NOT_FOUND (path missing), ERR_INVALID (message names
 * the path and field, never a value), ERR_IO or ERR_NOMEM. */
int oss_creds_load(const char *path, OssCreds *out);

/* Wipes and frees what c holds and zeroes it (NULL-safe). */
void oss_creds_clear(OssCreds *c);

/* The V1 string-to-sign: VERB, Content-MD5, Content-Type and Date (taken from the "Name: value"
 * header lines, empty when absent), the x-oss-* headers (names lower-cased, values trimmed,
 * sorted, "name:value\n"), then the canonicalized resource "/<bucket>/<key>" (key raw, not
 * percent-encoded; "/<bucket>/" for the bucket itself) with the signed sub-resources sorted by
 * name: "?uploads", "?partNumber=1&uploadId=X" (values raw; a NULL or empty value gives the bare
 * name). Owned, NULL on allocation failure. */
char *oss_string_to_sign(const char *method, const char *const *headers, size_t n_headers,
                         const char *bucket, const char *key, const char *const *sub_names,
                         const char *const *sub_values, size_t n_sub);

/* base64(HMAC-SHA1(secret, sts)) into out (cap >= 29). 0 or ERR_INVALID. */
int oss_sign(const char *secret, const char *sts, char *out, size_t cap);

/* Parses one ListObjects (v1) page: cb(ctx, key, size) per <Contents> (keys entity-decoded, and
 * URL-decoded when the page says <EncodingType>url</EncodingType>); *truncated from
 * <IsTruncated>; *next_marker (owned, NULL if none) from <NextMarker>, decoded the same way. A
 * truncated page without a NextMarker is ERR_CORRUPT (paging could not go on). 0, ERR_CORRUPT,
 * ERR_NOMEM or cb's nonzero. */
int oss_parse_list(const char *xml, size_t len, StoreDriverListCb cb, void *ctx, int *truncated,
                   char **next_marker);

/* The UploadId of an InitiateMultipartUploadResult into *upload_id (owned). 0 or ERR_CORRUPT. */
int oss_parse_upload_id(const char *xml, size_t len, char **upload_id);

/* The <Code> of an OSS <Error> document into code (cap bytes, truncated; "" when none). Returns
 * code. */
const char *oss_parse_error_code(const char *xml, size_t len, char *code, size_t cap);

/* Whether host (no scheme, no port; "[v6]" allowed) is an IP address literal: such endpoints are
 * addressed path-style (http://ip:port/bucket/key), as Alibaba's Go SDK does; others
 * virtual-hosted (https://bucket.endpoint/key). */
int oss_host_is_ip(const char *host, size_t len);

/* The base URL of bucket at endpoint ep ("host[:port]" or "scheme://host[:port]", http or https,
 * https when none): "scheme://bucket.host[:port]", or "scheme://host[:port]/bucket" for an IP
 * host (OSS serves virtual-hosted names only on DNS names). *out owned. 0, ERR_INVALID (a bad
 * scheme, a path, query, userinfo or space in ep; the message names ep) or ERR_NOMEM. */
int oss_base_url(const char *ep, const char *bucket, char **out);

/* The driver itself: store_oss_driver_new (store_driver.h). */

#endif
