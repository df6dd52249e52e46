#!/usr/bin/env bash
# Compaction: (1) stop `snapshot`, write, compact past its last revision, start it again: a new
# full snapshot and deltas carry on. (2) while it runs, the store fails (deltas cannot be
# written), etcd is compacted past the last stored revision, the store returns: the snapshotter
# sees the compacted revision and takes a full snapshot instead of a delta with a hole.
# A restore afterwards has every write.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd src "$WORK/src.etcd"
SRC_EP=$ETCD_EP
for i in $(seq 1 30); do ectl put "/k/a$i" "v$i" >/dev/null; done
start_snapshotter "$WORK/store" "$WORK/snap1.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap1.log" "full snapshot Full-"
for i in $(seq 1 10); do ectl put "/k/b$i" "v$i" >/dev/null; done
wait_for_log "$WORK/snap1.log" "delta snapshot Incr-"
stop_snapshotter
last=$(ls "$WORK/store/v2" | sed -E 's/^(Full|Incr)-[0-9]+-0*([0-9]+)-.*/\2/' | sort -n | tail -1)

for i in $(seq 1 10); do ectl put "/k/c$i" "v$i" >/dev/null; done
ectl del /k/a1 >/dev/null
rev=$(current_revision "$SRC_EP")
[ "$rev" -gt "$last" ] || fail "no writes after the last snapshot"
ectl compaction "$rev" >/dev/null

# the first retry after the store fails comes 8 s later: the store is back and etcd compacted by
# then, so the retry meets the compacted revision (a retry before the compaction would reopen the
# watch in time and see no hole)
start_snapshotter "$WORK/store" "$WORK/snap2.log" --delta-snapshot-period=1s --backoff-multiplier=8
wait_for_log "$WORK/snap2.log" "full snapshot Full-"
for i in $(seq 1 10); do ectl put "/k/d$i" "v$i" >/dev/null; done
wait_for_log "$WORK/snap2.log" "delta snapshot Incr-"

# phase 2: the store fails while etcd is compacted past the last stored revision
mv "$WORK/store/v2" "$WORK/store/v2.saved"
: >"$WORK/store/v2"
for i in $(seq 1 10); do ectl put "/k/e$i" "v$i" >/dev/null; done
wait_for_log "$WORK/snap2.log" "level=error.*delta snapshot"
for i in $(seq 1 5); do ectl put "/k/f$i" "v$i" >/dev/null; done
ectl del /k/e1 >/dev/null
ectl compaction "$(current_revision "$SRC_EP")" >/dev/null
rm "$WORK/store/v2"
mv "$WORK/store/v2.saved" "$WORK/store/v2"
n_before=$(grep -c "full snapshot Full-" "$WORK/snap2.log")
wait_for_log "$WORK/snap2.log" "watch from revision [0-9]*: compacted at [0-9]*: taking a full snapshot instead" 60
# stop only once that full snapshot is stored: a stop while one is still needed exits 1
for i in $(seq 1 300); do
    [ "$(grep -c "full snapshot Full-" "$WORK/snap2.log")" -gt "$n_before" ] && break
    sleep 0.1
done
[ "$(grep -c "full snapshot Full-" "$WORK/snap2.log")" -gt "$n_before" ] || fail "no full snapshot after the compacted revision"
for i in $(seq 1 10); do ectl put "/k/g$i" "v$i" >/dev/null; done
stop_snapshotter
n_full=$(ls "$WORK/store/v2" | grep -c '^Full-')
[ "$n_full" -ge 3 ] || fail "expected at least 3 full snapshots, got $n_full (before: $n_before)"

src_rev=$(current_revision "$SRC_EP")
dump_keys "$SRC_EP" >"$WORK/src.jsonl"
stop_pid "$ETCD_PID"
restore_store "$WORK/store" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; fail "restore failed"; }
start_etcd restored "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "revision differs"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "keyspace differs"
echo "compaction: $n_full full snapshots, restore exact at revision $src_rev"
