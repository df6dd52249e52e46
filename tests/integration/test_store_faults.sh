#!/usr/bin/env bash
# Retries and resumed downloads against real store servers behind a fault-injecting proxy
# (tests/servers/fault_proxy.py): S3 on s3rver and ABS on azurite each get 503s on uploads, a 500
# on a read and downloads cut mid-body; the round trip must still be exact, every retry logged
# with its cause, every cut download resumed at the byte reached (not restarted). S3 again with
# every third request failing and a cut download: exact, every retry logged. Then a store
# that fails every upload of one part of a multipart upload: the snapshotter gives up after the
# bounded tries, says so at level=error with the status and request, aborts the upload, exits 1
# and stores nothing.
source "$(dirname "$0")/lib.sh"
make_workdir
export ETCDBR_STORE_RETRY_BASE_MS=20 # same number of tries, shorter backoff
FAULTS=(--status PUT:503:3 --status GET:500:1 --cut GET:1048576:2)

check_faults() { # LABEL DIR
    local label=$1 dir=$2 n
    n=$(grep -c "^status 503 PUT" "$PROXY_LOG" || true)
    [ "$n" = 3 ] || fail "$label: $n of 3 injected 503s on PUT fired"
    [ "$(grep -c "^cut GET" "$PROXY_LOG" || true)" = 2 ] || fail "$label: the 2 download cuts did not fire: $(cat "$PROXY_LOG")"
    grep -q "retrying (try 2 of 6) in [0-9]* ms after: .*HTTP 503" "$dir/snap.log" ||
        fail "$label: no retry after a 503 logged: $(grep -i retr "$dir/snap.log" | head -3)"
    # the second cut is of the resumed read: it starts at the byte the first one reached
    local first second
    first=$(sed -n 's/^cut GET .* after 1048576 of \([0-9]*\) bytes$/\1/p' "$PROXY_LOG" | sed -n 1p)
    second=$(sed -n 's/^cut GET .* after 1048576 of \([0-9]*\) bytes$/\1/p' "$PROXY_LOG" | sed -n 2p)
    [ "$second" = "$((first - 1048576))" ] ||
        fail "$label: the download after a cut at byte 1048576 of $first asked for $second bytes, not the rest"
    grep -qi "resum" "$dir/restore.log" || fail "$label: a cut download was not resumed: $(tail -5 "$dir/restore.log")"
    echo "$label: $(grep -c "^status\|^cut" "$PROXY_LOG") faults injected, $(grep -c "retrying" "$dir/snap.log") retries while backing up, $(grep -ci "resum" "$dir/restore.log") resumed downloads"
}

start_s3rver faults
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
start_fault_proxy "$S3_ENDPOINT" "${FAULTS[@]}"
store_round_trip s3-faults --storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=etcd \
    --store-endpoint-override="$PROXY_EP" --min-chunk-size=5242880 --max-parallel-chunk-uploads=2
check_faults S3 "$WORK/rt-s3-faults"
# the restore read the full snapshot once: a restart of a cut download would read > its size
full_bytes=$(find "$WORK/s3rver/$S3_BUCKET/etcd/v2" -name 'Full-*._S3rver_object' -printf '%s')
grep -q "after 1048576 of $full_bytes bytes" "$PROXY_LOG" || fail "S3: the cut was not on the full snapshot ($full_bytes bytes): $(cat "$PROXY_LOG")"
stop_pid "$PROXY_PID"

# every third request of any kind fails, and a download is cut mid-body: still exact
start_fault_proxy "$S3_ENDPOINT" --every 3:503 --cut GET:1048576:1
store_round_trip s3-every-third --storage-provider=S3 --store-container="$S3_BUCKET" \
    --store-prefix=third --store-endpoint-override="$PROXY_EP" --min-chunk-size=5242880 \
    --max-parallel-chunk-uploads=2
n=$(grep -c "^status 503" "$PROXY_LOG" || true)
# how many requests a round trip makes depends on how many deltas its timing gave: the 503s must
# be requests 3, 6, ..., 3n, none skipped, and enough of them to cover every kind of request
[ "$n" -ge 10 ] || fail "every third request: only $n failures injected"
[ "$(sed -n 's/^status 503 .* (request \([0-9]*\))$/\1/p' "$PROXY_LOG" | tr '\n' ' ')" = "$(seq -s ' ' 3 3 $((3 * n))) " ] ||
    fail "every third request: the 503s were not requests 3, 6, ..., $((3 * n)): $(grep '^status 503' "$PROXY_LOG" | head -5)"
