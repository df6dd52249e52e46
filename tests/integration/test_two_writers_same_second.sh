#!/usr/bin/env bash
# Two snapshotters started in the same second against one etcd and one store both store the
# same full snapshot name; the one whose commit finds the object already there counts it as
# stored instead of exiting 1 (issue 7 item 7). One that starts after the other stored its full
# snapshot resumes from it instead. 6 trials; every run must exit 0.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 50); do ectl put "/k/$i" "$(head -c 2000 /dev/zero | tr '\0' x)" >/dev/null; done
for trial in $(seq 1 6); do
    rm -rf "$WORK/store"
    start_snapshotter "$WORK/store" "$WORK/a.log" --delta-snapshot-period=0s
    A=$SNAP_PID
    start_snapshotter "$WORK/store" "$WORK/b.log" --delta-snapshot-period=0s
    B=$SNAP_PID
    # each stores the full snapshot, or (started a little later) resumes from the other's
    wait_for_log "$WORK/a.log" "full snapshot Full-.* stored\|resuming from"
    wait_for_log "$WORK/b.log" "full snapshot Full-.* stored\|resuming from"
    for p in $A $B; do
        kill -TERM "$p"
        rc=0
        wait "$p" || rc=$?
        [ "$rc" = 0 ] || { tail -5 "$WORK/a.log" "$WORK/b.log"; fail "trial $trial: a snapshotter exited $rc"; }
    done
    grep -q "already exists" "$WORK/a.log" "$WORK/b.log" && fail "trial $trial: 'already exists' reached the log"
    [ "$(ls "$WORK/store/v2" | grep -c '^Full-')" -ge 1 ] || fail "trial $trial: no full snapshot stored"
done
echo "6 trials of two snapshotters started together: both exit 0, the full snapshot is stored"
