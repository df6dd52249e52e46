#!/usr/bin/env bash
# etcdbrctl verify (issue 9 item 2), with real etcd processes and a real object-store server:
#  0. every store the Go tool wrote (tests/fixtures: plain, gzip, zlib, lzw, v1) passes
#     --all-sets: its full snapshots may hold a few revisions after their names' (docs/go-tool.md §3);
#  1. S3 (s3rver): a snapshotter backs up into a bucket; verify passes (exit 0, text and JSON),
#     --all-sets too, and --restore-test restores the latest set, starts an etcd on it and
#     matches the live cluster's HashKV at the set's last revision;
#  2. Local (faults need file access): on copies of a good store, each planted fault fails verify
#     (exit 1) with a precise message naming the object: a missing delta (the missing revisions
#     and both neighbours), a flipped byte inside a delta and inside a full snapshot (re-gzipped,
#     so decompression succeeds: a bad hash), garbage under a .gz name (undecodable), a delta of
#     another history (a second cluster's delta with its history tag); a scratch dir left by a
#     killed verification is removed at the next start, one whose owner still holds its lock is
#     kept;
#  3. --restore-test: passes after the live cluster compacted below the set's revision (the
#     scratch etcd is compacted the same way), FAILS when a delta's content is swapped for
#     another valid delta of the same revisions (other values, hash recomputed; plain verify
#     still passes it), says "NOT compared" (exit 0) when the cluster is unreachable or has
#     compacted past the revision; scratch dirs and the scratch etcd are gone afterwards;
#  4. an encrypted store (a key file): verify with the key passes, list says encrypted,
#     --restore-test matches; without the key each object is reported naming it; a flipped byte
#     in an encrypted delta is undecodable.
# Values come from a logged seed (ETCDBR_TEST_SEED to replay).
source "$(dirname "$0")/lib.sh"
make_workdir
SEED=${ETCDBR_TEST_SEED:-$RANDOM}
RANDOM=$SEED
echo "seed: $SEED (ETCDBR_TEST_SEED=$SEED to replay)"

puts() { # puts PREFIX N
    local i
    for i in $(seq 1 "$2"); do ectl put "$1/$i" "v-$RANDOM-$RANDOM" >/dev/null; done
}

# backup STORE_FLAGS...: a snapshotter with 1 s deltas while batches of puts go in, until at least
# 4 deltas are stored; stops it. Uses $SNAPLOG; $1 is a command that counts stored deltas.
backup_rounds() {
    local count_cmd=$1
    shift
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --snapstore-temp-directory="$WORK/snaptmp" \
        --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s "$@" \
        >"$SNAPLOG" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
    wait_for_log "$SNAPLOG" "stored: revision" 30
    local r
    for r in $(seq 1 30); do
        puts "/r$r" $((3 + RANDOM % 6))
        sleep 1.2
        [ "$($count_cmd)" -ge 4 ] && break
    done
    sleep 1.5
    stop_snapshotter
    [ "$($count_cmd)" -ge 4 ] || fail "fewer than 4 deltas stored (log $SNAPLOG)"
}

no_scratch_left() { # no_scratch_left DIR: verify left nothing in its temp dir, no etcd running
    if [ -d "$1" ] && [ -n "$(ls -A "$1")" ]; then fail "verify left files in $1: $(ls -A "$1")"; fi
    if ps -eo args | grep -- "--name etcdbr-verify" | grep -v grep >/dev/null; then
        fail "the scratch etcd of --restore-test is still running"
    fi
}

# verify_expect CODE OUT_FILE [verify flags...]
verify_expect() {
    local want=$1 out=$2 rc=0
    shift 2
    "$ETCDBR_BIN" verify --snapstore-temp-directory="$WORK/vt" "$@" >"$out" 2>"$out.log" || rc=$?
    if [ "$rc" != "$want" ]; then
        cat "$out" "$out.log" >&2
        fail "verify $* exited $rc, expected $want"
    fi
    no_scratch_left "$WORK/vt"
}

