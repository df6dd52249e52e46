/* fetch_cache: objects of a store made local and checked, kept in a directory the operator
 * names for the next command (get, diff and history's --cache-dir; docs/inspect.md). An entry is
 * a file "<dir>/<full|delta>-<16 hex digits>.<db|json>" (the digits: FNV-1a 64 of the store's
 * scope (store_scope: description, endpoint, credentials) and the object's key, so two stores
 * never share an entry) and "<file>.ok", written
 * after the file is complete and checked, naming the object's key and listed size: an entry whose
 * .ok is missing or names another object or size is not used. Encrypted objects are never kept:
 * an entry would hold their plaintext and answer without the key (or with a wrong one). The
 * cache is trusted as far as the directory it is in: an entry is checked against damage (its
 * hash, again at each use), not against someone who may write there. The cache is the
 * operator's; nothing here removes it. */
#ifndef ETCDBR_FETCH_CACHE_H
#define ETCDBR_FETCH_CACHE_H

#include "../store/snapname.h"
#include "../store/store.h"

#include <stddef.h>

/* The entry's file name for snap of store in dir, into out (cap bytes). */
void fetch_cache_path(const char *dir, Store *store, const Snapshot *snap, char *out, size_t cap);

/* 1 when snap may be kept in the cache (it is not encrypted), else 0. */
int fetch_cache_wants(const Snapshot *snap);

/* 1 when the entry at path is complete and is snap (key and size as listed), with the .ok
 * file's second line (what the writer added, e.g. sizes; no newline) into extra (cap bytes);
 * else 0. */
int fetch_cache_lookup(const char *path, const Snapshot *snap, char *extra, size_t cap);

/* Marks the complete file at path as snap's entry, extra (one line, may be "") kept with it.
 * Best effort: a failure is logged as a warning and leaves no .ok. */
void fetch_cache_commit(const char *path, const Snapshot *snap, const char *extra);

#endif
