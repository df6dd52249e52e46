#!/usr/bin/env bash
# `etcdbrctl server --enable-profiling` against a real etcd and a Local store, with a bearer
# token: the documents under /debug/pprof/ (docs/server.md, "Profiling") need the token, parse as
# JSON and say true things about the process: RSS > 0, the server's named threads with states,
# the listening socket among the fds (its inode from /proc/net/tcp*), no store request in flight
# at rest; the last full snapshot's phases (names, non-negative, summing to its duration) after
# one was stored, the last delta's, and the restore's stages after an initialization restored a
# lost data dir. The text view, 404 and 405. Without the flag the paths are 404 like any other.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP
for i in $(seq 1 50); do ectl put "/registry/a/$i" "v$i" >/dev/null; done
TOKEN=profiling-token-0123456789
printf '%s\n' "$TOKEN" >"$WORK/token"
PORT=$(free_port)
H=http://127.0.0.1:$PORT
"$ETCDBR_BIN" server --endpoints="$EP" --storage-provider=Local --store-container="$WORK/store" \
    --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" \
    --data-dir="$WORK/m1.etcd" --name=m1 --initial-cluster="m1=http://127.0.0.1:2380" \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" \
    --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=2s \
    --garbage-collection-period=0s --enable-profiling \
    --server-auth-token-file="$WORK/token" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")

AUTH=(-H "Authorization: Bearer $TOKEN")
code() { curl -s -D "$WORK/headers" -o "$WORK/body" -w '%{http_code}' "$@"; }
expect() { # expect STATUS CURL-ARGS...: the status code and the body in $BODY
    local want=$1 got
    shift
    got=$(code "$@")
    BODY=$(cat "$WORK/body")
    [ "$got" = "$want" ] || { tail -20 "$WORK/server.log"; fail "$*: HTTP $got, expected $want ($BODY)"; }
}
# doc NAME: GET /debug/pprof/NAME with the token; must be 200 JSON; the document in $BODY
doc() {
    expect 200 "${AUTH[@]}" "$H/debug/pprof/$1"
    grep -qi '^content-type: application/json' "$WORK/headers" || fail "$1: not JSON: $(cat "$WORK/headers")"
    echo "$BODY" | jq -e . >/dev/null || fail "$1: does not parse as JSON: $BODY"
}

wait_healthz "$H" "$WORK/server.log"
wait_for_log "$WORK/server.log" "full snapshot Full-.* stored"
grep -q "profiling documents served under /debug/pprof/" "$WORK/server.log" || fail "start line does not say profiling is on"

# closed like every path but /healthz and /metrics
expect 401 "$H/debug/pprof/memory"
expect 401 "$H/debug/pprof/"
# the index names every document
doc ""
[ "$(echo "$BODY" | jq -c '[.documents[].path]')" = '["/debug/pprof/memory","/debug/pprof/threads","/debug/pprof/fds","/debug/pprof/store","/debug/pprof/phases"]' ] ||
    fail "index: $BODY"
for p in $(echo "$BODY" | jq -r '.documents[].path'); do doc "${p#/debug/pprof/}"; done
expect 404 "${AUTH[@]}" "$H/debug/pprof/heap-nope"
expect 405 "${AUTH[@]}" -X POST "$H/debug/pprof/memory"

# memory: resident, peak, heap
doc memory
# the heap comes from glibc's mallinfo2; a sanitizer build's allocator is not visible to it, and
# the document says so (source) with null figures rather than zeros
echo "$BODY" | jq -e '.rss_bytes > 0 and .rss_peak_bytes >= .rss_bytes and .vm_size_bytes >= .rss_bytes and .threads > 1 and
    (if .heap.source == "glibc mallinfo2" then .heap.in_use_bytes > 0 and .heap.arena_bytes > 0
     else (.heap.source | startswith("sanitizer")) and .heap.in_use_bytes == null end)' >/dev/null ||
    fail "memory: $BODY"
