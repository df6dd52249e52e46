/* grpc: gRPC calls over libcurl HTTP/2; see grpc.h. A channel's calls share its multi handle and
 * so one HTTP/2 connection per endpoint. Every 5-byte prefix is checked as soon as it is complete,
 * so a hostile length never drives an allocation beyond GRPC_MAX_FRAME. libcurl < 7.89 fails when
 * a prior-knowledge (h2c) transfer reuses a connection (curl issue #10634): there only the
 * transfer opening an h2c connection uses prior knowledge, later ones CURL_HTTP_VERSION_2_0. */
#include "grpc.h"

#include "common/byteorder.h"
#include "common/curlmulti.h"
#include "common/err.h"
#include "common/timeutil.h"

#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SNAPSHOT_BUFFER_SIZE (512L * 1024L)
#define MAX_STREAMS_PER_CONN 1000L
#define POLL_MIN_MS 2
#define POLL_MAX_MS 250

/* printf arguments naming a call as "<endpoint> <method>" for "%.*s %s" */
#define CALL_NAME(c) (c)->ep_len, (c)->url, (c)->url + (c)->ep_len

typedef enum { CALL_UNARY, CALL_STREAM } CallMode;

/* One HTTP/2 stream: request bytes, response reassembly and the grpc-status seen so far. */
typedef struct GrpcCall {
    CURL *easy;
    GrpcChannel *ch;
    CallMode mode;
    char url[512]; /* endpoint + method */
    int ep_len;    /* url[0..ep_len) is the endpoint, the rest the method */
    /* streaming request side (bidi): queued frames not yet handed to libcurl */
    uint8_t *sbuf;
    size_t slen, soff, scap;
    int upload_paused;
    /* response side */
    uint8_t *rbuf; /* unparsed bytes (unary: the whole reply) */
    size_t rlen, rcap;
    int (*on_msg)(void *ctx, const uint8_t *msg, size_t len);
    void *ctx;
    size_t delivered;
    int cb_rc;    /* nonzero: on_msg stopped the call */
    int proto_rc; /* nonzero: framing error */
    char proto_msg[160];
    long http_status;
    int grpc_status; /* -1 = none yet */
    char grpc_message[512];
    int done;
    int reuse_mode;  /* sent as CURL_HTTP_VERSION_2_0, expecting a live h2c connection */
    int h1_fallback; /* ... but libcurl opened a new HTTP/1.1 connection: nothing reached gRPC */
    CURLcode result;
    char errbuf[CURL_ERROR_SIZE];
    StopStall stall; /* the process is stopping: a stalled call is aborted (xferinfo_cb) */
} GrpcCall;

struct GrpcChannel {
    CURLM *multi;
    char *cacert, *cert, *key;
    int insecure;
    long connect_timeout_ms;
    char *token;
    struct curl_slist *headers;
    GrpcCall **pool; /* pool[0] is the unary/stream call; batches use pool[0..n) */
    GrpcCall **todo; /* batch scratch, as large as pool */
    size_t npool;
    GrpcFrame frame;     /* request frame of the current unary/stream call */
    int pk_reuse_broken; /* libcurl < 7.89: see the file comment */
    char **live;         /* endpoints with an h2c connection open in multi (pk_reuse_broken) */
    size_t n_live, live_cap;
    int drop_conns; /* an h2c connection may be open but unusable for prior knowledge */
};

struct GrpcStream {
    CURLM *multi;
    GrpcCall *call;
    struct curl_slist *headers; /* own copy: the channel may rebuild its list (re-auth) */
    size_t consumed;            /* bytes of call->rbuf handed out by the last recv */
    int added;
};

/* ---- frames ---- */

int grpc_frame_pack(GrpcFrame *f, const ProtobufCMessage *m) {
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > GRPC_MAX_FRAME) return err_set(ERR_INVALID, "grpc: request of %zu bytes is too big", n);
    if (f->cap < n + 5) {
        size_t cap = f->cap ? f->cap : 256;
        while (cap < n + 5)
            cap *= 2;
        uint8_t *p = realloc(f->data, cap);
        if (!p) return err_set(ERR_NOMEM, "grpc: out of memory packing %zu bytes", n);
        f->data = p;
        f->cap = cap;
    }
    f->data[0] = 0;
    put_be32(f->data + 1, (uint32_t)n);
    protobuf_c_message_pack(m, f->data + 5);
    f->len = n + 5;
    return 0;
}

void grpc_frame_free(GrpcFrame *f) {
    if (!f) return;
    free(f->data);
    f->data = NULL;
    f->len = f->cap = 0;
}

/* ---- response parsing ---- */

static int rbuf_append(GrpcCall *c, const uint8_t *p, size_t n) {
    if (c->rcap - c->rlen < n) {
        size_t cap = c->rcap ? c->rcap : 1024;
        while (cap - c->rlen < n)
            cap *= 2;
        uint8_t *q = realloc(c->rbuf, cap);
        if (!q) return -1;
        c->rbuf = q;
        c->rcap = cap;
    }
    memcpy(c->rbuf + c->rlen, p, n);
    c->rlen += n;
    return 0;
}

