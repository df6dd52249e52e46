/* delta: delta snapshot files in the Go tool's exact form (docs/go-tool.md §4.2):
 *   payload = JSON_ARRAY || SHA256(JSON_ARRAY)
 * JSON_ARRAY = "[" elem ("," elem)* "]", no whitespace; elem =
 *   {"etcdEvent":{"type":1?,"kv":{"key":b64,"create_revision":N?,"mod_revision":N?,
 *    "version":N?,"value":b64?,"lease":N?}},"time":"<RFC 3339 nano, trailing zeros trimmed>"
 *    ,"leaseTTL":N?}
 * (Go encoding/json with omitempty: zero fields left out; padded standard base64).
 * "leaseTTL" is etcdbr's addition, on a put with a lease only: the TTL in seconds the lease was
 * granted with, recorded by the snapshotter on the first put of each lease in a delta so that
 * restore can grant a lease created after the full snapshot with its own TTL (without it restore
 * uses --new-lease-ttl). Go's encoding/json ignores it as an unknown field, so the Go tool reads
 * these deltas unchanged. It comes last, right after "time".
 * Both directions stream through a spool file: memory is bounded by one event, never by the
 * delta's size. */
#ifndef ETCDBR_DELTA_H
#define ETCDBR_DELTA_H

#include "../codec/io.h"
#include "../etcd/etcd_client.h"

#include <stddef.h>
#include <stdint.h>

/* Name prefix of spool files (in the temp dir; unlinked right after creation). */
#define DELTA_SPOOL_PREFIX "delta-spool-"

typedef struct DeltaWriter DeltaWriter;

/* Creates an empty spool file in spool_dir (0600, unlinked on free). */
int delta_writer_new(const char *spool_dir, DeltaWriter **out);
void delta_writer_free(DeltaWriter *w);

/* Appends one event as received at received_ns (Unix nanoseconds, UTC). ERR_IO on a full disk. */
int delta_writer_append(DeltaWriter *w, const EtcdEvent *ev, int64_t received_ns);

/* Like delta_writer_append; lease_ttl > 0 (seconds) also records the granted TTL of the put's
 * lease as "leaseTTL" (0 or less: none, as delta_writer_append). ERR_INVALID for lease_ttl > 0
 * on an event that is not a put with a lease. */
int delta_writer_append_lease(DeltaWriter *w, const EtcdEvent *ev, int64_t received_ns,
                              int64_t lease_ttl);

/* Like delta_writer_append, but writes time_text (borrowed) verbatim as "time": for tests that
 * rebuild a Go-written delta byte for byte, and for re-encoding events read from another delta.
 * ERR_INVALID unless time_text is RFC 3339 as Go parses it. */
int delta_writer_append_with_time(DeltaWriter *w, const EtcdEvent *ev, const char *time_text);

/* Events appended since the last reset, the JSON bytes spooled, and the first/last mod_revision
 * (0 when empty). */
size_t delta_writer_events(const DeltaWriter *w);
uint64_t delta_writer_bytes(const DeltaWriter *w);
int64_t delta_writer_first_revision(const DeltaWriter *w);
int64_t delta_writer_last_revision(const DeltaWriter *w);

/* Closes the array and appends the sha256 trailer, then gives a reader over the whole payload
 * (owned; io_reader_free). The writer must be reset before appending again. ERR_INVALID when
 * no event was appended (a delta never holds zero events). */
int delta_writer_payload(DeltaWriter *w, IoReader **out);

/* Empties the spool for the next delta. */
int delta_writer_reset(DeltaWriter *w);

typedef struct DeltaEvent {
    EtcdOpType type; /* PUT or DELETE; other types are ERR_CORRUPT */
    uint8_t *key;    /* decoded bytes, borrowed until the next call */
    size_t key_len;
    uint8_t *value;
    size_t value_len;
    int64_t create_revision, mod_revision, version, lease;
    int64_t time_ns;   /* the element's "time" (when the snapshotter received it), Unix ns UTC
                          (saturated as delta_parse_time does) */
    int64_t lease_ttl; /* the element's "leaseTTL" (etcdbr's addition, ignored by the Go tool):
                          the granted TTL in seconds of a lease the put uses; 0 = not recorded */
} DeltaEvent;

typedef struct DeltaReader DeltaReader;

