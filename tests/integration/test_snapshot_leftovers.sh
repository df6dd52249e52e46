#!/usr/bin/env bash
# kill -9 during full snapshots (random points from a logged seed; ETCDBR_SEED replays one) leaves
# temp files behind: ".etcdbr-tmp-XXXXXX" in the Local store's v2/ (the one-pass full snapshot
# streams there; "etcdbr-full-XXXXXX" staging files in --snapstore-temp-directory come only from
# the staged fallback or older versions, and one is planted). The next snapshot removes them
# (issue 7 item 5): afterwards no stale temp
# file of ours remains, while files that only look like ours survive (other names, a symlink, a
# directory, a FIFO, and temp-named files another live process holds an flock on). The store
# still restores exactly.
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"
command -v flock >/dev/null || skip_test "no flock (util-linux)"
seed=${ETCDBR_SEED:-$(($(date +%s) % 32768))}
echo "seed=$seed"
RANDOM=$seed
start_etcd src "$WORK/src.etcd"
# ~25 MB of db: the stream, the check and the upload each take long enough for a kill to land
"$LOADGEN" "$ETCD_EP" puts 8000 3000 /big/ 64
"$LOADGEN" "$ETCD_EP" puts 100 100 /small/ 16
STORE=$WORK/store
TMPD=$WORK/snaptmp
mkdir -p "$STORE/v2" "$TMPD"

# a full snapshot is due at every start (@every 1s: the newest one is always older than that), so
# each run takes one even though the snapshotter resumes from the store's latest set
snap_bg() { # LOG: the binary itself in the background (kill -9 reaches it); sets SNAP_PID
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$STORE" --snapstore-temp-directory="$TMPD" \
        --schedule='@every 1s' --garbage-collection-period=0s --delta-snapshot-period=1s \
        >"$1" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
}
# our temp files by exact name pattern, regular files only
ours() { find "$1" -maxdepth 1 -type f -name "$2??????" | grep -E "/$2[A-Za-z0-9]{6}\$" | sort || true; }
stale_full() { ours "$TMPD" etcdbr-full-; }
stale_spool() { ours "$TMPD" delta-spool-; }
stale_store() { ours "$STORE/v2" .etcdbr-tmp-; }
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

# how long a full snapshot takes from the start of the process (the shorter of two runs into
# scratch stores): kill points are drawn from [5%, 95%] of it
dur_ms=0
for run in 1 2; do
    t0=$(date +%s%N)
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$WORK/timed$run" --snapstore-temp-directory="$WORK/timedtmp" \
        --schedule='0 0 1 1 *' --garbage-collection-period=0s >"$WORK/timed.log" 2>&1 &
    TPID=$!
    PIDS+=("$TPID")
    wait_for_log "$WORK/timed.log" "full snapshot Full-.* stored" 120
    d=$((($(date +%s%N) - t0) / 1000000))
    stop_pid "$TPID"
    [ "$dur_ms" = 0 ] || [ "$d" -lt "$dur_ms" ] && dur_ms=$d
done
echo "a full snapshot is stored ${dur_ms} ms after the start"

# kill -9 trials until a store leftover was seen (at least 6 trials, at most 24)
seen_store=0 trials=0
while [ "$trials" -lt 24 ]; do
    trials=$((trials + 1))
    delay_ms=$((dur_ms * 5 / 100 + RANDOM % (dur_ms * 90 / 100 + 1)))
    # a new revision: a trial that stored its full would make the next one skip it (no new
    # revision since, docs/snapshot.md), and its kill could not hit an upload
    ectl put "/leftovers/trial$trials" x >/dev/null
    snap_bg "$WORK/trial.log"
    sleep_ms "$delay_ms"
    kill -9 "$SNAP_PID" 2>/dev/null || true
    wait "$SNAP_PID" 2>/dev/null || true
    nf=$(stale_full | wc -l) ns=$(stale_store | wc -l)
    echo "trial $trials: kill -9 after ${delay_ms} ms: ${nf} etcdbr-full-*, ${ns} v2/.etcdbr-tmp-* present"
    [ "$ns" -gt 0 ] && seen_store=1
    [ "$trials" -ge 6 ] && [ "$seen_store" = 1 ] && break
