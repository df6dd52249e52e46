/* verifier: checks a snapshot store without etcd (`etcdbrctl verify`, the server's scheduled
 * verification). Every object in scope is read through snapobj (so whatever encoding its name
 * says is undone) and checked: a full snapshot's sha256 trailer, that its db parses as an etcd
 * db (every page walked) and holds the revision its name says; a delta's sha256, that every event
 * decodes and that its revisions are those its name says, without holes, and that its events
 * continue the keyspace its set reached before it (keystate.h: a put's create_revision and
 * version, a delete of a live key). Then the sets: the full
 * snapshot's last revision + 1 starts the first delta, each delta continues the previous one, and
 * no object of another history lies inside a set (docs/store-history.md). Scope: the latest set
 * (what a restore takes), or every set. Optionally a restore test: the latest set restored into a
 * scratch dir (restorer_run), an etcd started on it on loopback, and HashKV at the set's last
 * revision compared with the live cluster's. Memory is bounded: objects stream through spool
 * files in a private scratch directory, removed at the end. */
#ifndef ETCDBR_VERIFIER_H
#define ETCDBR_VERIFIER_H

#include "../etcd/etcd_client.h"
#include "../store/store.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    VERIFY_NO_FULL = 0,      /* the store (or a set's scope) has no full snapshot */
    VERIFY_GAP,              /* revisions missing between two objects, or inside a delta */
    VERIFY_OVERLAP,          /* two objects hold the same revisions (a warning: restore applies
                                each revision once) */
    VERIFY_BAD_HASH,         /* the sha256 of the plain bytes does not match their trailer */
    VERIFY_UNDECODABLE,      /* decoding (decompression, JSON, bbolt) failed */
    VERIFY_UNREADABLE,       /* the store could not give the object (gone, I/O error) */
    VERIFY_WRONG_REVISIONS,  /* the content's revisions are not those of the object's name */
    VERIFY_OTHER_HISTORY,    /* an object of another history lies inside a set */
    VERIFY_RESTORE_FAILED,   /* --restore-test: the restore or the scratch etcd failed */
    VERIFY_RESTORE_MISMATCH, /* --restore-test: HashKV of the restore differs from the live one */
    VERIFY_UNENCRYPTED_AFTER_ENCRYPTED, /* an unencrypted object after an encrypted one in a set:
                                           written without the keys, or planted */
    VERIFY_INCONSISTENT_EVENTS,         /* a delta's events contradict the keyspace its set reached
                                           before it (keystate.h): objects of two clusters in a chain */
} VerifyFaultKind;

/* "no-full-snapshot", "gap", "overlap", "bad-hash", ... (static; the JSON "kind"). */
const char *verify_fault_kind_name(VerifyFaultKind k);

typedef struct VerifyFault {
    VerifyFaultKind kind;
    int warning;        /* reported, but not a fault: does not fail the verification */
    char object[1024];  /* the object's key ("" when none) */
    char other[1024];   /* gap/overlap: the object before it; history: the set's full snapshot */
    int64_t from, to;   /* gap: the missing revisions; overlap: the revisions held twice */
    char message[2048]; /* one sentence naming everything above */
} VerifyFault;

/* One set: a full snapshot and the deltas after it up to the next full snapshot (the latest
 * set: every later delta), of the full snapshot's history (or untagged). */
typedef struct VerifySet {
    char full_key[1024];
    char history[HISTORY_ID_LEN + 1]; /* the set's history ("" = untagged) */
    int64_t first_revision;           /* the full snapshot's revision */
    int64_t last_revision;            /* the last revision the set restores to */
    size_t n_deltas;
    int latest;
    int ok; /* no fault (warnings allowed) was found in the set's objects or contiguity */
} VerifySet;

typedef enum {
    RESTORE_TEST_NOT_RUN = 0,
    RESTORE_TEST_MATCH,        /* HashKV compared and equal: verified */
    RESTORE_TEST_MISMATCH,     /* compared and different */
    RESTORE_TEST_NOT_COMPARED, /* the restore ran and succeeded, but no comparison was possible
                                  (cluster unreachable, compacted past the revision...) */
    RESTORE_TEST_FAILED,       /* the restore or the scratch etcd failed */
} RestoreTestResult;

/* "not-run", "match", "mismatch", "not-compared", "failed" (static). */
const char *restore_test_result_name(RestoreTestResult r);