grep -q "retrying (try 2 of 6) in [0-9]* ms after: .*HTTP 503" "$WORK/rt-s3-every-third/snap.log" ||
    fail "every third request: the backup's log does not say what was retried"
grep -q "retrying (try 2 of 6) in [0-9]* ms after: .*HTTP 503" "$WORK/rt-s3-every-third/restore.log" ||
    fail "every third request: the restore's log does not say what was retried"
echo "every third request failing: $n failures, $(grep -c retrying "$WORK/rt-s3-every-third/snap.log") retries while backing up, $(grep -c retrying "$WORK/rt-s3-every-third/restore.log") while restoring"
stop_pid "$PROXY_PID"

start_azurite faults
export AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON
start_fault_proxy "$AZ_ENDPOINT" "${FAULTS[@]}"
store_round_trip abs-faults --storage-provider=ABS --store-container="$AZ_CONTAINER" \
    --store-prefix=etcd --store-endpoint-override="$PROXY_EP" --min-chunk-size=5242880 \
    --max-parallel-chunk-uploads=2
check_faults ABS "$WORK/rt-abs-faults"
stop_pid "$PROXY_PID"

# every upload of part 2 of a multipart upload fails: bounded tries, a clear error, the upload
# aborted, nothing stored (s3rver does not implement abort: the proxy's log shows it was sent)
start_fault_proxy "$S3_ENDPOINT" --status PUT:500:100000:partNumber=2
start_etcd dead "$WORK/dead.etcd"
for i in $(seq 1 9); do
    head -c 786432 /dev/urandom | base64 -w0 >"$WORK/big"
    ectl put "/k/big/$i" <"$WORK/big" >/dev/null
done
rc=0
timeout 300 "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=S3 \
    --store-container="$S3_BUCKET" --store-prefix=dead --store-endpoint-override="$PROXY_EP" --min-chunk-size=5242880 \
    --snapstore-temp-directory="$WORK/dead.tmp" --garbage-collection-period=0s \
    --delta-snapshot-period=1s >"$WORK/dead.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "part 2 failing: snapshot exit $rc, want 1: $(tail -3 "$WORK/dead.log")"
grep "level=error" "$WORK/dead.log" | head -1 | grep "HTTP 500.*InjectedFault" >/dev/null ||
    fail "the error does not give the status and the store's code: $(grep level=error "$WORK/dead.log" | head -1)"
grep "level=error" "$WORK/dead.log" | head -1 | grep "$PROXY_EP/$S3_BUCKET/dead/" >/dev/null ||
    fail "the error does not name the request: $(grep level=error "$WORK/dead.log" | head -1)"
grep -q "retrying (try 6 of 6)" "$WORK/dead.log" || fail "a failing request was not tried 6 times"
if grep -q "retrying (try 7" "$WORK/dead.log"; then fail "a request was tried more than 6 times"; fi
if grep -q "full snapshot Full-.* stored" "$WORK/dead.log"; then fail "a full snapshot is reported stored"; fi
grep -q "^req DELETE /$S3_BUCKET/dead/v2/Full-[^ ]*uploadId=" "$PROXY_LOG" ||
    fail "the failed multipart upload was not aborted: $(grep -v '^status' "$PROXY_LOG" | tail -5)"
# the tag written before the object (docs/store-history.md) is removed with the failed upload
[ -z "$(find "$WORK/s3rver/$S3_BUCKET/dead/etcdbr/history" -name 'Full-*._S3rver_object')" ] ||
    fail "the failed full snapshot's history tag was left behind"
[ -z "$(find "$WORK/s3rver/$S3_BUCKET/dead/v2" -name '*._S3rver_object' 2>/dev/null)" ] ||
    fail "a snapshot was stored although part 2 failed: $(find "$WORK/s3rver/$S3_BUCKET/dead/v2")"
echo "part 2 failing: $(grep -c retrying "$WORK/dead.log") retries, then: $(grep level=error "$WORK/dead.log" | head -1 | cut -c1-200)"
echo "PASS: store faults"
