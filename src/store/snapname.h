/* snapname: snapshot object names and sets (docs/go-tool.md §3).
 *   v2: <prefix>/v2/<Kind>-<start %08d>-<last %08d>-<unix secs>[.enc]<compression suffix>[.final]
 *   ".enc" (ours, docs/encryption.md) marks an encrypted object; it comes first so that the Go
 *   tool, which takes the first '.' element as the compression, refuses it as an unknown
 *   compression instead of reading it as gzip or as plain bytes.
 *   v1: <prefix>/v1/Backup-<unix>/<name>   (legacy; read only)
 *   chunk objects: <name>/<10 digits> — parsed but never chosen.
 * Unlike the Go tool, the version component is matched as a path component directly under the
 * store prefix, so a prefix containing "v1/" (docs/go-tool.md §15.1) does not hide every snapshot.
 */
#ifndef ETCDBR_SNAPNAME_H
#define ETCDBR_SNAPNAME_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SNAP_FULL = 0, SNAP_INCR = 1 } SnapKind;

typedef struct Snapshot {
    SnapKind kind;
    int64_t start_revision, last_revision;
    int64_t created_on;          /* Unix seconds from the name */
    char compression_suffix[16]; /* "", ".gz", ".zlib", ".Z", ".zst" (unknown ones kept as read);
                                    never ".enc": that is `encrypted` */
    int encrypted;               /* the name has ".enc" (crypt.h; compress, then encrypt) */
    int is_final, is_chunk;
    int version;         /* 1 or 2 */
    char key[1024];      /* full object key relative to the store root, as listed */
    char snap_dir[128];  /* v1: "Backup-<ts>", v2: "" */
    char snap_name[256]; /* name part, e.g. "Full-00000000-00000190-1795974943.gz";
                            for a chunk "<name>/<10 digits>" (as in Go) */
    char prefix[512];    /* key up to and including "v1/" or "v2/" */
    int64_t size;        /* bytes as listed, -1 if unknown */
    char history[17];    /* backup history the object belongs to (16 hex digits, history.h); ""
                            when untagged: written by the Go tool or before histories existed */
    int abandoned;       /* a newer history abandoned it (history.h); store_list drops these */
} Snapshot;

#define SNAPNAME_ENC_SUFFIX ".enc"

/* Bounds of a name's numbers, so that every revision and time arithmetic on them stays in int64:
 * a revision can follow the last one (last + 1), and a creation time converts to Unix
 * nanoseconds ((created_on + 1) x 1e9). Names beyond them are not snapshot names (ERR_INVALID
 * from snapname_parse and snapname_format). */
#define SNAPNAME_REVISION_MAX (INT64_MAX - 1)
#define SNAPNAME_TIME_MAX (INT64_MAX / 1000000000LL - 1) /* 9223372035 s, in the year 2262 */

/* Formats the v2 name (without prefix) into out: "%s-%08lld-%08lld-%lld%s%s". suffix is what
 * goes between the time and ".final": "" or a compression suffix (".gz"), optionally after
 * ".enc" (".enc", ".enc.gz"), as snapname_suffix or store_name_suffix builds it. NULL = "".
 * Returns 0 or ERR_INVALID (a malformed suffix, or out too small for cap). */
int snapname_format(SnapKind kind, int64_t start, int64_t last, int64_t created_on,
                    const char *suffix, int is_final, char *out, size_t cap);

/* The Snapshot of a new v2 object, built from its fields rather than parsed back from its key:
 * kind, revisions, created_on (Unix seconds), is_final as given; encrypted and
 * compression_suffix from suffix (as snapname_format takes it: [".enc"][<compression>], NULL =
 * ""); snap_name formatted once from them (snapname_format); version 2, size -1, no history, not
 * a chunk. key_prefix is where the store keeps v2 objects, as Snapshot.prefix holds it ("v2/"
 * or "<store prefix>/v2/"): prefix = key_prefix and key = key_prefix + snap_name, so *out equals
 * what snapname_parse gives for that key. The one Snapshot a writer names its object with and
 * passes along (the snapshotter, backup/fullsnap.h). 0 or ERR_INVALID (what snapname_format
 * refuses; key_prefix not ending in "v2/", or the key longer than Snapshot.key holds). */
int snapname_new(SnapKind kind, int64_t start, int64_t last, int64_t created_on, const char *suffix,
                 int is_final, const char *key_prefix, Snapshot *out);

/* The suffix for snapname_format: ".enc" when encrypted, then compression_suffix (NULL = "").
 * 0 or ERR_INVALID (does not fit in cap). */
int snapname_suffix(int encrypted, const char *compression_suffix, char *out, size_t cap);

/* Parses key (relative to the store root, e.g. "etcd-main/v2/Full-...") given the store prefix
 * ("" or "etcd-main", no trailing slash). Fills *out. ERR_INVALID with a message saying why for
 * anything that is not a snapshot name (those are skipped and logged by callers, never deleted or
 * restored). */
int snapname_parse(const char *key, const char *store_prefix, Snapshot *out);

/* Sorts ascending by last_revision (as numbers); ties: non-chunk first, then created_on, then
 * key (total order, stable results). */
void snapname_sort(Snapshot *snaps, size_t n);

/* The latest set of a sorted list (chunks ignored): index of the newest full snapshot in
 * *full_idx (-1 if none) and the indices of the deltas after it, ascending, in delta_idx
 * (caller-provided, capacity n); *n_deltas set. */
void snapname_latest_set(const Snapshot *snaps, size_t n, ptrdiff_t *full_idx, size_t *delta_idx,
                         size_t *n_deltas);

/* No bound on created_on for snapname_set_at. */
#define SNAPNAME_ANY_TIME INT64_MAX

/* The set a restore to a point in time starts from: the newest full snapshot (chunks ignored)
 * whose last_revision <= max_revision (when > 0) and whose created_on <= max_created_on (Unix
 * seconds; SNAPNAME_ANY_TIME: any, a bound < 0: none qualifies), and every delta sorted after it
 * (the caller trims them to the target). Objects of two histories never combine: a delta tagged
 * with another history than a tagged full snapshot is left out (an untagged object combines with
 * any, as the Go tool's objects must). *full_idx -1 when no full snapshot qualifies. Same list and
 * outputs as snapname_latest_set. */
void snapname_set_at(const Snapshot *snaps, size_t n, int64_t max_revision, int64_t max_created_on,
                     ptrdiff_t *full_idx, size_t *delta_idx, size_t *n_deltas);

/* The part of s's name that identifies the object wherever it is stored: "<Kind>-<start
 * %08d>-<last %08d>-<unix secs>" (no store prefix, no suffixes). Encryption binds it into every
 * chunk (crypt.h), so an object stored under another object's name fails to decrypt. 0 or
 * ERR_INVALID (out too small: 64 bytes always suffice). */
int snapname_identity(const Snapshot *s, char *out, size_t cap);

/* A store's history is encrypted from its first encrypted object on (sorted list, as store_list
 * gives it): an unencrypted object sorted after it was written without the keys or planted by
 * someone who has none, and is never restored (docs/encryption.md). Moves those objects (chunks
 * aside) to the end of snaps, keeping both parts in order, and returns how many are kept in
 * front (*kept): snaps[*kept..n) are the plain objects left out (*kept = n when there are
 * none). 0 or ERR_NOMEM (snaps unchanged). */
int snapname_drop_plain_after_encrypted(Snapshot *snaps, size_t n, size_t *kept);

#endif
