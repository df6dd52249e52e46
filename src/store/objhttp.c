/* objhttp: libcurl requests for the object-store drivers (objhttp.h). Buffered requests run on
 * pooled easy handles, each on its own multi handle polled in 100 ms steps (so a SIGTERM ends a
 * stalled transfer at once: xferinfo_cb); streamed downloads drive one easy handle through a
 * private multi handle from the reader's read(), pausing the transfer while our buffer is full,
 * so memory stays bounded whatever the object size. */
#include "objhttp.h"
#include "../common/mem.h"
#include "../common/curlmulti.h"
#include "../common/err.h"
#include "../common/log.h"
#include "../common/strbuf.h"
#include "../common/timeutil.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define POOL_MAX 16

/* A pooled transfer handle: the easy handle runs on its own multi, which keeps the connection
 * cache between requests and is polled in short steps (perform). */
typedef struct {
    CURL *easy;
    CURLM *multi;
} PoolEnt;
#define DEFAULT_MAX_BODY ((size_t)1 << 20)
#define ERR_BODY_MAX ((size_t)16 << 10)
#define STREAM_BUF ((size_t)256 << 10)
/* the bounds of objhttp.h, as text for messages */
#define STR_HEADER_LINE_MAX "16 KiB"
#define STR_HEADER_MAX "64 KiB"
#define STR_HEADER_LINES "256"
_Static_assert(OBJHTTP_HEADER_LINE_MAX == 16 << 10 && OBJHTTP_HEADER_MAX == 64 << 10 &&
                   OBJHTTP_HEADER_LINES == 256,
               "STR_HEADER_* must match");

struct ObjHttp {
    char *what;
    char *container; /* NULL if none */
    char *ca_file;
    char *ca_pem;
    int insecure;
    int64_t timeout_ms;
    RetryPolicy retry;
    RetryClassifyHook classify;
    void *classify_ctx;
    pthread_mutex_t mu; /* guards pool */
    PoolEnt pool[POOL_MAX];
    int n_pool;
};

/* p with a shorter backoff (same tries) when ETCDBR_STORE_RETRY_BASE_MS asks for one: tests only
 * (tests/integration/test_store_faults.sh and others), documented in docs/stores.md. */
static RetryPolicy test_backoff(RetryPolicy p) {
    const char *base = getenv("ETCDBR_STORE_RETRY_BASE_MS");
    long long ms = base && *base ? strtoll(base, NULL, 10) : 0;
    if (ms > 0 && ms < p.base_ms) {
        p.cap_ms = p.cap_ms / p.base_ms * ms;
        p.base_ms = ms;
    }
    return p;
}

int objhttp_new(const ObjHttpConfig *cfg, ObjHttp **out) {
    *out = NULL;
    ObjHttp *h = calloc(1, sizeof *h);
    if (!h) return err_set(ERR_NOMEM, "object store http: out of memory");
    pthread_mutex_init(&h->mu, NULL);
    h->what = strdup(cfg->what ? cfg->what : "object store");
    h->container = cfg->container && cfg->container[0] ? strdup(cfg->container) : NULL;
    h->ca_file = cfg->ca_file && cfg->ca_file[0] ? strdup(cfg->ca_file) : NULL;
    h->ca_pem = cfg->ca_pem && cfg->ca_pem[0] ? strdup(cfg->ca_pem) : NULL;
    h->insecure = cfg->insecure_skip_verify;
    h->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 180000;
    RetryPolicy def = RETRY_POLICY_DEFAULT;
    h->retry = test_backoff(cfg->retry.attempts > 0 ? cfg->retry : def);
    h->classify = cfg->classify;
    h->classify_ctx = cfg->classify_ctx;
    if (!h->what || (cfg->ca_file && cfg->ca_file[0] && !h->ca_file) ||
        (cfg->ca_pem && cfg->ca_pem[0] && !h->ca_pem)) {
        objhttp_free(h);
        return err_set(ERR_NOMEM, "object store http: out of memory");
    }
    *out = h;
    return 0;
}

void objhttp_free(ObjHttp *h) {
    if (!h) return;
    for (int i = 0; i < h->n_pool; i++) {
        curl_multi_cleanup(h->pool[i].multi);
        curl_easy_cleanup(h->pool[i].easy);
    }
    pthread_mutex_destroy(&h->mu);
    free(h->what);
    free(h->container);
    free(h->ca_file);
    free(h->ca_pem);
    free(h);
}

/* A handle pair from the pool or a new one; 0 or ERR_NOMEM. */
static int pool_get(ObjHttp *h, PoolEnt *e) {
    e->easy = NULL;
    e->multi = NULL;
    pthread_mutex_lock(&h->mu);
    if (h->n_pool > 0) *e = h->pool[--h->n_pool];
    pthread_mutex_unlock(&h->mu);
    if (e->easy) {
        curl_easy_reset(e->easy);
        return 0;
    }
    e->easy = curl_easy_init();
    e->multi = curl_multi_init();
    if (e->easy && e->multi) return 0;
    curl_easy_cleanup(e->easy);
    curl_multi_cleanup(e->multi);
    return err_set(ERR_NOMEM, "%s: curl_easy_init failed", h->what);
}