/* Validates a 5-byte prefix; returns the message length or -1 (proto_rc set). */
static int64_t check_prefix(GrpcCall *c, const uint8_t *p) {
    uint32_t len = get_be32(p + 1);
    if (p[0] != 0) {
        c->proto_rc = ERR_CORRUPT;
        snprintf(c->proto_msg, sizeof c->proto_msg,
                 "compressed or unknown frame flag 0x%02x refused", p[0]);
        return -1;
    }
    if (len > GRPC_MAX_FRAME) {
        c->proto_rc = ERR_CORRUPT;
        snprintf(c->proto_msg, sizeof c->proto_msg, "frame of %u bytes exceeds the limit", len);
        return -1;
    }
    return len;
}

static int deliver(GrpcCall *c, const uint8_t *msg, size_t len) {
    c->delivered++;
    int rc = c->on_msg ? c->on_msg(c->ctx, msg, len) : 0;
    if (rc) c->cb_rc = rc;
    return rc;
}

/* Streaming mode: complete frames are delivered straight from libcurl's buffer when possible;
 * only a partial frame is copied. Returns 0 to continue, -1 to abort the transfer. */
static int feed_stream(GrpcCall *c, const uint8_t *p, size_t n) {
    while (n > 0) {
        if (c->rlen == 0) {
            while (n >= 5) {
                int64_t len = check_prefix(c, p);
                if (len < 0) return -1;
                if (n - 5 < (size_t)len) break;
                if (deliver(c, p + 5, (size_t)len)) return -1;
                p += 5 + len;
                n -= 5 + (size_t)len;
            }
            if (n == 0) return 0;
            if (rbuf_append(c, p, n)) goto nomem;
            return 0;
        }
        size_t take;
        if (c->rlen < 5) {
            take = 5 - c->rlen < n ? 5 - c->rlen : n;
        } else {
            size_t want = 5 + (size_t)get_be32(c->rbuf + 1) - c->rlen;
            take = want < n ? want : n;
        }
        if (rbuf_append(c, p, take)) goto nomem;
        p += take;
        n -= take;
        if (c->rlen < 5) continue;
        int64_t len = check_prefix(c, c->rbuf);
        if (len < 0) return -1;
        if (c->rlen == 5 + (size_t)len) {
            c->rlen = 0;
            if (deliver(c, c->rbuf + 5, (size_t)len)) return -1;
        }
    }
    return 0;
nomem:
    c->proto_rc = ERR_NOMEM;
    snprintf(c->proto_msg, sizeof c->proto_msg, "out of memory buffering the reply");
    return -1;
}

/* Unary and bidi modes: keep the bytes; check prefixes as they complete so the buffer never
 * grows beyond the frames the server announced. */
static int feed_keep(GrpcCall *c, const uint8_t *p, size_t n) {
    if (rbuf_append(c, p, n)) {
        c->proto_rc = ERR_NOMEM;
        snprintf(c->proto_msg, sizeof c->proto_msg, "out of memory buffering the reply");
        return -1;
    }
    if (c->mode == CALL_UNARY && c->rlen >= 5) {
        int64_t len = check_prefix(c, c->rbuf);
        if (len < 0) return -1;
        if (c->rlen > 5 + (size_t)len) {
            c->proto_rc = ERR_CORRUPT;
            snprintf(c->proto_msg, sizeof c->proto_msg, "more than one message in a unary reply");
            return -1;
        }
    }
    return 0;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *ud) {
    GrpcCall *c = ud;
    size_t n = size * nmemb;
    if (c->http_status != 200) return n; /* not a gRPC reply (e.g. an HTTP/1.1 404): drop it */
    int rc = c->mode == CALL_STREAM && c->on_msg ? feed_stream(c, (const uint8_t *)data, n)
                                                 : feed_keep(c, (const uint8_t *)data, n);
    return rc ? 0 : n;
}

static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* grpc-message is percent-encoded (gRPC HTTP/2 protocol spec). */
static void percent_decode(char *dst, size_t cap, const char *src, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        int h, l;
        if (src[i] == '%' && i + 2 < n && (h = hexval(src[i + 1])) >= 0 &&
            (l = hexval(src[i + 2])) >= 0) {
            dst[o++] = (char)(h * 16 + l);
            i += 2;
        } else {
            dst[o++] = src[i];
        }
    }
    dst[o] = 0;
}

static size_t header_cb(char *data, size_t size, size_t nmemb, void *ud) {
    GrpcCall *c = ud;
    size_t n = size * nmemb;
    size_t len = n;
    while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == '\n'))
        len--;
    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        const char *sp = memchr(data, ' ', len);
        if (sp) c->http_status = strtol(sp + 1, NULL, 10);
        return n;
    }
    const char *colon = memchr(data, ':', len);
    if (!colon) return n;
    size_t nlen = (size_t)(colon - data);
    const char *v = colon + 1;
    size_t vlen = len - nlen - 1;
    while (vlen > 0 && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        vlen--;
    if (nlen == 11 && strncasecmp(data, "grpc-status", 11) == 0) {
        char tmp[16];
        size_t k = vlen < sizeof tmp - 1 ? vlen : sizeof tmp - 1;
        memcpy(tmp, v, k);
        tmp[k] = 0;
        char *end;
        long s = strtol(tmp, &end, 10);
        c->grpc_status = (end != tmp && s >= 0 && s < 1000) ? (int)s : 2 /* UNKNOWN */;
    } else if (nlen == 12 && strncasecmp(data, "grpc-message", 12) == 0) {
        percent_decode(c->grpc_message, sizeof c->grpc_message, v, vlen);
    }
    return n;
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *ud) {
    GrpcCall *c = ud;
    size_t cap = size * nitems;
    if (c->soff >= c->slen) {
        c->soff = c->slen = 0;
        c->upload_paused = 1;
        return CURL_READFUNC_PAUSE;
    }
    size_t n = c->slen - c->soff;
    if (n > cap) n = cap;
    memcpy(buf, c->sbuf + c->soff, n);
    c->soff += n;
    return n;
}

