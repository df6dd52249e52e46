#!/usr/bin/env bash
# `etcdbrctl server` loses and regains leadership while HTTP requests use the snapshotter: etcd is
# killed (-9) and started again several times while clients keep /snapshot/full, /snapshot/delta
# and /healthz busy, so requests are waiting in the snapshotter when it is stopped and freed.
# Checks: the server never dies, every round it stops and restarts the snapshotter, after each
# restart /snapshot/full answers 200 with a new snapshot, and SIGTERM with requests in flight
# exits 0. Under ASan a use after free, under TSan (scripts/test.sh) a race, fails the server.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 20); do ectl put "/k/a$i" "v$i" >/dev/null; done
PORT=$(free_port)
H=http://127.0.0.1:$PORT
"$ETCDBR_BIN" server --endpoints="$ETCD_EP" --storage-provider=Local --store-container="$WORK/store" \
    --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" --data-dir="$WORK/m1.etcd" \
    --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=2s \
    --etcd-connection-timeout-leader-election=2s --etcd-connection-timeout=2s \
    --garbage-collection-period=0s >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_for_log "$WORK/server.log" "snapshotter started" 30

# clients: each loops until $WORK/stop exists; -m bounds every request
client() { # path
    while [ ! -e "$WORK/stop" ]; do
        curl -s -m 20 -o /dev/null -w '%{http_code}\n' "$H$1" >>"$WORK/codes" 2>/dev/null || true
    done
}
for p in /snapshot/full /snapshot/full /snapshot/full /snapshot/delta /snapshot/delta /healthz; do
    client "$p" &
    PIDS+=("$!")
done

alive() { kill -0 "$SERVER_PID" 2>/dev/null || { tail -30 "$WORK/server.log"; fail "server died: $1"; }; }
count() { grep -c -- "$1" "$WORK/server.log" || true; }
rounds=4
for r in $(seq 1 $rounds); do
    sleep 1.5 # requests queue up in the snapshotter
    kill -9 "$ETCD_PID"
    wait "$ETCD_PID" 2>/dev/null || true
    for i in $(seq 1 100); do
        [ "$(count 'snapshotter stopped')" -ge "$r" ] && break
        sleep 0.1
    done
    alive "round $r, after etcd was killed"
    [ "$(count 'snapshotter stopped')" -ge "$r" ] || fail "round $r: snapshotter not stopped after losing etcd"
    restart_etcd m1 "$WORK/m1.etcd"
    ectl put "/k/r$r" "v$r" >/dev/null
    for i in $(seq 1 100); do
        [ "$(count 'snapshotter started')" -gt "$r" ] && break
        sleep 0.1
    done
    alive "round $r, after etcd came back"
    [ "$(count 'snapshotter started')" -gt "$r" ] || fail "round $r: snapshotter not started again"
    # the loop serves requests again once its first snapshot after the start is stored
    ok=""
    for i in $(seq 1 30); do
        body=$(curl -s -m 20 "$H/snapshot/full" || true)
        if echo "$body" | jq -e '.kind == "Full"' >/dev/null 2>&1; then ok=1 && break; fi
        sleep 0.5
    done
    [ -n "$ok" ] || fail "round $r: /snapshot/full after the restart: $body"
    echo "round $r: leadership lost and regained with requests in flight; /snapshot/full works"
done
alive "after $rounds rounds"
[ "$(grep -c '^200$' "$WORK/codes")" -gt 0 ] || fail "no request succeeded: $(sort "$WORK/codes" | uniq -c | tr '\n' ' ')"

# SIGTERM while the clients still send requests: HTTP stops first, then the snapshotter
kill -TERM "$SERVER_PID"
rc=0
for i in $(seq 1 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SERVER_PID" 2>/dev/null && fail "server still running 30 s after SIGTERM"
wait "$SERVER_PID" || rc=$?
touch "$WORK/stop"
[ "$rc" = 0 ] || { tail -30 "$WORK/server.log"; fail "server exited $rc after SIGTERM"; }
echo "SIGTERM with requests in flight: exit 0 ($(sort "$WORK/codes" | uniq -c | tr '\n' ' '))"
