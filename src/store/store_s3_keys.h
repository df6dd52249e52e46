/* store_s3_keys: the keys that sign the S3 driver's requests, and where they are renewed: a
 * credentials file or directory re-read when it changes (a rotated Kubernetes secret), or
 * temporary keys from STS AssumeRoleWithWebIdentity renewed before they expire (EKS IRSA), or
 * keys from the environment that never change. Thread-safe: every request takes a copy of the
 * current keys (s3_keys_take), so a renewal on another thread never pulls them from under it.
 * Internal to the S3 driver (store_s3*.c). */
#ifndef ETCDBR_STORE_S3_KEYS_H
#define ETCDBR_STORE_S3_KEYS_H

#include "objhttp.h"
#include "store_s3.h"

#include <pthread.h>
#include <stdint.h>

typedef struct S3Keys {
    const char *provider, *region; /* borrowed from the driver: messages, SigV4 scope */
    ObjHttp *http;                 /* borrowed: STS calls go through the driver's client */
    pthread_mutex_t mu;            /* guards the keys, cred_mtime and keys_expire */
    char *access_key, *secret_key, *session_token; /* secrets, owned */
    char *cred_path;    /* file or directory re-read on mtime change; NULL = fixed keys */
    int64_t cred_mtime; /* s3_creds_mtime of cred_path when the keys were read */
    /* web identity: keys from STS, renewed before they expire */
    char *role_arn, *token_path, *sts_url, *session_name;
    int64_t keys_expire;    /* unix seconds */
    pthread_mutex_t sts_mu; /* one renewal at a time */
} S3Keys;

/* Keys for one request, copied from S3Keys (secrets owned; s3_auth_clear). */
typedef struct {
    char *user, *pass, *token;
    const char *sigv4;
    char sigv4_buf[160];
} S3Auth;

/* Empty keys for provider in region (both borrowed; they outlive k). Set k->http before the
 * first s3_keys_take when web identity is used. */
void s3_keys_init(S3Keys *k, const char *provider, const char *region);
/* Takes the keys (or, with c->role_arn, the web identity: role, token file, and the STS
 * endpoint from AWS_ENDPOINT_URL_STS or the region's) from c, and *cred_path (owned, NULL =
 * fixed keys) as the file to watch; both are left NULL. 0 or ERR_NOMEM. */
int s3_keys_set(S3Keys *k, S3Creds *c, char **cred_path);
/* Wipes the secrets and frees everything k owns. */
void s3_keys_clear(S3Keys *k);
/* The current keys into *a, renewed first when the credentials file changed (a stat per call;
 * a file that cannot be read now keeps the previous keys, logged) or the temporary keys expire
 * within 300 s (a failed renewal keeps keys that are still valid, logged, and fails once they are
 * not). 0, or ERR_* from STS (the message names the role, never a key). */
int s3_keys_take(S3Keys *k, S3Auth *a);
/* Wipes and frees a's secrets. */
void s3_auth_clear(S3Auth *a);
/* objhttp's auth hook for a request signed with *ctx (an S3Auth): SigV4 by libcurl, and the
 * session token header when there is one. 0 or ERR_NOMEM. */
int s3_auth_hook(void *ctx, CURL *curl, struct curl_slist **headers);

#endif
