/* gzip_tool: our gzip writer and reader between stdin and stdout, for the Go compatibility test
 * (tests/integration/test_gzip_go_compat.sh) and the benchmark (bench/gzip.sh):
 *   gzip_tool [--mode parallel|single] [--threads N] [--block BYTES]   compress stdin
 *   gzip_tool -d                                                       decompress stdin
 *   gzip_tool --kind gzip|zlib|lzw|zstd [-d]          another codec (compression policy names)
 * Both stream through the same io filters as snapshots (256 KiB copies), so memory is the
 * writer's own. Exit 0 on success; 1 with "gzip_tool: <ERR_NAME>: <message>" on stderr; 2 on
 * usage errors. */
#include "codec/compress.h"
#include "codec/io.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void) {
    fprintf(stderr,
            "usage: gzip_tool [--kind gzip|zlib|lzw|zstd] [--mode parallel|single] [--threads N] "
            "[--block BYTES] [-d]\n");
    return 2;
}

int main(int argc, char **argv) {
    GzipWriterOptions opt = {GZIP_MODE_PARALLEL, 0, 0};
    int decompress = 0;
    CompressKind kind = COMPRESS_GZIP;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-d") == 0) {
            decompress = 1;
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            if (compress_parse_gzip_mode(argv[++i], &opt.mode)) return usage();
        } else if (strcmp(argv[i], "--kind") == 0 && i + 1 < argc) {
            if (compress_parse_policy(argv[++i], &kind)) return usage();
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            opt.threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--block") == 0 && i + 1 < argc) {
            opt.block_bytes = (size_t)strtoull(argv[++i], NULL, 10);
        } else {
            return usage();
        }
    }
    int rc = ERR_NOMEM;
    IoReader *in = io_fd_reader_new(STDIN_FILENO);
    IoWriter *out = io_fd_writer_new(STDOUT_FILENO);
    IoReader *dec = NULL;
    IoWriter *enc = NULL;
    if (!in || !out) goto done;
    if (decompress) {
        dec = decompress_reader_new(kind, in);
        if (!dec) goto done;
        rc = io_copy(dec, out, NULL);
    } else {
        enc = kind == COMPRESS_GZIP ? compress_gzip_writer_new(&opt, out)
                                    : compress_writer_new(kind, out);
        if (!enc) goto done;
        rc = io_copy(in, enc, NULL);
        if (!rc) rc = io_finish(enc);
    }
done:
    io_writer_free(enc);
    io_reader_free(dec);
    io_writer_free(out);
    io_reader_free(in);
    if (rc) {
        fprintf(stderr, "gzip_tool: %s: %s\n", err_name(rc), err_msg());
        return 1;
    }
    return 0;
}