/* Reads the decompressed payload from src (borrowed) into a spool file in tmp_dir, checking the
 * sha256 trailer as it goes. ERR_CORRUPT if the payload is 32 bytes or shorter or the hash does
 * not match; nothing is parsed from an unverified payload. ERR_IO naming tmp_dir when writing
 * on would leave less than the free space reserve there (fs_check_free_reserve); how much src
 * may give out is its own bound (snapobj_set_limits). */
int delta_reader_open(IoReader *src, const char *tmp_dir, DeltaReader **out);

/* Next event in file order: 0 with *got = 1, or 0 with *got = 0 at the end of the array.
 * ERR_CORRUPT (message with byte offset) for malformed JSON, unpadded base64, a bad "time",
 * or mod_revision <= 0. Key names match case-insensitively; unknown keys are ignored
 * (Go encoding/json semantics). */
int delta_reader_next(DeltaReader *r, DeltaEvent *ev, int *got);

/* Whether ev is an event etcd writes, as a restore applies it (the restorer and verify share
 * this, so verify passes no delta a restore refuses): a key (etcd refuses empty keys); for a
 * put, version >= 1, 1 <= create_revision <= mod_revision, and version 1 exactly when
 * create_revision is mod_revision (mvcc's put: a created key starts at version 1). 0, or
 * ERR_CORRUPT with a message naming the revision (not the object; callers prefix it). */
int delta_event_check(const DeltaEvent *ev);
/* What a delta's name promises about its events (docs/restore.md, "Names must match contents":
 * "Incr-<start>-<last>-..."), checked event by event in file order by restore (and by verify, which
 * reports the same invariants as faults): every event's revision lies in start..last; the first is
 * at start exactly (both tools name a delta from the revision after the previous snapshot and watch
 * from there, and every etcd revision holds at least one event: checked against the Go tool's
 * deltas in tests/fixtures); each next one is at the same revision or the one after (in order,
 * no revision missing); the last is at last. prev = the previous event's revision, 0 before the
 * first. object names the delta in messages. 0 or ERR_CORRUPT ("the name does not match the
 * contents"). */
int delta_check_name_event(const char *object, int64_t start, int64_t last, int64_t prev,
                           int64_t rev);
/* After the last event: prev (the last event's revision, 0 when none) must be last. 0 or
 * ERR_CORRUPT. */
int delta_check_name_end(const char *object, int64_t last, int64_t prev);
/* Reads every event of r in file order, checks each against the delta's name (object, start and
 * last as for delta_check_name_event; delta_check_name_end after the last one) and calls
 * fn(ctx, &ev) for each: the whole delta is read and checked, whatever fn does with its events
 * (ev and its key and value are r's, valid during the call). 0; a read error (ERR_CORRUPT, ERR_IO)
 * prefixed with object; a name check's ERR_CORRUPT; or fn's first nonzero return, at once. */
int delta_reader_each(DeltaReader *r, const char *object, int64_t start, int64_t last,
                      int (*fn)(void *ctx, const DeltaEvent *ev), void *ctx);

/* Starts reading the events again from the first one (the spool is kept): for a pre-scan, e.g.
 * finding the last revision recorded before a point in time. A reader that failed stays failed. */
int delta_reader_rewind(DeltaReader *r);
/* Events decoded by the fast path for the canonical form (what both tools write) since open,
 * rewinds included; the rest went through the general decoder. For tests and diagnostics. */
uint64_t delta_reader_fast_events(const DeltaReader *r);
void delta_reader_close(DeltaReader *r);

/* Copies the payload delta_reader_open verified (the JSON and its SHA-256 trailer) to fd_out,
 * written from fd_out's current offset; the reader's position is unchanged. For a cache of
 * fetched deltas (inspect's --cache-dir). 0 or ERR_IO. */
int delta_reader_copy_payload(const DeltaReader *r, int fd_out);

/* Parses an RFC 3339 time as Go's time.Time JSON decoding accepts it (the delta "time" field and
 * restore --time) into Unix nanoseconds, saturated to INT64_MIN / INT64_MAX for times before
 * 1677-09-21 or after 2262-04-11 (outside int64 nanoseconds). 0 or ERR_INVALID (message quotes
 * the text). */
int delta_parse_time(const char *text, int64_t *ns_out);

/* Formats Unix nanoseconds as a delta's "time": Go's time.RFC3339Nano in UTC, the fraction's
 * trailing zeros trimmed (none when zero), into out (NUL-terminated). 0, or ERR_INVALID for a
 * time gmtime cannot represent. */
int delta_format_time(int64_t ns, char out[48]);

#endif
