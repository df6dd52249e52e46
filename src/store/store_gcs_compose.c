/* store_gcs_compose: the GCS driver's writer (store_gcs_int.h). An object smaller than one chunk
 * is one media upload; a larger one streams chunk objects "<key>/%010d" (1-based, up to
 * max-parallel-chunk-uploads in flight), folds every `batch` of them into an intermediate composite
 * "<key>/1%09d" and composes the last intermediate and the remaining chunks into <key> with
 * ifGenerationMatch=0 (atomic no replace), then deletes the chunk objects. */
#include "../common/err.h"
#include "../common/log.h"
#include "objhttp.h"
#include "store_gcs.h"
#include "store_gcs_int.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GCS_INTERMEDIATE_BASE 1000000000 /* "<key>/1000000001": intermediates sort after chunks */

typedef struct GcsWriter {
    StoreDriverWriter base;
    IoWriter io;
    GcsDriver *d;
    int64_t min_chunk;
    int batch; /* chunks per intermediate composite */
    char *key;
    char upload_id[33];    /* random, in the final object's metadata: recognizes our own compose */
    ObjHttpPartWriter *pw; /* the chunks (objhttp.h) */
    int n_chunks;          /* handed to the uploaders */
    int first_open;        /* first chunk number not yet folded into an intermediate */
    int n_inter;           /* intermediates made; the newest is the current one */
    int64_t inter_gen;
    int64_t *gens; /* generation of chunk n at gens[n] (0: not uploaded); guarded by mu */
    pthread_mutex_t mu;
} GcsWriter;

static void chunk_name(const GcsWriter *w, int num, char *out, size_t cap) {
    snprintf(out, cap, "%s/%010d", w->key, num);
}

