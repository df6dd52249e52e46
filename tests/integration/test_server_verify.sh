#!/usr/bin/env bash
# The server's scheduled verification (issue 9 item 2): `server --verify-schedule='@every 2s'
# --verify-restore-test` against a real etcd, backing up into a Local store while leader:
#  1. the verification passes and /metrics says so: etcdbr_verify_success 1, the latest set's
#     revision in etcdbr_verify_last_revision, etcdbr_verify_restore_test_match 1 (HashKV of the
#     restored latest set equals etcd's), etcdbr_verify_last_timestamp_seconds set;
#  2. a byte flipped inside a stored delta (re-gzipped: a bad hash) makes the next verification
#     fail: etcdbr_verify_success 0, etcdbr_verify_faults >= 1, an error line naming the object;
#     etcdbr_verify_last_revision keeps the last passing revision;
#  3. SIGTERM stops the server (exit 0) with no scratch etcd running and no scratch dir left.
source "$(dirname "$0")/lib.sh"
make_workdir
SEED=${ETCDBR_TEST_SEED:-$RANDOM}
RANDOM=$SEED
echo "seed: $SEED (ETCDBR_TEST_SEED=$SEED to replay)"
start_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 30); do ectl put "/k/$i" "v-$RANDOM" >/dev/null; done
PORT=$(free_port)
STORE=$WORK/store
"$ETCDBR_BIN" server --endpoints="$ETCD_EP" --storage-provider=Local --store-container="$STORE" \
    --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" --data-dir="$WORK/m1.etcd" \
    --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=2s \
    --garbage-collection-period=0s --verify-schedule='@every 2s' --verify-restore-test \
    >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_for_log "$WORK/server.log" "store verification scheduled" 30
wait_for_log "$WORK/server.log" "snapshotter started" 30

metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
wait_metric() { # wait_metric NAME VALUE [seconds]
    local i
    for i in $(seq 1 $((${3:-40} * 5))); do
        [ "$(metric "$1")" = "$2" ] && return 0
        sleep 0.2
    done
    tail -30 "$WORK/server.log" >&2
    fail "$1 is $(metric "$1"), not $2"
}

# 1. writes go on; deltas are stored; verification passes with a matching restore test
for r in 1 2 3; do
    for i in $(seq 1 5); do ectl put "/r$r/$i" "v-$RANDOM" >/dev/null; done
    sleep 1.1
done
wait_for_log "$WORK/server.log" "delta snapshot" 30
wait_metric etcdbr_verify_success 1
wait_metric etcdbr_verify_restore_test_match 1
grep "scheduled verification passed: .*restore test match: HashKV at revision" "$WORK/server.log" >/dev/null ||
    fail "no passing verification with a matching restore test in the log"
REV=$(metric etcdbr_verify_last_revision)
[ "${REV:-0}" -gt 30 ] || fail "etcdbr_verify_last_revision is $REV"
awk -v t="$(metric etcdbr_verify_last_timestamp_seconds)" -v now="$(date +%s)" \
    'BEGIN { exit !(t + 0 > now - 60 && t + 0 <= now + 1) }' ||
    fail "etcdbr_verify_last_timestamp_seconds is $(metric etcdbr_verify_last_timestamp_seconds)"
[ "$(metric etcdbr_verify_faults)" = 0 ] || fail "faults on a good store"
echo "ok: scheduled verification passed at revision $REV with a matching restore test"

# 2. a flipped byte in a stored delta
delta=$(ls "$STORE/v2" | grep '^Incr-' | sort | head -1)
python3 - "$STORE/v2/$delta" <<'PY'
import gzip, sys
p = sys.argv[1]
raw = bytearray(gzip.decompress(open(p, "rb").read()))
raw[(len(raw) - 32) // 2] ^= 1
open(p + ".tmp", "wb").write(gzip.compress(bytes(raw)))
PY
mv "$STORE/v2/$delta.tmp" "$STORE/v2/$delta"
wait_metric etcdbr_verify_success 0
[ "$(metric etcdbr_verify_faults)" -ge 1 ] || fail "etcdbr_verify_faults is $(metric etcdbr_verify_faults)"
grep "verify fault: bad hash in v2/$delta" "$WORK/server.log" >/dev/null ||
    fail "no error line naming v2/$delta: $(grep -i verif "$WORK/server.log" | tail -5)"
LAST=$(metric etcdbr_verify_last_revision)
[ "$LAST" -ge "$REV" ] || fail "etcdbr_verify_last_revision went back: $LAST < $REV"
echo "ok: a bad hash in $delta fails the scheduled verification (metrics and log)"

# 3. a clean stop
kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" = 0 ] || fail "server exited $rc"
if ps -eo args | grep -- "--name etcdbr-verify" | grep -v grep >/dev/null; then
    fail "a scratch etcd is still running"
fi
if ls "$WORK/snaptmp" | grep etcdbr-verify >/dev/null; then fail "scratch dir left: $(ls "$WORK/snaptmp")"; fi
echo "PASS: server verify schedule"
