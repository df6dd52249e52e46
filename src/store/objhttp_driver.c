/* objhttp_driver: the skeleton the HTTP store drivers share (objhttp_driver.h). */
#include "objhttp_driver.h"
#include "../common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *objhttp_strfmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

int objhttp_cfg_container(const StoreConfig *cfg, const char *what, const char *noun,
                          const char **out) {
    *out =
        cfg->container && cfg->container[0] ? cfg->container : store_env(cfg, "STORAGE_CONTAINER");
    if (!*out)
        return err_set(ERR_INVALID, "%s: no %s (--store-container or %sSTORAGE_CONTAINER)", what,
                       noun, store_env_prefix(cfg));
    return 0;
}

int objhttp_cfg_endpoint(const StoreConfig *cfg, const char *what, char **out) {
    *out = NULL;
    const char *e = cfg->endpoint_override;
    if (!e || !e[0]) return 0;
    if (strncmp(e, "http://", 7) != 0 && strncmp(e, "https://", 8) != 0)
        return err_set(ERR_INVALID,
                       "%s: endpoint override \"%s\" must start with http:// or https://", what, e);
    char *d = strdup(e);
    if (!d) return err_set(ERR_NOMEM, "%s: out of memory", what);
    size_t l = strlen(d);
    while (l > 0 && d[l - 1] == '/')
        d[--l] = '\0';
    *out = d;
    return 0;
}

int objhttp_cfg_client(const StoreConfig *cfg, const char *what, const char *container,
                       ObjHttp **out) {
    ObjHttpConfig hc = {
        .what = what,
        .container = container,
        .ca_file = cfg->ca_file,
        .insecure_skip_verify = cfg->insecure_skip_verify,
        .timeout_ms = cfg->timeout_ms,
    };
    hc.retry = (RetryPolicy)RETRY_POLICY_DEFAULT;
    return objhttp_new(&hc, out);
}

int objhttp_env_int(const char *name, int lo, int hi, int *out) {
    const char *v = objhttp_env(name);
    if (!v) return 0;
    char *ep;
    long x = strtol(v, &ep, 10);
    if (*ep || x < lo || x > hi)
        return err_set(ERR_INVALID, "%s=%s: must be %d to %d", name, v, lo, hi);
    *out = (int)x;
    return 0;
}

char *objhttp_header_line(const char *name, const char *value) {
    return objhttp_strfmt("%s: %s", name, value);
}

int objhttp_hook_header(struct curl_slist **headers, const char *line, const char *what) {
    struct curl_slist *t = curl_slist_append(*headers, line);
    if (!t) return err_set(ERR_NOMEM, "%s: out of memory", what);
    *headers = t;
    return 0;
}

int objhttp_response_length(const ObjHttpResponse *r, int64_t *size) {
    char v[32];
    char *ep = NULL;
    if (!objhttp_response_header(r, "Content-Length", v, sizeof v)) return -1;
    long long x = strtoll(v, &ep, 10);
    if (ep == v || *ep || x < 0) return -1;
    *size = x;
    return 0;
}

size_t objhttp_list_pairs(const char **names, const char **values, size_t n, const char *page_name,
                          int page_size, char page[16], const char *token_name, const char *token) {
    if (page_size > 0) {
        snprintf(page, 16, "%d", page_size);
        names[n] = page_name;
        values[n++] = page;
    }
    if (token) {
        names[n] = token_name;
        values[n++] = token;
    }
    return n;
}

int objhttp_prefix_filter(void *ctx, const char *key, int64_t size) {
    const ObjHttpPrefixFilter *f = ctx;
    if (strncmp(key, f->prefix, strlen(f->prefix)) != 0) return 0;
    return f->cb(f->ctx, key, size);
}

int objhttp_list_pages(const char *what, const char *noun, const char *container,
                       const char *prefix, ObjHttpPageFn page, void *ctx) {
    char *token = NULL;
    int rc = 0;
    ObjHttpListing lg;
    objhttp_listing_begin(&lg, what, container, prefix);
    do {
        rc = objhttp_listing_page(&lg, token);
        if (rc != 0) break;
        char *next = NULL;
        rc = page(ctx, token, &next);
        free(token);
        token = next;
    } while (rc == 0 && token);
    objhttp_listing_end(&lg);
    free(token);
    if (rc == ERR_NOT_FOUND)
        rc = err_set(ERR_IO, "%s list: %s %s does not exist", what, noun, container);
    return rc;
}

int objhttp_list_filtered(const char *what, const char *noun, const char *container, void *drv,
                          int page_size, const char *prefix, StoreDriverListCb cb, void *ctx,
                          ObjHttpPageFn page) {
    ObjHttpListFiltered l = {.drv = drv, .f = {prefix, cb, ctx}};
    if (page_size > 0) snprintf(l.page, sizeof l.page, "%d", page_size);
    return objhttp_list_pages(what, noun, container, prefix, page, &l);
}

int objhttp_driver_init(ObjHttpDriver *d, const StoreDriverVt *vt, const StoreConfig *cfg,
                        const char *noun, int64_t chunk, int parallel) {
    const char *container;
    int rc = objhttp_cfg_container(cfg, vt->name, noun, &container);
    if (rc) return rc;
    d->base.vt = vt;
    d->min_chunk = cfg->min_chunk_size > 0 ? cfg->min_chunk_size : chunk;
    d->parallel = cfg->max_parallel_chunk_uploads > 0 ? cfg->max_parallel_chunk_uploads : parallel;
    d->max_key = OBJHTTP_DRIVER_MAX_KEY;
    d->container = strdup(container);
    d->describe = objhttp_strfmt("%s:%s", vt->name, container);
    if (!d->container || !d->describe) return err_set(ERR_NOMEM, "%s: out of memory", vt->name);
    return 0;
}

int objhttp_driver_client(ObjHttpDriver *d, const StoreConfig *cfg) {
    return objhttp_cfg_client(cfg, d->base.vt->name, d->container, &d->http);
}

const char *objhttp_driver_describe(const StoreDriver *drv) {
    return ((const ObjHttpDriver *)drv)->describe;
}

void objhttp_driver_clear(ObjHttpDriver *d) {
    objhttp_free(d->http);
    free(d->container);
    free(d->describe);
    d->http = NULL;
    d->container = d->describe = NULL;
}

int objhttp_driver_key_ok(const ObjHttpDriver *d, const char *key, const char *op) {
    return objhttp_key_ok(d->base.vt->name, op, key, d->max_key, d->key_no_slash);
}

int objhttp_driver_open_read(StoreDriver *drv, const char *key, uint64_t offset, IoReader **out) {
    ObjHttpDriver *d = (ObjHttpDriver *)drv;
    *out = NULL;
    int rc = objhttp_driver_key_ok(d, key, "read");
    if (rc) return rc;
    ObjHttpDriverReader *a = calloc(1, sizeof *a);
    if (!a) return err_set(ERR_NOMEM, "%s read %s: out of memory", drv->vt->name, key);
    a->d = d;
    return objhttp_resumable_start(&a->r, drv->vt->name, key, offset, d->read_open, NULL, out);
}
