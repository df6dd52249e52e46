/* err: thread-local error messages; see err.h. */
#include "err.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char err_buf[2048];

int err_setv(int code, const char *fmt, va_list ap) {
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    return code;
}

int err_set(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err_setv(code, fmt, ap);
    va_end(ap);
    return code;
}

int err_wrap(int code, const char *fmt, ...) {
    char prefix[1024];
    char old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err_buf - 3) n = sizeof err_buf - 3;
    memcpy(err_buf, prefix, n);
    memcpy(err_buf + n, ": ", 2);
    size_t room = sizeof err_buf - n - 3;
    size_t m = strnlen(old, room);
    memcpy(err_buf + n + 2, old, m);
    err_buf[n + 2 + m] = '\0';
    return code;
}

const char *err_msg(void) {
    return err_buf;
}

const char *err_name(int code) {
    switch (code) {
    case ERR_OK:
        return "OK";
    case ERR_IO:
        return "ERR_IO";
    case ERR_NOMEM:
        return "ERR_NOMEM";
    case ERR_INVALID:
        return "ERR_INVALID";
    case ERR_NOT_FOUND:
        return "ERR_NOT_FOUND";
    case ERR_CORRUPT:
        return "ERR_CORRUPT";
    case ERR_ETCD:
        return "ERR_ETCD";
    case ERR_COMPACTED:
        return "ERR_COMPACTED";
    case ERR_TIMEOUT:
        return "ERR_TIMEOUT";
    case ERR_EXISTS:
        return "ERR_EXISTS";
    case ERR_UNSUPPORTED:
        return "ERR_UNSUPPORTED";
    case ERR_CANCELED:
        return "ERR_CANCELED";
    case ERR_GAP:
        return "ERR_GAP";
    case ERR_CONFLICT:
        return "ERR_CONFLICT";
    case ERR_IMMUTABLE:
        return "ERR_IMMUTABLE";
    default:
        return "ERR_UNKNOWN";
    }
}
