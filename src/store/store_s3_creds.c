/* store_s3_creds: where the S3 driver's credentials come from (store_s3.h): a credentials file
 * or directory as the Go tool reads it (docs/go-tool.md §12), ECS's environment, and the part
 * of the AWS SDK's default chain we implement (keys, session token, region, web identity). */
#include "store_s3.h"
#include "../common/mem.h"
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

/* ---- credentials ---- */

void s3_creds_clear(S3Creds *c) {
    if (!c) return;
    FREE_SECRETS(c->access_key, c->secret_key, c->session_token, c->sse_key);
    FREE_ALL(c->region, c->endpoint, c->trusted_ca_cert, c->sse_algo, c->role_arn, c->token_path);
    memset(c, 0, sizeof *c);
}

typedef enum { F_STR, F_BOOL } FieldType;

static const struct {
    const char *name;
    FieldType type;
    size_t off;
} fields[] = {
    {"region", F_STR, offsetof(S3Creds, region)},
    {"accessKeyID", F_STR, offsetof(S3Creds, access_key)},
    {"secretAccessKey", F_STR, offsetof(S3Creds, secret_key)},
    {"endpoint", F_STR, offsetof(S3Creds, endpoint)},
    {"trustedCaCert", F_STR, offsetof(S3Creds, trusted_ca_cert)},
    {"sseCustomerKey", F_STR, offsetof(S3Creds, sse_key)},
    {"sseCustomerAlgorithm", F_STR, offsetof(S3Creds, sse_algo)},
    {"roleARN", F_STR, offsetof(S3Creds, role_arn)},
    {"tokenPath", F_STR, offsetof(S3Creds, token_path)},
    {"s3ForcePathStyle", F_BOOL, offsetof(S3Creds, force_path_style)},
    {"insecureSkipVerify", F_BOOL, offsetof(S3Creds, insecure_skip_verify)},
    {"disableSSL", F_BOOL, offsetof(S3Creds, disable_ssl)},
};

static int parse_bool(const char *s, size_t len, int *out) {
    while (len > 0 &&
           (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    static const char *const t[] = {"1", "t", "T", "true", "TRUE", "True"};
    static const char *const f[] = {"0", "f", "F", "false", "FALSE", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (strlen(t[i]) == len && memcmp(s, t[i], len) == 0) return *out = 1, 0;
        if (strlen(f[i]) == len && memcmp(s, f[i], len) == 0) return *out = 0, 0;
    }
    return -1;
}

static int set_field(S3Creds *c, size_t i, const char *val, size_t len, const char *path) {
    if (fields[i].type == F_BOOL) {
        if (parse_bool(val, len, (int *)((char *)c + fields[i].off)) != 0)
            return err_set(ERR_INVALID, "credentials %s: %s is not a boolean", path,
                           fields[i].name);
        return 0;
    }
    char **slot = (char **)((char *)c + fields[i].off);
    char *v = malloc(len + 1);
    if (!v) return err_set(ERR_NOMEM, "credentials %s: out of memory", path);
    memcpy(v, val, len);
    v[len] = '\0';
    objhttp_free_secret(*slot);
    *slot = v;
    return 0;
}

static int creds_from_json(const char *path, S3Creds *c) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        if (errno == ENOENT && je.line < 0)
            return err_set(ERR_NOT_FOUND, "credentials %s: no such file", path);
        return err_set(ERR_INVALID, "credentials %s: invalid JSON at line %d: %s", path, je.line,
                       je.text);
    }
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_set(ERR_INVALID, "credentials %s: not a JSON object", path);
        goto done;
    }
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && rc == 0; i++) {
        json_t *v = json_object_get(root, fields[i].name);
        if (!v || json_is_null(v)) continue;
        if (json_is_string(v)) {
            rc = set_field(c, i, json_string_value(v), json_string_length(v), path);
        } else if (json_is_boolean(v) && fields[i].type == F_BOOL) {
            *(int *)((char *)c + fields[i].off) = json_is_true(v);
        } else {
            rc = err_set(ERR_INVALID, "credentials %s: %s has the wrong JSON type", path,
                         fields[i].name);
        }
    }
