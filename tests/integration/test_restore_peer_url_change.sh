#!/usr/bin/env bash
# After a restore, a member whose peer URL changed (a pod that came back with another IP) gets its
# registered peer URL fixed by the sidecar's start-up check (docs/restore.md "Peer URLs after a
# restore", docs/cluster.md "Peer URL update at start"): the member is restored with peer URL P1,
# its etcd starts on the restored data dir advertising and listening on P2 (etcd keeps the
# member list of the data dir: it still says P1), and `etcdbrctl server` with an etcd config file
# naming P2 updates the member to P2, once; the keys restored are intact. A second server start
# finds P2 registered and changes nothing.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 20); do ectl put "/k/$i" "v$i" >/dev/null; done
start_snapshotter "$WORK/store" "$WORK/snap.log"
wait_for_log "$WORK/snap.log" "full snapshot Full-"
stop_snapshotter
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
stop_pid "$ETCD_PID"

P1=http://127.0.0.1:$(free_port)
"$ETCDBR_BIN" restore --storage-provider=Local --store-container="$WORK/store" \
    --data-dir="$WORK/m1.etcd" --name=m1 --initial-cluster="m1=$P1" \
    --initial-advertise-peer-urls="$P1" --initial-cluster-token=restored \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" >"$WORK/restore.log" 2>&1 ||
    { cat "$WORK/restore.log"; fail "restore failed"; }

# etcd on the restored dir with another peer URL (start_etcd picks a free port for it)
start_etcd m1 "$WORK/m1.etcd"
P2=http://127.0.0.1:$ETCD_PEER_PORT
[ "$P1" != "$P2" ] || fail "the two peer URLs are the same: $P1"
peer_urls() { etcdctl --endpoints="$ETCD_EP" member list -w json | jq -r '.members[0].peerURLs | join(",")'; }
[ "$(peer_urls)" = "$P1" ] || fail "before the server: member list has $(peer_urls), want the restored $P1"
echo "restored with $P1; etcd advertises $P2; member list still says $P1"

printf 'name: m1\ninitial-advertise-peer-urls: %s\n' "$P2" >"$WORK/etcd.conf.yaml"
# run_server WAIT_FOR: the sidecar until its log has WAIT_FOR, then SIGTERM (exit 0 wanted)
N=0
run_server() {
    local pid rc=0
    N=$((N + 1))
    LOG=$WORK/server-$N.log
    ETCD_CONF=$WORK/etcd.conf.yaml "$ETCDBR_BIN" server --endpoints="$ETCD_EP" \
        --data-dir="$WORK/m1.etcd" --server-port="$(free_port)" --reelection-period=2s \
        --etcd-connection-timeout-leader-election=2s >"$LOG" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_for_log "$LOG" "$1" 30
    kill -TERM "$pid"
    wait "$pid" || rc=$?
    [ "$rc" = 0 ] || fail "server $N exited $rc: $(tail -3 "$LOG")"
}
run_server "updated the peer URLs of member m1"
grep -q "has peer URL $P2 that the member list does not (registered: $P1)" "$LOG" ||
    fail "server 1 did not log the comparison: $(grep -i 'peer url' "$LOG")"
[ "$(peer_urls)" = "$P2" ] || fail "after the server: member list has $(peer_urls), want $P2"
grep 'peer URL' "$LOG" | sed -n 's/.*msg="\(.*\)"$/  \1/p'

run_server "are registered ($P2): nothing to update"
! grep -q "updating the member's peer URLs" "$LOG" || fail "server 2 updated again"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "the restored keys changed"
echo "member list: $P1 -> $P2 by the server's start-up check; a second start changes nothing"
