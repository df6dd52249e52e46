#!/usr/bin/env bash
# A hostile or broken store server, on S3, ABS, GCS, Swift and OSS: a scripted FAKE
# (tests/servers/hostile_store_fake.py; no real store server can be told to misbehave like this)
# serves, for each provider:
#   - an endless listing (a new continuation token forever): `etcdbrctl list` ends with the time
#     budget's error (lowered to 8 s by ETCDBR_STORE_LIST_BUDGET_MS), naming store, prefix and
#     bound, in bounded RSS, log size and time; the same with the page cap (ETCDBR_STORE_LIST_MAX_PAGES);
#   - a repeated continuation token (Swift: the same last name): a clear error at once;
#   - 200 KiB of response headers: refused (the 64 KiB header bound), not buffered;
#   - a 17 MiB listing page: refused (the 16 MiB bound of a listing body);
#   - 200,000 objects that are not snapshots: the listing succeeds and logs ONE line with their
#     number and the first name (not one line each), in a small log;
#   - (S3) 51,000 snapshot objects: refused at the cap of one listing (50,000), in bounded RSS;
#   - ETags of 300 characters with " & < in them (S3 and OSS: on every part of a multipart upload,
#     and the completion must send each back intact; ABS, GCS, Swift: on reads): success;
#     ETags of 20,000 characters and of 1 MiB: a clear error, no crash (ASan);
#   - (Swift) an auth token of 1 MiB: a clear error.
# Prints the RSS and time under the endless listing ("figure:" lines).
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
PUT=$BUILD/store_put
[ -x "$PUT" ] || fail "store_put not built at $PUT"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || fail "python3 not found (needed by the fake)"
make_workdir
export ETCDBR_STORE_RETRY_BASE_MS=20
# ASan keeps freed memory in a quarantine (256 MiB by default), which would show as RSS: keep it
# small so the figures measure etcdbr's own memory
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=8"
BUDGET_MS=8000
RSS_MAX_KB=$((200 * 1024))
LOG_MAX=65536

HF_PID=""
# start_fake PROVIDER MODE: starts the fake, sets HF_EP and HF_PID (the previous one stopped).
start_fake() {
    local i
    if [ -n "$HF_PID" ]; then stop_pid "$HF_PID"; fi
    : >"$WORK/fake.out"
    : >"$WORK/fake.pages"
    "$PY" "$ETCDBR_SOURCE_DIR/tests/servers/hostile_store_fake.py" --provider "$1" --mode "$2" \
        --count-file "$WORK/fake.pages" >"$WORK/fake.out" 2>&1 &
    HF_PID=$!
    PIDS+=("$HF_PID")
    for i in $(seq 1 400); do
        if grep -q "^listening " "$WORK/fake.out"; then
            HF_EP=http://$(sed -n 's/^listening //p' "$WORK/fake.out")
            return 0
        fi
        kill -0 "$HF_PID" 2>/dev/null || fail "hostile_store_fake exited: $(cat "$WORK/fake.out")"
        sleep 0.05
    done
    fail "hostile_store_fake not ready: $(cat "$WORK/fake.out")"
}

