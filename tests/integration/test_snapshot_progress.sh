#!/usr/bin/env bash
# A full snapshot that takes long is never silent for more than 5 s (issue 7 item 12): etcd is
# stopped (SIGSTOP) for 6.5 s in the middle of the Snapshot stream, and the log gets a progress
# line with bytes, the approximate total, rate and ETA while it waits. On a terminal (under
# script(1)) the progress is one line rewritten in place ("\r...\033[K").
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"
start_etcd src "$WORK/src.etcd"
trap 'kill -CONT "$ETCD_PID" 2>/dev/null || true; cleanup' EXIT
# ~40 MB of db: the stream lasts long enough to stop etcd in its middle
"$LOADGEN" "$ETCD_EP" puts 10000 4000 /big/ 64

# stall_stream STORE SECONDS: waits for the store's temp object (the one-pass full snapshot writes
# it as the stream comes; uncompressed, so it grows with the stream) to hold 1 MB (the stream
# flows), stops etcd for SECONDS, continues it
stall_stream() {
    local store=$1 secs=$2 end=$((SECONDS + 60))
    until find "$store/v2" -maxdepth 1 -name '.etcdbr-tmp-*' -size +1M 2>/dev/null | grep . >/dev/null; do
        [ "$SECONDS" -lt "$end" ] || fail "no full snapshot started in 60 s"
    done
    kill -STOP "$ETCD_PID"
    sleep "$secs"
    kill -CONT "$ETCD_PID"
}
num='[0-9]+(\.[0-9])? (B|KiB|MiB|GiB)' # binary units, one decimal (progress.h)
line_re="full snapshot: receiving from $ETCD_EP: $num of ~$num \([0-9]+%\), $num/s, ETA [0-9hms]+"

# not a terminal: log lines every 5 s. A stop that lands after the stream (the snapshot took
# less than 5 s) proves nothing: then again, at most 3 times.
for attempt in 1 2 3; do
    tmpd=$WORK/tmp$attempt
    start_snapshotter "$WORK/store$attempt" "$WORK/snap$attempt.log" --snapstore-temp-directory="$tmpd" \
        --compress-snapshots=false
    stall_stream "$WORK/store$attempt" 6.5
    wait_for_log "$WORK/snap$attempt.log" "full snapshot Full-.* stored" 60
    stop_snapshotter
    secs=$(sed -nE 's/.*full snapshot Full-.* stored: .*, ([0-9]+)\.[0-9]+s".*/\1/p' "$WORK/snap$attempt.log")
    [ "${secs:-0}" -ge 5 ] && break
    echo "attempt $attempt: the stop missed the stream (the snapshot took ${secs}s)"
    secs=""
done
[ -n "$secs" ] || fail "3 attempts to stop etcd during the stream missed it"
grep -v "etcdbrctl snapshot 0" "$WORK/snap$attempt.log"
grep -qE "$line_re" "$WORK/snap$attempt.log" ||
    fail "a ${secs}s full snapshot logged no progress line with bytes, total, rate and ETA"

# a terminal: a live line, redrawn 4 times a second
if command -v script >/dev/null; then
    tmpd=$WORK/tmptty
    script -qfec "$ETCDBR_BIN snapshot --endpoints=$ETCD_EP --storage-provider=Local \
        --store-container=$WORK/storetty --snapstore-temp-directory=$tmpd --schedule='0 0 1 1 *' --compress-snapshots=false \
        --garbage-collection-period=0s & echo \$! >$WORK/tty.pid; wait" "$WORK/tty.out" >/dev/null &
    SCRIPT_PID=$!
    PIDS+=("$SCRIPT_PID")
    stall_stream "$WORK/storetty" 1.5
    wait_for_log "$WORK/tty.out" "full snapshot Full-.* stored" 60
    kill -TERM "$(cat "$WORK/tty.pid")"
    wait "$SCRIPT_PID" || true
    grep -qaE $'\r'"$line_re"$'\033\\[K' "$WORK/tty.out" ||
        fail "no live progress line on a terminal: $(tr '\r' '\n' <"$WORK/tty.out" | grep -a receiving | head -3)"
else
    echo "script(1) not installed: the terminal line is not checked"
fi
echo "progress: logged during a ${secs}s full snapshot, live line on a terminal"
