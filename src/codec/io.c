/* io: basic streams over fds and memory; see io.h. */
#include "io.h"
#include "../common/err.h"
#include "../common/phase.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *io_writer_alloc(size_t size, const IoWriterVt *vt, const char *what) {
    IoWriter *w = calloc(1, size);
    if (!w) {
        err_set(ERR_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    w->vt = vt;
    return w;
}

void *io_reader_alloc(size_t size, const IoReaderVt *vt, const char *what) {
    IoReader *r = calloc(1, size);
    if (!r) {
        err_set(ERR_NOMEM, "%s: out of memory", what);
        return NULL;
    }
    r->vt = vt;
    return r;
}

int io_finish_nothing(IoWriter *w) {
    (void)w;
    return 0;
}

void io_writer_free_self(IoWriter *w) {
    free(w);
}

void io_reader_free_self(IoReader *r) {
    free(r);
}

int io_sticky_write(const IoSticky *st, const char *who) {
    if (st->err) return err_set(st->err, "%s: write after an earlier failure", who);
    if (st->finished) return err_set(ERR_INVALID, "%s: write after finish", who);
    return 0;
}

int io_sticky_finish(IoSticky *st, const char *who) {
    if (st->err) return err_set(st->err, "%s: finish after an earlier failure", who);
    if (st->finished) return 1;
    st->finished = 1;
    return 0;
}

int io_read_full(IoReader *r, void *buf, size_t cap, size_t *got) {
    size_t total = 0;
    while (total < cap) {
        size_t n = 0;
        int rc = io_read(r, (char *)buf + total, cap - total, &n);
        if (rc < 0) return rc;
        if (n == 0) break;
        total += n;
    }
    *got = total;
    return 0;
}

int io_copy(IoReader *r, IoWriter *w, uint64_t *copied) {
    return io_copy_tick(r, w, copied, NULL, NULL);
}

int io_copy_tick(IoReader *r, IoWriter *w, uint64_t *copied, int (*tick)(void *ctx, uint64_t n),
                 void *ctx) {
    enum { BUF = 256 * 1024 };
    char *buf = malloc(BUF);
    if (!buf) return err_set(ERR_NOMEM, "io_copy: out of memory");
    uint64_t total = 0;
    int rc = 0;
    for (;;) {
        size_t n = 0;
        rc = io_read(r, buf, BUF, &n);
        if (rc < 0 || n == 0) break;
        rc = io_write(w, buf, n);
        if (rc < 0) break;
        total += n;
        if (tick && (rc = tick(ctx, total)) != 0) break;
    }
    free(buf);
    if (copied) *copied = total;
    return rc;
}

typedef struct {
    IoWriter base;
    int fd;
} FdWriter;

static int fdw_write(IoWriter *w, const void *buf, size_t len) {
    FdWriter *f = (FdWriter *)w;
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(f->fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return err_set(ERR_IO, "write: %s", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
static const IoWriterVt fdw_vt = {fdw_write, io_finish_nothing, io_writer_free_self};

IoWriter *io_fd_writer_new(int fd) {
    FdWriter *f = io_writer_alloc(sizeof *f, &fdw_vt, "fd writer");
    if (!f) return NULL;
    f->fd = fd;
    return &f->base;
}

typedef struct {
    IoReader base;
    int fd;
} FdReader;

int io_fd_read(int fd, const char *what, void *buf, size_t cap, size_t *got) {
    *got = 0;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n < 0) {
            if (errno == EINTR) continue;
            return err_set(ERR_IO, "read%s%s: %s", what ? " " : "", what ? what : "",
                           strerror(errno));
        }
        *got = (size_t)n;
        return 0;
    }
}

static int fdr_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    return io_fd_read(((FdReader *)r)->fd, NULL, buf, cap, got);
}
static const IoReaderVt fdr_vt = {fdr_read, io_reader_free_self};

IoReader *io_fd_reader_new(int fd) {
    FdReader *f = io_reader_alloc(sizeof *f, &fdr_vt, "fd reader");
    if (!f) return NULL;
    f->fd = fd;
    return &f->base;
}

typedef struct {
    IoReader base;
    const char *buf;
    size_t len, pos;
} MemReader;

static int memr_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    MemReader *m = (MemReader *)r;
    size_t n = m->len - m->pos;
    if (n > cap) n = cap;
    memcpy(buf, m->buf + m->pos, n);
    m->pos += n;
    *got = n;
    return 0;
}
static const IoReaderVt memr_vt = {memr_read, io_reader_free_self};

IoReader *io_mem_reader_new(const void *buf, size_t len) {
    MemReader *m = io_reader_alloc(sizeof *m, &memr_vt, "memory reader");
    if (!m) return NULL;
    m->buf = buf;
    m->len = len;
    return &m->base;
}

struct IoCounter {
    IoWriter base;
    IoWriter *next;
    uint64_t count;
};

static int cnt_write(IoWriter *w, const void *buf, size_t len) {
    struct IoCounter *c = (struct IoCounter *)w;
    c->count += len;
    return c->next ? io_write(c->next, buf, len) : 0;
}
static const IoWriterVt cnt_vt = {cnt_write, io_finish_nothing, io_writer_free_self};

IoWriter *io_counter_new(IoWriter *next, uint64_t **count_out) {
    struct IoCounter *c = io_writer_alloc(sizeof *c, &cnt_vt, "byte counter");
    if (!c) return NULL;
    c->next = next;
    if (count_out) *count_out = &c->count;
    return &c->base;
}

typedef struct {
    IoWriter base;
    IoWriter *next;
    int64_t *ns;
} IoTimer;

static int tim_write(IoWriter *w, const void *buf, size_t len) {
    IoTimer *t = (IoTimer *)w;
    int64_t t0 = phase_now_ns();
    int rc = io_write(t->next, buf, len);
    *t->ns += phase_now_ns() - t0;
    return rc;
}
static const IoWriterVt tim_vt = {tim_write, io_finish_nothing, io_writer_free_self};

IoWriter *io_timer_new(IoWriter *next, int64_t *ns) {
    IoTimer *t = io_writer_alloc(sizeof *t, &tim_vt, "stream timer");
    if (!t) return NULL;
    t->next = next;
    t->ns = ns;
    return &t->base;
}
