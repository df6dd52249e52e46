#!/usr/bin/env bash
# `copy` into a destination that already holds ANOTHER object under a source object's name (a
# reused bucket, a store of another cluster): nothing in the destination is replaced
# (docs/copy.md), and the copy must say that the destination does not hold the source's object
# (a warning naming it and both sizes) instead of counting it as "already there" in silence.
# A real etcd and snapshotter write the source (a full snapshot and deltas) on a Local store.
source "$(dirname "$0")/lib.sh"
make_workdir
use_etcd 3.4
start_etcd n1 "$WORK/n1.etcd"
start_snapshotter "$WORK/src" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-.* stored" 30
for i in $(seq 1 5); do ectl put "/a/$i" "v$i" >/dev/null; done
wait_for_log "$WORK/snap.log" "delta snapshot Incr-" 30
for i in $(seq 1 40); do ectl put "/b/$i" "value-$i-$RANDOM" >/dev/null; done
wait_for_log "$WORK/snap.log" "revisions [0-9]*-$(current_revision "$ETCD_EP")," 30
stop_snapshotter
mapfile -t deltas < <(ls "$WORK/src/v2" | grep '^Incr-')
[ "${#deltas[@]}" -ge 2 ] || fail "want 2 deltas, have: $(ls "$WORK/src/v2")"
first=${deltas[0]}
last=${deltas[${#deltas[@]} - 1]}
[ "$(stat -c %s "$WORK/src/v2/$first")" != "$(stat -c %s "$WORK/src/v2/$last")" ] || fail "the two deltas have the same size"

# the destination: a copy of the source whose last delta is another object (the first delta's bytes)
cp -a "$WORK/src" "$WORK/dst"
cp "$WORK/src/v2/$first" "$WORK/dst/v2/$last"
before=$(sha256sum <"$WORK/dst/v2/$last")
rc=0
"$ETCDBR_BIN" copy --source-storage-provider=Local --source-store-container="$WORK/src" \
    --storage-provider=Local --store-container="$WORK/dst" >"$WORK/copy.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "copy exited $rc: $(tail -3 "$WORK/copy.log")"
[ "$(sha256sum <"$WORK/dst/v2/$last")" = "$before" ] || fail "copy replaced the destination's $last"
grep 'level=warning' "$WORK/copy.log" | grep -F "v2/$last is already in the destination" |
    grep -F "$(stat -c %s "$WORK/src/v2/$first") bytes where the source's has $(stat -c %s "$WORK/src/v2/$last")" >/dev/null ||
    fail "no warning that the destination's $last differs: $(grep -v 'msg="etcdbrctl' "$WORK/copy.log")"
n=$(grep -c 'is already in the destination' "$WORK/copy.log" || true)
[ "$n" = 1 ] || fail "$n warnings, want 1 (only $last differs): $(grep 'is already in' "$WORK/copy.log")"
echo "PASS: copy keeps a different destination object under the same name and warns about it"