done:
    json_decref(root);
    return rc;
}

static int creds_from_dir(const char *dir, S3Creds *c) {
    DIR *d = opendir(dir);
    if (!d) return err_set(ERR_IO, "credentials %s: %s", dir, strerror(errno));
    int rc = 0;
    char path[4096];
    /* a *.json file in the directory wins: the first in directory order, as the Go tool */
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] != '.' && n > 5 && strcmp(e->d_name + n - 5, ".json") == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            closedir(d);
            return creds_from_json(path, c);
        }
    }
    closedir(d);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0] && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, fields[i].name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        char *buf = objhttp_read_small_file(path); /* bounded at 1 MiB, wiped when freed */
        if (!buf)
            rc = err_set(ERR_IO, "credentials %s: cannot read it (or larger than 1 MiB)", path);
        else
            rc = set_field(c, i, buf, strlen(buf), path);
        objhttp_free_secret(buf);
    }
    /* the web-identity form of a directory: the token is its file "token" (as the Go tool) */
    if (rc == 0 && c->role_arn && !c->token_path) {
        snprintf(path, sizeof path, "%s/token", dir);
        if (!(c->token_path = strdup(path))) rc = err_set(ERR_NOMEM, "credentials: out of memory");
    }
    return rc;
}

int s3_creds_read(const char *path, S3Creds *out) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0)
        return err_set(errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "credentials %s: %s", path,
                       strerror(errno));
    int rc = S_ISDIR(st.st_mode) ? creds_from_dir(path, out) : creds_from_json(path, out);
    if (rc == 0 && (!out->sse_key) != (!out->sse_algo))
        rc = err_set(ERR_INVALID,
                     "credentials %s: sseCustomerKey and sseCustomerAlgorithm go together", path);
    if (rc != 0) s3_creds_clear(out);
    return rc;
}

static int64_t ts_ns(const struct stat *st) {
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int64_t s3_creds_mtime(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    int64_t m = ts_ns(&st);
    if (!S_ISDIR(st.st_mode)) return m;
    DIR *d = opendir(path);
    if (!d) return m;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &st) == 0 && ts_ns(&st) > m) m = ts_ns(&st);
    }
    closedir(d);
    return m;
}

static char *dup_env(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? strdup(v) : NULL;
}

/* $<prefix><name> duplicated, NULL when unset or empty. */
static char *dup_penv(const char *prefix, const char *name) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return dup_env(full);
}

/* The part of the AWS SDK's default chain we implement, read with env prefix ep. */
static void sdk_env_creds(const char *ep, S3Creds *c) {
    c->access_key = dup_penv(ep, "AWS_ACCESS_KEY_ID");
    c->secret_key = dup_penv(ep, "AWS_SECRET_ACCESS_KEY");
    c->session_token = dup_penv(ep, "AWS_SESSION_TOKEN");
    c->region = dup_penv(ep, "AWS_REGION");
    if (!c->region) c->region = dup_penv(ep, "AWS_DEFAULT_REGION");
    if (!c->access_key || !c->secret_key) { /* the SDK's web identity (EKS IRSA) */
        c->role_arn = dup_penv(ep, "AWS_ROLE_ARN");
        c->token_path = dup_penv(ep, "AWS_WEB_IDENTITY_TOKEN_FILE");
    }
}

static int env_bool(const char *name, int *out) {
    const char *v = getenv(name);
    *out = 0;
    if (!v || !v[0]) return 0;
    if (parse_bool(v, strlen(v), out) != 0)
        return err_set(ERR_INVALID, "%s=\"%s\" is not a boolean", name, v);
    return 0;
}

