/* history: which backup history each snapshot object belongs to, so that one store never mixes
 * two (docs/store-history.md). A history is the unbroken line of backups of one etcd keyspace: it
 * starts when a snapshotter first writes into a store (or forks after a restore to an older
 * revision) and has a random 64-bit id, written as 16 lower-case hex digits.
 *
 * Layout, beside the snapshots and outside what the Go tool lists (its listing keeps only keys
 * containing "v1" or "v2", docs/go-tool.md §3.1, and these never do unless the store prefix does):
 *   <store-prefix>/etcdbr/history/<id>/record.json   one per history, written before its first
 * object <store-prefix>/etcdbr/history/<id>/<snap-name>   an empty tag object, written before the
 * object An object without a tag is "untagged": the Go tool's, or ours from before histories
 * existed.
 *
 * A record may abandon objects of other histories: {history H, after_revision R} abandons every
 * object of H (H "" = untagged objects) whose last revision is > R. A fork after a restore to
 * revision R abandons its parent's objects after R; a takeover (--abandon-other-histories)
 * abandons every object of the histories it replaces (R = 0). A record takes effect only once its
 * history has stored at least one snapshot object: a restore that is never backed up abandons
 * nothing. Abandoned objects are kept, never restored (unless a restore names their history) and
 * never garbage-collected. */
#ifndef ETCDBR_HISTORY_H
#define ETCDBR_HISTORY_H

#include "snapname.h"

#include <stddef.h>
#include <stdint.h>

#define HISTORY_ID_LEN 16
#define HISTORY_MAX_ABANDONS 32
/* The bucket and key a restore writes into the restored db (an etcd db ignores buckets it does
 * not know; Snapshot streams and defragmentation keep them). The bucket name sorts after etcd's
 * own ("meta" is the last), so the restorer writes it once the revision is known. Value: JSON
 * {"from_history":"<id or empty>","revision":R,"time":unix-seconds,"new_history":"<id>"}. */
#define HISTORY_DB_BUCKET "restored_by_etcdbr"
#define HISTORY_DB_KEY "mark"

typedef struct HistoryAbandon {
    char history[HISTORY_ID_LEN + 1]; /* "" = untagged objects */
    int64_t after_revision;
} HistoryAbandon;

typedef struct HistoryRecord {
    char id[HISTORY_ID_LEN + 1];
    uint64_t cluster_id, member_id; /* of the etcd backed up; 0 = unknown */
    int64_t created_s;              /* Unix seconds */
    char reason[16];                /* "new", "adopt", "fork", "takeover" */
    int adopts_untagged;            /* GC may collect untagged objects (continued from them) */
    size_t n_abandons;
    HistoryAbandon abandons[HISTORY_MAX_ABANDONS];
    int effective; /* set by history_annotate: the history has a stored object */
} HistoryRecord;

/* What a restore recorded in the db it built (HISTORY_DB_KEY). */
typedef struct HistoryRestoreMark {
    int present;
    char from_history[HISTORY_ID_LEN + 1]; /* the restored set's history, "" = untagged */
    int64_t revision;                      /* the revision restored (before any bump) */
    int64_t time_s;                        /* when the restore ran, Unix seconds */
    char new_history[HISTORY_ID_LEN + 1];  /* the id a fork of the restored db takes */
} HistoryRestoreMark;

/* 1 when s is 16 lower-case hex digits. */
int history_id_valid(const char *s);

/* A fresh random id (getrandom) into out (17 bytes). 0 or ERR_IO. */
int history_new_id(char out[HISTORY_ID_LEN + 1]);

/* JSON of a record into *out (malloc'ed, NUL-terminated; *len without the NUL). 0 or ERR_NOMEM. */
int history_record_format(const HistoryRecord *r, char **out, size_t *len);

/* Parses a record (len bytes of JSON). 0 or ERR_CORRUPT with the reason. */
int history_record_parse(const char *json, size_t len, HistoryRecord *out);

/* The restore mark as JSON (NUL-terminated) into out (cap bytes). 0 or ERR_INVALID. */
int history_mark_format(const HistoryRestoreMark *m, char *out, size_t cap);

