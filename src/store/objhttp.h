/* objhttp: the HTTP layer every object-store driver (S3, and later Azure, GCS, Swift, OSS) sends
 * its requests through, on libcurl. It owns TLS settings, timeouts, retries (retry.h, every
 * retry logged at warn), bounded response buffering, streamed downloads with bounded memory, and
 * error messages that name method, URL (query values that look like credentials redacted) and
 * status with an excerpt of the error body. Drivers own authentication: a per-attempt hook sets
 * curl options (SigV4) or adds headers (shared-key signatures) on the handle.
 * Thread-safe: one ObjHttp serves any number of threads; idle curl handles (with their open
 * connections) are kept in a small pool and reused. */
#ifndef ETCDBR_OBJHTTP_H
#define ETCDBR_OBJHTTP_H

#include "../codec/io.h"
#include "../common/retry.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ObjHttp ObjHttp;

typedef struct ObjHttpConfig {
    const char *what;           /* provider name for messages ("S3"); borrowed during new */
    const char *container;      /* bucket or container, named in auth errors; copied; NULL ok */
    const char *ca_file;        /* PEM bundle file to trust; NULL = system store */
    const char *ca_pem;         /* PEM bundle in memory (e.g. S3 trustedCaCert); NULL = none */
    int insecure_skip_verify;   /* do not verify the peer certificate nor its name */
    int64_t timeout_ms;         /* whole-request timeout of buffered requests, and the stall
                                   limit (no byte for that long) of streamed ones; 0 = 180 s */
    RetryPolicy retry;          /* attempts == 0: RETRY_POLICY_DEFAULT */
    RetryClassifyHook classify; /* NULL = retry_classify_http */
    void *classify_ctx;
} ObjHttpConfig;

/* 0 or ERR_NOMEM/ERR_INVALID. *out owned (objhttp_free). */
int objhttp_new(const ObjHttpConfig *cfg, ObjHttp **out);
void objhttp_free(ObjHttp *h);

/* Called before every attempt on the handle the request uses (options and headers are already
 * set): the driver's authentication. *headers may be appended to (curl_slist_append); the list
 * is freed by objhttp after the attempt. Nonzero (an ERR_* with err_set) fails the request. */
typedef int (*ObjHttpAuthHook)(void *ctx, CURL *curl, struct curl_slist **headers);

/* A consumer of a response body (2xx responses only): nonzero stops the transfer and is returned
 * by objhttp_do unchanged (no retry). */
typedef int (*ObjHttpConsumer)(void *ctx, const void *buf, size_t len);

typedef struct ObjHttpRequest {
    const char *method;         /* "GET", "HEAD", "PUT", "POST", "DELETE" */
    const char *url;            /* full URL, path and query already percent-encoded */
    const char *const *headers; /* "Name: value" lines (borrowed), n_headers of them */
    size_t n_headers;
    const void *body; /* request body in memory (borrowed), body_len bytes */
    size_t body_len;
    IoReader *body_reader;   /* or a streamed body of exactly body_len bytes (borrowed);
                                such a request is tried once: a stream cannot be replayed */
    size_t max_body;         /* bound of a buffered response body; 0 = 1 MiB */
    ObjHttpConsumer consume; /* NULL: a 2xx body is buffered into the response */
    void *consume_ctx;
    ObjHttpAuthHook auth; /* may be NULL (anonymous) */
    void *auth_ctx;
    int no_retry;       /* try once (e.g. a non-idempotent call the caller handles) */
    int64_t timeout_ms; /* 0 = the client's */
} ObjHttpRequest;

typedef struct ObjHttpResponse {
    long status; /* last HTTP status, 0 if no response */
    char *body;  /* owned, NUL-terminated (empty string if none); bounded by max_body */
    size_t body_len;
    char *headers; /* owned: the final response's header lines, "\r\n"-separated */
} ObjHttpResponse;

/* Frees what a response holds and zeroes it (NULL-safe, idempotent). */
void objhttp_response_clear(ObjHttpResponse *r);

/* The value of response header name (case-insensitive), trimmed, copied into buf (cap bytes,
 * truncated); buf on success, NULL if absent. */
const char *objhttp_response_header(const ObjHttpResponse *r, const char *name, char *buf,
                                    size_t cap);

