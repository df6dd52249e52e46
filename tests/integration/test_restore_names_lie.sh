#!/usr/bin/env bash
# Names that lie (docs/restore.md, "Names must match contents"): with a real etcd and a Local
# store filled by the snapshotter (a full snapshot and deltas; the number of writes drawn from a
# logged seed, ETCDBR_TEST_SEED to repeat), objects are planted whose names do not match their
# contents:
# (a) a full snapshot whose name says a much newer revision than its db holds (the issue's
#     Full-0-1189 holding 48): `restore` refuses naming it (it restored silently to the db's
#     revision before), `verify` reports it;
# (b) a delta whose name starts before its first event (overlapping the one before it by name):
#     refused naming it (applied silently before);
# (c) a delta whose name ends after its last event, and (d) one whose name ends before its last
#     event, each restored with --revision inside the delta: refused naming it (before, a restore
#     stopping inside a delta never looked at the rest of it);
# (e) `initialize` of a healthy data dir at the store's revision, with the lying full of (a)
#     planted: the data dir is not moved aside (no .invalid) and not changed; it used to be
#     replaced by the older db the lying full holds;
# (f) --bump-revision=INT64_MAX, and the first bump that overflows on top of the store's
#     revision: refused (exit 2) naming the flag before anything is written (the sum wrapped
#     before); the largest bump that fits is accepted.
source "$(dirname "$0")/lib.sh"
make_workdir
unset POD_NAMESPACE
SEED=${ETCDBR_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "seed: $SEED (ETCDBR_TEST_SEED=$SEED repeats this run)"
RANDOM=$((SEED % 32768))
N1=$((5 + RANDOM % 20)) # puts before the full snapshot
N2=$((3 + RANDOM % 6))  # puts per delta
STORE=$WORK/store
INT64_MAX=9223372036854775807

start_etcd src "$WORK/src.etcd"
for i in $(seq 1 "$N1"); do ectl put "/before/$i" "v$i" >/dev/null; done
start_snapshotter "$STORE" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-.* stored"
for round in 1 2 3; do
    for i in $(seq 1 "$N2"); do ectl put "/after/$round/$i" "w$i" >/dev/null; done
    rev=$(current_revision "$ETCD_EP")
    wait_for_log "$WORK/snap.log" "revisions [0-9]*-$rev," 30
done
SRC_REV=$(current_revision "$ETCD_EP")
stop_snapshotter
stop_pid "$ETCD_PID"
mapfile -t FULLS < <(ls "$STORE/v2" | grep '^Full-')
mapfile -t DELTAS < <(ls "$STORE/v2" | grep '^Incr-' | sort -t- -k3,3n)
[ "${#FULLS[@]}" = 1 ] && [ "${#DELTAS[@]}" -ge 3 ] || fail "want 1 full snapshot and 3+ deltas: $(ls "$STORE/v2")"
FULL=${FULLS[0]}
FULL_REV=$((10#$(echo "$FULL" | cut -d- -f3)))
echo "store: $FULL and ${#DELTAS[@]} deltas, up to revision $SRC_REV"

# fields NAME: kind start last time
fields() { echo "$1" | awk -F- '{ split($4, t, "."); printf "%s %d %d %d\n", $1, $2, $3, t[1] }'; }
# name KIND START LAST TIME
name() { printf '%s-%08d-%08d-%d\n' "$1" "$2" "$3" "$4"; }
# copy_store DIR: a copy of the honest store
copy_store() { rm -rf "$1" && cp -a "$STORE" "$1"; }
# restore_expect_refused LABEL STORE OBJECT [flags]: restore fails naming OBJECT, no data dir
restore_expect_refused() {
    local label=$1 store=$2 obj=$3 rc=0
    shift 3
    rm -rf "$WORK/r-$label"
    restore_store "$store" "$WORK/r-$label" "$@" >"$WORK/r-$label.log" 2>&1 || rc=$?
    [ "$rc" != 0 ] || fail "($label) restore of a store with the lying $obj exited 0: $(grep -i 'restor' "$WORK/r-$label.log" | tail -3)"
    grep -F "v2/$obj" "$WORK/r-$label.log" | grep -F "does not match" >/dev/null ||
        fail "($label) the refusal does not name $obj as not matching its contents: $(tail -3 "$WORK/r-$label.log")"
    [ ! -e "$WORK/r-$label" ] || fail "($label) a data dir was left behind"
    echo "PASS ($label): restore refuses the lying $obj (exit $rc)"
}

# ---- (a) a full snapshot named far newer than its db ----
read -r _ _ _ ftime < <(fields "$FULL")
LIE_REV=$((SRC_REV + 1000 + RANDOM % 1000))
LYING_FULL=$(name Full 0 "$LIE_REV" $((ftime + 100)))${FULL#"${FULL%%.*}"}
copy_store "$WORK/store-a"
cp "$STORE/v2/$FULL" "$WORK/store-a/v2/$LYING_FULL"
restore_expect_refused a "$WORK/store-a" "$LYING_FULL"
rc=0
"$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/store-a" >"$WORK/verify-a.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "(a) verify of the lying full exited $rc: $(tail -5 "$WORK/verify-a.out")"
grep -F "v2/$LYING_FULL holds the db at revision $FULL_REV, but its name says $LIE_REV" "$WORK/verify-a.out" >/dev/null ||
    fail "(a) verify does not report the lying full: $(cat "$WORK/verify-a.out")"
echo "PASS (a): verify reports the lying full"

# ---- (b) a delta whose name starts before its first event ----
D=${DELTAS[1]}
read -r _ ds dl dt < <(fields "$D")
LYING=$(name Incr $((ds - 1 - RANDOM % (ds - FULL_REV))) "$dl" "$dt").gz
copy_store "$WORK/store-b"
mv "$WORK/store-b/v2/$D" "$WORK/store-b/v2/$LYING"
restore_expect_refused b "$WORK/store-b" "$LYING"

# ---- (c) a delta whose name ends after its last event, restored to a revision inside it ----
D=${DELTAS[1]}
read -r _ ds dl dt < <(fields "$D")
D2=${DELTAS[2]}
read -r _ d2s d2l d2t < <(fields "$D2")
copy_store "$WORK/store-c"
LYING=$(name Incr "$ds" $((dl + 1)) "$dt").gz
LYING2=$(name Incr $((d2s + 1)) "$d2l" "$d2t").gz # keeps the names contiguous
mv "$WORK/store-c/v2/$D" "$WORK/store-c/v2/$LYING"
mv "$WORK/store-c/v2/$D2" "$WORK/store-c/v2/$LYING2"
restore_expect_refused c "$WORK/store-c" "$LYING" --revision="$ds"

# ---- (d) a delta whose name ends before its last event, restored to a revision inside it ----
[ "$dl" -gt "$ds" ] || fail "(d) needs a delta of 2+ revisions: $D"
copy_store "$WORK/store-d"
LYING=$(name Incr "$ds" $((dl - 1)) "$dt").gz
LYING2=$(name Incr "$dl" "$d2l" "$d2t").gz
mv "$WORK/store-d/v2/$D" "$WORK/store-d/v2/$LYING"
mv "$WORK/store-d/v2/$D2" "$WORK/store-d/v2/$LYING2"
restore_expect_refused d "$WORK/store-d" "$LYING" --revision="$ds"

# ---- (e) initialize keeps a healthy data dir whatever a lying full claims ----
fingerprint() {
    (cd "$1" && find . -print | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}
cp -a "$WORK/src.etcd" "$WORK/healthy.etcd"
fingerprint "$WORK/healthy.etcd" >"$WORK/healthy.before"
rc=0
"$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$WORK/store-a" \
    --snapstore-temp-directory="$WORK/init-tmp" --data-dir="$WORK/healthy.etcd" --name=src \
    --initial-cluster=src=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/init.tmp" >"$WORK/init.log" 2>&1 || rc=$?
[ ! -e "$WORK/healthy.etcd.invalid" ] || fail "(e) initialize moved the healthy data dir aside (exit $rc): $(tail -5 "$WORK/init.log")"
fingerprint "$WORK/healthy.etcd" >"$WORK/healthy.after"
cmp -s "$WORK/healthy.before" "$WORK/healthy.after" || fail "(e) initialize changed the healthy data dir (exit $rc): $(tail -5 "$WORK/init.log")"
grep -F "v2/$LYING_FULL" "$WORK/init.log" >/dev/null || fail "(e) initialize does not name the lying full: $(tail -5 "$WORK/init.log")"
start_etcd src "$WORK/healthy.etcd"
[ "$(current_revision "$ETCD_EP")" = "$SRC_REV" ] || fail "(e) the kept data dir is not at revision $SRC_REV"
stop_pid "$ETCD_PID"
echo "PASS (e): initialize keeps the healthy data dir (exit $rc) and names the lying full"

# ---- (f) --bump-revision overflow ----
for bump in "$INT64_MAX" $((INT64_MAX - SRC_REV)) $((INT64_MAX - SRC_REV + RANDOM % SRC_REV)); do
    rc=0
    rm -rf "$WORK/r-bump"
    restore_store "$STORE" "$WORK/r-bump" --bump-revision="$bump" --mark-compacted >"$WORK/r-bump.log" 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "(f) --bump-revision=$bump on revision $SRC_REV exited $rc: $(tail -3 "$WORK/r-bump.log")"
    grep -F -- "--bump-revision $bump on top of revision $SRC_REV overflows int64" "$WORK/r-bump.log" >/dev/null ||
        fail "(f) no overflow error for --bump-revision=$bump: $(tail -3 "$WORK/r-bump.log")"
    [ ! -e "$WORK/r-bump" ] || fail "(f) a data dir was written for --bump-revision=$bump"
done
echo "PASS (f): bumps that overflow int64 on top of revision $SRC_REV are refused"
bump=$((INT64_MAX - 1 - SRC_REV))
rm -rf "$WORK/r-bump"
restore_store "$STORE" "$WORK/r-bump" --bump-revision="$bump" --mark-compacted >"$WORK/r-bump.log" 2>&1 ||
    fail "(f) the largest bump that fits ($bump) was refused: $(tail -3 "$WORK/r-bump.log")"
grep -F "db built: revision $((INT64_MAX - 1)) " "$WORK/r-bump.log" >/dev/null ||
    fail "(f) the largest bump did not reach revision $((INT64_MAX - 1)): $(grep 'db built' "$WORK/r-bump.log")"
echo "PASS (f): the largest bump that fits ($bump) restores to revision $((INT64_MAX - 1))"

# ---- the honest store still restores ----
restore_store "$STORE" "$WORK/r-honest" >"$WORK/r-honest.log" 2>&1 || fail "the honest store does not restore: $(tail -3 "$WORK/r-honest.log")"
start_etcd r "$WORK/r-honest"
[ "$(current_revision "$ETCD_EP")" = "$SRC_REV" ] || fail "the honest restore is not at revision $SRC_REV"
echo "PASS: the honest store restores to revision $SRC_REV"
