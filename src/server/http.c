/* http: see http.h. */
#include "http.h"
#include "../common/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct HttpRequest {
    struct MHD_Connection *conn;
    const char *method, *path;
};

struct HttpServer {
    struct MHD_Daemon *d;
    HttpHandler handler;
    void *ctx;
    char *cert, *key;
    int port;
};

const char *http_request_method(const HttpRequest *r) {
    return r->method;
}
const char *http_request_path(const HttpRequest *r) {
    return r->path;
}
const char *http_request_query(const HttpRequest *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_request_header(const HttpRequest *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

typedef struct {
    char *buf;
    size_t cap, len;
    int overflow;
} QueryBuf;

static void query_put_escaped(QueryBuf *q, const char *v) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        char enc[4] = {(char)*p, 0, 0, 0};
        size_t k = 1;
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.' || *p == '~')) {
            enc[0] = '%';
            enc[1] = hex[*p >> 4];
            enc[2] = hex[*p & 15];
            k = 3;
        }
        if (q->len + k >= q->cap) {
            q->overflow = 1;
            return;
        }
        memcpy(q->buf + q->len, enc, k);
        q->len += k;
    }
}

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value) {
    (void)kind;
    QueryBuf *q = cls;
    if (q->len + 1 >= q->cap) {
        q->overflow = 1;
        return MHD_NO;
    }
    char sep = q->len == 0 ? '?' : '&';
    q->buf[q->len++] = sep;
    query_put_escaped(q, key);
    if (value) {
        if (q->len + 1 >= q->cap) {
            q->overflow = 1;
            return MHD_NO;
        }
        q->buf[q->len++] = '=';
        query_put_escaped(q, value);
    }
    q->buf[q->len] = '\0';
    return q->overflow ? MHD_NO : MHD_YES;
}

int http_request_query_string(const HttpRequest *r, char *buf, size_t cap) {
    if (cap == 0) return err_set(ERR_INVALID, "query buffer of 0 bytes");
    QueryBuf q = {buf, cap, 0, 0};
    buf[0] = '\0';
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
    if (q.overflow) return err_set(ERR_INVALID, "query string longer than %zu bytes", cap - 1);
    return 0;
}

void http_respond(HttpResponse *resp, int status, const char *content_type, const char *text) {
    resp->status = status;
    resp->content_type = content_type;
    free(resp->body);
    resp->body = text ? strdup(text) : NULL;
    resp->body_len = text ? strlen(text) : 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls) {
    (void)version;
    (void)upload;
    HttpServer *s = cls;
    if (*con_cls == NULL) { /* first call: headers only */
        *con_cls = (void *)1;
        return MHD_YES;
    }
    if (*upload_size) { /* request bodies are ignored */
        *upload_size = 0;
        return MHD_YES;
    }
    HttpRequest req = {conn, method, url};
    HttpResponse resp = {.status = 500};
    s->handler(s->ctx, &req, &resp);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(resp.body_len, resp.body ? resp.body : (void *)"",
                                        resp.body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(resp.body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type",
                            resp.content_type ? resp.content_type : "text/plain; charset=utf-8");
    if (resp.allow) MHD_add_response_header(r, "Allow", resp.allow);
    if (s->cert) {
        MHD_add_response_header(r, "Strict-Transport-Security", "max-age=31536000");
        MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'");
    }
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp.status, r);
    MHD_destroy_response(r);
    return ret;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb || cap > (1u << 20)) {
                free(nb ? nb : buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

int http_server_start(const char *bind_addr, int port, const char *cert_pem_path,
                      const char *key_pem_path, HttpHandler handler, void *ctx, HttpServer **out) {
    HttpServer *s = calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "out of memory");
    s->handler = handler;
    s->ctx = ctx;
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (cert_pem_path && *cert_pem_path) {
        s->cert = read_file(cert_pem_path);
        s->key = read_file(key_pem_path);
        if (!s->cert || !s->key) {
            http_server_stop(s);
            return err_set(ERR_INVALID, "cannot read --server-cert %s or --server-key %s",
                           cert_pem_path, key_pem_path ? key_pem_path : "");
        }
        flags |= MHD_USE_TLS;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind_addr && *bind_addr && inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1) {
        http_server_stop(s);
        return err_set(ERR_INVALID, "bad listen address %s", bind_addr);
    }
    if (s->cert)
        s->d =
            MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                             &sa, MHD_OPTION_HTTPS_MEM_CERT, s->cert, MHD_OPTION_HTTPS_MEM_KEY,
                             s->key, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    else
        s->d =
            MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                             &sa, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    if (!s->d) {
        int e = errno;
        http_server_stop(s);
        return err_set(ERR_IO, "cannot listen on port %d: %s", port, strerror(e));
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : port;
    *out = s;
    return 0;
}

int http_server_port(const HttpServer *s) {
    return s->port;
}

void http_server_stop(HttpServer *s) {
    if (!s) return;
    if (s->d) MHD_stop_daemon(s->d);
    free(s->cert);
    free(s->key);
    free(s);
}
