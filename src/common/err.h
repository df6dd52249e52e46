/* err: project error codes and a thread-local error message.
 * Every function that can fail returns 0 or a negative ERR_* code and, on failure, leaves a
 * message naming the object (path, endpoint, method, key) readable with err_msg() on the same
 * thread until the next err_set(). */
#ifndef ETCDBR_ERR_H
#define ETCDBR_ERR_H

#include <stdarg.h>

enum {
    ERR_OK = 0,
    ERR_IO = -1,           /* file or socket I/O failed (errno text in the message) */
    ERR_NOMEM = -2,        /* allocation failed */
    ERR_INVALID = -3,      /* bad argument, flag or configuration */
    ERR_NOT_FOUND = -4,    /* object, key or file absent */
    ERR_CORRUPT = -5,      /* outside bytes fail a format or hash check */
    ERR_ETCD = -6,         /* etcd answered with a gRPC error or could not be reached */
    ERR_COMPACTED = -7,    /* the requested revision was compacted */
    ERR_TIMEOUT = -8,      /* a deadline passed */
    ERR_EXISTS = -9,       /* target exists and must not be overwritten */
    ERR_UNSUPPORTED = -10, /* feature or format not supported */
    ERR_CANCELED = -11,    /* stopped by a signal or by the caller */
    ERR_GAP = -12,         /* revisions are not contiguous */
    ERR_CONFLICT = -13,    /* the store holds another backup history (docs/store-history.md) */
    ERR_IMMUTABLE = -14,   /* the store refuses to delete an object under an immutability policy
                              (docs/go-tool.md §6.4): GC skips it, it is not a failure */
};

/* Sets the thread-local message (printf format) and returns code, so callers can write
 * `return err_set(ERR_IO, "open %s: %s", path, strerror(errno));`. */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int err_setv(int code, const char *fmt, va_list ap);

/* Prepends "<context>: " to the current message, keeping code; returns code. */
int err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The current thread's last message; borrowed, valid until the next err_* call on this thread. */
const char *err_msg(void);

/* Short symbolic name of a code ("ERR_IO"); static storage. */
const char *err_name(int code);

#endif
