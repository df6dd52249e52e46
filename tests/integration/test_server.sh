#!/usr/bin/env bash
# `etcdbrctl server` against a real etcd with real HTTP calls: every endpoint and status code,
# the initialization state machine (a second start while one runs changes nothing), on-demand
# full/final/delta snapshots, /snapshot/latest against the store, /metrics; then the data dir is
# deleted and initialization restores it with every key; then the db file is corrupted (bytes
# flipped inside a page; truncated) and validation reports it and a restore follows.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP
for i in $(seq 1 50); do ectl put "/registry/a/$i" "v$i" >/dev/null; done
PORT=$(free_port)
H=http://127.0.0.1:$PORT
cat >"$WORK/etcd.conf.yaml" <<YAML
name: placeholder
data-dir: $WORK/m1.etcd
initial-advertise-peer-urls:
  m1:
  - http://127.0.0.1:2380
advertise-client-urls:
  m1: [$EP]
initial-cluster: m1=http://127.0.0.1:2380
YAML
mkdir -p "$WORK/home"
ETCD_CONF=$WORK/etcd.conf.yaml POD_NAME=m1 HOME=$WORK/home "$ETCDBR_BIN" server --endpoints="$EP" --storage-provider=Local --store-container="$WORK/store" \
    --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" \
    --data-dir="$WORK/m1.etcd" --name=m1 --initial-cluster="m1=http://127.0.0.1:2380" \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" \
    --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=2s \
    --garbage-collection-period=0s >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")

code() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }
expect() { # expect STATUS CURL-ARGS...: the status code and the body in $BODY
    local want=$1 got
    shift
    got=$(code "$@")
    BODY=$(cat "$WORK/body")
    [ "$got" = "$want" ] || { tail -20 "$WORK/server.log"; fail "$*: HTTP $got, expected $want ($BODY)"; }
}

for i in $(seq 1 100); do
    [ "$(code "$H/healthz")" = 200 ] && break
    sleep 0.2
done
expect 200 "$H/healthz"
[ "$BODY" = '{"health":true}' ] || fail "healthz body $BODY"
wait_for_log "$WORK/server.log" "full snapshot Full-"

# /config: this member's name and URLs resolved from the etcd config file
expect 200 "$H/config"
echo "$BODY" | grep -x 'name: "m1"' >/dev/null || fail "/config name: $BODY"
echo "$BODY" | grep -x 'initial-advertise-peer-urls: "http://127.0.0.1:2380"' >/dev/null || fail "/config peer urls: $BODY"
echo "$BODY" | grep -x "advertise-client-urls: \"$EP\"" >/dev/null || fail "/config client urls: $BODY"
echo "$BODY" | grep -x 'initial-cluster-state: new' >/dev/null || fail "/config state: $BODY"
cmp -s <(echo "$BODY") "$WORK/home/etcd.conf.yaml" || fail "/config not written to \$HOME/etcd.conf.yaml"

# routing: unknown path 404, wrong method 405
expect 404 "$H/nope"
expect 405 -X DELETE "$H/snapshot/full"
expect 405 -X POST "$H/healthz"
# /livez: 200 whatever the health (the liveness probe's path), GET only
expect 200 "$H/livez"
[ "$BODY" = ok ] || fail "livez body $BODY"
expect 405 -X POST "$H/livez"
expect 405 -X PUT "$H/metrics"

# on-demand snapshots
expect 400 "$H/snapshot/full?final=maybe"
expect 200 "$H/snapshot/full"
echo "$BODY" | jq -e '.kind == "Full" and .startRevision == 0 and .isFinal == false and .compressionSuffix == ".gz" and (.snapName | startswith("Full-")) and .immutabilityExpriyTime == "0001-01-01T00:00:00Z" and .versionID == null and .isChunk == false' >/dev/null || fail "full JSON: $BODY"
full_rev=$(echo "$BODY" | jq .lastRevision)
expect 200 "$H/snapshot/delta"
[ "$BODY" = null ] || fail "delta with no events: $BODY"
for i in $(seq 1 5); do ectl put "/registry/b/$i" "v$i" >/dev/null; done
expect 200 "$H/snapshot/delta"
# the periodic delta (every second) may have stored the first of the 5 revisions meanwhile: the
# requested one then starts later, but always ends at the last put (or, if the periodic one took
# all 5, is null and the store already holds a delta ending there)
if [ "$BODY" = null ]; then
    ls "$WORK/store/v2" | grep "^Incr-[0-9]*-0*$((full_rev + 5))-" >/dev/null || fail "delta: null, and no stored delta ends at $((full_rev + 5))"
