#!/usr/bin/env bash
# Every wait ends on SIGTERM (issue 17 item 5): `etcdbrctl snapshot` and `server` end within 1 s
# of SIGTERM, exit non-zero when the stop left work undone (docs/exit-codes.md), and store nothing
# half-written. Against a real etcd, with the store or the etcd endpoint played by
# tests/servers/stall_store_fake.py (a scripted fake: no real server stalls on purpose):
#  (a) an unreachable store (nothing listens): SIGTERM during the retry backoff of the listing;
#  (b) a store that accepts and never answers a listing;
#  (c) a store that lists but never answers an upload (the first full snapshot);
#  (d) an etcd endpoint that accepts and never answers (the etcd client's wait);
#  (e) `server` waiting for the lock on a data dir's db (held by another process);
#  (f) a full snapshot of a ~150 MB db under way into a Local store (moving, not stalled): it
#      is stopped, nothing is stored, and the exit is non-zero (the first full was owed).
# Each case prints "seconds after SIGTERM". In (b) and (d) the request is logged once it has
# waited 5 s, naming the store or etcd endpoint and the request.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 20); do ectl put "/k/a$i" "v$i" >/dev/null; done
printf '{"region":"us-east-1","accessKeyID":"a","secretAccessKey":"s","s3ForcePathStyle":true}\n' \
    >"$WORK/creds.json"
export AWS_APPLICATION_CREDENTIALS_JSON=$WORK/creds.json
LIMIT=${SIGTERM_LIMIT:-1.0} # a larger limit only to measure an old build

