/* objhttp_mpu: the multipart upload that S3 and the stores that copy its API (Alibaba OSS) share:
 * initiate (POST ?uploads, an UploadId back), upload part N (PUT ?partNumber=N&uploadId=..., its
 * ETag back), complete (POST ?uploadId=... with the part list as XML) or abort (DELETE
 * ?uploadId=...); an object that fits in one part is one plain PUT. This module owns the flow:
 * the parts in flight (objhttp_pw_*), the part limit, the ETags, the complete document, and
 * aborting an upload that did not complete. A driver supplies only how each step goes on the
 * wire: its URL and query, its headers (server-side encryption, Content-MD5, "do not
 * overwrite"), its signature, and how its server says "already exists". Source of the protocol:
 * the S3 API reference (CreateMultipartUpload, UploadPart, CompleteMultipartUpload,
 * AbortMultipartUpload) and OSS's (InitiateMultipartUpload, UploadPart, CompleteMultipartUpload,
 * AbortMultipartUpload). */
#ifndef ETCDBR_STORE_OBJHTTP_MPU_H
#define ETCDBR_STORE_OBJHTTP_MPU_H

#include "objhttp.h"
#include "store_driver.h"

typedef enum {
    OBJHTTP_MPU_PUT,      /* the whole object in one request (it fit in one part) */
    OBJHTTP_MPU_INITIATE, /* start the upload; the answer holds the UploadId */
    OBJHTTP_MPU_PART,     /* one part; the answer's ETag header names it */
    OBJHTTP_MPU_COMPLETE, /* the part list (body: the XML of objhttp_complete_xml) */
    OBJHTTP_MPU_ABORT,    /* drop the parts of an upload that will not complete */
} ObjHttpMpuStep;

/* One step as the flow asks for it; every pointer borrowed for the call. */
typedef struct ObjHttpMpuCall {
    ObjHttpMpuStep step;
    const char *key;
    const char *upload_id; /* NULL for PUT and INITIATE */
    int part;              /* PART: the part's number, 1-based */
    const void *body;      /* PUT: the object; PART: the part; COMPLETE: the part list */
    size_t len;
    uint64_t total; /* COMPLETE: the object's size in bytes (for a driver that checks it) */
} ObjHttpMpuCall;

/* What differs between the stores that speak this protocol. */
typedef struct ObjHttpMpuOps {
    const char *what; /* the provider in messages: "S3", "OSS" */
    int max_parts;    /* the store's part limit (S3 and OSS: 10 000) */
    /* Sends one step for drv and leaves the answer in resp (the flow clears it). 0, ERR_EXISTS
     * when the store says the key exists (PUT, INITIATE or COMPLETE with "do not overwrite"),
     * ERR_NOT_FOUND (ABORT of an upload that is gone), or another ERR_* with a message. */
    int (*send)(void *drv, const ObjHttpMpuCall *c, ObjHttpResponse *resp);
    /* The UploadId of an INITIATE answer, owned; 0 or ERR_CORRUPT. */
    int (*parse_upload_id)(const char *xml, size_t len, char **upload_id);
    /* Bytes of part num (1-based), > 0. */
    size_t (*part_size)(void *drv, int num);
} ObjHttpMpuOps;

/* A writer of key through ops on drv with up to parallel parts in flight (memory: (parallel + 1)
 * x part size). ops and drv are borrowed and must outlive the writer; key is copied. Its commit
 * sends PUT when the object fits in one part, else finishes the parts and sends COMPLETE; a
 * failed complete aborts the upload and fails (never reports success for an object not
 * stored); abort stops the parts and sends ABORT (a failure is logged at warn: the parts stay
 * until the bucket's lifecycle rules remove them). 0 or ERR_NOMEM; *out owned by the caller
 * until commit or abort. */
int objhttp_mpu_open(const ObjHttpMpuOps *ops, void *drv, int parallel, const char *key,
                     StoreDriverWriter **out);

#endif
