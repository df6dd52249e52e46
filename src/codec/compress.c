/* compress: gzip/zlib (zlib), parallel gzip members (libdeflate), Go LZW (lzw.c) and zstd
 * (libzstd) stream filters; see compress.h. Every filter works through fixed buffers (64 KiB, or
 * a fixed number of blocks for parallel gzip) plus the library's own state, so memory does not
 * depend on object size. Readers are strict: a stream must end exactly at its format's end
 * (concatenated gzip members and zstd frames are accepted); anything else is ERR_CORRUPT. */
#include "compress.h"
#include "lzw.h"
#include "../common/byteorder.h"
#include "../common/err.h"
#include "../common/mem.h"
#include "../common/names.h"

#include <libdeflate.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

enum { COMPRESS_BUF = 64 * 1024 };

int compress_parse_policy(const char *name, CompressKind *out) {
    static const struct {
        const char *name;
        CompressKind kind;
    } policies[] = {
        {"gzip", COMPRESS_GZIP},
        {"zlib", COMPRESS_ZLIB},
        {"lzw", COMPRESS_LZW},
        {"zstd", COMPRESS_ZSTD},
    };
    for (size_t i = 0; name && i < sizeof policies / sizeof policies[0]; i++) {
        if (strcmp(name, policies[i].name) == 0) {
            *out = policies[i].kind;
            return 0;
        }
    }
    return err_set(ERR_INVALID, "unknown compression policy \"%s\" (want gzip, zlib, lzw or zstd)",
                   name ? name : "");
}

const char *compress_suffix(CompressKind kind) {
    static const char *const suffixes[] = {
        [COMPRESS_GZIP] = ".gz",
        [COMPRESS_ZLIB] = ".zlib",
        [COMPRESS_LZW] = ".Z",
        [COMPRESS_ZSTD] = ".zst",
    };
    return NAME_AT(suffixes, kind, ""); /* COMPRESS_NONE: no suffix */
}

int compress_from_suffix(const char *suffix, CompressKind *out) {
    /* Case matters: the Go tool writes exactly these and ".Z" is upper case. */
    static const struct {
        const char *suffix;
        CompressKind kind;
    } suffixes[] = {
        {"", COMPRESS_NONE}, {"gz", COMPRESS_GZIP},  {"zlib", COMPRESS_ZLIB},
        {"Z", COMPRESS_LZW}, {"zst", COMPRESS_ZSTD},
    };
    const char *s = suffix ? suffix : "";
    if (*s == '.') s++;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcmp(s, suffixes[i].suffix) == 0) {
            *out = suffixes[i].kind;
            return 0;
        }
    }
    return err_set(ERR_UNSUPPORTED, "unknown compression suffix \"%s\"", suffix ? suffix : "");
}

/* ---- pass-through (COMPRESS_NONE) ---- */

typedef struct {
    IoWriter base;
    IoWriter *next;
} PlainWriter;

static int plainw_write(IoWriter *w, const void *buf, size_t len) {
    return io_write(((PlainWriter *)w)->next, buf, len);
}
static const IoWriterVt plainw_vt = {plainw_write, io_finish_nothing, io_writer_free_self};

typedef struct {
    IoReader base;
    IoReader *src;
} PlainReader;

static int plainr_read(IoReader *r, void *buf, size_t cap, size_t *got) {
    return io_read(((PlainReader *)r)->src, buf, cap, got);
}
static const IoReaderVt plainr_vt = {plainr_read, io_reader_free_self};

/* ---- gzip and zlib writers ---- */

typedef struct {
    IoWriter base;
    IoWriter *next;
    CompressKind kind; /* COMPRESS_GZIP or COMPRESS_ZLIB */
    z_stream zs;
    int zs_ready;
    int header_done; /* gzip header written */
    IoSticky st;
    uLong crc;
    uint32_t isize; /* input length mod 2^32, for the gzip trailer */
    uint8_t out[COMPRESS_BUF];
} DeflateWriter;

static int deflw_flush(DeflateWriter *d) {
    size_t n = sizeof d->out - d->zs.avail_out;
    d->zs.next_out = d->out;
    d->zs.avail_out = sizeof d->out;
    return n ? io_write(d->next, d->out, n) : 0;
}

/* Go's compress/gzip header at the default level: no name, MTIME 0, XFL 0, OS 255 (unknown). */
static int deflw_header(DeflateWriter *d) {
    static const uint8_t hdr[10] = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff};
    if (d->kind != COMPRESS_GZIP || d->header_done) return 0;
    d->header_done = 1;
    return io_write(d->next, hdr, sizeof hdr);
}

/* Runs deflate over the pending input with flush mode, passing full buffers on. */
static int deflw_run(DeflateWriter *d, int flush) {
    for (;;) {
        if (d->zs.avail_out == 0) {
            int rc = deflw_flush(d);
            if (rc < 0) return rc;
        }
        int zr = deflate(&d->zs, flush);
        if (zr == Z_STREAM_END) return 0;
        if (zr != Z_OK && zr != Z_BUF_ERROR)
            return err_set(ERR_IO, "%s: deflate failed: %s",
                           d->kind == COMPRESS_GZIP ? "gzip" : "zlib",
                           d->zs.msg ? d->zs.msg : "internal error");
        if (flush == Z_NO_FLUSH && d->zs.avail_in == 0) return 0;
    }
}

