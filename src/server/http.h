/* http: a small HTTP/1.1 server over libmicrohttpd, bounded under hostile or careless callers
 * (docs/server.md, "Connections and limits"). One event-loop thread (epoll, else poll) holds every
 * connection; requests that may block (the caller says which, HttpServerConfig.inline_ok) run on
 * a bounded pool of worker threads while their connection is suspended, so a slow request (a full
 * snapshot) never delays a quick one (/healthz). HTTPS when a certificate and key are given.
 * The handler sees the method, path, query and headers (copied out of the connection, so it may
 * run on any thread); it fills an HttpResponse. */
#ifndef ETCDBR_HTTP_H
#define ETCDBR_HTTP_H

#include "auth_token.h"

#include <stddef.h>
#include <stdint.h>

/* Limits (see docs/server.md). Connections open at once, all clients together: lowered to what
 * RLIMIT_NOFILE allows (its soft limit is raised to the hard one first), with a warning. */
#define HTTP_MAX_CONNECTIONS 4096u
/* Connections open at once from one address: 3/4 of the connection limit, so that one client
 * cannot take every slot and probes from another address still get in. */
#define HTTP_PER_IP_NUM 3u
#define HTTP_PER_IP_DEN 4u
/* Seconds without a byte received or sent before a connection is closed (libmicrohttpd's idle
 * timeout, which every byte restarts). */
#define HTTP_IDLE_TIMEOUT_S 30u
/* Seconds from accepting a connection (TLS handshake included) until its first request has been
 * received whole (headers and body): a client sending a byte now and then (slowloris) is closed
 * then, although each byte restarts the idle timeout. A kept-alive connection's next request
 * must be whole HTTP_IDLE_TIMEOUT_S after the previous answer was sent. */
#define HTTP_REQUEST_TIMEOUT_S 15u
/* Seconds to send an answer once it is ready. */
#define HTTP_SEND_TIMEOUT_S 60u
/* Bytes of memory per connection for its request line, headers and answer headers (libmicrohttpd's
 * per-connection pool): a longer request is answered 431 or closed. */
#define HTTP_CONNECTION_MEMORY 32768u
/* The API takes no request bodies: one longer than this is refused (413, or the connection is
 * closed when its length was not announced). */
#define HTTP_MAX_BODY 65536u
/* Worker threads for requests that may block (started when needed), and requests waiting for
 * one; more are answered 503 at once. */
#define HTTP_WORKERS 32u
#define HTTP_MAX_QUEUED 256u

typedef struct HttpRequest HttpRequest;

/* Method ("GET"), path ("/healthz"); borrowed for the handler call. */
const char *http_request_method(const HttpRequest *r);
const char *http_request_path(const HttpRequest *r);
/* Query argument value or NULL (borrowed; the first one of that name). */
const char *http_request_query(const HttpRequest *r, const char *name);

/* Request header value or NULL (borrowed; name case-insensitive). */
const char *http_request_header(const HttpRequest *r, const char *name);

/* The query string rebuilt from the parsed arguments, in their order, percent-encoded (RFC 3986
 * unreserved characters kept), with its leading '?' ("" without arguments), into buf of cap
 * bytes. 0, or ERR_INVALID when it does not fit. */
int http_request_query_string(const HttpRequest *r, char *buf, size_t cap);

typedef struct HttpResponse {
    int status;               /* HTTP status code */
    const char *content_type; /* static string, default "text/plain; charset=utf-8" */
    char *body;               /* malloc'ed, owned by the server after return; may be NULL */
    size_t body_len;
    const char *allow;            /* for 405: the Allow header value (static) */
    const char *www_authenticate; /* for 401: the WWW-Authenticate header value (static) */
} HttpResponse;

/* Called once per request, on the event-loop thread when inline_ok said so, else on a worker
 * thread; several calls may run at once. */
typedef void (*HttpHandler)(void *ctx, const HttpRequest *req, HttpResponse *resp);

typedef struct HttpServerConfig {
    /* NULL or "": all interfaces, IPv6 and IPv4 on one dual-stack socket ([::]:port, as Go's
     * ":port"), IPv4 only when the host has no IPv6. Else one IPv4 or IPv6 address ("10.0.0.2",
     * "::1" or "[::1]"). */
    const char *bind_addr;
    int port;                                 /* 0: any free port (http_server_port) */
    const char *cert_pem_path, *key_pem_path; /* both set: HTTPS */
    /* PEM bundle of the CAs whose client certificates are accepted (needs HTTPS), NULL or "":
     * none asked for. Set, a request to any path but open_paths needs a client certificate that
     * verifies against it (chain, validity, key purpose TLS client or none), else 403.
     * libmicrohttpd only asks for the certificate (MHD_OPTION_HTTPS_MEM_TRUST); it is checked
     * per request with GnuTLS, so probes of open_paths without one are answered. */
    const char *client_ca_path;
    /* Bearer token (borrowed, outlives the server), NULL: none. Set, a request to any path but
     * open_paths needs "Authorization: Bearer <token>", else 401 with WWW-Authenticate. */
    AuthToken *token;
    /* NULL-terminated list of paths answered without client certificate or token (borrowed,
     * static); NULL: none. */
    const char *const *open_paths;
    HttpHandler handler;
    void *ctx;
    /* 1 when handler answers req at once (no I/O, no wait but for a short mutex), so it may run
     * on the event-loop thread; 0 sends it to a worker. NULL: every request goes to a worker. */
    int (*inline_ok)(void *ctx, const HttpRequest *req);
} HttpServerConfig;

typedef struct HttpServer HttpServer;

/* Starts listening. 0, or ERR_IO (cannot listen) / ERR_INVALID (bad address, unreadable
 * certificate or key, a client CA bundle without HTTPS or with no PEM certificate in it); the
 * message names the address, port or file. */
int http_server_start(const HttpServerConfig *cfg, HttpServer **out);
/* The port actually bound (useful with port 0). */
int http_server_port(const HttpServer *s);
/* 1 when the server listens on IPv6 (dual stack or an IPv6 address). */
int http_server_ipv6(const HttpServer *s);
/* Stops accepting connections, lets the requests in the workers finish (a handler blocked in a
 * snapshot request delays this until it returns; requests arriving meanwhile on open connections
 * get 503 when they need a worker), then closes every connection and frees s. NULL-safe. */
void http_server_stop(HttpServer *s);

/* Helper for handlers: status, content type (static string, NULL = text/plain) and body copied
 * from text (NULL = empty); replaces a body set before. */
void http_respond(HttpResponse *resp, int status, const char *content_type, const char *text);

#endif
