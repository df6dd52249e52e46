/* store_gcs_int: what the GCS driver's own files share (store_gcs.c, the requests and operations;
 * store_gcs_compose.c, the writer). Not for tests: store_gcs.h is the driver's contract. */
#ifndef ETCDBR_STORE_GCS_INT_H
#define ETCDBR_STORE_GCS_INT_H

#include "objhttp.h"
#include "store_driver.h"

#include <stddef.h>
#include <stdint.h>

typedef struct GcsDriver GcsDriver;

/* One JSON API request: url owned by the caller; buffered into resp (may be NULL) or, when stream
 * is non-NULL, a streamed GET. A 401 with a token drops the token and tries once more with a
 * fresh one; a 401/403 message names the bucket and the API's reason. Errors as objhttp_do. */
int gcs_request(GcsDriver *d, const char *method, const char *url, const char *const *headers,
                size_t nh, const void *body, size_t body_len, size_t max_body,
                ObjHttpResponse *resp, ObjHttpStream **stream);

/* "<api>/storage/v1/b/<bucket>/o/<key>[suffix]" (key fully percent-encoded, '/' too). Owned;
 * NULL on allocation failure. */
char *gcs_object_url(const GcsDriver *d, const char *key, const char *suffix);

/* The object's metadata JSON into r (owned by r). Errors as gcs_request. */
int gcs_get_meta(GcsDriver *d, const char *key, ObjHttpResponse *r);

/* DELETE of one object; a missing one is ERR_NOT_FOUND without a new message. */
int gcs_delete_object(GcsDriver *d, const char *key, ObjHttpResponse *r);

/* Media upload of len bytes of body to object name; *generation (may be NULL; 0 when unknown)
 * from the answer. if_absent adds ifGenerationMatch=0 (HTTP 412: the object exists). */
int gcs_upload(GcsDriver *d, const char *name, const void *body, size_t len, int if_absent,
               int64_t *generation, ObjHttpResponse *r);

/* The writer of key (store_gcs_compose.c): chunks of gcs_chunk_size(min_chunk, n) bytes,
 * `parallel` in flight, folded `batch` at a time (1 to 31). *out owned (commit or abort frees
 * it). 0, ERR_INVALID (a key too long for its chunk names or shaped like a chunk) or ERR_NOMEM. */
int gcs_writer_open(GcsDriver *d, const char *key, int64_t min_chunk, int parallel, int batch,
                    StoreDriverWriter **out);

#endif
