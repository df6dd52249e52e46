/* store_abs: the Azure Blob Storage driver ("ABS"), on objhttp. Block blobs, SharedKey auth (or a
 * SAS token), path-style URLs for emulators (azurite). The contract of its files: credentials
 * parsing, string-to-sign, signature, block ids and the keyring (store_abs_auth.c), the listing
 * XML (store_abs_wire.c), declared here so unit tests can pin them; the driver itself
 * (store_abs.c) is reached through store_abs_driver_new or store_open("ABS"). */
#ifndef ETCDBR_STORE_ABS_H
#define ETCDBR_STORE_ABS_H

#include "store_driver.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The storage service version every request names (x-ms-version). */
#define ABS_API_VERSION "2021-08-06"

/* Credentials of one storage account. Strings owned (abs_creds_clear wipes and frees them). */
typedef struct AbsCreds {
    char *account;      /* storageAccount / AccountName */
    unsigned char *key; /* storageKey / AccountKey, base64-decoded; NULL with a SAS only */
    size_t key_len;
    char *domain;        /* "blob.core.windows.net" unless given */
    char *sas;           /* SAS token without a leading '?'; NULL if none */
    char *blob_endpoint; /* connection string BlobEndpoint (scheme://host[:port][/path]) */
} AbsCreds;

/* Loads credentials as the Go tool does from path: a JSON file (fields storageAccount,
 * storageKey, domain, sasToken; bucketName ignored) or a directory: its first "*.json" file (in
 * directory order) as JSON, else one file per field, contents verbatim (base64 line breaks in
 * the key are ignored, as Go's decoder does). storageAccount is required; the driver also needs
 * storageKey, sasToken or $AZURE_STORAGE_SAS_TOKEN. 0, ERR_NOT_FOUND (path missing), ERR_INVALID
 * (message names the field, never its value) or ERR_NOMEM. */
int abs_creds_load(const char *path, AbsCreds *out);

/* Parses a connection string ("AccountName=..;AccountKey=..;BlobEndpoint=..;EndpointSuffix=..;
 * SharedAccessSignature=.."). 0 or ERR_INVALID/ERR_NOMEM. */
int abs_creds_from_connection_string(const char *cs, AbsCreds *out);

/* Wipes and frees what c holds and zeroes it (NULL-safe). */
void abs_creds_clear(AbsCreds *c);

/* The SharedKey string-to-sign (version 2015-02-21 and later) of a request: method, body length
 * (0 = empty field), headers as "Name: value" lines (the standard ones it names and every
 * x-ms-* one, x-ms-date included), the account, the request path as percent-encoded in the
 * URL ("/<container>/<blob>", or "/<account>/<container>/<blob>" path-style, which then names
 * the account twice) and the query parameters (raw values). Owned, NULL on allocation failure. */
char *abs_string_to_sign(const char *method, uint64_t content_length, const char *const *headers,
                         size_t n_headers, const char *account, const char *path,
                         const char *const *qnames, const char *const *qvalues, size_t nq);

/* base64(HMAC-SHA256(key, sts)) into out (cap >= 45). 0 or ERR_INVALID. */
int abs_sign(const unsigned char *key, size_t key_len, const char *sts, char *out, size_t cap);

/* What signing a request and building its URL need, copied per request (abs_keyring_get) so no
 * lock is held while it is sent. Holds secrets: abs_req_creds_clear wipes it. */
typedef struct AbsReqCreds {
    char account[256];
    unsigned char key[128]; /* decoded storage key; key_len 0: a SAS or a bearer token instead */
    size_t key_len;
    char *sas;           /* owned; NULL with a key */
    char *bearer;        /* "Authorization: Bearer <token>" (owned); workload identity only */
    long gen;            /* names the bearer token (abs_keyring_invalidate) */
    char base[1024];     /* scheme://host[:port][/path] */
    size_t base_pathoff; /* where the path of base starts (its length if none) */
} AbsReqCreds;

/* Wipes r and frees its SAS and bearer line. */
void abs_req_creds_clear(AbsReqCreds *r);

/* A request as SharedKey signs it: headers are "Name: value" lines (x-ms-version included, not
 * x-ms-date), path is percent-encoded as in the URL, the query pairs raw. All borrowed. */
typedef struct AbsSignReq {
    const char *method;
    const char *path;
    const char *const *qn;
    const char *const *qv;
    size_t nq;
    const char *const *headers;
    size_t nh;
    uint64_t content_length;
} AbsSignReq;

/* The two header lines a SharedKey request adds, for the time now: "x-ms-date: <RFC 1123 date>"
 * into date_h (date_cap >= 64 bytes) and "Authorization: SharedKey <account>:<signature>" into
 * auth (auth_cap >= 320 bytes; a secret: wipe after use). c must hold a key. 0, ERR_INVALID
 * (signing failed) or ERR_NOMEM. */
int abs_sign_headers(const AbsReqCreds *c, const AbsSignReq *s, time_t now, char *date_h,
                     size_t date_cap, char *auth, size_t auth_cap);