static void pool_put(ObjHttp *h, PoolEnt *e) {
    if (!e->easy) return;
    pthread_mutex_lock(&h->mu);
    if (h->n_pool < POOL_MAX) {
        h->pool[h->n_pool++] = *e;
        e->easy = NULL;
    }
    pthread_mutex_unlock(&h->mu);
    if (e->easy) {
        curl_multi_cleanup(e->multi);
        curl_easy_cleanup(e->easy);
    }
}

/* curl_easy_perform on e's multi, polled every 100 ms so the progress callback (xferinfo_cb)
 * sees a stop within ~0.1 s (curl_easy_perform calls it once a second while idle); a request
 * still running after 5 s is logged once, naming the store and request. The transfer's
 * result. */
static CURLcode perform(ObjHttp *h, const ObjHttpRequest *r, PoolEnt *e) {
    if (curl_multi_add_handle(e->multi, e->easy) != CURLM_OK) return CURLE_OUT_OF_MEMORY;
    int inflight = objhttp_inflight_begin(h->what, r->method); /* the profiling endpoints' */
    CURLcode cc = CURLE_OK;
    WaitNote note;
    wait_note_start(&note);
    for (int done = 0; !done;) {
        if (!note.logged && now_mono_ms() - note.start_ms >= WAIT_NOTE_MS) {
            char *url = objhttp_redact_url(r->url);
            wait_note_check(&note, "%s to answer %s %s", h->what, r->method, url ? url : "");
            free(url);
        }
        int running = 0;
        if (curlmulti_step(e->multi, &running, &done, &cc) != CURLM_OK) {
            cc = CURLE_OUT_OF_MEMORY;
            break;
        }
        if (!done && !running) break; /* not expected: DONE comes first */
        if (!done && curlmulti_poll(e->multi, CURLMULTI_POLL_MAX_MS) != CURLM_OK) {
            cc = CURLE_RECV_ERROR;
            break;
        }
    }
    curl_multi_remove_handle(e->multi, e->easy);
    objhttp_inflight_end(inflight);
    return cc;
}

void objhttp_response_clear(ObjHttpResponse *r) {
    if (!r) return;
    FREE_ALL(r->body, r->headers);
    memset(r, 0, sizeof *r);
}

const char *objhttp_response_header(const ObjHttpResponse *r, const char *name, char *buf,
                                    size_t cap) {
    if (!r || !r->headers || cap == 0) return NULL;
    size_t nl = strlen(name);
    const char *p = r->headers;
    while (*p) {
        const char *e = strstr(p, "\r\n");
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *v = p + nl + 1, *ve = p + len;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            size_t vl = (size_t)(ve - v);
            if (vl >= cap) vl = cap - 1;
            memcpy(buf, v, vl);
            buf[vl] = '\0';
            return buf;
        }
        if (!e) break;
        p = e + 2;
    }
    return NULL;
}

int objhttp_response_header_fit(const ObjHttpResponse *r, const char *name, char *buf, size_t cap,
                                const char *ctx) {
    /* one byte more than fits: a value that fills it was truncated */
    char *big = malloc(cap + 1);
    if (!big) return err_set(ERR_NOMEM, "%s: out of memory", ctx);
    int rc = 0;
    if (!objhttp_response_header(r, name, big, cap + 1)) {
        rc = ERR_NOT_FOUND;
    } else if (strlen(big) >= cap) {
        rc = err_set(ERR_IO, "%s: the %s header of the answer is longer than %zu bytes", ctx, name,
                     cap - 1);
    } else {
        memcpy(buf, big, strlen(big) + 1);
    }
    free(big);
    return rc;
}