static int deflw_write(IoWriter *w, const void *buf, size_t len) {
    DeflateWriter *d = (DeflateWriter *)w;
    const uint8_t *p = buf;
    int rc = io_sticky_write(&d->st, "deflate");
    if (rc) return rc;
    rc = deflw_header(d);
    if (rc < 0) goto done;
    while (len > 0) {
        uInt n = len > UINT_MAX ? UINT_MAX : (uInt)len;
        if (d->kind == COMPRESS_GZIP) {
            d->crc = crc32(d->crc, p, n);
            d->isize += (uint32_t)n;
        }
        d->zs.next_in = (Bytef *)p;
        d->zs.avail_in = n;
        rc = deflw_run(d, Z_NO_FLUSH);
        if (rc < 0) goto done;
        p += n;
        len -= n;
    }
done:
    return io_sticky_keep(&d->st, rc);
}

static int deflw_finish(IoWriter *w) {
    DeflateWriter *d = (DeflateWriter *)w;
    int rc = io_sticky_finish(&d->st, "deflate");
    if (rc) return rc < 0 ? rc : 0;
    rc = deflw_header(d);
    if (rc < 0) goto done;
    d->zs.next_in = NULL;
    d->zs.avail_in = 0;
    rc = deflw_run(d, Z_FINISH);
    if (rc < 0) goto done;
    rc = deflw_flush(d);
    if (rc < 0) goto done;
    if (d->kind == COMPRESS_GZIP) {
        uint8_t tr[8];
        uint32_t crc = (uint32_t)d->crc;
        put_le32(tr, crc); /* RFC 1952 2.3.1: CRC32, ISIZE */
        put_le32(tr + 4, d->isize);
        rc = io_write(d->next, tr, sizeof tr);
    }
done:
    return io_sticky_keep(&d->st, rc);
}

static void deflw_free(IoWriter *w) {
    DeflateWriter *d = (DeflateWriter *)w;
    if (d->zs_ready) deflateEnd(&d->zs);
    free(d);
}

static const IoWriterVt deflw_vt = {deflw_write, deflw_finish, deflw_free};

static IoWriter *deflate_writer_new(CompressKind kind, IoWriter *next) {
    DeflateWriter *d = calloc(1, sizeof *d);
    if (!d) goto fail;
    d->base.vt = &deflw_vt;
    d->next = next;
    d->kind = kind;
    d->crc = crc32(0, NULL, 0);
    /* gzip: raw deflate (-15) with our own header and trailer, so the header is exactly Go's. */
    int wbits = kind == COMPRESS_GZIP ? -MAX_WBITS : MAX_WBITS;
    if (deflateInit2(&d->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        goto fail;
    d->zs_ready = 1;
    d->zs.next_out = d->out;
    d->zs.avail_out = sizeof d->out;
    return &d->base;
fail:
    free(d);
    err_set(ERR_NOMEM, "%s writer: out of memory", kind == COMPRESS_GZIP ? "gzip" : "zlib");
    return NULL;
}

/* ---- parallel gzip members (libdeflate) ---- */

/* Process-wide defaults (compress_set_gzip_defaults): set from the parsed configuration before
 * snapshot threads start; atomics so a late set is still well-defined. */
static atomic_int gzip_default_mode = GZIP_MODE_PARALLEL;
static atomic_int gzip_default_threads = 0;
static atomic_size_t gzip_default_block = 0;

enum { GZIP_LEVEL = 6, GZIP_HEADER_LEN = 10, GZIP_TRAILER_LEN = 8, GZIP_THREADS_AUTO_MAX = 4 };

/* Go's compress/gzip header at the default level: no name, MTIME 0, XFL 0, OS 255 (unknown). */
static const uint8_t gzip_go_header[GZIP_HEADER_LEN] = {0x1f, 0x8b, 0x08, 0x00, 0,
                                                        0,    0,    0,    0x00, 0xff};

int compress_parse_gzip_mode(const char *name, GzipMode *out) {
    if (name && strcmp(name, "parallel") == 0) {
        *out = GZIP_MODE_PARALLEL;
        return 0;
    }
    if (name && strcmp(name, "single") == 0) {
        *out = GZIP_MODE_SINGLE;
        return 0;
    }
    return err_set(ERR_INVALID, "unknown gzip mode \"%s\" (want parallel or single)",
                   name ? name : "");
}

void compress_set_gzip_defaults(const GzipWriterOptions *opt) {
    GzipWriterOptions d = {GZIP_MODE_PARALLEL, 0, 0};
    if (opt) d = *opt;
    atomic_store(&gzip_default_mode, (int)d.mode);
    atomic_store(&gzip_default_threads, d.threads);
    atomic_store(&gzip_default_block, d.block_bytes);
}

int compress_gzip_threads(const GzipWriterOptions *opt) {
    if (opt && opt->threads > 0)
        return opt->threads > GZIP_THREADS_MAX ? GZIP_THREADS_MAX : opt->threads;
    /* the CPUs this process may run on (taskset, cpusets), not every CPU of the machine */
    int n = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n < 1) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)(c > GZIP_THREADS_MAX ? GZIP_THREADS_MAX : c) : 1;
    }
    return n > GZIP_THREADS_AUTO_MAX ? GZIP_THREADS_AUTO_MAX : n;
}

