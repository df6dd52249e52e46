/* store_s3_keys: the keys that sign the S3 driver's requests (store_s3_keys.h). */
#include "store_s3_keys.h"
#include "objhttp_driver.h"
#include "oauth2.h"
#include "../common/mem.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Web identity (roleARN + token file): the STS endpoint (AWS_ENDPOINT_URL_STS, the SDKs'
 * variable, or the regional one) and the session name; takes role_arn and token_path from c. */
static int take_web_identity(S3Keys *k, S3Creds *c) {
    const char *sts = getenv("AWS_ENDPOINT_URL_STS");
    const char *sn = getenv("AWS_ROLE_SESSION_NAME");
    char def[160];
    snprintf(def, sizeof def, "https://sts.%s.amazonaws.com/", k->region);
    k->role_arn = c->role_arn;
    k->token_path = c->token_path;
    c->role_arn = c->token_path = NULL;
    k->sts_url = strdup(sts && sts[0] ? sts : def);
    if (sn && sn[0]) {
        k->session_name = strdup(sn);
    } else if (asprintf(&k->session_name, "etcdbrctl-%lld", (long long)now_unix_s()) < 0) {
        k->session_name = NULL;
    }
    if (!k->sts_url || !k->session_name)
        return err_set(ERR_NOMEM, "%s: out of memory", k->provider);
    return 0;
}

void s3_auth_clear(S3Auth *a) {
    objhttp_free_secret(a->user);
    objhttp_free_secret(a->pass);
    objhttp_free_secret(a->token);
    memset(a, 0, sizeof *a);
}

static void creds_refresh(S3Keys *k);
static int sts_refresh(S3Keys *k);

/* Every request takes its keys here, after a check that the credentials file did not change (a
 * stat per request), or with web identity that the temporary keys are not about to expire, so
 * no kind of request keeps using keys that were replaced. */
int s3_keys_take(S3Keys *k, S3Auth *a) {
    memset(a, 0, sizeof *a);
    if (k->role_arn) {
        int rc = sts_refresh(k);
        if (rc) return rc;
    } else {
        creds_refresh(k);
    }
    pthread_mutex_lock(&k->mu);
    a->user = strdup(k->access_key);
    a->pass = strdup(k->secret_key);
    a->token = k->session_token ? strdup(k->session_token) : NULL;
    int bad = !a->user || !a->pass || (k->session_token && !a->token);
    pthread_mutex_unlock(&k->mu);
    snprintf(a->sigv4_buf, sizeof a->sigv4_buf, "aws:amz:%s:s3", k->region);
    a->sigv4 = a->sigv4_buf;
    if (bad) {
        s3_auth_clear(a);
        return err_set(ERR_NOMEM, "%s: out of memory", k->provider);
    }
    return 0;
}

int s3_auth_hook(void *ctx, CURL *curl, struct curl_slist **headers) {
    S3Auth *a = ctx;
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, a->sigv4);
    curl_easy_setopt(curl, CURLOPT_USERNAME, a->user);
    curl_easy_setopt(curl, CURLOPT_PASSWORD, a->pass);
    if (a->token) {
        char *h = objhttp_header_line("x-amz-security-token", a->token);
        int rc =
            h ? objhttp_hook_header(headers, h, "S3") : err_set(ERR_NOMEM, "S3: out of memory");
        objhttp_free_secret(h);
        if (rc) return rc;
    }
    return 0;
}

/* Keys are renewed this long before STS says they expire. */
#define STS_RENEW_BEFORE_S 300

/* One AssumeRoleWithWebIdentity call (AWS STS API reference): the token file read now (projected
 * service-account tokens rotate), unsigned form POST to k->sts_url. */
static int sts_assume(S3Keys *k, S3StsCreds *out) {
    char what[64];
    snprintf(what, sizeof what, "%s web identity", k->provider);
    char *tok = NULL; /* trimmed, bounded, refused when empty */
    int rc = oauth2_read_token_file(k->token_path, what, &tok);
    if (rc) return rc;
    char *e_role = objhttp_pct_encode(k->role_arn, 0);
    char *e_name = objhttp_pct_encode(k->session_name, 0);
    char *e_tok = objhttp_pct_encode(tok, 0);
    objhttp_free_secret(tok);
    char *body = NULL;
    if (e_role && e_name && e_tok &&
        asprintf(&body,
                 "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s"
                 "&RoleSessionName=%s&WebIdentityToken=%s",
                 e_role, e_name, e_tok) < 0)
        body = NULL;
    if (e_tok) objhttp_free_secret(e_tok);
    free(e_role);
    free(e_name);
    if (!body) return err_set(ERR_NOMEM, "%s web identity: out of memory", k->provider);
    const char *hdrs[] = {"Content-Type: application/x-www-form-urlencoded; charset=utf-8",
                          "Accept: application/xml"};
    ObjHttpRequest req = {.method = "POST",
                          .url = k->sts_url,
                          .headers = hdrs,
                          .n_headers = 2,
                          .body = body,
                          .body_len = strlen(body)};
    ObjHttpResponse resp = {0};
    rc = objhttp_do(k->http, &req, &resp);
    objhttp_free_secret(body);
    if (rc == 0) rc = s3_sts_parse(resp.body, resp.body_len, out);
    objhttp_response_clear(&resp);
    if (rc)
        err_wrap(rc, "%s web identity: AssumeRoleWithWebIdentity for role %s", k->provider,
                 k->role_arn);
    return rc;
}

