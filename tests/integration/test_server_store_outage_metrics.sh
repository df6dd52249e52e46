#!/usr/bin/env bash
# A store outage shows on /metrics within a few delta periods, not when the store layer's retries
# give up (issue "operators' day one", item 5). `etcdbrctl server` on a real etcd and a real S3
# (s3rver), --delta-snapshot-period=1s:
#  1. with the store layer's default retries (a request is retried for up to ~30 s): s3rver is
#     stopped (by its PID), keys are written, and within 6 s (a few delta periods, well under
#     the retry time) etcdbr_snapshot_rpo_seconds rises above the delta period and keeps rising,
#     etcdbr_store_request_failures_total{provider="S3",class="connect"} has increased, and
#     etcdbr_last_error_timestamp_seconds{operation="delta_snapshot"} is set; s3rver restarted on
#     the same port and data dir, the keys reach the store and the RPO drops under 3 s;
#  2. a server whose store requests give up at once (ETCDBR_STORE_RETRY_BASE_MS=1): with s3rver
#     stopped, a requested full snapshot and the next delta fail, and etcdbr_snapshotter_failure
#     counts them as error="store", not "io"; the full's time stamp is set; after the store is
#     back, the RPO drops again.
source "$(dirname "$0")/lib.sh"
make_workdir
start_s3rver outage
S3_PORT=${S3_ENDPOINT##*:}
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP

run_server() { # LOG PORT: the server on S3 (extra environment from the caller's exports)
    AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON "$ETCDBR_BIN" server --endpoints="$EP" \
        --storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=o \
        --store-endpoint-override="$S3_ENDPOINT" --snapstore-temp-directory="$WORK/snaptmp" \
        --server-port="$2" --data-dir="$WORK/m1.etcd" --name=m1 \
        --initial-cluster=m1=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$WORK/rt" --delta-snapshot-period=1s \
        --schedule='0 0 1 1 *' --reelection-period=2s --garbage-collection-period=0s \
        >"$1" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
# mval PORT SERIES: the value of one series ('name' or 'name{labels}' as rendered), or "absent"
mval() {
    curl -s "http://127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s { print $2; f = 1 } END { if (!f) print "absent" }'
}
# gt A B: A > B as numbers (NaN and "absent" are never greater)
gt() { awk -v a="$1" -v b="$2" 'BEGIN { n = "^[0-9.e+-]+$"; exit !(a ~ n && b ~ n && a + 0 > b + 0) }'; }
# wait_metric PORT SECONDS WHAT CONDITION...: until CONDITION (a command) holds, polled every 0.2 s
wait_metric() {
    local port=$1 secs=$2 what=$3 i
    shift 3
    for i in $(seq 1 $((secs * 5))); do
        "$@" && return 0
        sleep 0.2
    done
    curl -s "http://127.0.0.1:$port/metrics" | grep -E '^etcdbr_(snapshot_rpo|store_request|last_error|snapshotter_failure)' >&2 || true
    fail "$what (within $secs s)"
}
writes() { # N keys under /o/$1
    local i
    for i in $(seq 1 "$2"); do ectl put "/o/$1/$i" "v$i" >/dev/null; done
}
stop_s3() {
    stop_pid "$S3_PID"
    ! curl -s -o /dev/null "$S3_ENDPOINT" || fail "s3rver still answers after its stop"
}
# restart_s3: s3rver again on the same port and data dir (the objects stay)
restart_s3() {
    local n i
    n=$(grep -c "listening 127.0.0.1:$S3_PORT" "$WORK/s3rver.log")
    NODE_PATH=$ETCDBR_NPM_CACHE/node_modules NODE_OPTIONS=--openssl-legacy-provider \
        node "$ETCDBR_SOURCE_DIR/tests/servers/s3rver.js" "$S3_PORT" "$WORK/s3rver" "$S3_BUCKET" \
        >>"$WORK/s3rver.log" 2>&1 &
    S3_PID=$!
    PIDS+=("$S3_PID")
    for i in $(seq 1 200); do
        [ "$(grep -c "listening 127.0.0.1:$S3_PORT" "$WORK/s3rver.log")" -gt "$n" ] && return 0
        kill -0 "$S3_PID" 2>/dev/null || fail "s3rver did not restart on port $S3_PORT: $(tail -3 "$WORK/s3rver.log")"
        sleep 0.05
    done
    fail "s3rver not listening again on port $S3_PORT"
}

# ---- 1. default store retries: the failure shows within a few delta periods ----
unset ETCDBR_STORE_RETRY_BASE_MS
P1=$(free_port)
run_server "$WORK/s1.log" "$P1"
H1=http://127.0.0.1:$P1
wait_for_log "$WORK/s1.log" "full snapshot Full-" 60
writes a 5
wait_backed_up "$H1" "$(current_revision "$EP")"
# healthy: the RPO is known and small; every pre-initialised S3 class is there at 0
rpo_ok() { local v; v=$(mval "$P1" etcdbr_snapshot_rpo_seconds); gt 2.5 "$v"; }
wait_metric "$P1" 10 "the RPO of a healthy leader is not under 2.5 s" rpo_ok
fail0=$(mval "$P1" 'etcdbr_store_request_failures_total{class="connect",provider="S3"}')
[ "$fail0" = 0 ] || fail "store request failures before the outage: $fail0"
[ "$(mval "$P1" 'etcdbr_last_error_timestamp_seconds{operation="delta_snapshot"}')" = 0 ] ||
    fail "a delta failure time before the outage"

stop_s3
t0=$(date +%s.%N)
writes b 5
REV1=$(current_revision "$EP")
failures_up() { gt "$(mval "$P1" 'etcdbr_store_request_failures_total{class="connect",provider="S3"}')" 0; }
stamped() { gt "$(mval "$P1" 'etcdbr_last_error_timestamp_seconds{operation="delta_snapshot"}')" 0; }
rpo_up() { gt "$(mval "$P1" etcdbr_snapshot_rpo_seconds)" 1.5; }
wait_metric "$P1" 6 "etcdbr_store_request_failures_total{class=connect} did not move" failures_up
wait_metric "$P1" 6 "etcdbr_last_error_timestamp_seconds{operation=delta_snapshot} not set" stamped
wait_metric "$P1" 6 "the RPO did not rise above the delta period" rpo_up
seen=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
r1=$(mval "$P1" etcdbr_snapshot_rpo_seconds)
rpo_above_r1() { gt "$(mval "$P1" etcdbr_snapshot_rpo_seconds)" "$r1"; }
wait_metric "$P1" 5 "the RPO does not keep rising during the outage (stuck at $r1)" rpo_above_r1
n1=$(mval "$P1" 'etcdbr_store_request_failures_total{class="connect",provider="S3"}')
echo "1. outage seen within ${seen}s: $n1 failed store requests, RPO $r1 s and rising"

restart_s3
wait_backed_up "$H1" "$REV1" 90
rpo_down() { local v; v=$(mval "$P1" etcdbr_snapshot_rpo_seconds); gt 3 "$v"; }
wait_metric "$P1" 30 "the RPO did not drop under 3 s once the store was back" rpo_down
echo "1. store back: revision $REV1 stored, RPO $(mval "$P1" etcdbr_snapshot_rpo_seconds) s"
stop_pid "$SERVER_PID"

# ---- 2. failures that complete: their class is the store's ----
export ETCDBR_STORE_RETRY_BASE_MS=1
P2=$(free_port)
run_server "$WORK/s2.log" "$P2"
H2=http://127.0.0.1:$P2
wait_for_log "$WORK/s2.log" "resuming from " 60
rpo_known() { gt 3 "$(mval "$P2" etcdbr_snapshot_rpo_seconds)"; }
wait_metric "$P2" 10 "the RPO of the resumed leader is not known and small" rpo_known
stop_s3
code=$(curl -s -o "$WORK/full.out" -w '%{http_code}' -X POST "$H2/snapshot/full")
[ "$code" = 500 ] || fail "a full snapshot with the store down answered $code: $(cat "$WORK/full.out")"
store1=$(mval "$P2" 'etcdbr_snapshotter_failure{error="store"}')
[ "$store1" = 1 ] || fail "the failed full snapshot is not counted as error=store (store: $store1, io: $(mval "$P2" 'etcdbr_snapshotter_failure{error="io"}'))"
gt "$(mval "$P2" 'etcdbr_last_error_timestamp_seconds{operation="full_snapshot"}')" 0 ||
    fail "etcdbr_last_error_timestamp_seconds{operation=full_snapshot} not set"
writes c 5
REV2=$(current_revision "$EP")
delta_failed() { gt "$(mval "$P2" 'etcdbr_snapshotter_failure{error="store"}')" 1; }
wait_metric "$P2" 20 "the failed delta is not counted as error=store" delta_failed
io=$(mval "$P2" 'etcdbr_snapshotter_failure{error="io"}')
[ "$io" = 0 ] || fail "store failures counted as error=io: $io"
echo "2. store down: snapshotter_failure{error=store} $(mval "$P2" 'etcdbr_snapshotter_failure{error="store"}'), {error=io} $io"

restart_s3
wait_backed_up "$H2" "$REV2" 90
rpo_down2() { gt 3 "$(mval "$P2" etcdbr_snapshot_rpo_seconds)"; }
wait_metric "$P2" 60 "the RPO did not drop under 3 s once the store was back" rpo_down2
echo "2. store back: revision $REV2 stored, RPO $(mval "$P2" etcdbr_snapshot_rpo_seconds) s"
echo "PASS"