/* Response headers are bounded (a hostile server cannot make us buffer more): a header line of
 * more than OBJHTTP_HEADER_LINE_MAX bytes, more than OBJHTTP_HEADER_LINES lines, or more than
 * OBJHTTP_HEADER_MAX bytes in all fail the request (ERR_IO, not retried) with a message naming
 * the bound. Real stores answer with a few dozen lines of well under 1 KiB each. */
#define OBJHTTP_HEADER_MAX ((size_t)64 << 10)
#define OBJHTTP_HEADER_LINE_MAX ((size_t)16 << 10)
#define OBJHTTP_HEADER_LINES 256

/* Longest entity tag accepted from a store (bytes, quotes included). S3, OSS and Azure send 20 to
 * 70 characters, GCS about 20; RFC 9110 sets no limit, so the bound is ours. */
#define OBJHTTP_ETAG_MAX 1024

/* Longest id or token kept from a response and sent back in later requests (bytes): multipart
 * upload ids (S3's are about 150 characters), auth tokens are bounded by their header buffers. */
#define OBJHTTP_ID_MAX ((size_t)4 << 10)

/* As objhttp_response_header, but a value that does not fit in cap - 1 bytes is an error instead
 * of being truncated: 0 (buf set), ERR_NOT_FOUND if absent (no message), ERR_IO with a message
 * naming the header, its length and the bound (ctx names the request in it). */
int objhttp_response_header_fit(const ObjHttpResponse *r, const char *name, char *buf, size_t cap,
                                const char *ctx);

/* A copy of [s, s + n) as an owned NUL-terminated string when n <= max: what a driver keeps of
 * a response (upload ids, tokens, URLs). NULL with ERR_IO set (naming field, ctx, n and max) when
 * longer, ERR_NOMEM set on allocation failure. */
char *objhttp_dup_bounded(const char *s, size_t n, size_t max, const char *field, const char *ctx);

/* ---- listings ---- */

/* Bounds every paged listing of every driver (a server that never ends a listing, or repeats a
 * page, must not keep us busy or grow our memory):
 * - OBJHTTP_LIST_MAX_PAGES pages at most (ETCDBR_STORE_LIST_MAX_PAGES may lower it, for tests);
 * - OBJHTTP_LIST_BUDGET_MS milliseconds at most (ETCDBR_STORE_LIST_BUDGET_MS may lower it);
 * - a continuation token (marker, pageToken) seen before in the same listing is an error;
 * - once the stop flag (objhttp_set_stop) is set, a listing may go on for
 *   OBJHTTP_LIST_STOP_GRACE_MS more (a final snapshot's short listing ends), then ERR_CANCELED.
 * Memory: 8 bytes per page (a hash of each token). Not thread-safe: one per listing. */
#define OBJHTTP_LIST_MAX_PAGES 100000L
#define OBJHTTP_LIST_BUDGET_MS (10LL * 60 * 1000)
#define OBJHTTP_LIST_STOP_GRACE_MS 500
/* Longest continuation token kept between pages (bytes). S3's are about 100, GCS's under 1 KiB. */
#define OBJHTTP_LIST_TOKEN_MAX ((size_t)8 << 10)

typedef struct ObjHttpListing {
    const char *what, *container, *prefix; /* borrowed, for messages */
    int64_t start_ms, stop_ms, budget_ms;
    long pages, max_pages;
    uint64_t *seen; /* open-addressing set of token hashes (0 = empty slot) */
    size_t n_seen, cap_seen;
} ObjHttpListing;

/* Starts a listing of prefix in container (what: provider name). */
void objhttp_listing_begin(ObjHttpListing *l, const char *what, const char *container,
                           const char *prefix);
/* Called before each page is requested: token is the continuation the previous page gave (NULL
 * or "" for the first page). 0, or ERR_IO (repeated token, token longer than
 * OBJHTTP_LIST_TOKEN_MAX, page cap, time budget) / ERR_CANCELED (stopped) / ERR_NOMEM, with a
 * message naming store, prefix and the bound. */
int objhttp_listing_page(ObjHttpListing *l, const char *token);
/* Frees what the listing holds (the struct itself is the caller's). */
void objhttp_listing_end(ObjHttpListing *l);

/* The process's stop flag (cmd_install_stop_signals), borrowed for the process's lifetime; NULL
 * = none. Listings end soon after it is set (above). */
void objhttp_set_stop(const atomic_int *stop);