# start_fake MODE: sets FAKE_EP, FAKE_LOG
start_fake() {
    FAKE_LOG=$WORK/fake-$1.log
    rm -f "$FAKE_LOG.port"
    python3 "$ETCDBR_SOURCE_DIR/tests/servers/stall_store_fake.py" --stall "$1" \
        --port-file "$FAKE_LOG.port" --log "$FAKE_LOG" >>"$FAKE_LOG.out" 2>&1 &
    PIDS+=($!)
    local i
    for i in $(seq 1 200); do
        [ -s "$FAKE_LOG.port" ] && { FAKE_EP=http://127.0.0.1:$(cat "$FAKE_LOG.port"); return 0; }
        sleep 0.05
    done
    fail "stall_store_fake not ready: $(cat "$FAKE_LOG.out")"
}

# snap NAME STORE_EP ETCD_EP: the snapshot command in the background on S3 at STORE_EP
snap() {
    "$ETCDBR_BIN" snapshot --endpoints="$3" --storage-provider=S3 --store-container=b \
        --store-prefix=p --store-endpoint-override="$2" --snapstore-temp-directory="$WORK/tmp-$1" \
        --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s \
        --etcd-connection-timeout=30s >"$WORK/$1.log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
}

# term NAME PID WANT_RC: SIGTERM, wait; fails unless it exits within LIMIT s with WANT_RC
# ("nonzero" for any failure code)
term() {
    local name=$1 pid=$2 want=$3 rc=0 t0 t1 secs
    kill -0 "$pid" 2>/dev/null || fail "$name: exited before SIGTERM: $(tail -3 "$WORK/$name.log")"
    t0=$(date +%s.%N)
    kill -TERM "$pid"
    wait "$pid" || rc=$?
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    echo "$name: exit $rc, $secs seconds after SIGTERM"
    awk -v s="$secs" -v l="$LIMIT" 'BEGIN { exit !(s <= l) }' ||
        fail "$name: exited $secs s after SIGTERM (limit $LIMIT s): $(tail -5 "$WORK/$name.log")"
    if [ "$want" = nonzero ]; then
        [ "$rc" != 0 ] || fail "$name: exit 0 although the stop left the snapshot undone"
    else
        [ "$rc" = "$want" ] || fail "$name: exit $rc, want $want: $(tail -3 "$WORK/$name.log")"
    fi
}

# (a) nothing listens on the store's port: the listing is retried with backoff
dead=$(free_port)
snap unreachable "http://127.0.0.1:$dead" "$ETCD_EP"
wait_for_log "$WORK/unreachable.log" "retrying (try 2 of 6)" 30
term unreachable "$SNAP_PID" 1
grep -q "level=error.*stopping (SIGTERM/SIGINT): not retrying" "$WORK/unreachable.log" ||
    fail "(a) the error does not say the retries were stopped: $(grep level=error "$WORK/unreachable.log")"

# (b) the store accepts the listing and never answers
start_fake all
snap stalled-list "$FAKE_EP" "$ETCD_EP"
wait_for_log "$FAKE_LOG" "stall GET" 30
# a wait over 5 s says what it waits for, once
wait_for_log "$WORK/stalled-list.log" "level=warn.*still waiting for S3 to answer GET $FAKE_EP/b?list-type=2" 30
term stalled-list "$SNAP_PID" 1
grep -q "level=error.*stopping (SIGTERM/SIGINT)" "$WORK/stalled-list.log" ||
    fail "(b) the error does not say the listing was stopped: $(grep level=error "$WORK/stalled-list.log")"

# (c) the store lists (empty) but never answers the full snapshot's upload
start_fake put
snap stalled-put "$FAKE_EP" "$ETCD_EP"
wait_for_log "$FAKE_LOG" "stall P[UO]" 30
term stalled-put "$SNAP_PID" nonzero
grep -q "full snapshot Full-.* stored" "$WORK/stalled-put.log" && fail "(c) a full snapshot is reported stored"
grep -q "level=error" "$WORK/stalled-put.log" || fail "(c) no error logged"

# (d) the etcd endpoint accepts and never answers (the store is a real directory)
start_fake tcp
"$ETCDBR_BIN" snapshot --endpoints="$FAKE_EP" --storage-provider=Local \
    --store-container="$WORK/local-store" --snapstore-temp-directory="$WORK/tmp-etcd" \
    --schedule='0 0 1 1 *' --garbage-collection-period=0s --etcd-connection-timeout=30s \
    >"$WORK/stalled-etcd.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$FAKE_LOG" "stall connection" 30
wait_for_log "$WORK/stalled-etcd.log" "level=warn.*still waiting for etcd $FAKE_EP /etcdserverpb\.[A-Za-z]*/[A-Za-z]* to answer" 30
term stalled-etcd "$SNAP_PID" nonzero
[ -z "$(ls "$WORK/local-store/v2" 2>/dev/null)" ] || fail "(d) objects stored without etcd: $(ls "$WORK/local-store/v2")"

# (f) a full snapshot under way (its bytes moving) when SIGTERM comes: ~150 MB of values, each
# 768 KiB of random bytes in base64 (etcdctl reads a value from stdin)
for i in $(seq 1 150); do head -c 786432 /dev/urandom | base64 -w0 | ectl put "/big/$i" >/dev/null; done
"$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=Local \
    --store-container="$WORK/big-store" --snapstore-temp-directory="$WORK/tmp-big" \
    --schedule='0 0 1 1 *' --garbage-collection-period=0s >"$WORK/big-full.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
# the one-pass snapshot streams into the store's temp file (v2/.etcdbr-tmp-*)
for i in $(seq 1 300); do
    ls -A "$WORK/big-store/v2" 2>/dev/null | grep -q '^\.etcdbr-tmp-' && break
    sleep 0.02
done
ls -A "$WORK/big-store/v2" 2>/dev/null | grep -q '^\.etcdbr-tmp-' || fail "(f) the full snapshot did not start: $(tail -3 "$WORK/big-full.log")"
term big-full "$SNAP_PID" nonzero
[ -z "$(ls -A "$WORK/big-store/v2" 2>/dev/null | grep '^\.etcdbr-tmp-')" ] ||
    fail "(f) the aborted full snapshot left its temp file: $(ls -A "$WORK/big-store/v2")"
grep -q "full snapshot .*stopped by a signal" "$WORK/big-full.log" ||
    fail "(f) the log does not say the full snapshot was stopped: $(grep level= "$WORK/big-full.log" | tail -3)"
[ -z "$(ls "$WORK/big-store/v2" 2>/dev/null | grep '^Full-')" ] ||
    fail "(f) a full snapshot was stored after SIGTERM: $(ls "$WORK/big-store/v2")"

# (e) server: the initialization waits for the db lock held by another process
ectl snapshot save "$WORK/db.snap" >/dev/null 2>&1
stop_pid "$ETCD_PID"
db=$WORK/m1.etcd/member/snap/db
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "rb"); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(300)' \
    "$db" "$WORK/locked" &
PIDS+=($!)
for i in $(seq 1 50); do [ -e "$WORK/locked" ] && break; sleep 0.1; done
[ -e "$WORK/locked" ] || fail "(e) could not lock $db"
P=$(free_port)
"$ETCDBR_BIN" server --endpoints="http://127.0.0.1:$dead" --snapstore-temp-directory="$WORK/snaptmp" \
    --server-port="$P" --data-dir="$WORK/m1.etcd" --name=m1 --store-container="$WORK/srv-store" \
    --initial-cluster=m1=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" --delta-snapshot-period=1s \
    --schedule='0 0 1 1 *' --garbage-collection-period=0s >"$WORK/lock-wait.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
for i in $(seq 1 100); do
    curl -s -o /dev/null "http://127.0.0.1:$P/initialization/status" && break
    sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$P/initialization/start?mode=full"
wait_for_log "$WORK/lock-wait.log" "waiting up to 120 s for the lock on $db" 30
term lock-wait "$SERVER_PID" 0
grep -q "stopping (SIGTERM/SIGINT) while waiting for the lock" "$WORK/lock-wait.log" ||
    fail "(e) the log does not say the lock wait was stopped: $(tail -5 "$WORK/lock-wait.log")"
echo "PASS: snapshot and server end within $LIMIT s of SIGTERM"
