/* lzw: Go's compress/lzw stream format with LSB bit order and literal width 8 (the Go tool's ".Z").
 * GIF-style LZW without any header: clear = 256, EOF = 257, codes grow from 9 to 12 bits, the
 * writer starts with a clear code, sends another whenever the table fills, and ends with EOF.
 * Used through compress.h; declared here so the codec module and its tests can reach it. */
#ifndef ETCDBR_LZW_H
#define ETCDBR_LZW_H

#include "io.h"

/* Writer compressing into next (borrowed); output is byte-identical to Go's
 * lzw.NewWriter(w, lzw.LSB, 8) for the same input, however the input is split into writes.
 * finish() writes the last code, the EOF code and the final partial byte. About 80 KiB of
 * memory. Returns NULL (ERR_NOMEM set) on allocation failure. */
IoWriter *lzw_writer_new(IoWriter *next);

/* Reader decoding src (borrowed) the way Go's lzw.NewReader(r, lzw.LSB, 8) does. A stream
 * without the EOF code, an invalid code, or any byte after the byte holding the EOF code gives
 * ERR_CORRUPT. About 90 KiB of memory. Returns NULL (ERR_NOMEM set) on allocation failure. */
IoReader *lzw_reader_new(IoReader *src);

#endif