/* One failed attempt of a store request whose failure is a passing one (the kind objhttp
 * retries: no answer, a timeout, HTTP 5xx, 429, 408, or what the driver's classify hook calls
 * retryable), as the failure hook sees it. Pointers are valid during the call only. */
typedef struct ObjHttpFailure {
    const char *provider; /* ObjHttpConfig.what ("S3", "ABS", ...) */
    const char *cls;      /* objhttp_failure_class of the attempt (static) */
    const char *method;   /* "GET", "PUT", ... */
    long status;          /* HTTP status, 0 = no answer */
    int rc;               /* the attempt's ERR_* (ERR_IO, ERR_TIMEOUT) */
    int will_retry;       /* 1: this request is tried again after a backoff; 0: it fails now (its
                             last try, or a streamed body that cannot be replayed) */
} ObjHttpFailure;

typedef void (*ObjHttpFailureHook)(void *ctx, const ObjHttpFailure *f);

/* Installs the process-wide failure hook (fn NULL: none), called on the thread of the failing
 * attempt (drivers' part uploads run on pool threads) at once, before the retry's backoff: what
 * lets a store outage show within seconds rather than when the request gives up. fn must be
 * thread-safe and quick (no I/O, no store call). ctx is borrowed for as long as fn is installed.
 * Meant to be set once at start, before store requests; a change while requests run is seen by
 * later attempts. Failures that are answers (403, 404, a refused body) do not call it. */
void objhttp_set_failure_hook(ObjHttpFailureHook fn, void *ctx);

/* Bounded class of a failed attempt, for metrics: "connect" (refused, unresolved), "timeout",
 * "tls" (handshake), "network" (send/receive broken, empty answer, HTTP/2 or /3 error),
 * "throttled" (HTTP 429), "http_5xx", "http_4xx" (another status, e.g. 408), else "other".
 * curl_code is a CURLcode, status the HTTP status (0 = none). Static storage. */
const char *objhttp_failure_class(long status, int curl_code);

/* "<Code>: <Message>" of an XML error document (S3, ABS, OSS), or the start of any other body
 * (GCS and Swift's JSON or text), squeezed onto one line: into out (cap bytes, cap > 0, always
 * NUL-terminated, truncated). body is NUL-terminated; NULL or "" gives "". For error messages. */
void objhttp_body_excerpt(const char *body, char *out, size_t cap);

/* Performs req, retrying retryable failures (memory bodies only) with backoff. resp (may be NULL)
 * receives the last attempt's status, headers and (bounded) body; clear it afterwards.
 * 0 on a 2xx status; ERR_NOT_FOUND on 404; ERR_TIMEOUT when the last attempt timed out; ERR_IO
 * otherwise (other statuses: check resp->status), each with a message naming method, URL and
 * status or curl error; a consumer's own nonzero return as is. */
int objhttp_do(ObjHttp *h, const ObjHttpRequest *req, ObjHttpResponse *resp);

/* A streamed response body, pulled by the caller: memory stays bounded by curl's buffer plus
 * ours (the transfer pauses while the reader does not read). */
typedef struct ObjHttpStream ObjHttpStream;

/* Sends req (no body, no consumer) and waits for the response headers, retrying failures before
 * any body byte arrived. On 2xx, *out (owned, objhttp_stream_free) yields the body; resp (may be
 * NULL) gets status and headers. Errors as objhttp_do (the error body read first). */
int objhttp_stream_open(ObjHttp *h, const ObjHttpRequest *req, ObjHttpResponse *resp,
                        ObjHttpStream **out);
/* Up to cap bytes into buf; *got == 0 at the end of the body. ERR_IO/ERR_TIMEOUT if the transfer
 * broke (the caller may reopen from its offset). */
int objhttp_stream_read(ObjHttpStream *s, void *buf, size_t cap, size_t *got);
void objhttp_stream_free(ObjHttpStream *s);

/* RFC 3986 percent-encoding: every byte but ALPHA / DIGIT / "-" / "." / "_" / "~" becomes %XX
 * (upper-case hex); '/' is kept when keep_slash (object keys in a path). Owned result, NULL on
 * allocation failure. */
char *objhttp_pct_encode(const char *s, int keep_slash);

/* A canonical query string from n name/value pairs (names[i], values[i]; a NULL value counts as
 * ""): pairs sorted by encoded name (then value), both encoded as objhttp_pct_encode(.., 0),
 * always "name=value" joined with '&'. SigV4 signs the query verbatim, so it must be built this
 * way. Owned result ("" for n == 0), NULL on allocation failure. */
