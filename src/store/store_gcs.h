/* store_gcs: the contract of the Google Cloud Storage driver's files, exposed for unit tests and
 * fuzz targets: the service-account credentials as the Go tool accepts them
 * (GOOGLE_APPLICATION_CREDENTIALS, docs/go-tool.md §12), the RS256 JWT exchanged for an OAuth2
 * access token and the token source that caches it (store_gcs_auth.c); the objects.list JSON
 * parser, metadata and error fields, the chunk layout of uploads and the endpoint parsing
 * (store_gcs_wire.c). The driver itself (store_gcs.c, its writer store_gcs_compose.c) is
 * store_gcs_driver_new (store_driver.h); docs/stores.md describes it. */
#ifndef ETCDBR_STORE_GCS_H
#define ETCDBR_STORE_GCS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ObjHttp ObjHttp;

/* The OAuth2 scope requested (the Go SDK's default, devstorage.full_control). */
#define GCS_SCOPE "https://www.googleapis.com/auth/devstorage.full_control"
/* Sources of one compose call (a GCS limit). */
#define GCS_MAX_COMPOSE 32
/* Components of one composite object (a GCS limit), hence chunks of one upload. */
#define GCS_MAX_COMPONENTS 1024
/* Longest object name (bytes; a GCS limit). */
#define GCS_MAX_KEY 1024
/* Chunk size when --min-chunk-size is not given (bytes; the Go tool's 5 MiB). */
#define GCS_DEFAULT_CHUNK (5 * 1024 * 1024)
/* Chunks folded into one intermediate composite (+ the previous one = GCS_MAX_COMPOSE). */
#define GCS_BATCH 31

/* A service-account key file. Strings owned; NULL when absent. */
typedef struct GcsCreds {
    char *project_id;
    char *client_email;
    char *private_key; /* PEM (secret: wiped on clear) */
    char *private_key_id;
    char *token_uri;       /* default https://oauth2.googleapis.com/token */
    char *universe_domain; /* default googleapis.com */
} GcsCreds;

/* Wipes the key and frees every field; zeroes c (NULL-safe). */
void gcs_creds_clear(GcsCreds *c);

/* Parses and validates a credentials JSON document (len bytes, need not be NUL-terminated) the
 * way the Go tool does: "type" must be "service_account" (an "external_account" file, workload
 * identity, gives ERR_UNSUPPORTED: gcs_ext_parse reads those), every field must be one of type,
 * project_id, client_email, universe_domain, auth_uri, auth_provider_x509_cert_url,
 * client_x509_cert_url, client_id, private_key_id, private_key, token_uri (strings), project_id
 * must match
 * ^[a-z][a-z0-9-]{4,28}[a-z0-9]$, and client_email and private_key must be present. where names
 * the source in messages (never a value). 0, ERR_INVALID, ERR_UNSUPPORTED or ERR_NOMEM. */
int gcs_creds_parse(const char *json, size_t len, const char *where, GcsCreds *out);

/* An external account (workload identity federation) credentials file, the file-sourced kind
 * (Google's AIP-4117 "external_account"). Strings owned; NULL when absent. */
typedef struct GcsExtCreds {
    char *audience;           /* the workload identity provider, sent as the STS audience */
    char *subject_token_type; /* e.g. urn:ietf:params:oauth:token-type:jwt */
    char *token_url;          /* the STS token endpoint (https://sts.googleapis.com/v1/token) */
    char *token_file;         /* credential_source.file: re-read at every exchange */
    char *token_field;        /* credential_source.format.subject_token_field_name (json); NULL:
                                 the file is the token itself (format text) */
    char *impersonation_url;  /* service_account_impersonation_url; NULL: use the STS token */
    char *universe_domain;    /* NULL: googleapis.com */
    int64_t lifetime;         /* service_account_impersonation.token_lifetime_seconds; 3600 */
} GcsExtCreds;

/* Frees every field and zeroes c (NULL-safe). */
void gcs_ext_clear(GcsExtCreds *c);