/* Renews the temporary keys when there are none or they expire within STS_RENEW_BEFORE_S. A
 * failed renewal keeps keys that are still valid (logged) and fails once they are not. */
static int sts_refresh(S3Keys *k) {
    int64_t now = now_unix_s();
    pthread_mutex_lock(&k->mu);
    int fresh = k->access_key && now < k->keys_expire - STS_RENEW_BEFORE_S;
    pthread_mutex_unlock(&k->mu);
    if (fresh) return 0;
    pthread_mutex_lock(&k->sts_mu);
    pthread_mutex_lock(&k->mu); /* another thread may have renewed them meanwhile */
    fresh = k->access_key && now < k->keys_expire - STS_RENEW_BEFORE_S;
    int usable = k->access_key && now < k->keys_expire;
    pthread_mutex_unlock(&k->mu);
    int rc = 0;
    if (!fresh) {
        S3StsCreds c = {0};
        rc = sts_assume(k, &c);
        if (rc == 0) {
            int64_t exp = c.expiration > now ? c.expiration : now + 900;
            pthread_mutex_lock(&k->mu);
            objhttp_free_secret(k->access_key);
            objhttp_free_secret(k->secret_key);
            objhttp_free_secret(k->session_token);
            k->access_key = c.access_key;
            k->secret_key = c.secret_key;
            k->session_token = c.session_token;
            k->keys_expire = exp;
            pthread_mutex_unlock(&k->mu);
            c.access_key = c.secret_key = c.session_token = NULL;
            log_info("%s: temporary credentials for role %s, valid for %llds", k->provider,
                     k->role_arn, (long long)(exp - now));
        } else if (usable) {
            log_warn("%s: renewing the temporary credentials failed (the current ones are valid "
                     "for %llds more): %s",
                     k->provider, (long long)(k->keys_expire - now), err_msg());
            rc = 0;
        }
        s3_sts_creds_clear(&c);
    }
    pthread_mutex_unlock(&k->sts_mu);
    return rc;
}

/* Re-reads the credentials file when its mtime changed; a file that cannot be read now keeps
 * the keys in use (logged), as a secret being rotated may be briefly incomplete. */
static void creds_refresh(S3Keys *k) {
    if (!k->cred_path) return;
    int64_t m = s3_creds_mtime(k->cred_path);
    ObjHttpKeyPair pair = {&k->mu, &k->access_key, &k->secret_key, &k->cred_mtime};
    if (!objhttp_key_pair_changed(&pair, m)) return;
    S3Creds c;
    int rc = s3_creds_read(k->cred_path, &c);
    if (rc == 0 && (!c.access_key || !c.secret_key))
        rc = err_set(ERR_INVALID, "credentials %s: accessKeyID or secretAccessKey missing",
                     k->cred_path);
    if (rc != 0) {
        log_warn("%s: credentials changed but cannot be read (keeping the previous keys): %s",
                 k->provider, err_msg());
        s3_creds_clear(&c);
        return;
    }
    objhttp_key_pair_swap(&pair, &c.access_key, &c.secret_key, m);
    s3_creds_clear(&c);
    log_info("%s: credentials re-read from %s", k->provider, k->cred_path);
}

void s3_keys_init(S3Keys *k, const char *provider, const char *region) {
    memset(k, 0, sizeof *k);
    k->provider = provider;
    k->region = region;
    pthread_mutex_init(&k->mu, NULL);
    pthread_mutex_init(&k->sts_mu, NULL);
}

int s3_keys_set(S3Keys *k, S3Creds *c, char **cred_path) {
    if (c->role_arn) {
        int rc = take_web_identity(k, c);
        if (rc) return rc;
        free(*cred_path); /* web identity: the token file is read at each exchange */
        *cred_path = NULL;
    }
    k->access_key = c->access_key;
    k->secret_key = c->secret_key;
    k->session_token = c->session_token;
    c->access_key = c->secret_key = c->session_token = NULL;
    k->cred_path = *cred_path;
    *cred_path = NULL;
    if (k->cred_path) k->cred_mtime = s3_creds_mtime(k->cred_path);
    return 0;
}

void s3_keys_clear(S3Keys *k) {
    FREE_SECRETS(k->access_key, k->secret_key, k->session_token);
    FREE_ALL(k->cred_path, k->role_arn, k->token_path, k->sts_url, k->session_name);
    pthread_mutex_destroy(&k->mu);
    pthread_mutex_destroy(&k->sts_mu);
    memset(k, 0, sizeof *k);
}
