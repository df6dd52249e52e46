#!/usr/bin/env bash
# Data-dir validation speed on a ~1 GiB etcd data dir (see src/restore/validator.h).
#   bench/validate_1gib.sh [DB_MB]        default 1024
# Loads a real etcd (4 KiB values, build/etcd_loadgen), stops it with SIGTERM, then times
# validate_data_dir in full and sanity mode, with and without a store to compare revisions with,
# through bench/validate_main.c (built by CMake as build/validate_main).
# Needs ./scripts/build.sh first (or BUILD_DIR=...), etcd and etcdctl on PATH, GNU time.
# Figures are with a warm page cache (the data was just written); each run is done twice.
# COLD=1 adds one run of each mode after dropping the page cache (root; affects the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
DB_MB=${1:-1024}
BUILD_DIR=${BUILD_DIR:-build}
LOADGEN=$BUILD_DIR/etcd_loadgen
MAIN=$BUILD_DIR/validate_main
[ -x "$MAIN" ] && [ -x "$LOADGEN" ] || {
    echo "build first: ./scripts/build.sh" >&2
    exit 2
}
source bench/lib.sh
bench_init validate

DATA=$WORK/data.etcd
start_etcd "$DATA" "$WORK/etcd.log"
echo "loading ~${DB_MB} MB (4 KiB values) ..."
"$LOADGEN" "$EP" puts $((DB_MB * 1024 / 4)) 4096 /bench/k/ 64
REV=$(etcdctl --endpoints="$EP" endpoint status -w json | jq -r '.[0].Status.header.revision')
stop_etcd
DB_BYTES=$(stat -c %s "$DATA/member/snap/db")
WAL_BYTES=$(du -cb "$DATA"/member/wal/*.wal | tail -1 | cut -f1)
echo "db $((DB_BYTES / 1048576)) MiB, revision $REV; WAL $(ls "$DATA"/member/wal/*.wal | wc -l)" \
    "segments ($((WAL_BYTES / 1048576)) MiB allocated); snap files:" \
    "$(ls "$DATA"/member/snap/*.snap 2>/dev/null | wc -l)"
echo
echo "| validation of a $((DB_BYTES / 1048576)) MiB data dir | result | time | peak RSS |"
echo "|---|---|---|---|"
run() { # label args...
    local label=$1
    shift
    for i in 1 2; do
        /usr/bin/time -f "%e %M" -o "$WORK/time" "$MAIN" "$DATA" "$@" >"$WORK/out" 2>&1 || true
        read -r secs kb < <(tail -1 "$WORK/time")
        printf '| %-52s | %-26s | %6s s | %7.1f MiB |\n' "$label (run $i)" \
            "$(awk '{print $2}' "$WORK/out")" "$secs" "$(echo "$kb / 1024" | bc -l)"
    done
    sed 's/^/    /' "$WORK/out" | cut -c1-400
}
if [ "${COLD:-0}" = 1 ] && [ -w /proc/sys/vm/drop_caches ]; then
    # COLD=1: also once from a cold page cache (drops the whole machine's caches)
    for mode in full sanity; do
        sync
        echo 3 >/proc/sys/vm/drop_caches
        /usr/bin/time -f "%e %M" -o "$WORK/time" "$MAIN" "$DATA" "$mode" >"$WORK/out" 2>&1 || true
        read -r secs kb < <(tail -1 "$WORK/time")
        printf '| %-52s | %-26s | %6s s | %7.1f MiB |\n' "$mode, cold page cache" \
            "$(awk '{print $2}' "$WORK/out")" "$secs" "$(echo "$kb / 1024" | bc -l)"
    done
fi
run "full: bbolt page walk + WAL + snap files" full
run "sanity: open db, revision" sanity
run "full, store at the db revision" full "$REV"
run "sanity, store 1000 revisions ahead (WAL counted)" sanity $((REV + 1000))
echo
echo "For comparison, what the Go tool's embedded-etcd check starts with: etcd on this data dir"
T0=$(date +%s.%N)
start_etcd "$DATA" "$WORK/etcd2.log"
T1=$(date +%s.%N)
stop_etcd
printf '| etcd start until healthy | %.2f s |\n' "$(echo "$T1 - $T0" | bc -l)"
