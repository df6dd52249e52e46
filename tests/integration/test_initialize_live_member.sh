#!/usr/bin/env bash
# `etcdbrctl initialize` pointed at a live member's data dir (issue 17 item 5) exits at once with
# a message naming the lock, instead of waiting 120 s in silence for etcd's lock on the db; the
# data dir and the running etcd are left alone. A real etcd 3.4 holds the flock on member/snap/db
# (bbolt) and a lock on its WAL files; then (b) a process holding only a record lock on a WAL file
# (as etcd's fileutil.LockFile takes it) is refused too, and (c) once it lets go, initialize runs.
source "$(dirname "$0")/lib.sh"
make_workdir
STORE=$WORK/store
DATA=$WORK/m1.etcd
start_etcd m1 "$DATA"
for i in $(seq 1 30); do ectl put "/k/a$i" "v$i" >/dev/null; done
start_snapshotter "$STORE" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-" 30
stop_snapshotter
rev=$(current_revision "$ETCD_EP")

# initialize DATA_DIR LOG: exit status in INIT_RC, seconds taken in INIT_SECS
initialize() {
    local t0 t1
    INIT_RC=0
    t0=$(date +%s.%N)
    timeout 60 "$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$STORE" \
        --snapstore-temp-directory="$WORK/init-tmp" --data-dir="$1" --name=m1 \
        --initial-cluster=m1=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$1.tmp" >"$2" 2>&1 || INIT_RC=$?
    t1=$(date +%s.%N)
    INIT_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
}
at_once() { awk -v s="$1" 'BEGIN { exit !(s < 5) }'; }

# (a) etcd runs on the data dir
initialize "$DATA" "$WORK/a.log"
echo "(a) live etcd: initialize exit $INIT_RC after $INIT_SECS s"
[ "$INIT_RC" = 1 ] || fail "(a) initialize exited $INIT_RC, want 1: $(tail -3 "$WORK/a.log")"
at_once "$INIT_SECS" || fail "(a) initialize took $INIT_SECS s on a live member's data dir"
grep -q "level=error.*data dir $DATA is in use: another process holds the lock on $DATA/member/" "$WORK/a.log" ||
    fail "(a) no clear message: $(grep level=error "$WORK/a.log")"
ls -d "$DATA".* 2>/dev/null | grep -v '\.tmp$' && fail "(a) something was made next to the data dir"
etcdctl --endpoints="$ETCD_EP" endpoint health >/dev/null 2>&1 || fail "(a) etcd is not healthy after initialize"
[ "$(current_revision "$ETCD_EP")" = "$rev" ] || fail "(a) etcd's revision changed"
kill -0 "$ETCD_PID" || fail "(a) etcd died"

# (b) etcd stopped, a record lock on a WAL file held by another process
stop_pid "$ETCD_PID"
wal=$(ls "$DATA"/member/wal/*.wal | tail -1)
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "r+b"); fcntl.lockf(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(300)' \
    "$wal" "$WORK/locked" &
LOCK_PID=$!
PIDS+=("$LOCK_PID")
for i in $(seq 1 50); do [ -e "$WORK/locked" ] && break; sleep 0.1; done
[ -e "$WORK/locked" ] || fail "(b) could not lock $wal"
initialize "$DATA" "$WORK/b.log"
echo "(b) WAL locked: initialize exit $INIT_RC after $INIT_SECS s"
[ "$INIT_RC" = 1 ] || fail "(b) initialize exited $INIT_RC, want 1: $(tail -3 "$WORK/b.log")"
at_once "$INIT_SECS" || fail "(b) initialize took $INIT_SECS s"
grep -q "level=error.*is in use: another process holds the lock on $wal" "$WORK/b.log" ||
    fail "(b) the message does not name the WAL file: $(grep level=error "$WORK/b.log")"

# (c) the lock released: initialize validates the data dir and succeeds
stop_pid "$LOCK_PID"
initialize "$DATA" "$WORK/c.log"
[ "$INIT_RC" = 0 ] || fail "(c) initialize exited $INIT_RC once the lock was released: $(tail -3 "$WORK/c.log")"
restart_etcd m1 "$DATA"
[ "$(current_revision "$ETCD_EP")" = "$rev" ] || fail "(c) the data dir's revision changed"
echo "PASS: initialize refuses a live member's data dir at once"
