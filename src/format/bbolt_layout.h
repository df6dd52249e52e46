/* bbolt_layout: the constants of bbolt's on-disk format (go.etcd.io/bbolt page.go, bucket.go,
 * db.go; version 2, the format of every bbolt release etcd 3.4-3.7 uses), shared by the db reader
 * (bbolt.c), the stream reader (bbolt_stream.c) and the bulk writer (bbolt_writer.c). Internal to
 * format/: the public contracts are bbolt.h, bbolt_stream.h and bbolt_writer.h. */
#ifndef ETCDBR_FORMAT_BBOLT_LAYOUT_H
#define ETCDBR_FORMAT_BBOLT_LAYOUT_H

#include <stdint.h>

#define BB_MAGIC 0xED0CDAEDu      /* db.go magic */
#define BB_VERSION 2u             /* db.go version */
#define BB_NO_FREELIST UINT64_MAX /* meta freelist pgid when the freelist is not synced */

enum {
    BB_PAGE_HEADER = 16,   /* page.go page: id u64, flags u16, count u16, overflow u32 */
    BB_ELEM_SIZE = 16,     /* branchPageElement and leafPageElement are both 16 bytes */
    BB_META_SIZE = 64,     /* db.go meta */
    BB_META_SUM_LEN = 56,  /* meta bytes covered by the FNV-1a checksum */
    BB_BUCKET_HEADER = 16, /* bucket.go bucket: root u64, sequence u64 */
    BB_FLAG_BRANCH = 0x01,
    BB_FLAG_LEAF = 0x02,
    BB_FLAG_META = 0x04,
    BB_FLAG_FREELIST = 0x10,
    BB_LEAF_BUCKET = 0x01, /* leaf element flag: the value is a bucket */
    BB_MAX_KEY = 32768,    /* bucket.go MaxKeySize */
    BB_MIN_PAGE = 512,     /* the smallest page size the readers accept */
    BB_MAX_PAGE = 65536,
    BB_MAX_DEPTH = 64, /* readers' bound on tree levels plus bucket nesting; real dbs use a few */
};

/* A meta page (db.go meta) as bbolt_meta_parse read it. */
typedef struct {
    int valid;     /* 1 when every check passed; else why says which failed */
    char why[128]; /* NUL-terminated */
    uint32_t page_size;
    uint64_t root, freelist, pgid, txid; /* pgid: the high water mark */
} BbMeta;

#define BB_META_ANY_OFFSET UINT64_MAX /* bbolt_meta_parse: where meta 1 lies is not checked */

/* Parses b (BB_PAGE_HEADER + BB_META_SIZE bytes: a page header, then the meta) as meta page
 * index (0 or 1) into *m and checks it as bbolt's meta.validate does, plus the page header, the
 * page size (a power of two in BB_MIN_PAGE..BB_MAX_PAGE), meta 1 lying at byte off == its page
 * size (unless off is BB_META_ANY_OFFSET) and root and freelist below the high water mark.
 * Defined in bbolt.c. */
void bbolt_meta_parse(const uint8_t *b, unsigned index, uint64_t off, BbMeta *m);

#endif