char *objhttp_dup_bounded(const char *s, size_t n, size_t max, const char *field, const char *ctx) {
    if (n > max) {
        err_set(ERR_IO, "%s: the %s in the answer has %zu bytes, more than the %zu accepted", ctx,
                field, n, max);
        return NULL;
    }
    char *d = malloc(n + 1);
    if (!d) {
        err_set(ERR_NOMEM, "%s: out of memory", ctx);
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* ---- listing bounds ---- */

static const atomic_int *g_stop;

void objhttp_set_stop(const atomic_int *stop) {
    g_stop = stop;
}

static long long env_bound(const char *name, long long def) {
    const char *v = getenv(name);
    long long x = v && *v ? strtoll(v, NULL, 10) : 0;
    return x > 0 && x < def ? x : def;
}

void objhttp_listing_begin(ObjHttpListing *l, const char *what, const char *container,
                           const char *prefix) {
    memset(l, 0, sizeof *l);
    l->what = what ? what : "object store";
    l->container = container ? container : "";
    l->prefix = prefix ? prefix : "";
    l->start_ms = now_mono_ms();
    l->budget_ms = env_bound("ETCDBR_STORE_LIST_BUDGET_MS", OBJHTTP_LIST_BUDGET_MS);
    l->max_pages = (long)env_bound("ETCDBR_STORE_LIST_MAX_PAGES", OBJHTTP_LIST_MAX_PAGES);
}

/* FNV-1a, never 0 (0 marks an empty slot). */
static uint64_t token_hash(const char *t, size_t n) {
    uint64_t x = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        x = (x ^ (unsigned char)t[i]) * 1099511628211ULL;
    return x ? x : 1;
}

/* Adds hash x to the set: 1 if it was there already, 0 if added, ERR_NOMEM. */
static int seen_add(ObjHttpListing *l, uint64_t x) {
    if (2 * (l->n_seen + 1) > l->cap_seen) {
        size_t nc = l->cap_seen ? 2 * l->cap_seen : 64;
        uint64_t *nv = calloc(nc, sizeof *nv);
        if (!nv) return ERR_NOMEM;
        for (size_t i = 0; i < l->cap_seen; i++) {
            if (!l->seen[i]) continue;
            size_t j = (size_t)(l->seen[i] & (nc - 1));
            while (nv[j])
                j = (j + 1) & (nc - 1);
            nv[j] = l->seen[i];
        }
        free(l->seen);
        l->seen = nv;
        l->cap_seen = nc;
    }
    size_t j = (size_t)(x & (l->cap_seen - 1));
    for (; l->seen[j]; j = (j + 1) & (l->cap_seen - 1))
        if (l->seen[j] == x) return 1;
    l->seen[j] = x;
    l->n_seen++;
    return 0;
}

int objhttp_listing_page(ObjHttpListing *l, const char *token) {
    const char *c = l->container, *sep = l->container[0] ? " " : "";
    int64_t now = now_mono_ms();
    if (g_stop && atomic_load(g_stop) && !l->stop_ms) l->stop_ms = now;
    if (l->stop_ms && now - l->stop_ms >= OBJHTTP_LIST_STOP_GRACE_MS)
        return err_set(ERR_CANCELED, "%s%s%s list %s: stopped by a signal after %ld pages", l->what,
                       sep, c, l->prefix, l->pages);
    if (l->pages >= l->max_pages)
        return err_set(ERR_IO,
                       "%s%s%s list %s: more than %ld pages (the listing page cap): the server "
                       "does not end the listing",
                       l->what, sep, c, l->prefix, l->max_pages);
    if (now - l->start_ms > l->budget_ms)
        return err_set(ERR_IO,
                       "%s%s%s list %s: not finished after %lld s and %ld pages (the listing time "
                       "budget is %lld s)",
                       l->what, sep, c, l->prefix, (long long)((now - l->start_ms) / 1000),
                       l->pages, (long long)(l->budget_ms / 1000));
    if (token && token[0]) {
        size_t n = strnlen(token, OBJHTTP_LIST_TOKEN_MAX + 1);
        if (n > OBJHTTP_LIST_TOKEN_MAX)
            return err_set(ERR_IO,
                           "%s%s%s list %s: page %ld gave a continuation token longer than %zu "
                           "bytes",
                           l->what, sep, c, l->prefix, l->pages, OBJHTTP_LIST_TOKEN_MAX);
        int r = seen_add(l, token_hash(token, n));
        if (r == ERR_NOMEM)
            return err_set(ERR_NOMEM, "%s list %s: out of memory", l->what, l->prefix);
        if (r == 1)
            return err_set(ERR_IO,
                           "%s%s%s list %s: page %ld repeats a continuation token (\"%.40s%s\") "
                           "seen before: the listing would never end",
                           l->what, sep, c, l->prefix, l->pages, token, n > 40 ? "..." : "");
    }
    l->pages++;
    return 0;
}

void objhttp_listing_end(ObjHttpListing *l) {
    free(l->seen);
    l->seen = NULL;
    l->n_seen = l->cap_seen = 0;
}

/* ---- one attempt ---- */

typedef struct {
    char *data;
    size_t len, cap, max;
    int truncated;
} Buf;

static void buf_add(Buf *b, const void *d, size_t n) {
    if (b->len + n > b->max) {
        b->truncated = 1;
        n = b->max > b->len ? b->max - b->len : 0;
    }
    if (n == 0) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *g = realloc(b->data, nc);
        if (!g) {
            b->truncated = 1;
            return;
        }
        b->data = g;
        b->cap = nc;
    }
    memcpy(b->data + b->len, d, n);
    b->len += n;
    b->data[b->len] = '\0';
}

typedef struct {
    CURL *curl;
    const ObjHttpRequest *req;
    /* request body */
    size_t body_off;
    int reader_failed;
    /* response */
    Buf hdr;
    Buf body;
    int headers_done;    /* the final (non-1xx) header block ended */
    size_t hdr_total;    /* header bytes of every block so far */
    int hdr_lines;       /* header lines of every block so far */
    const char *hdr_bad; /* the header bound the response broke (static text); NULL = none */
    long status;
    int consumer_rc;
    /* stream mode */
    int streaming;
    Buf sbuf; /* unread body bytes (data[off..len)) */
    size_t soff;
    int paused;
    StopStall stall; /* the process is stopping: a stalled transfer is aborted */
} Xfer;

/* libcurl's progress callback: aborts a transfer that is stalled after SIGTERM/SIGINT (a store
 * that accepts and never answers, or a slow listing page), so the command ends within about a
 * second; one that still moves bytes finishes (timeutil.h stop_stall_abort). */
static int xferinfo_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    Xfer *x = ud;
    (void)dltotal, (void)ultotal;
    return stop_stall_abort(&x->stall, (int64_t)dlnow + (int64_t)ulnow);
}