# --- 0. the Go tool's stores ----------------------------------------------------------------------
for fx in "$ETCDBR_SOURCE_DIR"/tests/fixtures/*/; do
    name=$(basename "$fx")
    verify_expect 0 "$WORK/fx-$name.txt" --store-container="$fx/store" --all-sets
    grep "result: verified up to revision" "$WORK/fx-$name.txt" >/dev/null || fail "fixture $name: $(cat "$WORK/fx-$name.txt")"
    if grep "WARNING" "$WORK/fx-$name.txt" >/dev/null; then fail "fixture $name: warnings: $(cat "$WORK/fx-$name.txt")"; fi
done
echo "ok: every Go-written fixture verifies"

# --- 1. S3 on s3rver ---------------------------------------------------------------------------
start_s3rver backups
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
S3=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=etcd-main
    --store-endpoint-override="$S3_ENDPOINT")
start_etcd s "$WORK/s.etcd"
puts /s 40
SNAPLOG=$WORK/snap-s3.log
s3_deltas() { find "$WORK/s3rver/$S3_BUCKET/etcd-main/v2" -name 'Incr-*._S3rver_object' 2>/dev/null | wc -l; }
backup_rounds s3_deltas "${S3[@]}"
verify_expect 0 "$WORK/s3.txt" "${S3[@]}"
grep "result: verified up to revision" "$WORK/s3.txt" >/dev/null || fail "no verdict: $(cat "$WORK/s3.txt")"
n_obj=$(($(s3_deltas) + 1))
grep "scope: the latest set ($n_obj objects, $n_obj checked" "$WORK/s3.txt" >/dev/null ||
    fail "expected $n_obj objects checked: $(cat "$WORK/s3.txt")"
verify_expect 0 "$WORK/s3.json" "${S3[@]}" -o json
[ "$(jq -r .passed "$WORK/s3.json")" = true ] || fail "JSON: not passed: $(cat "$WORK/s3.json")"
[ "$(jq -r '.faults | length' "$WORK/s3.json")" = 0 ] || fail "JSON: faults on a good store"
verify_expect 0 "$WORK/s3-all.txt" "${S3[@]}" --all-sets
REV_S3=$(jq -r .latest_revision "$WORK/s3.json")
verify_expect 0 "$WORK/s3-rt.txt" "${S3[@]}" --restore-test --endpoints="$ETCD_EP"
grep "restore test: match: HashKV at revision $REV_S3" "$WORK/s3-rt.txt" >/dev/null ||
    fail "restore test on S3 did not match: $(cat "$WORK/s3-rt.txt")"
stop_pid "$ETCD_PID"
echo "ok: S3 store verified (revision $REV_S3), restore test matched"

# --- 2. Local: planted faults -------------------------------------------------------------------
start_etcd a "$WORK/a.etcd"
EP_A=$ETCD_EP
puts /a 20
GOOD=$WORK/good
SNAPLOG=$WORK/snap-a.log
local_deltas() { ls "$GOOD/v2" 2>/dev/null | grep -c '^Incr-' || true; }
backup_rounds local_deltas --storage-provider=Local --store-container="$GOOD"
verify_expect 0 "$WORK/good.txt" --store-container="$GOOD"
REV=$(sed -n 's/^result: verified up to revision \([0-9]*\).*/\1/p' "$WORK/good.txt")
[ -n "$REV" ] || fail "no verified revision: $(cat "$WORK/good.txt")"
# scratch dirs of a killed verification go at the next start, unless their owner still runs
mkdir -p "$WORK/vt/etcdbr-verify.AAAAAA" "$WORK/vt/etcdbr-verify.BBBBBB"
touch "$WORK/vt/etcdbr-verify.AAAAAA/owner.lock" "$WORK/vt/etcdbr-verify.AAAAAA/full.db" \
    "$WORK/vt/etcdbr-verify.BBBBBB/owner.lock"
flock "$WORK/vt/etcdbr-verify.BBBBBB/owner.lock" sleep 60 &
HOLDER=$!
PIDS+=("$HOLDER")
sleep 0.3
"$ETCDBR_BIN" verify --snapstore-temp-directory="$WORK/vt" --store-container="$GOOD" >/dev/null 2>&1 ||
    fail "verify with stale scratch dirs failed"
[ ! -e "$WORK/vt/etcdbr-verify.AAAAAA" ] || fail "a stale scratch dir was kept"
[ -e "$WORK/vt/etcdbr-verify.BBBBBB" ] || fail "a scratch dir whose owner runs was removed"
stop_pid "$HOLDER"
rm -rf "$WORK/vt/etcdbr-verify.BBBBBB"
echo "ok: stale scratch dirs removed, a live one kept"
mapfile -t DELTAS < <(ls "$GOOD/v2" | grep '^Incr-' | sort)
FULL=$(ls "$GOOD/v2" | grep '^Full-')
H1=$(ls "$GOOD/etcdbr/history")

# python helpers on a gzip'ed snapshot object: flip one byte of the payload (not the trailer) and
# re-gzip; or re-encode a delta with other values and a recomputed sha256 (docs/go-tool.md §4.2)
PY=$WORK/obj.py
cat >"$PY" <<'PYEOF'
import base64, gzip, hashlib, json, sys
op, path = sys.argv[1], sys.argv[2]
raw = gzip.decompress(open(path, "rb").read())
body, trailer = raw[:-32], raw[-32:]
if op == "flip":
    b = bytearray(body)
    i = len(b) // 2
    b[i] ^= 0x01
    out = bytes(b) + trailer