/* Parses a restore mark; sets present. 0 or ERR_CORRUPT. */
int history_mark_parse(const char *json, size_t len, HistoryRestoreMark *out);

/* Reads the restore mark from an etcd db file (a full snapshot, trailer included or not; size
 * bytes of db). out->present = 0 when the db has none. 0, or the bbolt reader's error. */
int history_mark_read_db(const char *path, uint64_t size, HistoryRestoreMark *out);

/* The restore mark from the value (len bytes, borrowed) of HISTORY_DB_KEY in HISTORY_DB_BUCKET
 * as read from a db (a one-pass full snapshot reads it while streaming: bbolt_stream.h). A value
 * that does not parse is logged and ignored (out->present = 0), as history_mark_read_db does.
 * 0, or ERR_CORRUPT when len is 1024 bytes or more. */
int history_mark_from_db_value(const char *val, size_t len, HistoryRestoreMark *out);

/* A tag object as listed: the history and the snapshot name it tags. */
typedef struct HistoryTag {
    char history[HISTORY_ID_LEN + 1];
    char name[256];
} HistoryTag;

/* Given the tags (any order) and records, sets snaps[i].history (chunks get their parent
 * object's tag), recs[j].effective and snaps[i].abandoned. Pure apart from a warning for a name
 * tagged by two histories (it keeps the smaller id). */
void history_annotate(Snapshot *snaps, size_t n, const HistoryTag *tags, size_t n_tags,
                      HistoryRecord *recs, size_t n_recs);

/* The record of id in recs, or NULL. */
const HistoryRecord *history_find(const HistoryRecord *recs, size_t n, const char *id);

typedef enum {
    HISTORY_NEW,      /* the store holds no backups: start a new history */
    HISTORY_CONTINUE, /* continue the latest set's history */
    HISTORY_ADOPT,    /* the latest set is untagged and fits etcd: a new history continues it */
    HISTORY_FORK,     /* etcd was restored from the latest set's history to an older revision */
    HISTORY_TAKEOVER, /* --abandon-other-histories: a new history replaces the others */
    HISTORY_NEED_DB,  /* a conflict only the db's restore mark can explain: decide again with it */
    HISTORY_REFUSE,   /* another cluster's or a newer history: do not write */
} HistoryAction;

typedef struct HistoryDecision {
    HistoryAction action;
    char history[HISTORY_ID_LEN + 1]; /* the history to write under (not for NEED_DB/REFUSE) */
    int write_record;                 /* record must be written before the first object */
    HistoryRecord record;             /* valid with write_record */
    char latest_history[HISTORY_ID_LEN + 1]; /* the store's latest set's history ("" untagged) */
    int64_t latest_revision;                 /* and its last revision, 0 = no backups */
    char why[768];                           /* for logs and errors */
} HistoryDecision;

/* Decides under which history a snapshotter of the etcd (cluster_id, member_id, at revision
 * etcd_revision) may write into a store whose non-abandoned objects are snaps (sorted, annotated)
 * with records recs. mark: the restore mark of etcd's db when a full snapshot has been read (a
 * mark with present = 0: read, none), NULL when not known yet. A conflict is: the latest set
 * belongs to a history recorded for another cluster, or ends after etcd's revision. A conflict
 * is a FORK when the mark says etcd was restored from that history (and objects of it written
 * before the restore lie after the restored revision, or the cluster differs); a TAKEOVER with
 * takeover set; NEED_DB without a mark; else REFUSE. Pure; now is Unix seconds (record time).
 * For NEW, ADOPT and TAKEOVER, history and record.id are "": the caller puts a fresh id
 * (history_new_id) in both. */
void history_decide(const Snapshot *snaps, size_t n, const HistoryRecord *recs, size_t n_recs,
                    uint64_t cluster_id, uint64_t member_id, int64_t etcd_revision,
                    const HistoryRestoreMark *mark, int takeover, int64_t now,
                    HistoryDecision *out);

/* "new", "continue"... (static storage). */
const char *history_action_name(HistoryAction a);

#endif