char *objhttp_query(const char *const *names, const char *const *values, size_t n);
struct StrBuf;
/* The value of header name (case-insensitive) among n "Name: value" lines h, spaces and tabs
 * around it trimmed: borrowed from h, *len bytes (not NUL-terminated at *len). NULL if absent. */
const char *objhttp_header_value(const char *const *h, size_t n, const char *name, size_t *len);
/* Appends to b the canonicalized headers of the S3-era signatures (Azure SharedKey, OSS V1): every
 * line of h whose name starts with prefix ("x-ms-", "x-oss-"; case-insensitive) as
 * "name:value\n", the name lower-cased, the value trimmed, sorted by byte order of the line.
 * Sets b->oom on allocation failure. */
void objhttp_canon_headers(struct StrBuf *b, const char *const *h, size_t n, const char *prefix);
/* Appends the n pairs to b in the order given (not sorted: for stores that sign a query of their
 * own order), each "name" or, when values and values[i] are not NULL, "name=value", both
 * percent-encoded (RFC 3986, '/' encoded too); '?' before the first when *first (then cleared),
 * '&' otherwise. Sets b->oom on allocation failure. */
void objhttp_query_append(struct StrBuf *b, const char *const *names, const char *const *values,
                          size_t n, int *first);

/* The URL with the values of query parameters that can carry credentials (names containing
 * "sig", "credential", "token", "secret" or "password", case-insensitive) replaced by
 * "REDACTED"; userinfo
 * dropped. Owned, NULL on allocation failure. For messages and logs. */
char *objhttp_redact_url(const char *url);

/* Credential files (docs/go-tool.md §12), for any driver that reads them: the whole file as a
 * NUL-terminated string, verbatim (no trimming), at most 1 MiB; owned, NULL if it does not exist
 * or cannot be read. Free with objhttp_free_secret. */
char *objhttp_read_small_file(const char *path);
/* The first "*.json" entry of directory dir in directory order, as an owned path; NULL if none. */
char *objhttp_dir_first_json(const char *dir);
/* Wipes (OPENSSL_cleanse) and frees a NUL-terminated secret (NULL-safe). */
void objhttp_free_secret(char *s);
/* objhttp_free_secret of each of the n secrets (any may be NULL). */
void objhttp_free_secret_each(char *const *secrets, size_t n);
/* FREE_SECRETS(a, b): objhttp_free_secret(a); objhttp_free_secret(b); in one statement (char *
 * pointers), as FREE_ALL (common/mem.h) for plain blocks. */
#define FREE_SECRETS(...)                                                                          \
    objhttp_free_secret_each((char *const[]){__VA_ARGS__},                                         \
                             sizeof((char *const[]){__VA_ARGS__}) / sizeof(char *))
struct json_t;
/* Wipes (OPENSSL_cleanse) every string value of the JSON object root, whose copies jansson keeps
 * (credentials, tokens), before it is freed. Not recursive; a non-object is left alone. */
void objhttp_json_wipe_strings(struct json_t *root);
/* $name when set and not empty (borrowed from the environment), else NULL. */
const char *objhttp_env(const char *name);

/* Most entries of a credentials directory that objhttp_creds_stamp looks at. */
#define OBJHTTP_CREDS_STAMP_ENTRIES 64
/* A fingerprint of credential files, to notice a rotated secret: the modification time (ns) and
 * size of path and, for a directory, of each of its first OBJHTTP_CREDS_STAMP_ENTRIES entries in
 * directory order (links followed, as Kubernetes secret volumes swap a link to a new directory),
 * as text in out (cap bytes, truncated to fit). Empty when path is NULL or missing. Two equal
 * stamps mean nothing was seen to change. */
void objhttp_creds_stamp(const char *path, char *out, size_t cap);

/* A key pair re-read from its credentials file (S3's and OSS's rotation): the pair in use, the
 * mutex that guards it and the file's modification time it was read at. All borrowed. */
typedef struct ObjHttpKeyPair {
    pthread_mutex_t *mu;
    char **key, **secret;
    int64_t *mtime;
} ObjHttpKeyPair;
/* Whether mtime (the file's modification time now) differs from the pair's, read under its mutex.
 */
