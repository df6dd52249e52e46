#!/usr/bin/env bash
# `etcdbrctl run` without --endpoints, etcd started with its own --config-file: the snapshotter
# talks to the listen-client-urls of that file (a wildcard-free loopback URL here; the first of
# two), backs it up, and SIGTERM stops both with exit 0.
source "$(dirname "$0")/lib.sh"
make_workdir
CPORT=$(free_port)
CPORT2=$(free_port)
PPORT=$(free_port)
EP=http://127.0.0.1:$CPORT
cat >"$WORK/etcd.yaml" <<YAML
name: m1
data-dir: $WORK/m1.etcd
listen-client-urls: $EP,http://127.0.0.1:$CPORT2
advertise-client-urls: $EP
listen-peer-urls: http://127.0.0.1:$PPORT
initial-advertise-peer-urls: http://127.0.0.1:$PPORT
initial-cluster: m1=http://127.0.0.1:$PPORT
YAML
PORT=$(free_port)
"$ETCDBR_BIN" run --storage-provider=Local --store-container="$WORK/store" \
    --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" --data-dir="$WORK/m1.etcd" \
    --name=m1 --initial-cluster="m1=http://127.0.0.1:$PPORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$PPORT" \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" --delta-snapshot-period=1s \
    --schedule='0 0 1 1 *' --reelection-period=2s --garbage-collection-period=0s -- \
    etcd --config-file "$WORK/etcd.yaml" >"$WORK/run.log" 2>&1 &
RUN_PID=$!
PIDS+=("$RUN_PID")
ETCD_EP=$EP
wait_for_log "$WORK/run.log" "full snapshot Full-" 60
grep -q "endpoints from listen-client-urls of etcd's --config-file: $EP (and more)" "$WORK/run.log" ||
    fail "endpoints not taken from etcd's config file: $(grep -m1 'endpoints' "$WORK/run.log")"
for i in $(seq 1 10); do ectl put "/k/$i" "v$i" >/dev/null; done
rev=$(current_revision "$EP")
wait_backed_up "http://127.0.0.1:$PORT" "$rev" 30 # deltas every second
kill -TERM "$RUN_PID"
rc=0
wait "$RUN_PID" || rc=$?
[ "$rc" = 0 ] || fail "run exited $rc"
echo "run with etcd --config-file: endpoints from its listen-client-urls, backed up to revision $rev"