done
# on a loaded machine random points may keep missing the upload: then kill as soon as the
# store's temp file appears (a tight poll, up to 60 s)
kill_when_present() { # NTH
    local pat=$STORE/v2/.etcdbr-tmp-?????? end=$((SECONDS + 60))
    ectl put "/leftovers/targeted-$1" x >/dev/null
    snap_bg "$WORK/trial.log"
    # a glob, no process per poll: the window may be a few milliseconds
    while [ "$SECONDS" -lt "$end" ] && ! compgen -G "$pat" >/dev/null; do
        kill -0 "$SNAP_PID" 2>/dev/null || break
    done
    kill -9 "$SNAP_PID" 2>/dev/null || true
    wait "$SNAP_PID" 2>/dev/null || true
    ns=$(stale_store | wc -l)
    echo "targeted trial $1: kill -9 once the store's temp file appeared: ${ns} v2/.etcdbr-tmp-* present"
    [ "$ns" -gt 0 ] && seen_store=1
    return 0
}
for k in 1 2 3; do [ "$seen_store" = 1 ] || kill_when_present "$k"; done
[ "$seen_store" = 1 ] || fail "no kill left a v2/.etcdbr-tmp-* file in $trials trials (seed $seed): the kills miss the upload"

# files that are not ours, or ours but alive, which the cleanup must leave alone
echo other >"$TMPD/someone-else.txt"
echo other >"$TMPD/etcdbr-full-notours"  # 7 characters after the prefix
echo other >"$TMPD/etcdbr-full-ABC"      # 3
echo target >"$WORK/link-target"
ln -s "$WORK/link-target" "$TMPD/etcdbr-full-SYMLNK"
ln -s "$WORK/link-target" "$STORE/v2/.etcdbr-tmp-SYMLNK"
mkdir "$TMPD/etcdbr-full-DIRXYZ" && echo inside >"$TMPD/etcdbr-full-DIRXYZ/etcdbr-full-INSIDE"
mkfifo "$TMPD/delta-spool-FIFO01"
echo other >"$STORE/v2/.etcdbr-tmp-short"
echo other >"$STORE/v2/etcdbr-tmp-ABCDEF"  # no leading dot: not ours
hold() {                                    # FILE: another live process holds an flock on it
    (
        exec 9>>"$1"
        flock -x 9
        : >"$1.held"
        exec sleep 600
    ) &
    PIDS+=("$!")
    local i
    for i in $(seq 1 100); do [ -e "$1.held" ] && break; sleep 0.05; done
    [ -e "$1.held" ] || fail "could not lock $1"
    rm -f "$1.held"
}
echo live >"$TMPD/etcdbr-full-HELD01"
hold "$TMPD/etcdbr-full-HELD01"
echo live >"$STORE/v2/.etcdbr-tmp-HELD02"
hold "$STORE/v2/.etcdbr-tmp-HELD02"
# a spool file of a process killed between creating and unlinking it: stale, no owner; and a
# staging file of the staged path (or an older version) killed mid-stream
head -c 5000 /dev/zero >"$TMPD/delta-spool-STALE1"
head -c 9000 /dev/zero >"$TMPD/etcdbr-full-STALE2"

before=$( (stale_full; stale_spool; stale_store) | grep -v HELD0)
echo "stale before the last run:"
echo "$before"

# a trial may have stored a full at etcd's current revision before its kill: a new revision
ectl put /leftovers/final x >/dev/null
snap_bg "$WORK/final.log"
wait_for_log "$WORK/final.log" "full snapshot Full-.* stored" 120
stop_snapshotter

after=$( (stale_full; stale_spool; stale_store) | grep -v HELD0 || true)
[ -z "$after" ] || {
    cat "$WORK/final.log"
    fail "stale temp files remain after a complete snapshot (seed $seed): $after"
}
for f in "$TMPD/someone-else.txt" "$TMPD/etcdbr-full-notours" "$TMPD/etcdbr-full-ABC" \
    "$TMPD/etcdbr-full-DIRXYZ/etcdbr-full-INSIDE" "$WORK/link-target" \
    "$STORE/v2/.etcdbr-tmp-short" "$STORE/v2/etcdbr-tmp-ABCDEF" \
    "$TMPD/etcdbr-full-HELD01" "$STORE/v2/.etcdbr-tmp-HELD02"; do
    [ -f "$f" ] || fail "$f was removed: not ours or still held"
done
[ -L "$TMPD/etcdbr-full-SYMLNK" ] || fail "a symlink named like our temp files was removed"
[ -L "$STORE/v2/.etcdbr-tmp-SYMLNK" ] || fail "a symlink named like our store temp files was removed"
[ -p "$TMPD/delta-spool-FIFO01" ] || fail "a FIFO named like our spool files was removed"
# every removal is logged with its path and size
while read -r f; do
    [ -n "$f" ] || continue
    grep -q "removed $f (.* bytes)" "$WORK/final.log" || fail "removal of $f not logged"
done <<<"$before"

dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
src_rev=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"
restore_store "$STORE" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || {
    cat "$WORK/restore.log"
    fail "restore failed"
}
start_etcd r "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$src_rev" ] || fail "restored revision differs"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "restored keyspace differs"
echo "$trials kill -9 trials (seed $seed): stale temp files removed, others kept, restore exact at revision $src_rev"