int objhttp_key_pair_changed(const ObjHttpKeyPair *p, int64_t mtime);
/* Under the pair's mutex: wipes and frees its key and secret, takes *key and *secret in their
 * place (ownership moves; both set to NULL) and records mtime. */
void objhttp_key_pair_swap(const ObjHttpKeyPair *p, char **key, char **secret, int64_t mtime);

/* ---- helpers shared by the drivers (added with OSS) ---- */

/* Reads credentials as the Go tool does for its file-based providers (docs/go-tool.md §12): path is
 * a JSON file, or a directory whose first "*.json" entry (directory order) is parsed as JSON, or
 * else which holds one file per field, read verbatim (no trimming). For each of the n field
 * names, values[i] gets an owned copy (NULL when absent); the caller frees them with
 * objhttp_free_secret. Unknown fields and files are ignored. what names the provider in
 * messages, which name the path and field, never a value. 0, ERR_NOT_FOUND (path missing),
 * ERR_INVALID (bad JSON, a field that is not a string), ERR_IO or ERR_NOMEM. */
int objhttp_creds_read(const char *path, const char *what, const char *const *fields, size_t n,
                       char **values);

/* A download that resumes where it broke: a driver's reader embeds ObjHttpResumable as its first
 * member and supplies open, its ranged GET of key from offset (pinning the object's ETag or
 * generation across calls if it can, so a replaced object is never spliced). When the transfer
 * breaks (ERR_IO, ERR_TIMEOUT) mid-body, the reader logs at warn, waits the retry backoff and
 * calls open again at the byte reached, up to OBJHTTP_READ_RESUMES times; any other error, or
 * one more break, is returned. */
#define OBJHTTP_READ_RESUMES 5

typedef struct ObjHttpResumable ObjHttpResumable;
struct ObjHttpResumable {
    IoReader base;
    const char *what; /* provider name for messages (static) */
    char *key;        /* owned */
    uint64_t offset;  /* of the next byte the stream yields */
    ObjHttpStream *s; /* set by open; NULL = the end (offset at or past it) */
    uint64_t skip;    /* set by open: bytes to drop first (a server that ignored the Range) */
    int resumes;      /* done so far */
    /* Opens r->s at r->offset: 0 (s NULL for an empty rest) or an ERR_* with err_set. */
    int (*open)(ObjHttpResumable *r);
    /* Frees what the driver's reader holds beyond this struct (NULL: nothing); not r itself. */
    void (*release)(ObjHttpResumable *r);
};

/* For a driver's open: the value of header name in resp (its ETag or generation, to pin the
 * object across resumes) into buf (cap bytes; "" when absent). A value that does not fit fails
 * the open: r->s is freed and set to NULL, and the error (naming the header, the key and the
 * bound) returned. 0 otherwise. */
int objhttp_resumable_pin(ObjHttpResumable *r, const ObjHttpResponse *resp, const char *name,
                          char *buf, size_t cap);

/* Starts r (allocated zeroed by the driver, with its own fields set): copies key, opens the
 * first range, and gives the reader in *out (owned; io_reader_free frees r). On failure r is
 * released and freed, and the error returned. */
int objhttp_resumable_start(ObjHttpResumable *r, const char *what, const char *key, uint64_t offset,
                            int (*open)(ObjHttpResumable *r), void (*release)(ObjHttpResumable *r),
                            IoReader **out);

/* Parallel part uploads for every driver's multipart writes (S3 parts, ABS blocks, GCS chunks,
 * Swift segments, OSS parts): up to `parallel` parts in flight, each on its own worker thread
 * (started at the first submit), so memory is bounded by (parallel + 1) x part size. The first
 * failure is kept (code and message); later parts are skipped, and every call after it returns
 * that failure. put uploads one part; it is called on the worker threads. */
typedef struct ObjHttpParts ObjHttpParts;
typedef int (*ObjHttpPartPut)(void *ctx, int num, const void *data, size_t len);

/* A pool for one upload. what and key name the upload in messages (copied). 0 or ERR_NOMEM. */
int objhttp_parts_new(const char *what, const char *key, int parallel, ObjHttpPartPut put,
                      void *ctx, ObjHttpParts **out);
/* Hands part num (data: malloc'ed, owned and freed by the pool, len bytes) to the workers,
 * waiting while `parallel` parts are in flight. 0, the first failure so far, or ERR_IO when no
 * worker thread can be started. */