/* Parses an external_account credentials document (len bytes): "type" must be
 * "external_account"; audience, subject_token_type, token_url (http or https) and
 * credential_source.file are required strings; credential_source.format, when present, is
 * {"type":"text"} or {"type":"json","subject_token_field_name":...}; a credential_source.url,
 * .executable or .environment_id (URL, executable and AWS sources) is ERR_UNSUPPORTED;
 * service_account_impersonation_url (http or https) and
 * service_account_impersonation.token_lifetime_seconds (600..43200) are optional; other fields
 * (client_id, quota_project_id, ...) are ignored, as Google's libraries ignore unknown ones.
 * where names the source in messages. 0, ERR_INVALID, ERR_UNSUPPORTED or ERR_NOMEM. */
int gcs_ext_parse(const char *json, size_t len, const char *where, GcsExtCreds *out);

/* The subject token of c: credential_source.file read now (oauth2_read_token_file, at most
 * OAUTH2_TOKEN_FILE_MAX bytes), or its field token_field when the format is json. *out owned
 * (secret). 0, ERR_IO, ERR_INVALID (too large, empty, not JSON or no such string field) or
 * ERR_NOMEM. */
int gcs_ext_subject_token(const GcsExtCreds *c, char **out);

/* An access token for c: the subject token exchanged at token_url (RFC 8693 token exchange, as
 * Google's STS takes it: grant_type token-exchange, audience, scope, requested_token_type
 * access_token, subject_token, subject_token_type), then, with impersonation_url, that token
 * exchanged there for the service account's (POST {"scope":[scope],"lifetime":"<n>s"} with
 * "Authorization: Bearer"). The STS scope is cloud-platform when impersonating, else scope.
 * *token owned (secret), *expires_in seconds. Errors as oauth2_fetch (a refusal names the
 * endpoint, never a token) or gcs_ext_subject_token. */
int gcs_ext_token(const GcsExtCreds *c, ObjHttp *http, const char *scope, char **token,
                  int64_t *expires_in);

/* The metadata server's host ($GCE_METADATA_HOST, which Google's client libraries honour, else
 * metadata.google.internal) into out (cap bytes). 0 or ERR_INVALID (a host with '/', blanks or
 * longer than the buffer). */
int gcs_metadata_host(char *out, size_t cap);

/* An access token of the instance's (or GKE workload's) default service account: GET
 * http://<gcs_metadata_host>/computeMetadata/v1/instance/service-accounts/default/token with
 * "Metadata-Flavor: Google". *token owned (secret), *expires_in seconds. Errors as
 * oauth2_fetch. */
int gcs_metadata_token(ObjHttp *http, char **token, int64_t *expires_in);

/* base64url without padding (RFC 7515) of len bytes; owned, NULL on allocation failure. */
char *gcs_b64url(const void *data, size_t len);

/* The signed JWT assertion of the OAuth2 JWT-bearer grant (RFC 7523): header
 * {"alg":"RS256","typ":"JWT"[,"kid":private_key_id]}, claims {"iss":client_email,"scope":scope,
 * "aud":token_uri,"iat":now,"exp":now+3600}, signed RS256 with the PEM private key. *out owned
 * (secret-ish: wipe after use). 0, ERR_INVALID (the key is not an RSA private key in PEM) or
 * ERR_NOMEM. */
int gcs_jwt(const GcsCreds *c, const char *scope, int64_t now, char **out);

/* Parses a token endpoint response: {"access_token":..., "expires_in":N, ...}
 * (oauth2_token_parse). *token owned (secret), *expires_in seconds (3600 when absent, at most a
 * day). 0 or ERR_CORRUPT (message has the OAuth2 "error"/"error_description" if present, never
 * a token; a lifetime that is not a positive integer). */
int gcs_token_parse(const char *json, size_t len, char **token, int64_t *expires_in);

/* The driver's token source: the credentials file at cred_path (re-read when it changes): a
 * service-account key whose JWT is exchanged for OAuth2 access tokens, or an external_account
 * file (gcs_ext_token); cred_path NULL: the metadata server (gcs_metadata_token). Tokens are
 * cached until shortly before they expire (oauth2_cached_set). Thread-safe; one refresh at a
 * time. bucket names the store in messages. */
