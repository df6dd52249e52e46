/* etcd_loadgen: writes load into an etcd for benchmarks (not a test, not shipped).
 *   etcd_loadgen ENDPOINT puts N VALUE_BYTES PREFIX [PIPELINE]
 * N puts of distinct keys PREFIX<i>, each its own revision, VALUE_BYTES pseudo-random printable
 * bytes; PIPELINE (default 64) puts in flight on one HTTP/2 connection. */
#include "common/err.h"
#include "etcd/etcd_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[2], "puts")) {
        fprintf(stderr, "usage: %s ENDPOINT puts N VALUE_BYTES PREFIX [PIPELINE]\n", argv[0]);
        return 2;
    }
    const char *ep = argv[1];
    long n = atol(argv[3]);
    size_t vlen = (size_t)atol(argv[4]);
    const char *prefix = argv[5];
    size_t depth = argc > 6 ? (size_t)atol(argv[6]) : 64;
    if (depth < 1 || depth > 1024) depth = 64;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    EtcdConfig cfg = {.endpoints = &ep, .n_endpoints = 1, .connection_timeout_ms = 60000};
    EtcdClient *c = NULL;
    if (etcd_client_new(&cfg, &c)) {
        fprintf(stderr, "%s\n", err_msg());
        return 1;
    }
    uint8_t *value = malloc(vlen + 1);
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
            ops[i] = (EtcdTxnOp){.type = ETCD_OP_PUT,
                                 .key = (uint8_t *)keys[i],
                                 .key_len = (size_t)kl,
                                 .value = value,
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
    free(ops);
    free(reqs);
    free(res);
    free(keys);
    curl_global_cleanup();
    return 0;
}