else
    echo "$BODY" | jq -e ".kind == \"Incr\" and .startRevision >= $((full_rev + 1)) and .startRevision <= $((full_rev + 5)) and .lastRevision == $((full_rev + 5))" >/dev/null || fail "delta JSON: $BODY"
fi
expect 200 "$H/snapshot/latest"
# one delta, or two when the periodic one took the first puts (the requested one the rest)
echo "$BODY" | jq -e ".fullSnapshot.lastRevision == $full_rev and (.deltaSnapshots | length) >= 1 and (.deltaSnapshots | length) <= 2 and .deltaSnapshots[0].startRevision == $((full_rev + 1)) and .deltaSnapshots[-1].lastRevision == $((full_rev + 5))" >/dev/null || fail "latest: $BODY"
expect 200 "$H/snapshot/full?final=true"
echo "$BODY" | jq -e '.isFinal == true and (.snapName | endswith(".gz.final"))' >/dev/null || fail "final: $BODY"
ls "$WORK/store/v2" | grep '\.final$' >/dev/null || fail "no .final object in the store"

expect 200 "$H/metrics"
for m in etcdbr_snapshot_duration_seconds_bucket etcdbr_snapshot_latest_revision etcdbr_snapshot_gc_total \
    etcdbr_snapshotter_failure etcdbr_snapshot_last_success_timestamp_seconds etcdbr_validation_duration_seconds; do
    grep -q "^$m" "$WORK/body" || fail "metric $m missing"
done
grep -q "^etcdbr_snapshot_latest_revision{kind=\"Incr\"} $((full_rev + 5))" "$WORK/body" || fail "latest Incr revision metric"
grep -qE '^etcdbr_full_snapshot_age_seconds [0-9]' "$WORK/body" || fail "full snapshot age metric"
# the member count from etcd's member list, and the process collector dashboards read
grep -qx 'etcdbr_cluster_size 1' "$WORK/body" || fail "cluster size metric: $(grep '^etcdbr_cluster_size' "$WORK/body")"
grep -qE '^process_resident_memory_bytes [1-9]' "$WORK/body" || fail "process_resident_memory_bytes missing or 0"
grep -qE '^process_open_fds [1-9]' "$WORK/body" || fail "process_open_fds missing or 0"

# concurrent requests coalesce, and each answer covers what was written before it asked: 8
# parallel /snapshot/full while a writer puts keys; those arriving while a full snapshot is taken
# share the next one, so fewer than 8 full snapshots are taken; every answer is newer than the
# revision read before the requests were sent, and in the store
# (one curl process sends 500 puts over one connection: a put every millisecond or two)
for i in $(seq 1 500); do
    printf 'url = "%s/v3/kv/put"\ndata = "{\\"key\\":\\"%s\\",\\"value\\":\\"%s\\"}"\noutput = "/dev/null"\nnext\n' \
        "$EP" "$(b64 /registry/w)" "$(b64 "w$i")"
done | sed '$d' >"$WORK/puts.curl" # no "next" after the last one
( while [ ! -e "$WORK/writer.stop" ]; do curl -s -K "$WORK/puts.curl" || true; done ) &
writer=$!
PIDS+=("$writer")
for i in $(seq 1 50); do [ "$(current_revision "$EP")" -gt "$((full_rev + 5))" ] && break; sleep 0.05; done
asked_rev=$(current_revision "$EP")
cpids=()
for j in $(seq 1 8); do
    curl -s -m 60 -o "$WORK/concurrent.$j" -w '%{http_code}\n' "$H/snapshot/full" >>"$WORK/concurrent" &
    cpids+=("$!")
done
wait "${cpids[@]}"
touch "$WORK/writer.stop"
wait "$writer"
[ "$(grep -c '^200$' "$WORK/concurrent")" = 8 ] || fail "concurrent /snapshot/full: $(sort "$WORK/concurrent" | uniq -c | tr '\n' ' ')"
jq -s -e "length == 8 and all(.kind == \"Full\" and .lastRevision >= $asked_rev) and
    ([.[].snapName] | unique | length) < 8" "$WORK"/concurrent.[1-8] >/dev/null ||
    fail "concurrent /snapshot/full: not coalesced, or older than revision $asked_rev: $(jq -c '[.snapName, .lastRevision]' "$WORK"/concurrent.[1-8] | tr '\n' ' ')"
for name in $(jq -r .snapName "$WORK"/concurrent.[1-8]); do
    [ -e "$WORK/store/v2/$name" ] || fail "concurrent /snapshot/full returned $name, which is not in the store"
