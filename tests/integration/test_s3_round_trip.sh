#!/usr/bin/env bash
# Round trip through S3 on a real S3 server (@20minutes/s3rver, SigV4 verified): store_round_trip
# (lib.sh) with `--storage-provider=S3 --store-endpoint-override=...`, credentials from
# AWS_APPLICATION_CREDENTIALS_JSON, the full snapshot a multipart upload of 5 MiB parts (3 in
# flight); then what the bucket holds: the objects under the prefix, nothing else.
source "$(dirname "$0")/lib.sh"
make_workdir
start_s3rver backups
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
store_round_trip s3 --storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=etcd-main \
    --store-endpoint-override="$S3_ENDPOINT" --min-chunk-size=5242880 --max-parallel-chunk-uploads=3
grep -q "snapshot store: S3:$S3_BUCKET" "$WORK/rt-s3/snap.log" || fail "not on S3: $(head -3 "$WORK/rt-s3/snap.log")"

# what the bucket holds (s3rver's files): one full snapshot and the deltas under etcd-main/v2/
full=$(find "$WORK/s3rver/$S3_BUCKET/etcd-main/v2" -name 'Full-*._S3rver_object' | wc -l)
deltas=$(find "$WORK/s3rver/$S3_BUCKET/etcd-main/v2" -name 'Incr-*._S3rver_object' | wc -l)
[ "$full" = 1 ] || fail "expected 1 full snapshot in the bucket, found $full"
[ "$deltas" = "$RT_DELTAS" ] || fail "the bucket holds $deltas deltas, the snapshotter stored $RT_DELTAS"
size=$(find "$WORK/s3rver/$S3_BUCKET/etcd-main/v2" -name 'Full-*._S3rver_object' -printf '%s')
[ "$size" -gt 5242880 ] || fail "the full snapshot ($size bytes) is not larger than one part"
echo "PASS: S3 round trip (full snapshot $size bytes in parts)"
