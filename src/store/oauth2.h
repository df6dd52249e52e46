/* oauth2: what the token-based store credentials share (GCS workload identity and metadata
 * server, Azure workload identity): the bounded parse of a token endpoint's JSON answer, the
 * read of a projected token file, RFC 3339 times, a POST to a token endpoint whose refusal is
 * named without any secret, and a cached token refreshed before it expires. The answers follow
 * RFC 6749 §5.1/§5.2 (access_token, expires_in; error, error_description). */
#ifndef ETCDBR_OAUTH2_H
#define ETCDBR_OAUTH2_H

#include <stddef.h>
#include <stdint.h>

typedef struct ObjHttp ObjHttp;

/* Longest access token accepted (bytes; Google's and Entra ID's are well under 4 KiB). */
#define OAUTH2_TOKEN_MAX 16384
/* Largest token file accepted (bytes; a projected Kubernetes token is 1 to 2 KiB). */
#define OAUTH2_TOKEN_FILE_MAX 65536
/* Largest answer body read from a token endpoint (bytes). */
#define OAUTH2_ANSWER_MAX (64 << 10)
/* Longest lifetime taken from an answer (seconds: a day); longer ones are cut to it. */
#define OAUTH2_MAX_LIFETIME 86400
/* Lifetime assumed when an answer has none (seconds; RFC 6749 leaves it optional). */
#define OAUTH2_DEFAULT_LIFETIME 3600

/* Parses a token answer (len bytes, need not be NUL-terminated): the string token_field and the
 * lifetime expires_field (a positive integer, or a string of decimal digits as some endpoints
 * send it; absent: OAUTH2_DEFAULT_LIFETIME; above OAUTH2_MAX_LIFETIME: cut to it). *token owned
 * (secret: objhttp_free_secret), *expires_in seconds. 0, ERR_CORRUPT (not JSON, no token, a token
 * longer than OAUTH2_TOKEN_MAX, a lifetime that is not a positive integer; the message has the
 * answer's OAuth2 error when it carries one, never a token) or ERR_NOMEM. */
int oauth2_token_parse(const char *json, size_t len, const char *token_field,
                       const char *expires_field, char **token, int64_t *expires_in);

/* A token answer as oauth2_token_parse, except that with expire_time_field set the lifetime is
 * that RFC 3339 time less now (Unix seconds), cut to OAUTH2_MAX_LIFETIME (IAM Credentials'
 * {"accessToken","expireTime"}). 0, ERR_CORRUPT (as oauth2_token_parse, or an expiry time that is
 * missing, malformed or not after now) or ERR_NOMEM. */
int oauth2_answer_parse(const char *json, size_t len, const char *token_field,
                        const char *expires_field, const char *expire_time_field, int64_t now,
                        char **token, int64_t *expires_in);

/* The error an answer (len bytes) carries, for messages: "error: error_description" (RFC 6749
 * §5.2), or Google's {"error":{"status","message"}}, cut to fit out (cap > 0); "" if none. */
void oauth2_error_text(const char *json, size_t len, char *out, size_t cap);

/* An RFC 3339 time ("2024-05-01T10:00:00Z", fractions and a +hh:mm offset allowed) as Unix
 * seconds. 0, or ERR_CORRUPT (no message) when it is not one or is outside years 1970..9999. */
int oauth2_rfc3339(const char *s, int64_t *out);

/* The content of a token file (a projected service-account token), read anew at each call,
 * trailing blanks and line breaks dropped. what names the source in messages (never the token).
 * *out owned (secret). 0, ERR_IO (cannot be read: the message names path), ERR_INVALID (empty,
 * or larger than OAUTH2_TOKEN_FILE_MAX bytes) or ERR_NOMEM. */
int oauth2_read_token_file(const char *path, const char *what, char **out);

/* One request to a token endpoint. All borrowed. */
typedef struct Oauth2Call {
    const char *what;         /* the provider and flow, for messages ("GCS workload identity") */
    const char *method;       /* "POST" or "GET" */
    const char *url;          /* named (redacted) in messages */
    const char *content_type; /* of body; NULL: none */
    const char *extra_header; /* one more "Name: value" line (a secret is fine); NULL: none */
    const char *body;         /* NUL-terminated; NULL: empty (secret: never logged) */
    const char *token_field;  /* as oauth2_token_parse */
    const char *expires_field;
    const char *expire_time_field; /* instead of expires_field: an RFC 3339 expiry time */
} Oauth2Call;

/* Sends c through http and parses the answer into *token (owned, secret) and *expires_in
 * (seconds, 1..OAUTH2_MAX_LIFETIME; from expire_time_field less now when that is set). 0,
 * ERR_INVALID (the endpoint refused: HTTP 400/401/403, the message names the endpoint, the
 * status and the answer's OAuth2 error), ERR_CORRUPT (a malformed answer, or an expiry time
 * already past), or the request's ERR_* (wrapped, naming the endpoint). */
int oauth2_fetch(ObjHttp *http, const Oauth2Call *c, char **token, int64_t *expires_in);

/* oauth2_fetch of an RFC 6749 token request: form (application/x-www-form-urlencoded, owned and
 * freed here as a secret) POSTed to url, the answer's access_token and expires_in read (RFC 6749
 * section 5.1). what names the flow in messages. Errors as oauth2_fetch. */
int oauth2_fetch_form(ObjHttp *http, const char *what, const char *url, char *form, char **token,
                      int64_t *expires_in);

/* A cached access token. Not locked: its owner's mutex guards it. */
typedef struct Oauth2Cached {
    char *token;        /* secret; NULL when none */
    int64_t refresh_at; /* CLOCK_MONOTONIC seconds after which it is fetched again */
    long gen;           /* how many tokens were stored: names this one for oauth2_cached_drop */
} Oauth2Cached;

/* Stores token (taking it) valid for expires_in seconds: it is refreshed a minute early, or a
 * quarter of its lifetime early when that is under 4 minutes. */
void oauth2_cached_set(Oauth2Cached *c, char *token, int64_t expires_in);
/* 1 when a token is held and not due for refresh. */
int oauth2_cached_fresh(const Oauth2Cached *c);
/* Drops token gen (refused by the store) unless a newer one replaced it. */
void oauth2_cached_drop(Oauth2Cached *c, long gen);
/* Wipes and frees the token (the generation counter is kept). */
void oauth2_cached_clear(Oauth2Cached *c);
/* CLOCK_MONOTONIC seconds. */
int64_t oauth2_mono_s(void);

#endif
