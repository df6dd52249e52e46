/* fuzz_kube_type: libFuzzer target for inspect_kube_type, which reads a Kubernetes object's
 * apiVersion and kind from a value of a backup (protobuf behind "k8s\0", or JSON). Any input must
 * give 0 or 1, never crash or read past the value (the input is not NUL-terminated); a found type
 * is a NUL-terminated string within the output buffer. Seeds in fuzz/corpus/kube_type/: a Pod in
 * protobuf, a Deployment in JSON, lengths that lie, a truncated varint. */
#include "inspect/inspect_print.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees any overread */
    if (!copy) return 0;
    memcpy(copy, data, size);
    char out[64];
    int found = inspect_kube_type(copy, size, out, sizeof out);
    if (found != 0 && found != 1) abort();
    if (found && strnlen(out, sizeof out) == sizeof out) abort();
    free(copy);
    return 0;
}
