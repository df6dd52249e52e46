#!/usr/bin/env bash
# Nothing silent (issue 7 item 4), `etcdbrctl server` against a real etcd:
# (1) --store-container without --storage-provider is the Local store: backups are taken and
#     etcdbr_snapshotter_store_configured is 1;
# (2) no store at all: a warning that no backups are taken at start and again every
#     --garbage-collection-period, and etcdbr_snapshotter_store_configured 0;
# (3) /initialization/start while etcd answers on the endpoint fails at once (status Failed, a log
#     line saying etcd is running), instead of waiting 120 s for the db lock;
# (4) with the db locked by a process that is not an answering etcd, the wait for the lock is
#     logged at once, and initialization goes on when the lock is released.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 20); do ectl put "/k/a$i" "v$i" >/dev/null; done

run_server() { # log port extra flags...
    local log=$1 port=$2
    shift 2
    "$ETCDBR_BIN" server --endpoints="$ETCD_EP" --snapstore-temp-directory="$WORK/snaptmp" \
        --server-port="$port" --data-dir="$WORK/m1.etcd" --name=m1 \
        --initial-cluster=m1=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$WORK/restore.tmp" --delta-snapshot-period=1s \
        --schedule='0 0 1 1 *' --reelection-period=2s "$@" >"$log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
metric() { # port name: the value of an unlabelled metric
    curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'
}

# (1) a container alone means Local
P1=$(free_port)
run_server "$WORK/s1.log" "$P1" --store-container="$WORK/store" --garbage-collection-period=0s
wait_for_log "$WORK/s1.log" "full snapshot Full-" 30
[ "$(count_objects "$WORK/store" Full)" -ge 1 ] || fail "(1) no full snapshot in $WORK/store"
[ "$(metric "$P1" etcdbr_snapshotter_store_configured)" = 1 ] || fail "(1) etcdbr_snapshotter_store_configured is not 1"
grep -q "no backups are taken" "$WORK/s1.log" && fail "(1) warned about no backups with a store"
S1=$SERVER_PID
echo "(1) --store-container alone: Local store, backups taken"

# (2) no store: a warning at start and every GC period, and the gauge says 0
P2=$(free_port)
run_server "$WORK/s2.log" "$P2" --garbage-collection-period=2s
S2=$SERVER_PID
wait_for_log "$WORK/s2.log" "no backups are taken" 10
sleep 4.5
n=$(grep -c "no backups are taken" "$WORK/s2.log")
[ "$n" -ge 2 ] || fail "(2) the no-store warning was logged $n times in 4.5 s with --garbage-collection-period=2s"
[ "$(metric "$P2" etcdbr_snapshotter_store_configured)" = 0 ] || fail "(2) etcdbr_snapshotter_store_configured is not 0"
stop_pid "$S2"
echo "(2) no store: warned $n times, gauge 0"

# (3) initialization while etcd runs on the data dir: fails at once
status() { curl -s "http://127.0.0.1:$P1/initialization/status"; }
curl -s -o /dev/null "http://127.0.0.1:$P1/initialization/start?mode=full"
st=""
for i in $(seq 1 50); do
    st=$(status)
    [ "$st" = Progress ] || break
    sleep 0.2
done
[ "$st" = Failed ] || fail "(3) initialization with etcd running ended '$st' (expected Failed within 10 s)"
grep -q "initialization refused: etcd is running" "$WORK/s1.log" || fail "(3) no log line saying etcd is running"
echo "(3) initialization with etcd running: Failed at once, log says why"

# (4) the db locked by a process that does not answer on the endpoint
stop_pid "$ETCD_PID"
db=$WORK/m1.etcd/member/snap/db
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "rb"); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(120)' \
    "$db" "$WORK/locked" &
LOCK_PID=$!
PIDS+=("$LOCK_PID")
for i in $(seq 1 50); do [ -e "$WORK/locked" ] && break; sleep 0.1; done
[ -e "$WORK/locked" ] || fail "(4) could not lock $db"
t0=$(date +%s)
curl -s -o /dev/null "http://127.0.0.1:$P1/initialization/start?mode=full"
wait_for_log "$WORK/s1.log" "waiting up to 120 s for the lock on $db" 5
[ "$(status)" = Progress ] || fail "(4) not in Progress while waiting for the lock"
stop_pid "$LOCK_PID"
st=""
for i in $(seq 1 100); do
    st=$(status)
    [ "$st" = Progress ] || break
    sleep 0.2
done
[ "$st" = Successful ] || { tail "$WORK/s1.log"; fail "(4) initialization ended '$st' after the lock was released"; }
[ $(($(date +%s) - t0)) -lt 60 ] || fail "(4) initialization took more than 60 s"
echo "(4) db locked: the wait was logged at once; initialization went on when the lock was released"
stop_pid "$S1"