int objhttp_parts_submit(ObjHttpParts *p, int num, void *data, size_t len);
/* Waits until every part handed over is uploaded: 0 or the first failure (err_msg set). */
int objhttp_parts_wait(ObjHttpParts *p);
/* Parts handed over and not finished yet (queued or uploading). */
int objhttp_parts_pending(ObjHttpParts *p);
/* Stops the workers (queued parts are skipped when discard is set) and frees p (NULL-safe). */
void objhttp_parts_free(ObjHttpParts *p, int discard);

/* The stream every multipart driver writes an object's bytes into: it cuts them into parts of
 * the sizes part_size gives (part 1, 2, ...) and hands each full one to an ObjHttpParts pool, so
 * a driver says only what differs: part sizes, what to do before a part (start the upload,
 * check a part limit), how to put one, and what its commit sends. Memory: one part being filled
 * plus the pool's `parallel` in flight. The first failure (of a hook, a part, or memory) is
 * sticky: every later write, objhttp_pw_finish and objhttp_pw_failed return it, so an object
 * with a part missing is never committed. Not thread-safe (one writer thread; put runs on the
 * pool's threads). */
typedef struct ObjHttpPartWriter ObjHttpPartWriter;
typedef struct ObjHttpPartWriterConfig {
    const char *what, *key; /* the driver and the object, in messages (copied) */
    int parallel;           /* parts in flight at most */
    /* 1: a part is handed over as soon as it is full; 0: only once a byte follows it, so the
     * last part stays for the commit and an object of one part can be one plain PUT */
    int eager;
    size_t (*part_size)(void *ctx, int num); /* bytes of part num (1-based), > 0 */
    /* Optional: called on the writing thread before part num is handed over (start the upload,
     * check a limit, fold parts); 0, or an ERR_* with a message that fails the write. */
    int (*before)(void *ctx, int num);
    ObjHttpPartPut put; /* uploads one part, on a pool thread */
    void *ctx;
} ObjHttpPartWriterConfig;

/* 0 or ERR_NOMEM. *out owned (objhttp_pw_free). */
int objhttp_pw_new(const ObjHttpPartWriterConfig *cfg, ObjHttpPartWriter **out);
/* The stream of the object's bytes (borrowed from w; io_writer_free on it does nothing). */
IoWriter *objhttp_pw_io(ObjHttpPartWriter *w);
/* Parts handed over so far (numbers 1..n). */
int objhttp_pw_parts(const ObjHttpPartWriter *w);
/* Bytes written so far. */
uint64_t objhttp_pw_total(const ObjHttpPartWriter *w);
/* The bytes written and not handed over (the whole object while no part was), borrowed until
 * the next call on w; *len set. Never NULL. */
const void *objhttp_pw_rest(const ObjHttpPartWriter *w, size_t *len);
/* Hands the rest over as the last part (when not empty) and waits for every part: 0 or the first
 * failure (err_msg set). */
int objhttp_pw_finish(ObjHttpPartWriter *w);
/* Waits for the parts in flight: 0 or the first failure (for a before hook that needs every part
 * uploaded, e.g. to compose them). */
int objhttp_pw_wait(ObjHttpPartWriter *w);
/* The first failure so far (err_msg set), or 0. */
int objhttp_pw_failed(ObjHttpPartWriter *w);
/* Stops the pool's threads (queued parts are skipped when discard is set); the counts and the
 * rest stay readable. Idempotent. */
void objhttp_pw_stop(ObjHttpPartWriter *w, int discard);
/* objhttp_pw_stop, then frees w (NULL-safe). */
void objhttp_pw_free(ObjHttpPartWriter *w, int discard);

/* Checks an object key before a driver sends it: 1 to max bytes, and with no_leading_slash not
 * starting with '/' or '\\' (OSS). what names the driver, op the operation ("read", "write").
 * 0 or ERR_INVALID with a message quoting the key's start. */
int objhttp_key_ok(const char *what, const char *op, const char *key, size_t max,
                   int no_leading_slash);

/* The text of the first element <tag>...</tag> (or <tag attr="..">...</tag>; "<tag/>" is empty)
 * in [p, end), which need not be NUL-terminated: a pointer to the text and its length in *len,
 * *after (may be NULL) set past the closing tag. NULL when absent or unterminated. No nesting of
 * the same tag is understood: enough for the flat documents object stores answer. */
