#!/usr/bin/env bash
# Point-in-time restore (--revision, --time) and the revision bump (--bump-revision with
# --mark-compacted): for several target revisions (the full snapshot's, a delta boundary, inside
# a delta, the last) the restored keyspace equals `etcdctl get --rev=R` on the source taken
# before any compaction, HashKV at R is equal, and the member is at revision R. --time maps to
# the last revision recorded at or before it. After a bump, a watch from an old revision gets a
# compaction error and new writes land above the bump. Targets outside the store are refused.
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"

start_etcd src "$WORK/src.etcd"
SRC_EP=$ETCD_EP
SRC_PID=$ETCD_PID
"$LOADGEN" "$SRC_EP" puts 200 64 /base/ 16
start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s --compress-snapshots=false
wait_for_log "$WORK/snap.log" "full snapshot Full-"
full_rev=$(ls "$WORK/store/v2" | grep '^Full-' | head -1 | cut -d- -f3 | sed 's/^0*//')
now_rfc3339() { date -u +%Y-%m-%dT%H:%M:%S.%NZ; }
# waves of writes with quiet gaps: times in the gaps map to known revisions
declare -a gap_time gap_rev
for wave in 1 2 3 4; do
    "$LOADGEN" "$SRC_EP" puts 300 32 "/wave$wave/" 8
    ectl del --prefix "/wave$wave/1" >/dev/null   # a prefix delete: many events in one revision
    ectl put "/wave$wave/last" "x" >/dev/null
    ectl del "/base/$wave" >/dev/null || true
    sleep 1.2
    gap_rev[$wave]=$(current_revision "$SRC_EP")
    gap_time[$wave]=$(now_rfc3339)
    sleep 1.2
done
stop_snapshotter
last_rev=$(current_revision "$SRC_EP")
ls "$WORK/store/v2" >"$WORK/objects"
n_deltas=$(grep -c '^Incr-' "$WORK/objects" || true)
[ "$n_deltas" -ge 3 ] || fail "expected several deltas, got $n_deltas"
# a delta boundary and a revision inside a delta holding more than one revision
boundary=$(grep '^Incr-' "$WORK/objects" | sort -t- -k3,3n | sed -n 2p | cut -d- -f3 | sed 's/^0*//')
inside=$(grep '^Incr-' "$WORK/objects" | awk -F- '{s=$2+0; l=$3+0; if (l - s >= 10) {print int((s + l) / 2); exit}}')
[ -n "$inside" ] || fail "no delta spans 10 revisions"
echo "full snapshot at $full_rev, $n_deltas deltas, boundary $boundary, inside $inside, last $last_rev"

