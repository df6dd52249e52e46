#!/usr/bin/env bash
# Round trip through S3 on a real S3 server (@20minutes/s3rver, SigV4 verified): a real etcd,
# `snapshot --storage-provider=S3 --store-endpoint-override=...` with credentials from
# AWS_APPLICATION_CREDENTIALS_JSON cutting a full snapshot and deltas (one full snapshot large
# enough for a multipart upload with 5 MiB parts), SIGTERM, the data dir lost, `restore` from S3:
# every key, value and revision equal the source's.
source "$(dirname "$0")/lib.sh"
make_workdir
start_s3rver backups
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
S3_FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=etcd-main
    --store-endpoint-override="$S3_ENDPOINT" --max-parallel-chunk-uploads=3)

start_etcd src "$WORK/src.etcd"
SRC_EP=$ETCD_EP
SRC_PID=$ETCD_PID
for i in $(seq 1 40); do ectl put "/registry/pods/ns1/pod-$i" "{\"v\":$i}" >/dev/null; done
# ~12 MiB of values: the full snapshot is a multipart upload of at least 2 parts (gzip cannot
# shrink random data)
for i in $(seq 1 12); do head -c 786432 /dev/urandom | base64 -w0 | ectl put "/registry/big/$i" >/dev/null; done
ectl del /registry/pods/ns1/pod-2 >/dev/null

"$ETCDBR_BIN" snapshot --endpoints="$SRC_EP" "${S3_FLAGS[@]}" \
    --snapstore-temp-directory="$WORK/snaptmp" --schedule='0 0 1 1 *' \
    --garbage-collection-period=0s --delta-snapshot-period=1s >"$WORK/snap.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$WORK/snap.log" "full snapshot Full-" 60
ectl put /registry/pods/ns1/pod-3 again >/dev/null
printf '\nput /registry/txn/a 1\nput /registry/txn/b 2\n\n\n' | ectl txn >/dev/null
sleep 1.3
ectl del --prefix /registry/pods/ns1/pod-1 >/dev/null
ectl put /registry/empty "" >/dev/null
sleep 1.3
for i in $(seq 1 10); do ectl put "/registry/last/$i" "v$i" >/dev/null; done
kill -TERM "$SNAP_PID"
rc=0
wait "$SNAP_PID" || rc=$?
[ "$rc" = 0 ] || { tail -20 "$WORK/snap.log"; fail "snapshotter exited $rc"; }
grep -q "level=error" "$WORK/snap.log" && { grep "level=error" "$WORK/snap.log"; fail "snapshotter logged errors"; }

src_rev=$(current_revision "$SRC_EP")
dump_keys "$SRC_EP" >"$WORK/src.jsonl"
stop_pid "$SRC_PID"
rm -rf "$WORK/src.etcd"

# what the bucket holds (s3rver's files): a full snapshot and deltas under etcd-main/v2/
full=$(find "$WORK/s3rver/$S3_BUCKET/etcd-main/v2" -name 'Full-*._S3rver_object' | wc -l)
deltas=$(find "$WORK/s3rver/$S3_BUCKET/etcd-main/v2" -name 'Incr-*._S3rver_object' | wc -l)
[ "$full" = 1 ] || fail "expected 1 full snapshot in the bucket, found $full"
[ "$deltas" -ge 2 ] || fail "expected at least 2 deltas in the bucket, found $deltas"

"$ETCDBR_BIN" restore "${S3_FLAGS[@]}" --data-dir="$WORK/restored.etcd" --name=restored \
    --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" >"$WORK/restore.log" 2>&1 || {
    cat "$WORK/restore.log"
    fail "restore from S3 failed"
}
start_etcd restored "$WORK/restored.etcd"
dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
rev=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"
[ "$rev" = "$src_rev" ] || fail "revision $rev, source $src_rev"
cmp "$WORK/src.jsonl" "$WORK/restored.jsonl" || fail "keyspace differs after the S3 round trip"
grep -q "$(printf '/registry/last/10' | base64 -w0)" "$WORK/restored.jsonl" || fail "last wave missing"
echo "S3 round trip: 1 full snapshot, $deltas deltas, revision $rev, $(wc -l <"$WORK/src.jsonl") keys equal"
