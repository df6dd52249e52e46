/* oauth2: token answers, token files, RFC 3339 times, a token endpoint call and a cached token
 * (oauth2.h). Tokens never reach messages or logs and are wiped when freed. */
#include "oauth2.h"
#include "../common/err.h"
#include "../common/timeutil.h"
#include "objhttp.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void oauth2_error_text(const char *json, size_t len, char *out, size_t cap) {
    out[0] = '\0';
    json_t *root = json && len ? json_loadb(json, len, 0, NULL) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return;
    }
    json_t *e = json_object_get(root, "error");
    const char *ed = json_string_value(json_object_get(root, "error_description"));
    if (json_is_string(e))
        snprintf(out, cap, "%.80s%s%.300s", json_string_value(e), ed ? ": " : "", ed ? ed : "");
    else if (json_is_object(e)) {
        const char *st = json_string_value(json_object_get(e, "status"));
        const char *m = json_string_value(json_object_get(e, "message"));
        snprintf(out, cap, "%.80s%s%.300s", st ? st : "", st && m ? ": " : "", m ? m : "");
    }
    objhttp_json_wipe_strings(root);
    json_decref(root);
}

/* A lifetime field: a JSON integer or a string of 1..18 decimal digits; 0 or ERR_CORRUPT. */
static int lifetime_of(json_t *ex, int64_t *out) {
    int64_t v = -1;
    if (json_is_integer(ex)) {
        v = json_integer_value(ex);
    } else if (json_is_string(ex)) {
        const char *s = json_string_value(ex);
        size_t n = strlen(s);
        if (n == 0 || n > 18 || strspn(s, "0123456789") != n) return ERR_CORRUPT;
        v = strtoll(s, NULL, 10);
    }
    if (v <= 0) return ERR_CORRUPT;
    *out = v > OAUTH2_MAX_LIFETIME ? OAUTH2_MAX_LIFETIME : v;
    return 0;
}

int oauth2_token_parse(const char *json, size_t len, const char *token_field,
                       const char *expires_field, char **token, int64_t *expires_in) {
    *token = NULL;
    *expires_in = OAUTH2_DEFAULT_LIFETIME;
    json_t *root = json ? json_loadb(json, len, 0, NULL) : NULL;
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_set(ERR_CORRUPT, "the token answer is not a JSON object");
        goto done;
    }
    const char *t = json_string_value(json_object_get(root, token_field));
    if (!t || !t[0]) {
        char why[400];
        oauth2_error_text(json, len, why, sizeof why);
        if (why[0])
            rc = err_set(ERR_CORRUPT, "OAuth2 error %s", why);
        else
            rc = err_set(ERR_CORRUPT, "no %s in the token answer", token_field);
        goto done;
    }
    size_t tl = strlen(t);
    if (tl > OAUTH2_TOKEN_MAX) {
        rc = err_set(ERR_CORRUPT,
                     "the %s in the token answer has %zu bytes, more than the %d accepted",
                     token_field, tl, OAUTH2_TOKEN_MAX);
        goto done;
    }
    json_t *ex = expires_field ? json_object_get(root, expires_field) : NULL;
    if (ex && lifetime_of(ex, expires_in) != 0) {
        rc =
            err_set(ERR_CORRUPT, "%s in the token answer is not a positive integer", expires_field);
        goto done;
    }
    *token = strdup(t);
    if (!*token) rc = err_set(ERR_NOMEM, "token answer: out of memory");
done:
    if (json_is_object(root)) objhttp_json_wipe_strings(root);
    json_decref(root);
    return rc;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* n decimal digits at s into *v; 0 or -1. */
static int digits(const char *s, int n, int *v) {
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

int oauth2_rfc3339(const char *s, int64_t *out) {
    int y, mo, d, h, mi, se;
    if (!s || strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
        s[7] != '-' || digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
        digits(s + 17, 2, &se))
        return ERR_CORRUPT;
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || se > 60)
        return ERR_CORRUPT;
    const char *p = s + 19;
    if (*p == '.') {
        size_t n = strspn(p + 1, "0123456789");
        if (n == 0 || n > 9) return ERR_CORRUPT;
        p += 1 + n;
    }
    int64_t off = 0;
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        off = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return ERR_CORRUPT;
        off = (int64_t)(oh * 60 + om) * 60 * (*p == '+' ? 1 : -1);
    } else {
        return ERR_CORRUPT;
    }
    *out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - off;
    return 0;
}

int oauth2_read_token_file(const char *path, const char *what, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(ERR_IO, "%s: token file %s: %s", what, path, strerror(errno));
    char *b = malloc(OAUTH2_TOKEN_FILE_MAX + 2);
    if (!b) {
        fclose(f);
        return err_set(ERR_NOMEM, "%s: out of memory", what);
    }
    size_t n = fread(b, 1, OAUTH2_TOKEN_FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    int rc = 0;
    if (bad)
        rc = err_set(ERR_IO, "%s: token file %s: read error", what, path);
    else if (n > OAUTH2_TOKEN_FILE_MAX)
        rc = err_set(ERR_INVALID, "%s: token file %s is larger than %d bytes: refused", what, path,
                     OAUTH2_TOKEN_FILE_MAX);
    if (rc) {
        OPENSSL_cleanse(b, n);
        free(b);
        return rc;
    }
    while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == ' ' || b[n - 1] == '\t'))
        n--;
    b[n] = '\0';
    if (n == 0 || memchr(b, '\0', n)) {
        OPENSSL_cleanse(b, n);
        free(b);
        return err_set(ERR_INVALID, "%s: token file %s is empty or not text", what, path);
    }
    *out = b;
    return 0;
}