int s3_creds_load(const StoreConfig *cfg, const char *prov, S3Creds *c, char **path) {
    *path = NULL;
    memset(c, 0, sizeof *c);
    if (strcmp(prov, "ECS") == 0) {
        c->endpoint = dup_env("ECS_ENDPOINT");
        c->access_key = dup_env("ECS_ACCESS_KEY_ID");
        c->secret_key = dup_env("ECS_SECRET_ACCESS_KEY");
        c->region = strdup("US-Standard");
        int rc = env_bool("ECS_DISABLE_SSL", &c->disable_ssl);
        if (rc == 0) rc = env_bool("ECS_INSECURE_SKIP_VERIFY", &c->insecure_skip_verify);
        if (rc == 0 && (!c->endpoint || !c->access_key || !c->secret_key))
            rc = err_set(ERR_INVALID, "ECS: ECS_ENDPOINT, ECS_ACCESS_KEY_ID and "
                                      "ECS_SECRET_ACCESS_KEY must be set");
        return rc;
    }
    const char *json_env = strcmp(prov, "OCS") == 0 ? "OPENSHIFT_APPLICATION_CREDENTIALS_JSON"
                                                    : "AWS_APPLICATION_CREDENTIALS_JSON";
    const char *dir_env = strcmp(prov, "OCS") == 0 ? "OPENSHIFT_APPLICATION_CREDENTIALS"
                                                   : "AWS_APPLICATION_CREDENTIALS";
    const char *ep = store_env_prefix(cfg);
    const char *p = cfg->credentials && cfg->credentials[0] ? cfg->credentials : NULL;
    if (!p) p = store_env(cfg, json_env);
    if (!p) p = store_env(cfg, dir_env);
    if (p) {
        int rc = s3_creds_read(p, c);
        if (rc != 0) return rc;
        if (c->role_arn && strcmp(prov, "S3") == 0) {
            if (!c->token_path || !c->token_path[0])
                return err_set(ERR_INVALID, "S3 credentials %s: roleARN needs tokenPath", p);
            return 0; /* keys come from STS; the file is not watched */
        }
        if (!c->access_key || !c->secret_key)
            return err_set(ERR_INVALID,
                           "%s credentials %s: accessKeyID and secretAccessKey are "
                           "required",
                           prov, p);
        if (strcmp(prov, "OCS") == 0 && (!c->endpoint || !c->region))
            return err_set(ERR_INVALID, "OCS credentials %s: endpoint and region are required", p);
        *path = strdup(p);
        if (!*path) return err_set(ERR_NOMEM, "%s: out of memory", prov);
        return 0;
    }
    if (strcmp(prov, "OCS") == 0)
        return err_set(ERR_INVALID,
                       "OCS: set %sOPENSHIFT_APPLICATION_CREDENTIALS_JSON (a JSON file) "
                       "or %sOPENSHIFT_APPLICATION_CREDENTIALS (a directory)",
                       ep, ep);
    /* the AWS SDK's environment: the part of its default chain we implement. Read with the
     * prefix first; the Go tool's SDK reads it unprefixed for every store, so a prefixed store
     * with no prefixed SDK credentials falls back to them (an instance role or IRSA serves the
     * secondary store too) */
    sdk_env_creds(ep, c);
    int have = (c->access_key && c->secret_key) || (c->role_arn && c->token_path);
    if (!have && ep[0]) {
        s3_creds_clear(c);
        sdk_env_creds("", c);
        have = (c->access_key && c->secret_key) || (c->role_arn && c->token_path);
    }
    if (c->access_key && c->secret_key) {
        free(c->role_arn);
        free(c->token_path);
        c->role_arn = c->token_path = NULL;
    }
    if (!have)
        return err_set(ERR_INVALID,
                       "S3: no credentials: set %1$sAWS_APPLICATION_CREDENTIALS_JSON (a JSON "
                       "file), %1$sAWS_APPLICATION_CREDENTIALS (a directory) or "
                       "%1$sAWS_ACCESS_KEY_ID and %1$sAWS_SECRET_ACCESS_KEY",
                       ep);
    return 0;
}
