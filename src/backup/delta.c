/* delta: writer and reader of Go-tool delta snapshots (docs/go-tool.md §4.2): a JSON array of
 * {"etcdEvent":...,"time":...} followed by the raw SHA-256 of the JSON bytes.
 * Both directions spool to an unlinked temp file, so memory is bounded by one event. The writer
 * emits exactly what Go's encoding/json emits; an append or payload that fails leaves the spool
 * as it was before the call. The reader parses nothing before the trailer is verified and then
 * accepts what Go's decoder accepts (case-insensitive keys, unknown keys ignored). */
#include "delta.h"
#include "../codec/base64.h"
#include "../common/array.h"
#include "../common/err.h"
#include "../common/fsutil.h"
#include "../common/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DELTA_HASH_LEN 32
#define DELTA_WBUF_SIZE (64 * 1024)
#define DELTA_RBUF_SIZE (64 * 1024)
/* Largest JSON element the reader accepts: etcd caps a request at a few MiB by default, so an
 * event this large means a damaged or hostile file, not a real backup. */
#define DELTA_MAX_ELEMENT ((size_t)64 * 1024 * 1024)

/* ---------------------------------------------------------------------------------------------
 * Shared helpers */

/* Creates an unlinked spool file in dir; returns the fd or a negative ERR_*. The file is locked
 * for the instant it has a name, so a stale-file cleanup (fullsnap_cleanup_stale) in another
 * process never takes it for one a killed process left behind. */
static int spool_open(const char *dir) {
    if (!dir || !*dir) return err_set(ERR_INVALID, "delta: no spool directory given");
    char *path = NULL;
    int fd = fs_mkstemp_locked(dir, DELTA_SPOOL_PREFIX, &path);
    if (fd < 0) return fd;
    if (unlink(path) != 0 && errno != ENOENT) {
        int rc = err_set(ERR_IO, "unlink delta spool %s: %s", path, strerror(errno));
        close(fd);
        free(path);
        return rc;
    }
    free(path);
    return fd;
}

static int days_in_month(int month, int year) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month == 2 && year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) return 29;
    return days[month - 1];
}

/* Reads exactly `count` decimal digits at s[*i]; -1 if they are not there. */
static int fixed_digits(const char *s, size_t n, size_t *i, int count) {
    int v = 0;
    for (int k = 0; k < count; k++) {
        if (*i >= n || s[*i] < '0' || s[*i] > '9') return -1;
        v = v * 10 + (s[(*i)++] - '0');
    }
    return v;
}

/* 1 if s is a time Go's Time.UnmarshalJSON accepts (RFC 3339: its strict fast path plus the
 * lenient time.Parse(RFC3339) fallback, i.e. a one-digit hour, ',' before the fraction, zone
 * offsets up to 24:60), else 0. */
static int rfc3339_valid(const char *s, size_t n) {
    size_t i = 0;
    int year = fixed_digits(s, n, &i, 4);
    if (year < 0 || i >= n || s[i++] != '-') return 0;
    int month = fixed_digits(s, n, &i, 2);
    if (month < 1 || month > 12 || i >= n || s[i++] != '-') return 0;
    int day = fixed_digits(s, n, &i, 2);
    if (day < 1 || day > days_in_month(month, year) || i >= n || s[i++] != 'T') return 0;
    int hour = fixed_digits(s, n, &i, 1);
    if (hour < 0) return 0;
    if (i < n && s[i] >= '0' && s[i] <= '9') hour = hour * 10 + (s[i++] - '0');
    if (hour > 23 || i >= n || s[i++] != ':') return 0;
    int min = fixed_digits(s, n, &i, 2);
    if (min < 0 || min > 59 || i >= n || s[i++] != ':') return 0;
    int sec = fixed_digits(s, n, &i, 2);
    if (sec < 0 || sec > 59) return 0;
    if (i + 1 < n && (s[i] == '.' || s[i] == ',') && s[i + 1] >= '0' && s[i + 1] <= '9') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i >= n) return 0;
    if (s[i] == 'Z') return i + 1 == n;
    if (s[i] != '+' && s[i] != '-') return 0;
    i++;
    int zh = fixed_digits(s, n, &i, 2);
    if (zh < 0 || zh > 24 || i >= n || s[i++] != ':') return 0;
    int zm = fixed_digits(s, n, &i, 2);
    return zm >= 0 && zm <= 60 && i == n;
}

/* Unix nanoseconds of an RFC 3339 time that rfc3339_valid accepted (fraction beyond 9 digits
 * truncated, as Go does; zone offset applied; saturated to INT64_MIN/INT64_MAX outside the years
 * 1677-2262). */
static int64_t rfc3339_to_ns(const char *s, size_t n) {
    size_t i = 0;
    int year = fixed_digits(s, n, &i, 4);
    i++;
    int month = fixed_digits(s, n, &i, 2);
    i++;
    int day = fixed_digits(s, n, &i, 2);
    i++;
    int hour = fixed_digits(s, n, &i, 1);
    if (i < n && s[i] >= '0' && s[i] <= '9') hour = hour * 10 + (s[i++] - '0');
    i++;
    int min = fixed_digits(s, n, &i, 2);
    i++;
    int sec = fixed_digits(s, n, &i, 2);
    int64_t frac = 0;
    if (i + 1 < n && (s[i] == '.' || s[i] == ',')) {
        int digits = 0;
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            if (digits < 9) {
                frac = frac * 10 + (s[i] - '0');
                digits++;
            }
        for (; digits < 9; digits++)
            frac *= 10;
    }
    int64_t off_s = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) {
        int sign = s[i] == '-' ? -1 : 1;
        i++;
        int zh = fixed_digits(s, n, &i, 2);
        i++;
        int zm = fixed_digits(s, n, &i, 2);
        off_s = sign * ((int64_t)zh * 3600 + (int64_t)zm * 60);
    }
    /* days from civil (proleptic Gregorian), Howard Hinnant's algorithm */
    int64_t y = year - (month <= 2);
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    int64_t secs = days * 86400 + hour * 3600 + min * 60 + sec - off_s;
    /* int64 nanoseconds span 1677-09-21T00:12:43.145224192Z..2262-04-11T23:47:16.854775807Z
     * while RFC 3339 allows the years 0000-9999. Times outside saturate (Go leaves UnixNano
     * undefined there): they still order before or after every representable time. */
    const int64_t ns = 1000000000, max_s = INT64_MAX / ns, min_s = INT64_MIN / ns;
    if (secs > max_s || (secs == max_s && frac > INT64_MAX % ns)) return INT64_MAX;
    if (secs < min_s - 1 || (secs == min_s - 1 && frac < ns + INT64_MIN % ns)) return INT64_MIN;
    if (secs == min_s - 1) return (secs + 1) * ns - (ns - frac);
    return secs * ns + frac;
}

