/* compress: compression stream filters and the object-name suffixes that select them.
 * Formats as the Go tool writes them (docs/go-tool.md §5): gzip (.gz, RFC 1952, mtime 0, OS 255),
 * zlib (.zlib, RFC 1950), Go compress/lzw LSB order literal width 8 (.Z, not Unix compress),
 * and zstd (.zst, ours; the Go tool cannot read it). The decompressor is chosen per object. */
#ifndef ETCDBR_COMPRESS_H
#define ETCDBR_COMPRESS_H

#include "io.h"

typedef enum {
    COMPRESS_NONE = 0,
    COMPRESS_GZIP,
    COMPRESS_ZLIB,
    COMPRESS_LZW,
    COMPRESS_ZSTD,
} CompressKind;

/* Policy name as in --compression-policy ("gzip", "zlib", "lzw", "zstd") -> kind.
 * 0 or ERR_INVALID. */
int compress_parse_policy(const char *name, CompressKind *out);

/* Name suffix for a kind: "", ".gz", ".zlib", ".Z", ".zst" (static storage). */
const char *compress_suffix(CompressKind kind);

/* Suffix (without ".final", with or without the leading dot) -> kind. 0 or ERR_UNSUPPORTED. */
int compress_from_suffix(const char *suffix, CompressKind *out);

/* How COMPRESS_GZIP is written. Both give RFC 1952 that Go's gzip.Reader (multistream by default,
 * as the Go tool uses it), gzip(1) and zlib read; members carry Go's header (no name, MTIME 0,
 * XFL 0, OS 255) and are compressed at level 6, Go's and zlib's default level.
 *  - GZIP_MODE_PARALLEL: the input is cut into blocks (default 1 MiB) and each becomes its own
 *    gzip member, compressed by libdeflate on worker threads and written in input order. At most
 *    threads + 2 blocks are in memory (input and output buffer each: ~2 MiB per block).
 *  - GZIP_MODE_SINGLE: one member from one zlib deflate stream on the caller's thread: the layout
 *    the Go tool writes, for readers that stop after the first member. */
typedef enum {
    GZIP_MODE_PARALLEL = 0,
    GZIP_MODE_SINGLE,
} GzipMode;

typedef struct {
    GzipMode mode;
    int threads;        /* parallel: worker threads, 0 = min(CPUs this process may use, 4) */
    size_t block_bytes; /* parallel: input bytes per member, 0 = 1 MiB (GZIP_BLOCK_DEFAULT) */
} GzipWriterOptions;

enum {
    GZIP_BLOCK_DEFAULT = 1 << 20, /* 1 MiB: loses < 0.1 % of ratio to member restarts */
    GZIP_BLOCK_MIN = 4096,
    GZIP_BLOCK_MAX = 64 << 20,
    GZIP_THREADS_MAX = 64,
};

/* --gzip-mode name ("parallel", "single") -> mode. 0 or ERR_INVALID. */
int compress_parse_gzip_mode(const char *name, GzipMode *out);

/* Sets the options compress_writer_new(COMPRESS_GZIP) uses from now on (copied; threads and
 * block_bytes are clamped to their ranges). Parsed configuration: call it before starting the
 * threads that write snapshots. The built-in default is {GZIP_MODE_PARALLEL, 0, 0}. */
void compress_set_gzip_defaults(const GzipWriterOptions *opt);

/* The worker threads options resolve to (opt->threads, or the automatic count for 0). */
int compress_gzip_threads(const GzipWriterOptions *opt);

/* Writer compressing into next (borrowed). finish() writes the format's trailer into next.
 * COMPRESS_GZIP uses the options set by compress_set_gzip_defaults. Returns NULL on allocation
 * failure. Writes to next always happen on the calling thread. */
IoWriter *compress_writer_new(CompressKind kind, IoWriter *next);

/* A gzip writer with explicit options (opt NULL: the defaults), as compress_writer_new. In
 * parallel mode a failed worker thread start is ERR_NOMEM from write or finish. */
IoWriter *compress_gzip_writer_new(const GzipWriterOptions *opt, IoWriter *next);

/* How many plain bytes a decompressing reader may give out: the bound that keeps a small
 * hostile object (a "decompression bomb": a 330 KB zstd stream of zeros inflates to 10 GiB) from
 * filling the disk or the time of whoever reads it. The limit applies to every kind, also
 * COMPRESS_NONE: it bounds what is spooled, not only the ratio. */
typedef struct {
    uint64_t max_plain; /* bytes; 0 = DECOMPRESS_MAX_DEFAULT */
    const char *flag;   /* the flag that raises it, named in the error (borrowed; NULL: none) */
} DecompressLimit;

/* 64 GiB: eight times etcd's largest recommended --quota-backend-bytes (8 GiB), the bound for
 * any reader not given a tighter one (docs/compression.md). */
#define DECOMPRESS_MAX_DEFAULT (64ull << 30)

/* Reader decompressing src (borrowed), giving out at most DECOMPRESS_MAX_DEFAULT bytes.
 * Truncated or corrupt input yields ERR_CORRUPT from read, never a silent short stream.
 * Returns NULL on allocation failure. */
IoReader *decompress_reader_new(CompressKind kind, IoReader *src);

/* decompress_reader_new giving out at most lim->max_plain bytes (lim NULL: the default): the
 * read that would go past it fails with ERR_CORRUPT ("decompresses to more than N bytes", naming
 * lim->flag) and nothing past the limit is given out, so a caller writing what it reads writes at
 * most max_plain bytes. The error is sticky. lim is copied (flag stays borrowed). */
IoReader *decompress_reader_new_limited(CompressKind kind, IoReader *src,
                                        const DecompressLimit *lim);

#endif
