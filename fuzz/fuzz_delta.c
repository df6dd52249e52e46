/* fuzz_delta: libFuzzer target for the delta reader (src/backup/delta.c). The input is a delta
 * payload; when it is longer than 32 bytes its last 32 bytes are replaced by the SHA-256 of the
 * rest, so inputs get past the hash check into the JSON tokenizer and decoder. Every event read
 * must satisfy the reader's promises, and writing the events again and reading them back must
 * give the same events. */
#include "backup/delta.h"
#include "codec/io.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    DeltaEvent ev; /* key and value point to copies owned here */
} FuzzEvent;

static const char *spool_dir(void) {
    const char *d = getenv("TMPDIR");
    return d && *d ? d : "/tmp";
}

/* Reads all events of payload into *out (owned; free_events) and their count into *count;
 * returns 0, or -1 on an error (*out then holds the events read before it). */
static int read_all(const uint8_t *payload, size_t size, FuzzEvent **out, long *count) {
    long n = 0;
    int rc = 0;
    *out = NULL;
    *count = 0;
    IoReader *src = io_mem_reader_new(payload, size);
    DeltaReader *r = NULL;
    if (!src) abort();
    if (delta_reader_open(src, spool_dir(), &r) != 0) {
        io_reader_free(src);
        return -1;
    }
    for (;;) {
        DeltaEvent ev;
        int got = 0;
        if (delta_reader_next(r, &ev, &got) != 0) {
            rc = -1;
            break;
        }
        if (!got) break;
        /* the reader's promises */
        if (ev.type != ETCD_OP_PUT && ev.type != ETCD_OP_DELETE) abort();
        if (ev.mod_revision <= 0) abort();
        if (n > 0 && ev.mod_revision < (*out)[n - 1].ev.mod_revision) abort();
        FuzzEvent *grown = realloc(*out, (size_t)(n + 1) * sizeof **out);
        if (!grown) abort();
        *out = grown;
        FuzzEvent *e = &(*out)[n++];
        *count = n;
        e->ev = ev;
        e->ev.key = malloc(ev.key_len + 1);
        e->ev.value = malloc(ev.value_len + 1);
        if (!e->ev.key || !e->ev.value) abort();
        memcpy(e->ev.key, ev.key, ev.key_len);
        memcpy(e->ev.value, ev.value, ev.value_len);
    }
    delta_reader_close(r);
    io_reader_free(src);
    return rc;
}

static void free_events(FuzzEvent *evs, long n) {
    for (long i = 0; i < n; i++) {
        free(evs[i].ev.key);
        free(evs[i].ev.value);
    }
    free(evs);
}

/* Writes evs with the writer and returns the payload (owned) in *out, or NULL. */
static uint8_t *write_all(const FuzzEvent *evs, long n, size_t *len) {
    DeltaWriter *w = NULL;
    IoReader *pr = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, used = 0;
    if (delta_writer_new(spool_dir(), &w) != 0) abort();
    for (long i = 0; i < n; i++) {
        const DeltaEvent *d = &evs[i].ev;
        EtcdEvent ev = {.type = d->type,
                        .kv = {.key = d->key,
                               .key_len = d->key_len,
                               .value = d->value,
                               .value_len = d->value_len,
                               .create_revision = d->create_revision,
                               .mod_revision = d->mod_revision,
                               .version = d->version,
                               .lease = d->lease}};
        if (delta_writer_append(w, &ev, (int64_t)i * 1000000007) != 0) abort();
    }
    if (delta_writer_payload(w, &pr) != 0) abort();
    for (;;) {
        if (cap - used < 65536) {
            cap = cap * 2 + 65536;
            uint8_t *g = realloc(buf, cap);
            if (!g) abort();
            buf = g;
        }
        size_t got = 0;
        if (io_read(pr, buf + used, cap - used, &got) != 0) abort();
        if (got == 0) break;
        used += got;
    }
    io_reader_free(pr);
    delta_writer_free(w);
    *len = used;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *payload = malloc(size ? size : 1);
    if (!payload) return 0;
    if (size) memcpy(payload, data, size);
    if (size > 32) {
        unsigned int dlen = 0;
        if (EVP_Digest(payload, size - 32, payload + size - 32, &dlen, EVP_sha256(), NULL) != 1)
            abort();
    }
    FuzzEvent *evs = NULL;
    long n = 0;
    if (read_all(payload, size, &evs, &n) == 0 && n > 0) {
        size_t len = 0;
        uint8_t *again = write_all(evs, n, &len);
        FuzzEvent *back = NULL;
        long m = 0;
        if (read_all(again, len, &back, &m) != 0 || m != n) abort();
        for (long i = 0; i < n; i++) {
            const DeltaEvent *a = &evs[i].ev, *b = &back[i].ev;
            if (a->type != b->type || a->key_len != b->key_len || a->value_len != b->value_len ||
                a->create_revision != b->create_revision || a->mod_revision != b->mod_revision ||
                a->version != b->version || a->lease != b->lease ||
                memcmp(a->key, b->key, a->key_len) != 0 ||
                memcmp(a->value, b->value, a->value_len) != 0)
                abort();
        }
        free_events(back, m);
        free(again);
    }
    free_events(evs, n);
    free(payload);
    return 0;
}
