/* inspect_print: the answers of get, diff and history, computed from the sorted records
 * (recsort.h, views from inspect_read.h) one key at a time and written as they come: memory is
 * one key's state (its latest record per view), never the keyspace (docs/inspect.md has every
 * format). */
#ifndef ETCDBR_INSPECT_PRINT_H
#define ETCDBR_INSPECT_PRINT_H

#include "recsort.h"
#include "../store/snapname.h"

#include <stdint.h>
#include <stdio.h>

typedef enum { INSPECT_SIMPLE, INSPECT_JSON, INSPECT_TABLE } InspectFormat;

/* get: every key of view 0 alive at its revision, in key order. simple: etcdctl's lines (key,
 * value); json: etcdctl's `get -w json` ({"header":{"revision":R},"kvs":[...],"more":true,
 * "count":N}, zero fields left out as Go's omitempty does, key and value base64); table: one line
 * per key with its revisions, version, value size and, for a Kubernetes object (protobuf with the
 * "k8s\0" envelope, or JSON), its apiVersion and kind. limit > 0: at most that many keys
 * printed, count still every key. *count: keys alive. 0, or the sorter's errors; ERR_IO when out
 * fails. */
int inspect_print_get(RecSort *sort, FILE *out, InspectFormat fmt, int keys_only, int64_t limit,
                      int64_t revision, uint64_t *count);

/* diff: every key whose state at view 0 (revision from) differs from its state at view 1
 * (revision to): created, changed (another mod revision) or deleted, in key order, with the
 * revisions and the number of puts and deletes between the two that the backups hold. *count:
 * keys listed. Errors as inspect_print_get. */
int inspect_print_diff(RecSort *sort, FILE *out, InspectFormat fmt, int64_t from, int64_t to,
                       uint64_t *count);

/* history: every record of view 0 in revision order (one key's puts and deletes), with the
 * time it was received when a delta holds it and the object it came from (objects[rec.object]).
 * key_asked (key_len bytes) is the key the JSON names. *count: events listed. Errors as
 * inspect_print_get. */
int inspect_print_history(RecSort *sort, FILE *out, InspectFormat fmt, const uint8_t *key_asked,
                          size_t key_len, const Snapshot *objects, uint64_t *count);

/* The apiVersion and kind of a Kubernetes object stored in etcd: protobuf behind the "k8s\0"
 * magic (runtime.Unknown{typeMeta{apiVersion=1, kind=2}=1, raw=2}, k8s.io/apimachinery
 * pkg/runtime/serializer/protobuf and generated.proto, Kubernetes v1.32) or a JSON object with
 * "apiVersion" and "kind". Writes "apiVersion kind" into out (cap bytes; bytes outside printable
 * ASCII as '?') and returns 1, or 0 when the value is neither. Reads at most len bytes; every
 * length is checked. */
int inspect_kube_type(const uint8_t *value, size_t len, char *out, size_t cap);

#endif
