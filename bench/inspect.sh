#!/usr/bin/env bash
# Reading a backup in place (get, history, diff; docs/inspect.md) beside what the operator does
# without them: `cp` of the full snapshot's file (the disk's speed), and etcdbrctl restore of the
# same set (the first step of a restore, an etcd started on it and etcdctl get).
#   bench/inspect.sh [DB_MB] [REVISIONS]     defaults: 200 MB full snapshot, 1,000,000 revisions
#   (issue 21's figure: bench/inspect.sh 3072 1000000)
# The store is Local and uncompressed (the full snapshot is read where it lies, as restore reads
# it); ETCD_DIR as in bench/restore.sh. Prints a table; needs a built tree, jq, GNU time, bc.
# BENCH_STORE=DIR keeps the generated store in DIR (with bench.env, its revisions and keys) and,
# when DIR already holds one, measures it again without generating (DB_MB, REVISIONS unused).
set -euo pipefail
cd "$(dirname "$0")/.."
DB_MB=${1:-200}
REVS=${2:-1000000}
BIN=$PWD/build/etcdbrctl
LOADGEN=$PWD/build/etcd_loadgen
cache=${ETCDBR_ETCD_CACHE:-$HOME/.cache/etcdbr/etcd}
if [ -z "${ETCD_DIR:-}" ]; then
    ETCD_DIR=$(ls -d "$cache"/v3.5.* 2>/dev/null | sort -V | tail -1 || true)
fi
if [ -n "${ETCD_DIR:-}" ]; then export PATH=$ETCD_DIR:$PATH; fi
source bench/lib.sh
bench_init inspect
generate() {
    start_etcd "$WORK/src.etcd" "$WORK/etcd.log" --unsafe-no-fsync
    echo "loading ~${DB_MB} MB (4 KiB values) ..."
    "$LOADGEN" "$EP" puts $((DB_MB * 1024 / 4)) 4096 /bench/big/ 64
    "$BIN" snapshot --endpoints="$EP" --storage-provider=Local --store-container="$WORK/store" \
        --snapstore-temp-directory="$WORK/tmp" --delta-snapshot-period=10s --compress-snapshots=false \
        --garbage-collection-period=0s >"$WORK/snap.log" 2>&1 &
    SNAP=$!
    PIDS+=("$SNAP")
    until ls "$WORK/store/v2/" 2>/dev/null | grep -q '^Full-'; do sleep 0.1; done
    FULL=$(ls "$WORK/store/v2/" | grep '^Full-')
    FULL_REV=$(echo "$FULL" | cut -d- -f3 | sed 's/^0*//')
    echo "full snapshot $FULL: $(($(stat -c %s "$WORK/store/v2/$FULL") / 1048576)) MiB"
    echo "writing $REVS single-event revisions (100-byte values) ..."
    "$LOADGEN" "$EP" puts "$REVS" 100 /bench/delta/ 64
    kill -TERM "$SNAP"
    wait "$SNAP"
    echo "store: $(ls "$WORK/store/v2" | grep -c '^Incr-') deltas, $(du -sm "$WORK/store" | cut -f1) MiB"
    LAST_REV=$(etcdctl --endpoints="$EP" endpoint status -w json | jq -r '.[0].Status.header.revision')
    KEY=$(etcdctl --endpoints="$EP" get /bench/big/ --prefix --keys-only --limit 1 | head -1)
    DKEY=$(etcdctl --endpoints="$EP" get /bench/delta/ --prefix --keys-only --limit 1 | head -1)
    stop_etcd
    rm -rf "$WORK/src.etcd"
    sync
}
if [ -n "${BENCH_STORE:-}" ] && [ -f "$BENCH_STORE/bench.env" ]; then
    source "$BENCH_STORE/bench.env"
    echo "measuring the kept store $BENCH_STORE"
else
    generate
    if [ -n "${BENCH_STORE:-}" ]; then
        mkdir -p "$BENCH_STORE"
        mv "$WORK/store" "$BENCH_STORE/store"
        printf 'FULL=%q\nFULL_REV=%q\nLAST_REV=%q\nKEY=%q\nDKEY=%q\nREVS=%q\n' "$FULL" "$FULL_REV" \
            "$LAST_REV" "$KEY" "$DKEY" "$REVS" >"$BENCH_STORE/bench.env"
    fi
fi
SDIR=${BENCH_STORE:+$BENCH_STORE/store}
SDIR=${SDIR:-$WORK/store}
mkdir -p "$WORK/tmp"
STORE=(--storage-provider=Local --store-container="$SDIR" --snapstore-temp-directory="$WORK/tmp")
# measure LABEL CMD...: wall seconds, peak RSS (MiB) and the command's own summary line
measure() {
    local label=$1 secs kb
    shift
    rm -rf "$WORK/r.etcd"
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >"$WORK/out.txt" 2>"$WORK/out.log" ||
        { cat "$WORK/out.log"; exit 1; }
    read -r secs kb <"$WORK/time"
    printf '| %-58s | %7s s | %7.1f MiB | %s |\n' "$label" "$secs" "$(echo "$kb / 1024" | bc -l)" \
        "$(grep -o 'done: [^,]*' "$WORK/out.log" | head -1)"
}
wait_low_load
echo
echo "full snapshot at revision $FULL_REV, deltas up to $LAST_REV; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| command | wall | peak RSS | answer |"
echo "|---|---|---|---|"
for i in 1 2; do
    measure "cp of the full snapshot's file (run $i)" cp "$SDIR/v2/$FULL" "$WORK/cp.db"
    rm -f "$WORK/cp.db"
done
for i in 1 2; do
    measure "get KEY (one key, latest: full + $REVS revisions) (run $i)" \
        "$BIN" get "$KEY" "${STORE[@]}"
done
measure "get KEY --revision $FULL_REV (full snapshot only)" "$BIN" get "$KEY" --revision "$FULL_REV" "${STORE[@]}"
measure "get --prefix /bench/delta/ --limit 10 -o json (latest)" \
    "$BIN" get /bench/delta/ --prefix --limit 10 -o json "${STORE[@]}"
measure "history DELTA_KEY (every revision of one key)" "$BIN" history "$DKEY" "${STORE[@]}"
measure "diff --from-revision $FULL_REV (every key changed since the full)" \
    "$BIN" diff --from-revision "$FULL_REV" -o json "${STORE[@]}"
measure "etcdbrctl restore of the same set (before an etcd and etcdctl)" \
    "$BIN" restore "${STORE[@]}" --data-dir="$WORK/r.etcd" --restoration-temp-snapshots-dir="$WORK/rt"