const char *objhttp_xml_element(const char *p, const char *end, const char *tag, size_t *len,
                                const char **after);

/* The CompleteMultipartUpload document of S3 and OSS (the same in both APIs): parts 1..n, part
 * i + 1 with the entity tag etags[i] as the server gave it (XML-escaped here, so any byte comes
 * back intact) into *out (owned, NUL-terminated), *len its length; it grows with the tags (each
 * bounded by OBJHTTP_ETAG_MAX when it was received). 0, ERR_IO (a part without a tag, named) or
 * ERR_NOMEM; what names the upload in the message. */
int objhttp_complete_xml(const char *const *etags, int n, const char *what, char **out,
                         size_t *len);

/* XML character data [s, s+n) with the five named entities and &#N; / &#xN; decoded (UTF-8).
 * Owned, NUL-terminated; NULL on a malformed entity, a raw NUL (it would cut a name short) or
 * allocation failure. */
char *objhttp_xml_text(const char *s, size_t n);
/* objhttp_xml_text, and with pct also %XX escapes decoded (Azure's Encoded="true" names); "%00"
 * is refused like a raw NUL. */
char *objhttp_xml_text_pct(const char *s, size_t n, int pct);

/* A listing entry's size, the text [s, s+n) of its size element: 1 to 19 bytes that strtoll
 * reads whole as a number >= 0. 0 with *size set, or -1 with *size = -1 (empty, longer, not such
 * a number). */
int objhttp_size_text(const char *s, size_t n, int64_t *size);

/* The text decoder of a listing's names: objhttp_xml_text_pct's signature (arg is its pct, or a
 * driver's own flag). Owned result, NULL when the text is malformed. */
typedef char *(*ObjHttpXmlTextFn)(const char *s, size_t n, int arg);

/* The end of an S3-style listing page in [xml, end) (S3's and OSS's ListBucketResult):
 * *truncated is 1 when <IsTruncated> says "true", and *next (owned, NULL when absent or empty)
 * is the text of <next_tag> decoded by text(s, n, arg). 0, or ERR_CORRUPT "<what>: bad
 * <next_tag>" (malformed text) or "<what>: truncated page without a <next_tag>". */
int objhttp_xml_page_end(const char *xml, const char *end, const char *next_tag,
                         ObjHttpXmlTextFn text, int arg, const char *what, int *truncated,
                         char **next);

/* The <UploadId> of an InitiateMultipartUpload answer (S3's and OSS's) into *upload_id (owned):
 * when root is set the document must have that element. 0, or ERR_CORRUPT "<what>: ..." naming
 * what is wrong (not a <root> document, no UploadId, longer than OBJHTTP_ID_MAX, bad XML text). */
int objhttp_xml_upload_id(const char *xml, size_t len, const char *root, const char *what,
                          char **upload_id);
/* The first opening tag "<tag" followed by '>', ' ' or '/' in [p, end), or NULL. */
const char *objhttp_xml_open(const char *p, const char *end, const char *tag);

/* ---- requests in flight (objhttp_inflight.c), for the profiling endpoints ----
 * Process-wide: every request objhttp sends (one attempt of objhttp_do; a stream from its start
 * to its release) is counted from its start to its end, and the first OBJHTTP_INFLIGHT_SLOTS at
 * once are kept with their provider, method and start time. Thread-safe (one mutex, held for a
 * few stores). */
#define OBJHTTP_INFLIGHT_SLOTS 64

typedef struct ObjHttpInflight {
    char provider[16]; /* ObjHttpConfig.what, cut to fit */
    char method[8];
    int64_t age_ms; /* since the request started (monotonic) */
} ObjHttpInflight;

typedef struct ObjHttpInflightStats {
    uint64_t started, finished; /* requests since the process started */
    uint64_t in_flight;         /* started and not finished */
    size_t n;                   /* entries copied out (at most in_flight, at most cap) */
} ObjHttpInflightStats;

/* A request starts: its token for objhttp_inflight_end (> 0). */
int objhttp_inflight_begin(const char *provider, const char *method);
/* The request of token ends (token 0: nothing; each token ends once). */
void objhttp_inflight_end(int token);
/* The requests in flight now: up to cap of them into out (oldest first), and the counters. */
void objhttp_inflight_list(ObjHttpInflight *out, size_t cap, ObjHttpInflightStats *st);

#endif
