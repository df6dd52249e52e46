#!/usr/bin/env bash
# The server's start-up peer URL update (docs/go-tool.md §10.4, last paragraph) on member m2 of a real
# 3-member etcd cluster, with a FAKE etcd-wrapper (a scripted HTTP server: the real one is not
# available here) on m2's host 127.0.0.2, port 9095 (fixed by the Go tool). m2's etcd listens on
# two peer URLs, so the cluster stays whole whichever of them is registered.
#  1. the etcd config file (ETCD_CONF, etcd-druid's layout) names m2's second peer URL, which is
#     not registered: without --use-etcd-wrapper the member list gets it (one MemberUpdate, as
#     every etcd logs) and nothing is posted to the wrapper;
#  2. the file names the first URL again, with --use-etcd-wrapper: updated back, and the wrapper
#     receives exactly one POST /stop;
#  3. the same file again: the URL is registered, so no MemberUpdate and no POST;
#  4. no etcd config file, or one without peer URLs for m2: nothing either;
#  5. the file gives m2 the peer URL of m3: etcd refuses, the update is tried 4 times (2, 4, 8 s
#     apart), a clear error names etcd's reason, nothing changes and nothing is posted;
#  6. m2 under `etcdbrctl run --use-etcd-wrapper` with the second URL in the file: updated, a
#     warning that the flag has no effect under run, no POST, and its etcd child is not restarted.
source "$(dirname "$0")/lib.sh"
make_workdir