typedef enum { SLOT_FREE = 0, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE } SlotState;

typedef struct {
    SlotState state;
    uint8_t *in; /* block_bytes */
    size_t in_len;
    uint8_t *out; /* header + deflate bound + trailer */
    size_t out_len;
    int failed; /* the compressor found no room: cannot happen with the bound, checked anyway */
} GzipSlot;

typedef struct ParallelGzipWriter ParallelGzipWriter;

typedef struct {
    ParallelGzipWriter *w;
    pthread_t thread;
    struct libdeflate_compressor *c;
    struct libdeflate_compressor *probe; /* level 1, for pgz_incompressible */
} GzipWorker;

struct ParallelGzipWriter {
    IoWriter base;
    IoWriter *next;
    size_t block_bytes;
    size_t out_cap;
    int nthreads;
    int started; /* workers running */
    int nslots;  /* nthreads + 2: one filling, nthreads compressing, one waiting to be written */
    GzipSlot *slots;
    GzipWorker *workers;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a block was queued, or stop */
    pthread_cond_t done_cv; /* a block was compressed */
    int stop;
    uint64_t next_submit; /* sequence number of the block being filled */
    uint64_t next_take;   /* next queued block a worker takes */
    uint64_t next_write;  /* oldest block not yet written to next */
    uint64_t total_in;
    IoSticky st;
    struct libdeflate_compressor *inline_c; /* a lone last block compressed on the caller */
};

/* Incompressible blocks (random bytes, encrypted or already compressed values): deflate at
 * level 6 spends most of its time looking for matches it does not find, then emits stored
 * blocks. A block of at least PROBE_MIN_BLOCK bytes is probed first: PROBE_SAMPLES samples of
 * PROBE_BYTES spread over it, deflated at level 1; when they shrink by less than 2 % the block is
 * written as stored deflate blocks at once (5 bytes per 65535: +0.008 %), which every inflater
 * reads (RFC 1951 3.2.4). Compressible data goes to level 6 as before (the probe costs ~6 % of a
 * 1 MiB block at level 1's speed). */
enum {
    PROBE_SAMPLES = 4,
    PROBE_BYTES = 16 << 10,
    PROBE_MIN_BLOCK = 256 << 10,
    PROBE_LEVEL = 1,
    STORED_MAX = 65535,
};

/* 1 when the samples of in (len >= PROBE_MIN_BLOCK) shrink by less than 2 % at level 1. scratch:
 * PROBE_BYTES bytes of room. */
static int pgz_incompressible(struct libdeflate_compressor *probe, const uint8_t *in, size_t len,
                              uint8_t *scratch) {
    size_t in_total = 0, out_total = 0;
    for (size_t i = 0; i < PROBE_SAMPLES; i++) {
        size_t off = (len - PROBE_BYTES) / (PROBE_SAMPLES - 1) * i;
        size_t n = libdeflate_deflate_compress(probe, in + off, PROBE_BYTES, scratch, PROBE_BYTES);
        in_total += PROBE_BYTES;
        out_total += n ? n : PROBE_BYTES; /* 0: it did not shrink at all */
    }
    return out_total * 100 >= in_total * 98;
}

/* in as stored deflate blocks (the last one final) into out (cap bytes, at least the deflate
 * bound of len). Bytes written, 0 if out is too small. */
static size_t deflate_stored(const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
    size_t o = 0;
    do {
        size_t n = len > STORED_MAX ? STORED_MAX : len;
        if (cap - o < 5 + n) return 0;
        out[o] = len == n; /* BFINAL, BTYPE 00 */
        out[o + 1] = (uint8_t)n;
        out[o + 2] = (uint8_t)(n >> 8);
        out[o + 3] = (uint8_t)~n;
        out[o + 4] = (uint8_t)(~n >> 8);
        memcpy(out + o + 5, in, n);
        o += 5 + n;
        in += n;
        len -= n;
    } while (len > 0);
    return o;
}

/* Compresses slot's input into one gzip member in slot->out. Called without the lock. probe (a
 * level-1 compressor, may be NULL: no probe) decides stored blocks for incompressible input. */