status_rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$SERVER_PID/status")
echo "$BODY" | jq -e --argjson s "$status_rss" '(.rss_bytes - $s) | fabs < 64 * 1048576' >/dev/null ||
    fail "memory: rss $(echo "$BODY" | jq .rss_bytes) far from /proc's $status_rss"

# threads: the main thread (tid = pid) and the server's named ones, each with a state
doc threads
echo "$BODY" | jq -e --argjson pid "$SERVER_PID" '.pid == $pid and .truncated == false and .count == (.threads | length) and any(.threads[]; .tid == $pid) and all(.threads[]; (.state | test("^[RSDTtZXIPWKx]$")) and .state_name != "unknown")' >/dev/null ||
    fail "threads: $BODY"
for name in http-sweeper snapshotter; do
    echo "$BODY" | jq -e --arg n "$name" 'any(.threads[]; .name == $n)' >/dev/null || fail "threads: no $name thread: $BODY"
done
[ "$(echo "$BODY" | jq .count)" = "$(ls "/proc/$SERVER_PID/task" | wc -l)" ] || fail "threads: count differs from /proc/$SERVER_PID/task"

# fds: the listening socket, by its inode in /proc/net/tcp6 or tcp (state 0A: LISTEN)
doc fds
hexport=$(printf '%04X' "$PORT")
inode=$(awk -v p=":$hexport" '$2 ~ p"$" && $4 == "0A" {print $10; exit}' "/proc/$SERVER_PID/net/tcp6" "/proc/$SERVER_PID/net/tcp")
[ -n "$inode" ] || fail "no listening socket on port $PORT in /proc/net"
echo "$BODY" | jq -e --arg t "socket:[$inode]" 'any(.fds[]; .target == $t) and .count >= (.fds | length) and .truncated == false' >/dev/null ||
    fail "fds: the listening socket socket:[$inode] is not listed: $BODY"

# store requests in flight: a number, 0 at rest (a Local store sends none)
doc store
echo "$BODY" | jq -e '(.in_flight | type) == "number" and .in_flight == 0 and .requests == [] and .started == .finished' >/dev/null ||
    fail "store: $BODY"

# the last full snapshot's phases, after one requested now (new revisions: one is taken)
for i in $(seq 1 30); do ectl put "/registry/b/$i" "$(head -c 2000 /dev/urandom | base64 -w0)" >/dev/null; done
expect 200 "${AUTH[@]}" "$H/snapshot/full"
snap=$(echo "$BODY" | jq -r .snapName)
doc phases
echo "$BODY" | jq -e --arg s "$snap" '.full.label == $s and .full.ok == true and .full.total_ms > 0 and all(.full.phases[]; .ms >= 0)' >/dev/null ||
    fail "phases: the full snapshot $snap: $BODY"
names=$(echo "$BODY" | jq -c '[.full.phases[].name]')
for n in prepare etcd_read check compress_encrypt upload history; do
    echo "$names" | jq -e --arg n "$n" 'index($n) != null' >/dev/null || fail "phases: full has no $n: $names"
done
# the phases cover the snapshot: their sum is its duration, within 5% or 5 ms
echo "$BODY" | jq -e '.full as $f | ([$f.phases[].ms] | add) as $s | ($s - $f.total_ms | fabs) <= ([5, 0.05 * $f.total_ms] | max) and ($s - $f.sum_ms | fabs) < 0.01' >/dev/null ||
    fail "phases: full snapshot phases do not sum to its duration: $BODY"
# and that duration is the one the log gives for that snapshot
log_s=$(grep -o "full snapshot $snap stored: .*, [0-9.]*s" "$WORK/server.log" | grep -o '[0-9.]*s$' | tr -d s)
[ -n "$log_s" ] || fail "no log line for $snap"
echo "$BODY" | jq -e --argjson l "$log_s" '(.full.total_ms - $l * 1000 | fabs) <= ([20, 0.1 * $l * 1000] | max)' >/dev/null ||
    fail "phases: full total $(echo "$BODY" | jq .full.total_ms) ms, the log says ${log_s}s"

