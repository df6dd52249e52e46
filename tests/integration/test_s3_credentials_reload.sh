#!/usr/bin/env bash
# S3 credentials are re-read when their file changes, without a restart (the Go tool's
# convention: a Kubernetes secret volume is updated in place). A running `snapshot` on s3rver
# (SigV4 verified): a full snapshot with good keys; the file rewritten with a wrong secret: the
# next delta fails with a 403 (proof that the file was re-read); the good secret back, written
# the way a secret volume swaps it (a new file renamed over the old one): deltas are stored again
# and a restore has every write, the ones made while the keys were wrong included.
source "$(dirname "$0")/lib.sh"
make_workdir
export ETCDBR_STORE_RETRY_BASE_MS=20
start_s3rver reload
CREDS=$WORK/creds.json
good() { printf '{"region":"us-east-1","accessKeyID":"%s","secretAccessKey":"%s"}\n' "$S3_ACCESS_KEY" "$S3_SECRET_KEY"; }
good >"$CREDS"
export AWS_APPLICATION_CREDENTIALS_JSON=$CREDS
FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-endpoint-override="$S3_ENDPOINT")

start_etcd src "$WORK/src.etcd"
for i in $(seq 1 10); do ectl put "/a/$i" "v$i" >/dev/null; done
"$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" "${FLAGS[@]}" --snapstore-temp-directory="$WORK/snaptmp" \
    --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s >"$WORK/snap.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$WORK/snap.log" "full snapshot Full-" 60

printf '{"region":"us-east-1","accessKeyID":"%s","secretAccessKey":"wrong-secret-xyz"}\n' "$S3_ACCESS_KEY" >"$CREDS"
for i in $(seq 1 5); do ectl put "/b/$i" "v$i" >/dev/null; done
wait_for_log "$WORK/snap.log" "HTTP 403" 60
if grep -q "wrong-secret-xyz" "$WORK/snap.log"; then fail "the secret leaked into the log"; fi

good >"$CREDS.new"
mv "$CREDS.new" "$CREDS"
mark=$(wc -l <"$WORK/snap.log")
for i in $(seq 1 5); do ectl put "/c/$i" "v$i" >/dev/null; done
want=$(current_revision "$ETCD_EP")
for i in $(seq 1 600); do
    tail -n +"$((mark + 1))" "$WORK/snap.log" | grep "delta snapshot Incr-[0-9]*-0*$want-.* stored" >/dev/null && break
    sleep 0.1
done
tail -n +"$((mark + 1))" "$WORK/snap.log" | grep "delta snapshot Incr-[0-9]*-0*$want-.* stored" >/dev/null ||
    fail "no delta up to revision $want stored after the good keys came back: $(tail -3 "$WORK/snap.log")"
stop_snapshotter
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
stop_pid "$ETCD_PID"

"$ETCDBR_BIN" restore "${FLAGS[@]}" --data-dir="$WORK/restored.etcd" --name=restored \
    --initial-cluster=restored=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" >"$WORK/restore.log" 2>&1 ||
    { cat "$WORK/restore.log"; fail "restore failed"; }
start_etcd restored "$WORK/restored.etcd"
dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
[ "$(current_revision "$ETCD_EP")" = "$want" ] || fail "restored revision $(current_revision "$ETCD_EP"), want $want"
cmp -s "$WORK/src.jsonl" "$WORK/restored.jsonl" || fail "the restore misses writes made while the keys were wrong"
echo "PASS: credentials re-read: a wrong secret failed with 403, the good one resumed deltas up to revision $want"