/* The error of a failed token request: a refusal (400/401/403) named with the OAuth2 error. */
static int fetch_failed(const Oauth2Call *c, int rc, const ObjHttpResponse *r) {
    char *u = objhttp_redact_url(c->url);
    if (r->status == 400 || r->status == 401 || r->status == 403) {
        char why[400];
        oauth2_error_text(r->body, r->body_len, why, sizeof why);
        rc = err_set(ERR_INVALID, "%s: the token endpoint %s refused the exchange (HTTP %ld)%s%s",
                     c->what, u ? u : "(token endpoint)", r->status, why[0] ? ": " : "", why);
    } else {
        rc = err_wrap(rc, "%s: token endpoint %s", c->what, u ? u : "(token endpoint)");
    }
    free(u);
    return rc;
}

int oauth2_answer_parse(const char *json, size_t len, const char *token_field,
                        const char *expires_field, const char *expire_time_field, int64_t now,
                        char **token, int64_t *expires_in) {
    int rc = oauth2_token_parse(json, len, token_field, expire_time_field ? NULL : expires_field,
                                token, expires_in);
    if (rc || !expire_time_field) return rc;
    json_t *root = json_loadb(json, len, 0, NULL);
    const char *s = json_string_value(json_object_get(root, expire_time_field));
    int64_t at = 0;
    if (!s || oauth2_rfc3339(s, &at) != 0)
        rc = err_set(ERR_CORRUPT, "%s in the token answer is not an RFC 3339 time",
                     expire_time_field);
    else if (at <= now)
        rc = err_set(ERR_CORRUPT, "the token in the answer expired already (%s %.40s)",
                     expire_time_field, s);
    else
        *expires_in = at - now > OAUTH2_MAX_LIFETIME ? OAUTH2_MAX_LIFETIME : at - now;
    if (json_is_object(root)) objhttp_json_wipe_strings(root);
    json_decref(root);
    if (rc) {
        objhttp_free_secret(*token);
        *token = NULL;
    }
    return rc;
}

int oauth2_fetch(ObjHttp *http, const Oauth2Call *c, char **token, int64_t *expires_in) {
    *token = NULL;
    char ct[128];
    const char *h[2];
    size_t nh = 0;
    if (c->content_type) {
        snprintf(ct, sizeof ct, "Content-Type: %s", c->content_type);
        h[nh++] = ct;
    }
    if (c->extra_header) h[nh++] = c->extra_header;
    ObjHttpRequest req = {.method = c->method,
                          .url = c->url,
                          .headers = h,
                          .n_headers = nh,
                          .body = c->body,
                          .body_len = c->body ? strlen(c->body) : 0,
                          .max_body = OAUTH2_ANSWER_MAX};
    ObjHttpResponse r = {0};
    int rc = objhttp_do(http, &req, &r);
    if (rc) {
        rc = fetch_failed(c, rc, &r);
    } else {
        rc = oauth2_answer_parse(r.body, r.body_len, c->token_field, c->expires_field,
                                 c->expire_time_field, (int64_t)time(NULL), token, expires_in);
        if (rc) rc = err_wrap(rc, "%s: token endpoint %s", c->what, c->url);
    }
    if (r.body) OPENSSL_cleanse(r.body, r.body_len);
    objhttp_response_clear(&r);
    return rc;
}

int64_t oauth2_mono_s(void) {
    return now_mono_ms() / 1000;
}

void oauth2_cached_set(Oauth2Cached *c, char *token, int64_t expires_in) {
    objhttp_free_secret(c->token);
    c->token = token;
    if (expires_in < 1) expires_in = 1;
    if (expires_in > OAUTH2_MAX_LIFETIME) expires_in = OAUTH2_MAX_LIFETIME;
    int64_t margin = expires_in >= 240 ? 60 : expires_in / 4;
    c->refresh_at = oauth2_mono_s() + expires_in - margin;
    c->gen++;
}

int oauth2_cached_fresh(const Oauth2Cached *c) {
    return c->token && oauth2_mono_s() < c->refresh_at;
}

void oauth2_cached_drop(Oauth2Cached *c, long gen) {
    if (c->gen == gen) {
        objhttp_free_secret(c->token);
        c->token = NULL;
    }
}

void oauth2_cached_clear(Oauth2Cached *c) {
    objhttp_free_secret(c->token);
    c->token = NULL;
}

int oauth2_fetch_form(ObjHttp *http, const char *what, const char *url, char *form, char **token,
                      int64_t *expires_in) {
    Oauth2Call call = {.what = what,
                       .method = "POST",
                       .url = url,
                       .content_type = "application/x-www-form-urlencoded",
                       .body = form,
                       .token_field = "access_token",
                       .expires_field = "expires_in"};
    int rc = oauth2_fetch(http, &call, token, expires_in);
    objhttp_free_secret(form);
    return rc;
}