/* ---- calls ---- */

static void call_free(GrpcCall *c) {
    if (!c) return;
    if (c->easy) curl_easy_cleanup(c->easy);
    free(c->rbuf);
    free(c->sbuf);
    free(c);
}

/* libcurl's progress callback: after SIGTERM/SIGINT a call that moves no byte for
 * STOP_STALL_MS (an etcd that accepts and never answers) is aborted; one that still moves (the
 * last delta's watch drain) goes on under its own timeout (timeutil.h stop_stall_abort). */
static int xferinfo_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    GrpcCall *c = ud;
    (void)dltotal, (void)ultotal;
    return stop_stall_abort(&c->stall, (int64_t)dlnow + (int64_t)ulnow);
}

/* Options that never change for the life of the easy handle. */
static GrpcCall *call_new(GrpcChannel *ch) {
    GrpcCall *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ch = ch;
    c->easy = curl_easy_init();
    if (!c->easy) {
        free(c);
        return NULL;
    }
    CURL *h = c->easy;
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_PRIVATE, c);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
    curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ch->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (ch->cacert) curl_easy_setopt(h, CURLOPT_CAINFO, ch->cacert);
    if (ch->cert) curl_easy_setopt(h, CURLOPT_SSLCERT, ch->cert);
    if (ch->key) curl_easy_setopt(h, CURLOPT_SSLKEY, ch->key);
    if (ch->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return c;
}

/* Response state back to "nothing received" (before each attempt). */
static void call_reset(GrpcCall *c) {
    c->rlen = 0;
    c->delivered = 0;
    c->cb_rc = c->proto_rc = 0;
    c->proto_msg[0] = 0;
    c->http_status = 0;
    c->grpc_status = -1;
    c->grpc_message[0] = 0;
    c->done = 0;
    c->reuse_mode = c->h1_fallback = 0;
    c->result = CURLE_OK;
    c->errbuf[0] = 0;
    memset(&c->stall, 0, sizeof c->stall);
}

/* Per-call options and state reset. 0 or ERR_INVALID (URL too long). */
static int call_prepare(GrpcCall *c, const char *endpoint, const char *method, CallMode mode,
                        const uint8_t *body, size_t body_len, int64_t timeout_ms) {
    size_t elen = strlen(endpoint);
    while (elen > 0 && endpoint[elen - 1] == '/')
        elen--;
    int n = snprintf(c->url, sizeof c->url, "%.*s%s", (int)elen, endpoint, method);
    if (n < 0 || (size_t)n >= sizeof c->url)
        return err_set(ERR_INVALID, "etcd %s %s: URL too long", endpoint, method);
    c->ep_len = (int)elen;
    c->mode = mode;
    c->on_msg = NULL;
    c->ctx = NULL;
    call_reset(c);
    CURL *h = c->easy;
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->ch->headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? (long)timeout_ms : 0L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_READFUNCTION, NULL);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, (const char *)body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else {
        /* bidi: no size, body streamed from read_cb and never ended by us */
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
        curl_easy_setopt(h, CURLOPT_READDATA, c);
    }
    return 0;
}

/* ---- h2c connection reuse (libcurl < 7.89 workaround) ---- */

static int call_is_h2c(const GrpcCall *c) {
    return strncasecmp(c->url, "https://", 8) != 0;
}

static int live_find(const GrpcChannel *ch, const GrpcCall *c) {
    for (size_t i = 0; i < ch->n_live; i++)
        if ((int)strlen(ch->live[i]) == c->ep_len &&
            !strncmp(ch->live[i], c->url, (size_t)c->ep_len))
            return (int)i;
    return -1;
}

static void live_set(GrpcChannel *ch, const GrpcCall *c, int on) {
    int i = live_find(ch, c);
    if (!on && i >= 0) {
        free(ch->live[i]);
        ch->live[i] = ch->live[--ch->n_live];
    } else if (on && i < 0) {
        if (ch->n_live == ch->live_cap) {
            size_t cap = ch->live_cap ? ch->live_cap * 2 : 4;
            char **p = realloc(ch->live, cap * sizeof *p);
            if (!p) return; /* only costs a prior-knowledge attempt later */
            ch->live = p;
            ch->live_cap = cap;
        }
        char *e = strndup(c->url, (size_t)c->ep_len);
        if (e) ch->live[ch->n_live++] = e;
    }
}

/* Chooses the HTTP version for the next attempt of c. force_pk: open a new h2c connection. */
static void call_version(GrpcChannel *ch, GrpcCall *c, int force_pk) {
    long v = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    c->reuse_mode = 0;
    if (!call_is_h2c(c)) {
        v = CURL_HTTP_VERSION_2TLS;
    } else if (ch->pk_reuse_broken && !force_pk && live_find(ch, c) >= 0) {
        v = CURL_HTTP_VERSION_2_0;
        c->reuse_mode = 1;
    }
    curl_easy_setopt(c->easy, CURLOPT_HTTP_VERSION, v);
}

