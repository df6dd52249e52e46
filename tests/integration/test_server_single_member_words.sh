#!/usr/bin/env bash
# A single member's failures do not speak of leader handovers (issue "operators' day one",
# friction): after a new sidecar takes over the backups it re-lists the store before each delta
# for a while (the handover window, docs/server.md), in case another sidecar stored one
# meanwhile; a store failure then was reported as "listing the store (leader handover window)",
# which means nothing to the operator of a single member. `etcdbrctl server` against a real
# single-member etcd and a Local store that breaks (its directory replaced by a file) after the
# first full snapshot: the failure is logged in plain words, never "handover"; once the store is
# back the deltas reach it again.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 10); do ectl put "/k/a$i" "v$i" >/dev/null; done
PORT=$(free_port)
"$ETCDBR_BIN" server --endpoints="$ETCD_EP" --snapstore-temp-directory="$WORK/snaptmp" \
    --server-port="$PORT" --data-dir="$WORK/m1.etcd" --storage-provider=Local \
    --store-container="$WORK/store" --delta-snapshot-period=1s --schedule='0 0 1 1 *' \
    --reelection-period=2s --garbage-collection-period=0s >"$WORK/server.log" 2>&1 &
PIDS+=("$!")
wait_for_log "$WORK/server.log" "full snapshot Full-" 30
wait_for_log "$WORK/server.log" "became backup leader" 10

# the store breaks: its directory is now a file, so listing and writing fail
mv "$WORK/store" "$WORK/store.real"
echo "not a directory" >"$WORK/store"
ectl put /k/after-break x >/dev/null
# the failure is logged (and retried) several times: each attempt would re-list the store in a
# handover window
n=0
for i in $(seq 1 300); do
    n=$(grep -c 'level=error.*is not a directory' "$WORK/server.log" || true)
    [ "$n" -ge 3 ] && break
    sleep 0.1
done
[ "$n" -ge 3 ] || fail "the broken store was not reported 3 times in 30 s ($n): $(tail -3 "$WORK/server.log")"
if grep -in 'handover' "$WORK/server.log"; then
    fail "a single member spoke of a leader handover (lines above)"
fi

# the store comes back: the deltas reach it
rm "$WORK/store"
mv "$WORK/store.real" "$WORK/store"
rev=$(ectl put /k/after-repair y -w json | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
wait_backed_up "http://127.0.0.1:$PORT" "$rev" 60 || fail "revision $rev not backed up after the store came back"
if grep -in 'handover' "$WORK/server.log"; then
    fail "a single member spoke of a leader handover after the store came back (lines above)"
fi
echo "ok: one member, store broken and repaired, no handover words; revision $rev backed up"
