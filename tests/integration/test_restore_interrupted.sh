#!/usr/bin/env bash
# An interrupted restore (kill -9 at random points, 20 trials from a logged seed; ETCDBR_SEED
# replays one) leaves the target data dir absent (or, killed after the rename that commits it,
# complete and exact) and no child process (etcd's restore tool) running; SIGTERM/SIGINT stop it with a log line and nothing left behind; a rerun starts clean
# and is exact (keys, revision, HashKV). Two restores into one
# data dir at once: the second is refused (exit 3) and the first is exact.
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"
seed=${ETCDBR_SEED:-$(( $(date +%s) % 32768 ))}
echo "seed=$seed"
RANDOM=$seed
start_etcd src "$WORK/src.etcd"
SRC_EP=$ETCD_EP
"$LOADGEN" "$SRC_EP" puts 100 100 /base/ 16
start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-"
"$LOADGEN" "$SRC_EP" puts 30000 64 /delta/ 64
stop_snapshotter
src_rev=$(current_revision "$SRC_EP")
src_hash=$(etcdctl --endpoints="$SRC_EP" endpoint hashkv --rev="$src_rev" -w json | jq '.[0].HashKV.hash')
dump_keys "$SRC_EP" >"$WORK/src.jsonl"
stop_pid "$ETCD_PID"

