/* proc: facts about this process, for end-of-job log lines and the profiling endpoints
 * (docs/server.md, "Profiling"): memory from /proc/self/status and the C library's heap,
 * threads with their names and states, open file descriptors. The parsers take the files' text
 * as hostile (any length, any byte, fields missing) and are bounded. Linux only. */
#ifndef ETCDBR_PROC_H
#define ETCDBR_PROC_H

#include <stddef.h>
#include <stdint.h>

/* Peak resident set size of this process in KiB (VmHWM from /proc/self/status), or -1.
 * Child processes (a temporary etcd) are not included. */
int64_t proc_peak_rss_kib(void);

/* Bytes of /proc/self/status (and other small /proc files) read at most. */
#define PROC_FILE_MAX 16384

/* Fields of /proc/<pid>/status (proc(5)); -1 when absent or unreadable. */
typedef struct ProcStatus {
    int64_t vm_rss_kib;  /* VmRSS: resident set size, KiB */
    int64_t vm_hwm_kib;  /* VmHWM: peak resident set size, KiB */
    int64_t vm_size_kib; /* VmSize: virtual memory size, KiB */
    int64_t threads;     /* Threads */
} ProcStatus;

/* Parses len bytes of status text (need not be NUL-terminated): lines "Name:<blanks><decimal>"
 * with an optional " kB". A field missing, without digits, or beyond 2^53 stays -1; the first
 * line of a name counts; lines of any length are skipped whole. */
void proc_status_parse(const char *text, size_t len, ProcStatus *out);
/* proc_status_parse of /proc/self/status. 0, or ERR_IO (named) with every field -1. */
int proc_status_read(ProcStatus *out);

/* The C library's heap (glibc mallinfo2, bytes); every field -1 without it. */
typedef struct ProcHeap {
    int64_t arena;      /* bytes obtained with sbrk (main arena) plus other arenas' mmap'ed heaps */
    int64_t in_use;     /* bytes allocated and not freed (uordblks + hblkhd) */
    int64_t free;       /* bytes free inside the arenas (fordblks) */
    int64_t mmapped;    /* bytes in large blocks mmap'ed one each (hblkhd) */
    int64_t releasable; /* free bytes at the top that malloc_trim could give back (keepcost) */
} ProcHeap;
/* The calling process's heap as glibc's mallinfo2 counts it, in bytes, into *out. Never fails:
 * every field is -1 when the figures are unknown (no mallinfo2, or a sanitizer's allocator that
 * it does not see; proc_heap_source says which). */
void proc_heap(ProcHeap *out);
/* Where proc_heap's figures come from: "glibc mallinfo2", or why they are -1 (a sanitizer's
 * allocator, which mallinfo2 does not see; no glibc 2.33). Static. */
const char *proc_heap_source(void);

/* The state letter of a thread from len bytes of /proc/<pid>/task/<tid>/stat text: the first
 * field after the last ')' (the name in parentheses may hold any byte, ')' included). One of
 * "RSDTtZXIPWKx" (proc(5)), else '?' (malformed, cut or unknown). */
char proc_stat_state(const char *text, size_t len);
/* A word for a state letter ("running", "sleeping", "disk sleep", ...); "unknown" else. */
const char *proc_state_name(char state);

/* Copies a /proc name (comm: len bytes, up to the first newline or NUL) into out (cap >= 1
 * bytes, NUL-terminated, cut to fit), each byte outside printable ASCII as '?'. */
void proc_name_clean(const char *text, size_t len, char *out, size_t cap);

typedef struct ProcThread {
    int tid;
    char name[17]; /* comm (at most 15 bytes; cleaned, proc_name_clean) */
    char state;    /* proc_stat_state */
} ProcThread;

/* This process's threads from /proc/self/task, in directory order: up to cap into out (*n);
 * *total counts every one seen (more than *n: the list was cut). 0 or ERR_IO (named). A thread
 * ending while it is read is listed with state '?' or left out. */
int proc_threads(ProcThread *out, size_t cap, size_t *n, size_t *total);

/* Bytes of an fd's target kept (with its NUL); a longer one is cut and ends with "...". */
#define PROC_FD_TARGET_MAX 256

typedef struct ProcFd {
    int fd;
    char target[PROC_FD_TARGET_MAX]; /* readlink of /proc/self/fd/N ("socket:[123]", a path),
                                        bytes outside printable ASCII (newlines too) as '?';
                                        "?" if unreadable */
} ProcFd;

/* This process's open file descriptors from /proc/self/fd (the one reading it left out), in
 * ascending order of fd among those listed: up to cap into out (*n, the lowest cap seen in
 * directory order); *total counts every one. 0 or ERR_IO (named). */
int proc_fds(ProcFd *out, size_t cap, size_t *n, size_t *total);

#endif