typedef struct VerifyReport {
    char store[1200]; /* store_describe */
    int all_sets;
    size_t n_sets;
    VerifySet *sets; /* malloc'ed; sets[n_sets - 1] is the latest */
    size_t n_faults;
    VerifyFault *faults; /* malloc'ed, warnings included */
    size_t n_errors;     /* faults that are not warnings */
    size_t objects_in_scope, objects_checked;
    uint64_t stored_bytes, plain_bytes; /* of the objects checked */
    int64_t latest_revision;            /* the latest set's last revision; 0 without one */
    char latest_history[HISTORY_ID_LEN + 1];
    /* --restore-test */
    RestoreTestResult restore_test;
    int64_t restore_revision;               /* the revision restored and compared */
    uint32_t hash_restored, hash_live;      /* valid when compared */
    int64_t compact_restored, compact_live; /* HashKV's compact revisions */
    char restore_note[1024];                /* why not compared / what failed */
    double seconds;
} VerifyReport;

typedef struct VerifyConfig {
    Store *store;         /* borrowed */
    const char *temp_dir; /* a private scratch dir is created (and removed) inside it */
    int all_sets;         /* every set, not only the latest */
    int show_progress;    /* progress.h reporting of each object */
    /* --restore-test: restore the latest set and compare HashKV with live (may be NULL: then
     * the restore runs and the result is NOT_COMPARED) */
    int restore_test;
    const EtcdConfig *live;
    const char *etcd_bin;    /* NULL/"" = etcd_proc's default ($ETCDBR_ETCD_BIN, else PATH) */
    const char *etcdutl_bin; /* as RestoreConfig */
    int max_fetchers;        /* as RestoreConfig; 0 = 4 */
    int64_t new_lease_ttl;   /* as RestoreConfig (seconds); 0 = 3600 */
    atomic_int *stop;        /* borrowed, may be NULL: set to stop (ERR_CANCELED) */
} VerifyConfig;

/* Verifies. Returns 0 when the verification ran to the end, whatever it found (out->n_errors
 * says whether the store passed); an ERR_* when it could not run (listing failed, scratch dir,
 * ERR_CANCELED). *out is filled in either case; free with verify_report_free. */
int verify_run(const VerifyConfig *cfg, VerifyReport *out);

void verify_report_free(VerifyReport *r);

/* 1 when the report holds no fault (warnings allowed) and a run restore test did not fail or
 * mismatch (NOT_COMPARED passes: the restore itself succeeded; the report says what was not
 * compared). */
int verify_report_passed(const VerifyReport *r);

/* ---------- pure parts (unit-tested) ---------- */

/* Appends a fault (message formatted printf-style) to r. ERR_NOMEM on allocation failure. */
int verify_add_fault(VerifyReport *r, VerifyFaultKind kind, int warning, const char *object,
                     const char *other, int64_t from, int64_t to, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

/* A set as planned from a listing: indices into the sorted, annotated snapshot list. */
typedef struct VerifyPlanSet {
    size_t full;
    size_t *deltas; /* malloc'ed, ascending */
    size_t n_deltas;
    int64_t end_revision; /* objects of other histories up to here intrude; INT64_MAX: latest */
} VerifyPlanSet;

/* Plans the sets of snaps (sorted by snapname_sort, annotated, abandoned ones left out, as
 * store_list gives them): the latest set as restore takes it (snapname_latest_set), or with all
 * every full snapshot's set. Adds to r: VERIFY_NO_FULL when there is no full snapshot, the
 * contiguity faults of each set (verify_check_contiguity) and VERIFY_OTHER_HISTORY for each
 * delta of another history inside a set's revisions or any second history among a set's
 * deltas. In a set that is not the latest, a hole right after the full snapshot is a warning:
 * garbage collection removes the older deltas of older sets (gc.h). *sets malloc'ed
 * (verify_plan_free). r->sets gets one VerifySet per planned set. */
int verify_plan(const Snapshot *snaps, size_t n, int all, VerifyPlanSet **sets, size_t *n_sets,
                VerifyReport *r);
void verify_plan_free(VerifyPlanSet *sets, size_t n);

/* Contiguity of one set by the objects' names: the first delta must start at full's last
 * revision + 1 and each next one at the previous one's last + 1. A hole is a VERIFY_GAP fault
 * naming the missing revisions and both objects; revisions held twice are a VERIFY_OVERLAP
 * warning; a delta wholly inside the revisions before it is an overlap too. deltas: borrowed
 * pointers, ascending. Returns the number of faults (not warnings) added, or ERR_NOMEM. */
int verify_check_contiguity(const Snapshot *full, const Snapshot *const *deltas, size_t n,
                            VerifyReport *r);

/* The report for people: one line per set, each fault and warning, the restore test, the verdict
 * ("verified" only for what was checked). */
void verify_report_print(const VerifyReport *r, FILE *f);

/* The report as JSON (new reference): {"store","scope","passed","objects_checked",
 * "stored_bytes","plain_bytes","latest_revision","latest_history","sets":[...],
 * "faults":[{"kind","warning","object","other","from","to","message"}],"restore_test":{...}}. */
json_t *verify_report_json(const VerifyReport *r);

#endif
