#!/usr/bin/env bash
# A whole gzip full snapshot beside the Go tool's (bench/README.md "Gzip full snapshot, whole
# command", issue 18 item 5): a real etcd 3.4 on loopback loaded with random values, then in each
# round, one right after the other, from start until the object is stored in a Local store on the
# same disk:
#   - bench/go_snapshot: the Go tool's full-snapshot path (etcd's Go client, compress/gzip at the
#     default level behind an io.Pipe, file + fsync), standing in for the Go tool, which is not
#     built here (bench/README.md says why);
#   - etcdbrctl snapshot --compression-policy=gzip, parallel members (default) and single stream.
#   bench/gzip_snapshot.sh [DB_MB]   default 200 (MiB of db: random 4000-byte values, a page each)
# A round starts when the 1-minute load average is below $MAX_LOAD (default 1.5, waiting up to
# $LOAD_WAIT s, default 300); $ROUNDS rounds (default 3). Every output is read by Go's gzip reader
# (tests/tools/go_gunzip), which must give the bytes gzip -d gives. Needs a built tree
# (./scripts/build.sh or BUILD_DIR), go (offline: the module cache scripts/build-etcd.sh fills),
# etcd, etcdctl, jq, bc, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
DB_MB=${1:-200}
BUILD=${BUILD_DIR:-$PWD/build}
BIN=$BUILD/etcdbrctl
LOADGEN=$BUILD/etcd_loadgen
ROUNDS=${ROUNDS:-3}
source bench/lib.sh
bench_init gzsnap
go_tools go_snapshot:bench/go_snapshot go_gunzip:tests/tools/go_gunzip
start_etcd "$WORK/src.etcd"
echo "loading a ~${DB_MB} MiB db of random values (4000 bytes: one 4 KiB page each) ..."
"$LOADGEN" "$EP" puts $((DB_MB * 1048576 / 4096)) 4000 /bench/big/ 64 random
db_status
sync

# timed CMD...: GNU time; sets SECS, KB, CPU (user+sys)
timed() {
    /usr/bin/time -f "%e %M %U %S" -o "$WORK/time" "$@" >"$WORK/cmd.log" 2>&1
    local usr sys
    read -r SECS KB usr sys <"$WORK/time"
    CPU=$(echo "$usr + $sys" | bc -l)
}
one_full() { # STORE MODE: etcdbrctl snapshot until its full is stored, then SIGTERM
    "$BIN" snapshot --endpoints="$EP" --storage-provider=Local --store-container="$1" \
        --snapstore-temp-directory="$WORK/tmp" --delta-snapshot-period=0s --compression-policy=gzip \
        --gzip-mode="$2" --garbage-collection-period=0s &
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
# check OUT: Go's gzip reader reads OUT as gzip -d does
check() {
    if [ "$("$WORK/go_gunzip" "$1" 2>&1)" = "$(gzip -dc "$1" | wc -c) $(gzip -dc "$1" | sha256sum | cut -d' ' -f1)" ]; then
        echo "yes"
    else
        echo "**NO**"
    fi
}
row() { # LABEL LOAD OUT
    printf '| %-46s | %5s | %6.2f s | %6.2f s | %6.1f MB | %5.2fx | %6.1f MiB | %s |\n' "$1" "$2" "$SECS" "$CPU" \
        "$(echo "$(stat -c %s "$3") / 1000000" | bc -l)" "$(echo "$GO_SECS / $SECS" | bc -l)" "$(echo "$KB / 1024" | bc -l)" "$(check "$3")"
}

echo
echo "| gzip full snapshot of a $((DBSIZE / 1048576)) MiB db, whole command (round) | load before | wall | CPU | stored | faster than Go | peak RSS | Go's reader reads it |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
    wait_low_load
    l=$(load1)
    rm -f "$WORK/go.gz"
    sync
    timed "$WORK/go_snapshot" "$EP" "$WORK/go.gz" gzip
    GO_SECS=$SECS
    row "Go tool's path (go_snapshot, compress/gzip) ($r)" "$l" "$WORK/go.gz"
    rm -f "$WORK/go.gz"
    for mode in parallel single; do
        rm -rf "$WORK/st"
        sync
        l=$(load1)
        timed bash -c "one_full $WORK/st $mode"
        row "etcdbrctl snapshot, gzip $mode ($r)" "$l" "$(ls "$WORK"/st/v2/Full-*)"
    done
done
echo
echo "load after the runs: $(uptime | sed 's/.*load/load/')"
