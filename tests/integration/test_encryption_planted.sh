#!/usr/bin/env bash
# Encrypted stores against planted and swapped objects (docs/encryption.md, "Plain objects in
# an encrypted store" and "Names bound into the chunks"), with a real etcd and a Local store: a
# snapshotter with keys takes an encrypted full snapshot and deltas, `compact` adds a second
# encrypted full snapshot; the number of writes comes from a logged seed (ETCDBR_TEST_SEED).
# (a) every object is written in format version 2 (the name bound);
# (b) a plaintext full snapshot of a later state (it holds a key the backups never had) planted
#     with a newer name: `restore` with the keys leaves it out, naming it, and restores the
#     encrypted backups (it restored the planted keyspace with exit 0 before); without keys it
#     fails (the store is encrypted) instead of restoring the plain object; `verify` reports it;
# (c) the two encrypted full snapshots swapped by name: `restore` fails, naming the object whose
#     chunks do not authenticate under its name (it restored the older db under the newer name
#     before);
# (d) the honest store restores to the source's revision and keys.
source "$(dirname "$0")/lib.sh"
make_workdir
SEED=${ETCDBR_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "seed: $SEED (ETCDBR_TEST_SEED=$SEED repeats this run)"
RANDOM=$((SEED % 32768))
N1=$((3 + RANDOM % 15))
N2=$((2 + RANDOM % 10))
STORE=$WORK/store
(
    umask 077
    printf 'k1 %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/keys"
)
KEYS=(--encryption-key-file="$WORK/keys")

start_etcd src "$WORK/src.etcd"
for i in $(seq 1 "$N1"); do ectl put "/before/$i" "v$i" >/dev/null; done
start_snapshotter "$STORE" "$WORK/snap.log" --delta-snapshot-period=1s "${KEYS[@]}"
wait_for_log "$WORK/snap.log" "full snapshot Full-.* stored"
for i in $(seq 1 "$N2"); do ectl put "/after/$i" "w$i" >/dev/null; done
SRC_REV=$(current_revision "$ETCD_EP")
wait_for_log "$WORK/snap.log" "revisions [0-9]*-$SRC_REV," 30
stop_snapshotter
dump_keys "$ETCD_EP" >"$WORK/src.keys"
"$ETCDBR_BIN" compact --storage-provider=Local --store-container="$STORE" "${KEYS[@]}" \
    --restoration-temp-snapshots-dir="$WORK/compact.tmp" >"$WORK/compact.log" 2>&1 ||
    fail "compact failed: $(tail -3 "$WORK/compact.log")"
mapfile -t FULLS < <(ls "$STORE/v2" | grep '^Full-.*\.enc' | sort -t- -k3,3n)
[ "${#FULLS[@]}" = 2 ] || fail "want 2 encrypted full snapshots: $(ls "$STORE/v2")"
echo "store: $(ls "$STORE/v2" | tr '\n' ' ')"

# ---- (a) format version 2 ----
for f in "$STORE"/v2/*; do
    v=$(od -An -j8 -N1 -tu1 "$f" | tr -d ' ')
    [ "$v" = 2 ] || fail "(a) $f is in format version $v, not 2 (name bound)"
done
echo "PASS (a): every object is in format version 2"

# ---- (b) a planted plaintext full snapshot with a newer name ----
ectl put /planted "not a backup" >/dev/null
PLAIN_STORE=$WORK/plain-store
start_snapshotter "$PLAIN_STORE" "$WORK/snap-plain.log"
wait_for_log "$WORK/snap-plain.log" "full snapshot Full-.* stored"
stop_snapshotter
stop_pid "$ETCD_PID"
plain=$(ls "$PLAIN_STORE/v2" | grep '^Full-' | head -1)
ptime=$(echo "$plain" | cut -d- -f4 | cut -d. -f1)
PLANTED=$(printf 'Full-00000000-%08d-%d.gz' $((SRC_REV + 1 + RANDOM % 50)) $((ptime + 60)))
cp -a "$STORE" "$WORK/store-b"
cp "$PLAIN_STORE/v2/$plain" "$WORK/store-b/v2/$PLANTED"
restore_store "$WORK/store-b" "$WORK/r-b" "${KEYS[@]}" >"$WORK/r-b.log" 2>&1 ||
    fail "(b) restore with the planted plain full failed: $(tail -3 "$WORK/r-b.log")"
grep -F "v2/$PLANTED is not encrypted" "$WORK/r-b.log" | grep -F "left out" >/dev/null ||
    fail "(b) restore does not name the plain full it left out: $(grep -i warn "$WORK/r-b.log")"
start_etcd rb "$WORK/r-b"
[ "$(current_revision "$ETCD_EP")" = "$SRC_REV" ] || fail "(b) restored revision $(current_revision "$ETCD_EP"), the encrypted backups end at $SRC_REV"
[ -z "$(ectl get /planted --print-value-only)" ] || fail "(b) the planted plain full's key was restored"
dump_keys "$ETCD_EP" >"$WORK/rb.keys"
cmp -s "$WORK/src.keys" "$WORK/rb.keys" || fail "(b) restored keys differ from the backed-up ones"
stop_pid "$ETCD_PID"
echo "PASS (b): restore with keys leaves the planted plain full out, naming it"
rc=0
restore_store "$WORK/store-b" "$WORK/r-b2" >"$WORK/r-b2.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "(b) restore without keys of an encrypted store with a planted plain full exited 0"
[ ! -e "$WORK/r-b2" ] || fail "(b) restore without keys left a data dir"
grep -F "v2/$PLANTED is not encrypted" "$WORK/r-b2.log" >/dev/null || fail "(b) restore without keys does not name the plain full: $(tail -3 "$WORK/r-b2.log")"
echo "PASS (b): restore without keys refuses instead of restoring the plain full (exit $rc)"
rc=0
"$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/store-b" "${KEYS[@]}" >"$WORK/verify-b.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "(b) verify exited $rc: $(tail -5 "$WORK/verify-b.out")"
grep -F "FAULT [unencrypted-after-encrypted] v2/$PLANTED is not encrypted" "$WORK/verify-b.out" >/dev/null ||
    fail "(b) verify does not report the plain full: $(cat "$WORK/verify-b.out")"
echo "PASS (b): verify reports the plain full"

# ---- (c) two encrypted full snapshots swapped by name ----
cp -a "$STORE" "$WORK/store-c"
A=${FULLS[0]} B=${FULLS[1]}
mv "$WORK/store-c/v2/$A" "$WORK/store-c/v2/swap.tmp"
mv "$WORK/store-c/v2/$B" "$WORK/store-c/v2/$A"
mv "$WORK/store-c/v2/swap.tmp" "$WORK/store-c/v2/$B"
rc=0
restore_store "$WORK/store-c" "$WORK/r-c" "${KEYS[@]}" >"$WORK/r-c.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || fail "(c) restore of swapped encrypted full snapshots exited 0"
grep -F "v2/$B" "$WORK/r-c.log" | grep -F "does not authenticate under the name ${B%%.*}" >/dev/null ||
    fail "(c) the failure does not say $B fails under its name: $(tail -3 "$WORK/r-c.log")"
[ ! -e "$WORK/r-c" ] || fail "(c) a data dir was left behind"
echo "PASS (c): swapped encrypted objects fail decryption, named (exit $rc)"

# ---- (d) the honest store ----
restore_store "$STORE" "$WORK/r-d" "${KEYS[@]}" >"$WORK/r-d.log" 2>&1 || fail "(d) restore failed: $(tail -3 "$WORK/r-d.log")"
start_etcd rd "$WORK/r-d"
[ "$(current_revision "$ETCD_EP")" = "$SRC_REV" ] || fail "(d) restored revision is not $SRC_REV"
dump_keys "$ETCD_EP" >"$WORK/rd.keys"
cmp -s "$WORK/src.keys" "$WORK/rd.keys" || fail "(d) restored keys differ"
echo "PASS (d): the honest encrypted store restores to revision $SRC_REV"
