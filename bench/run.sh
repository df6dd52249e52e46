#!/usr/bin/env bash
# Benchmarks, side by side with etcdctl, on a real etcd on loopback (see README.md here).
#   bench/run.sh [DB_MB]      default: 256 MB db (restore: bench/restore.sh)
# Prints a table; needs a built tree (./scripts/build.sh) and GNU time (apt-get install time).
set -euo pipefail
cd "$(dirname "$0")/.."
DB_MB=${1:-256}
BIN=$PWD/build/etcdbrctl
LOADGEN=$PWD/build/etcd_loadgen
source bench/lib.sh
bench_init run
# measure LABEL CMD...: wall seconds and peak RSS (MiB) of CMD
measure() {
    local label=$1
    shift
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >"$WORK/out-$label.log" 2>&1
    read -r secs kb <"$WORK/time"
    printf '| %-44s | %8s s | %8.1f MiB |\n' "$label" "$secs" "$(echo "$kb / 1024" | bc -l)"
}

start_etcd "$WORK/src.etcd"
echo "loading ~${DB_MB} MB (4 KiB values) ..."
"$LOADGEN" "$EP" puts $((DB_MB * 1024 / 4)) 4096 /bench/big/ 64
DBSIZE=$(etcdctl --endpoints="$EP" endpoint status -w json | jq -r '.[0].Status.dbSize')
echo "db size: $((DBSIZE / 1048576)) MiB at revision $(etcdctl --endpoints="$EP" endpoint status -w json | jq -r '.[0].Status.header.revision')"
echo
echo "| full snapshot of a $((DBSIZE / 1048576)) MiB db | time | peak RSS |"
echo "|---|---|---|"
sync
for i in 1 2; do
    rm -f "$WORK/s.db"
    measure "etcdctl snapshot save (run $i)" etcdctl --endpoints="$EP" snapshot save "$WORK/s.db"
done
one_full() { # store-dir extra-flags...: start snapshot, wait for the full, SIGTERM
    local store=$1
    shift
    "$BIN" snapshot --endpoints="$EP" --storage-provider=Local --store-container="$store" \
        --snapstore-temp-directory="$WORK/tmp" --delta-snapshot-period=0s "$@" &
    local pid=$!
    until ls "$store/v2/" 2>/dev/null | grep -q '^Full-'; do sleep 0.01; done
    kill -TERM $pid
    wait $pid
}
export -f one_full
export BIN EP WORK
for i in 1 2; do
    rm -rf "$WORK/st"
    measure "etcdbrctl snapshot, uncompressed (run $i)" bash -c "one_full $WORK/st --compress-snapshots=false"
done
rm -rf "$WORK/st"
measure "etcdbrctl snapshot, gzip (default)" bash -c "one_full $WORK/st"
rm -rf "$WORK/st"
measure "etcdbrctl snapshot, zstd" bash -c "one_full $WORK/st --compression-policy=zstd"

stop_etcd
echo
echo "restore: see bench/restore.sh"