/* After an attempt: remember whether an h2c connection is open; flag an HTTP/1.1 fallback. */
static void call_after(GrpcChannel *ch, GrpcCall *c) {
    if (!ch->pk_reuse_broken || !call_is_h2c(c)) return;
    long ver = 0;
    curl_easy_getinfo(c->easy, CURLINFO_HTTP_VERSION, &ver);
    if (ver == CURL_HTTP_VERSION_2_0 && (c->result == CURLE_OK || c->grpc_status >= 0)) {
        live_set(ch, c, 1);
        return;
    }
    /* The connection may still be cached (a stream reset, a timeout): a prior-knowledge
     * transfer must not meet it, so the caller closes the multi's connections. */
    live_set(ch, c, 0);
    ch->drop_conns = 1;
    if (c->reuse_mode && ver != 0 && ver < CURL_HTTP_VERSION_2_0 && c->grpc_status < 0 &&
        c->delivered == 0)
        c->h1_fallback = 1;
}

static int is_connect_error(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return 1;
    default:
        return 0;
    }
}

/* What to do about a transport failure that has a usual cause, appended to the message: an
 * untrusted certificate, or a plain/TLS mismatch between the endpoint's scheme and the server.
 * "" when there is no hint. The flag names are etcdbrctl's (this layer's only caller). */
static const char *transport_hint(const GrpcCall *c) {
    if (c->result == CURLE_PEER_FAILED_VERIFICATION)
        return c->ch->cacert
                   ? " (etcd's certificate does not verify against --cacert: give the CA that "
                     "signed it, or --insecure-skip-tls-verify to skip the check)"
                   : " (etcd's certificate is not trusted: give the CA that signed it with "
                     "--cacert, or --insecure-skip-tls-verify to skip the check)";
    /* h2c to a TLS port: the server's TLS alert or its close (under load, a reset while curl
     * still sends) is no HTTP/2 frame. Only on a connection opened for this call: one that
     * served calls before speaks HTTP/2 (an etcd dying mid-call gives the same errors there). */
    long new_conns = 0;
    curl_easy_getinfo(c->easy, CURLINFO_NUM_CONNECTS, &new_conns);
    if (call_is_h2c(c) && new_conns > 0 && c->http_status == 0 && c->grpc_status < 0 &&
        c->delivered == 0 &&
        (c->result == CURLE_PARTIAL_FILE || c->result == CURLE_HTTP2 ||
         c->result == CURLE_HTTP2_STREAM || c->result == CURLE_GOT_NOTHING ||
         c->result == CURLE_RECV_ERROR || c->result == CURLE_SEND_ERROR ||
         c->result == CURLE_WEIRD_SERVER_REPLY))
        return " (the endpoint probably speaks TLS: use https:// and --cacert)";
    /* etcd with --client-cert-auth answers a handshake without a client certificate with an
     * alert */
    if (!call_is_h2c(c) && !c->ch->cert &&
        (strstr(c->errbuf, "alert bad certificate") ||
         strstr(c->errbuf, "alert certificate required")))
        return " (etcd wants a client certificate: give --cert and --key)";
    /* TLS to a plain port: OpenSSL reads the server's reply as a bad record, or etcd's
     * listener drops the ClientHello it cannot read (a close or reset before the handshake
     * completed, no alert) */
    if (!call_is_h2c(c)) {
        if (c->result == CURLE_SSL_CONNECT_ERROR && (strstr(c->errbuf, "wrong version number") ||
                                                     strstr(c->errbuf, "packet length too long")))
            return " (the endpoint probably speaks plain HTTP/2: use http://)";
        curl_off_t tls = 0;
        curl_easy_getinfo(c->easy, CURLINFO_APPCONNECT_TIME_T, &tls);
        if (tls == 0 && !strstr(c->errbuf, "alert") &&
            (c->result == CURLE_SSL_CONNECT_ERROR || c->result == CURLE_RECV_ERROR ||
             c->result == CURLE_SEND_ERROR || c->result == CURLE_GOT_NOTHING))
            return " (the server closed the connection during the TLS handshake: if the endpoint "
                   "speaks plain HTTP/2, use http://)";
    }
    return "";
}

/* Turns the finished call into a return code, message and res. */
static int call_finish(GrpcCall *c, GrpcResult *res) {
    GrpcResult tmp;
    if (!res) res = &tmp;
    res->status = c->grpc_status;
    res->connect_failed = 0;
    res->transport_error = 0;
    res->message[0] = 0;
    if (c->cb_rc) return c->cb_rc;
    if (c->stall.aborted) {
        snprintf(res->message, sizeof res->message, "stopping");
        return err_set(ERR_CANCELED,
                       "etcd %.*s %s: stopping (SIGTERM/SIGINT): aborted, no answer "
                       "for %d ms",
                       CALL_NAME(c), STOP_STALL_MS);
    }
    if (c->proto_rc) {
        snprintf(res->message, sizeof res->message, "%s", c->proto_msg);
        return err_set(c->proto_rc, "etcd %.*s %s: %s", CALL_NAME(c), c->proto_msg);
    }
    if (c->result != CURLE_OK) {
        /* A trailers-only error followed by a reset still carries the server's verdict. */
        if (c->grpc_status > 0) goto grpc_error;
        const char *txt = c->errbuf[0] ? c->errbuf : curl_easy_strerror(c->result);
        snprintf(res->message, sizeof res->message, "%s", txt);
        res->transport_error = 1;
        if (c->result == CURLE_OPERATION_TIMEDOUT) {
            curl_off_t t = 0;
            curl_easy_getinfo(c->easy, CURLINFO_CONNECT_TIME_T, &t);
            res->connect_failed = t == 0;
            return err_set(ERR_TIMEOUT, "etcd %.*s %s: %s", CALL_NAME(c), txt);
        }
        res->connect_failed = is_connect_error(c->result);
        return err_set(ERR_ETCD, "etcd %.*s %s: %s%s", CALL_NAME(c), txt, transport_hint(c));
    }
    if (c->http_status != 200 && c->grpc_status < 0) {
        snprintf(res->message, sizeof res->message, "HTTP status %ld", c->http_status);
        res->transport_error = 1;
        return err_set(ERR_ETCD, "etcd %.*s %s: HTTP status %ld (not a gRPC server?)", CALL_NAME(c),
                       c->http_status);
    }
    if (c->grpc_status < 0) {
        snprintf(res->message, sizeof res->message, "reply without grpc-status");
        res->transport_error = 1;
        return err_set(ERR_ETCD, "etcd %.*s %s: reply ended without grpc-status", CALL_NAME(c));
    }
    if (c->grpc_status != 0) goto grpc_error;
    return 0;
grpc_error:
    snprintf(res->message, sizeof res->message, "%s", c->grpc_message);
    res->status = c->grpc_status;
    return err_set(ERR_ETCD, "etcd %.*s %s: grpc-status %d: %s", CALL_NAME(c), c->grpc_status,
                   c->grpc_message[0] ? c->grpc_message : "(no message)");
}