done
echo "concurrent /snapshot/full: 8 requests, $(jq -s '[.[].snapName] | unique | length' "$WORK"/concurrent.[1-8]) snapshot(s) at revisions $(jq -s -c '[.[].lastRevision] | unique' "$WORK"/concurrent.[1-8]) (asked at $asked_rev)"
# and the next request is not stuck behind them
t0=$(date +%s)
expect 200 -m 30 "$H/snapshot/full"
[ $(($(date +%s) - t0)) -le 10 ] || fail "a request after a burst took too long"

# more writes, then the data dir is lost while etcd is down
for i in $(seq 1 20); do ectl put "/registry/c/$i" "v$i" >/dev/null; done
ectl del /registry/a/1 >/dev/null
sleep 2.5 # a delta period
src_rev=$(current_revision "$EP")
dump_keys "$EP" >"$WORK/src.jsonl"
wait_backed_up "$H" "$src_rev"
stop_pid "$ETCD_PID"
rm -rf "$WORK/m1.etcd"

expect 200 "$H/initialization/status"
[ "$BODY" = New ] || fail "status before start: $BODY"
# wait_init: polls /initialization/status until it leaves Progress; BODY = the terminal state
wait_init() {
    for i in $(seq 1 150); do
        expect 200 "$H/initialization/status"
        [ "$BODY" = Progress ] || return 0
        sleep 0.2
    done
}
expect 200 "$H/initialization/start?mode=full"
expect 200 "$H/initialization/start?mode=full" # while in progress: nothing
expect 200 "$H/initialization/status"
[ "$BODY" = Progress ] || [ "$BODY" = Successful ] || fail "status after start: $BODY"
[ "$BODY" = Successful ] || wait_init
[ "$BODY" = Successful ] || { tail "$WORK/server.log"; fail "initialization ended $BODY"; }
expect 200 "$H/initialization/status"
[ "$BODY" = New ] || fail "a terminal state read once must go back to New, got $BODY"
[ "$(grep -c 'initialization done' "$WORK/server.log")" = 1 ] || fail "initialization ran more than once"
expect 200 "$H/metrics"
grep -qx 'etcdbr_restoration_duration_seconds_count{restore="single_node",succeeded="true"} 1' "$WORK/body" ||
    fail "restore not counted as single_node: $(grep '^etcdbr_restoration_duration_seconds_count' "$WORK/body")"
start_etcd m1 "$WORK/m1.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "restored revision differs"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "restored keyspace differs"
echo "lost data dir: restored by initialization at revision $src_rev"
stop_pid "$ETCD_PID"

# corrupt db: bytes flipped inside a page, then a truncated db
init_and_check() { # label
    expect 200 "$H/initialization/start?mode=full"
    wait_init
    [ "$BODY" = Successful ] || { tail "$WORK/server.log"; fail "$1: initialization ended $BODY"; }
    start_etcd m1 "$WORK/m1.etcd"
    dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "$1: keyspace differs"
    stop_pid "$ETCD_PID"
    echo "$1: detected and restored"
}
db=$WORK/m1.etcd/member/snap/db
python3 - "$db" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
ps = 4096
for off in range(2 * ps + 100, len(b), ps * 3):  # inside data pages, not the meta pages
    for k in range(16):
        b[off + k] ^= 0xA5
open(p, 'wb').write(b)
PY
init_and_check "flipped bytes"
grep -qiE "corrupt" "$WORK/server.log" || fail "corruption not reported"
truncate -s $(($(stat -c %s "$db") / 2)) "$db"
init_and_check "truncated db"
kill -0 "$SERVER_PID" || fail "server died"

# HTTPS: --server-cert/--server-key, verified by a client that trusts our test CA
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=etcdbr-test" \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
TPORT=$(free_port)
"$ETCDBR_BIN" server --endpoints="http://127.0.0.1:$(free_port)" --server-port="$TPORT" \
    --server-cert="$WORK/tls.crt" --server-key="$WORK/tls.key" >"$WORK/server-tls.log" 2>&1 &
PIDS+=("$!")
wait_for_log "$WORK/server-tls.log" "serving HTTPS"
curl -s --cacert "$WORK/tls.crt" -D "$WORK/tls.headers" -o "$WORK/body" "https://127.0.0.1:$TPORT/healthz" || fail "HTTPS request failed"
grep -qi "^strict-transport-security: max-age=31536000" "$WORK/tls.headers" || fail "no HSTS header over HTTPS"
[ "$(cat "$WORK/body")" = '{"health":false}' ] || fail "healthz over HTTPS: $(cat "$WORK/body")"
curl -s -o /dev/null "http://127.0.0.1:$TPORT/healthz" && fail "plain HTTP answered on the HTTPS port"
echo "HTTPS: served with HSTS, verified against the test CA"