dump_at() { # EP REV
    etcdctl --endpoints="$1" get "" --from-key --rev="$2" -w json |
        jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version, lease: (.lease // 0)}'
}
hashkv_at() { etcdctl --endpoints="$1" endpoint hashkv --rev="$2" -w json | jq '.[0].HashKV.hash'; }
declare -A want_hash
for r in "$full_rev" "$boundary" "$inside" "$last_rev" "${gap_rev[2]}"; do
    dump_at "$SRC_EP" "$r" >"$WORK/src-$r.jsonl"
    want_hash[$r]=$(hashkv_at "$SRC_EP" "$r")
done
stop_pid "$SRC_PID"

check_restored() { # DATA_DIR REV LABEL
    start_etcd restored "$1"
    local got
    got=$(current_revision "$ETCD_EP")
    [ "$got" = "$2" ] || fail "$3: member at revision $got, expected $2"
    dump_at "$ETCD_EP" "$2" | cmp - "$WORK/src-$2.jsonl" || fail "$3: keyspace at $2 differs from the source"
    [ "$(hashkv_at "$ETCD_EP" "$2")" = "${want_hash[$2]}" ] || fail "$3: HashKV at $2 differs"
    stop_pid "$ETCD_PID"
}

for r in "$full_rev" "$boundary" "$inside" "$last_rev"; do
    restore_store "$WORK/store" "$WORK/r$r.etcd" --revision="$r" >"$WORK/r$r.log" 2>&1 || { cat "$WORK/r$r.log"; fail "restore --revision=$r failed"; }
    check_restored "$WORK/r$r.etcd" "$r" "--revision=$r"
    rm -rf "$WORK/r$r.etcd"
    echo "--revision=$r: exact (keys, revisions, versions, leases, HashKV)"
done

# --time: a time in the quiet gap after wave 2 gives the revision current then
restore_store "$WORK/store" "$WORK/t.etcd" --time="${gap_time[2]}" >"$WORK/t.log" 2>&1 || { cat "$WORK/t.log"; fail "restore --time failed"; }
check_restored "$WORK/t.etcd" "${gap_rev[2]}" "--time=${gap_time[2]}"
rm -rf "$WORK/t.etcd"
echo "--time=${gap_time[2]}: revision ${gap_rev[2]}, exact"

# initialize --revision: a valid data dir at the newest revision is restored to the target (the
# old one kept aside), and a rerun at that revision leaves it alone
restore_store "$WORK/store" "$WORK/i.etcd" >"$WORK/i0.log" 2>&1 || { cat "$WORK/i0.log"; fail "restore for initialize failed"; }
init() {
    "$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$WORK/store" \
        --data-dir="$WORK/i.etcd" --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$WORK/i.tmp" "$@"
}
init --revision="$boundary" >"$WORK/i1.log" 2>&1 || { cat "$WORK/i1.log"; fail "initialize --revision failed"; }
grep -q "restore target is set" "$WORK/i1.log" || fail "initialize did not restore to the target"
ls -d "$WORK"/i.etcd.invalid.*/member >/dev/null 2>&1 || fail "initialize did not keep the replaced data dir aside"
check_restored "$WORK/i.etcd" "$boundary" "initialize --revision=$boundary"
init --revision="$boundary" >"$WORK/i2.log" 2>&1 || { cat "$WORK/i2.log"; fail "second initialize failed"; }
grep -q "restore target is set" "$WORK/i2.log" && fail "initialize restored again a data dir already at the target"
rm -rf "$WORK/i.etcd" "$WORK"/i.etcd.invalid.*
echo "initialize --revision=$boundary: restored over a newer valid data dir, then left alone"

# refusals: beyond the store, before the first full snapshot, both targets, a bad time
rc=0; restore_store "$WORK/store" "$WORK/x.etcd" --revision=$((last_rev + 1)) >"$WORK/x.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "beyond the store" "$WORK/x.log" || { cat "$WORK/x.log"; fail "--revision past the store: exit $rc"; }
rc=0; restore_store "$WORK/store" "$WORK/x.etcd" --revision=$((full_rev - 1)) >"$WORK/x.log" 2>&1 || rc=$?
[ "$rc" = 4 ] || { cat "$WORK/x.log"; fail "--revision before the full snapshot: exit $rc"; }
rc=0; restore_store "$WORK/store" "$WORK/x.etcd" --revision=5 --time="${gap_time[1]}" >"$WORK/x.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/x.log"; fail "--revision with --time: exit $rc"; }
rc=0; restore_store "$WORK/store" "$WORK/x.etcd" --time=yesterday >"$WORK/x.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/x.log"; fail "--time=yesterday: exit $rc"; }
rc=0; restore_store "$WORK/store" "$WORK/x.etcd" --bump-revision=10 >"$WORK/x.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/x.log"; fail "--bump-revision without --mark-compacted: exit $rc"; }
[ ! -e "$WORK/x.etcd" ] || fail "a refused restore left a data dir"
echo "refusals: past the store (2), before the full snapshot (4), two targets (2), bad time (2), bump alone (2)"

# bump: revision + 1000, old watchers get "compacted", new writes above the bump
restore_store "$WORK/store" "$WORK/b.etcd" --revision="$inside" --bump-revision=1000 --mark-compacted >"$WORK/b.log" 2>&1 || { cat "$WORK/b.log"; fail "restore with bump failed"; }
start_etcd restored "$WORK/b.etcd"
got=$(current_revision "$ETCD_EP")
[ "$got" = $((inside + 1000)) ] || fail "bumped member at revision $got, expected $((inside + 1000))"
out=$(timeout 5 etcdctl --endpoints="$ETCD_EP" watch --rev=$((inside - 3)) /wave1/last 2>&1 || true)
echo "$out" | grep "compacted" >/dev/null || fail "a watch from revision $((inside - 3)) did not report compaction: $out"
dump_keys "$ETCD_EP" | jq -c 'del(.lease)' >"$WORK/b.jsonl"
jq -c 'del(.lease)' "$WORK/src-$inside.jsonl" | cmp - "$WORK/b.jsonl" || fail "bumped keyspace differs from the source at $inside"
rev=$(ectl put /after-bump y -w json | jq '.header.revision')
[ "$rev" = $((inside + 1001)) ] || fail "a write after the bump got revision $rev, expected $((inside + 1001))"
stop_pid "$ETCD_PID"
echo "bump: revision $((inside + 1000)), old watch compacted, next write at $rev"
