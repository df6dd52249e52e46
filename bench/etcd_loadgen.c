/* etcd_loadgen: writes load into an etcd for benchmarks (not a test, not shipped).
 *   etcd_loadgen ENDPOINT puts N VALUE_BYTES PREFIX [PIPELINE [VALUES]]
 * N puts of distinct keys PREFIX<i>, each its own revision, VALUE_BYTES pseudo-random printable
 * bytes; PIPELINE (default 64) puts in flight on one HTTP/2 connection. VALUES "same" (default):
 * one value with a byte changed per put (compresses to almost nothing); "k8s": every value
 * freshly generated JSON-like text (field names from a small vocabulary, random numbers and
 * ids), which deflate shrinks about as much as Kubernetes objects (~3-5x); "random": every value
 * fresh pseudo-random bytes (xorshift32, all 256 byte values), which no compressor shrinks. */
#include "common/err.h"
#include "etcd/etcd_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* vlen bytes of JSON-like text: {"field":"word-12345",...}; state is the xorshift32 state. */
static void k8s_value(uint8_t *v, size_t vlen, uint32_t *state, long id) {
    static const char *const words[] = {
        "metadata",  "namespace", "kube-system", "labels",   "annotations", "app",
        "nginx",     "image",     "ports",       "protocol", "resources",   "limits",
        "memory",    "cpu",       "status",      "Running",  "uid",         "ownerReferences",
        "container", "volume",    "configMap",   "secret",   "hostIP",      "podIP"};
    enum { NW = sizeof words / sizeof words[0] };
    uint32_t x = *state;
    size_t off = 0;
    char field[96];
    int n = snprintf(field, sizeof field, "{\"id\":%ld", id);
    for (;;) {
        for (int j = 0; j < n && off < vlen; j++)
            v[off++] = (uint8_t)field[j];
        if (off >= vlen) break;
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        uint32_t r = x;
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        if (r % 4 == 0) /* an id-like hex string: the part that does not compress */
            n = snprintf(field, sizeof field, ",\"%s\":\"%08x%08x\"", words[(r >> 8) % NW], x,
                         x * 2654435761u);
        else
            n = snprintf(field, sizeof field, ",\"%s\":\"%s-%u\"", words[(r >> 8) % NW],
                         words[(r >> 16) % NW], x % 100000);
    }
    *state = x;
}

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[2], "puts")) {
        fprintf(stderr,
                "usage: %s ENDPOINT puts N VALUE_BYTES PREFIX [PIPELINE [same|k8s|random]]\n",
                argv[0]);
        return 2;
    }
    const char *ep = argv[1];
    long n = atol(argv[3]);
    size_t vlen = (size_t)atol(argv[4]);
    const char *prefix = argv[5];
    size_t depth = argc > 6 ? (size_t)atol(argv[6]) : 64;
    if (depth < 1 || depth > 1024) depth = 64;
    int k8s = argc > 7 && strcmp(argv[7], "k8s") == 0;
    int rnd = argc > 7 && strcmp(argv[7], "random") == 0;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    EtcdConfig cfg = {.endpoints = &ep, .n_endpoints = 1, .connection_timeout_ms = 60000};
    EtcdClient *c = NULL;
    if (etcd_client_new(&cfg, &c)) {
        fprintf(stderr, "%s\n", err_msg());
        return 1;
    }
    uint8_t *value = malloc(vlen + 1);
    /* one per put in flight */
    uint8_t *values = k8s || rnd ? malloc(depth * (vlen + 1)) : NULL;
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < vlen; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        value[i] = (uint8_t)('a' + x % 26);
    }
    EtcdTxnOp *ops = calloc(depth, sizeof *ops);
    EtcdTxnReq *reqs = calloc(depth, sizeof *reqs);
    EtcdTxnResult *res = calloc(depth, sizeof *res);
    char(*keys)[256] = calloc(depth, sizeof *keys);
    for (long done = 0; done < n;) {
        size_t b = (size_t)(n - done) < depth ? (size_t)(n - done) : depth;
        for (size_t i = 0; i < b; i++) {
            int kl = snprintf(keys[i], sizeof keys[i], "%s%08ld", prefix, done + (long)i);
            uint8_t *v = value;
            if (k8s) {
                v = values + i * (vlen + 1);
                k8s_value(v, vlen, &x, done + (long)i);
            } else if (rnd) {
                v = values + i * (vlen + 1);
                for (size_t j = 0; j < vlen; j++) {
                    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                    v[j] = (uint8_t)(x >> 11);
                }
            }
            ops[i] = (EtcdTxnOp){.type = ETCD_OP_PUT,
                                 .key = (uint8_t *)keys[i],
                                 .key_len = (size_t)kl,
                                 .value = v,
                                 .value_len = vlen};
            value[i % (vlen ? vlen : 1)] ^= 1; /* values differ */
            reqs[i] = (EtcdTxnReq){.ops = &ops[i], .n_ops = 1};
        }
        if (etcd_txn_many(c, reqs, b, res)) {
            fprintf(stderr, "%s\n", err_msg());
            return 1;
        }
        done += (long)b;
    }
    etcd_client_free(c);
    free(value);
    free(values);
    free(ops);
    free(reqs);
    free(res);
    free(keys);
    curl_global_cleanup();
    return 0;
}