# the fake etcd-wrapper: records "METHOD PATH" per request, answers 200
cat >"$WORK/fake_wrapper.py" <<'PY'
import http.server, sys
host, log, ready = sys.argv[1], sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        with open(log, "a") as f:
            f.write(f"{self.command} {self.path}\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
try:
    s = http.server.HTTPServer((host, 9095), H)
except OSError as e:
    print(f"fake etcd-wrapper: cannot bind {host}:9095: {e}", flush=True)
    sys.exit(3)
open(ready, "w").close()
s.serve_forever()
PY
: >"$WORK/wrapper.log"
python3 "$WORK/fake_wrapper.py" 127.0.0.2 "$WORK/wrapper.log" "$WORK/wrapper.ready" \
    >"$WORK/wrapper.out" 2>&1 &
WRAPPER_PID=$!
PIDS+=("$WRAPPER_PID")
for k in $(seq 1 50); do
    [ -e "$WORK/wrapper.ready" ] && break
    if ! kill -0 "$WRAPPER_PID" 2>/dev/null; then
        skip_test "$(cat "$WORK/wrapper.out")"
    fi
    sleep 0.1
done
[ -e "$WORK/wrapper.ready" ] || fail "fake etcd-wrapper did not start: $(cat "$WORK/wrapper.out")"

CLUSTER_DISTINCT_HOSTS=1 plan_cluster 3
OLD=${MEMBER_PEER[2]}
NEW=http://127.0.0.2:$(free_port)
start_member 1 new
start_member 2 new --listen-peer-urls "$OLD,$NEW"
start_member 3 new
for i in 1 2 3; do wait_member "$i"; done
EP2=${MEMBER_EP[2]}

m2_peer_urls() { # m2's registered peer URLs, comma-joined, through m1's gateway
    curl -sS -m 5 -X POST "${MEMBER_EP[1]}/v3/cluster/member/list" -d '{}' |
        jq -r '.members[] | select(.name == "m2") | .peerURLs | join(",")'
}
updates_applied() { # MemberUpdates m1's etcd applied (3.4 capnslog and 3.5+ zap wording)
    grep -ci 'updated member' "$WORK/etcd-m1.log" || true
}
posts() { grep -c . "$WORK/wrapper.log" || true; }
[ "$(m2_peer_urls)" = "$OLD" ] || fail "m2 registered with $(m2_peer_urls), want $OLD"
[ "$(updates_applied)" = 0 ] || fail "etcd logged a member update before any server ran"

write_conf() { # write_conf PEER_URL_OF_M2: etcd-druid's layout
    cat >"$WORK/etcd.conf.yaml" <<YAML
name: etcd-main
initial-cluster: $INITIAL_CLUSTER
initial-advertise-peer-urls:
  m1:
  - ${MEMBER_PEER[1]}
  m2:
  - $1
  m3:
  - ${MEMBER_PEER[3]}
advertise-client-urls:
  m1:
  - ${MEMBER_EP[1]}
  m2:
  - ${MEMBER_EP[2]}
  m3:
  - ${MEMBER_EP[3]}
YAML
}

N=0
# run_server CONF WAIT_FOR [flags...]: m2's sidecar with ETCD_CONF=CONF until its log has
# WAIT_FOR, then SIGTERM; its log is $WORK/server-$N.log (LOG)
run_server() {
    local conf=$1 want=$2 pid rc=0
    shift 2
    N=$((N + 1))
    LOG=$WORK/server-$N.log
    ETCD_CONF=$conf POD_NAME=m2 "$ETCDBR_BIN" server --endpoints="$EP2" \
        --service-endpoints="$CLUSTER_EPS" --server-address=127.0.0.2 --server-port="$(free_port)" \
        --data-dir="${MEMBER_DIR[2]}" --reelection-period=2s \
        --etcd-connection-timeout-leader-election=2s "$@" >"$LOG" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_for_log "$LOG" "$want" 30
    kill -TERM "$pid"
    wait "$pid" || rc=$?
    [ "$rc" = 0 ] || fail "server $N exited $rc: $(tail -3 "$LOG")"
}

# 1. an unregistered URL, no --use-etcd-wrapper: updated, nothing posted
write_conf "$NEW"
run_server "$WORK/etcd.conf.yaml" "updated the peer URLs of member m2"
grep "etcd config file $WORK/etcd.conf.yaml has peer URL $NEW that the member list does not (registered: $OLD)" \
    "$LOG" >/dev/null || fail "server 1 did not log the comparison: $(grep -i 'peer url' "$LOG")"
[ "$(m2_peer_urls)" = "$NEW" ] || fail "after server 1 m2 has peer URLs $(m2_peer_urls), want $NEW"
[ "$(updates_applied)" = 1 ] || fail "etcd applied $(updates_applied) member updates, want 1"
[ "$(posts)" = 0 ] || fail "without --use-etcd-wrapper the wrapper got: $(cat "$WORK/wrapper.log")"

# 2. back to the first URL with --use-etcd-wrapper: updated, one POST /stop
write_conf "$OLD"
run_server "$WORK/etcd.conf.yaml" "asked etcd-wrapper to restart etcd" --use-etcd-wrapper
grep "POST http://127.0.0.2:9095/stop" "$LOG" >/dev/null || fail "server 2: $(grep -i wrapper "$LOG")"
[ "$(m2_peer_urls)" = "$OLD" ] || fail "after server 2 m2 has peer URLs $(m2_peer_urls), want $OLD"
[ "$(updates_applied)" = 2 ] || fail "etcd applied $(updates_applied) member updates, want 2"
[ "$(posts)" = 1 ] && [ "$(cat "$WORK/wrapper.log")" = "POST /stop" ] ||
    fail "the wrapper got $(posts) requests, want one POST /stop: $(cat "$WORK/wrapper.log")"

# 3. the same file again: registered, so no MemberUpdate and no POST
run_server "$WORK/etcd.conf.yaml" "are registered ($OLD): nothing to update" --use-etcd-wrapper
! grep "updating the member's peer URLs" "$LOG" >/dev/null || fail "server 3 updated: $(cat "$LOG")"

# 4. no etcd config file; then one without peer URLs for m2: nothing
run_server "$WORK/absent.yaml" "peer URLs not checked: etcd config file $WORK/absent.yaml" \
    --use-etcd-wrapper
grep -v "^  m2:\|^  - $OLD" "$WORK/etcd.conf.yaml" >"$WORK/no-m2.yaml"
run_server "$WORK/no-m2.yaml" "has no initial-advertise-peer-urls for member m2" --use-etcd-wrapper
sleep 0.5 # a stray update or POST would have been logged by now
[ "$(updates_applied)" = 2 ] || fail "etcd applied $(updates_applied) member updates, want 2"
[ "$(posts)" = 1 ] || fail "the wrapper got $(posts) requests, want 1: $(cat "$WORK/wrapper.log")"
[ "$(m2_peer_urls)" = "$OLD" ] || fail "m2 ends with peer URLs $(m2_peer_urls), want $OLD"

# 5. a URL etcd refuses (m3's): retried, then a clear error; nothing changed, nothing posted
write_conf "${MEMBER_PEER[3]}"
run_server "$WORK/etcd.conf.yaml" "peer URL check: trying again in 60s" --use-etcd-wrapper
[ "$(grep -c "MemberUpdate of member .* failed (attempt [1-3] of 4" "$LOG")" = 3 ] ||
    fail "server 5: want 3 retried attempts: $(grep -i 'peer url\|memberupdate' "$LOG")"
grep "level=error.*peer URL check of member m2 .* failed: MemberUpdate of member .* failed 4 times: .*Peer URLs already exists" \
    "$LOG" >/dev/null || fail "server 5: no clear error: $(grep level=error "$LOG")"
[ "$(m2_peer_urls)" = "$OLD" ] || fail "after server 5 m2 has peer URLs $(m2_peer_urls), want $OLD"
[ "$(posts)" = 1 ] || fail "a refused update posted to the wrapper: $(cat "$WORK/wrapper.log")"

# 6. run mode: etcdbrctl is etcd's parent; the update happens, the flag warns, etcd stays
kill_member 2
write_conf "$NEW"
CLUSTER_EXTRA=(--listen-peer-urls "$OLD,$NEW") # etcd takes the last value of a repeated flag
ETCD_CONF=$WORK/etcd.conf.yaml POD_NAME=m2 run_member 2 existing "$INITIAL_CLUSTER" \
    --service-endpoints="$CLUSTER_EPS" --server-address=127.0.0.2 --data-dir="${MEMBER_DIR[2]}" \
    --reelection-period=2s --etcd-connection-timeout-leader-election=2s --use-etcd-wrapper
CLUSTER_EXTRA=()
LOG=$WORK/run-m2.log
wait_for_log "$LOG" "started etcd" 30
child=$(member_etcd_pid 2)
wait_for_log "$LOG" "updated the peer URLs of member m2" 30
grep "level=warning.*--use-etcd-wrapper has no effect under run" "$LOG" >/dev/null ||
    fail "run: no warning about --use-etcd-wrapper"
[ "$(m2_peer_urls)" = "$NEW" ] || fail "under run m2 has peer URLs $(m2_peer_urls), want $NEW"
[ "$(updates_applied)" = 3 ] || fail "etcd applied $(updates_applied) member updates, want 3"
sleep 1
[ "$(posts)" = 1 ] || fail "run posted to the wrapper: $(cat "$WORK/wrapper.log")"
[ -n "$child" ] && [ "$(member_etcd_pid 2)" = "$child" ] ||
    fail "run restarted its etcd child ($child, now $(member_etcd_pid 2))"
! grep "etcd exited\|etcd was killed" "$LOG" >/dev/null || fail "run: etcd stopped: $(cat "$LOG")"

# the cluster is whole: a write through m1 is read from m2 (now reached at its new URL)
etcdctl --endpoints="${MEMBER_EP[1]}" put /after-update ok >/dev/null
[ "$(etcdctl --endpoints="$EP2" get /after-update --print-value-only)" = ok ] ||
    fail "m2 does not serve the write made through m1"
echo "peer URL update: changed three times (one POST /stop, only from server with --use-etcd-wrapper), none when registered, without config or refused by etcd"