elif op == "swap":
    events = json.loads(body)
    n = 0
    for e in events:
        kv = e["etcdEvent"]["kv"]
        if e["etcdEvent"].get("type", 0) == 0:
            kv["value"] = base64.b64encode(b"swapped-" + str(n).encode()).decode()
            n += 1
    assert n > 0, "no put to swap"
    js = json.dumps(events, separators=(",", ":")).encode()
    out = js + hashlib.sha256(js).digest()
else:
    sys.exit("unknown op " + op)
open(path, "wb").write(gzip.compress(out))
PYEOF

plant() { # plant NAME: a fresh copy of the good store in $WORK/NAME, path in $P
    P=$WORK/$1
    rm -rf "$P"
    cp -a "$GOOD" "$P"
}

expect_fault() { # expect_fault NAME TEXT: verify of $WORK/NAME exits 1, the report holds TEXT
    local name=$1 text=$2
    verify_expect 1 "$WORK/$name.txt" --store-container="$WORK/$name"
    grep -F -- "$text" "$WORK/$name.txt" >/dev/null ||
        { cat "$WORK/$name.txt" >&2; fail "$name: the report does not say: $text"; }
    grep "result: FAILED" "$WORK/$name.txt" >/dev/null || fail "$name: no FAILED verdict"
    if grep "verified" "$WORK/$name.txt" >/dev/null; then fail "$name: says verified"; fi
    verify_expect 1 "$WORK/$name.json" --store-container="$WORK/$name" -o json
    [ "$(jq -r .passed "$WORK/$name.json")" = false ] || fail "$name: JSON says passed"
    echo "ok: $name: $text"
}

# a missing delta: the third one
plant missing
gone=${DELTAS[2]}
rm "$P/v2/$gone"
from=$(echo "$gone" | cut -d- -f2 | sed 's/^0*//')
to=$(echo "$gone" | cut -d- -f3 | sed 's/^0*//')
expect_fault missing "revisions $from-$to are missing between v2/${DELTAS[1]} and v2/${DELTAS[3]}"

# a bad hash inside a delta, and inside the full snapshot (decompression still succeeds)
plant badhash-delta
python3 "$PY" flip "$P/v2/${DELTAS[1]}"
expect_fault badhash-delta "bad hash in v2/${DELTAS[1]}"
plant badhash-full
python3 "$PY" flip "$P/v2/$FULL"
expect_fault badhash-full "bad hash in v2/$FULL"

# garbage under a .gz name
plant garbage
head -c 3000 /dev/urandom >"$P/v2/${DELTAS[0]}"
expect_fault garbage "undecodable v2/${DELTAS[0]}"

# an object of another history: a second cluster (more revisions, so its deltas fall inside the
# first store's latest set) backs up into its own store; one of its deltas and its tag planted
start_etcd b "$WORK/b.etcd"
puts /b 80
OTHER=$WORK/other
SNAPLOG=$WORK/snap-b.log
other_deltas() { ls "$OTHER/v2" 2>/dev/null | grep -c '^Incr-' || true; }
backup_rounds other_deltas --storage-provider=Local --store-container="$OTHER"
stop_pid "$ETCD_PID"
ETCD_EP=$EP_A
H2=$(ls "$OTHER/etcdbr/history")
[ "$H1" != "$H2" ] || fail "both stores have history $H1"
foreign=$(ls "$OTHER/v2" | grep '^Incr-' | sort | sed -n 2p)
plant otherhist
cp "$OTHER/v2/$foreign" "$P/v2/"
mkdir -p "$P/etcdbr/history/$H2"
cp "$OTHER/etcdbr/history/$H2/record.json" "$OTHER/etcdbr/history/$H2/$foreign" "$P/etcdbr/history/$H2/"
expect_fault otherhist "v2/$foreign belongs to history $H2 but the set of v2/$FULL is history $H1"

# --- 3. --restore-test against the live cluster --------------------------------------------------
LOCAL=(--store-container="$GOOD" --endpoints="$EP_A")
verify_expect 0 "$WORK/rt.txt" "${LOCAL[@]}" --restore-test
grep "restore test: match: HashKV at revision $REV:" "$WORK/rt.txt" >/dev/null ||
    fail "restore test did not match: $(cat "$WORK/rt.txt")"
echo "ok: restore test matches at revision $REV"

# the live cluster compacted below the set's revision: the scratch etcd is compacted the same way
ectl compact $((REV - 3)) >/dev/null
verify_expect 0 "$WORK/rt-compact.txt" "${LOCAL[@]}" --restore-test
grep "restore test: match: HashKV at revision $REV: .*compact revision $((REV - 3))" "$WORK/rt-compact.txt" >/dev/null ||
    fail "restore test after compaction: $(cat "$WORK/rt-compact.txt")"
grep "compacting the restored etcd to $((REV - 3))" "$WORK/rt-compact.txt.log" >/dev/null ||
    fail "the scratch etcd was not compacted: $(cat "$WORK/rt-compact.txt.log")"
