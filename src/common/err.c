/* err: thread-local error messages; see err.h. */
#include "err.h"
#include "names.h"

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
    /* indexed by -code: every ERR_* is 0 or negative; a code's name is its spelling */
#define ERR_NAME(e) [-(e)] = #e
    static const char *const names[] = {
        [-ERR_OK] = "OK",      ERR_NAME(ERR_IO),          ERR_NAME(ERR_NOMEM),
        ERR_NAME(ERR_INVALID), ERR_NAME(ERR_NOT_FOUND),   ERR_NAME(ERR_CORRUPT),
        ERR_NAME(ERR_ETCD),    ERR_NAME(ERR_COMPACTED),   ERR_NAME(ERR_TIMEOUT),
        ERR_NAME(ERR_EXISTS),  ERR_NAME(ERR_UNSUPPORTED), ERR_NAME(ERR_CANCELED),
        ERR_NAME(ERR_GAP),     ERR_NAME(ERR_CONFLICT),    ERR_NAME(ERR_IMMUTABLE),
    };
#undef ERR_NAME
    return NAME_AT(names, -(long long)code, "ERR_UNKNOWN");
}
