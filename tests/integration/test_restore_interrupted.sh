#!/usr/bin/env bash
# An interrupted restore (kill -9 during delta replay) leaves the target data dir absent and no
# temporary etcd running; a rerun starts clean and restores every key at the right revision.
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"
start_etcd src "$WORK/src.etcd"
SRC_EP=$ETCD_EP
"$LOADGEN" "$SRC_EP" puts 100 100 /base/ 16
start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-"
"$LOADGEN" "$SRC_EP" puts 30000 64 /delta/ 64
stop_snapshotter
src_rev=$(current_revision "$SRC_EP")
dump_keys "$SRC_EP" >"$WORK/src.jsonl"
stop_pid "$ETCD_PID"

restore_bg "$WORK/store" "$WORK/restored.etcd" "$WORK/restore1.log"
RPID=$RESTORE_PID
wait_for_log "$WORK/restore1.log" "restored into"
sleep 0.3
kill -9 "$RPID"
wait "$RPID" 2>/dev/null || true
grep -q "restore done" "$WORK/restore1.log" && fail "restore finished before it could be interrupted"
[ ! -e "$WORK/restored.etcd" ] || fail "interrupted restore left the target data dir"
sleep 0.5
if pgrep -f "$WORK/restored.etcd.part" >/dev/null; then
    pgrep -af "$WORK/restored.etcd.part" >&2
    fail "a temporary etcd outlived the interrupted restore"
fi
echo "interrupted: target absent, no temporary etcd left"

# two restores into one data dir at once: the second is refused, the first is exact
restore_bg "$WORK/store" "$WORK/restored.etcd" "$WORK/restore-a.log"
APID=$RESTORE_PID
wait_for_log "$WORK/restore-a.log" "restored into"
rc=0
restore_store "$WORK/store" "$WORK/restored.etcd" --restoration-temp-snapshots-dir="$WORK/tmp-b" \
    >"$WORK/restore-b.log" 2>&1 || rc=$?
[ "$rc" = 3 ] && grep -q "another restore" "$WORK/restore-b.log" || { cat "$WORK/restore-b.log"; fail "concurrent restore: exit $rc"; }
wait "$APID" || fail "the first restore failed after a concurrent one was refused"
start_etcd restored "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "revision differs after the concurrent attempt"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "keyspace differs after the concurrent attempt"
stop_pid "$ETCD_PID"
rm -rf "$WORK/restored.etcd"
echo "concurrent restore refused (exit 3); the running one is exact"

restore_store "$WORK/store" "$WORK/restored.etcd" >"$WORK/restore2.log" 2>&1 || { cat "$WORK/restore2.log"; fail "rerun failed"; }
[ ! -e "$WORK/restored.etcd.part" ] || fail "rerun left a .part dir"
start_etcd restored "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "revision differs"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "keyspace differs"
echo "rerun: restore exact at revision $src_rev"
