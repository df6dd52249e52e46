#!/usr/bin/env bash
# Round trip through Azure Blob storage (azurite 3.35.0, SharedKey verified): a real etcd, a
# running `snapshot --storage-provider=ABS` with AZURE_APPLICATION_CREDENTIALS_JSON and a path-style
# endpoint override, a full snapshot big enough for several 5 MiB blocks (2 in flight), deltas,
# SIGTERM, the data dir lost, `restore` from ABS: every key, value, revision field and the
# current revision equal the source's.
source "$(dirname "$0")/lib.sh"
make_workdir
start_azurite etcdbr-round-trip
export AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON
ABS_FLAGS=(--storage-provider=ABS --store-container="$AZ_CONTAINER" --store-prefix=etcd-main
    --store-endpoint-override="$AZ_ENDPOINT" --min-chunk-size=5242880 --max-parallel-chunk-uploads=2)

start_etcd src "$WORK/src.etcd"
SRC_EP=$ETCD_EP
SRC_PID=$ETCD_PID
# ~9 MiB of incompressible values: the gzip'ed full snapshot spans at least 2 blocks
for i in $(seq 1 9); do
    head -c 786432 /dev/urandom | base64 -w0 >"$WORK/big"
    ectl put "/registry/big/$i" <"$WORK/big" >/dev/null
done
for i in $(seq 1 40); do ectl put "/registry/pods/ns1/pod-$i" "{\"v\":$i}" >/dev/null; done
ectl del /registry/pods/ns1/pod-2 >/dev/null

"$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" "${ABS_FLAGS[@]}" \
    --snapstore-temp-directory="$WORK/snaptmp" --schedule='0 0 1 1 *' \
    --garbage-collection-period=0s --delta-snapshot-period=1s >"$WORK/snap.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$WORK/snap.log" "full snapshot Full-" 60
grep -q "snapshot store: ABS:$AZ_CONTAINER" "$WORK/snap.log" || fail "not on ABS: $(head -5 "$WORK/snap.log")"

ectl put /registry/pods/ns1/pod-3 again >/dev/null
printf '\nput /registry/txn/a 1\nput /registry/txn/b 2\n\n\n' | ectl txn >/dev/null
sleep 1.3
ectl del --prefix /registry/pods/ns1/pod-1 >/dev/null
gw_put "$SRC_EP" "$(printf '/registry/bin-\xff\x00 +=%%' | base64 -w0)" "$(printf '\x00\x01\xff' | base64 -w0)"
sleep 1.3
for i in $(seq 1 20); do ectl put "/registry/last/$i" "v$i" >/dev/null; done
stop_snapshotter

src_rev=$(current_revision "$SRC_EP")
dump_keys "$SRC_EP" >"$WORK/src.jsonl"
stop_pid "$SRC_PID"
rm -rf "$WORK/src.etcd"
n_deltas=$(grep -c "delta snapshot Incr-.* stored" "$WORK/snap.log" || true)
[ "$n_deltas" -ge 2 ] || fail "expected at least 2 deltas stored, got $n_deltas"

"$ETCDBR_BIN" restore "${ABS_FLAGS[@]}" --data-dir="$WORK/restored.etcd" --name=restored \
    --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restored.tmp" >"$WORK/restore.log" 2>&1 || {
    cat "$WORK/restore.log"
    fail "restore from ABS failed"
}
start_etcd restored "$WORK/restored.etcd"
dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
rev=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"

[ "$rev" = "$src_rev" ] || fail "revision $rev, source $src_rev"
cmp "$WORK/src.jsonl" "$WORK/restored.jsonl" || fail "keyspace differs"
grep -q "$(printf '/registry/last/20' | base64 -w0)" "$WORK/restored.jsonl" || fail "last wave missing"
echo "PASS: ABS round trip: $n_deltas deltas, revision $rev, $(wc -l <"$WORK/src.jsonl") keys equal"