/* Azure workload identity (Microsoft Entra ID federated credentials, as the Azure Workload
 * Identity webhook sets them up): $AZURE_FEDERATED_TOKEN_FILE (a projected token, re-read at each
 * exchange), $AZURE_CLIENT_ID, $AZURE_TENANT_ID and $AZURE_AUTHORITY_HOST (default
 * https://login.microsoftonline.com/). */
typedef struct AbsWid AbsWid;
typedef struct ObjHttp ObjHttp;

/* *out from the environment, or NULL (and 0) when one of the three required variables is unset.
 * 0, ERR_INVALID (a tenant id that is not [A-Za-z0-9.-]{1,128}, a client id longer than 128
 * bytes, an authority host that is not an http(s) URL) or ERR_NOMEM. */
int abs_wid_from_env(AbsWid **out);
/* Frees w (NULL-safe). */
void abs_wid_free(AbsWid *w);
/* The token endpoint: <authority>/<tenant>/oauth2/v2.0/token (borrowed). */
const char *abs_wid_token_url(const AbsWid *w);
/* An access token for Blob storage: the client-credentials grant with the token file as a JWT
 * client assertion (Microsoft identity platform: client_id, scope
 * https://storage.azure.com/.default, grant_type client_credentials, client_assertion_type
 * urn:ietf:params:oauth:client-assertion-type:jwt-bearer, client_assertion). *token owned
 * (secret), *expires_in seconds. Errors as oauth2_fetch (a refusal names the endpoint and
 * Entra's error, never a token) or oauth2_read_token_file. */
int abs_wid_token(const AbsWid *w, ObjHttp *http, char **token, int64_t *expires_in);

/* The driver's credentials: read once from what cfg names (cfg->credentials, else
 * $AZURE_APPLICATION_CREDENTIALS_JSON, else $AZURE_APPLICATION_CREDENTIALS, else
 * $AZURE_STORAGE_CONNECTION_STRING; $AZURE_STORAGE_SAS_TOKEN when they carry no SAS) and re-read
 * when their files change. With neither a key nor a SAS, workload identity (abs_wid_from_env)
 * supplies bearer tokens; the account then comes from those credentials, else from
 * $AZURE_STORAGE_ACCOUNT. Thread-safe. */
typedef struct AbsKeyring AbsKeyring;

/* endpoint: the override (scheme://host[:port][/path], no trailing '/'; copied) or NULL. *out
 * owned (abs_keyring_free). 0, ERR_INVALID (no credentials, or neither a key nor a SAS nor
 * workload identity; the message names the variables, never a value) or ERR_NOMEM. */
int abs_keyring_new(const StoreConfig *cfg, const char *endpoint, AbsKeyring **out);
/* Wipes and frees k (NULL-safe). */
void abs_keyring_free(AbsKeyring *k);
/* The account name of the credentials (borrowed from k; read it before k is shared between
 * threads, as a rotation replaces it), for messages. */
const char *abs_keyring_account(const AbsKeyring *k);
/* 1 when requests carry workload identity bearer tokens. */
int abs_keyring_bearer(AbsKeyring *k);
/* A copy of the current credentials and URL base into *r (clear it with abs_req_creds_clear);
 * with workload identity, r->bearer, fetched through http when none is cached or it is about to
 * expire (one fetch at a time). 0, ERR_INVALID (account, key or endpoint longer than the copy
 * holds; the token endpoint refused), ERR_NOMEM or another ERR_* of the token fetch. */
int abs_keyring_get(AbsKeyring *k, ObjHttp *http, AbsReqCreds *r);
/* Drops bearer token gen (refused with 401) unless another thread replaced it already. */
void abs_keyring_invalidate(AbsKeyring *k, long gen);

/* The id of block n (1-based) as the Go tool makes it: base64 of "%010d" (16 chars + NUL). */
void abs_block_id(int n, char out[24]);

/* Parses one List Blobs response page: cb(ctx, name, size) per <Blob> (names entity-decoded, or
 * percent-decoded when Encoded="true"); *next_marker gets the NextMarker (owned; NULL when it is
 * empty or absent: the last page). 0, ERR_CORRUPT (malformed), ERR_NOMEM or cb's nonzero. */
int abs_parse_list(const char *xml, size_t len, StoreDriverListCb cb, void *ctx,
                   char **next_marker);

/* The ABS driver for cfg (container, endpoint_override, credentials, ca_file,
 * insecure_skip_verify, min_chunk_size, max_parallel_chunk_uploads, timeout_ms). Credentials:
 * cfg->credentials, else $AZURE_APPLICATION_CREDENTIALS_JSON, else $AZURE_APPLICATION_CREDENTIALS,
 * else $AZURE_STORAGE_CONNECTION_STRING; $AZURE_STORAGE_SAS_TOKEN supplies a SAS token when the
 * credentials carry none. Checks that the container exists. *out owned (store_driver_free).
 * 0, ERR_INVALID (no or bad credentials, no container), ERR_NOT_FOUND (container missing) or
 * ERR_IO (the check failed: message names the URL and status, 403 explained). */
int store_abs_driver_new(const StoreConfig *cfg, StoreDriver **out);

#endif