static void multi_configure(CURLM *m) {
    curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(m, CURLMOPT_MAX_CONCURRENT_STREAMS, MAX_STREAMS_PER_CONN);
}

/* Runs the channel multi until all added calls are done (first names them in the one line
 * logged when that takes over 5 s). 0 or ERR_IO (multi failure).
 * libcurl 7.88 can leave a multiplexed stream's data in its buffers without a wakeup (seen as
 * a full poll timeout with the reply already received), so the poll wait starts short after
 * socket activity and backs off while nothing happens. */
static int multi_run(CURLM *multi, const GrpcCall *first) {
    int running = 1, wait_ms = POLL_MIN_MS;
    WaitNote note;
    wait_note_start(&note);
    while (running) {
        wait_note_check(&note, "etcd %.*s %s to answer", CALL_NAME(first));
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK)
            return err_set(ERR_IO, "grpc: curl_multi_perform: %s", curl_multi_strerror(mc));
        CURLMsg *m;
        int q;
        while ((m = curl_multi_info_read(multi, &q))) {
            if (m->msg != CURLMSG_DONE) continue;
            char *priv = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
            GrpcCall *c = (GrpcCall *)priv;
            if (c) {
                c->done = 1;
                c->result = m->data.result;
            }
        }
        if (!running) break;
        int nfd = 0;
        mc = curl_multi_poll(multi, NULL, 0, wait_ms, &nfd);
        if (mc != CURLM_OK)
            return err_set(ERR_IO, "grpc: curl_multi_poll: %s", curl_multi_strerror(mc));
        wait_ms = nfd > 0 ? POLL_MIN_MS : (wait_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : wait_ms * 2);
    }
    return 0;
}

/* ---- channel ---- */

static char *dup_or_null(const char *s, int *fail) {
    if (!s || !*s) return NULL;
    char *d = strdup(s);
    if (!d) *fail = 1;
    return d;
}

static int build_headers(GrpcChannel *ch) {
    struct curl_slist *h = NULL, *t;
    if (!(t = curl_slist_append(h, "Content-Type: application/grpc"))) goto fail;
    h = t;
    if (!(t = curl_slist_append(h, "TE: trailers"))) goto fail;
    h = t;
    /* no "Expect: 100-continue" on big POSTs and no default Accept header for etcd to decode */
    if (!(t = curl_slist_append(h, "Expect:"))) goto fail;
    h = t;
    if (!(t = curl_slist_append(h, "Accept:"))) goto fail;
    h = t;
    if (ch->token) {
        size_t n = strlen(ch->token) + 8;
        char *line = malloc(n);
        if (!line) goto fail;
        snprintf(line, n, "token: %s", ch->token);
        t = curl_slist_append(h, line);
        explicit_bzero(line, n);
        free(line);
        if (!t) goto fail;
        h = t;
    }
    for (t = ch->headers; t; t = t->next)
        explicit_bzero(t->data, strlen(t->data));
    curl_slist_free_all(ch->headers);
    ch->headers = h;
    return 0;
fail:
    curl_slist_free_all(h);
    return err_set(ERR_NOMEM, "grpc: out of memory building headers");
}

int grpc_channel_new(const GrpcChannelConfig *cfg, GrpcChannel **out) {
    int rc = ERR_NOMEM, fail = 0;
    *out = NULL;
    GrpcChannel *ch = calloc(1, sizeof *ch);
    if (!ch) return err_set(ERR_NOMEM, "grpc: out of memory");
    ch->cacert = dup_or_null(cfg->cacert, &fail);
    ch->cert = dup_or_null(cfg->cert, &fail);
    ch->key = dup_or_null(cfg->key, &fail);
    ch->insecure = cfg->insecure_skip_tls_verify != 0;
    ch->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? (long)cfg->connect_timeout_ms : 30000L;
    if (fail) {
        rc = err_set(ERR_NOMEM, "grpc: out of memory");
        goto done;
    }
    if ((rc = build_headers(ch))) goto done;
    ch->multi = curl_multi_init();
    ch->pool = calloc(1, sizeof *ch->pool);
    ch->todo = calloc(1, sizeof *ch->todo);
    if (!ch->multi || !ch->pool || !ch->todo || !(ch->pool[0] = call_new(ch))) {
        rc = err_set(ERR_IO, "grpc: libcurl initialisation failed");
        goto done;
    }
    ch->npool = 1;
    ch->pk_reuse_broken = curl_version_info(CURLVERSION_NOW)->version_num < 0x075900;
    curl_easy_setopt(ch->pool[0]->easy, CURLOPT_BUFFERSIZE, SNAPSHOT_BUFFER_SIZE);
    multi_configure(ch->multi);
    *out = ch;
    ch = NULL;
    rc = 0;
done:
    grpc_channel_free(ch);
    return rc;
}

