/* keystate: the keyspace a chain of backups reaches, reduced to what tells whether the next
 * event can follow it: for every live key (by its FNV-1a 64 hash), its create_revision and
 * version. verify builds it from a set's full snapshot and applies each delta's events in order;
 * an event that etcd could not have written after that state (a put of version 1 on a live key, a
 * put of version v > 1 whose key is absent or not at version v - 1 of the same create_revision,
 * a delete of an absent key) means the delta does not continue the keyspace before it: objects
 * of two clusters (or histories) in one chain. The rules are mvcc's put and delete
 * (server/v3/mvcc/kvstore_txn.go). Memory: about 40 bytes per key, capped at KEYSTATE_MAX_KEYS;
 * beyond it the state gives up (keystate_ok() = 0) rather than grow. A hash collision between two
 * keys could only hide a contradiction or invent one about those two keys. */
#ifndef ETCDBR_KEYSTATE_H
#define ETCDBR_KEYSTATE_H

#include "../backup/delta.h"

#include <stddef.h>
#include <stdint.h>

#define KEYSTATE_MAX_KEYS (8u << 20)

typedef struct KeyState KeyState;

/* An empty, invalid state (owned; keystate_free). 0 or ERR_NOMEM. */
int keystate_new(KeyState **out);
void keystate_free(KeyState *ks);

/* Forgets everything; the state is invalid until keystate_load_db succeeds. */
void keystate_reset(KeyState *ks);

/* Loads the keyspace of the etcd db at path (db_len bytes: without a trailer) at its revision
 * rev (bbolt_etcd_revision): the "key" bucket in revision order, later entries replacing earlier
 * ones, tombstones removing keys. 0 (keystate_ok() tells whether the cap was hit), or the bbolt /
 * mvcc reader's error (ERR_CORRUPT, ERR_IO, ERR_NOMEM); the state is invalid after an error. */
int keystate_load_db(KeyState *ks, const char *path, uint64_t db_len, int64_t rev);

/* 1 while the state can check events. */
int keystate_ok(const KeyState *ks);

/* The revision the state is at. */
int64_t keystate_revision(const KeyState *ks);

/* Makes the state invalid (a gap, a fault elsewhere): later events are not checked. */
void keystate_invalidate(KeyState *ks);

/* Before the events of the next delta: its events up to the revision reached so far are skipped
 * (two deltas may hold the same revisions; restore applies each revision once). */
void keystate_begin_delta(KeyState *ks);

/* Applies ev when it is after the revision reached before this delta (keystate_begin_delta; after
 * a load, the db's revision: a Go tool full snapshot may hold a few revisions of the next delta;
 * an earlier event is skipped). 0 when it follows, ERR_CORRUPT
 * with a message (naming the revision and the key, not the object) when etcd could not have
 * written it after the state (the state is then invalid), ERR_NOMEM. No-op when invalid. */
int keystate_apply(KeyState *ks, const DeltaEvent *ev);

#endif
