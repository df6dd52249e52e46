/* chainproof: before a snapshotter continues a chain of backups it found in the store (tagged
 * or untagged), proof that the chain is the history of the etcd it backs up
 * (docs/snapshot.md, "Continuing a chain"; docs/store-history.md).
 *
 * The proof compares the events the chain stored at its last revision R with the events the live
 * etcd delivers for R (one Watch from R on all keys; etcd never splits one revision's events over
 * two watch responses): the same count, and for each, in order, the same type, key, and for a put
 * the same create_revision, mod_revision, version, lease and value. The stored events are the last
 * delta's events at its last revision, or, for a chain that is only a full snapshot, the entries
 * at the highest revision in its db's "key" bucket (format/mvcc.h). Two clusters share a revision
 * with identical events only by writing the same keys with the same values in the same order
 * after the same number of revisions, which the proof accepts (and so would a restore). */
#ifndef ETCDBR_CHAINPROOF_H
#define ETCDBR_CHAINPROOF_H

#include "../etcd/etcd_client.h"
#include "../store/store.h"

#include <stdatomic.h>
#include <stdint.h>

/* At most this many events of revision R are compared (the first ones, in sub-revision order);
 * etcd's default --max-txn-ops is 128. */
#define CHAIN_PROOF_MAX_EVENTS 1024
/* How long the live side may take to deliver revision R (ms). */
#define CHAIN_PROOF_WATCH_MS 10000

typedef enum {
    CHAIN_PROVEN = 0, /* the live history holds the chain's last events: continue it */
    CHAIN_MISMATCH,   /* etcd's events at R differ: another cluster's (or history's) chain */
    CHAIN_COMPACTED,  /* etcd compacted R: no proof possible */
    CHAIN_AHEAD,      /* the chain ends after etcd's current revision */
    CHAIN_UNREADABLE, /* the chain's last object does not decode, or its content lies */
    CHAIN_VERDICT_COUNT
} ChainVerdict;

typedef struct ChainProof {
    ChainVerdict verdict;
    int64_t revision; /* R: the revision compared (0 when not reached) */
    size_t events;    /* stored events at R compared */
    char why[2048];   /* one sentence for the log (names the object) */
} ChainProof;

/* The metric label of a verdict: "proven", "mismatch", "compacted", "ahead", "unreadable"
 * (static storage). */
const char *chain_verdict_name(ChainVerdict v);

/* Proves that `last` (the chain's last object in store; a full snapshot or a delta) belongs to
 * the history of the etcd behind client. Reads the object through snapobj (decompressed and
 * decrypted as its name says) into spool files in tmp_dir (removed before return). stop (may be
 * NULL) ends the watch wait. Returns 0 with out->verdict set (CHAIN_PROVEN or why not), or an
 * ERR_* when the proof could not run for a reason that a retry may cure: the store could not be
 * read (ERR_IO, ERR_NOT_FOUND, ERR_TIMEOUT...), etcd failed (ERR_ETCD), ERR_CANCELED by stop,
 * ERR_NOMEM, or the local spool. */
int chain_prove(EtcdClient *client, Store *store, const Snapshot *last, const char *tmp_dir,
                atomic_int *stop, ChainProof *out);

#endif
