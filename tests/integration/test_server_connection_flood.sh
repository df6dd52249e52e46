#!/usr/bin/env bash
# `etcdbrctl server` under careless and hostile callers (docs/server.md, "Connections and
# limits"), against a real etcd: /healthz is answered within 2 s
#  - while 30 requests that wait (POST /snapshot/full and /config while etcd is stopped with
#    SIGSTOP) are in flight: they run on the HTTP workers, not on the event loop;
#  - while 1,100 idle TCP connections and 50 slowloris connections (a header byte every second,
#    never finished) are held by the server (its open fds are counted), over IPv4 and, when the
#    host has IPv6, over [::1] (the server listens dual-stack), probed over both families;
# and the slowloris connections are closed by the request timeout (15 s after connecting)
# although each byte restarts the idle timeout. Prints the /healthz latency under the flood.
source "$(dirname "$0")/lib.sh"
make_workdir
FLOOD_TOOL=$ETCDBR_SOURCE_DIR/tests/tools/http_flood.py
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP
for i in $(seq 1 20); do ectl put "/registry/a/$i" "v$i" >/dev/null; done
PORT=$(free_port)
H=http://127.0.0.1:$PORT
"$ETCDBR_BIN" server --endpoints="$EP" --storage-provider=Local --store-container="$WORK/store" \
    --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" \
    --data-dir="$WORK/m1.etcd" --delta-snapshot-period=1s --schedule='0 0 1 1 *' \
    --reelection-period=2s --garbage-collection-period=0s >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_healthz "$H" "$WORK/server.log"

