#!/usr/bin/env bash
# `etcdbrctl server` when the store cannot be written (a full file system, a 48 MiB tmpfs): with
# more full snapshots in the store than --max-backups, snapshots fail and are retried with
# backoff, /healthz and metrics show it, garbage collection deletes nothing; when space returns,
# backups resume within one period and GC trims the store to --max-backups; a restore at the end
# has every write. Needs root for the tmpfs: without it the test is skipped (exit 77).
source "$(dirname "$0")/lib.sh"
make_workdir
mkdir -p "$WORK/store"
if ! mount -t tmpfs -o size=48m tmpfs "$WORK/store" 2>/dev/null; then
    skip_test "cannot mount a tmpfs for the full-disk case (needs root)"
fi
trap 'cleanup; umount "$WORK/store" 2>/dev/null || true; rm -rf "$WORK"' EXIT
KEEP_WORK=1 # the trap above removes it after unmounting

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

# three full snapshots (a full snapshot every second, with a write between)
run_server --schedule='@every 1s' --garbage-collection-period=0s
for i in $(seq 1 100); do
    [ "$(count_objects "$WORK/store" Full)" -ge 3 ] && break
    ectl put /k/tick "$i" >/dev/null
    sleep 0.2
done
kill "$SERVER_PID"
wait "$SERVER_PID" || true

# more full snapshots than --max-backups, then a full store
n_full_before=$(count_objects "$WORK/store" Full)
[ "$n_full_before" -ge 3 ] || fail "expected >= 3 full snapshots before the outage, got $n_full_before"
dd if=/dev/zero of="$WORK/store/fill" bs=1M status=none 2>/dev/null || true
run_server --schedule='@every 3s' --garbage-collection-policy=LimitBased --max-backups=1 \
    --garbage-collection-period=2s
for i in $(seq 1 10); do ectl put "/k/c$i" "v$i" >/dev/null; done
wait_for_log "$WORK/server.log" "retrying in" 30
sleep 6 # several GC periods while failing
[ "$(count_objects "$WORK/store" Full)" = "$n_full_before" ] || fail "GC deleted full snapshots while backups were failing"
[ "$(health)" = 503 ] || fail "healthz should be 503 while snapshots fail"
curl -s "$H/metrics" >"$WORK/metrics"
grep -E '^etcdbr_last_error_timestamp_seconds\{operation="(full|delta)_snapshot"\} [1-9]' "$WORK/metrics" >/dev/null || fail "last error timestamp not set"
grep -E '^etcdbr_snapshotter_failure\{error="[a-z_]+"\} [1-9]' "$WORK/metrics" >/dev/null || fail "snapshotter_failure not counted"
echo "store full: snapshots fail, healthz 503, metrics show it, GC deleted nothing"

rm -f "$WORK/store/fill"
t_back=$(date +%s)
for i in $(seq 1 60); do
    [ "$(health)" = 200 ] && [ "$(count_objects "$WORK/store" Full)" = 1 ] && break
    sleep 0.5
done
[ "$(health)" = 200 ] || fail "not healthy after the store came back"
[ "$(count_objects "$WORK/store" Full)" = 1 ] || fail "GC did not trim to --max-backups=1: $(ls "$WORK/store/v2")"
newest=$(ls "$WORK/store/v2" | grep '^Full-' | awk -F- '{ split($4, a, "."); print a[1] }')
[ "$newest" -ge "$t_back" ] || fail "the remaining full snapshot is not a new one"
echo "store back: backups resumed, GC trimmed to one full snapshot"
for i in $(seq 1 5); do ectl put "/k/d$i" "v$i" >/dev/null; done
sleep 2.5
src_rev=$(current_revision "$ETCD_EP")
wait_backed_up "$H" "$src_rev"
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
kill "$SERVER_PID"
wait "$SERVER_PID" || true
restore_store "$WORK/store" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; fail "restore failed"; }
stop_pid "$ETCD_PID"
start_etcd r "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "restored revision differs"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "restored keyspace differs"
echo "restore after all that: exact at revision $src_rev"
