#!/usr/bin/env bash
# A restore's download reports bytes done of the set's total (issue "operators' day one", item
# 5): the total is the sum of the objects' sizes as the store lists them (stored, compressed
# bytes), lines come every ETCDBR_PROGRESS_EVERY_MS (5 s by default; 10 ms here, so that a
# restore of a few hundred ms shows several), and one summary line when the last object is in.
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"
start_etcd src "$WORK/src.etcd"
# ~20 MB of incompressible values in the full snapshot (its download, decompression and hash
# take well over the 10 ms between lines), then deltas: a multi-object set
"$LOADGEN" "$ETCD_EP" puts 5000 4000 /big/ 64 random
start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-"
for round in 1 2 3; do
    "$LOADGEN" "$ETCD_EP" puts 200 1000 "/delta$round/" 16
    wait_stored "$WORK/snap.log" "$(current_revision "$ETCD_EP")"
done
stop_snapshotter
n_deltas=$(find "$WORK/store/v2" -name 'Incr-*' | wc -l)
[ "$n_deltas" -ge 3 ] || fail "want at least 3 deltas in the store, have $n_deltas"
total=$(find "$WORK/store/v2" -type f \( -name 'Full-*' -o -name 'Incr-*' \) -printf '%s\n' | awk '{s += $1} END {print s}')
# the total as progress.c prints it (binary units, one decimal)
human=$(awk -v b="$total" 'BEGIN { if (b < 1024) { printf "%d B", b; exit }
    split("KiB MiB GiB TiB", u, " "); v = b / 1024; i = 1
    while (v >= 1023.95 && i < 4) { v /= 1024; i++ }
    printf "%.1f %s", v, u[i] }')
echo "set: 1 full snapshot and $n_deltas deltas, $total bytes stored ($human)"

ETCDBR_PROGRESS_EVERY_MS=10 restore_store "$WORK/store" "$WORK/r.etcd" >"$WORK/restore.log" 2>&1 ||
    { tail -5 "$WORK/restore.log"; fail "restore failed"; }
what="downloading the backup set (full snapshot and $n_deltas deltas)"
what_re="downloading the backup set \\(full snapshot and $n_deltas deltas\\)"
num='[0-9]+(\.[0-9])? (B|KiB|MiB|GiB)'
grep -E "$what_re: $num of $human \([0-9]+%\), $num/s, ETA [0-9hms]+, [0-9]+ of $((n_deltas + 1)) objects" \
    "$WORK/restore.log" >"$WORK/lines" ||
    { grep -i download "$WORK/restore.log" | head -5; fail "no download progress line with bytes of the total $human, rate and ETA"; }
[ "$(wc -l <"$WORK/lines")" -ge 2 ] ||
    fail "one download progress line with ETCDBR_PROGRESS_EVERY_MS=10; want several: $(cat "$WORK/lines")"
grep -E "$what_re: done, $human of $human in [0-9hms]+, $num/s, $((n_deltas + 1)) of $((n_deltas + 1)) objects" \
    "$WORK/restore.log" >/dev/null ||
    { grep -i download "$WORK/restore.log" | tail -3; fail "no summary line with all $total bytes ($human) downloaded"; }
grep -q "restore done" "$WORK/restore.log" || fail "no 'restore done' line"
echo "progress: $(wc -l <"$WORK/lines") download lines, e.g.:"
sed -n 's/.*msg="\(.*\)"$/  \1/p' "$WORK/lines" | head -2
grep "$what: done" "$WORK/restore.log" | sed -n 's/.*msg="\(.*\)"$/  \1/p'
