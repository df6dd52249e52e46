/* store_s3: the S3 driver's parts that do not talk to a server, exposed for unit tests and fuzz
 * targets: credentials as the Go tool reads them (AWS_APPLICATION_CREDENTIALS(_JSON),
 * OPENSHIFT_APPLICATION_CREDENTIALS(_JSON): a JSON file, or a directory with one file per field,
 * contents verbatim), the part-size choice, and the ListObjectsV2 response parser. The driver
 * itself is store_s3_driver_new (store_driver.h). */
#ifndef ETCDBR_STORE_S3_H
#define ETCDBR_STORE_S3_H

#include <stddef.h>
#include <stdint.h>

/* Parts of one multipart upload at most (S3 API reference, UploadPart). */
#define S3_MAX_PARTS 10000

/* Fields of an S3 or OCS credentials file or directory (JSON keys = file names). Strings owned;
 * NULL when absent. */
typedef struct S3Creds {
    char *region;             /* "region" */
    char *access_key;         /* "accessKeyID" (secret-ish: never logged) */
    char *secret_key;         /* "secretAccessKey" (secret) */
    char *session_token;      /* AWS_SESSION_TOKEN (environment only; secret) */
    char *endpoint;           /* "endpoint" (deprecated for S3; required for OCS) */
    char *trusted_ca_cert;    /* "trustedCaCert": PEM text */
    char *sse_key;            /* "sseCustomerKey" (secret) */
    char *sse_algo;           /* "sseCustomerAlgorithm" */
    char *role_arn;           /* "roleARN": web identity (STS AssumeRoleWithWebIdentity) */
    char *token_path;         /* "tokenPath" (JSON); a directory's file "token" */
    int force_path_style;     /* "s3ForcePathStyle" */
    int insecure_skip_verify; /* "insecureSkipVerify" */
    int disable_ssl;          /* "disableSSL" (OCS) */
} S3Creds;

/* Wipes the secrets and frees every field; zeroes c (NULL-safe). */
void s3_creds_clear(S3Creds *c);

/* Reads path: a directory (a "*.json" file in it, the first in directory order, is parsed as
 * JSON; otherwise one file per field, contents verbatim; booleans may end in white space) or a
 * JSON file. Unknown fields and files are ignored. 0, ERR_NOT_FOUND (path missing), ERR_INVALID
 * (bad JSON, a boolean that is not true/false, or sseCustomerKey without sseCustomerAlgorithm or
 * the reverse) or ERR_IO. The message names the path and field, never a value. */
int s3_creds_read(const char *path, S3Creds *out);

struct StoreConfig;
/* The credentials of provider prov ("S3", "ECS" or "OCS") for the store cfg describes into c:
 * ECS from ECS_* variables; OCS from OPENSHIFT_APPLICATION_CREDENTIALS(_JSON); S3 from
 * --store-credentials or AWS_APPLICATION_CREDENTIALS(_JSON) (with the store's env prefix), else
 * the part of the AWS SDK's default chain we implement (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_REGION, AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE; prefixed first, then
 * unprefixed, as the Go tool's SDK reads them). *path gets the file or directory to watch for
 * rotation (owned; NULL for keys from the environment or web identity). 0 or ERR_INVALID (what
 * is missing, named), ERR_NOT_FOUND, ERR_IO, ERR_NOMEM; c is filled as far as read (clear it
 * with s3_creds_clear in every case). */
int s3_creds_load(const struct StoreConfig *cfg, const char *prov, S3Creds *c, char **path);

/* The newest modification time (ns since the epoch) of path and, for a directory, of every entry
 * in it (symlinks followed, as Kubernetes secret volumes swap them); -1 if path is missing. */
int64_t s3_creds_mtime(const char *path);

/* Temporary credentials from an STS AssumeRoleWithWebIdentity response. Strings owned. */
typedef struct S3StsCreds {
    char *access_key, *secret_key, *session_token; /* secrets */
    int64_t expiration;                            /* unix seconds; 0 if absent */
} S3StsCreds;

/* Wipes and frees the strings; zeroes c (NULL-safe). */
void s3_sts_creds_clear(S3StsCreds *c);

/* Parses an AssumeRoleWithWebIdentity response (AWS STS API reference: Credentials with
 * AccessKeyId, SecretAccessKey, SessionToken and Expiration, ISO 8601 UTC). 0, or ERR_CORRUPT
 * (not such a response, a field missing or a bad time); the message never holds a value. */
int s3_sts_parse(const char *xml, size_t len, S3StsCreds *out);

/* Size of part number part_no (1-based) of an upload: max(min_chunk, ceil(known_size / 9999))
 * when the total size is known (docs/go-tool.md §3.4); for a stream of unknown size (known_size <
 * 0) min_chunk doubled after every 1000 parts, so 10000 parts hold min_chunk * 1023000 bytes
 * (~5 TB at 5 MiB). */
int64_t s3_part_size(int64_t min_chunk, int64_t known_size, int part_no);

/* Called for each object of a listing page: key (decoded, borrowed) and size (-1 if absent).
 * Nonzero stops the parse and is returned. */
typedef int (*S3ListCb)(void *ctx, const char *key, int64_t size);

/* Parses one ListObjectsV2 response page: every <Contents> entry to cb, *truncated from
 * <IsTruncated>, *next_token (owned, NULL if none) from <NextContinuationToken>. XML entities
 * (&amp; &lt; &gt; &quot; &apos; &#N; &#xN;) are decoded. 0, ERR_CORRUPT (malformed) or cb's
 * return. */
/* The UploadId of an InitiateMultipartUploadResult document [xml, xml + len) (need not be
 * NUL-terminated): *upload_id owned. 0, or ERR_CORRUPT (absent, empty, longer than
 * OBJHTTP_ID_MAX bytes, a bad entity) / ERR_NOMEM. */
int s3_parse_upload_id(const char *xml, size_t len, char **upload_id);

int s3_list_parse(const char *xml, size_t len, S3ListCb cb, void *ctx, int *truncated,
                  char **next_token);

#endif