static size_t header_cb(char *ptr, size_t size, size_t n, void *ud) {
    Xfer *x = ud;
    size_t len = size * n;
    x->hdr_total += len;
    x->hdr_lines++;
    if (len > OBJHTTP_HEADER_LINE_MAX)
        x->hdr_bad = "a header line is longer than " STR_HEADER_LINE_MAX;
    else if (x->hdr_total > OBJHTTP_HEADER_MAX)
        x->hdr_bad = "the headers are larger than " STR_HEADER_MAX;
    else if (x->hdr_lines > OBJHTTP_HEADER_LINES)
        x->hdr_bad = "more than " STR_HEADER_LINES " header lines";
    if (x->hdr_bad) return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
    if (len >= 5 && strncmp(ptr, "HTTP/", 5) == 0) {
        /* a new header block (after 100 Continue or a redirect): keep only the last */
        x->hdr.len = 0;
        x->headers_done = 0;
        if (x->hdr.data) x->hdr.data[0] = '\0';
    }
    if (len == 2 && ptr[0] == '\r' && ptr[1] == '\n') {
        long st = 0;
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &st);
        if (st >= 200) {
            x->status = st;
            x->headers_done = 1;
        }
        return len;
    }
    buf_add(&x->hdr, ptr, len);
    if (x->hdr.truncated) { /* within the bounds above, only memory can run out: never a gap */
        x->hdr_bad = "memory ran out for the headers";
        return 0;
    }
    return len;
}

static size_t write_cb(char *ptr, size_t size, size_t n, void *ud) {
    Xfer *x = ud;
    size_t len = size * n;
    long st = x->status;
    if (!st) curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &st);
    if (st < 200 || st >= 300) { /* an error document: keep an excerpt */
        buf_add(&x->body, ptr, len);
        return len;
    }
    if (x->streaming) {
        if (x->soff > 0 && x->soff == x->sbuf.len) x->soff = x->sbuf.len = 0;
        if (x->sbuf.len + len > x->sbuf.max) {
            if (x->soff > 0) { /* compact */
                memmove(x->sbuf.data, x->sbuf.data + x->soff, x->sbuf.len - x->soff);
                x->sbuf.len -= x->soff;
                x->soff = 0;
            }
            if (x->sbuf.len + len > x->sbuf.max && x->sbuf.len > 0) {
                x->paused = 1;
                return CURL_WRITEFUNC_PAUSE;
            }
        }
        size_t before = x->sbuf.len;
        size_t save_max = x->sbuf.max;
        if (len > x->sbuf.max) x->sbuf.max = len; /* one oversized chunk into an empty buffer */
        buf_add(&x->sbuf, ptr, len);
        x->sbuf.max = save_max;
        return x->sbuf.len - before == len ? len : 0;
    }
    if (x->req->consume) {
        int rc = x->req->consume(x->req->consume_ctx, ptr, len);
        if (rc != 0) {
            x->consumer_rc = rc;
            return 0;
        }
        return len;
    }
    buf_add(&x->body, ptr, len);
    if (x->body.truncated) return 0; /* a buffered 2xx body must be complete */
    return len;
}

static size_t read_cb(char *buf, size_t size, size_t n, void *ud) {
    Xfer *x = ud;
    size_t cap = size * n;
    const ObjHttpRequest *r = x->req;
    if (x->body_off >= r->body_len) return 0;
    size_t want = r->body_len - x->body_off;
    if (want > cap) want = cap;
    if (r->body_reader) {
        size_t got = 0;
        if (io_read(r->body_reader, buf, want, &got) != 0 || got == 0) {
            x->reader_failed = 1;
            return CURL_READFUNC_ABORT;
        }
        want = got;
    } else {
        memcpy(buf, (const char *)r->body + x->body_off, want);
    }
    x->body_off += want;
    return want;
}