/* Uploads chunk num (on an upload thread) and records its generation. */
static int put_chunk(void *ctx, int num, const void *data, size_t len) {
    GcsWriter *w = ctx;
    char name[GCS_MAX_KEY + 16];
    chunk_name(w, num, name, sizeof name);
    ObjHttpResponse r = {0};
    int64_t gen = 0;
    int rc = gcs_upload(w->d, name, data, len, 0, &gen, &r);
    objhttp_response_clear(&r);
    if (rc) return err_wrap(rc, "GCS write %s: chunk %d", w->key, num);
    pthread_mutex_lock(&w->mu);
    w->gens[num] = gen ? gen : -1; /* -1: uploaded, generation unknown */
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* Waits until no chunk is queued or uploading; the first upload error, if any. */
static int wait_idle(GcsWriter *w) {
    return objhttp_pw_wait(w->pw);
}

/* Best-effort delete of a temporary object (logged at debug when it fails). */
static void drop_temp(GcsWriter *w, const char *name) {
    ObjHttpResponse r = {0};
    int rc = gcs_delete_object(w->d, name, &r);
    if (rc && rc != ERR_NOT_FOUND)
        log_warn("GCS write %s: could not delete the temporary object %s: %s", w->key, name,
                 err_msg());
    objhttp_response_clear(&r);
}

/* Deletes the chunks first..last and the intermediate number inter (0 = none). */
static void drop_sources(GcsWriter *w, int inter, int first, int last) {
    char name[GCS_MAX_KEY + 16];
    if (inter > 0) {
        chunk_name(w, GCS_INTERMEDIATE_BASE + inter, name, sizeof name);
        drop_temp(w, name);
    }
    for (int n = first; n <= last; n++) {
        if (!w->gens[n]) continue;
        chunk_name(w, n, name, sizeof name);
        drop_temp(w, name);
        w->gens[n] = 0;
    }
}

/* Composes [intermediate inter (0 = none)] + chunks first..last into dest. final: dest is the
 * object (ifGenerationMatch=0, our upload id in its metadata). */
static int compose(GcsWriter *w, int inter, int first, int last, const char *dest, int final,
                   int64_t *dest_gen, ObjHttpResponse *r) {
    json_t *src = json_array();
    char name[GCS_MAX_KEY + 16];
    int rc = 0;
    char *body = NULL, *url = NULL;
    if (!src) goto nomem;
    for (int n = inter > 0 ? 0 : first; n <= last; n = n == 0 ? first : n + 1) {
        int num = n == 0 ? GCS_INTERMEDIATE_BASE + inter : n;
        int64_t gen = n == 0 ? w->inter_gen : w->gens[n];
        chunk_name(w, num, name, sizeof name);
        json_t *o = json_pack("{s:s}", "name", name);
        if (!o) goto nomem;
        /* exactly the generation we uploaded: a concurrent writer of the same key cannot mix
         * its chunks into ours */
        if (gen > 0)
            json_object_set_new(o, "objectPreconditions",
                                json_pack("{s:I}", "ifGenerationMatch", (json_int_t)gen));
        if (json_array_append_new(src, o) != 0) goto nomem;
        if (n == 0 && first > last) break;
    }
    json_t *req =
        json_pack("{s:o,s:{s:s,s:{s:s}}}", "sourceObjects", src, "destination", "contentType",
                  "application/octet-stream", "metadata", "etcdbr-upload", w->upload_id);
    src = NULL;
    if (!req) goto nomem;
    body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    url = gcs_object_url(w->d, dest, final ? "/compose?ifGenerationMatch=0" : "/compose");
    if (!body || !url) goto nomem;
    const char *h[1] = {"Content-Type: application/json"};
    rc = gcs_request(w->d, "POST", url, h, 1, body, strlen(body), 0, r, NULL);
    if (rc == 0 && dest_gen && gcs_meta_int(r->body, r->body_len, "generation", dest_gen) != 0)
        *dest_gen = 0;
    goto done;
nomem:
    rc = err_set(ERR_NOMEM, "GCS write %s: out of memory", w->key);
done:
    json_decref(src);
    free(body);
    free(url);
    return rc;
}

/* Folds the intermediate and the open chunks (all uploaded) into the next intermediate. */
static int fold(GcsWriter *w) {
    int rc = wait_idle(w);
    if (rc) return rc;
    int next = w->n_inter + 1, last = w->n_chunks;
    char dest[GCS_MAX_KEY + 16];
    chunk_name(w, GCS_INTERMEDIATE_BASE + next, dest, sizeof dest);
    ObjHttpResponse r = {0};
    int64_t gen = 0;
    rc = compose(w, w->n_inter, w->first_open, last, dest, 0, &gen, &r);
    objhttp_response_clear(&r);
    if (rc)
        return err_wrap(rc, "GCS write %s: composing chunks %d-%d", w->key, w->first_open, last);
    drop_sources(w, w->n_inter, w->first_open, last);
    w->n_inter = next;
    w->inter_gen = gen;
    w->first_open = last + 1;
    return 0;
}

/* Before chunk num goes to the uploaders: folds first when the open chunks make a full batch;
 * refuses a chunk beyond GCS's component limit. */
static int before_chunk(void *ctx, int num) {
    GcsWriter *w = ctx;
    if (num - w->first_open >= w->batch) {
        int rc = fold(w);
        if (rc) return rc;
    }
    if (num > GCS_MAX_COMPONENTS - 1)
        return err_set(ERR_INVALID,
                       "GCS write %s: more than %d chunks (%llu bytes): the object would exceed "
                       "GCS's %d components; raise --min-chunk-size",
                       w->key, GCS_MAX_COMPONENTS - 1, (unsigned long long)objhttp_pw_total(w->pw),
                       GCS_MAX_COMPONENTS);
    w->n_chunks = num;
    return 0;
}

static size_t chunk_size(void *ctx, int num) {
    return (size_t)gcs_chunk_size(((GcsWriter *)ctx)->min_chunk, num);
}

static IoWriter *writer_io(StoreDriverWriter *sw) {
    return objhttp_pw_io(((GcsWriter *)sw)->pw);
}

/* Stops the uploaders (queued chunks are skipped once failed is set) and frees w; discard
 * deletes every temporary object uploaded so far. */
static void writer_free(GcsWriter *w, int discard) {
    objhttp_pw_stop(w->pw, discard);
    if (discard) drop_sources(w, w->n_inter, w->first_open, w->n_chunks);
    objhttp_pw_free(w->pw, discard);
    pthread_mutex_destroy(&w->mu);
    free(w->gens);
    free(w->key);
    free(w);
}

/* After a refused conditional write (412): ours anyway if a retry of our own request got there
 * first (the object carries our upload id, or for a single upload our bytes' MD5). */
static int exists_is_ours(GcsWriter *w, const unsigned char *data, size_t len) {
    ObjHttpResponse r = {0};
    int ours = 0;
    if (gcs_get_meta(w->d, w->key, &r) == 0) {
        json_t *root = json_loadb(r.body, r.body_len, 0, NULL);
        const char *id =
            json_string_value(json_object_get(json_object_get(root, "metadata"), "etcdbr-upload"));
        if (id && strcmp(id, w->upload_id) == 0) ours = 1;
        const char *md5 = json_string_value(json_object_get(root, "md5Hash"));
        int64_t size = -1;
        if (!ours && data && md5 && gcs_meta_int(r.body, r.body_len, "size", &size) == 0 &&
            size == (int64_t)len) {
            unsigned char dig[EVP_MAX_MD_SIZE];
            unsigned int dl = 0;
            char b64[64];
            if (EVP_Digest(data, len, dig, &dl, EVP_md5(), NULL) == 1) {
                EVP_EncodeBlock((unsigned char *)b64, dig, (int)dl);
                ours = strcmp(b64, md5) == 0;
            }
        }
        json_decref(root);
    }
    objhttp_response_clear(&r);
    return ours;
}

static int writer_commit(StoreDriverWriter *sw) {
    GcsWriter *w = (GcsWriter *)sw;
    int rc = objhttp_pw_failed(w->pw);
    ObjHttpResponse r = {0};
    if (!rc && w->n_chunks == 0) { /* one conditional media upload */
        size_t len;
        const unsigned char *body = objhttp_pw_rest(w->pw, &len);
        rc = gcs_upload(w->d, w->key, body, len, 1, NULL, &r);
        if (rc != 0 && r.status == 412) {
            rc = exists_is_ours(w, body, len)
                     ? 0
                     : err_set(ERR_EXISTS, "GCS write %s: the object already exists (HTTP 412)",
                               w->key);
        }
        goto done;
    }
    if (rc || (rc = objhttp_pw_finish(w->pw)) != 0) goto done;
    rc = compose(w, w->n_inter, w->first_open, w->n_chunks, w->key, 1, NULL, &r);
    if (rc != 0 && r.status == 412) {
        rc =
            exists_is_ours(w, NULL, 0)
                ? 0
                : err_set(ERR_EXISTS, "GCS write %s: the object already exists (HTTP 412)", w->key);
    } else if (rc) {
        err_wrap(rc, "GCS write %s: composing the object", w->key);
    }
    if (rc == 0) {
        /* the object is complete: the chunks are leftovers now (the Go tool leaves them to its
         * garbage collection; we delete them right away) */
        drop_sources(w, w->n_inter, w->first_open, w->n_chunks);
        w->n_inter = 0;
        w->first_open = w->n_chunks + 1;
    }
done:
    objhttp_response_clear(&r);
    writer_free(w, rc != 0);
    return rc;
}

static void writer_abort(StoreDriverWriter *sw) {
    writer_free((GcsWriter *)sw, 1);
}

static const StoreDriverWriterVt writer_vt = {writer_io, writer_commit, writer_abort};

int gcs_writer_open(GcsDriver *d, const char *key, int64_t min_chunk, int parallel, int batch,
                    StoreDriverWriter **out) {
    *out = NULL;
    int rc = objhttp_key_ok("GCS", "write", key, GCS_MAX_KEY, 0);
    if (rc) return rc;
    if (strlen(key) > GCS_MAX_KEY - 11)
        return err_set(ERR_INVALID, "GCS write: key \"%.64s\" too long for its chunk names", key);
    if (gcs_is_chunk_key(key))
        return err_set(ERR_INVALID,
                       "GCS write: key \"%.64s\" ends in /<10 digits>, the shape of chunk objects",
                       key);
    GcsWriter *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key)) ||
        !(w->gens = calloc(GCS_MAX_COMPONENTS + 1, sizeof *w->gens))) {
        if (w) free(w->key);
        free(w);
        return err_set(ERR_NOMEM, "GCS write: out of memory");
    }
    unsigned char rnd[16];
    if (RAND_bytes(rnd, sizeof rnd) != 1) { /* unique enough to tell our own upload */
        static atomic_uint seq;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                     ((uint64_t)atomic_fetch_add(&seq, 1) << 52) ^ (uint64_t)(uintptr_t)w;
        for (size_t i = 0; i < sizeof rnd; i++)
            rnd[i] = (unsigned char)(v >> (8 * (i % 8)));
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(w->upload_id + 2 * i, 3, "%02x", rnd[i]);
    w->base.vt = &writer_vt;
    w->d = d;
    w->min_chunk = min_chunk;
    w->batch = batch;
    w->first_open = 1;
    pthread_mutex_init(&w->mu, NULL);
    ObjHttpPartWriterConfig pc = {.what = "GCS",
                                  .key = key,
                                  .parallel = parallel,
                                  .eager = 1,
                                  .part_size = chunk_size,
                                  .before = before_chunk,
                                  .put = put_chunk,
                                  .ctx = w};
    if ((rc = objhttp_pw_new(&pc, &w->pw))) {
        writer_free(w, 0);
        return rc;
    }
    *out = &w->base;
    return 0;
}
