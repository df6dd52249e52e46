#!/usr/bin/env bash
# `etcdbrctl server` keeps backing up when etcd is killed (-9) and started again: scheduled full
# snapshots and deltas carry on, /healthz is 200 again, and a restore of the store afterwards has
# every write. (A store that cannot be written: test_server_store_full.sh.)
source "$(dirname "$0")/lib.sh"
make_workdir

start_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 30); do ectl put "/k/a$i" "v$i" >/dev/null; done
PORT=$(free_port)
H=http://127.0.0.1:$PORT
run_server() { # extra flags
    "$ETCDBR_BIN" server --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$WORK/store" --snapstore-temp-directory="$WORK/snaptmp" \
        --server-port="$PORT" --data-dir="$WORK/m1.etcd" --name=m1 \
        --initial-cluster=m1=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --delta-snapshot-period=1s --reelection-period=2s --backoff-multiplier=1 \
        --backoff-threshold-time=2s "$@" >>"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
health() { curl -s -o /dev/null -w '%{http_code}' "$H/healthz"; }

run_server --schedule='@every 4s' --garbage-collection-period=0s
wait_for_log "$WORK/server.log" "full snapshot Full-"
kill -9 "$ETCD_PID"
wait "$ETCD_PID" 2>/dev/null || true
sleep 3
restart_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 10); do ectl put "/k/b$i" "v$i" >/dev/null; done
rev_after=$(current_revision "$ETCD_EP")
# a condition wait: up to 60 s (a full snapshot after etcd's restart goes through the
# snapshotter's backoff; under ThreadSanitizer on a loaded 2-core machine 20 s was once too few)
for i in $(seq 1 300); do
    # by revision, not by the second in the name: the server may store the full snapshot it
    # missed in the very second etcd came back
    fulls=$(ls "$WORK/store/v2" | awk -F- -v r="$rev_after" '/^Full-/ { if ($3 + 0 >= r) n++ } END { print n + 0 }')
    deltas=$(ls "$WORK/store/v2" | awk -F- -v r="$rev_after" '/^Incr-/ { if ($3 + 0 >= r) n++ } END { print n + 0 }')
    [ "$fulls" -ge 1 ] && [ "$deltas" -ge 1 ] && break
    sleep 0.2
done
[ "$fulls" -ge 1 ] && [ "$deltas" -ge 1 ] || {
    tail -30 "$WORK/server.log"
    fail "after the etcd restart: $fulls full, $deltas delta snapshots (store: $(ls "$WORK/store/v2" | tr '\n' ' '))"
}
[ "$(health)" = 200 ] || fail "not healthy after the etcd restart"
echo "etcd restarted: scheduled full and delta snapshots carry on"
for i in $(seq 1 5); do ectl put "/k/d$i" "v$i" >/dev/null; done
src_rev=$(current_revision "$ETCD_EP")
wait_backed_up "$H" "$src_rev"
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
kill "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" = 0 ] || fail "server exited $rc"
restore_store "$WORK/store" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; fail "restore failed"; }
stop_pid "$ETCD_PID"
start_etcd r "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "restored revision differs"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "restored keyspace differs"
echo "restore after the etcd restart: exact at revision $src_rev"