static int seek_cb(void *ud, curl_off_t off, int origin) {
    Xfer *x = ud;
    if (x->req->body_reader || origin != SEEK_SET || off < 0 || (size_t)off > x->req->body_len)
        return CURL_SEEKFUNC_CANTSEEK;
    x->body_off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

/* Sets up x->curl for one attempt; *hl receives the header list to free after it. */
static int setup(ObjHttp *h, Xfer *x, struct curl_slist **hl) {
    CURL *c = x->curl;
    const ObjHttpRequest *r = x->req;
    *hl = NULL;
    struct curl_slist *l = NULL;
    for (size_t i = 0; i < r->n_headers; i++) {
        struct curl_slist *t = curl_slist_append(l, r->headers[i]);
        if (!t) goto nomem;
        l = t;
    }
    /* POST gets a content type of ours, not curl's form default. Headers are never removed
     * with an empty "Name:" line: curl 7.88's SigV4 signs such a line and then drops it, and
     * the signature no longer matches (so "Expect: 100-continue" stays on large bodies). */
    int has_ct = 0;
    for (size_t i = 0; i < r->n_headers; i++)
        if (strncasecmp(r->headers[i], "content-type:", 13) == 0) has_ct = 1;
    if (!has_ct && strcmp(r->method, "POST") == 0) {
        struct curl_slist *t = curl_slist_append(l, "Content-Type: application/octet-stream");
        if (!t) goto nomem;
        l = t;
    }
    curl_easy_setopt(c, CURLOPT_URL, r->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    int has_body = r->body_len > 0 || r->body_reader;
    if (strcmp(r->method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(r->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(r->method, "PUT") == 0) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
    } else if (strcmp(r->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
        if (has_body) {
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
        }
    }
    if (has_body || strcmp(r->method, "PUT") == 0 || strcmp(r->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
        curl_easy_setopt(c, CURLOPT_READDATA, x);
        curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_cb);
        curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
    }
    int64_t tmo = r->timeout_ms > 0 ? r->timeout_ms : h->timeout_ms;
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(tmo < 30000 ? tmo : 30000));
    if (x->streaming || r->consume) {
        /* a body of any size: no total limit, but a stall of tmo fails the transfer */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)((tmo + 999) / 1000));
    } else {
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)tmo);
    }
    if (h->ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    if (h->ca_pem) {
        struct curl_blob blob = {h->ca_pem, strlen(h->ca_pem), CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (h->insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (r->auth) {
        int rc = r->auth(r->auth_ctx, c, &l);
        if (rc != 0) {
            curl_slist_free_all(l);
            return rc;
        }
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, l);
    *hl = l;
    return 0;
nomem:
    curl_slist_free_all(l);
    return err_set(ERR_NOMEM, "%s %s: out of memory", h->what, r->method);
}

void objhttp_body_excerpt(const char *body, char *out, size_t cap) {
    out[0] = '\0';
    if (!body || !body[0]) return;
    const char *code = strstr(body, "<Code>");
    if (code) {
        code += 6;
        const char *ce = strstr(code, "</Code>");
        const char *msg = strstr(body, "<Message>");
        const char *me = msg ? strstr(msg, "</Message>") : NULL;
        if (ce) {
            if (msg && me)
                snprintf(out, cap, "%.*s: %.*s", (int)(ce - code), code, (int)(me - msg - 9),
                         msg + 9);
            else
                snprintf(out, cap, "%.*s", (int)(ce - code), code);
            return;
        }
    }
    size_t o = 0;
    for (const char *p = body; *p && o + 1 < cap && o < 200; p++)
        out[o++] = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : *p;
    out[o] = '\0';
}

/* The failure hook (objhttp_set_failure_hook): ctx is stored before fn, read after it. */
static _Atomic(ObjHttpFailureHook) failure_fn;
static _Atomic(void *) failure_ctx;

void objhttp_set_failure_hook(ObjHttpFailureHook fn, void *ctx) {
    atomic_store(&failure_ctx, ctx);
    atomic_store(&failure_fn, fn);
}

const char *objhttp_failure_class(long status, int curl_code) {
    switch ((CURLcode)curl_code) {
    case CURLE_OK:
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
        return "connect";
    case CURLE_OPERATION_TIMEDOUT:
        return "timeout";
    case CURLE_SSL_CONNECT_ERROR:
        return "tls";
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
        return "network";
    default:
        return "other";
    }
    if (status == 429) return "throttled";
    if (status >= 500 && status <= 599) return "http_5xx";
    if (status >= 400 && status <= 499) return "http_4xx";
    return "other";
}

/* Tells the failure hook, if any, of a passing failure (rc) of one attempt of r. */
static void report_failure(const ObjHttp *h, const ObjHttpRequest *r, long status, CURLcode cc,
                           int rc, int will_retry) {
    ObjHttpFailureHook fn = atomic_load(&failure_fn);
    if (!fn) return;
    ObjHttpFailure f = {.provider = h->what,
                        .cls = objhttp_failure_class(status, (int)cc),
                        .method = r->method,
                        .status = status,
                        .rc = rc,
                        .will_retry = will_retry};
    fn(atomic_load(&failure_ctx), &f);
}

/* Message and code for a finished attempt that failed; sets *retryable (tried again) and
 * *transient (a passing failure, whether or not this request can be tried again). */
static int attempt_error(ObjHttp *h, Xfer *x, CURLcode cc, const char *curl_err, int *retryable,
                         int *transient) {
    const ObjHttpRequest *r = x->req;
    char *url = objhttp_redact_url(r->url);
    const char *u = url ? url : "(url)";
    const char *body = x->body.data ? x->body.data : "";
    RetryVerdict v = RETRY_DEFAULT;
    if (h->classify) v = h->classify(h->classify_ctx, x->status, (int)cc, body);
    if (v == RETRY_DEFAULT) v = retry_classify_http(x->status, (int)cc);
    *transient = v == RETRY_YES;
    *retryable = v == RETRY_YES && !r->body_reader && !r->no_retry;
    int rc;
    if (cc == CURLE_OUT_OF_MEMORY && !x->headers_done && !x->hdr_bad && !x->stall.aborted)
        /* libcurl refuses a header line over CURL_MAX_HTTP_HEADER (100 KiB) before our
         * callback sees it, with this code */
        x->hdr_bad = "a header line is longer than libcurl accepts (100 KiB), or memory ran out";
    if (x->stall.aborted) {
        *retryable = *transient = 0;
        rc = err_set(ERR_CANCELED,
                     "%s %s %s: stopping (SIGTERM/SIGINT): aborted, no answer for %d ms", h->what,
                     r->method, u, STOP_STALL_MS);
    } else if (x->hdr_bad) { /* our bound, not a network failure: trying again gets the same */
        *retryable = *transient = 0;
        rc = err_set(ERR_IO, "%s %s %s: response refused: %s", h->what, r->method, u, x->hdr_bad);
    } else if (cc != CURLE_OK) {
        rc = cc == CURLE_OPERATION_TIMEDOUT ? ERR_TIMEOUT : ERR_IO;
        err_set(rc, "%s %s %s: %s", h->what, r->method, u,
                curl_err && curl_err[0] ? curl_err : curl_easy_strerror(cc));
    } else {
        char ex[256];
        objhttp_body_excerpt(body, ex, sizeof ex);
        rc = x->status == 404 ? ERR_NOT_FOUND : ERR_IO;
        /* 401/403: say plainly that the credentials were refused, and for which bucket */
        char auth[320] = "";
        if (x->status == 401 || x->status == 403)
            snprintf(auth, sizeof auth,
                     " (%s refused the credentials%s%s: check them and their permissions)", h->what,
                     h->container ? " for bucket " : "", h->container ? h->container : "");
        err_set(rc, "%s %s %s: HTTP %ld%s%s%s", h->what, r->method, u, x->status, ex[0] ? ": " : "",
                ex, auth);
    }
    free(url);
    return rc;
}

static void xfer_release(Xfer *x) {
    free(x->hdr.data);
    free(x->body.data);
    free(x->sbuf.data);
    memset(x, 0, sizeof *x);
}

static void fill_response(Xfer *x, ObjHttpResponse *resp) {
    if (!resp) return;
    objhttp_response_clear(resp);
    resp->status = x->status;
    resp->body = x->body.data ? x->body.data : strdup("");
    resp->body_len = x->body.data ? x->body.len : 0;
    resp->headers = x->hdr.data ? x->hdr.data : strdup("");
    x->body.data = x->hdr.data = NULL;
}

static void log_retry(ObjHttp *h, const ObjHttpRequest *r, int attempt, int64_t delay) {
    log_warn("%s: retrying (try %d of %d) in %lld ms after: %s", h->what, attempt + 1,
             h->retry.attempts, (long long)delay, err_msg());
    (void)r;
}

/* Tries left to a request once the process is stopping: taken at once, without the backoff, so
 * a passing failure (a 503) does not cost the last delta, and a store that keeps failing is left
 * within a second (a stalled try is not retried: xferinfo_cb). */
#define STOPPING_RETRIES 2

/* The backoff before a retry; 1 (ERR_CANCELED set, the last error kept in the message) when
 * the process is stopping (SIGTERM/SIGINT) and the request has used its STOPPING_RETRIES
 * (*stopping_tries counts them, 0 at the request's start). */
static int retry_wait(ObjHttp *h, const ObjHttpRequest *r, int64_t delay, int *stopping_tries) {
    char what[300];
    snprintf(what, sizeof what, "the %s before retrying %s", h->what, r->method);
    if (!process_stopping() && !retry_sleep_ms(delay, what)) return 0;
    if ((*stopping_tries)++ < STOPPING_RETRIES) return 0;
    err_wrap(ERR_CANCELED, "stopping (SIGTERM/SIGINT): not retrying after");
    return 1;
}

int objhttp_do(ObjHttp *h, const ObjHttpRequest *req, ObjHttpResponse *resp) {
    int rc = 0, stopping_tries = 0;
    for (int attempt = 1;; attempt++) {
        Xfer x = {0};
        x.req = req;
        x.body.max = req->max_body ? req->max_body : DEFAULT_MAX_BODY;
        x.hdr.max = OBJHTTP_HEADER_MAX;
        PoolEnt pe;
        if (pool_get(h, &pe)) return ERR_NOMEM;
        x.curl = pe.easy;
        struct curl_slist *hl = NULL;
        char curl_err[CURL_ERROR_SIZE] = "";
        rc = setup(h, &x, &hl);
        if (rc != 0) {
            pool_put(h, &pe);
            xfer_release(&x);
            return rc;
        }
        curl_easy_setopt(x.curl, CURLOPT_ERRORBUFFER, curl_err);
        CURLcode cc = perform(h, req, &pe);
        curl_easy_setopt(x.curl, CURLOPT_ERRORBUFFER, NULL);
        curl_easy_getinfo(x.curl, CURLINFO_RESPONSE_CODE, &x.status);
        curl_slist_free_all(hl);
        pool_put(h, &pe);
        x.curl = NULL;
        int retryable = 0, transient = 0;
        if (x.consumer_rc != 0) {
            rc = x.consumer_rc;
        } else if (x.reader_failed) {
            rc = err_set(ERR_IO, "%s %s: reading the request body failed", h->what, req->method);
        } else if (cc == CURLE_OK && x.status >= 200 && x.status < 300) {
            rc = 0;
        } else if (cc == CURLE_WRITE_ERROR && x.body.truncated && !x.stall.aborted) {
            char *url = objhttp_redact_url(req->url);
            rc = err_set(ERR_IO, "%s %s %s: response larger than %zu bytes", h->what, req->method,
                         url ? url : "(url)", x.body.max);
            free(url);
        } else {
            rc = attempt_error(h, &x, cc, curl_err, &retryable, &transient);
        }
        long status = x.status;
        fill_response(&x, resp);
        xfer_release(&x);
        int again = rc != 0 && retryable && attempt < h->retry.attempts;
        if (transient) report_failure(h, req, status, cc, rc, again);
        if (!again) return rc;
        int64_t delay = retry_delay_ms(&h->retry, attempt, retry_random());
        log_retry(h, req, attempt, delay);
        if (retry_wait(h, req, delay, &stopping_tries)) return ERR_CANCELED;
    }
}

/* ---- streams ---- */

struct ObjHttpStream {
    ObjHttp *h;
    ObjHttpRequest req; /* url copied */
    char *url;
    Xfer x;
    CURLM *multi;
    struct curl_slist *hl;
    char curl_err[CURL_ERROR_SIZE];
    int done;
    CURLcode result;
    int inflight; /* objhttp_inflight_begin's token while started, else 0 */
};

static void stream_release(ObjHttpStream *s) {
    objhttp_inflight_end(s->inflight);
    s->inflight = 0;
    if (s->multi) {
        if (s->x.curl) curl_multi_remove_handle(s->multi, s->x.curl);
        curl_multi_cleanup(s->multi);
        s->multi = NULL;
    }
    if (s->x.curl) curl_easy_cleanup(s->x.curl); /* its connection lived in the multi anyway */
    curl_slist_free_all(s->hl);
    s->hl = NULL;
    xfer_release(&s->x);
}

/* Runs the transfer until until(s) holds or it finishes. */
static int stream_pump(ObjHttpStream *s, int (*until)(const ObjHttpStream *)) {
    while (!s->done && !until(s)) {
        CURLMcode mc = curlmulti_step(s->multi, NULL, &s->done, &s->result);
        if (mc != CURLM_OK)
            return err_set(ERR_IO, "%s: curl_multi_perform: %s", s->h->what,
                           curl_multi_strerror(mc));
        if (s->done || until(s)) break;
        /* short: the progress callback must run soon after a stop (xferinfo_cb) */
        mc = curlmulti_poll(s->multi, CURLMULTI_POLL_MAX_MS);
        if (mc != CURLM_OK)
            return err_set(ERR_IO, "%s: curl_multi_poll: %s", s->h->what, curl_multi_strerror(mc));
    }
    return 0;
}

static int until_headers(const ObjHttpStream *s) {
    /* headers of a 2xx are enough; an error document is read to its end */
    return s->x.headers_done && s->x.status >= 200 && s->x.status < 300;
}

static int until_data(const ObjHttpStream *s) {
    return s->x.sbuf.len > s->x.soff;
}

static int stream_start(ObjHttpStream *s) {
    memset(&s->x, 0, sizeof s->x);
    s->done = 0;
    s->result = CURLE_OK;
    s->curl_err[0] = '\0';
    s->x.req = &s->req;
    s->x.streaming = 1;
    s->x.body.max = ERR_BODY_MAX;
    s->x.hdr.max = OBJHTTP_HEADER_MAX;
    s->x.sbuf.max = STREAM_BUF;
    s->x.curl = curl_easy_init();
    s->multi = curl_multi_init();
    s->inflight = objhttp_inflight_begin(s->h->what, s->req.method);
    if (!s->x.curl || !s->multi) return err_set(ERR_NOMEM, "%s: curl init failed", s->h->what);
    int rc = setup(s->h, &s->x, &s->hl);
    if (rc != 0) return rc;
    curl_easy_setopt(s->x.curl, CURLOPT_ERRORBUFFER, s->curl_err);
    if (curl_multi_add_handle(s->multi, s->x.curl) != CURLM_OK)
        return err_set(ERR_IO, "%s: curl_multi_add_handle failed", s->h->what);
    return 0;
}

int objhttp_stream_open(ObjHttp *h, const ObjHttpRequest *req, ObjHttpResponse *resp,
                        ObjHttpStream **out) {
    *out = NULL;
    ObjHttpStream *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "%s: out of memory", h->what);
    s->h = h;
    s->req = *req;
    s->url = strdup(req->url);
    if (!s->url) {
        free(s);
        return err_set(ERR_NOMEM, "%s: out of memory", h->what);
    }
    s->req.url = s->url;
    s->req.headers = NULL; /* copied into the curl list by setup before req goes out of scope */
    s->req.n_headers = 0;
    s->req.body = NULL;
    s->req.body_len = 0;
    s->req.body_reader = NULL;
    s->req.consume = NULL;
    int rc = 0, stopping_tries = 0;
    for (int attempt = 1;; attempt++) {
        /* the caller's headers are valid during this call */
        s->req.headers = req->headers;
        s->req.n_headers = req->n_headers;
        rc = stream_start(s);
        s->req.headers = NULL;
        s->req.n_headers = 0;
        if (rc == 0) rc = stream_pump(s, until_headers);
        int retryable = 0, transient = 0;
        CURLcode cc = CURLE_OK;
        if (rc == 0) {
            if (s->done && s->result != CURLE_OK) {
                cc = s->result;
                rc = attempt_error(h, &s->x, cc, s->curl_err, &retryable, &transient);
            } else if (s->x.status < 200 || s->x.status >= 300) {
                rc = attempt_error(h, &s->x, CURLE_OK, s->curl_err, &retryable, &transient);
            }
        }
        if (resp) {
            objhttp_response_clear(resp);
            resp->status = s->x.status;
            resp->headers = strdup(s->x.hdr.data ? s->x.hdr.data : "");
            resp->body = strdup(s->x.body.data ? s->x.body.data : "");
            resp->body_len = resp->body ? strlen(resp->body) : 0;
        }
        if (rc == 0) break;
        long status = s->x.status;
        stream_release(s);
        int again = retryable && attempt < h->retry.attempts && !req->no_retry;
        if (transient) report_failure(h, req, status, cc, rc, again);
        if (!again) {
            free(s->url);
            free(s);
            return rc;
        }
        int64_t delay = retry_delay_ms(&h->retry, attempt, retry_random());
        log_retry(h, req, attempt, delay);
        if (retry_wait(h, req, delay, &stopping_tries)) {
            free(s->url);
            free(s);
            return ERR_CANCELED;
        }
    }
    *out = s;
    return 0;
}

int objhttp_stream_read(ObjHttpStream *s, void *buf, size_t cap, size_t *got) {
    *got = 0;
    if (cap == 0) return 0;
    if (!until_data(s) && !s->done) {
        if (s->x.paused) {
            s->x.paused = 0;
            curl_easy_pause(s->x.curl, CURLPAUSE_CONT); /* may call write_cb right away */
        }
        int rc = stream_pump(s, until_data);
        if (rc != 0) return rc;
    }
    size_t avail = s->x.sbuf.len - s->x.soff;
    if (avail > 0) {
        size_t n = avail < cap ? avail : cap;
        memcpy(buf, s->x.sbuf.data + s->x.soff, n);
        s->x.soff += n;
        *got = n;
        return 0;
    }
    if (s->result != CURLE_OK) {
        int retryable, transient;
        return attempt_error(s->h, &s->x, s->result, s->curl_err, &retryable, &transient);
    }
    return 0; /* done, nothing buffered: end of body */
}

static int resumable_read(IoReader *ior, void *buf, size_t cap, size_t *got) {
    ObjHttpResumable *r = (ObjHttpResumable *)ior;
    *got = 0;
    for (;;) {
        if (!r->s || cap == 0) return 0;
        size_t want = r->skip > 0 && r->skip < cap ? (size_t)r->skip : cap;
        int rc = objhttp_stream_read(r->s, buf, want, got);
        if (rc == 0 && r->skip > 0 && *got > 0) { /* bytes before offset: dropped */
            r->skip -= *got;
            *got = 0;
            continue;
        }
        if (rc == 0) {
            r->offset += *got;
            return 0;
        }
        if ((rc != ERR_IO && rc != ERR_TIMEOUT) || r->resumes >= OBJHTTP_READ_RESUMES) return rc;
        r->resumes++;
        log_warn("%s read %s: the download broke at byte %llu; resuming there (%d of %d) after: %s",
                 r->what, r->key, (unsigned long long)r->offset, r->resumes, OBJHTTP_READ_RESUMES,
                 err_msg());
        objhttp_stream_free(r->s);
        r->s = NULL;
        r->skip = 0;
        RetryPolicy p = test_backoff((RetryPolicy)RETRY_POLICY_DEFAULT);
        if (retry_sleep_ms(retry_delay_ms(&p, r->resumes, retry_random()), "resuming a download"))
            return err_set(ERR_CANCELED, "%s read %s: stopping (SIGTERM/SIGINT): not resuming",
                           r->what, r->key);
        rc = r->open(r);
        if (rc) return rc;
    }
}

static void resumable_free(IoReader *ior) {
    ObjHttpResumable *r = (ObjHttpResumable *)ior;
    if (!r) return;
    if (r->release) r->release(r);
    objhttp_stream_free(r->s);
    free(r->key);
    free(r);
}

static const IoReaderVt resumable_vt = {resumable_read, resumable_free};

int objhttp_resumable_start(ObjHttpResumable *r, const char *what, const char *key, uint64_t offset,
                            int (*open)(ObjHttpResumable *r), void (*release)(ObjHttpResumable *r),
                            IoReader **out) {
    *out = NULL;
    r->base.vt = &resumable_vt;
    r->what = what;
    r->offset = offset;
    r->open = open;
    r->release = release;
    r->key = strdup(key);
    int rc = r->key ? open(r) : err_set(ERR_NOMEM, "%s read: out of memory", what);
    RETURN_BUILT(rc, out, &r->base, resumable_free(&r->base));
}

void objhttp_stream_free(ObjHttpStream *s) {
    if (!s) return;
    stream_release(s);
    free(s->url);
    free(s);
}

int objhttp_resumable_pin(ObjHttpResumable *r, const ObjHttpResponse *resp, const char *name,
                          char *buf, size_t cap) {
    char ctx[64];
    snprintf(ctx, sizeof ctx, "%s read", r->what ? r->what : "object store");
    int rc = objhttp_response_header_fit(resp, name, buf, cap, ctx);
    if (rc == 0) return 0;
    buf[0] = '\0';
    if (rc == ERR_NOT_FOUND) return 0;
    objhttp_stream_free(r->s);
    r->s = NULL;
    return err_wrap(rc, "%s", r->key);
}
