/* objhttp_driver: what the skeletons of the HTTP store drivers (GCS, ABS, Swift) share beyond the
 * client of objhttp.h: reading their configuration (container, endpoint override, the client's
 * TLS and timeout settings, test knobs from the environment), the loop of a paged listing, header
 * lines of secrets, and the size a HEAD answers. Each driver keeps what differs: its URLs,
 * headers, signature and field names. */
#ifndef ETCDBR_OBJHTTP_DRIVER_H
#define ETCDBR_OBJHTTP_DRIVER_H

#include "objhttp.h"
#include "store_driver.h"

#include <stdint.h>

/* The state every HTTP driver's own starts with (its first member, so the StoreDriver * the
 * generic layer holds is one): what its vtable's describe and free share. */
typedef struct ObjHttpDriver {
    StoreDriver base;
    ObjHttp *http;     /* owned (objhttp_driver_client) */
    char *container;   /* the bucket or container (owned) */
    char *describe;    /* "<name>:<container>" (owned) */
    int64_t min_chunk; /* bytes of a part: cfg->min_chunk_size, else the driver's default */
    int parallel;      /* parts in flight: cfg->max_parallel_chunk_uploads, else its default */
    int list_page;     /* a listing's page size a test asked for; 0 = the server's */
    size_t max_key;   /* longest key in bytes: OBJHTTP_DRIVER_MAX_KEY unless the driver lowers it */
    int key_no_slash; /* keys may not start with '/' or '\\' (OSS) */
    /* the ranged GET of objhttp_driver_open_read: its ObjHttpResumable * is an
     * ObjHttpDriverReader *; set by the driver after objhttp_driver_init */
    int (*read_open)(ObjHttpResumable *r);
} ObjHttpDriver;

/* The key bound of S3, ABS, GCS and Swift (bytes). */
#define OBJHTTP_DRIVER_MAX_KEY 1024

/* The reader objhttp_driver_open_read gives out: the resumable download, the driver and the
 * version of the object the first answer pinned (its ETag or generation; "" until pinned), so a
 * resumed read never splices another object. */
typedef struct ObjHttpDriverReader {
    ObjHttpResumable r; /* first: key, offset, stream, resumes, skip */
    ObjHttpDriver *d;
    char pin[OBJHTTP_ETAG_MAX + 1];
} ObjHttpDriverReader;

/* Fills d (zeroed by the caller) for vt (vt->name names the driver in messages): the container
 * (objhttp_cfg_container; noun "bucket" or "container"), describe, and the part size and
 * parallelism of cfg, or chunk and parallel when cfg leaves them unset (<= 0). 0, ERR_INVALID (no
 * container) or ERR_NOMEM. */
int objhttp_driver_init(ObjHttpDriver *d, const StoreDriverVt *vt, const StoreConfig *cfg,
                        const char *noun, int64_t chunk, int parallel);
/* d->http for cfg (objhttp_cfg_client). Errors as objhttp_new. */
int objhttp_driver_client(ObjHttpDriver *d, const StoreConfig *cfg);
/* A StoreDriverVt describe: the describe string of an ObjHttpDriver (borrowed). */
const char *objhttp_driver_describe(const StoreDriver *drv);
/* Frees what objhttp_driver_init and objhttp_driver_client set (not d itself). */
void objhttp_driver_clear(ObjHttpDriver *d);
/* objhttp_key_ok for d's store: its name, max_key and key_no_slash; op names the operation. */
int objhttp_driver_key_ok(const ObjHttpDriver *d, const char *key, const char *op);
/* A StoreDriverVt open_read for an ObjHttpDriver: checks key (objhttp_driver_key_ok), then starts
 * an ObjHttpDriverReader at offset (bytes) whose ranged GET is d->read_open
 * (objhttp_resumable_start). *out owned (io_reader_free); NULL on error: ERR_INVALID (key),
 * ERR_NOMEM, or read_open's error. */
int objhttp_driver_open_read(StoreDriver *drv, const char *key, uint64_t offset, IoReader **out);