int delta_parse_time(const char *text, int64_t *ns_out) {
    size_t n = text ? strlen(text) : 0;
    if (!text || !rfc3339_valid(text, n))
        return err_set(ERR_INVALID, "\"%.64s\" is not an RFC 3339 time", text ? text : "");
    *ns_out = rfc3339_to_ns(text, n);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Writer */

struct DeltaWriter {
    int fd;
    int broken;        /* a failed write could not be undone: ERR_IO until reset */
    int sealed;        /* "]" and the digest are written */
    uint64_t file_off; /* bytes confirmed in the spool file */
    uint8_t *buf;      /* bytes after file_off, not yet written */
    size_t buf_len;
    uint8_t *scratch; /* encoding of the event being appended */
    size_t scratch_len, scratch_cap;
    EVP_MD_CTX *sha; /* running hash of the committed JSON bytes */
    size_t events;
    uint64_t json_bytes;
    int64_t first_rev, last_rev;
};

static int sc_reserve(DeltaWriter *w, size_t more) {
    if (more > SIZE_MAX / 2 - w->scratch_len)
        return err_set(ERR_NOMEM, "delta event encoding too large");
    return array_reserve_bytes(&w->scratch, &w->scratch_cap, w->scratch_len + more, 1024,
                               "delta: encoding an event");
}

static int sc_put(DeltaWriter *w, const void *p, size_t n) {
    int rc = sc_reserve(w, n);
    if (rc) return rc;
    memcpy(w->scratch + w->scratch_len, p, n);
    w->scratch_len += n;
    return 0;
}

static int sc_puts(DeltaWriter *w, const char *s) {
    return sc_put(w, s, strlen(s));
}

/* Go's encoding of a []byte: a JSON string of standard padded base64. */
static int sc_base64(DeltaWriter *w, const uint8_t *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n > (SIZE_MAX / 4 - 4) / 3 * 3) return err_set(ERR_NOMEM, "delta: value too large");
    int rc = sc_reserve(w, (n + 2) / 3 * 4 + 2);
    if (rc) return rc;
    uint8_t *o = w->scratch + w->scratch_len;
    *o++ = '"';
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = (uint8_t)tab[v >> 18];
        *o++ = (uint8_t)tab[(v >> 12) & 63];
        *o++ = (uint8_t)tab[(v >> 6) & 63];
        *o++ = (uint8_t)tab[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        *o++ = (uint8_t)tab[v >> 18];
        *o++ = (uint8_t)tab[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        *o++ = (uint8_t)tab[v >> 18];
        *o++ = (uint8_t)tab[(v >> 12) & 63];
        *o++ = (uint8_t)tab[(v >> 6) & 63];
        *o++ = '=';
    }
    *o++ = '"';
    w->scratch_len = (size_t)(o - w->scratch);
    return 0;
}

/* Appends `,"name":value` (no comma for the first field of an object). */
static int sc_field_i64(DeltaWriter *w, int *first, const char *name, int64_t v) {
    char tmp[96];
    int n = snprintf(tmp, sizeof tmp, "%s\"%s\":%" PRId64, *first ? "" : ",", name, v);
    *first = 0;
    return sc_put(w, tmp, (size_t)n);
}

static int sc_field_bytes(DeltaWriter *w, int *first, const char *name, const uint8_t *p,
                          size_t n) {
    char tmp[64];
    int len = snprintf(tmp, sizeof tmp, "%s\"%s\":", *first ? "" : ",", name);
    *first = 0;
    int rc = sc_put(w, tmp, (size_t)len);
    return rc ? rc : sc_base64(w, p, n);
}

int delta_format_time(int64_t ns, char out[48]) {
    int64_t sec = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    if (!gmtime_r(&t, &tm))
        return err_set(ERR_INVALID, "delta: time %" PRId64 " ns out of range", ns);
    int n = snprintf(out, 48, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (frac) {
        n += snprintf(out + n, (size_t)(48 - n), ".%09" PRId64, frac);
        while (out[n - 1] == '0')
            n--;
    }
    out[n++] = 'Z';
    out[n] = '\0';
    return 0;
}

/* Writes the buffered bytes at file_off. On failure the unwritten rest stays buffered. */
static int w_flush(DeltaWriter *w) {
    size_t done = 0;
    int rc = 0;
    while (done < w->buf_len) {
        ssize_t n = pwrite(w->fd, w->buf + done, w->buf_len - done, (off_t)w->file_off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            rc = err_set(ERR_IO, "write delta spool at byte %" PRIu64 ": %s", w->file_off,
                         n < 0 ? strerror(errno) : "no progress");
            break;
        }
        done += (size_t)n;
        w->file_off += (uint64_t)n;
    }
    if (done > 0) memmove(w->buf, w->buf + done, w->buf_len - done);
    w->buf_len -= done;
    return rc;
}

static int w_write(DeltaWriter *w, const uint8_t *p, size_t n) {
    if (w->buf_len + n <= DELTA_WBUF_SIZE) {
        memcpy(w->buf + w->buf_len, p, n);
        w->buf_len += n;
        return 0;
    }
    int rc = w_flush(w);
    if (rc) return rc;
    if (n <= DELTA_WBUF_SIZE) {
        memcpy(w->buf, p, n);
        w->buf_len = n;
        return 0;
    }
    while (n > 0) {
        ssize_t k = pwrite(w->fd, p, n, (off_t)w->file_off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return err_set(ERR_IO, "write delta spool at byte %" PRIu64 ": %s", w->file_off,
                           k < 0 ? strerror(errno) : "no progress");
        p += k;
        n -= (size_t)k;
        w->file_off += (uint64_t)k;
    }
    return 0;
}

/* Forgets everything written after logical length len0 (kept bytes are unchanged). */
static void w_rollback(DeltaWriter *w, uint64_t len0) {
    if (len0 >= w->file_off) {
        w->buf_len = (size_t)(len0 - w->file_off);
        return;
    }
    w->buf_len = 0;
    if (ftruncate(w->fd, (off_t)len0) != 0) {
        w->broken = 1;
        return;
    }
    w->file_off = len0;
}

int delta_writer_new(const char *spool_dir, DeltaWriter **out) {
    int rc = 0;
    DeltaWriter *w = NULL;
    if (!out) return err_set(ERR_INVALID, "delta_writer_new: no output");
    *out = NULL;
    w = calloc(1, sizeof *w);
    if (!w) return err_set(ERR_NOMEM, "delta writer: out of memory");
    w->fd = -1;
    w->buf = malloc(DELTA_WBUF_SIZE);
    w->sha = EVP_MD_CTX_new();
    if (!w->buf || !w->sha || EVP_DigestInit_ex(w->sha, EVP_sha256(), NULL) != 1) {
        rc = err_set(ERR_NOMEM, "delta writer: out of memory");
        goto done;
    }
    w->fd = spool_open(spool_dir);
    if (w->fd < 0) {
        rc = w->fd;
        goto done;
    }
    *out = w;
    w = NULL;
done:
    delta_writer_free(w);
    return rc;
}

void delta_writer_free(DeltaWriter *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    EVP_MD_CTX_free(w->sha);
    FREE_ALL(w->buf, w->scratch, w);
}

/* lease_ttl > 0 adds etcdbr's element field "leaseTTL" after "time" (the one place the reader's
 * fast path expects it). */
static int writer_append(DeltaWriter *w, const EtcdEvent *ev, const char *time_text,
                         int64_t lease_ttl) {
    if (!w || !ev) return err_set(ERR_INVALID, "delta_writer_append: no writer or event");
    if (w->broken) return err_set(ERR_IO, "delta spool unusable after a failed write; reset it");
    if (w->sealed) return err_set(ERR_INVALID, "delta writer already closed; reset it first");
    const EtcdKeyValue *kv = &ev->kv;
    if (ev->type != ETCD_OP_PUT && ev->type != ETCD_OP_DELETE)
        return err_set(ERR_INVALID, "delta: event type %d is neither PUT nor DELETE",
                       (int)ev->type);
    if (kv->mod_revision <= 0)
        return err_set(ERR_INVALID, "delta: event mod_revision %" PRId64 " is not positive",
                       kv->mod_revision);
    if (w->events > 0 && kv->mod_revision < w->last_rev)
        return err_set(ERR_INVALID, "delta: event mod_revision %" PRId64 " after %" PRId64,
                       kv->mod_revision, w->last_rev);
    if ((kv->key_len && !kv->key) || (kv->value_len && !kv->value))
        return err_set(ERR_INVALID, "delta: event key or value pointer is NULL");
    if (lease_ttl > 0 && (ev->type != ETCD_OP_PUT || kv->lease == 0))
        return err_set(ERR_INVALID,
                       "delta: leaseTTL %" PRId64 " on an event at revision %" PRId64
                       " that is not a put with a lease",
                       lease_ttl, kv->mod_revision);

    w->scratch_len = 0;
    int first = 1, rc;
    if ((rc = sc_puts(w, w->events == 0 ? "[{\"etcdEvent\":{" : ",{\"etcdEvent\":{"))) return rc;
    if (ev->type != ETCD_OP_PUT && (rc = sc_field_i64(w, &first, "type", (int64_t)ev->type)))
        return rc;
    if ((rc = sc_puts(w, first ? "\"kv\":{" : ",\"kv\":{"))) return rc;
    first = 1;
    if (kv->key_len && (rc = sc_field_bytes(w, &first, "key", kv->key, kv->key_len))) return rc;
    if (kv->create_revision &&
        (rc = sc_field_i64(w, &first, "create_revision", kv->create_revision)))
        return rc;
    if ((rc = sc_field_i64(w, &first, "mod_revision", kv->mod_revision))) return rc;
    if (kv->version && (rc = sc_field_i64(w, &first, "version", kv->version))) return rc;
    if (kv->value_len && (rc = sc_field_bytes(w, &first, "value", kv->value, kv->value_len)))
        return rc;
    if (kv->lease && (rc = sc_field_i64(w, &first, "lease", kv->lease))) return rc;
    if ((rc = sc_puts(w, "}},\"time\":\"")) || (rc = sc_puts(w, time_text)) ||
        (rc = sc_puts(w, "\"")))
        return rc;
    first = 0;
    if (lease_ttl > 0 && (rc = sc_field_i64(w, &first, "leaseTTL", lease_ttl))) return rc;
    if ((rc = sc_puts(w, "}"))) return rc;

    uint64_t len0 = w->file_off + w->buf_len;
    rc = w_write(w, w->scratch, w->scratch_len);
    if (rc) {
        w_rollback(w, len0);
        return rc;
    }
    EVP_DigestUpdate(w->sha, w->scratch, w->scratch_len);
    if (w->events == 0) w->first_rev = kv->mod_revision;
    w->last_rev = kv->mod_revision;
    w->events++;
    w->json_bytes += w->scratch_len;
    return 0;
}

int delta_writer_append(DeltaWriter *w, const EtcdEvent *ev, int64_t received_ns) {
    return delta_writer_append_lease(w, ev, received_ns, 0);
}

int delta_writer_append_lease(DeltaWriter *w, const EtcdEvent *ev, int64_t received_ns,
                              int64_t lease_ttl) {
    char t[48];
    int rc = delta_format_time(received_ns, t);
    return rc ? rc : writer_append(w, ev, t, lease_ttl);
}

int delta_writer_append_with_time(DeltaWriter *w, const EtcdEvent *ev, const char *time_text) {
    if (!time_text || !rfc3339_valid(time_text, strlen(time_text)))
        return err_set(ERR_INVALID, "delta: time \"%.64s\" is not RFC 3339",
                       time_text ? time_text : "(null)");
    return writer_append(w, ev, time_text, 0);
}

size_t delta_writer_events(const DeltaWriter *w) {
    return w ? w->events : 0;
}
uint64_t delta_writer_bytes(const DeltaWriter *w) {
    return w ? w->json_bytes : 0;
}
int64_t delta_writer_first_revision(const DeltaWriter *w) {
    return w && w->events ? w->first_rev : 0;
}
int64_t delta_writer_last_revision(const DeltaWriter *w) {
    return w && w->events ? w->last_rev : 0;
}

/* pread-based reader over the first `size` bytes of a dup of the spool fd. */
typedef struct {
    IoReader base;
    int fd;
    uint64_t size, pos;
} SpoolReader;

static int spool_read(IoReader *base, void *buf, size_t cap, size_t *got) {
    SpoolReader *s = (SpoolReader *)base;
    *got = 0;
    if (s->pos >= s->size || cap == 0) return 0;
    if (cap > s->size - s->pos) cap = (size_t)(s->size - s->pos);
    for (;;) {
        ssize_t n = pread(s->fd, buf, cap, (off_t)s->pos);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return err_set(ERR_IO, "read delta spool: %s", strerror(errno));
        if (n == 0)
            return err_set(ERR_IO,
                           "delta spool ends at %" PRIu64 " of %" PRIu64
                           " bytes (writer reset while its payload was read?)",
                           s->pos, s->size);
        s->pos += (uint64_t)n;
        *got = (size_t)n;
        return 0;
    }
}

static void spool_reader_free(IoReader *base) {
    SpoolReader *s = (SpoolReader *)base;
    if (s->fd >= 0) close(s->fd);
    free(s);
}

static const IoReaderVt spool_reader_vt = {spool_read, spool_reader_free};

int delta_writer_payload(DeltaWriter *w, IoReader **out) {
    int rc = 0;
    EVP_MD_CTX *tmp = NULL;
    SpoolReader *s = NULL;
    if (!w || !out) return err_set(ERR_INVALID, "delta_writer_payload: no writer or output");
    *out = NULL;
    if (w->broken) return err_set(ERR_IO, "delta spool unusable after a failed write; reset it");
    if (!w->sealed) {
        if (w->events == 0) return err_set(ERR_INVALID, "delta: no events to write");
        uint8_t tail[1 + DELTA_HASH_LEN] = {']'};
        unsigned int dlen = 0;
        tmp = EVP_MD_CTX_new();
        if (!tmp || EVP_MD_CTX_copy_ex(tmp, w->sha) != 1 || EVP_DigestUpdate(tmp, "]", 1) != 1 ||
            EVP_DigestFinal_ex(tmp, tail + 1, &dlen) != 1) {
            rc = err_set(ERR_NOMEM, "delta: cannot compute SHA-256");
            goto done;
        }
        uint64_t len0 = w->file_off + w->buf_len;
        rc = w_write(w, tail, sizeof tail);
        if (!rc) rc = w_flush(w);
        if (rc) {
            w_rollback(w, len0);
            goto done;
        }
        w->sealed = 1;
        w->json_bytes += 1;
    } else if ((rc = w_flush(w))) {
        goto done;
    }
    s = calloc(1, sizeof *s);
    if (!s) {
        rc = err_set(ERR_NOMEM, "delta: out of memory");
        goto done;
    }
    s->base.vt = &spool_reader_vt;
    s->size = w->file_off;
    s->fd = fcntl(w->fd, F_DUPFD_CLOEXEC, 0);
    if (s->fd < 0) {
        rc = err_set(ERR_IO, "dup delta spool fd: %s", strerror(errno));
        goto done;
    }
    *out = &s->base;
    s = NULL;
done:
    EVP_MD_CTX_free(tmp);
    if (s) spool_reader_free(&s->base);
    return rc;
}

int delta_writer_reset(DeltaWriter *w) {
    if (!w) return err_set(ERR_INVALID, "delta_writer_reset: no writer");
    if (ftruncate(w->fd, 0) != 0)
        return err_set(ERR_IO, "truncate delta spool: %s", strerror(errno));
    if (EVP_DigestInit_ex(w->sha, EVP_sha256(), NULL) != 1)
        return err_set(ERR_NOMEM, "delta: cannot reset SHA-256");
    w->broken = 0;
    w->sealed = 0;
    w->file_off = 0;
    w->buf_len = 0;
    w->events = 0;
    w->json_bytes = 0;
    w->first_rev = w->last_rev = 0;
    if (w->scratch_cap > (size_t)4 * 1024 * 1024) { /* give back memory of a huge event */
        free(w->scratch);
        w->scratch = NULL;
        w->scratch_cap = 0;
    }
    w->scratch_len = 0;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Reader */

enum { RD_START, RD_AFTER_ELEM, RD_DONE };

struct DeltaReader {
    int fd;
    uint64_t json_len; /* bytes of JSON in the spool (payload minus trailer) */
    uint8_t *rbuf;     /* window [rbuf_off, rbuf_off + rbuf_len) of the spool */
    uint64_t rbuf_off;
    size_t rbuf_len, rbuf_pos;
    int state;
    int err;           /* sticky error code, repeated by later calls */
    char errmsg[2048]; /* as err.c keeps */
    uint8_t *elem;     /* bytes of the current top-level element */
    size_t elem_len, elem_cap;
    uint8_t *key, *value;
    size_t key_cap, value_cap;
    int64_t last_rev;
    uint64_t index;       /* events returned so far */
    uint64_t fast_events; /* events the fast path decoded since open (rewind included) */
};

static int rd_fail(DeltaReader *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int rd_fail(DeltaReader *r, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err_setv(code, fmt, ap);
    va_end(ap);
    r->err = code;
    snprintf(r->errmsg, sizeof r->errmsg, "%s", err_msg());
    return code;
}

/* 1 when a byte is available at rbuf[rbuf_pos], 0 at the end of the JSON, or ERR_IO. */
static int rd_fill(DeltaReader *r) {
    if (r->rbuf_pos < r->rbuf_len) return 1;
    uint64_t off = r->rbuf_off + r->rbuf_len;
    if (off >= r->json_len) return 0;
    size_t want = DELTA_RBUF_SIZE;
    if (want > r->json_len - off) want = (size_t)(r->json_len - off);
    for (;;) {
        ssize_t n = pread(r->fd, r->rbuf, want, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return rd_fail(r, ERR_IO, "read delta spool at byte %" PRIu64 ": %s", off,
                           n < 0 ? strerror(errno) : "file shorter than written");
        r->rbuf_off = off;
        r->rbuf_len = (size_t)n;
        r->rbuf_pos = 0;
        return 1;
    }
}

static uint64_t rd_offset(const DeltaReader *r) {
    return r->rbuf_off + r->rbuf_pos;
}

/* Skips JSON whitespace; then like rd_fill. */
static int rd_skip_ws(DeltaReader *r) {
    for (;;) {
        int f = rd_fill(r);
        if (f <= 0) return f;
        uint8_t c = r->rbuf[r->rbuf_pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return 1;
        r->rbuf_pos++;
    }
}

static const char *rd_char_name(int c, char tmp[16]) {
    if (c < 0) return "end of data";
    if (c >= 0x21 && c < 0x7f)
        snprintf(tmp, 16, "'%c'", c);
    else
        snprintf(tmp, 16, "byte 0x%02x", c);
    return tmp;
}

/* Copies the element starting at the current '{' into r->elem: strings and escapes are tracked
 * so brackets inside strings do not count; jansson checks the rest. */
static int rd_element(DeltaReader *r, uint64_t start) {
    size_t depth = 0;
    int in_str = 0, esc = 0;
    r->elem_len = 0;
    for (;;) {
        int f = rd_fill(r);
        if (f < 0) return f;
        if (f == 0)
            return rd_fail(r, ERR_CORRUPT,
                           "delta event %" PRIu64 " at byte offset %" PRIu64
                           ": JSON ends inside the element",
                           r->index, start);
        const uint8_t *p = r->rbuf + r->rbuf_pos;
        size_t avail = r->rbuf_len - r->rbuf_pos, i = 0;
        int done = 0;
        for (; i < avail; i++) {
            uint8_t c = p[i];
            if (in_str) {
                if (esc)
                    esc = 0;
                else if (c == '\\')
                    esc = 1;
                else if (c == '"')
                    in_str = 0;
            } else if (c == '"') {
                in_str = 1;
            } else if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    i++;
                    done = 1;
                    break;
                }
            }
        }
        if (i > DELTA_MAX_ELEMENT - r->elem_len)
            return rd_fail(r, ERR_CORRUPT,
                           "delta event %" PRIu64 " at byte offset %" PRIu64
                           ": element larger than %zu MiB",
                           r->index, start, DELTA_MAX_ELEMENT >> 20);
        if (r->elem_len + i > r->elem_cap) {
            size_t cap = r->elem_cap ? r->elem_cap : 4096;
            while (cap < r->elem_len + i)
                cap *= 2;
            if (cap > DELTA_MAX_ELEMENT) cap = DELTA_MAX_ELEMENT;
            uint8_t *n = realloc(r->elem, cap);
            if (!n) return rd_fail(r, ERR_NOMEM, "delta: out of memory for a %zu-byte event", cap);
            r->elem = n;
            r->elem_cap = cap;
        }
        memcpy(r->elem + r->elem_len, p, i);
        r->elem_len += i;
        r->rbuf_pos += i;
        if (done) return 0;
    }
}

/* Decoding of one element, with Go encoding/json semantics: keys match case-insensitively,
 * later keys override earlier ones, nested objects merge into what is already decoded, null
 * leaves a number alone and clears bytes and objects. */
typedef struct {
    DeltaReader *r;
    char why[256];
} DecodeCtx;

static int dc_fail(DecodeCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int dc_fail(DecodeCtx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    return -1;
}

/* Go matches a JSON key to a field name exactly or after folding to upper case; besides ASCII,
 * U+0131 (dotless i) folds to 'I' and U+017F (long s) to 'S'. name is lower-case ASCII. */
static int key_is(const char *k, size_t klen, const char *name) {
    size_t i = 0;
    for (; *name; name++) {
        if (i >= klen) return 0;
        unsigned char c = (unsigned char)k[i];
        if (c < 0x80) {
            if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
            if (c != (unsigned char)*name) return 0;
            i++;
        } else if (klen - i >= 2 && memcmp(k + i, "\xc4\xb1", 2) == 0 && *name == 'i') {
            i += 2;
        } else if (klen - i >= 2 && memcmp(k + i, "\xc5\xbf", 2) == 0 && *name == 's') {
            i += 2;
        } else {
            return 0;
        }
    }
    return i == klen;
}

static int get_int(DecodeCtx *c, json_t *v, const char *name, int64_t *dst) {
    if (json_is_null(v)) return 0;
    if (!json_is_integer(v)) return dc_fail(c, "\"%s\" is not an integer", name);
    *dst = (int64_t)json_integer_value(v);
    return 0;
}

/* Go's []byte decoding: base64.StdEncoding (padding required, '\r' and '\n' ignored). With
 * buf NULL it only validates. */
static int get_bytes(DecodeCtx *c, json_t *v, const char *name, uint8_t **buf, size_t *cap,
                     size_t *len) {
    if (json_is_null(v)) {
        if (len) *len = 0;
        return 0;
    }
    if (!json_is_string(v)) return dc_fail(c, "\"%s\" is not a string", name);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v), out_len = 0;
    const unsigned flags = B64_PAD_REQUIRED | B64_SKIP_CRLF;
    B64Fault fault;
    if (b64_decoded_len(s, n, flags, &out_len, &fault))
        return dc_fail(c, "\"%s\" is not padded base64: %s at character %zu", name, fault.why,
                       fault.at);
    if (!buf) return 0;
    if (out_len + 1 > *cap) {
        uint8_t *p = realloc(*buf, out_len + 1);
        if (!p) return dc_fail(c, "out of memory for %zu bytes of \"%s\"", out_len, name);
        *buf = p;
        *cap = out_len + 1;
    }
    if (b64_decode(s, n, flags, *buf, *cap, len, &fault))
        return dc_fail(c, "\"%s\": %s", name, fault.why);
    return 0;
}

typedef struct {
    int64_t type;
    int have_kv;
    size_t key_len, value_len;
    int64_t create_revision, mod_revision, version, lease;
    int64_t time_ns;
    int64_t lease_ttl;
} EvState;

static void ev_clear_kv(EvState *e) {
    e->have_kv = 0;
    e->key_len = e->value_len = 0;
    e->create_revision = e->mod_revision = e->version = e->lease = 0;
}

/* Decodes a mvccpb.KeyValue object into e (or only validates it when e is NULL: prev_kv). */
static int decode_kv(DecodeCtx *c, json_t *obj, EvState *e, const char *what) {
    DeltaReader *r = c->r;
    const char *k;
    size_t klen;
    json_t *v;
    int64_t dummy;
    json_object_keylen_foreach(obj, k, klen, v) {
        int rc = 0;
        if (key_is(k, klen, "key"))
            rc = e ? get_bytes(c, v, "key", &r->key, &r->key_cap, &e->key_len)
                   : get_bytes(c, v, "key", NULL, NULL, NULL);
        else if (key_is(k, klen, "value"))
            rc = e ? get_bytes(c, v, "value", &r->value, &r->value_cap, &e->value_len)
                   : get_bytes(c, v, "value", NULL, NULL, NULL);
        else if (key_is(k, klen, "create_revision"))
            rc = get_int(c, v, "create_revision", e ? &e->create_revision : &dummy);
        else if (key_is(k, klen, "mod_revision"))
            rc = get_int(c, v, "mod_revision", e ? &e->mod_revision : &dummy);
        else if (key_is(k, klen, "version"))
            rc = get_int(c, v, "version", e ? &e->version : &dummy);
        else if (key_is(k, klen, "lease"))
            rc = get_int(c, v, "lease", e ? &e->lease : &dummy);
        if (rc) {
            char inner[sizeof c->why];
            memcpy(inner, c->why, sizeof inner);
            return dc_fail(c, "%s: %s", what, inner);
        }
    }
    return 0;
}

static int decode_event(DecodeCtx *c, json_t *obj, EvState *e) {
    const char *k;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(obj, k, klen, v) {
        if (key_is(k, klen, "type")) {
            if (json_is_null(v)) continue;
            if (!json_is_integer(v)) return dc_fail(c, "\"type\" is not an integer");
            json_int_t t = json_integer_value(v);
            if (t < INT32_MIN || t > INT32_MAX) return dc_fail(c, "\"type\" out of int32 range");
            e->type = (int64_t)t;
        } else if (key_is(k, klen, "kv")) {
            if (json_is_null(v)) {
                ev_clear_kv(e);
            } else if (json_is_object(v)) {
                e->have_kv = 1;
                if (decode_kv(c, v, e, "kv")) return -1;
            } else {
                return dc_fail(c, "\"kv\" is not an object");
            }
        } else if (key_is(k, klen, "prev_kv")) {
            if (json_is_null(v)) continue;
            if (!json_is_object(v)) return dc_fail(c, "\"prev_kv\" is not an object");
            if (decode_kv(c, v, NULL, "prev_kv")) return -1;
        }
    }
    return 0;
}

static int decode_element(DecodeCtx *c, json_t *root, EvState *e) {
    const char *k;
    size_t klen;
    json_t *v;
    int have_time = 0;
    if (!json_is_object(root)) return dc_fail(c, "element is not an object");
    json_object_keylen_foreach(root, k, klen, v) {
        if (key_is(k, klen, "etcdevent")) {
            if (json_is_null(v)) {
                memset(e, 0, sizeof *e);
            } else if (json_is_object(v)) {
                if (decode_event(c, v, e)) return -1;
            } else {
                return dc_fail(c, "\"etcdEvent\" is not an object");
            }
        } else if (key_is(k, klen, "leasettl")) {
            if (get_int(c, v, "leaseTTL", &e->lease_ttl)) return -1;
        } else if (key_is(k, klen, "time")) {
            if (!json_is_string(v)) return dc_fail(c, "\"time\" is not a string");
            const char *s = json_string_value(v);
            size_t n = json_string_length(v);
            if (!rfc3339_valid(s, n))
                return dc_fail(c, "\"time\" \"%.*s\" is not RFC 3339", n > 64 ? 64 : (int)n, s);
            e->time_ns = rfc3339_to_ns(s, n);
            have_time = 1;
        }
    }
    if (!have_time) return dc_fail(c, "no \"time\"");
    if (e->type != ETCD_OP_PUT && e->type != ETCD_OP_DELETE)
        return dc_fail(c, "event type %" PRId64 " is neither PUT (0) nor DELETE (1)", e->type);
    if (!e->have_kv) return dc_fail(c, "event has no \"kv\"");
    if (e->mod_revision <= 0)
        return dc_fail(c, "mod_revision %" PRId64 " is not positive", e->mod_revision);
    return 0;
}

/* Fast path: the canonical form both tools write (Go's encoding/json of the Go tool's event
 * struct: no whitespace, fixed key order and spelling, omitempty, no escapes in base64 or time).
 * Returns 1 with e filled when the element is exactly that form and valid; 0 for anything else,
 * which then goes through the general (jansson) decoder, the authority on errors. */
typedef struct {
    const uint8_t *p, *end;
} Fp;

static int fp_lit(Fp *f, const char *lit, size_t n) {
    if ((size_t)(f->end - f->p) < n || memcmp(f->p, lit, n) != 0) return 0;
    f->p += n;
    return 1;
}

#define FP_LIT(f, s) fp_lit((f), (s), sizeof(s) - 1)

static int fp_int(Fp *f, int64_t *v) {
    int neg = f->p < f->end && *f->p == '-';
    const uint8_t *q = f->p + neg;
    uint64_t acc = 0;
    size_t digits = 0;
    while (q < f->end && *q >= '0' && *q <= '9') {
        if (digits == 19) return 0; /* 20+ digits: leave range checks to the general path */
        acc = acc * 10 + (uint64_t)(*q++ - '0'); /* 19 digits fit in a uint64 */
        digits++;
    }
    if (!digits || (digits > 1 && f->p[neg] == '0')) return 0;
    if (acc > (uint64_t)INT64_MAX + (uint64_t)neg) return 0;
    *v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    f->p = q;
    return 1;
}

static int fp_str(Fp *f, const uint8_t **s, size_t *n) {
    if (f->p >= f->end || *f->p != '"') return 0;
    const uint8_t *q = f->p + 1, *start = q;
    while (q < f->end && *q != '"') {
        if (*q == '\\' || *q < 0x20 || *q >= 0x80) return 0;
        q++;
    }
    if (q >= f->end) return 0;
    *s = start;
    *n = (size_t)(q - start);
    f->p = q + 1;
    return 1;
}

/* Strict padded standard base64 into *buf (grown as needed). 0 on any irregularity. */
static int fp_b64(Fp *f, uint8_t **buf, size_t *cap, size_t *len) {
    const uint8_t *s;
    size_t n;
    if (!fp_str(f, &s, &n) || n % 4) return 0;
    size_t pad = n && s[n - 1] == '=' ? (n > 1 && s[n - 2] == '=' ? 2 : 1) : 0;
    size_t out_len = n / 4 * 3 - pad;
    if (out_len + 1 > *cap) {
        uint8_t *p = realloc(*buf, out_len + 1);
        if (!p) return 0;
        *buf = p;
        *cap = out_len + 1;
    }
    const int8_t *t = b64_table();
    uint8_t *o = *buf;
    size_t w = 0;
    for (size_t i = 0; i < n; i += 4) {
        int a = t[s[i]], b = t[s[i + 1]], c, d;
        int last = i + 4 == n;
        c = last && pad == 2 ? 0 : t[s[i + 2]];
        d = last && pad >= 1 ? 0 : t[s[i + 3]];
        if ((a | b | c | d) < 0) return 0;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        if (last && pad) {
            /* Go's strict decoder is not used: non-zero trailing bits are accepted, as the
             * general path does */
            o[w++] = (uint8_t)(v >> 16);
            if (pad == 1) o[w++] = (uint8_t)(v >> 8);
        } else {
            o[w++] = (uint8_t)(v >> 16);
            o[w++] = (uint8_t)(v >> 8);
            o[w++] = (uint8_t)v;
        }
    }
    *len = out_len;
    return 1;
}

static int fast_decode(DeltaReader *r, EvState *e) {
    Fp f = {r->elem, r->elem + r->elem_len};
    memset(e, 0, sizeof *e);
    if (!FP_LIT(&f, "{\"etcdEvent\":{")) return 0;
    if (FP_LIT(&f, "\"type\":") && (!fp_int(&f, &e->type) || !FP_LIT(&f, ","))) return 0;
    if (!FP_LIT(&f, "\"kv\":{")) return 0;
    e->have_kv = 1;
    int any = 0;
    if (FP_LIT(&f, "\"key\":")) {
        if (!fp_b64(&f, &r->key, &r->key_cap, &e->key_len)) return 0;
        any = 1;
    }
    static const struct {
        const char *lit;
        size_t len;
        size_t off;
    } ints[] = {
        {"\"create_revision\":", 18, offsetof(EvState, create_revision)},
        {"\"mod_revision\":", 15, offsetof(EvState, mod_revision)},
        {"\"version\":", 10, offsetof(EvState, version)},
    };
    for (size_t i = 0; i < 3; i++) {
        const uint8_t *save = f.p;
        if (any && !FP_LIT(&f, ",")) break;
        if (!fp_lit(&f, ints[i].lit, ints[i].len)) {
            f.p = save;
            continue;
        }
        if (!fp_int(&f, (int64_t *)((char *)e + ints[i].off))) return 0;
        any = 1;
    }
    {
        const uint8_t *save = f.p;
        if ((!any || FP_LIT(&f, ",")) && FP_LIT(&f, "\"value\":")) {
            if (!fp_b64(&f, &r->value, &r->value_cap, &e->value_len)) return 0;
            any = 1;
        } else {
            f.p = save;
        }
    }
    {
        const uint8_t *save = f.p;
        if ((!any || FP_LIT(&f, ",")) && FP_LIT(&f, "\"lease\":")) {
            if (!fp_int(&f, &e->lease)) return 0;
        } else {
            f.p = save;
        }
    }
    if (!FP_LIT(&f, "}},\"time\":")) return 0;
    const uint8_t *ts;
    size_t tn;
    if (!fp_str(&f, &ts, &tn) || !rfc3339_valid((const char *)ts, tn)) return 0;
    e->time_ns = rfc3339_to_ns((const char *)ts, tn);
    if (FP_LIT(&f, ",\"leaseTTL\":") && !fp_int(&f, &e->lease_ttl)) return 0;
    if (!FP_LIT(&f, "}") || f.p != f.end) return 0;
    return (e->type == ETCD_OP_PUT || e->type == ETCD_OP_DELETE) && e->mod_revision > 0;
}

int delta_reader_copy_payload(const DeltaReader *r, int fd_out) {
    uint8_t buf[64 * 1024];
    uint64_t end = r->json_len + DELTA_HASH_LEN;
    for (uint64_t off = 0; off < end;) {
        size_t want = end - off < sizeof buf ? (size_t)(end - off) : sizeof buf;
        ssize_t n = pread(r->fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return err_set(ERR_IO, "read the delta spool: %s", n ? strerror(errno) : "EOF");
        for (ssize_t w = 0; w < n;) {
            ssize_t k = write(fd_out, buf + w, (size_t)(n - w));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) return err_set(ERR_IO, "write a copy of a delta: %s", strerror(errno));
            w += k;
        }
        off += (uint64_t)n;
    }
    return 0;
}

int delta_reader_open(IoReader *src, const char *tmp_dir, DeltaReader **out) {
    int rc = 0;
    DeltaReader *r = NULL;
    EVP_MD_CTX *sha = NULL;
    uint8_t held[DELTA_HASH_LEN], digest[DELTA_HASH_LEN];
    size_t held_len = 0;
    uint64_t total = 0;
    if (!out) return err_set(ERR_INVALID, "delta_reader_open: no output");
    *out = NULL;
    if (!src) return err_set(ERR_INVALID, "delta_reader_open: no source");
    r = calloc(1, sizeof *r);
    if (!r) return err_set(ERR_NOMEM, "delta reader: out of memory");
    r->fd = -1;
    r->rbuf = malloc(DELTA_RBUF_SIZE);
    r->key = malloc(1);
    r->value = malloc(1);
    sha = EVP_MD_CTX_new();
    if (!r->rbuf || !r->key || !r->value || !sha ||
        EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1) {
        rc = err_set(ERR_NOMEM, "delta reader: out of memory");
        goto done;
    }
    r->key_cap = r->value_cap = 1;
    r->fd = spool_open(tmp_dir);
    if (r->fd < 0) {
        rc = r->fd;
        goto done;
    }
    /* Copy to the spool, hashing all but the newest 32 bytes seen so far, never into the free
     * space reserve of the spool's file system. */
    FsSpaceGuard guard = {tmp_dir, 0};
    for (;;) {
        size_t n = 0;
        rc = io_read(src, r->rbuf, DELTA_RBUF_SIZE, &n);
        if (rc) goto done;
        if (n == 0) break;
        if ((rc = fs_space_guard_check(&guard, total + n))) {
            err_wrap(rc, "delta spool after %" PRIu64 " bytes", total);
            goto done;
        }
        for (size_t done_w = 0; done_w < n;) {
            ssize_t k = pwrite(r->fd, r->rbuf + done_w, n - done_w, (off_t)(total + done_w));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                rc = err_set(ERR_IO, "write delta spool at byte %" PRIu64 ": %s", total + done_w,
                             k < 0 ? strerror(errno) : "no progress");
                goto done;
            }
            done_w += (size_t)k;
        }
        if (n >= DELTA_HASH_LEN) {
            EVP_DigestUpdate(sha, held, held_len);
            EVP_DigestUpdate(sha, r->rbuf, n - DELTA_HASH_LEN);
            memcpy(held, r->rbuf + n - DELTA_HASH_LEN, DELTA_HASH_LEN);
            held_len = DELTA_HASH_LEN;
        } else {
            if (held_len + n > DELTA_HASH_LEN) {
                size_t ex = held_len + n - DELTA_HASH_LEN;
                EVP_DigestUpdate(sha, held, ex);
                memmove(held, held + ex, held_len - ex);
                held_len -= ex;
            }
            memcpy(held + held_len, r->rbuf, n);
            held_len += n;
        }
        total += n;
    }
    if (total <= DELTA_HASH_LEN) {
        rc = err_set(ERR_CORRUPT,
                     "delta payload is %" PRIu64 " bytes: too short for JSON and a SHA-256 trailer",
                     total);
        goto done;
    }
    unsigned int dlen = 0;
    if (EVP_DigestFinal_ex(sha, digest, &dlen) != 1) {
        rc = err_set(ERR_NOMEM, "delta: cannot compute SHA-256");
        goto done;
    }
    if (memcmp(digest, held, DELTA_HASH_LEN) != 0) {
        rc = err_set(ERR_CORRUPT,
                     "delta SHA-256 trailer does not match the %" PRIu64 " bytes before it",
                     total - DELTA_HASH_LEN);
        goto done;
    }
    r->json_len = total - DELTA_HASH_LEN;
    r->state = RD_START;
    *out = r;
    r = NULL;
done:
    EVP_MD_CTX_free(sha);
    delta_reader_close(r);
    return rc;
}

/* Expects byte `want` at the current position (after whitespace) and consumes it. */
static int rd_expect(DeltaReader *r, const char *want, const char *context, int *got_c) {
    int f = rd_skip_ws(r);
    if (f < 0) return f;
    int c = f ? r->rbuf[r->rbuf_pos] : -1;
    char tmp[16];
    if (c <= 0 || !strchr(want, c))
        return rd_fail(r, ERR_CORRUPT, "delta JSON at byte offset %" PRIu64 ": expected %s, got %s",
                       rd_offset(r), context, rd_char_name(c, tmp));
    r->rbuf_pos++;
    *got_c = c;
    return 0;
}

/* After the closing ']': only whitespace may follow. */
static int rd_finish(DeltaReader *r) {
    int f = rd_skip_ws(r);
    if (f < 0) return f;
    if (f > 0)
        return rd_fail(r, ERR_CORRUPT,
                       "delta JSON at byte offset %" PRIu64 ": data after the closing ']'",
                       rd_offset(r));
    r->state = RD_DONE;
    return 0;
}

int delta_reader_next(DeltaReader *r, DeltaEvent *ev, int *got) {
    int rc = 0, c = 0;
    json_t *root = NULL;
    if (!r || !ev || !got) return err_set(ERR_INVALID, "delta_reader_next: missing argument");
    *got = 0;
    if (r->err) return err_set(r->err, "%s", r->errmsg);
    if (r->state == RD_DONE) return 0;
    if (r->state == RD_START) {
        if ((rc = rd_expect(r, "[", "'['", &c))) goto done;
        int f = rd_skip_ws(r);
        if (f < 0) {
            rc = f;
            goto done;
        }
        if (f > 0 && r->rbuf[r->rbuf_pos] == ']') { /* "[]": Go accepts an empty delta */
            r->rbuf_pos++;
            rc = rd_finish(r);
            goto done;
        }
    } else {
        if ((rc = rd_expect(r, ",]", "',' or ']'", &c))) goto done;
        if (c == ']') {
            rc = rd_finish(r);
            goto done;
        }
    }
    if ((rc = rd_expect(r, "{", "'{' (an event object)", &c))) goto done;
    r->rbuf_pos--; /* the element scan starts at its '{' */
    uint64_t start = rd_offset(r);
    if ((rc = rd_element(r, start))) goto done;

    EvState e;
    if (fast_decode(r, &e)) {
        r->fast_events++;
        goto decoded;
    }
    json_error_t jerr;
    root = json_loadb((const char *)r->elem, r->elem_len, JSON_ALLOW_NUL, &jerr);
    if (!root) {
        rc = rd_fail(r, ERR_CORRUPT,
                     "delta event %" PRIu64 " at byte offset %" PRIu64
                     ": bad JSON at offset %" PRIu64 ": %s",
                     r->index, start, start + (uint64_t)(jerr.position > 0 ? jerr.position : 0),
                     jerr.text);
        goto done;
    }
    DecodeCtx dc = {.r = r};
    memset(&e, 0, sizeof e);
    if (decode_element(&dc, root, &e)) {
        rc = rd_fail(r, ERR_CORRUPT, "delta event %" PRIu64 " at byte offset %" PRIu64 ": %s",
                     r->index, start, dc.why);
        goto done;
    }
decoded:
    if (r->index > 0 && e.mod_revision < r->last_rev) {
        rc = rd_fail(r, ERR_CORRUPT,
                     "delta event %" PRIu64 " at byte offset %" PRIu64 ": mod_revision %" PRId64
                     " is lower than the previous event's %" PRId64,
                     r->index, start, e.mod_revision, r->last_rev);
        goto done;
    }
    r->last_rev = e.mod_revision;
    r->index++;
    r->state = RD_AFTER_ELEM;
    memset(ev, 0, sizeof *ev);
    ev->type = (EtcdOpType)e.type;
    ev->key = r->key;
    ev->key_len = e.key_len;
    ev->value = r->value;
    ev->value_len = e.value_len;
    ev->create_revision = e.create_revision;
    ev->mod_revision = e.mod_revision;
    ev->version = e.version;
    ev->lease = e.lease;
    ev->time_ns = e.time_ns;
    ev->lease_ttl = e.lease_ttl;
    *got = 1;
done:
    json_decref(root);
    if (rc && !r->err) { /* keep I/O and format errors sticky */
        r->err = rc;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", err_msg());
    }
    return rc;
}

int delta_reader_rewind(DeltaReader *r) {
    if (!r) return err_set(ERR_INVALID, "delta_reader_rewind: no reader");
    if (r->err) return err_set(r->err, "%s", r->errmsg);
    r->rbuf_off = 0;
    r->rbuf_len = r->rbuf_pos = 0;
    r->state = RD_START;
    r->last_rev = 0;
    r->index = 0;
    return 0;
}

uint64_t delta_reader_fast_events(const DeltaReader *r) {
    return r ? r->fast_events : 0;
}

void delta_reader_close(DeltaReader *r) {
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    FREE_ALL(r->rbuf, r->elem, r->key, r->value, r);
}

int delta_event_check(const DeltaEvent *ev) {
    int64_t rev = ev->mod_revision;
    if (ev->key_len == 0)
        return err_set(ERR_CORRUPT, "event at revision %lld has no key", (long long)rev);
    if (ev->type == ETCD_OP_PUT &&
        (ev->version < 1 || ev->create_revision < 1 || ev->create_revision > rev ||
         (ev->version == 1) != (ev->create_revision == rev)))
        return err_set(ERR_CORRUPT,
                       "put at revision %lld has create_revision %lld and version %lld, which "
                       "etcd never writes",
                       (long long)rev, (long long)ev->create_revision, (long long)ev->version);
    return 0;
}

int delta_check_name_event(const char *object, int64_t start, int64_t last, int64_t prev,
                           int64_t rev) {
    if (rev < start || rev > last)
        return err_set(ERR_CORRUPT,
                       "%s: holds an event at revision %lld, outside its name's revisions "
                       "%lld-%lld: the name does not match the contents",
                       object, (long long)rev, (long long)start, (long long)last);
    if (prev == 0 && rev != start)
        return err_set(ERR_CORRUPT,
                       "%s: its first event is at revision %lld, but its name says it starts at "
                       "%lld: the name does not match the contents",
                       object, (long long)rev, (long long)start);
    if (prev != 0 && rev != prev && rev != prev + 1) /* prev < rev <= last: no overflow */
        return err_set(ERR_CORRUPT, "%s: an event at revision %lld follows one at %lld (%s)",
                       object, (long long)rev, (long long)prev,
                       rev < prev ? "events out of order" : "revisions missing inside it");
    return 0;
}

int delta_reader_each(DeltaReader *r, const char *object, int64_t start, int64_t last,
                      int (*fn)(void *ctx, const DeltaEvent *ev), void *ctx) {
    int64_t prev = 0;
    for (;;) {
        DeltaEvent ev;
        int got = 0;
        int rc = delta_reader_next(r, &ev, &got);
        if (rc) return err_wrap(rc, "%s", object);
        if (!got) break;
        if ((rc = delta_check_name_event(object, start, last, prev, ev.mod_revision))) return rc;
        prev = ev.mod_revision;
        if ((rc = fn(ctx, &ev))) return rc;
    }
    return delta_check_name_end(object, last, prev);
}

int delta_check_name_end(const char *object, int64_t last, int64_t prev) {
    if (prev == 0) return err_set(ERR_CORRUPT, "%s: holds no events (a delta never does)", object);
    if (prev != last)
        return err_set(ERR_CORRUPT,
                       "%s: its last event is at revision %lld, but its name says %lld: the name "
                       "does not match the contents",
                       object, (long long)prev, (long long)last);
    return 0;
}
