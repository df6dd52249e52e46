#!/usr/bin/env bash
# A crash loop must not stop backups (issue 7 item 6). The snapshotter is killed (-9) again and
# again (at a random time after its first delta, within the time a full snapshot takes), while a
# writer keeps etcd busy and a scheduled full snapshot is always due (--schedule='@every 1s').
# Each restart must store the events since the store's latest set first (a delta, then the full
# snapshot; its first stored object is that delta): after the trials the
# store reaches at least the revision etcd had when the last trial started (on the old main, which
# began every run with a full snapshot, it stayed at the first full snapshot's revision), and
# the store restores exactly to etcd's keyspace at its last stored revision. Kill points come
# from a logged seed (ETCDBR_SEED replays one).
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"
seed=${ETCDBR_SEED:-$(($(date +%s) % 32768))}
echo "seed=$seed"
RANDOM=$seed
start_etcd src "$WORK/src.etcd" --auto-compaction-retention=0
# ~100 MB of random values: a full snapshot (receive, check, gzip, store) takes seconds
"$LOADGEN" "$ETCD_EP" puts 32000 3000 /big/ 64 >/dev/null
STORE=$WORK/store

snap_bg() { # LOG: the binary itself in the background (kill -9 reaches it); sets SNAP_PID
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$STORE" --snapstore-temp-directory="$WORK/snaptmp" \
        --schedule='@every 1s' --garbage-collection-period=0s --delta-snapshot-period=1s \
        >"$1" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
}
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }
stored_rev() { ls "$STORE/v2" 2>/dev/null | sed -E 's/^(Full|Incr)-[0-9]+-0*([0-9]+)-.*/\2/' | sort -n | tail -1; }

# the first full snapshot, timed: later kills land within that time after a restart
t0=$(date +%s%N)
snap_bg "$WORK/first.log"
wait_for_log "$WORK/first.log" "full snapshot Full-.* stored" 120
dur_ms=$((($(date +%s%N) - t0) / 1000000))
stop_snapshotter
echo "a full snapshot is stored ${dur_ms} ms after the start"
first_rev=$(stored_rev)

# a writer: small puts all the time
(
    i=0
    while :; do
        i=$((i + 1))
        etcdctl --endpoints="$ETCD_EP" put "/w/$((i % 50))" "v$i" >/dev/null 2>&1 || true
        sleep 0.02
    done
) &
WRITER=$!
PIDS+=("$WRITER")
sleep 2 # the newest full snapshot is now older than one schedule period

full_stored_in_trial=0
for trial in $(seq 1 8); do
    rev_start=$(current_revision "$ETCD_EP")
    # killed a random time after the catch-up delta is stored (waited for: proving the store's
    # chain is this cluster's reads the full snapshot first, which takes a loaded machine well
    # over a second), within the time a full snapshot takes
    delay_ms=$((RANDOM % (dur_ms * 60 / 100 + 1)))
    snap_bg "$WORK/t$trial.log"
    wait_for_log "$WORK/t$trial.log" "delta snapshot Incr-.* stored" 120
    first=$(grep -m1 -E "(full|delta) snapshot (Full|Incr)-.* stored" "$WORK/t$trial.log")
    case $first in
    *"delta snapshot Incr-"*) ;;
    *) fail "trial $trial: the restart stored a full snapshot before the catch-up delta: $first" ;;
    esac
    sleep_ms "$delay_ms"
    kill -9 "$SNAP_PID"
    wait "$SNAP_PID" 2>/dev/null || true
    grep -q "full snapshot Full-.* stored" "$WORK/t$trial.log" && full_stored_in_trial=$((full_stored_in_trial + 1))
    echo "trial $trial: killed ${delay_ms} ms after its first delta; etcd was at $rev_start at the start, the store reaches $(stored_rev)"
done
last_start=$rev_start
kill "$WRITER"
wait "$WRITER" 2>/dev/null || true
got=$(stored_rev)
[ "$got" -ge "$last_start" ] ||
    fail "after 8 restarts the store reaches revision $got, before $last_start (etcd's at the last start; first full snapshot $first_rev; $full_stored_in_trial trials finished a full snapshot)"
echo "the store reaches revision $got >= $last_start ($full_stored_in_trial of 8 trials finished a full snapshot)"

# the store restores exactly to etcd's keyspace at that revision
restore_store "$STORE" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 ||
    { tail -20 "$WORK/restore.log"; fail "restore failed"; }
etcdctl --endpoints="$ETCD_EP" get "" --from-key --rev="$got" -w json |
    jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version}' >"$WORK/src.jsonl"
SRC_EP=$ETCD_EP
start_etcd restored "$WORK/restored.etcd"
dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
cmp -s "$WORK/src.jsonl" "$WORK/restored.jsonl" || fail "the restore differs from etcd at revision $got"
[ "$(current_revision "$ETCD_EP")" = "$got" ] || fail "restored revision $(current_revision "$ETCD_EP"), want $got"
echo "restored: $(wc -l <"$WORK/restored.jsonl") keys at revision $got, equal to $SRC_EP at that revision"