/* printf into an owned string; NULL on allocation failure (no message set). */
char *objhttp_strfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The bucket or container (noun: "bucket", "container") cfg names: cfg->container, else
 * $<prefix>STORAGE_CONTAINER (the Go tool's variable, docs/go-tool.md §12). *out borrowed from
 * cfg or the environment. 0, or ERR_INVALID naming both sources when neither is set. */
int objhttp_cfg_container(const StoreConfig *cfg, const char *what, const char *noun,
                          const char **out);

/* cfg->endpoint_override when set: it must start with http:// or https://; trailing '/' dropped.
 * *out owned (NULL when no override). 0, ERR_INVALID (message quotes the override) or ERR_NOMEM. */
int objhttp_cfg_endpoint(const StoreConfig *cfg, const char *what, char **out);

/* The driver's client (objhttp_new) with cfg's ca_file, insecure_skip_verify and timeout_ms and
 * the default retry policy; what and container name it in messages. *out owned (objhttp_free).
 * Errors as objhttp_new. */
int objhttp_cfg_client(const StoreConfig *cfg, const char *what, const char *container,
                       ObjHttp **out);

/* $name (a test knob such as a listing's page size) as a decimal integer in [lo, hi] into *out;
 * *out unchanged when the variable is unset or empty. 0, or ERR_INVALID naming the variable, its
 * value and the range. */
int objhttp_env_int(const char *name, int lo, int hi, int *out);

/* The header line "name: value" (owned; it may hold a secret: free with objhttp_free_secret).
 * NULL on allocation failure. */
char *objhttp_header_line(const char *name, const char *value);

/* For an ObjHttpAuthHook: appends line (copied by curl) to the attempt's *headers. 0 or ERR_NOMEM
 * (what names the driver in the message). */
int objhttp_hook_header(struct curl_slist **headers, const char *line, const char *what);

/* The Content-Length of a response (a HEAD's object size) into *size: 0, or -1 when it is absent,
 * not a decimal number or negative (*size then unspecified). */
int objhttp_response_length(const ObjHttpResponse *r, int64_t *size);

/* The query pairs a listing page adds to the n in names/values (room for n + 2): page_name with
 * page_size formatted into page (16 bytes) when page_size > 0, and token_name=token when token is
 * set (both borrowed). Returns the new count. */
size_t objhttp_list_pairs(const char **names, const char **values, size_t n, const char *page_name,
                          int page_size, char page[16], const char *token_name, const char *token);

/* The entries of a listing page as a driver passes them on: only keys starting with prefix reach
 * cb, so a server that answers with a sibling prefix's keys never leaks them. All borrowed. */
typedef struct ObjHttpPrefixFilter {
    const char *prefix;
    StoreDriverListCb cb;
    void *ctx;
} ObjHttpPrefixFilter;

/* A listing parser's callback over an ObjHttpPrefixFilter (ctx): cb's return for a key under the
 * prefix, 0 (skipped) for any other. */
int objhttp_prefix_filter(void *ctx, const char *key, int64_t size);

/* One page of a listing, for objhttp_list_pages: requests the page after token (NULL: the first)
 * and hands its entries to the driver's callback; *next gets the token of the next page (owned;
 * NULL when this was the last page). 0 or an ERR_* with err_set (a callback's return as is). */
typedef int (*ObjHttpPageFn)(void *ctx, const char *token, char **next);

/* Every page of a listing of prefix in container, each first checked by objhttp_listing_page
 * (the page, time, repeated-token and stop bounds of objhttp.h). 0, the first page's error, or
 * ERR_IO "<what> list: <noun> <container> does not exist" when a page was ERR_NOT_FOUND. */
int objhttp_list_pages(const char *what, const char *noun, const char *container,
                       const char *prefix, ObjHttpPageFn page, void *ctx);

/* The state of a filtered listing (objhttp_list_filtered) that its page function gets as ctx. */
typedef struct ObjHttpListFiltered {
    void *drv;             /* the driver (borrowed) */
    ObjHttpPrefixFilter f; /* the prefix and the caller's callback; pass &f to the parser */
    char page[16];         /* the page size as text ("" when page_size was <= 0) */
    int pages;             /* pages requested so far; the page function counts them */
} ObjHttpListFiltered;

/* objhttp_list_pages over an ObjHttpListFiltered for drv, prefix, cb and ctx, page_size (entries,
 * <= 0: the server's) formatted into its page. Returns as objhttp_list_pages. */
int objhttp_list_filtered(const char *what, const char *noun, const char *container, void *drv,
                          int page_size, const char *prefix, StoreDriverListCb cb, void *ctx,
                          ObjHttpPageFn page);

#endif