void grpc_channel_free(GrpcChannel *ch) {
    if (!ch) return;
    for (size_t i = 0; i < ch->npool; i++)
        call_free(ch->pool[i]);
    free(ch->pool);
    free(ch->todo);
    for (size_t i = 0; i < ch->n_live; i++)
        free(ch->live[i]);
    free(ch->live);
    if (ch->multi) curl_multi_cleanup(ch->multi);
    if (ch->token) {
        explicit_bzero(ch->token, strlen(ch->token));
        free(ch->token);
    }
    for (struct curl_slist *t = ch->headers; t; t = t->next)
        explicit_bzero(t->data, strlen(t->data));
    curl_slist_free_all(ch->headers);
    free(ch->cacert);
    free(ch->cert);
    free(ch->key);
    if (ch->frame.data) explicit_bzero(ch->frame.data, ch->frame.cap);
    grpc_frame_free(&ch->frame);
    free(ch);
}

int grpc_channel_set_token(GrpcChannel *ch, const char *token) {
    char *t = NULL;
    if (token && !(t = strdup(token))) return err_set(ERR_NOMEM, "grpc: out of memory");
    if (ch->token) {
        explicit_bzero(ch->token, strlen(ch->token));
        free(ch->token);
    }
    ch->token = t;
    return build_headers(ch);
}

/* Runs calls[0..n) together on the channel multi (one attempt each). */
static int run_calls(GrpcChannel *ch, GrpcCall **calls, size_t n) {
    size_t added = 0;
    int rc = 0;
    for (; added < n; added++) {
        CURLMcode mc = curl_multi_add_handle(ch->multi, calls[added]->easy);
        if (mc != CURLM_OK) {
            GrpcCall *c = calls[added];
            rc = err_set(ERR_IO, "etcd %.*s %s: curl_multi_add_handle: %s", CALL_NAME(c),
                         curl_multi_strerror(mc));
            break;
        }
    }
    if (!rc) rc = multi_run(ch->multi, calls[0]);
    for (size_t i = 0; i < added; i++)
        curl_multi_remove_handle(ch->multi, calls[i]->easy);
    for (size_t i = 0; i < added; i++)
        call_after(ch, calls[i]);
    if (ch->drop_conns) {
        /* closing the multi closes its cached connections; the easy handles are reusable */
        CURLM *m = curl_multi_init();
        if (m) {
            curl_multi_cleanup(ch->multi);
            ch->multi = m;
            multi_configure(m);
            for (size_t i = 0; i < ch->n_live; i++)
                free(ch->live[i]);
            ch->n_live = 0;
        }
        ch->drop_conns = 0;
    }
    return rc;
}

/* Clears *res (when given) for a new call: no message, no status yet (-1). */
static void result_reset(GrpcResult *res) {
    if (!res) return;
    memset(res, 0, sizeof *res);
    res->status = -1;
}

/* Packs req into the channel's frame and prepares the channel's first call to send it alone.
 * 0 or ERR_NOMEM / ERR_INVALID (the message is named by endpoint and method). */
static int single_prepare(GrpcChannel *ch, const char *endpoint, const char *method, CallMode mode,
                          const ProtobufCMessage *req, int64_t timeout_ms) {
    int rc = grpc_frame_pack(&ch->frame, req);
    if (rc) return err_wrap(rc, "etcd %s %s", endpoint, method);
    return call_prepare(ch->pool[0], endpoint, method, mode, ch->frame.data, ch->frame.len,
                        timeout_ms);
}

/* Runs one call alone, redoing it with prior knowledge after an HTTP/1.1 fallback. */
static int run_single(GrpcChannel *ch, GrpcCall *c, GrpcResult *res) {
    call_version(ch, c, 0);
    int rc = run_calls(ch, &c, 1);
    if (rc) return rc;
    if (c->h1_fallback) {
        call_reset(c);
        call_version(ch, c, 1);
        if ((rc = run_calls(ch, &c, 1))) return rc;
    }
    return call_finish(c, res);
}

