#!/usr/bin/env bash
# One-pass full snapshot beside etcdctl (bench/README.md "One-pass full snapshot", issue 18
# item 4): a real etcd 3.4 on loopback loaded with incompressible values, then, in each round,
# `etcdctl snapshot save` and `etcdbrctl snapshot` (uncompressed, Local store) one right after the
# other (the order alternating), on the same disk (both write under $WORK), each from its start
# until its file is stored (synced), after a `sync` that is not timed:
#   bench/snapshot.sh [DB_MB]      default 400 (MB of db: random 4000-byte values, a page each)
# A round starts only when the 1-minute load average is below $MAX_LOAD (default 1.5; waits up to
# $LOAD_WAIT s, default 300, then runs anyway and says so); $ROUNDS rounds (default 3). Each row
# gives the load before it, wall time, the ratio etcdbrctl/etcdctl of its round, peak RSS (GNU
# time: the largest process of the command) and etcdbrctl's own peak RSS (its last log line).
# Needs a built tree (./scripts/build.sh or BUILD_DIR), etcd, etcdctl, jq, bc, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
DB_MB=${1:-400}
BUILD=${BUILD_DIR:-$PWD/build}
BIN=$BUILD/etcdbrctl
LOADGEN=$BUILD/etcd_loadgen
ROUNDS=${ROUNDS:-3}
source bench/lib.sh
bench_init snap
start_etcd "$WORK/src.etcd"
echo "loading a ~${DB_MB} MB db of random values (4000 bytes: one 4 KiB page each) ..."
"$LOADGEN" "$EP" puts $((DB_MB * 1000000 / 4096)) 4000 /bench/big/ 64 random
db_status
sync

# timed OUT CMD...: runs CMD under GNU time; sets SECS and KB
timed() {
    local out=$1
    shift
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >"$out" 2>&1
    read -r SECS KB <"$WORK/time"
}
# one_full STORE: etcdbrctl snapshot until its full snapshot is stored, then SIGTERM (deltas off)
one_full() {
    "$BIN" snapshot --endpoints="$EP" --storage-provider=Local --store-container="$1" \
        --snapstore-temp-directory="$WORK/tmp" --delta-snapshot-period=0s \
        --compress-snapshots=false --garbage-collection-period=0s &
    local pid=$! f
    # the wait forks nothing (a glob, and read's timeout on a FIFO nobody writes): a polling
    # `ls | grep; sleep` every few ms took more CPU than etcdbrctl on 2 cores (perf)
    [ -p "$WORK/tick" ] || mkfifo "$WORK/tick"
    exec 9<>"$WORK/tick"
    while :; do
        for f in "$1"/v2/Full-*; do [ -e "$f" ] && break 2; done
        read -r -t 0.005 -u 9 || true
    done
    exec 9<&-
    kill -TERM $pid
    wait $pid
}
export -f one_full
export BIN EP WORK

echo
echo "| full snapshot of a $((DBSIZE / 1048576)) MiB db (round) | load before | wall | etcdbrctl / etcdctl | peak RSS | etcdbrctl's own peak RSS |"
echo "|---|---|---|---|---|---|"
run_etcdctl() {
    rm -f "$WORK/s.db"
    sync
    l1=$(load1)
    timed "$WORK/etcdctl.log" etcdctl --endpoints="$EP" snapshot save "$WORK/s.db"
    ctl_secs=$SECS ctl_kb=$KB
}
run_etcdbr() {
    rm -rf "$WORK/st" "$WORK/s.db"
    sync
    l2=$(load1)
    timed "$WORK/etcdbr.log" bash -c "one_full $WORK/st"
    br_secs=$SECS br_kb=$KB
    own=$(sed -n 's/.*peak RSS \([0-9]*\) KiB.*/\1/p' "$WORK/etcdbr.log" | tail -1)
    size=$(stat -c %s "$WORK"/st/v2/Full-*)
    [ "$size" -ge "$DBSIZE" ] || { echo "stored object of $size bytes < db $DBSIZE" >&2; exit 1; }
}
# each command starts with the page cache clean (sync, not timed); the order alternates between
# rounds, so neither always runs while the other's writeback is still going
for r in $(seq 1 "$ROUNDS"); do
    wait_low_load
    if [ $((r % 2)) = 1 ]; then run_etcdctl; run_etcdbr; else run_etcdbr; run_etcdctl; fi
    printf '| %-42s | %5s | %6.2f s | | %6.1f MiB | |\n' "etcdctl snapshot save ($r)" "$l1" "$ctl_secs" "$(echo "$ctl_kb / 1024" | bc -l)"
    printf '| %-42s | %5s | %6.2f s | %5.2fx | %6.1f MiB | %6.1f MiB |\n' "etcdbrctl snapshot, uncompressed ($r)" "$l2" \
        "$br_secs" "$(echo "$br_secs / $ctl_secs" | bc -l)" "$(echo "$br_kb / 1024" | bc -l)" "$(echo "${own:-0} / 1024" | bc -l)"
done
echo
echo "load after the runs: $(uptime | sed 's/.*load/load/')"
