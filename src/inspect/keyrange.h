/* keyrange: which keys a get, diff or history asks for, with etcd's range semantics
 * (api/etcdserverpb/rpc.proto RangeRequest, etcd v3.5; clientv3's WithPrefix and WithFromKey):
 * a key alone is that key; a range end is [key, end); an end of one zero byte is every key at or
 * after key; --prefix is [key, key with its last byte below 0xff incremented), every key when key
 * is empty or all 0xff bytes. */
#ifndef ETCDBR_KEYRANGE_H
#define ETCDBR_KEYRANGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct KeyRange {
    uint8_t *key; /* owned */
    size_t key_len;
    uint8_t *end; /* owned; NULL = the key alone */
    size_t end_len;
} KeyRange;

/* The range of the arguments: key (may be "", NUL-terminated text as typed), end (NULL when not
 * given), prefix and from_key (the flags). ERR_INVALID when end goes with prefix or from_key, or
 * both flags are given; ERR_NOMEM. kr owned (keyrange_free). */
int keyrange_make(const char *key, const char *end, int prefix, int from_key, KeyRange *kr);
void keyrange_free(KeyRange *kr); /* leaves it zeroed */

/* 1 when key (len bytes) is in the range. */
int keyrange_has(const KeyRange *kr, const uint8_t *key, size_t len);

#endif
