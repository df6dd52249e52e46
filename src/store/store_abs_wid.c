/* store_abs_wid: Azure workload identity for the ABS driver (store_abs.h): a federated token
 * (the file Azure Workload Identity projects into the pod) exchanged at Microsoft Entra ID for a
 * Blob storage access token, with the client-credentials grant and a JWT client assertion, as
 * the Microsoft identity platform documents it. The token file is re-read at each exchange, since
 * the kubelet rotates it. Tokens never reach messages or logs. */
#include "../common/mem.h"
#include "../common/err.h"
#include "objhttp.h"
#include "objhttp_driver.h"
#include "oauth2.h"
#include "store_abs.h"

#include <stdlib.h>
#include <string.h>

#define ABS_AUTHORITY_DEFAULT "https://login.microsoftonline.com/"
#define ABS_STORAGE_SCOPE "https://storage.azure.com/.default"

struct AbsWid {
    char *client_id;
    char *token_file;
    char *token_url; /* <authority>/<tenant>/oauth2/v2.0/token */
};

void abs_wid_free(AbsWid *w) {
    if (!w) return;
    FREE_ALL(w->client_id, w->token_file, w->token_url, w);
}

static int tenant_ok(const char *t) {
    size_t n = strlen(t);
    return n >= 1 && n <= 128 &&
           strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == n;
}

int abs_wid_from_env(AbsWid **out) {
    *out = NULL;
    const char *file = objhttp_env("AZURE_FEDERATED_TOKEN_FILE");
    const char *client = objhttp_env("AZURE_CLIENT_ID");
    const char *tenant = objhttp_env("AZURE_TENANT_ID");
    if (!file || !client || !tenant) return 0;
    const char *auth = objhttp_env("AZURE_AUTHORITY_HOST");
    if (!auth) auth = ABS_AUTHORITY_DEFAULT;
    if (!tenant_ok(tenant))
        return err_set(ERR_INVALID, "ABS workload identity: AZURE_TENANT_ID must be a tenant id "
                                    "or domain ([A-Za-z0-9.-], at most 128 characters)");
    if (strlen(client) > 128)
        return err_set(ERR_INVALID, "ABS workload identity: AZURE_CLIENT_ID is longer than 128 "
                                    "characters");
    size_t al = strlen(auth);
    if (al > 512 || (strncmp(auth, "https://", 8) != 0 && strncmp(auth, "http://", 7) != 0))
        return err_set(ERR_INVALID,
                       "ABS workload identity: AZURE_AUTHORITY_HOST=%.100s must be an http(s) URL",
                       auth);
    AbsWid *w = calloc(1, sizeof *w);
    if (!w) return err_set(ERR_NOMEM, "ABS: out of memory");
    w->client_id = strdup(client);
    w->token_file = strdup(file);
    w->token_url =
        objhttp_strfmt("%s%s%s/oauth2/v2.0/token", auth, auth[al - 1] == '/' ? "" : "/", tenant);
    if (!w->client_id || !w->token_file || !w->token_url) {
        abs_wid_free(w);
        return err_set(ERR_NOMEM, "ABS: out of memory");
    }
    *out = w;
    return 0;
}

const char *abs_wid_token_url(const AbsWid *w) {
    return w->token_url;
}

int abs_wid_token(const AbsWid *w, ObjHttp *http, char **token, int64_t *expires_in) {
    *token = NULL;
    char *assertion = NULL;
    int rc = oauth2_read_token_file(w->token_file, "ABS workload identity", &assertion);
    if (rc) return rc;
    char *ea = objhttp_pct_encode(assertion, 0);
    objhttp_free_secret(assertion);
    char *ec = objhttp_pct_encode(w->client_id, 0);
    char *es = objhttp_pct_encode(ABS_STORAGE_SCOPE, 0);
    char *form = ea && ec && es
                     ? objhttp_strfmt("client_id=%s&scope=%s&grant_type=client_credentials"
                                      "&client_assertion_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3A"
                                      "client-assertion-type%%3Ajwt-bearer&client_assertion=%s",
                                      ec, es, ea)
                     : NULL;
    objhttp_free_secret(ea);
    free(ec);
    free(es);
    if (!form) return err_set(ERR_NOMEM, "ABS workload identity: out of memory");
    return oauth2_fetch_form(http, "ABS workload identity", w->token_url, form, token, expires_in);
}