# the last delta's phases
rev=$(current_revision "$EP")
ectl put /registry/c/1 v >/dev/null
wait_for_log "$WORK/server.log" "delta snapshot Incr-0*$((rev + 1))-0*$((rev + 1))-.* stored"
doc phases
echo "$BODY" | jq -e '.delta.ok == true and (.delta.label | startswith("Incr-")) and ([.delta.phases[].name] | index("collect") != null and index("upload") != null) and all(.delta.phases[]; .ms >= 0)' >/dev/null ||
    fail "phases: delta: $BODY"
[ "$(echo "$BODY" | jq .restore)" = null ] || fail "phases: a restore before any ran: $BODY"

# the text view: by ?format=text and by Accept
expect 200 "${AUTH[@]}" "$H/debug/pprof/memory?format=text"
grep -qi '^content-type: text/plain' "$WORK/headers" || fail "format=text: $(cat "$WORK/headers")"
echo "$BODY" | grep -Eq '^rss_bytes: [1-9][0-9]*$' || fail "text memory: $BODY"
expect 200 "${AUTH[@]}" -H "Accept: text/plain" "$H/debug/pprof/phases"
echo "$BODY" | grep -q "name=etcd_read ms=" || fail "text phases: $BODY"

# a lost data dir restored by initialization: the restore's stages
src_rev=$(current_revision "$EP")
for i in $(seq 1 150); do
    got=$(curl -s "${AUTH[@]}" "$H/snapshot/latest" | jq '[.fullSnapshot.lastRevision // 0, ((.deltaSnapshots // [])[-1].lastRevision // 0)] | max' 2>/dev/null || echo 0)
    [ "${got:-0}" -ge "$src_rev" ] && break
    sleep 0.2
done
[ "${got:-0}" -ge "$src_rev" ] || fail "the store does not reach revision $src_rev"
stop_pid "$ETCD_PID"
rm -rf "$WORK/m1.etcd"
expect 200 "${AUTH[@]}" "$H/initialization/start?mode=full"
for i in $(seq 1 150); do
    expect 200 "${AUTH[@]}" "$H/initialization/status"
    [ "$BODY" = Progress ] || break
    sleep 0.2
done
[ "$BODY" = Successful ] || { tail "$WORK/server.log"; fail "initialization ended $BODY"; }
doc phases
echo "$BODY" | jq -e '.restore.ok == true and .restore.total_ms > 0 and all(.restore.phases[]; .ms >= 0) and ([.restore.phases[].name] == ["plan","prepare","fetch","build","member_dirs","swap","cleanup"])' >/dev/null ||
    fail "phases: restore: $BODY"
echo "$BODY" | jq -e '.restore as $r | ([$r.phases[].ms] | add) as $s | ($s - $r.total_ms | fabs) <= ([5, 0.05 * $r.total_ms] | max)' >/dev/null ||
    fail "phases: restore stages do not sum to its duration: $BODY"
kill -0 "$SERVER_PID" || fail "server died"
stop_pid "$SERVER_PID"

# without the flag: 404 like any unknown path
PORT2=$(free_port)
"$ETCDBR_BIN" server --endpoints="$EP" --server-port="$PORT2" --reelection-period=2s \
    >"$WORK/server2.log" 2>&1 &
PIDS+=("$!")
for i in $(seq 1 100); do
    [ "$(code "http://127.0.0.1:$PORT2/metrics")" = 200 ] && break
    sleep 0.1
done
for p in /debug/pprof/ /debug/pprof/memory /debug/pprof/phases /debug/pprof; do
    expect 404 "http://127.0.0.1:$PORT2$p"
done
grep -q "profiling" "$WORK/server2.log" && fail "profiling mentioned without the flag: $(grep profiling "$WORK/server2.log")"
echo "profiling documents: memory, threads, fds, store, phases (full $snap, delta, restore) OK"