static void pgz_compress(struct libdeflate_compressor *c, struct libdeflate_compressor *probe,
                         GzipSlot *s, size_t out_cap) {
    uint8_t *o = s->out;
    size_t room = out_cap - GZIP_HEADER_LEN - GZIP_TRAILER_LEN, n;
    memcpy(o, gzip_go_header, GZIP_HEADER_LEN);
    if (probe && s->in_len >= PROBE_MIN_BLOCK && room >= PROBE_BYTES &&
        pgz_incompressible(probe, s->in, s->in_len, o + GZIP_HEADER_LEN))
        n = deflate_stored(s->in, s->in_len, o + GZIP_HEADER_LEN, room);
    else
        n = libdeflate_deflate_compress(c, s->in, s->in_len, o + GZIP_HEADER_LEN, room);
    if (n == 0) {
        s->failed = 1;
        return;
    }
    uint32_t crc = libdeflate_crc32(0, s->in, s->in_len);
    uint32_t isize = (uint32_t)s->in_len;
    uint8_t *t = o + GZIP_HEADER_LEN + n;
    put_le32(t, crc);
    put_le32(t + 4, isize);
    s->out_len = GZIP_HEADER_LEN + n + GZIP_TRAILER_LEN;
}

static void *pgz_worker(void *arg) {
    GzipWorker *wk = arg;
    ParallelGzipWriter *w = wk->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->stop && w->next_take == w->next_submit)
            pthread_cond_wait(&w->work_cv, &w->mu);
        if (w->stop) break;
        GzipSlot *s = &w->slots[w->next_take % (uint64_t)w->nslots];
        w->next_take++;
        s->state = SLOT_BUSY;
        pthread_mutex_unlock(&w->mu);
        pgz_compress(wk->c, wk->probe, s, w->out_cap);
        pthread_mutex_lock(&w->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&w->done_cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Stops and joins the workers (blocks being compressed are finished first). */
static void pgz_stop(ParallelGzipWriter *w) {
    if (!w->started) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->started; i++)
        pthread_join(w->workers[i].thread, NULL);
    w->started = 0;
}

/* Starts the workers with every signal blocked: they only compute, and stop signals must reach
 * the thread that waits for them (the commands' main thread). */
