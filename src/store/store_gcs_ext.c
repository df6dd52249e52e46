/* store_gcs_ext: the GCS driver's token sources beyond the service-account key (store_gcs.h):
 * workload identity federation (an external_account file whose subject token, a projected
 * Kubernetes token for example, is exchanged at Google's STS and optionally for a service
 * account's token at IAM Credentials) and the metadata server of GCE and GKE. The formats are
 * Google's (AIP-4117 external account credentials, the STS v1 token method, IAM Credentials'
 * generateAccessToken, the Compute metadata server); docs/stores.md describes them. Subject
 * tokens and access tokens never reach messages or logs. */
#include "../common/mem.h"
#include "../common/err.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "oauth2.h"
#include "store_gcs.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GCS_CLOUD_PLATFORM "https://www.googleapis.com/auth/cloud-platform"
#define GCS_METADATA_DEFAULT_HOST "metadata.google.internal"
#define GCS_METADATA_PATH "/computeMetadata/v1/instance/service-accounts/default/token"

void gcs_ext_clear(GcsExtCreds *c) {
    if (!c) return;
    FREE_ALL(c->audience, c->subject_token_type, c->token_url, c->token_file, c->token_field,
             c->impersonation_url, c->universe_domain);
    memset(c, 0, sizeof *c);
}

/* A string field of obj into *out (owned; NULL when absent). ERR_INVALID when present but not a
 * string, or required and absent or empty. */
static int ext_str(json_t *obj, const char *name, int required, const char *where, char **out) {
    json_t *v = json_object_get(obj, name);
    *out = NULL;
    if (!v && !required) return 0;
    if (!json_is_string(v) || (required && !json_string_value(v)[0]))
        return err_set(ERR_INVALID, "GCS credentials %s: %s must be a%s string", where, name,
                       required ? " non-empty" : "");
    *out = strdup(json_string_value(v));
    return *out ? 0 : err_set(ERR_NOMEM, "GCS credentials: out of memory");
}

static int is_http_url(const char *u) {
    return u && (strncmp(u, "https://", 8) == 0 || strncmp(u, "http://", 7) == 0);
}

/* credential_source of root into out. */
static int ext_source(json_t *root, const char *where, GcsExtCreds *out) {
    json_t *src = json_object_get(root, "credential_source");
    if (!json_is_object(src))
        return err_set(ERR_INVALID, "GCS credentials %s: credential_source must be an object",
                       where);
    static const char *const other[] = {"url", "executable", "environment_id"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (json_object_get(src, other[i]))
            return err_set(ERR_UNSUPPORTED,
                           "GCS credentials %s: credential_source.%s is not supported by etcdbr "
                           "(only a token file: credential_source.file)",
                           where, other[i]);
    int rc = ext_str(src, "file", 1, where, &out->token_file);
    if (rc) return rc;
    json_t *fmt = json_object_get(src, "format");
    if (!fmt) return 0;
    const char *ft = json_string_value(json_object_get(fmt, "type"));
    if (!json_is_object(fmt) || !ft || (strcmp(ft, "text") != 0 && strcmp(ft, "json") != 0))
        return err_set(ERR_INVALID,
                       "GCS credentials %s: credential_source.format.type must be \"text\" or "
                       "\"json\"",
                       where);
    if (strcmp(ft, "json") != 0) return 0;
    return ext_str(fmt, "subject_token_field_name", 1, where, &out->token_field);
}

/* The optional impersonation settings of root into out. */
static int ext_impersonation(json_t *root, const char *where, GcsExtCreds *out) {
    int rc = ext_str(root, "service_account_impersonation_url", 0, where, &out->impersonation_url);
    if (rc) return rc;
    if (out->impersonation_url && !is_http_url(out->impersonation_url))
        return err_set(ERR_INVALID,
                       "GCS credentials %s: service_account_impersonation_url must be an http(s) "
                       "URL",
                       where);
    out->lifetime = 3600;
    json_t *sai = json_object_get(root, "service_account_impersonation");
    json_t *lt = json_is_object(sai) ? json_object_get(sai, "token_lifetime_seconds") : NULL;
    if (lt) {
        if (!json_is_integer(lt) || json_integer_value(lt) < 600 || json_integer_value(lt) > 43200)
            return err_set(ERR_INVALID,
                           "GCS credentials %s: service_account_impersonation."
                           "token_lifetime_seconds must be an integer from 600 to 43200",
                           where);
        out->lifetime = json_integer_value(lt);
    }
    return 0;
}

int gcs_ext_parse(const char *json, size_t len, const char *where, GcsExtCreds *out) {
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_set(ERR_INVALID, "GCS credentials %s: not a JSON object (line %d: %s)", where,
                     je.line, root ? "not an object" : je.text);
        goto done;
    }
    const char *type = json_string_value(json_object_get(root, "type"));
    if (!type || strcmp(type, "external_account") != 0) {
        rc = err_set(ERR_INVALID, "GCS credentials %s: type must be external_account", where);
        goto done;
    }
    if ((rc = ext_str(root, "audience", 1, where, &out->audience)) ||
        (rc = ext_str(root, "subject_token_type", 1, where, &out->subject_token_type)) ||
        (rc = ext_str(root, "token_url", 1, where, &out->token_url)) ||
        (rc = ext_str(root, "universe_domain", 0, where, &out->universe_domain)) ||
        (rc = ext_source(root, where, out)) || (rc = ext_impersonation(root, where, out)))
        goto done;
    if (!is_http_url(out->token_url))
        rc = err_set(ERR_INVALID, "GCS credentials %s: token_url must be an http(s) URL", where);
done:
    json_decref(root);
    if (rc) gcs_ext_clear(out);
    return rc;
}