# store_args PROVIDER: the etcdbrctl flags (STORE_ARGS) and the credential files (env) for HF_EP.
store_args() {
    unset AWS_APPLICATION_CREDENTIALS_JSON AZURE_APPLICATION_CREDENTIALS_JSON \
        GOOGLE_APPLICATION_CREDENTIALS OPENSTACK_APPLICATION_CREDENTIALS_JSON \
        ALICLOUD_APPLICATION_CREDENTIALS_JSON
    STORE_ARGS=(--store-container=b --store-prefix=etcd-main)
    PUT_ARGS=(--container b)
    case $1 in
    s3)
        printf '{"region":"us-east-1","accessKeyID":"AKIAFAKE","secretAccessKey":"fake","s3ForcePathStyle":true}' >"$WORK/s3.json"
        export AWS_APPLICATION_CREDENTIALS_JSON=$WORK/s3.json
        STORE_ARGS+=(--storage-provider=S3 --store-endpoint-override="$HF_EP")
        PUT_ARGS+=(--provider S3 --endpoint "$HF_EP") ;;
    abs)
        printf '{"storageAccount":"devstoreaccount1","storageKey":"%s"}' "$(printf 'fake-key' | base64)" >"$WORK/abs.json"
        export AZURE_APPLICATION_CREDENTIALS_JSON=$WORK/abs.json
        STORE_ARGS+=(--storage-provider=ABS --store-endpoint-override="$HF_EP")
        PUT_ARGS+=(--provider ABS --endpoint "$HF_EP") ;;
    gcs)
        STORE_ARGS+=(--storage-provider=GCS --store-endpoint-override="$HF_EP")
        PUT_ARGS+=(--provider GCS --endpoint "$HF_EP") ;;
    swift)
        printf '{"authURL":"%s/auth/v1.0","username":"test:tester","password":"testing","tenantName":"test"}' "$HF_EP" >"$WORK/swift.json"
        export OPENSTACK_APPLICATION_CREDENTIALS_JSON=$WORK/swift.json
        STORE_ARGS+=(--storage-provider=Swift)
        PUT_ARGS+=(--provider Swift) ;;
    oss)
        printf '{"storageEndpoint":"%s","accessKeyID":"LTAIfake","accessKeySecret":"fake"}' "$HF_EP" >"$WORK/oss.json"
        export ALICLOUD_APPLICATION_CREDENTIALS_JSON=$WORK/oss.json
        STORE_ARGS+=(--storage-provider=OSS)
        PUT_ARGS+=(--provider OSS) ;;
    esac
}

# measured LOG CMD...: runs CMD (stderr to LOG) under a 120 s watchdog; sets RC, RSS_KB (peak RSS,
# from /usr/bin/time -v, else polled from /proc), SECS and LOG_BYTES.
measured() {
    local log=$1 t0 pid hwm
    shift
    t0=$(date +%s.%N)
    RSS_KB=0
    if [ -x /usr/bin/time ]; then
        RC=0
        timeout 120 /usr/bin/time -v -o "$log.time" "$@" >"$log.out" 2>"$log" || RC=$?
        RSS_KB=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log.time")
    else
        timeout 120 "$@" >"$log.out" 2>"$log" &
        pid=$!
        while kill -0 "$pid" 2>/dev/null; do
            hwm=$(sed -n 's/^VmHWM:\s*\([0-9]*\).*/\1/p' /proc/"$(pgrep -P "$pid" | head -1)"/status 2>/dev/null || true)
            [ -n "$hwm" ] && [ "$hwm" -gt "$RSS_KB" ] && RSS_KB=$hwm
            sleep 0.1
        done
        RC=0
        wait "$pid" || RC=$?
    fi
    SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    LOG_BYTES=$(wc -c <"$log")
    if grep -q "AddressSanitizer\|runtime error" "$log"; then cat "$log" >&2; fail "$log: sanitizer report"; fi
    [ "$RC" != 124 ] || fail "$log: still running after 120 s: $(tail -3 "$log")"
}

# expect_fail P CASE REGEX: the last run failed with a message matching REGEX, in a small log.
expect_fail() {
    [ "$RC" != 0 ] || fail "$1 $2: accepted (exit 0); log: $(tail -3 "$WORK/$1-$2.log")"
    grep -Eq "$3" "$WORK/$1-$2.log" || fail "$1 $2: unclear error (want /$3/): $(tail -3 "$WORK/$1-$2.log")"
    [ "$LOG_BYTES" -lt "$LOG_MAX" ] || fail "$1 $2: $LOG_BYTES bytes of log"
    echo "ok $1 $2: $(grep -Eo "$3.{0,60}" "$WORK/$1-$2.log" | head -1)"
}

list_case() { # PROVIDER CASE MODE [ENV=V...]: etcdbrctl list against the fake in MODE
    local p=$1 c=$2 m=$3
    shift 3
    start_fake "$p" "$m"
    store_args "$p"
    measured "$WORK/$p-$c.log" env "$@" "$ETCDBR_BIN" list "${STORE_ARGS[@]}"
}

