/* objhttp_mpu: the S3-style multipart upload flow (objhttp_mpu.h). */
#include "objhttp_mpu.h"
#include "../common/err.h"
#include "../common/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct MpuWriter {
    StoreDriverWriter base;
    const ObjHttpMpuOps *ops;
    void *drv;
    char *key;
    ObjHttpPartWriter *pw; /* the parts (objhttp.h) */
    char *upload_id;       /* NULL until the first part goes */
    pthread_mutex_t mu;    /* guards etags */
    char **etags;          /* [part - 1], owned; ops->max_parts entries */
} MpuWriter;

static int send_step(MpuWriter *w, ObjHttpMpuCall *c, ObjHttpResponse *resp) {
    c->key = w->key;
    if (c->step != OBJHTTP_MPU_PUT && c->step != OBJHTTP_MPU_INITIATE) c->upload_id = w->upload_id;
    return w->ops->send(w->drv, c, resp);
}

/* Uploads part num (on a pool thread) and keeps its ETag for the complete. */
static int put_part(void *ctx, int num, const void *data, size_t len) {
    MpuWriter *w = ctx;
    const char *what = w->ops->what;
    ObjHttpMpuCall c = {.step = OBJHTTP_MPU_PART, .part = num, .body = data, .len = len};
    ObjHttpResponse resp = {0};
    int rc = send_step(w, &c, &resp);
    char etag[OBJHTTP_ETAG_MAX + 1], ctxs[64];
    snprintf(ctxs, sizeof ctxs, "%s upload part %d", what, num);
    int hr = rc == 0 ? objhttp_response_header_fit(&resp, "ETag", etag, sizeof etag, ctxs) : 0;
    if (hr == ERR_NOT_FOUND)
        rc = err_set(ERR_IO, "%s: no ETag in the answer", ctxs);
    else if (hr != 0)
        rc = hr;
    objhttp_response_clear(&resp);
    if (rc != 0)
        return err_wrap(rc, "%s write %s: upload part %d (%zu bytes)", what, w->key, num, len);
    char *e = strdup(etag);
    if (!e) return err_set(ERR_NOMEM, "%s write %s: out of memory", what, w->key);
    pthread_mutex_lock(&w->mu);
    free(w->etags[num - 1]);
    w->etags[num - 1] = e;
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static int initiate(MpuWriter *w) {
    ObjHttpMpuCall c = {.step = OBJHTTP_MPU_INITIATE};
    ObjHttpResponse resp = {0};
    int rc = send_step(w, &c, &resp);
    if (rc == 0) rc = w->ops->parse_upload_id(resp.body, resp.body_len, &w->upload_id);
    if (rc != 0 && rc != ERR_EXISTS)
        err_wrap(rc, "%s write %s: initiate multipart upload", w->ops->what, w->key);
    objhttp_response_clear(&resp);
    return rc;
}

/* Before part num goes to the uploaders: within the part limit, the upload started on the
 * first. */
static int before_part(void *ctx, int num) {
    MpuWriter *w = ctx;
    if (num > w->ops->max_parts)
        return err_set(ERR_INVALID, "%s write %s: more than %d parts", w->ops->what, w->key,
                       w->ops->max_parts);
    return w->upload_id ? 0 : initiate(w);
}

static size_t part_size(void *ctx, int num) {
    MpuWriter *w = ctx;
    return w->ops->part_size(w->drv, num);
}

/* ABORT: 0, or the failure (logged at warn: the parts stay until the lifecycle rules remove
 * them). An upload that is gone already is not a failure. */
static int abort_upload(MpuWriter *w) {
    if (!w->upload_id) return 0;
    ObjHttpMpuCall c = {.step = OBJHTTP_MPU_ABORT};
    ObjHttpResponse resp = {0};
    int rc = send_step(w, &c, &resp);
    if (rc == ERR_NOT_FOUND) rc = 0;
    if (rc != 0 && (resp.status == 405 || resp.status == 501))
        log_warn("%s: the server does not abort multipart uploads (HTTP %ld): the parts of the "
                 "unfinished upload of %s stay until the bucket's lifecycle rules remove them",
                 w->ops->what, resp.status, w->key);
    else if (rc != 0)
        log_warn("%s: cannot abort the multipart upload of %s (its parts stay until the bucket's "
                 "lifecycle rules remove them): %s",
                 w->ops->what, w->key, err_msg());
    objhttp_response_clear(&resp);
    return rc;
}

static void writer_free(MpuWriter *w) {
    if (!w) return;
    objhttp_pw_free(w->pw, 1);
    for (int i = 0; w->etags && i < w->ops->max_parts; i++)
        free(w->etags[i]);
    free(w->etags);
    free(w->upload_id);
    free(w->key);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static IoWriter *writer_io(StoreDriverWriter *dw) {
    return objhttp_pw_io(((MpuWriter *)dw)->pw);
}

static int put_whole(MpuWriter *w) {
    ObjHttpMpuCall c = {.step = OBJHTTP_MPU_PUT};
    c.body = objhttp_pw_rest(w->pw, &c.len);
    ObjHttpResponse resp = {0};
    int rc = send_step(w, &c, &resp);
    objhttp_response_clear(&resp);
    return rc;
}

static int complete_upload(MpuWriter *w) {
    char what[1200];
    snprintf(what, sizeof what, "%s write %s", w->ops->what, w->key);
    ObjHttpMpuCall c = {.step = OBJHTTP_MPU_COMPLETE, .total = objhttp_pw_total(w->pw)};
    char *xml = NULL;
    int rc = objhttp_complete_xml((const char *const *)w->etags, objhttp_pw_parts(w->pw), what,
                                  &xml, &c.len);
    if (rc) return rc;
    c.body = xml;
    ObjHttpResponse resp = {0};
    rc = send_step(w, &c, &resp);
    if (rc != 0 && rc != ERR_EXISTS)
        err_wrap(rc, "%s: complete multipart upload of %d parts", what, objhttp_pw_parts(w->pw));
    objhttp_response_clear(&resp);
    free(xml);
    return rc;
}

static int writer_commit(StoreDriverWriter *dw) {
    MpuWriter *w = (MpuWriter *)dw;
    int rc = objhttp_pw_failed(w->pw);
    if (rc == 0 && !w->upload_id && objhttp_pw_parts(w->pw) == 0) {
        rc = put_whole(w);
        writer_free(w);
        return rc;
    }
    if (rc == 0) rc = objhttp_pw_finish(w->pw);
    if (rc == 0) rc = complete_upload(w);
    if (rc != 0) {
        /* the object was not stored: an error whatever the abort does (the Go tool reports
         * success when the abort succeeds: docs/go-tool.md §15 item 11) */
        char msg[1536];
        snprintf(msg, sizeof msg, "%s", err_msg());
        objhttp_pw_stop(w->pw, 1);
        int had_upload = w->upload_id != NULL;
        int arc = abort_upload(w);
        if (!had_upload)
            err_set(rc, "%s", msg);
        else if (arc == 0)
            err_set(rc, "%s (the multipart upload was aborted)", msg);
        else
            err_set(rc, "%s (aborting the multipart upload failed too: see the warning)", msg);
    }
    writer_free(w);
    return rc;
}

static void writer_abort(StoreDriverWriter *dw) {
    MpuWriter *w = (MpuWriter *)dw;
    if (!w) return;
    objhttp_pw_stop(w->pw, 1);
    abort_upload(w);
    writer_free(w);
}

static const StoreDriverWriterVt mpu_vt = {writer_io, writer_commit, writer_abort};

int objhttp_mpu_open(const ObjHttpMpuOps *ops, void *drv, int parallel, const char *key,
                     StoreDriverWriter **out) {
    *out = NULL;
    MpuWriter *w = calloc(1, sizeof *w);
    if (!w) return err_set(ERR_NOMEM, "%s write %s: out of memory", ops->what, key);
    pthread_mutex_init(&w->mu, NULL);
    w->base.vt = &mpu_vt;
    w->ops = ops;
    w->drv = drv;
    w->key = strdup(key);
    w->etags = calloc((size_t)ops->max_parts, sizeof *w->etags);
    ObjHttpPartWriterConfig pc = {.what = ops->what,
                                  .key = key,
                                  .parallel = parallel,
                                  .part_size = part_size,
                                  .before = before_part,
                                  .put = put_part,
                                  .ctx = w};
    if (!w->key || !w->etags || objhttp_pw_new(&pc, &w->pw)) {
        writer_free(w);
        return err_set(ERR_NOMEM, "%s write %s: out of memory", ops->what, key);
    }
    *out = &w->base;
    return 0;
}
