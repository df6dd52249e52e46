#!/usr/bin/env bash
# Round trip through the OSS driver and the scripted fake OSS server (tests/tools/fake_oss.py:
# signature V1 and Date verified on every request, multipart semantics): store_round_trip
# (lib.sh) with `--storage-provider=OSS`, ALICLOUD_APPLICATION_CREDENTIALS_JSON (storageEndpoint
# = the fake, path-style as an IP), the full snapshot in 5 MiB parts with 2 in flight. Then: the
# fake saw a completed multipart upload, no request refused, no upload left behind.
source "$(dirname "$0")/lib.sh"
make_workdir
start_fake_oss etcdbr-round-trip
export ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
store_round_trip oss --storage-provider=OSS --store-container="$OSS_BUCKET" --store-prefix=etcd-main \
    --min-chunk-size=5242880 --max-parallel-chunk-uploads=2
grep -q "snapshot store: OSS:$OSS_BUCKET" "$WORK/rt-oss/snap.log" || fail "not on OSS: $(head -3 "$WORK/rt-oss/snap.log")"
grep -q "^CompleteMultipartUpload POST /$OSS_BUCKET/etcd-main/v2/Full-.* -> 200" "$OSS_LOG" ||
    fail "the full snapshot was not a multipart upload"
if grep -q -- "-> 403" "$OSS_LOG"; then fail "the fake refused requests: $(grep -- '-> 403' "$OSS_LOG" | head -3)"; fi
uploads=$(oss_curl GET "" uploads)
if grep -q "<Upload>" <<<"$uploads"; then fail "multipart uploads left behind: $uploads"; fi
echo "PASS: OSS round trip (fake_oss.py)"