# IPv6 on loopback: the host can bind ::1
HAVE_V6=0
python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null && HAVE_V6=1
if [ "$HAVE_V6" = 1 ]; then
    grep -q "serving HTTP on port $PORT (IPv6 and IPv4)" "$WORK/server.log" || fail "server does not listen dual-stack: $(grep 'serving HTTP' "$WORK/server.log")"
    [ "$(curl -sg -o /dev/null -w '%{http_code}' "http://[::1]:$PORT/healthz")" = 200 ] || fail "/healthz over [::1] not answered"
else
    echo "SKIP (part): this host has no IPv6 on loopback (cannot bind ::1): IPv6 checks left out"
fi

# probe LABEL URL N: N probes of /healthz at URL; each must be answered (any status for
# `answered`, 200 otherwise) within 2 s; appends the latencies (ms) to $WORK/lat.LABEL
probe() {
    local label=$1 url=$2 n=$3 want=${4:-200} i out code secs ms
    for i in $(seq 1 "$n"); do
        out=$(curl -sg -o /dev/null -w '%{http_code} %{time_total}' -m 10 "$url/healthz" || true)
        code=${out% *}
        secs=${out#* }
        ms=$(awk -v s="$secs" 'BEGIN { printf "%d", s * 1000 }')
        if [ "$want" = answered ]; then
            [ "$code" != 000 ] || fail "$label: /healthz not answered (probe $i: $out)"
        else
            [ "$code" = "$want" ] || fail "$label: /healthz HTTP $code, expected $want (probe $i)"
        fi
        [ "$ms" -lt 2000 ] || fail "$label: /healthz took ${ms} ms (probe $i), more than 2 s"
        echo "$ms" >>"$WORK/lat.$label"
        sleep 0.1
    done
}
latency() { sort -n "$WORK/lat.$1" | awk '{ v[NR] = $1 } END { printf "max %d ms, median %d ms over %d probes", v[NR], v[int((NR + 1) / 2)], NR }'; }

# 1. requests that wait do not hold up /healthz: etcd stopped, 25 snapshot and 5 /config requests
kill -STOP "$ETCD_PID"
slow_pids=()
for i in $(seq 1 25); do
    curl -s -m 120 -o /dev/null -w '%{http_code}\n' -X POST "$H/snapshot/full" >>"$WORK/slow.codes" &
    slow_pids+=("$!")
done
for i in $(seq 1 5); do
    curl -s -m 120 -o /dev/null -w '%{http_code}\n' "$H/config" >>"$WORK/slow.codes" &
    slow_pids+=("$!")
done
sleep 0.5 # the requests reach the server (nothing to wait on: they wait on etcd)
probe slowreq "$H" 10 answered
kill -CONT "$ETCD_PID"
wait "${slow_pids[@]}"
[ "$(grep -c . "$WORK/slow.codes")" = 30 ] && ! grep -q '^000$' "$WORK/slow.codes" ||
    fail "waiting requests not all answered: $(sort "$WORK/slow.codes" | uniq -c | tr '\n' ' ')"
echo "waiting requests in flight (etcd stopped): /healthz $(latency slowreq); then answered: $(sort "$WORK/slow.codes" | uniq -c | tr '\n' ' ')"
for i in $(seq 1 150); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$H/healthz")" = 200 ] && break
    sleep 0.2
done

# flood HOST: 1,100 idle + 50 slowloris connections to HOST, held; sets FLOOD_PID and waits until
# every connection is established and the server holds them (its fds)
flood() {
    local host=$1 tag=$2 i st
    rm -f "$WORK/flood.stop" "$WORK/flood.$tag"
    python3 "$FLOOD_TOOL" --host "$host" --port "$PORT" --idle 1100 --slow 50 \
        --status "$WORK/flood.$tag" --stop "$WORK/flood.stop" --max-seconds 120 &
    FLOOD_PID=$!
    PIDS+=("$FLOOD_PID")
    for i in $(seq 1 600); do
        st=$(cat "$WORK/flood.$tag" 2>/dev/null || true)
        [ -n "$st" ] && echo "$st" | jq -e .ready >/dev/null && break
        sleep 0.1
    done
    echo "$st" | jq -e '.ready and .connected_idle == 1100 and .connected_slow == 50 and .failed == 0' >/dev/null ||
        fail "flood over $host: not every connection was established: $st"
    for i in $(seq 1 100); do
        [ "$(ls "/proc/$SERVER_PID/fd" | wc -l)" -gt 1150 ] && break
        sleep 0.1
    done
    [ "$(ls "/proc/$SERVER_PID/fd" | wc -l)" -gt 1150 ] ||
        fail "flood over $host: the server holds only $(ls "/proc/$SERVER_PID/fd" | wc -l) fds, not the 1,150 connections"
}
# held TAG: the connections were all still open when the probes ended (the request timeout is 15 s)
held() {
    local st
    st=$(cat "$WORK/flood.$1")
    echo "$st" | jq -e '.open_idle == 1100 and .open_slow == 50' >/dev/null ||
        fail "flood $1: connections closed before the probes ended ($st): the probes did not run under the whole flood"
}

# 2. the flood over IPv4, probed over IPv4 (and IPv6)
flood 127.0.0.1 v4
probe flood4 "$H" 10
[ "$HAVE_V6" = 1 ] && probe flood4_v6 "http://[::1]:$PORT" 5
held v4
echo "healthz latency under the flood (1,100 idle + 50 slowloris over IPv4): $(latency flood4)"
[ "$HAVE_V6" = 1 ] && echo "  probed over IPv6 meanwhile: $(latency flood4_v6)"

# 3. slowloris is bounded: its connections are closed by the request timeout (15 s after
# connecting; each byte restarts the 30 s idle timeout, which alone would never close them)
for i in $(seq 1 400); do
    jq -e '.open_slow == 0 and .open_idle == 0' "$WORK/flood.v4" >/dev/null && break
    sleep 0.1
done
st=$(cat "$WORK/flood.v4")
echo "$st" | jq -e '.open_slow == 0 and .open_idle == 0' >/dev/null ||
    fail "slowloris/idle connections still open after 40 s: $st"
echo "$st" | jq -e '.slow_first_close >= 13 and .slow_last_close <= 30' >/dev/null ||
    fail "slowloris connections closed at unexpected times (request timeout 15 s): $st"
echo "slowloris connections closed by the server $(echo "$st" | jq -r '"\(.slow_first_close)-\(.slow_last_close)"') s after connecting"
touch "$WORK/flood.stop"
wait "$FLOOD_PID"

# 4. the flood over IPv6 (dual stack), probed over IPv6 and IPv4
if [ "$HAVE_V6" = 1 ]; then
    flood ::1 v6
    probe flood6 "http://[::1]:$PORT" 10
    probe flood6_v4 "$H" 5
    held v6
    echo "healthz latency under the flood over IPv6: $(latency flood6); probed over IPv4 meanwhile: $(latency flood6_v4)"
    touch "$WORK/flood.stop"
    wait "$FLOOD_PID"
fi

kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" = 0 ] || { tail -20 "$WORK/server.log"; fail "server exited $rc"; }
grep -q "still suspended" "$WORK/server.log" && fail "a request was left suspended at stop"
echo "server connection flood: /healthz answered within 2 s throughout"
