#!/usr/bin/env bash
# --server-address binds the HTTP server to one address (docs/server.md): 127.0.0.1 answers
# there and not on ::1 or another local address; ::1 and [::1] answer on ::1 and not on
# 127.0.0.1; a host name or garbage is refused at start. A host that cannot bind ::1 has the IPv6
# part skipped: the test then exits 77 (skipped) after the IPv4 checks, saying so.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP
PORT=$(free_port)
SERVER_PID=""
server() { # LOG ADDRESS
    "$ETCDBR_BIN" server --endpoints="$EP" --server-address="$2" --server-port="$PORT" \
        --data-dir="$WORK/m1.etcd" --reelection-period=1500ms --etcd-connection-timeout-leader-election=1500ms >"$1" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
code() { curl -sg -m 5 -o /dev/null -w '%{http_code}' "$1/healthz" || true; }
wait_up() { # URL LOG: /healthz 200 within 30 s
    local i
    for i in $(seq 1 150); do
        [ "$(code "$1")" = 200 ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$2" >&2; fail "server exited"; }
        sleep 0.2
    done
    tail -20 "$2" >&2
    fail "$1/healthz not 200"
}

HAVE_V6=0
python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null && HAVE_V6=1

server "$WORK/v4.log" 127.0.0.1
wait_up "http://127.0.0.1:$PORT" "$WORK/v4.log"
grep -qF "serving HTTP on port $PORT (127.0.0.1)\"" "$WORK/v4.log" || fail "start line: $(grep serving "$WORK/v4.log")"
# another loopback address of the same host: not bound
[ "$(code "http://127.0.0.2:$PORT")" = 000 ] || fail "127.0.0.2 answered while bound to 127.0.0.1"
if [ "$HAVE_V6" = 1 ]; then
    [ "$(code "http://[::1]:$PORT")" = 000 ] || fail "::1 answered while bound to 127.0.0.1"
fi
echo "127.0.0.1: answers there, not on 127.0.0.2$([ "$HAVE_V6" = 1 ] && echo " or ::1")"
stop_pid "$SERVER_PID"

server "$WORK/bad.log" etcd.example
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" != 0 ] || fail "a host name as --server-address was accepted"
grep -q "bad listen address etcd.example" "$WORK/bad.log" || fail "unclear error: $(cat "$WORK/bad.log")"
echo "a host name: refused at start ($(grep -o 'bad listen address.*' "$WORK/bad.log" | head -1))"

[ "$HAVE_V6" = 1 ] || skip_test "this host cannot bind ::1 (no IPv6 on loopback): the IPv4 part passed, the ::1 and [::1] part did not run"
for addr in ::1 '[::1]'; do
    server "$WORK/v6.log" "$addr"
    wait_up "http://[::1]:$PORT" "$WORK/v6.log"
    grep -qF "serving HTTP on port $PORT ($addr)\"" "$WORK/v6.log" || fail "start line: $(grep serving "$WORK/v6.log")"
    [ "$(code "http://127.0.0.1:$PORT")" = 000 ] || fail "127.0.0.1 answered while bound to $addr"
    echo "$addr: answers on [::1], not on 127.0.0.1"
    stop_pid "$SERVER_PID"
done
echo PASS