int grpc_unary(GrpcChannel *ch, const char *endpoint, const char *method,
               const ProtobufCMessage *req, const ProtobufCMessageDescriptor *resp_desc,
               int64_t timeout_ms, ProtobufCMessage **resp_out, GrpcResult *res) {
    GrpcCall *c = ch->pool[0];
    *resp_out = NULL;
    result_reset(res);
    int rc = single_prepare(ch, endpoint, method, CALL_UNARY, req, timeout_ms);
    if (rc) return rc;
    if ((rc = run_single(ch, c, res))) return rc;
    if (c->rlen < 5 || c->rlen != 5 + (size_t)get_be32(c->rbuf + 1)) {
        if (res) snprintf(res->message, sizeof res->message, "no complete reply message");
        return err_set(ERR_CORRUPT, "etcd %s %s: grpc-status 0 but no complete reply message",
                       endpoint, method);
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(resp_desc, NULL, c->rlen - 5, c->rbuf + 5);
    if (!m) {
        if (res) snprintf(res->message, sizeof res->message, "undecodable reply");
        return err_set(ERR_CORRUPT, "etcd %s %s: cannot decode %s reply (%zu bytes)", endpoint,
                       method, resp_desc->name, c->rlen - 5);
    }
    /* large replies should not pin memory in the reused handle */
    if (c->rcap > (4u << 20)) {
        free(c->rbuf);
        c->rbuf = NULL;
        c->rcap = c->rlen = 0;
    }
    *resp_out = m;
    return 0;
}

int grpc_server_stream(GrpcChannel *ch, const char *endpoint, const char *method,
                       const ProtobufCMessage *req, int64_t timeout_ms,
                       int (*on_msg)(void *ctx, const uint8_t *msg, size_t len), void *ctx,
                       size_t *delivered, GrpcResult *res) {
    GrpcCall *c = ch->pool[0];
    if (delivered) *delivered = 0;
    result_reset(res);
    int rc = single_prepare(ch, endpoint, method, CALL_STREAM, req, timeout_ms);
    if (rc) return rc;
    c->on_msg = on_msg;
    c->ctx = ctx;
    rc = run_single(ch, c, res);
    if (delivered) *delivered = c->delivered;
    if (rc == 0 && c->rlen != 0) {
        if (res) snprintf(res->message, sizeof res->message, "truncated message");
        rc = err_set(ERR_CORRUPT, "etcd %s %s: stream ended inside a message (%zu bytes left)",
                     endpoint, method, c->rlen);
    }
    return rc;
}

int grpc_unary_many(GrpcChannel *ch, const char *endpoint, const char *method,
                    const GrpcFrame *frames, size_t n, int64_t timeout_ms,
                    int (*on_reply)(void *ctx, size_t i, const uint8_t *msg, size_t len), void *ctx,
                    size_t *n_ok, GrpcResult *res) {
    int rc = 0;
    size_t ok = 0, n_todo = n;
    GrpcCall **todo;
    if (n_ok) *n_ok = 0;
    result_reset(res);
    if (n == 0) return 0;
    if (n > ch->npool) {
        GrpcCall **t = realloc(ch->todo, n * sizeof *t);
        if (!t) return err_set(ERR_NOMEM, "etcd %s %s: out of memory", endpoint, method);
        ch->todo = t;
        GrpcCall **p = realloc(ch->pool, n * sizeof *p);
        if (!p) return err_set(ERR_NOMEM, "etcd %s %s: out of memory", endpoint, method);
        ch->pool = p;
        while (ch->npool < n) {
            if (!(ch->pool[ch->npool] = call_new(ch)))
                return err_set(ERR_NOMEM, "etcd %s %s: out of memory", endpoint, method);
            ch->npool++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rc = call_prepare(ch->pool[i], endpoint, method, CALL_UNARY, frames[i].data, frames[i].len,
                          timeout_ms);
        if (rc) goto done;
    }
    /* calls still to run; an attempt that fell back to HTTP/1.1 reached no gRPC server, so it
     * is simply run again */
    todo = ch->todo;
    memcpy(todo, ch->pool, n * sizeof *todo);
    for (int attempt = 0; attempt < 2 && n_todo > 0; attempt++) {
        size_t first = 0;
        if (ch->pk_reuse_broken && call_is_h2c(todo[0]) && live_find(ch, todo[0]) < 0) {
            /* open the h2c connection with one call, then multiplex the rest over it */
            call_reset(todo[0]);
            call_version(ch, todo[0], 1);
            if ((rc = run_calls(ch, todo, 1))) goto done;
            first = 1;
        }
        for (size_t i = first; i < n_todo; i++) {
            call_reset(todo[i]);
            call_version(ch, todo[i], 0);
        }
        if (n_todo > first && (rc = run_calls(ch, todo + first, n_todo - first))) goto done;
        size_t k = 0;
        for (size_t i = 0; i < n_todo; i++)
            if (todo[i]->h1_fallback) todo[k++] = todo[i];
        n_todo = k;
    }
    /* report the lowest failing index; keep going to count successes */
    char first[1024] = "";
    for (size_t i = 0; i < n; i++) {
        GrpcCall *c = ch->pool[i];
        GrpcResult r;
        int crc = call_finish(c, &r);
        if (crc == 0 && (c->rlen < 5 || c->rlen != 5 + (size_t)get_be32(c->rbuf + 1))) {
            crc = err_set(ERR_CORRUPT, "etcd %.*s %s: grpc-status 0 but no complete reply message",
                          CALL_NAME(c));
            snprintf(r.message, sizeof r.message, "no complete reply message");
        }
        if (crc == 0 && on_reply) crc = on_reply(ctx, i, c->rbuf + 5, c->rlen - 5);
        if (crc == 0) {
            ok++;
            continue;
        }
        if (rc == 0) {
            rc = crc;
            if (res) *res = r;
            snprintf(first, sizeof first, "call %zu of %zu: %s", i + 1, n, err_msg());
        }
    }
    if (rc) err_set(rc, "%s", first);
done:
    if (n_ok) *n_ok = ok;
    return rc;
}

/* ---- bidi stream ---- */

int grpc_stream_open(GrpcChannel *ch, const char *endpoint, const char *method, GrpcStream **out) {
    int rc;
    *out = NULL;
    GrpcStream *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "etcd %s %s: out of memory", endpoint, method);
    s->multi = curl_multi_init();
    s->call = call_new(ch);
    if (!s->multi || !s->call) {
        rc = err_set(ERR_IO, "etcd %s %s: libcurl initialisation failed", endpoint, method);
        goto done;
    }
    if ((rc = call_prepare(s->call, endpoint, method, CALL_STREAM, NULL, 0, 0))) goto done;
    call_version(ch, s->call, 1); /* a fresh connection of its own */
    for (struct curl_slist *t = ch->headers; t; t = t->next) {
        struct curl_slist *n = curl_slist_append(s->headers, t->data);
        if (!n) {
            rc = err_set(ERR_NOMEM, "etcd %s %s: out of memory", endpoint, method);
            goto done;
        }
        s->headers = n;
    }
    curl_easy_setopt(s->call->easy, CURLOPT_HTTPHEADER, s->headers);
    s->call->ch = NULL; /* nothing after this point may reach the channel */
    curl_easy_setopt(s->call->easy, CURLOPT_TIMEOUT_MS, 0L);
    CURLMcode mc = curl_multi_add_handle(s->multi, s->call->easy);
    if (mc != CURLM_OK) {
        rc = err_set(ERR_IO, "etcd %s %s: curl_multi_add_handle: %s", endpoint, method,
                     curl_multi_strerror(mc));
        goto done;
    }
    s->added = 1;
    *out = s;
    s = NULL;
    rc = 0;
done:
    grpc_stream_close(s);
    return rc;
}

int grpc_stream_send(GrpcStream *s, const ProtobufCMessage *m) {
    GrpcCall *c = s->call;
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > GRPC_MAX_FRAME)
        return err_set(ERR_INVALID, "etcd %.*s %s: request too big", CALL_NAME(c));
    /* drop what was already sent */
    if (c->soff > 0) {
        memmove(c->sbuf, c->sbuf + c->soff, c->slen - c->soff);
        c->slen -= c->soff;
        c->soff = 0;
    }
    if (c->scap - c->slen < n + 5) {
        size_t cap = c->scap ? c->scap : 256;
        while (cap - c->slen < n + 5)
            cap *= 2;
        uint8_t *p = realloc(c->sbuf, cap);
        if (!p) return err_set(ERR_NOMEM, "etcd %.*s %s: out of memory", CALL_NAME(c));
        c->sbuf = p;
        c->scap = cap;
    }
    uint8_t *f = c->sbuf + c->slen;
    f[0] = 0;
    put_be32(f + 1, (uint32_t)n);
    protobuf_c_message_pack(m, f + 5);
    c->slen += n + 5;
    if (c->upload_paused) {
        c->upload_paused = 0;
        curl_easy_pause(c->easy, CURLPAUSE_CONT);
    }
    return 0;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A complete frame at the start of rbuf? Returns its length, -1 if incomplete, -2 if bad. */
static int64_t stream_frame(GrpcCall *c) {
    if (c->rlen < 5) return -1;
    int64_t len = check_prefix(c, c->rbuf);
    if (len < 0) return -2;
    return c->rlen - 5 >= (size_t)len ? len : -1;
}

int grpc_stream_recv(GrpcStream *s, int timeout_ms, const uint8_t **msg, size_t *len, int *got,
                     GrpcResult *res) {
    GrpcCall *c = s->call;
    *got = 0;
    result_reset(res);
    if (s->consumed) {
        memmove(c->rbuf, c->rbuf + s->consumed, c->rlen - s->consumed);
        c->rlen -= s->consumed;
        s->consumed = 0;
    }
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int64_t flen = stream_frame(c);
        if (flen == -2) return err_set(ERR_CORRUPT, "etcd %.*s %s: %s", CALL_NAME(c), c->proto_msg);
        if (flen >= 0) {
            *msg = c->rbuf + 5;
            *len = (size_t)flen;
            s->consumed = 5 + (size_t)flen;
            *got = 1;
            return 0;
        }
        if (c->done) {
            int rc = call_finish(c, res);
            if (rc) return rc;
            if (res) snprintf(res->message, sizeof res->message, "stream ended");
            return err_set(ERR_ETCD, "etcd %.*s %s: stream ended by the server (grpc-status 0)",
                           CALL_NAME(c));
        }
        CURLMcode mc = curlmulti_step(s->multi, NULL, &c->done, &c->result);
        if (mc != CURLM_OK)
            return err_set(ERR_IO, "etcd %.*s %s: curl_multi_perform: %s", CALL_NAME(c),
                           curl_multi_strerror(mc));
        if (stream_frame(c) != -1 || c->done) continue;
        int64_t left = deadline - now_ms();
        if (left <= 0) return 0;
        mc = curlmulti_poll(s->multi, left); /* short: xferinfo_cb runs soon after a stop */
        if (mc != CURLM_OK)
            return err_set(ERR_IO, "etcd %.*s %s: curl_multi_poll: %s", CALL_NAME(c),
                           curl_multi_strerror(mc));
    }
}

void grpc_stream_close(GrpcStream *s) {
    if (!s) return;
    if (s->added) curl_multi_remove_handle(s->multi, s->call->easy);
    call_free(s->call);
    if (s->multi) curl_multi_cleanup(s->multi);
    for (struct curl_slist *t = s->headers; t; t = t->next)
        explicit_bzero(t->data, strlen(t->data));
    curl_slist_free_all(s->headers);
    free(s);
}