int gcs_ext_subject_token(const GcsExtCreds *c, char **out) {
    *out = NULL;
    char *raw = NULL;
    int rc = oauth2_read_token_file(c->token_file, "GCS workload identity", &raw);
    if (rc || !c->token_field) {
        *out = raw;
        return rc;
    }
    json_t *root = json_loadb(raw, strlen(raw), 0, NULL);
    const char *v = json_string_value(json_object_get(root, c->token_field));
    if (!v || !v[0])
        rc = err_set(ERR_INVALID,
                     "GCS workload identity: token file %s is not a JSON object with a string "
                     "field %.80s",
                     c->token_file, c->token_field);
    else if (!(*out = strdup(v)))
        rc = err_set(ERR_NOMEM, "GCS workload identity: out of memory");
    if (v) OPENSSL_cleanse((char *)v, strlen(v));
    json_decref(root);
    objhttp_free_secret(raw);
    return rc;
}

/* The STS form for subject token st (owned, secret); NULL on allocation failure. */
static char *sts_form(const GcsExtCreds *c, const char *scope, const char *st) {
    char *a = objhttp_pct_encode(c->audience, 0);
    char *sc = objhttp_pct_encode(scope, 0);
    char *t = objhttp_pct_encode(st, 0);
    char *tt = objhttp_pct_encode(c->subject_token_type, 0);
    char *f = a && sc && t && tt
                  ? objhttp_strfmt("grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3A"
                                   "token-exchange&audience=%s&scope=%s&requested_token_type="
                                   "urn%%3Aietf%%3Aparams%%3Aoauth%%3Atoken-type%%3Aaccess_token"
                                   "&subject_token=%s&subject_token_type=%s",
                                   a, sc, t, tt)
                  : NULL;
    free(a);
    free(sc);
    objhttp_free_secret(t);
    free(tt);
    return f;
}

/* The STS token exchanged at the impersonation URL for the service account's token. */
static int impersonate(const GcsExtCreds *c, ObjHttp *http, const char *scope, const char *sts,
                       char **token, int64_t *expires_in) {
    char *auth = objhttp_strfmt("Authorization: Bearer %s", sts);
    char lt[32];
    snprintf(lt, sizeof lt, "%llds", (long long)c->lifetime);
    json_t *b = json_pack("{s:[s],s:s}", "scope", scope, "lifetime", lt);
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    int rc;
    if (!auth || !body) {
        rc = err_set(ERR_NOMEM, "GCS workload identity: out of memory");
    } else {
        Oauth2Call call = {.what = "GCS workload identity (service account impersonation)",
                           .method = "POST",
                           .url = c->impersonation_url,
                           .content_type = "application/json",
                           .extra_header = auth,
                           .body = body,
                           .token_field = "accessToken",
                           .expire_time_field = "expireTime"};
        rc = oauth2_fetch(http, &call, token, expires_in);
    }
    objhttp_free_secret(auth);
    free(body);
    return rc;
}

int gcs_ext_token(const GcsExtCreds *c, ObjHttp *http, const char *scope, char **token,
                  int64_t *expires_in) {
    *token = NULL;
    char *st = NULL;
    int rc = gcs_ext_subject_token(c, &st);
    if (rc) return rc;
    char *form = sts_form(c, c->impersonation_url ? GCS_CLOUD_PLATFORM : scope, st);
    objhttp_free_secret(st);
    if (!form) return err_set(ERR_NOMEM, "GCS workload identity: out of memory");
    char *sts = NULL;
    int64_t sts_ex = 0;
    rc = oauth2_fetch_form(http, "GCS workload identity", c->token_url, form, &sts, &sts_ex);
    if (rc) return rc;
    if (!c->impersonation_url) {
        *token = sts;
        *expires_in = sts_ex;
        return 0;
    }
    rc = impersonate(c, http, scope, sts, token, expires_in);
    objhttp_free_secret(sts);
    return rc;
}

int gcs_metadata_host(char *out, size_t cap) {
    const char *h = objhttp_env("GCE_METADATA_HOST");
    if (!h) h = GCS_METADATA_DEFAULT_HOST;
    size_t n = strlen(h);
    if (n >= cap || strcspn(h, "/ \t\r\n?#@") != n)
        return err_set(ERR_INVALID, "GCE_METADATA_HOST=%.100s: must be a host[:port]", h);
    memcpy(out, h, n + 1);
    return 0;
}

int gcs_metadata_token(ObjHttp *http, char **token, int64_t *expires_in) {
    char host[256];
    int rc = gcs_metadata_host(host, sizeof host);
    if (rc) return rc;
    char *url = objhttp_strfmt("http://%s" GCS_METADATA_PATH, host);
    if (!url) return err_set(ERR_NOMEM, "GCS: out of memory");
    Oauth2Call call = {.what = "GCS metadata server",
                       .method = "GET",
                       .url = url,
                       .extra_header = "Metadata-Flavor: Google",
                       .token_field = "access_token",
                       .expires_field = "expires_in"};
    rc = oauth2_fetch(http, &call, token, expires_in);
    free(url);
    return rc;
}
