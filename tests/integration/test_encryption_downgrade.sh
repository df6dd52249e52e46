#!/usr/bin/env bash
# An unencrypted object after an encrypted one in a set (docs/verify.md,
# unencrypted-after-encrypted): with a real etcd and a Local store, a snapshotter with keys takes
# the full snapshot and a delta. One restarted WITHOUT the keys (the 3 a.m. restart that lost the
# secret) cannot prove the encrypted chain is its etcd's (docs/snapshot.md, the identity proof):
# it does not continue it, says why, and starts a new history with a plain full snapshot. Its
# plain delta, which continues the encrypted set's revisions, is then planted into the encrypted
# set (as an attacker without a key could): `verify` must fail naming it (exit 1), a restore
# leaves it out naming it. A store that turned encryption on later (a plain full snapshot, then encrypted
# deltas) still verifies (exit 0).
source "$(dirname "$0")/lib.sh"
make_workdir
use_etcd 3.4
start_etcd n1 "$WORK/n1.etcd"
(
    umask 077
    printf 'k1 %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/keys"
)
KEYS=(--encryption-key-file="$WORK/keys")
STORE=(--storage-provider=Local --store-container="$WORK/store")

# snap_round STORE_DIR LOG [flags]: a snapshotter (full snapshot at start, deltas every 1 s) while
# 5 keys are put, stopped once a delta holds them
snap_round() {
    local store=$1 log=$2 i
    shift 2
    start_snapshotter "$store" "$log" --delta-snapshot-period=1s "$@"
    wait_for_log "$log" "full snapshot Full-.* stored\|resuming from" 30
    for i in 1 2 3 4 5; do ectl put "/k/$RANDOM-$i" "v$i" >/dev/null; done
    local rev
    rev=$(current_revision "$ETCD_EP")
    wait_for_log "$log" "revisions [0-9]*-$rev," 30
    stop_snapshotter
}

snap_round "$WORK/store" "$WORK/snap1.log" "${KEYS[@]}"
ls "$WORK/store/v2" | grep '^Full-.*\.enc\.gz$' >/dev/null || fail "no encrypted full snapshot: $(ls "$WORK/store/v2")"
cp -r "$WORK/store" "$WORK/storex"
snap_round "$WORK/storex" "$WORK/snap2.log"
grep -E "level=warning msg=\"not continuing the store's chain ending with v2/Incr-[0-9-]+\.enc\.gz .*no encryption keys were given.*\(unreadable\); taking a full snapshot" \
    "$WORK/snap2.log" >/dev/null || fail "the snapshotter without keys did not say why it left the encrypted chain: $(grep -i warn "$WORK/snap2.log")"
grep -q "resuming from" "$WORK/snap2.log" && fail "the snapshotter without keys continued an encrypted chain"
echo "PASS: a snapshotter without keys does not continue an encrypted chain; it says why and starts a new history"
plain=$(ls "$WORK/storex/v2" | grep '^Incr-.*[0-9]\.gz$' | head -1)
[ -n "$plain" ] || fail "the snapshotter without keys wrote no plain delta: $(ls "$WORK/storex/v2")"
last_enc=$(ls "$WORK/store/v2" | grep '^Incr-' | sed -E 's/^Incr-[0-9]+-0*([0-9]+)-.*/\1/' | sort -n | tail -1)
first_plain=$(echo "$plain" | sed -E 's/^Incr-0*([0-9]+)-.*/\1/')
[ "$first_plain" = $((last_enc + 1)) ] || fail "the plain delta $plain does not continue the encrypted set (last $last_enc)"
cp "$WORK/storex/v2/$plain" "$WORK/store/v2/" # planted

rc=0
"$ETCDBR_BIN" verify "${STORE[@]}" "${KEYS[@]}" >"$WORK/verify.out" 2>"$WORK/verify.log" || rc=$?
[ "$rc" = 1 ] || fail "verify of a set with a plain delta after encrypted objects exited $rc: $(cat "$WORK/verify.out")"
grep -F "FAULT [unencrypted-after-encrypted] v2/$plain is not encrypted" "$WORK/verify.out" >/dev/null ||
    fail "verify does not name the plain delta $plain: $(cat "$WORK/verify.out")"
rc=0
"$ETCDBR_BIN" verify "${STORE[@]}" "${KEYS[@]}" -o json >"$WORK/verify.json" 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "verify -o json exited $rc"
jq -e --arg o "v2/$plain" '[.faults[] | select(.kind == "unencrypted-after-encrypted" and .object == $o and .warning == false)] | length == 1' \
    "$WORK/verify.json" >/dev/null || fail "verify -o json: no unencrypted-after-encrypted fault for $plain: $(cat "$WORK/verify.json")"
echo "PASS: verify fails on a plain delta after encrypted objects, naming it"

restore_store "$WORK/store" "$WORK/restored" "${KEYS[@]}" >"$WORK/restore.log" 2>&1 || fail "restore failed: $(tail -3 "$WORK/restore.log")"
grep -F "v2/$plain is not encrypted, but" "$WORK/restore.log" >/dev/null || fail "restore does not warn about $plain: $(grep level=warn "$WORK/restore.log")"
echo "PASS: restore names the plain delta it leaves out"

# encryption turned on later: plain full snapshot, then encrypted deltas: no fault
snap_round "$WORK/store2" "$WORK/snap3.log"
snap_round "$WORK/store2" "$WORK/snap4.log" "${KEYS[@]}"
ls "$WORK/store2/v2" | grep '^Incr-.*\.enc\.gz$' >/dev/null || fail "no encrypted delta after the plain full snapshot: $(ls "$WORK/store2/v2")"
rc=0
"$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/store2" "${KEYS[@]}" >"$WORK/verify2.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "verify of a store that turned encryption on later exited $rc: $(cat "$WORK/verify2.out")"
echo "PASS: a store that turned encryption on later verifies"
