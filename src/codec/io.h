/* io: the stream interface every data path is built from ("source -> filters -> sink").
 * An IoWriter accepts bytes and passes them on (to a file, a filter, a store object); an IoReader
 * yields bytes. Filters wrap another stream they borrow: freeing a filter never frees the stream
 * under it. Streams are not thread-safe; one thread uses a stream at a time. */
#ifndef ETCDBR_IO_H
#define ETCDBR_IO_H

#include <stddef.h>
#include <stdint.h>

typedef struct IoWriter IoWriter;
typedef struct IoReader IoReader;

typedef struct IoWriterVt {
    /* Consume len bytes. 0 or a negative ERR_* code. */
    int (*write)(IoWriter *w, const void *buf, size_t len);
    /* Flush buffered bytes and write any trailer (e.g. gzip footer) to the next stream.
     * Does not finish the next stream: the owner of each layer finishes it, inner to outer. */
    int (*finish)(IoWriter *w);
    /* Release the writer (NULL-safe through io_writer_free). Unfinished data is dropped. */
    void (*free)(IoWriter *w);
} IoWriterVt;

struct IoWriter {
    const IoWriterVt *vt;
};

typedef struct IoReaderVt {
    /* Read up to cap bytes into buf; *got = 0 means end of stream. 0 or ERR_*. */
    int (*read)(IoReader *r, void *buf, size_t cap, size_t *got);
    void (*free)(IoReader *r);
} IoReaderVt;

struct IoReader {
    const IoReaderVt *vt;
};

static inline int io_write(IoWriter *w, const void *buf, size_t len) {
    return w->vt->write(w, buf, len);
}
static inline int io_finish(IoWriter *w) {
    return w->vt->finish(w);
}
static inline void io_writer_free(IoWriter *w) {
    if (w) w->vt->free(w);
}
static inline int io_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    return r->vt->read(r, buf, cap, got);
}
static inline void io_reader_free(IoReader *r) {
    if (r) r->vt->free(r);
}

/* Allocates a zeroed stream object of size bytes whose first member is its IoWriter (IoReader)
 * and sets that member's vt: the start of every stream's constructor. Owned by the caller, freed
 * by vt->free. NULL with ERR_NOMEM set ("<what>: out of memory"). */
void *io_writer_alloc(size_t size, const IoWriterVt *vt, const char *what);
void *io_reader_alloc(size_t size, const IoReaderVt *vt, const char *what);

/* Stock vt entries for streams with nothing of their own to do there. io_finish_nothing: a
 * finish for a writer that holds no buffered bytes; returns 0. io_writer_free_self and
 * io_reader_free_self: a free for a stream that owns no memory but its own object (free(w)). */
int io_finish_nothing(IoWriter *w);
void io_writer_free_self(IoWriter *w);
void io_reader_free_self(IoReader *r);

/* The once-only state of a writer whose first failure ends it and whose finish is final: the
 * gzip, zlib, LZW and zstd writers (compress.h, lzw.h) embed one. */
typedef struct {
    int err;      /* the first failure's ERR_* code, 0 if none */
    int finished; /* finish ran */
} IoSticky;

/* Before a write: 0, or the earlier failure's code (or ERR_INVALID after finish), with a message
 * "<who>: write after ..." set. */
int io_sticky_write(const IoSticky *st, const char *who);
/* Before a finish: 0 with finish marked as run; 1 when it already ran (a second finish does
 * nothing and returns 0); or the earlier failure's code, with "<who>: finish after an earlier
 * failure" set. */
int io_sticky_finish(IoSticky *st, const char *who);
/* Keeps rc as the failure when it is one (negative) and returns it unchanged. */
static inline int io_sticky_keep(IoSticky *st, int rc) {
    if (rc < 0) st->err = rc;
    return rc;
}

/* Reads until buf is full or end of stream; *got < cap only at end of stream. */
int io_read_full(IoReader *r, void *buf, size_t cap, size_t *got);

/* Copies r to w until end of stream with a 256 KiB buffer; *copied may be NULL. */
int io_copy(IoReader *r, IoWriter *w, uint64_t *copied);

/* io_copy that calls tick(ctx, bytes copied so far) after every chunk: for progress and
 * cancellation; a nonzero return stops the copy and is returned. */
int io_copy_tick(IoReader *r, IoWriter *w, uint64_t *copied, int (*tick)(void *ctx, uint64_t n),
                 void *ctx);

/* Writer onto an open fd (borrowed: not closed). finish() does nothing; fsync is the owner's. */
IoWriter *io_fd_writer_new(int fd);
/* Reader from an open fd (borrowed: not closed). */
IoReader *io_fd_reader_new(int fd);
/* One read(2) of up to cap bytes from fd into buf, retried on EINTR: 0 with *got bytes (0 at
 * the end), or ERR_IO "read <what>: <errno text>" (what may be NULL). */
int io_fd_read(int fd, const char *what, void *buf, size_t cap, size_t *got);

/* Reader over a memory buffer (borrowed; must outlive the reader). */
IoReader *io_mem_reader_new(const void *buf, size_t len);

/* Writer that counts bytes and optionally passes them on to next (borrowed, may be NULL). */
typedef struct IoCounter IoCounter;
IoWriter *io_counter_new(IoWriter *next, uint64_t **count_out);

/* Writer that passes every write on to next (borrowed) and adds the monotonic nanoseconds each
 * took (next's own work and everything under it) to *ns (borrowed, must outlive the writer;
 * never reset here): where a stream's time went (phase.h). Its finish does nothing (the owner
 * finishes next, as with every filter). NULL with ERR_NOMEM set. */
IoWriter *io_timer_new(IoWriter *next, int64_t *ns);

#endif
