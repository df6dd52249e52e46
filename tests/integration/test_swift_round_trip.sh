#!/usr/bin/env bash
# Round trip through OpenStack Swift (Debian's Swift, tempauth): store_round_trip (lib.sh) with
# `--storage-provider=Swift` and OPENSTACK_APPLICATION_CREDENTIALS_JSON, the ~9 MiB full snapshot
# stored as 5 MiB segments (2 in flight) plus a DLO manifest. Then garbage collection (LimitBased
# --max-backups=1 on a second run) removes the first full snapshot and its deltas: the removed
# full's segments are gone, the kept full keeps every segment, no segment is left without its
# manifest, and a restore from what GC kept is exact.
source "$(dirname "$0")/lib.sh"
make_workdir
start_swift etcdbr-round-trip
C=$SWIFT_CONTAINER
export OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON
FLAGS=(--storage-provider=Swift --store-container="$C" --store-prefix=etcd-main
    --min-chunk-size=5242880 --max-parallel-chunk-uploads=2)
store_round_trip swift "${FLAGS[@]}"
grep -q "snapshot store: Swift:$C" "$WORK/rt-swift/snap.log" || fail "not on Swift: $(head -3 "$WORK/rt-swift/snap.log")"

# GC, on its own prefix and etcd: a first `snapshot` run stores full snapshot 1 (segmented) and
# deltas; a second run on the same etcd (compacted, so it starts with full snapshot 2) removes
# full 1 and its deltas with LimitBased --max-backups=1.
GCFLAGS=(--storage-provider=Swift --store-container="$C" --store-prefix=etcd-gc
    --min-chunk-size=5242880 --max-parallel-chunk-uploads=2)
# swift_names: every object name under etcd-gc/v2/ (raw listing, segments included)
swift_names() {
    curl -s -f -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$C?prefix=etcd-gc/v2/" | LC_ALL=C sort ||
        fail "listing the container"
}
manifests() { grep -v '/[0-9]\{10\}$' || true; }
start_etcd gc "$WORK/gc.etcd"
for i in $(seq 1 9); do
    head -c 786432 /dev/urandom | base64 -w0 >"$WORK/big"
    ectl put "/registry/big/$i" <"$WORK/big" >/dev/null
done
snap_gc() { # LOG [extra flags...]
    local log=$1
    shift
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" "${GCFLAGS[@]}" --snapstore-temp-directory="$WORK/snaptmp" \
        --schedule='0 0 1 1 *' --delta-snapshot-period=1s "$@" >"$log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
}
snap_gc "$WORK/gc1.log" --garbage-collection-period=0s
wait_for_log "$WORK/gc1.log" "full snapshot Full-" 60
ectl put /registry/gc/a 1 >/dev/null
sleep 1.5
ectl put /registry/gc/b 2 >/dev/null
wait_for_log "$WORK/gc1.log" "delta snapshot Incr-.* stored" 30
stop_snapshotter
swift_names >"$WORK/before.txt"
full1=$(manifests <"$WORK/before.txt" | grep '/Full-' || true)
[ "$(echo "$full1" | grep -c .)" = 1 ] || fail "expected one full snapshot, got: $full1"
segs1=$(grep -c "^$full1/[0-9]\{10\}$" "$WORK/before.txt" || true)
[ "$segs1" -ge 2 ] || fail "the full snapshot $full1 has $segs1 segments, want at least 2: $(cat "$WORK/before.txt")"
man=$(curl -s -I -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$C/$full1" | tr -d '\r' |
    sed -n 's/^[Xx]-[Oo]bject-[Mm]anifest: //p')
[ "$man" = "$C/$full1/" ] || fail "manifest of $full1: \"$man\""
deltas1=$(manifests <"$WORK/before.txt" | grep '/Incr-' || true)
[ -n "$deltas1" ] || fail "no delta in the first run"

# compacted past the last stored revision, etcd cannot replay the deltas the second run would
# resume with: it starts with a full snapshot
ectl put /registry/gc/c 3 >/dev/null
ectl put /registry/gc/d 4 >/dev/null
ectl compact "$(current_revision "$ETCD_EP")" >/dev/null
snap_gc "$WORK/gc2.log" --garbage-collection-period=2s --garbage-collection-policy=LimitBased --max-backups=1
wait_for_log "$WORK/gc2.log" "GC: removed old full snapshot" 90
stop_snapshotter
for l in gc1 gc2; do
    if grep -q "level=error" "$WORK/$l.log"; then grep "level=error" "$WORK/$l.log" >&2; fail "$l logged errors"; fi
done
dump_keys "$ETCD_EP" >"$WORK/src2.jsonl"
src_rev=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"
swift_names >"$WORK/after.txt"
if grep -q "^$full1" "$WORK/after.txt"; then fail "GC left the removed full or its segments: $(grep "^$full1" "$WORK/after.txt")"; fi
for d in $deltas1; do if grep -qx "$d" "$WORK/after.txt"; then fail "GC left delta $d"; fi; done
fulls=$(manifests <"$WORK/after.txt" | grep '/Full-' || true)
[ "$(echo "$fulls" | grep -c .)" = 1 ] || fail "after GC expected one full snapshot, got: $fulls"
segs2=$(grep -c "^$fulls/[0-9]\{10\}$" "$WORK/after.txt" || true)
[ "$segs2" -ge 2 ] || fail "the kept full $fulls has $segs2 segments: $(cat "$WORK/after.txt")"
# every segment left belongs to a manifest that is still there
while read -r seg; do
    grep -qx "${seg%/*}" "$WORK/after.txt" || fail "segment $seg has no manifest"
done < <(grep '/[0-9]\{10\}$' "$WORK/after.txt")
# what GC kept (the kept full read back through its manifest) restores exactly
"$ETCDBR_BIN" restore "${GCFLAGS[@]}" --data-dir="$WORK/restored2.etcd" --name=rt-swift-r2 \
    --initial-cluster=rt-swift-r2=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore2.tmp" >"$WORK/restore2.log" 2>&1 || {
    cat "$WORK/restore2.log" >&2
    fail "restore after GC failed"
}
start_etcd rt-swift-r2 "$WORK/restored2.etcd"
dump_keys "$ETCD_EP" >"$WORK/restored2.jsonl"
rev=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"
[ "$rev" = "$src_rev" ] || fail "revision $rev after the restore from what GC kept, source $src_rev"
cmp -s "$WORK/src2.jsonl" "$WORK/restored2.jsonl" || fail "the restore from what GC kept differs from the source"
echo "PASS: Swift round trip; GC removed $full1 ($segs1 segments) and its deltas, kept $fulls ($segs2 segments)"