typedef struct GcsTokens GcsTokens;

/* Loads the credentials file (gcs_creds_parse or gcs_ext_parse, by its "type"; a missing file is
 * ERR_INVALID); cred_path NULL: the metadata server, nothing read yet. cred_var names the
 * variable that would have given the file ("SECONDARY_GOOGLE_APPLICATION_CREDENTIALS"), for the
 * metadata server's messages. *out owned
 * (gcs_tokens_free). 0, ERR_INVALID, ERR_UNSUPPORTED, ERR_IO or ERR_NOMEM. */
int gcs_tokens_new(const char *bucket, const char *cred_path, const char *cred_var,
                   GcsTokens **out);
/* Wipes the key and the token and frees t (NULL-safe). */
void gcs_tokens_free(GcsTokens *t);
/* The credentials' universe_domain (borrowed; NULL when absent or t is NULL). */
const char *gcs_tokens_universe(const GcsTokens *t);
/* "Authorization: Bearer <token>" into *out (owned, secret: objhttp_free_secret), fetching a token
 * through http when none is cached or it is about to expire; *gen names the token (for
 * gcs_tokens_invalidate). 0, ERR_INVALID (the token endpoint refused the key: the message names
 * the account and the key file, never the key), or another ERR_* of the exchange. */
int gcs_tokens_header(GcsTokens *t, ObjHttp *http, char **out, long *gen);
/* Drops token gen (refused with 401) unless another thread replaced it already. */
void gcs_tokens_invalidate(GcsTokens *t, long gen);

/* An integer field of an object's metadata JSON (len bytes; int64 as a JSON string, or a number)
 * into *out: 0, or ERR_CORRUPT (no such field, or not an integer; no message). */
int gcs_meta_int(const char *json, size_t len, const char *field, int64_t *out);

/* "reason: message" of a JSON API error document (len bytes) into out (cap bytes, cap > 0; ""
 * when there is none), for messages. */
void gcs_api_error(const char *json, size_t len, char *out, size_t cap);

/* Called for each object of a listing page: name (borrowed), size in bytes (-1 if absent) and
 * retentionExpirationTime as Unix seconds (0 if absent or unparseable). Nonzero stops. */
typedef int (*GcsListCb)(void *ctx, const char *name, int64_t size, int64_t retention_until);

/* Parses one objects.list response page (len bytes, need not be NUL-terminated): each entry of
 * "items" to cb, *next_token (owned, NULL on the last page) from "nextPageToken". 0,
 * ERR_CORRUPT (not JSON, or an item without a string "name") or cb's return. */
int gcs_list_parse(const char *json, size_t len, GcsListCb cb, void *ctx, char **next_token);

/* Size of chunk number n (1-based) of a streamed upload: min_chunk for the first 128 chunks,
 * then one min_chunk more every 128 chunks (8 * min_chunk for chunks 897..1023), so the 1023
 * chunks a composite object can hold carry 4600 * min_chunk bytes (about 22 GiB at 5 MiB)
 * while at most max-parallel-chunk-uploads + 1 chunks are in memory. */
int64_t gcs_chunk_size(int64_t min_chunk, int n);

/* 1 if key names a chunk object of an upload: "<object>/" followed by exactly 10 digits (the Go
 * tool's "%010d" parts, and our composed intermediates), else 0. */
int gcs_is_chunk_key(const char *key);

/* The API base (scheme://host[:port][/path], no trailing '/', no "/storage/v1") of an endpoint
 * override as the Go SDK takes it ("https://host/storage/v1/", "http://127.0.0.1:4443",
 * "127.0.0.1:4443" = http). *emulator is set for http:// (the Go tool then disables
 * authentication, as STORAGE_EMULATOR_HOST does). Owned; 0 or ERR_INVALID / ERR_NOMEM. */
int gcs_endpoint_parse(const char *endpoint, char **base, int *emulator);

#endif
