/* profiling: the documents `--enable-profiling` serves under /debug/pprof/, the Go tool's prefix
 * (docs/server.md, "Profiling"; the Go tool registers Go's net/http/pprof there, go-tool.md §2).
 * Go's profiles mean nothing for a C process, so these say what helps its operator instead:
 * memory (RSS, peak, heap), threads and their states, open file descriptors, store requests in
 * flight, and where the time of the last full and delta snapshot and of the last restore went.
 * Each is JSON, or plain text with ?format=text or an Accept header asking for text/plain. Every
 * one is built from bounded reads (proc.h, objhttp.h, phase.h) under short mutexes: safe on the
 * HTTP event loop and on any thread. */
#ifndef ETCDBR_PROFILING_H
#define ETCDBR_PROFILING_H

#include "../server/http.h"

/* The path prefix, and the index's path. */
#define PROFILING_PREFIX "/debug/pprof/"

/* Threads and file descriptors listed at most; the document says when there were more. */
#define PROFILING_THREADS_MAX 256
#define PROFILING_FDS_MAX 512

/* 1 when path is /debug/pprof or under /debug/pprof/: resp holds the answer (200 and the
 * document, 404 for an unknown one, 405 for a method but GET/HEAD, 500 when it cannot be built).
 * 0 for any other path (resp untouched). Thread-safe. */
int profiling_handle(const HttpRequest *req, HttpResponse *resp);

#endif