static int pgz_start(ParallelGzipWriter *w) {
    sigset_t all, old;
    int rc = 0;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < w->nthreads; i++) {
        GzipWorker *wk = &w->workers[i];
        wk->w = w;
        if (!wk->c) wk->c = libdeflate_alloc_compressor(GZIP_LEVEL);
        if (!wk->probe) wk->probe = libdeflate_alloc_compressor(PROBE_LEVEL);
        if (!wk->c || !wk->probe) {
            rc = err_set(ERR_NOMEM, "gzip: out of memory for a compressor");
            break;
        }
        int prc = pthread_create(&wk->thread, NULL, pgz_worker, wk);
        if (prc != 0) {
            rc = err_set(ERR_NOMEM, "gzip: cannot start a worker thread: %s", strerror(prc));
            break;
        }
        w->started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Writes the oldest block to next once it is compressed (waiting for it when wait is set).
 * *wrote tells whether one was written. Called without the lock. */
static int pgz_write_oldest(ParallelGzipWriter *w, int wait, int *wrote) {
    *wrote = 0;
    if (w->next_write == w->next_submit) return 0;
    GzipSlot *s = &w->slots[w->next_write % (uint64_t)w->nslots];
    pthread_mutex_lock(&w->mu);
    while (wait && s->state != SLOT_DONE)
        pthread_cond_wait(&w->done_cv, &w->mu);
    int done = s->state == SLOT_DONE;
    pthread_mutex_unlock(&w->mu);
    if (!done) return 0;
    if (s->failed) return err_set(ERR_IO, "gzip: deflate found no room for a block");
    int rc = io_write(w->next, s->out, s->out_len);
    if (rc < 0) return rc;
    pthread_mutex_lock(&w->mu);
    s->state = SLOT_FREE;
    s->in_len = 0;
    w->next_write++;
    pthread_mutex_unlock(&w->mu);
    *wrote = 1;
    return 0;
}

/* The slot being filled, with its buffers; waits for its previous block to be written. */
static int pgz_fill_slot(ParallelGzipWriter *w, GzipSlot **out) {
    GzipSlot *s = &w->slots[w->next_submit % (uint64_t)w->nslots];
    while (w->next_submit - w->next_write >= (uint64_t)w->nslots) {
        int wrote = 0;
        int rc = pgz_write_oldest(w, 1, &wrote);
        if (rc < 0) return rc;
    }
    if (!s->in) {
        s->in = malloc(w->block_bytes);
        s->out = malloc(w->out_cap);
        if (!s->in || !s->out) return err_set(ERR_NOMEM, "gzip: out of memory for a block");
    }
    *out = s;
    return 0;
}

/* Queues the full slot for the workers (starting them at the first block), then writes every
 * block already compressed, oldest first. */
static int pgz_submit(ParallelGzipWriter *w) {
    if (!w->started) {
        int rc = pgz_start(w);
        if (rc < 0) return rc;
    }
    pthread_mutex_lock(&w->mu);
    w->slots[w->next_submit % (uint64_t)w->nslots].state = SLOT_QUEUED;
    w->next_submit++;
    pthread_cond_signal(&w->work_cv);
    pthread_mutex_unlock(&w->mu);
    for (int wrote = 1; wrote;) {
        int rc = pgz_write_oldest(w, 0, &wrote);
        if (rc < 0) return rc;
    }
    return 0;
}

static int pgz_write(IoWriter *base, const void *buf, size_t len) {
    ParallelGzipWriter *w = (ParallelGzipWriter *)base;
    const uint8_t *p = buf;
    int rc = io_sticky_write(&w->st, "gzip");
    if (rc) return rc;
    while (len > 0) {
        GzipSlot *s = NULL;
        rc = pgz_fill_slot(w, &s);
        if (rc < 0) goto done;
        w->total_in += mem_fill(s->in, w->block_bytes, &s->in_len, &p, &len);
        /* a full block is queued only when more input follows or at finish, so a stream of
         * exactly one block is compressed on the caller without starting threads */
        if (s->in_len == w->block_bytes && len > 0) {
            rc = pgz_submit(w);
            if (rc < 0) goto done;
        }
    }
done:
    return io_sticky_keep(&w->st, rc);
}

static int pgz_finish(IoWriter *base) {
    ParallelGzipWriter *w = (ParallelGzipWriter *)base;
    int rc = io_sticky_finish(&w->st, "gzip");
    if (rc) return rc < 0 ? rc : 0;
    GzipSlot *s = NULL;
    rc = pgz_fill_slot(w, &s);
    if (rc < 0) goto done;
    /* the last block (maybe empty: an empty stream is still one member, as Go writes it) */
    if (!w->started && w->next_submit == w->next_write) {
        /* nothing queued: compress here rather than start threads for one block */
        w->inline_c = libdeflate_alloc_compressor(GZIP_LEVEL);
        if (!w->inline_c) {
            rc = err_set(ERR_NOMEM, "gzip: out of memory for a compressor");
            goto done;
        }
        pgz_compress(w->inline_c, NULL, s, w->out_cap);
        if (s->failed) {
            rc = err_set(ERR_IO, "gzip: deflate found no room for a block");
            goto done;
        }
        rc = io_write(w->next, s->out, s->out_len);
        goto done;
    }
    if (s->in_len > 0 || w->total_in == 0) {
        rc = pgz_submit(w);
        if (rc < 0) goto done;
    }
    while (w->next_write < w->next_submit) {
        int wrote = 0;
        rc = pgz_write_oldest(w, 1, &wrote);
        if (rc < 0) goto done;
    }
done:
    pgz_stop(w);
    return io_sticky_keep(&w->st, rc);
}

static void pgz_free(IoWriter *base) {
    ParallelGzipWriter *w = (ParallelGzipWriter *)base;
    pgz_stop(w);
    for (int i = 0; w->workers && i < w->nthreads; i++) {
        libdeflate_free_compressor(w->workers[i].c);
        libdeflate_free_compressor(w->workers[i].probe);
    }
    for (int i = 0; w->slots && i < w->nslots; i++) {
        free(w->slots[i].in);
        free(w->slots[i].out);
    }
    libdeflate_free_compressor(w->inline_c);
    pthread_cond_destroy(&w->work_cv);
    pthread_cond_destroy(&w->done_cv);
    pthread_mutex_destroy(&w->mu);
    free(w->slots);
    free(w->workers);
    free(w);
}

static const IoWriterVt pgz_vt = {pgz_write, pgz_finish, pgz_free};

static IoWriter *parallel_gzip_writer_new(const GzipWriterOptions *opt, IoWriter *next) {
    ParallelGzipWriter *w = calloc(1, sizeof *w);
    if (!w) goto fail;
    w->base.vt = &pgz_vt;
    w->next = next;
    w->nthreads = compress_gzip_threads(opt);
    w->nslots = w->nthreads + 2;
    size_t b = opt->block_bytes ? opt->block_bytes : GZIP_BLOCK_DEFAULT;
    w->block_bytes = b < GZIP_BLOCK_MIN ? GZIP_BLOCK_MIN : b > GZIP_BLOCK_MAX ? GZIP_BLOCK_MAX : b;
    /* the bound depends only on the length (libdeflate.h); one compressor to ask */
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(GZIP_LEVEL);
    if (!c) goto fail_mem;
    w->out_cap =
        GZIP_HEADER_LEN + libdeflate_deflate_compress_bound(c, w->block_bytes) + GZIP_TRAILER_LEN;
    libdeflate_free_compressor(c);
    w->slots = calloc((size_t)w->nslots, sizeof *w->slots);
    w->workers = calloc((size_t)w->nthreads, sizeof *w->workers);
    if (!w->slots || !w->workers) goto fail_mem;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    return &w->base;
fail_mem:
    free(w->slots);
    free(w->workers);
    free(w);
fail:
    err_set(ERR_NOMEM, "gzip writer: out of memory");
    return NULL;
}

IoWriter *compress_gzip_writer_new(const GzipWriterOptions *opt, IoWriter *next) {
    GzipWriterOptions d;
    if (!opt) {
        d.mode = (GzipMode)atomic_load(&gzip_default_mode);
        d.threads = atomic_load(&gzip_default_threads);
        d.block_bytes = atomic_load(&gzip_default_block);
        opt = &d;
    }
    if (opt->mode == GZIP_MODE_SINGLE) return deflate_writer_new(COMPRESS_GZIP, next);
    return parallel_gzip_writer_new(opt, next);
}

/* ---- gzip and zlib readers ---- */

typedef enum { DEC_RUNNING = 0, DEC_DONE, DEC_FAILED } DecState;

/* Where a decoder (gzip, zlib, zstd) stands; its end, once reached, answers every later read. */
typedef struct {
    DecState state;
    int err;       /* the failure's ERR_* code, when DEC_FAILED */
    char msg[200]; /* its message */
} DecStatus;

typedef struct {
    IoReader base;
    IoReader *src;
    CompressKind kind;
    DecStatus st;
    int src_eof;
    z_stream zs;
    int zs_ready;
    int in_member; /* inside a gzip member / the zlib stream */
    long members;  /* completed members */
    uint8_t in[COMPRESS_BUF];
} InflateReader;

static const char *kind_name(CompressKind kind) {
    static const char *const names[] = {
        [COMPRESS_GZIP] = "gzip",
        [COMPRESS_ZLIB] = "zlib",
        [COMPRESS_LZW] = "lzw",
        [COMPRESS_ZSTD] = "zstd",
    };
    return NAME_AT(names, kind, "none");
}

/* Records a sticky failure (message formatted now) and returns code. */
static int dec_fail(DecStatus *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int dec_fail(DecStatus *st, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    st->state = DEC_FAILED;
    st->err = code;
    return err_set(code, "%s", st->msg);
}

/* At the top of each read: 1 while the decoder runs; 0 at its end; its failure again after one. */
static int dec_running(const DecStatus *st) {
    if (st->state == DEC_DONE) return 0;
    if (st->state == DEC_FAILED) return err_set(st->err, "%s", st->msg);
    return 1;
}

/* Refills the input buffer when it is empty. 0 or an error from src. */
static int inflr_fill(InflateReader *r) {
    if (r->zs.avail_in > 0 || r->src_eof) return 0;
    size_t n = 0;
    int rc = io_read(r->src, r->in, sizeof r->in, &n);
    if (rc < 0)
        return dec_fail(&r->st, rc, "%s: reading compressed input: %s", kind_name(r->kind),
                        err_msg());
    if (n == 0) r->src_eof = 1;
    r->zs.next_in = r->in;
    r->zs.avail_in = (uInt)n;
    return 0;
}

static int inflr_read(IoReader *base, void *buf, size_t cap, size_t *got) {
    InflateReader *r = (InflateReader *)base;
    const char *name = kind_name(r->kind);
    int rc = 0;
    *got = 0;
    if (cap == 0) return 0;
    if (cap > UINT_MAX) cap = UINT_MAX;
    for (;;) {
        if ((rc = dec_running(&r->st)) <= 0) return rc;
        rc = inflr_fill(r);
        if (rc < 0) return rc;
        if (!r->in_member) {
            if (r->zs.avail_in == 0) {
                if (r->members == 0) return dec_fail(&r->st, ERR_CORRUPT, "%s: empty input", name);
                r->st.state = DEC_DONE;
                continue;
            }
            if (r->members > 0) {
                /* Go's gzip reader reads concatenated members; zlib has exactly one stream. */
                if (r->kind != COMPRESS_GZIP)
                    return dec_fail(&r->st, ERR_CORRUPT, "%s: unexpected data after the stream end",
                                    name);
                if (inflateReset(&r->zs) != Z_OK)
                    return dec_fail(&r->st, ERR_CORRUPT, "%s: cannot reset inflate", name);
            }
            r->in_member = 1;
        }
        r->zs.next_out = buf;
        r->zs.avail_out = (uInt)cap;
        int zr = inflate(&r->zs, Z_NO_FLUSH);
        size_t produced = cap - r->zs.avail_out;
        switch (zr) {
        case Z_STREAM_END:
            r->in_member = 0;
            r->members++;
            break;
        case Z_OK:
        case Z_BUF_ERROR:
            if (produced == 0 && r->zs.avail_in == 0 && r->src_eof)
                return dec_fail(&r->st, ERR_CORRUPT, "%s: truncated stream (input ended early)",
                                name);
            break;
        case Z_NEED_DICT:
            return dec_fail(&r->st, ERR_CORRUPT, "%s: stream needs a preset dictionary", name);
        case Z_MEM_ERROR:
            return dec_fail(&r->st, ERR_NOMEM, "%s: out of memory while inflating", name);
        default:
            return dec_fail(&r->st, ERR_CORRUPT, "%s: corrupt stream: %s", name,
                            r->zs.msg ? r->zs.msg : "inflate error");
        }
        if (produced > 0) {
            *got = produced;
            return 0;
        }
    }
}

static void inflr_free(IoReader *base) {
    InflateReader *r = (InflateReader *)base;
    if (r->zs_ready) inflateEnd(&r->zs);
    free(r);
}

static const IoReaderVt inflr_vt = {inflr_read, inflr_free};

static IoReader *inflate_reader_new(CompressKind kind, IoReader *src) {
    InflateReader *r = calloc(1, sizeof *r);
    if (!r) goto fail;
    r->base.vt = &inflr_vt;
    r->src = src;
    r->kind = kind;
    /* 16 + 15: gzip wrapper only (zlib checks CRC-32 and ISIZE); 15: zlib wrapper only. */
    if (inflateInit2(&r->zs, kind == COMPRESS_GZIP ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) goto fail;
    r->zs_ready = 1;
    return &r->base;
fail:
    free(r);
    err_set(ERR_NOMEM, "%s reader: out of memory", kind_name(kind));
    return NULL;
}

/* ---- zstd writer ---- */

typedef struct {
    IoWriter base;
    IoWriter *next;
    ZSTD_CCtx *cctx;
    IoSticky st;
    uint8_t out[COMPRESS_BUF];
} ZstdWriter;

/* Compresses in with directive, passing each full buffer on; returns when the input is consumed
 * (continue) or the frame is complete (end). */
static int zstdw_run(ZstdWriter *z, ZSTD_inBuffer *in, ZSTD_EndDirective directive) {
    for (;;) {
        ZSTD_outBuffer out = {z->out, sizeof z->out, 0};
        size_t left = ZSTD_compressStream2(z->cctx, &out, in, directive);
        if (ZSTD_isError(left))
            return err_set(ERR_IO, "zstd: compression failed: %s", ZSTD_getErrorName(left));
        if (out.pos > 0) {
            int rc = io_write(z->next, z->out, out.pos);
            if (rc < 0) return rc;
        }
        if (directive == ZSTD_e_end ? left == 0 : in->pos == in->size) return 0;
    }
}

static int zstdw_write(IoWriter *w, const void *buf, size_t len) {
    ZstdWriter *z = (ZstdWriter *)w;
    int rc = io_sticky_write(&z->st, "zstd");
    if (rc || len == 0) return rc;
    ZSTD_inBuffer in = {buf, len, 0};
    return io_sticky_keep(&z->st, zstdw_run(z, &in, ZSTD_e_continue));
}

static int zstdw_finish(IoWriter *w) {
    ZstdWriter *z = (ZstdWriter *)w;
    int rc = io_sticky_finish(&z->st, "zstd");
    if (rc) return rc < 0 ? rc : 0;
    ZSTD_inBuffer in = {NULL, 0, 0};
    return io_sticky_keep(&z->st, zstdw_run(z, &in, ZSTD_e_end));
}

static void zstdw_free(IoWriter *w) {
    ZstdWriter *z = (ZstdWriter *)w;
    ZSTD_freeCCtx(z->cctx);
    free(z);
}

static const IoWriterVt zstdw_vt = {zstdw_write, zstdw_finish, zstdw_free};

static IoWriter *zstd_writer_new(IoWriter *next) {
    ZstdWriter *z = calloc(1, sizeof *z);
    if (!z) goto fail;
    z->base.vt = &zstdw_vt;
    z->next = next;
    z->cctx = ZSTD_createCCtx();
    if (!z->cctx) goto fail;
    /* Default level; a content checksum so corruption is caught even without our trailer. */
    if (ZSTD_isError(
            ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel, ZSTD_CLEVEL_DEFAULT)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1)))
        goto fail;
    return &z->base;
fail:
    if (z) ZSTD_freeCCtx(z->cctx);
    free(z);
    err_set(ERR_NOMEM, "zstd writer: out of memory");
    return NULL;
}

/* ---- zstd reader ---- */

typedef struct {
    IoReader base;
    IoReader *src;
    ZSTD_DCtx *dctx;
    DecStatus st;
    int src_eof;
    int frame_done; /* the last call completed a frame and flushed it */
    int out_full;   /* the last call filled the caller's buffer: more may be buffered inside */
    long calls;     /* decompress calls made, to tell empty input from a truncated frame */
    ZSTD_inBuffer in;
    uint8_t inbuf[COMPRESS_BUF];
} ZstdReader;

static int zstdr_read(IoReader *base, void *buf, size_t cap, size_t *got) {
    ZstdReader *r = (ZstdReader *)base;
    *got = 0;
    if (cap == 0) return 0;
    for (;;) {
        int rc = dec_running(&r->st);
        if (rc <= 0) return rc;
        if (r->in.pos == r->in.size && !r->src_eof) {
            size_t n = 0;
            rc = io_read(r->src, r->inbuf, sizeof r->inbuf, &n);
            if (rc < 0)
                return dec_fail(&r->st, rc, "zstd: reading compressed input: %s", err_msg());
            if (n == 0) r->src_eof = 1;
            r->in.src = r->inbuf;
            r->in.size = n;
            r->in.pos = 0;
        }
        if (r->in.pos == r->in.size && r->src_eof && !r->out_full) {
            if (r->calls == 0) return dec_fail(&r->st, ERR_CORRUPT, "zstd: empty input");
            if (!r->frame_done)
                return dec_fail(&r->st, ERR_CORRUPT, "zstd: truncated stream (input ended early)");
            r->st.state = DEC_DONE;
            continue;
        }
        ZSTD_outBuffer out = {buf, cap, 0};
        size_t ret = ZSTD_decompressStream(r->dctx, &out, &r->in);
        r->calls++;
        if (ZSTD_isError(ret))
            return dec_fail(&r->st, ERR_CORRUPT, "zstd: corrupt stream: %s",
                            ZSTD_getErrorName(ret));
        r->frame_done = ret == 0;
        r->out_full = ret != 0 && out.pos == out.size;
        if (out.pos > 0) {
            *got = out.pos;
            return 0;
        }
    }
}

static void zstdr_free(IoReader *base) {
    ZstdReader *r = (ZstdReader *)base;
    ZSTD_freeDCtx(r->dctx);
    free(r);
}

static const IoReaderVt zstdr_vt = {zstdr_read, zstdr_free};

static IoReader *zstd_reader_new(IoReader *src) {
    ZstdReader *r = calloc(1, sizeof *r);
    if (!r) goto fail;
    r->base.vt = &zstdr_vt;
    r->src = src;
    r->in.src = r->inbuf;
    /* Window sizes above 2^27 (libzstd's default limit) are refused, bounding memory. */
    r->dctx = ZSTD_createDCtx();
    if (!r->dctx) goto fail;
    return &r->base;
fail:
    free(r);
    err_set(ERR_NOMEM, "zstd reader: out of memory");
    return NULL;
}

/* ---- dispatch ---- */

IoWriter *compress_writer_new(CompressKind kind, IoWriter *next) {
    switch (kind) {
    case COMPRESS_NONE: {
        PlainWriter *p = io_writer_alloc(sizeof *p, &plainw_vt, "plain writer");
        if (!p) return NULL;
        p->next = next;
        return &p->base;
    }
    case COMPRESS_GZIP:
        return compress_gzip_writer_new(NULL, next);
    case COMPRESS_ZLIB:
        return deflate_writer_new(kind, next);
    case COMPRESS_LZW:
        return lzw_writer_new(next);
    case COMPRESS_ZSTD:
        return zstd_writer_new(next);
    }
    err_set(ERR_INVALID, "compress writer: unknown kind %d", (int)kind);
    return NULL;
}

/* ---- the plain-size limit over every reader ---- */

typedef struct {
    IoReader base;
    IoReader *inner; /* owned: the kind's reader */
    CompressKind kind;
    uint64_t max, given;
    const char *flag;
    int failed;
} LimitReader;

static int limitr_fail(LimitReader *r) {
    r->failed = 1;
    return err_set(ERR_CORRUPT,
                   "%s: decompresses to more than %" PRIu64 " bytes, the limit%s%s%s: a "
                   "decompression bomb, or a legitimate object larger than the limit",
                   kind_name(r->kind), r->max, r->flag ? " (" : "", r->flag ? r->flag : "",
                   r->flag ? " raises it)" : "");
}

static int limitr_read(IoReader *base, void *buf, size_t cap, size_t *got) {
    LimitReader *r = (LimitReader *)base;
    *got = 0;
    if (r->failed) return limitr_fail(r);
    if (cap == 0) return 0;
    /* one byte past the limit is asked for, to tell "exactly at the limit" from "over it" */
    uint64_t left = r->max - r->given;
    if (left < cap) cap = (size_t)left + 1;
    size_t n = 0;
    int rc = io_read(r->inner, buf, cap, &n);
    if (rc) return rc;
    if (n > r->max - r->given) return limitr_fail(r);
    r->given += n;
    *got = n;
    return 0;
}

static void limitr_free(IoReader *base) {
    LimitReader *r = (LimitReader *)base;
    io_reader_free(r->inner);
    free(r);
}

static const IoReaderVt limitr_vt = {limitr_read, limitr_free};

static IoReader *kind_reader_new(CompressKind kind, IoReader *src);

IoReader *decompress_reader_new_limited(CompressKind kind, IoReader *src,
                                        const DecompressLimit *lim) {
    LimitReader *r = calloc(1, sizeof *r);
    if (!r) {
        err_set(ERR_NOMEM, "decompress reader: out of memory");
        return NULL;
    }
    r->inner = kind_reader_new(kind, src);
    if (!r->inner) {
        free(r);
        return NULL;
    }
    r->base.vt = &limitr_vt;
    r->kind = kind;
    r->max = lim && lim->max_plain ? lim->max_plain : DECOMPRESS_MAX_DEFAULT;
    r->flag = lim ? lim->flag : NULL;
    return &r->base;
}

IoReader *decompress_reader_new(CompressKind kind, IoReader *src) {
    return decompress_reader_new_limited(kind, src, NULL);
}

static IoReader *kind_reader_new(CompressKind kind, IoReader *src) {
    switch (kind) {
    case COMPRESS_NONE: {
        PlainReader *p = io_reader_alloc(sizeof *p, &plainr_vt, "plain reader");
        if (!p) return NULL;
        p->src = src;
        return &p->base;
    }
    case COMPRESS_GZIP:
    case COMPRESS_ZLIB:
        return inflate_reader_new(kind, src);
    case COMPRESS_LZW:
        return lzw_reader_new(src);
    case COMPRESS_ZSTD:
        return zstd_reader_new(src);
    }
    err_set(ERR_INVALID, "decompress reader: unknown kind %d", (int)kind);
    return NULL;
}
