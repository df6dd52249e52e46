/* restore_fixture: a real Local store in a temp dir holding real backups, for the unit tests of
 * the restore's stages (test_restore_*.c). A full snapshot is a bbolt db written with the
 * project's bbolt_writer (key "k<rev>" put at each revision 2..rev, as etcd's mvcc writes it)
 * with its SHA-256 trailer; a delta is written with the project's DeltaWriter (one put of a new
 * key per revision, or what the test gives). Every helper fails the running test on error. */
#ifndef ETCDBR_RESTORE_FIXTURE_H
#define ETCDBR_RESTORE_FIXTURE_H

#include "store/snapname.h"
#include "store/store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct RfStore {
    char dir[256];     /* the temp dir: the store's container is <dir>/store */
    char scratch[300]; /* <dir>/scratch, created */
    Store *store;
} RfStore;

/* A new temp dir and a Local store in it (prefix "p"). */
void rf_open(RfStore *s);
/* Frees the store and removes the temp dir. */
void rf_close(RfStore *s);

/* Writes the plain db of a full snapshot at revision rev (keys k2..k<rev>) to path, without a
 * trailer: for tests that need the db itself. members_key: NULL, or a key of a "members"
 * bucket to add (a member ID in hex, as etcd writes it). */
void rf_write_db(const char *path, int64_t rev, const char *members_key);

/* Stores a full snapshot named Full-00000000-<name_rev>-<created>[suffix] holding the db at
 * revision db_rev, compressed as suffix says ("" or ".gz"); history: NULL or a history ID to tag
 * it with. The object's name into name (cap bytes, may be NULL). */
void rf_put_full(RfStore *s, int64_t name_rev, int64_t db_rev, int64_t created, const char *suffix,
                 const char *history, char *name, size_t cap);

/* Stores a delta Incr-<start>-<last>-<created> with one put of a new key "k<rev>" (value
 * "v<rev>") at each revision start..last, each recorded at Unix time created - (last - rev)
 * seconds (the last one at the time its name gives, as a snapshotter names a delta after its
 * events); history as rf_put_full. */
void rf_put_delta(RfStore *s, int64_t start, int64_t last, int64_t created, const char *history,
                  char *name, size_t cap);

/* The path of the stored object named name (v2) in s's container. */
void rf_object_path(const RfStore *s, const char *name, char *out, size_t cap);

#endif
