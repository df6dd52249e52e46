/* http: a small HTTP/1.1 server over libmicrohttpd (one thread per connection, so a handler may
 * block, e.g. while a full snapshot is taken). HTTPS when a certificate and key are given.
 * The handler sees the method, path and query; it fills an HttpResponse. */
#ifndef ETCDBR_HTTP_H
#define ETCDBR_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct HttpRequest HttpRequest;

/* Method ("GET"), path ("/healthz"); borrowed for the handler call. */
const char *http_request_method(const HttpRequest *r);
const char *http_request_path(const HttpRequest *r);
/* Query argument value or NULL (borrowed). */
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
    const char *allow; /* for 405: the Allow header value (static) */
} HttpResponse;

typedef void (*HttpHandler)(void *ctx, const HttpRequest *req, HttpResponse *resp);

typedef struct HttpServer HttpServer;

/* Listens on port (all interfaces, like the Go tool; bind_addr NULL) or on bind_addr.
 * cert_pem_path/key_pem_path both set: HTTPS. 0 or ERR_IO/ERR_INVALID. */
int http_server_start(const char *bind_addr, int port, const char *cert_pem_path,
                      const char *key_pem_path, HttpHandler handler, void *ctx, HttpServer **out);
/* The port actually bound (useful with port 0). */
int http_server_port(const HttpServer *s);
/* Stops listening, waits for the connection threads (a handler blocked in a snapshot request
 * delays this until it returns) and frees s. NULL-safe. */
void http_server_stop(HttpServer *s);

/* Helper for handlers: status, content type (static string, NULL = text/plain) and body copied
 * from text (NULL = empty); replaces a body set before. */
void http_respond(HttpResponse *resp, int status, const char *content_type, const char *text);

#endif
