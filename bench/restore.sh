#!/usr/bin/env bash
# Restore benchmark, side by side with `cp` of the full snapshot's file plus `sync` (the disk's
# own speed) and etcd's own restore tool, on stores written by etcdbrctl snapshot from a real
# etcd on loopback (see README.md here). etcdbrctl writes the member dir itself (no etcd tool).
#   bench/restore.sh [DB_MB] [REVISIONS]     defaults: 200 MB full snapshot, 1,000,000 revisions
#   (issue 18's figure: bench/restore.sh 3072 1000000)
# ETCD_DIR=<dir with etcd, etcdutl> uses that etcd release (e.g. one built by
# scripts/build-etcd.sh); default: etcdutl from the cache's newest 3.5 if present, else Debian's
# etcd 3.4 with etcdctl. Prints tables; needs a built tree (./scripts/build.sh), jq, GNU time, bc.
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
if [ -n "${ETCD_DIR:-}" ]; then export PATH=$ETCD_DIR:$PATH; else export ETCDCTL_API=3; fi
TOOL=$(command -v etcdutl || command -v etcdctl)
source bench/lib.sh
bench_init restore
start_etcd "$WORK/src.etcd" "$WORK/etcd.log" --unsafe-no-fsync
echo "etcd $(etcd --version | head -1 | awk '{print $3}'), member dir written by $TOOL"
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
echo "full snapshot $FULL: $(( $(stat -c %s "$WORK/store/v2/$FULL") / 1048576 )) MiB"
echo "writing $REVS single-event revisions (100-byte values) ..."
t0=$(date +%s)
"$LOADGEN" "$EP" puts "$REVS" 100 /bench/delta/ 64
kill -TERM "$SNAP"
wait "$SNAP"
echo "  took $(( $(date +%s) - t0 )) s; store: $(ls "$WORK/store/v2" | grep -c '^Incr-') deltas, $(du -sm "$WORK/store" | cut -f1) MiB"
LAST_REV=$(etcdctl --endpoints="$EP" endpoint status -w json | jq -r '.[0].Status.header.revision')
stop_etcd
rm -rf "$WORK/src.etcd"
sync

# measure LABEL CMD...: wall seconds and peak RSS (MiB, the largest process: etcdutl when it runs)
measure() {
    local label=$1
    shift
    rm -rf "$WORK/r.etcd" "$WORK/rt"
    sync
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >"$WORK/out.log" 2>&1 || { cat "$WORK/out.log"; exit 1; }
    read -r secs kb <"$WORK/time"
    local own build
    own=$(grep -o 'peak RSS [0-9]* KiB' "$WORK/out.log" | grep -o '[0-9]*' || true)
    build=$(grep -o 'db built in [0-9.]*s' "$WORK/out.log" | grep -o '[0-9.]*' || true)
    printf '| %-46s | %7s s | %8.1f MiB | %s | %s |\n' "$label" "$secs" "$(echo "$kb / 1024" | bc -l)" \
        "${own:+$(echo "$own / 1024" | bc -l | xargs printf '%.1f MiB')}" "${build:+$build s}"
    LAST_BUILD=$build
}
restore() { # extra flags
    "$BIN" restore --storage-provider=Local --store-container="$WORK/store" --data-dir="$WORK/r.etcd" \
        --name r --initial-cluster r=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls http://127.0.0.1:2380 --restoration-temp-snapshots-dir="$WORK/rt" "$@"
}
export -f restore
export BIN WORK
wait_low_load
echo
echo "load average before the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| restore | wall | peak RSS (largest process) | etcdbrctl's own peak RSS | db build |"
echo "|---|---|---|---|---|"
for i in 1 2; do
    measure "cp of the full snapshot's file + sync (run $i)" bash -c \
        "cp '$WORK/store/v2/$FULL' '$WORK/cp.db' && sync; rm -f '$WORK/cp.db'"
    CP_SECS=$(cut -d' ' -f1 "$WORK/time")
done
for i in 1 2; do
    measure "$(basename "$TOOL") snapshot restore, full only (run $i)" "$TOOL" snapshot restore \
        "$WORK/store/v2/$FULL" --name r --initial-cluster r=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls http://127.0.0.1:2380 --data-dir "$WORK/r.etcd"
done
for i in 1 2; do
    measure "etcdbrctl restore, full only (run $i)" bash -c "restore --revision=$FULL_REV"
done
for i in 1 2; do
    measure "etcdbrctl restore, full + $REVS revisions (run $i)" bash -c restore
    secs=$(cut -d' ' -f1 "$WORK/time")
    echo "|   replay rate: $(echo "$REVS / $LAST_BUILD" | bc) revisions/s (db build incl. the full snapshot's copy); $(echo "scale=2; $secs / $CP_SECS" | bc)x cp + sync | | | | |"
done
echo
echo "restored to revision $LAST_REV from full snapshot revision $FULL_REV"