check_exact() { # DATA_DIR LABEL
    start_etcd restored "$1"
    [ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "$2: revision differs"
    dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "$2: keyspace differs"
    local h
    h=$(etcdctl --endpoints="$ETCD_EP" --command-timeout=30s endpoint hashkv --rev="$src_rev" -w json |
        jq '.[0].HashKV.hash') || fail "$2: etcdctl endpoint hashkv failed"
    [ "$h" = "$src_hash" ] || fail "$2: HashKV $h, source $src_hash"
    stop_pid "$ETCD_PID"
}

# progress (issue 7 item 12): lines while downloading and building, with rate and ETA; every
# 5 s by default, every 20 ms here (ETCDBR_PROGRESS_EVERY_MS) so that a short restore shows them
ETCDBR_PROGRESS_EVERY_MS=20 restore_store "$WORK/store" "$WORK/p.etcd" >"$WORK/progress.log" 2>&1 ||
    { tail "$WORK/progress.log"; fail "restore with progress failed"; }
grep -q "building the db: revision [0-9]* of $src_rev, [0-9]* revisions from deltas ([0-9]*/s, ETA [0-9]*s)" "$WORK/progress.log" ||
    { grep -i "building\|download" "$WORK/progress.log" | tail -3; fail "no build progress line with rate and ETA"; }
rm -rf "$WORK/p.etcd" "$WORK/p.etcd.tmp"
echo "progress: $(grep -c 'building the db' "$WORK/progress.log") build progress lines with rate and ETA"

# how long one restore takes (the shorter of two, page cache warm): kill points are drawn from
# [0, 90% of that] so that most trials interrupt it
dur_ms=0
for run in 1 2; do
    t0=$(date +%s%N)
    restore_store "$WORK/store" "$WORK/timed.etcd" >"$WORK/timed.log" 2>&1 || { cat "$WORK/timed.log"; fail "restore failed"; }
    d=$(( ($(date +%s%N) - t0) / 1000000 ))
    rm -rf "$WORK/timed.etcd"
    [ "$dur_ms" = 0 ] || [ "$d" -lt "$dur_ms" ] && dur_ms=$d
done
echo "one restore takes ${dur_ms} ms"
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

interrupted=0
for trial in $(seq 1 20); do
    delay_ms=$(( RANDOM % (dur_ms * 9 / 10 + 1) ))
    restore_bg "$WORK/store" "$WORK/restored.etcd" "$WORK/trial.log"
    RPID=$RESTORE_PID
    sleep_ms "$delay_ms"
    kill -9 "$RPID" 2>/dev/null || true
    wait "$RPID" 2>/dev/null || true
    if grep -q "restore done" "$WORK/trial.log" || [ -e "$WORK/restored.etcd" ]; then
        # finished, or killed after the rename that commits it: then it must be complete
        check_exact "$WORK/restored.etcd" "trial $trial (committed before the kill at ${delay_ms} ms)"
        rm -rf "$WORK/restored.etcd"
        continue
    fi
    interrupted=$((interrupted + 1))
    sleep 0.2
    if pgrep -f "$WORK/restored.etcd" >/dev/null; then
        pgrep -af "$WORK/restored.etcd" >&2
        fail "trial $trial (kill at ${delay_ms} ms): a child process outlived the restore"
    fi
done
[ "$interrupted" -ge 8 ] || fail "only $interrupted of 20 trials interrupted a restore (seed=$seed)"
[ -z "$(ls -A "$WORK/restored.etcd.tmp" | grep -v '^etcdbr-restore\.')" ] || fail "unknown files in the temp dir"
echo "$interrupted of 20 kill -9 trials interrupted the restore: target absent, no child left"

restore_store "$WORK/store" "$WORK/restored.etcd" >"$WORK/rerun.log" 2>&1 || { cat "$WORK/rerun.log"; fail "rerun failed"; }
[ -z "$(ls -A "$WORK/restored.etcd.tmp" 2>/dev/null)" ] || fail "scratch dirs of killed restores were not removed by the rerun: $(ls -A "$WORK/restored.etcd.tmp")"
[ ! -e "$WORK/restored.etcd.part" ] || fail "rerun left a .part dir"
check_exact "$WORK/restored.etcd" "rerun"
rm -rf "$WORK/restored.etcd"
echo "rerun: exact at revision $src_rev (keys, HashKV)"

# SIGTERM / SIGINT at random points: a log line says so, and nothing is left behind (no data dir,
# no <data-dir>.part, no scratch dir, no child)
stopped=0
for trial in $(seq 1 8); do
    delay_ms=$(( RANDOM % (dur_ms * 6 / 10 + 1) ))
    sig=TERM; [ $((trial % 2)) = 0 ] && sig=INT
    restore_bg "$WORK/store" "$WORK/restored.etcd" "$WORK/sig.log"
    RPID=$RESTORE_PID
    sleep_ms "$delay_ms"
    kill -"$sig" "$RPID" 2>/dev/null || true
    rc=0
    wait "$RPID" 2>/dev/null || rc=$?
    if [ "$rc" = 0 ]; then
        rm -rf "$WORK/restored.etcd"
        continue
    fi
    stopped=$((stopped + 1))
    # killed before the first log line (the signal handler is not installed yet): nothing began
    [ -s "$WORK/sig.log" ] || { [ ! -e "$WORK/restored.etcd.part" ] || fail "a silent kill left a .part"; continue; }
    grep -q "stopped by a signal" "$WORK/sig.log" || { tail -5 "$WORK/sig.log"; fail "SIG$sig trial $trial (at ${delay_ms} ms, exit $rc): no log line says the restore was stopped"; }
    [ ! -e "$WORK/restored.etcd" ] && [ ! -e "$WORK/restored.etcd.part" ] || fail "SIG$sig trial $trial: a data dir or .part was left"
    [ -z "$(ls -A "$WORK/restored.etcd.tmp" 2>/dev/null)" ] || fail "SIG$sig trial $trial: scratch files left: $(ls -A "$WORK/restored.etcd.tmp")"
    sleep 0.2
    ! pgrep -f "$WORK/restored.etcd" >/dev/null || fail "SIG$sig trial $trial: a child outlived the restore"
done
[ "$stopped" -ge 3 ] || fail "only $stopped of 8 signals stopped a restore (seed=$seed)"
echo "$stopped of 8 SIGTERM/SIGINT trials stopped the restore: logged, nothing left behind"


# two restores into one data dir at once: the first is held (SIGSTOP) while it holds the lock.
# It logs "restoring from" with the lock held; a restore this small may be done before it can be
# stopped: then it is removed and started again
held=0
for attempt in $(seq 1 20); do
    restore_bg "$WORK/store" "$WORK/restored.etcd" "$WORK/restore-a.log"
    APID=$RESTORE_PID
    # polled without a pause: the restore may take only tens of ms after this line
    for i in $(seq 1 30000); do
        grep -q "restoring from" "$WORK/restore-a.log" 2>/dev/null && break
        kill -0 "$APID" 2>/dev/null || break
    done
    if kill -STOP "$APID" 2>/dev/null && ! grep -q "restore done" "$WORK/restore-a.log"; then
        held=1
        break
    fi
    kill -CONT "$APID" 2>/dev/null || true
    wait "$APID" || fail "restore A (attempt $attempt) failed: $(tail -3 "$WORK/restore-a.log")"
    rm -rf "$WORK/restored.etcd"
done
[ "$held" = 1 ] || fail "restore A finished before it could be stopped in 20 attempts"
rc=0
restore_store "$WORK/store" "$WORK/restored.etcd" --restoration-temp-snapshots-dir="$WORK/tmp-b" \
    >"$WORK/restore-b.log" 2>&1 || rc=$?
kill -CONT "$APID"
[ "$rc" = 3 ] && grep -q "another restore" "$WORK/restore-b.log" || { cat "$WORK/restore-b.log"; fail "concurrent restore: exit $rc"; }
wait "$APID" || fail "the first restore failed after a concurrent one was refused"
check_exact "$WORK/restored.etcd" "after a concurrent attempt"
echo "concurrent restore refused (exit 3); the running one is exact"