echo "ok: restore test matches after a compaction at $((REV - 3))"

# the last delta's content swapped for another valid delta of the same revisions
plant swapped
last=${DELTAS[${#DELTAS[@]} - 1]}
python3 "$PY" swap "$P/v2/$last"
verify_expect 0 "$WORK/swapped-plain.txt" --store-container="$P"
verify_expect 1 "$WORK/swapped.txt" --store-container="$P" --endpoints="$EP_A" --restore-test
grep "HashKV at revision $REV differs" "$WORK/swapped.txt" >/dev/null ||
    fail "a swapped delta was not caught: $(cat "$WORK/swapped.txt")"
if grep "verified" "$WORK/swapped.txt" >/dev/null; then fail "swapped: says verified"; fi
echo "ok: a swapped delta ($last) passes the hashes but fails the restore test"

# unreachable: the restore runs, nothing is compared, and the report says so
verify_expect 0 "$WORK/rt-down.txt" --store-container="$GOOD" --restore-test \
    --endpoints="http://127.0.0.1:$(free_port)" --etcd-connection-timeout=3s
grep "restore test: not-compared: the restore succeeded" "$WORK/rt-down.txt" >/dev/null ||
    fail "unreachable cluster: $(cat "$WORK/rt-down.txt")"
grep "NOT compared" "$WORK/rt-down.txt" >/dev/null || fail "unreachable: no NOT compared verdict"
if grep "restore tested and matched" "$WORK/rt-down.txt" >/dev/null; then fail "unreachable: says matched"; fi
echo "ok: unreachable cluster: restore ran, not compared"

# compacted past the revision
puts /late 5
ectl compact "$(current_revision "$EP_A")" >/dev/null
verify_expect 0 "$WORK/rt-past.txt" "${LOCAL[@]}" --restore-test
grep "has compacted past revision $REV" "$WORK/rt-past.txt" >/dev/null ||
    fail "compacted past: $(cat "$WORK/rt-past.txt")"
grep "NOT compared" "$WORK/rt-past.txt" >/dev/null || fail "compacted past: no NOT compared verdict"
echo "ok: compacted past the revision: restore ran, not compared"

# --- 4. an encrypted store -------------------------------------------------------------------------
ENC_KEY=$WORK/keys
(
    umask 077
    printf 'k1 %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$ENC_KEY"
)
start_etcd e "$WORK/e.etcd"
EP_E=$ETCD_EP
puts /e 20
ENC=$WORK/enc
SNAPLOG=$WORK/snap-enc.log
enc_deltas() { ls "$ENC/v2" 2>/dev/null | grep -c '^Incr-' || true; }
backup_rounds enc_deltas --storage-provider=Local --store-container="$ENC" --encryption-key-file="$ENC_KEY"
[ "$(ls "$ENC/v2" | grep -c '\.enc')" = "$(ls "$ENC/v2" | wc -l)" ] || fail "not every object is encrypted: $(ls "$ENC/v2")"
verify_expect 0 "$WORK/enc.txt" --store-container="$ENC" --encryption-key-file="$ENC_KEY" --restore-test --endpoints="$EP_E"
grep "restore test: match" "$WORK/enc.txt" >/dev/null || fail "encrypted: restore test: $(cat "$WORK/enc.txt")"
"$ETCDBR_BIN" list --store-container="$ENC" -o json >"$WORK/enc-list.json" 2>/dev/null || fail "list of the encrypted store"
[ "$(jq -r '[.sets[] | (.full, .deltas[]) | .encrypted] | unique | .[]' "$WORK/enc-list.json")" = true ] ||
    fail "list does not say encrypted: $(jq -c '[.sets[] | (.full, .deltas[]) | .encrypted]' "$WORK/enc-list.json")"
EFULL=$(ls "$ENC/v2" | grep '^Full-')
verify_expect 1 "$WORK/enc-nokey.txt" --store-container="$ENC"
grep -F "v2/$EFULL" "$WORK/enc-nokey.txt" | grep "^FAULT" >/dev/null || fail "without the key: $(cat "$WORK/enc-nokey.txt")"
edelta=$(ls "$ENC/v2" | grep '^Incr-' | sort | sed -n 2p)
python3 - "$ENC/v2/$edelta" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 1
open(p, "wb").write(bytes(b))
PY
verify_expect 1 "$WORK/enc-flip.txt" --store-container="$ENC" --encryption-key-file="$ENC_KEY"
grep -F "undecodable v2/$edelta" "$WORK/enc-flip.txt" >/dev/null || fail "encrypted flip: $(cat "$WORK/enc-flip.txt")"
stop_pid "$ETCD_PID"
echo "ok: encrypted store: verified with the key, restore test matched; no key and a flipped byte reported"

echo "PASS: verify"
