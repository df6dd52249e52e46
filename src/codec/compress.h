/* compress: compression stream filters and the object-name suffixes that select them.
 * Formats as the Go tool writes them (seed-spec §5): gzip (.gz, RFC 1952, mtime 0, OS 255),
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

/* Writer compressing into next (borrowed). finish() writes the format's trailer into next.
 * Returns NULL on allocation failure. */
IoWriter *compress_writer_new(CompressKind kind, IoWriter *next);

/* Reader decompressing src (borrowed). Truncated or corrupt input yields ERR_CORRUPT from read,
 * never a silent short stream. Returns NULL on allocation failure. */
IoReader *decompress_reader_new(CompressKind kind, IoReader *src);

#endif
