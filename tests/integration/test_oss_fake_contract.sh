#!/usr/bin/env bash
# The store contract (tests/tools/store_contract.c) against the OSS driver through the scripted
# fake OSS server tests/tools/fake_oss.py (no OSS emulator exists; the fake verifies every
# request's signature V1 and Date, and multipart semantics). Listing in pages of 7
# (ETCDBR_OSS_LIST_PAGE_SIZE) so marker paging runs; then credentials from a directory (one file
# per field, as a Kubernetes secret volume) with 2 parts in flight. Afterwards: every request was
# signed correctly (no 403 in the fake's log), listings did page by marker, and no multipart
# upload is left behind (ListMultipartUploads, signed here by openssl).
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
[ -x "$BUILD/store_contract" ] || fail "$BUILD/store_contract not built"
make_workdir
start_fake_oss etcdbr-contract

ETCDBR_OSS_LIST_PAGE_SIZE=7 ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON \
    "$BUILD/store_contract" --provider OSS --container "$OSS_BUCKET" --prefix "some/prefix" \
    --list-count 25 --parallel 3 || fail "store contract on OSS (fake)"

mkdir -p "$WORK/creds-dir"
printf '%s\n' "$OSS_ENDPOINT" >"$WORK/creds-dir/storageEndpoint" # white space around the endpoint is dropped
printf '%s' "$OSS_ACCESS_KEY" >"$WORK/creds-dir/accessKeyID"
printf '%s' "$OSS_SECRET" >"$WORK/creds-dir/accessKeySecret"
printf 'ignored' >"$WORK/creds-dir/bucketName"
ETCDBR_OSS_LIST_PAGE_SIZE=3 ALICLOUD_APPLICATION_CREDENTIALS=$WORK/creds-dir \
    "$BUILD/store_contract" --provider OSS --container "$OSS_BUCKET" --list-count 8 --parallel 2 \
    >"$WORK/dir.log" 2>&1 || { cat "$WORK/dir.log"; fail "contract with a credentials directory"; }

if grep -q -- "-> 403" "$OSS_LOG"; then
    grep -- "-> 403" "$OSS_LOG" | head -5 >&2
    fail "the fake refused signatures"
fi
grep -q "^ListObjects GET .*marker=" "$OSS_LOG" || fail "no listing was paged by marker"
grep -q "^CompleteMultipartUpload POST .* -> 200" "$OSS_LOG" || fail "no multipart upload completed"
grep -q "^AbortMultipartUpload DELETE .* -> 204" "$OSS_LOG" || fail "the aborted multipart write was not aborted"
uploads=$(oss_curl GET "" uploads)
[ "$(cat "$WORK/oss-curl.status")" = 200 ] || fail "ListMultipartUploads (openssl-signed): HTTP $(cat "$WORK/oss-curl.status"): $uploads"
if grep -q "<Upload>" <<<"$uploads"; then fail "multipart uploads left behind: $uploads"; fi
echo "PASS: store contract on OSS (fake_oss.py): $(grep -c . "$OSS_LOG") requests, all signatures verified"