for p in s3 abs gcs swift oss; do
    # the endless listing: the time budget ends it, RSS and log stay small
    list_case $p endless endless ETCDBR_STORE_LIST_BUDGET_MS=$BUDGET_MS
    expect_fail $p endless "list etcd-main/v2/: not finished after [0-9]+ s and [0-9]+ pages \(the listing time budget is 8 s\)"
    pages=$(grep -c "v2/" "$WORK/fake.pages" || true)
    [ "$RSS_KB" -lt "$RSS_MAX_KB" ] || fail "$p endless: peak RSS $RSS_KB KiB"
    awk -v s="$SECS" 'BEGIN { exit !(s < 60) }' || fail "$p endless: $SECS s"
    echo "figure: $p endless listing: peak RSS $((RSS_KB / 1024)) MiB, $SECS s, $pages pages, $LOG_BYTES bytes of log"
    # the same with the page cap
    list_case $p pagecap endless ETCDBR_STORE_LIST_MAX_PAGES=300
    expect_fail $p pagecap "list etcd-main/v2/: more than 300 pages \(the listing page cap\)"
    list_case $p repeat repeat
    expect_fail $p repeat "list etcd-main/v2/:? (page [0-9]+ repeats a continuation token|\(page [0-9]+\): NextMarker does not advance)"
    list_case $p bigheaders bigheaders
    expect_fail $p bigheaders "response refused: the headers are larger than 64 KiB"
    list_case $p bigbody bigbody
    expect_fail $p bigbody "response larger than [0-9]+ bytes"
    # 200,000 foreign keys: success, one line for all of them
    list_case $p foreign foreign
    [ "$RC" = 0 ] || fail "$p foreign: exit $RC: $(tail -3 "$WORK/$p-foreign.log")"
    n=$(grep -c "are not snapshots" "$WORK/$p-foreign.log" || true)
    [ "$n" = 1 ] || fail "$p foreign: $n lines about objects that are not snapshots (want 1)"
    grep -q "200000 objects under etcd-main/v2/ are not snapshots and are skipped, e.g. etcd-main/v2/junk-000000000-0000" \
        "$WORK/$p-foreign.log" || fail "$p foreign: the line does not count them: $(grep 'not snapshots' "$WORK/$p-foreign.log")"
    [ "$LOG_BYTES" -lt "$LOG_MAX" ] || fail "$p foreign: $LOG_BYTES bytes of log"
    [ "$RSS_KB" -lt "$RSS_MAX_KB" ] || fail "$p foreign: peak RSS $RSS_KB KiB"
    echo "ok $p foreign: 200000 objects, one log line, $LOG_BYTES bytes of log, peak RSS $((RSS_KB / 1024)) MiB"
done

# more snapshot objects than one listing accepts (STORE_LIST_MAX_SNAPSHOTS, driver-independent)
list_case s3 snapshots snapshots
expect_fail s3 snapshots "more than 50000 snapshots under etcd-main/v2/ \(the cap of one listing\)"
[ "$RSS_KB" -lt $((300 * 1024)) ] || fail "s3 snapshots: peak RSS $RSS_KB KiB"
echo "figure: 51,000 snapshot objects listed: refused at the cap, peak RSS $((RSS_KB / 1024)) MiB, $SECS s"

# ETags: S3 and OSS on multipart parts (completion sends them back), the others on reads
head -c 200000 /dev/urandom >"$WORK/obj"
etag_case() { # PROVIDER LEN: runs the ETag operation against the fake answering ETags of LEN chars
    local p=$1 n=$2
    start_fake "$p" "etag=$n"
    store_args "$p"
    if [ "$p" = s3 ] || [ "$p" = oss ]; then
        measured "$WORK/$p-etag$n.log" "$PUT" "${PUT_ARGS[@]}" --min-chunk 65536 --parallel 2 \
            put etcd-main/v2/obj "$WORK/obj"
    else
        measured "$WORK/$p-etag$n.log" "$PUT" "${PUT_ARGS[@]}" get etcd-main/v2/obj "$WORK/$p-got"
    fi
}
for p in s3 abs gcs swift oss; do
    etag_case $p 300
    [ "$RC" = 0 ] || fail "$p: a 300-character ETag: exit $RC: $(tail -3 "$WORK/$p-etag300.log")"
    echo "ok $p etag300: accepted and sent back intact"
    etag_case $p 20000
    expect_fail $p etag20000 "a header line is longer than 16 KiB"
    etag_case $p 1048576
    expect_fail $p etag1048576 "[Hh]eader"
done
start_fake swift authtoken=1048576
store_args swift
measured "$WORK/swift-authtoken.log" "$ETCDBR_BIN" list "${STORE_ARGS[@]}"
expect_fail swift authtoken "[Hh]eader"

echo "PASS: listings end, responses are bounded, ETags are kept intact on S3, ABS, GCS, Swift and OSS"
