/* objhttp_parts: the multipart part pool and the part writer over it (objhttp.h): parts of
 * one upload are buffered, handed to up to `parallel` uploader threads, and the first failure
 * is sticky. Memory: (parallel + 1) x part size. */
#include "objhttp.h"
#include "../common/err.h"
#include "../common/mem.h"
#include "../common/log.h"
#include "../common/strbuf.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct Part {
    struct Part *next;
    int num;
    void *data;
    size_t len;
} Part;

struct ObjHttpParts {
    char *what, *key;
    int parallel;
    ObjHttpPartPut put;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    Part *head, *tail;
    int pending; /* queued + uploading */
    int closing;
    int failed; /* first error code, 0 if none */
    char failed_msg[1024];
    pthread_t *workers;
    int n_workers;
};

static void *parts_worker(void *arg) {
    ObjHttpParts *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->closing)
            pthread_cond_wait(&p->cv, &p->mu);
        Part *q = p->head;
        if (!q) break;
        p->head = q->next;
        if (!p->head) p->tail = NULL;
        int skip = p->failed != 0;
        pthread_mutex_unlock(&p->mu);
        int rc = skip ? 0 : p->put(p->ctx, q->num, q->data, q->len);
        free(q->data);
        free(q);
        pthread_mutex_lock(&p->mu);
        if (rc && !p->failed) {
            p->failed = rc;
            snprintf(p->failed_msg, sizeof p->failed_msg, "%s", err_msg());
        }
        p->pending--;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int objhttp_parts_new(const char *what, const char *key, int parallel, ObjHttpPartPut put,
                      void *ctx, ObjHttpParts **out) {
    *out = NULL;
    ObjHttpParts *p = calloc(1, sizeof *p);
    if (!p || !(p->what = strdup(what)) || !(p->key = strdup(key))) {
        if (p) free(p->what);
        free(p);
        return err_set(ERR_NOMEM, "%s write %s: out of memory", what, key);
    }
    p->parallel = parallel > 0 ? parallel : 1;
    p->put = put;
    p->ctx = ctx;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    *out = p;
    return 0;
}

int objhttp_parts_submit(ObjHttpParts *p, int num, void *data, size_t len) {
    Part *q = calloc(1, sizeof *q);
    if (!q) {
        free(data);
        return err_set(ERR_NOMEM, "%s write %s: out of memory", p->what, p->key);
    }
    pthread_mutex_lock(&p->mu);
    if (!p->workers) {
        p->workers = calloc((size_t)p->parallel, sizeof *p->workers);
        for (int i = 0; p->workers && i < p->parallel; i++) {
            if (pthread_create(&p->workers[i], NULL, parts_worker, p) != 0) break;
            p->n_workers++;
        }
    }
    int rc = 0;
    if (p->n_workers == 0) {
        rc = err_set(ERR_IO, "%s write %s: cannot start upload threads", p->what, p->key);
    } else {
        while (p->pending >= p->n_workers && !p->failed)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->failed) rc = err_set(p->failed, "%s", p->failed_msg);
    }
    if (rc) {
        pthread_mutex_unlock(&p->mu);
        free(q);
        free(data);
        return rc;
    }
    q->num = num;
    q->data = data;
    q->len = len;
    if (p->tail)
        p->tail->next = q;
    else
        p->head = q;
    p->tail = q;
    p->pending++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int objhttp_parts_wait(ObjHttpParts *p) {
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->cv, &p->mu);
    int rc = p->failed ? err_set(p->failed, "%s", p->failed_msg) : 0;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int objhttp_parts_pending(ObjHttpParts *p) {
    pthread_mutex_lock(&p->mu);
    int n = p->pending;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void objhttp_parts_free(ObjHttpParts *p, int discard) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->closing = 1;
    if (discard && !p->failed) {
        p->failed = ERR_CANCELED;
        snprintf(p->failed_msg, sizeof p->failed_msg, "aborted");
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->workers[i], NULL);
    for (Part *q = p->head, *n; q; q = n) { /* none: workers drain the queue before they stop */
        n = q->next;
        free(q->data);
        free(q);
    }
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->what);
    free(p->key);
    free(p);
}

/* ---------- the part writer ---------- */

struct ObjHttpPartWriter {
    IoWriter io;
    ObjHttpPartWriterConfig cfg;
    char *what, *key;
    ObjHttpParts *parts; /* NULL until the first part, and after stop */
    unsigned char *cur;  /* the part being filled */
    size_t cur_len, cur_cap;
    int n_parts;
    uint64_t total;
    int failed; /* sticky first failure */
    char failed_msg[1024];
};

static int pw_fail(ObjHttpPartWriter *w, int rc) {
    if (!w->failed) {
        w->failed = rc;
        snprintf(w->failed_msg, sizeof w->failed_msg, "%s", err_msg());
    }
    return rc;
}

