#!/usr/bin/env bash
# `verify` never passes a store that `restore` refuses (docs/verify.md): a real etcd and a
# snapshotter make a full snapshot on a Local store; then, one at a time, a planted delta right
# after it (Go delta format: JSON events + sha256, gzip, so every one decodes and its hash
# matches) holds events etcd never writes: a put without a key, a put whose create_revision is
# after its own revision, a put with version 0, a first version with an older create_revision,
# events out of order. For each, restore must fail, and verify must fail too (exit 1) naming the
# delta; a well-formed planted delta passes both, so the check is not vacuous.
source "$(dirname "$0")/lib.sh"
make_workdir
use_etcd 3.4
start_etcd n1 "$WORK/n1.etcd"
for i in 1 2 3; do ectl put "/k/$i" "v$i" >/dev/null; done
start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=0s
wait_for_log "$WORK/snap.log" "full snapshot Full-.* stored" 30
stop_snapshotter
R=$(current_revision "$ETCD_EP")
FULL=$(ls "$WORK/store/v2" | grep '^Full-')
[ -n "$FULL" ] || fail "no full snapshot"

# plant NAME EVENTS_JSON: a store holding the full snapshot and one delta NAME whose events are
# EVENTS_JSON: [{"k": key, "r": mod_revision, "c": create_revision, "v": version, "t": type}]
plant() {
    rm -rf "$WORK/planted"
    mkdir -p "$WORK/planted/v2"
    cp "$WORK/store/v2/$FULL" "$WORK/planted/v2/"
    python3 - "$WORK/planted/v2/$1" "$2" <<'PY'
import base64, gzip, hashlib, json, sys
out, evs = sys.argv[1], json.loads(sys.argv[2])
arr = []
for e in evs:
    kv = {"key": base64.b64encode(e["k"].encode()).decode(), "mod_revision": e["r"]}
    if e.get("t") != "DELETE":
        kv.update(create_revision=e.get("c", e["r"]), version=e.get("v", 1), value="eA==")
    ev = {"kv": kv}
    if e.get("t") == "DELETE":
        ev["type"] = 1
    arr.append({"etcdEvent": ev, "time": "2026-12-02T01:04:52.967900038Z"})
b = json.dumps(arr, separators=(",", ":")).encode()
open(out, "wb").write(gzip.compress(b + hashlib.sha256(b).digest()))
PY
}

# both_fail WHAT NAME: restore and verify of the planted store both fail, verify naming NAME
both_fail() {
    local what=$1 name=$2 rrc=0 vrc=0
    rm -rf "$WORK/restored" "$WORK/restored.tmp"
    restore_store "$WORK/planted" "$WORK/restored" >"$WORK/restore.log" 2>&1 || rrc=$?
    [ "$rrc" != 0 ] || fail "$what: restore succeeded (the case must be one restore refuses)"
    "$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/planted" \
        >"$WORK/verify.out" 2>"$WORK/verify.log" || vrc=$?
    [ "$vrc" = 1 ] || fail "$what: restore failed ($(grep 'restore failed' "$WORK/restore.log" | cut -c1-300)) but verify exited $vrc: $(cat "$WORK/verify.out")"
    grep -F "FAULT" "$WORK/verify.out" | grep -F "v2/$name" >/dev/null || fail "$what: verify's fault does not name v2/$name: $(cat "$WORK/verify.out")"
    echo "PASS: $what: restore and verify both fail"
}

N1=$((R + 1))
N2=$((R + 2))
NAME1=$(printf 'Incr-%08d-%08d-1796174000.gz' "$N1" "$N1")
NAME2=$(printf 'Incr-%08d-%08d-1796174000.gz' "$N1" "$N2")

plant "$NAME1" "[{\"k\":\"/ok\",\"r\":$N1}]"
rm -rf "$WORK/restored" "$WORK/restored.tmp"
restore_store "$WORK/planted" "$WORK/restored" >"$WORK/restore.log" 2>&1 || fail "a well-formed planted delta does not restore: $(tail -3 "$WORK/restore.log")"
"$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/planted" >"$WORK/verify.out" 2>&1 || fail "a well-formed planted delta does not verify: $(cat "$WORK/verify.out")"
echo "PASS: a well-formed planted delta restores and verifies"

plant "$NAME1" "[{\"k\":\"\",\"r\":$N1}]"
both_fail "a put without a key" "$NAME1"
plant "$NAME1" "[{\"k\":\"/x\",\"r\":$N1,\"c\":$((N1 + 100))}]"
both_fail "create_revision after the put's revision" "$NAME1"
plant "$NAME1" "[{\"k\":\"/x\",\"r\":$N1,\"v\":0}]"
both_fail "a put with version 0" "$NAME1"
plant "$NAME1" "[{\"k\":\"/x\",\"r\":$N1,\"c\":2,\"v\":1}]"
both_fail "version 1 with an older create_revision" "$NAME1"
plant "$NAME2" "[{\"k\":\"/a\",\"r\":$N2},{\"k\":\"/b\",\"r\":$N1}]"
both_fail "events out of order" "$NAME2"
