/* proc: see proc.h. */
#include "proc.h"
#include "err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Up to cap - 1 bytes of path into buf, NUL-terminated; *len the bytes read. 0 or ERR_IO. */
static int read_small(const char *path, char *buf, size_t cap, size_t *len) {
    *len = 0;
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(ERR_IO, "open %s: %s", path, strerror(errno));
    while (*len + 1 < cap) {
        ssize_t r = read(fd, buf + *len, cap - 1 - *len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return err_set(ERR_IO, "read %s: %s", path, strerror(e));
        }
        if (r == 0) break;
        *len += (size_t)r;
    }
    close(fd);
    buf[*len] = '\0';
    return 0;
}

/* The decimal after "Name:" and blanks in [p, end), or -1 (no digit, or beyond 2^53). */
static int64_t field_value(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    int64_t v = 0;
    const char *d = p;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        if (v > ((int64_t)1 << 53)) return -1;
        p++;
    }
    return p == d ? -1 : v;
}

void proc_status_parse(const char *text, size_t len, ProcStatus *out) {
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {{"VmRSS:", offsetof(ProcStatus, vm_rss_kib)},
                  {"VmHWM:", offsetof(ProcStatus, vm_hwm_kib)},
                  {"VmSize:", offsetof(ProcStatus, vm_size_kib)},
                  {"Threads:", offsetof(ProcStatus, threads)}};
    int seen[sizeof fields / sizeof fields[0]] = {0};
    *out = (ProcStatus){-1, -1, -1, -1};
    const char *p = text, *end = text ? text + len : NULL;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            size_t fl = strlen(fields[i].name);
            if (seen[i] || (size_t)(eol - p) < fl || memcmp(p, fields[i].name, fl) != 0) continue;
            seen[i] = 1;
            *(int64_t *)((char *)out + fields[i].off) = field_value(p + fl, eol);
        }
        p = nl ? nl + 1 : end;
    }
}

int proc_status_read(ProcStatus *out) {
    char buf[PROC_FILE_MAX];
    size_t len = 0;
    int rc = read_small("/proc/self/status", buf, sizeof buf, &len);
    proc_status_parse(rc ? "" : buf, rc ? 0 : len, out);
    return rc;
}

int64_t proc_peak_rss_kib(void) {
    ProcStatus st;
    proc_status_read(&st);
    return st.vm_hwm_kib;
}

/* A sanitizer's allocator replaces glibc's malloc: mallinfo2 then sees none of its blocks. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_UNSEEN 1
#else
#define HEAP_UNSEEN 0
#endif

const char *proc_heap_source(void) {
#if HEAP_UNSEEN
    return "sanitizer allocator (not visible to mallinfo2)";
#elif defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    return "glibc mallinfo2";
#else
    return "unavailable";
#endif
}

void proc_heap(ProcHeap *out) {
#if !HEAP_UNSEEN && defined(__GLIBC__) &&                                                          \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    out->arena = (int64_t)mi.arena;
    out->in_use = (int64_t)(mi.uordblks + mi.hblkhd);
    out->free = (int64_t)mi.fordblks;
    out->mmapped = (int64_t)mi.hblkhd;
    out->releasable = (int64_t)mi.keepcost;
#else
    *out = (ProcHeap){-1, -1, -1, -1, -1};
#endif
}

char proc_stat_state(const char *text, size_t len) {
    const char *close = NULL;
    for (size_t i = len; i > 0; i--)
        if (text[i - 1] == ')') {
            close = text + i - 1;
            break;
        }
    if (!close || close + 2 >= text + len || close[1] != ' ') return '?';
    char c = close[2];
    return c && strchr("RSDTtZXIPWKx", c) ? c : '?';
}

const char *proc_state_name(char state) {
    switch (state) {
    case 'R':
        return "running";
    case 'S':
        return "sleeping";
    case 'D':
        return "disk sleep";
    case 'T':
        return "stopped";
    case 't':
        return "tracing stop";
    case 'Z':
        return "zombie";
    case 'X':
    case 'x':
        return "dead";
    case 'I':
        return "idle";
    case 'P':
        return "parked";
    case 'W':
        return "waking";
    case 'K':
        return "wakekill";
    default:
        return "unknown";
    }
}

/* proc_name_clean; with whole, a newline or NUL is a byte like others ('?'), not the end. */
static void clean(const char *text, size_t len, char *out, size_t cap, int whole) {
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!whole && (c == '\n' || c == '\0')) break;
        out[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[k] = '\0';
}

void proc_name_clean(const char *text, size_t len, char *out, size_t cap) {
    clean(text, len, out, cap, 0);
}

/* A directory entry's name as a non-negative int (a tid, an fd), or -1. */
static int entry_number(const char *name) {
    long v = 0;
    if (!*name) return -1;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > 0x7fffffffL) return -1;
    }
    return (int)v;
}

static void thread_read(int tid, ProcThread *t) {
    char path[64], buf[512];
    size_t len = 0;
    t->tid = tid;
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    if (read_small(path, buf, sizeof buf, &len) == 0)
        proc_name_clean(buf, len, t->name, sizeof t->name);
    else
        snprintf(t->name, sizeof t->name, "?");
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    /* the state follows the name (at most 64 bytes in parentheses): the first 512 bytes hold it */
    t->state = read_small(path, buf, sizeof buf, &len) == 0 ? proc_stat_state(buf, len) : '?';
}

int proc_threads(ProcThread *out, size_t cap, size_t *n, size_t *total) {
    *n = *total = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return err_set(ERR_IO, "open /proc/self/task: %s", strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        int tid = entry_number(e->d_name);
        if (tid < 0) continue;
        (*total)++;
        if (*n < cap) thread_read(tid, &out[(*n)++]);
    }
    closedir(d);
    return 0;
}

static int by_fd(const void *a, const void *b) {
    const ProcFd *x = a, *y = b;
    return (x->fd > y->fd) - (x->fd < y->fd);
}

static void fd_read(int fd, ProcFd *f) {
    char path[64], raw[PROC_FD_TARGET_MAX + 8];
    f->fd = fd;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t r = readlink(path, raw, sizeof raw);
    if (r < 0) {
        snprintf(f->target, sizeof f->target, "?");
        return;
    }
    clean(raw, (size_t)r, f->target, sizeof f->target, 1);
    if ((size_t)r >= sizeof f->target) /* cut: say so */
        memcpy(f->target + sizeof f->target - 4, "...", 4);
}

int proc_fds(ProcFd *out, size_t cap, size_t *n, size_t *total) {
    *n = *total = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return err_set(ERR_IO, "open /proc/self/fd: %s", strerror(errno));
    int own = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = entry_number(e->d_name);
        if (fd < 0 || fd == own) continue;
        (*total)++;
        if (*n < cap) fd_read(fd, &out[(*n)++]);
    }
    closedir(d);
    qsort(out, *n, sizeof *out, by_fd);
    return 0;
}