int objhttp_pw_failed(ObjHttpPartWriter *w) {
    return w->failed ? err_set(w->failed, "%s", w->failed_msg) : 0;
}

/* Hands the part being filled over as part n_parts + 1. */
static int pw_dispatch(ObjHttpPartWriter *w) {
    int num = w->n_parts + 1, rc;
    if (w->cfg.before && (rc = w->cfg.before(w->cfg.ctx, num))) return pw_fail(w, rc);
    if (!w->parts && (rc = objhttp_parts_new(w->what, w->key, w->cfg.parallel, w->cfg.put,
                                             w->cfg.ctx, &w->parts)))
        return pw_fail(w, rc);
    w->n_parts = num;
    rc = objhttp_parts_submit(w->parts, num, w->cur, w->cur_len);
    w->cur = NULL; /* the pool's now, also on failure */
    w->cur_len = w->cur_cap = 0;
    return rc ? pw_fail(w, rc) : 0;
}

static int pw_write(IoWriter *io, const void *buf, size_t len) {
    ObjHttpPartWriter *w = (ObjHttpPartWriter *)((char *)io - offsetof(ObjHttpPartWriter, io));
    if (w->failed) return objhttp_pw_failed(w);
    const unsigned char *p = buf;
    while (len > 0) {
        /* lazy: a full part goes only once more bytes follow it */
        if (w->cur && w->cur_len == w->cur_cap && pw_dispatch(w)) return objhttp_pw_failed(w);
        if (!w->cur) {
            w->cur_cap = w->cfg.part_size(w->cfg.ctx, w->n_parts + 1);
            if (!w->cur_cap)
                return pw_fail(w, err_set(ERR_INVALID, "%s write %s: part %d has size 0", w->what,
                                          w->key, w->n_parts + 1));
            w->cur = malloc(w->cur_cap);
            if (!w->cur)
                return pw_fail(w, err_set(ERR_NOMEM, "%s write %s: out of memory for a part",
                                          w->what, w->key));
        }
        w->total += mem_fill(w->cur, w->cur_cap, &w->cur_len, &p, &len);
        if (w->cfg.eager && w->cur_len == w->cur_cap && pw_dispatch(w)) return objhttp_pw_failed(w);
    }
    return 0;
}

static int pw_io_finish(IoWriter *io) {
    (void)io;
    return 0; /* the last part goes out in objhttp_pw_finish */
}

static void pw_io_free(IoWriter *io) {
    (void)io; /* owned by the ObjHttpPartWriter */
}

static const IoWriterVt pw_io_vt = {pw_write, pw_io_finish, pw_io_free};

int objhttp_pw_new(const ObjHttpPartWriterConfig *cfg, ObjHttpPartWriter **out) {
    *out = NULL;
    ObjHttpPartWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->what = strdup(cfg->what)) || !(w->key = strdup(cfg->key))) {
        if (w) free(w->what);
        free(w);
        return err_set(ERR_NOMEM, "%s write %s: out of memory", cfg->what, cfg->key);
    }
    w->io.vt = &pw_io_vt;
    w->cfg = *cfg;
    w->cfg.what = w->what;
    w->cfg.key = w->key;
    *out = w;
    return 0;
}

IoWriter *objhttp_pw_io(ObjHttpPartWriter *w) {
    return &w->io;
}

int objhttp_pw_parts(const ObjHttpPartWriter *w) {
    return w->n_parts;
}

uint64_t objhttp_pw_total(const ObjHttpPartWriter *w) {
    return w->total;
}

const void *objhttp_pw_rest(const ObjHttpPartWriter *w, size_t *len) {
    *len = w->cur_len;
    return w->cur ? (const void *)w->cur : "";
}

int objhttp_pw_wait(ObjHttpPartWriter *w) {
    if (w->failed) return objhttp_pw_failed(w);
    int rc = w->parts ? objhttp_parts_wait(w->parts) : 0;
    return rc ? pw_fail(w, rc) : 0;
}

int objhttp_pw_finish(ObjHttpPartWriter *w) {
    if (w->failed) return objhttp_pw_failed(w);
    if (w->cur_len > 0 && pw_dispatch(w)) return objhttp_pw_failed(w);
    return objhttp_pw_wait(w);
}

void objhttp_pw_stop(ObjHttpPartWriter *w, int discard) {
    if (!w) return;
    objhttp_parts_free(w->parts, discard);
    w->parts = NULL;
}

void objhttp_pw_free(ObjHttpPartWriter *w, int discard) {
    if (!w) return;
    objhttp_pw_stop(w, discard);
    free(w->cur);
    free(w->what);
    free(w->key);
    free(w);
}
