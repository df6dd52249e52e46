#!/usr/bin/env bash
# The spool file system fills up while `snapshot` collects events under load: the failure is
# logged, the events are collected again from the last stored revision once space returns, the
# last delta at SIGTERM covers everything, and a restore is exact. (Needs root for a tmpfs.)
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
mkdir -p "$WORK/spool"
if ! mount -t tmpfs -o size=8m tmpfs "$WORK/spool" 2>/dev/null; then
    skip_test "cannot mount a tmpfs (needs root)"
fi
trap 'cleanup; umount "$WORK/spool" 2>/dev/null || true; rm -rf "$WORK"' EXIT
KEEP_WORK=1
start_etcd src "$WORK/src.etcd"
"$LOADGEN" "$ETCD_EP" puts 100 100 /base/ 16
"$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=Local \
    --store-container="$WORK/store" --snapstore-temp-directory="$WORK/spool" \
    --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s \
    --delta-snapshot-memory-limit=262144 --backoff-multiplier=1 --backoff-threshold-time=1s \
    >"$WORK/snap.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$WORK/snap.log" "full snapshot Full-"
"$LOADGEN" "$ETCD_EP" puts 20000 200 /a/ 16 &
LPID=$!
sleep 0.5
# keep the spool full: space a finished delta's spool file frees is taken again at once
for i in $(seq 1 300); do
    dd if=/dev/zero of="$WORK/spool/fill.$i" bs=4k status=none 2>/dev/null || true
    grep "No space left on device" "$WORK/snap.log" >/dev/null && break
    sleep 0.1
done
wait_for_log "$WORK/snap.log" "No space left on device" 30
sleep 2
rm -f "$WORK/spool"/fill.*
wait "$LPID"
"$LOADGEN" "$ETCD_EP" puts 2000 200 /b/ 16
src_rev=$(current_revision "$ETCD_EP")
for i in $(seq 1 100); do
    last=$(ls "$WORK/store/v2" | sed -E 's/^(Full|Incr)-[0-9]+-0*([0-9]+)-.*/\2/' | sort -n | tail -1)
    [ "$last" -ge "$src_rev" ] && break
    sleep 0.2
done
[ "$last" -ge "$src_rev" ] || fail "backups stopped at revision $last (etcd at $src_rev) after space returned"
stop_snapshotter
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
stop_pid "$ETCD_PID"
restore_store "$WORK/store" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; fail "restore failed"; }
start_etcd r "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "restored revision differs"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "restored keyspace differs"
echo "disk full on the spool: recovered, restore exact at revision $src_rev"
