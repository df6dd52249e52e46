#!/usr/bin/env bash
# A store outage of 5 minutes (ETCDBR_OUTAGE_SECONDS, default 300) under a running snapshotter:
# S3 on s3rver behind tests/servers/fault_proxy.py, which answers every write (PUT, POST) with 503
# while the outage lasts; reads and deletes still work, so a GC that ignored the failing backups
# could delete. Before the outage there are three full snapshots and a LimitBased GC
# (--max-backups=1) that has not run yet. During it etcd keeps taking writes, and:
# - GC deletes nothing (no DELETE reaches the store; the objects are the same at both ends);
# - the failures are logged as errors with the retry delay;
# after it, backups resume on their own (no restart) and a restore has every write, the ones made
# during the outage included; then GC collects the old sets again.
source "$(dirname "$0")/lib.sh"
make_workdir
OUTAGE=${ETCDBR_OUTAGE_SECONDS:-300}
export ETCDBR_STORE_RETRY_BASE_MS=20
start_s3rver outage
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
start_fault_proxy "$S3_ENDPOINT" --outage "$WORK/outage-on:503:PUT,POST"
FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=etcd
    --store-endpoint-override="$PROXY_EP")
objects() { find "$WORK/s3rver/$S3_BUCKET/etcd/v2" -name '*._S3rver_object' -printf '%f\n' 2>/dev/null | sort; }

start_etcd src "$WORK/src.etcd"
SRC_EP=$ETCD_EP
for i in $(seq 1 20); do ectl put "/before/$i" "v$i" >/dev/null; done
"$ETCDBR_BIN" snapshot --endpoints="$SRC_EP" "${FLAGS[@]}" --snapstore-temp-directory="$WORK/snaptmp" \
    --schedule='@every 8s' --delta-snapshot-period=1s --garbage-collection-policy=LimitBased \
    --max-backups=1 --garbage-collection-period=40s --backoff-threshold-time=8s >"$WORK/snap.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
for i in $(seq 1 300); do
    [ "$(grep -c "full snapshot Full-.* stored" "$WORK/snap.log")" -ge 3 ] && break
    ectl put /tick "$i" >/dev/null
    sleep 0.1
done
[ "$(grep -c "full snapshot Full-.* stored" "$WORK/snap.log")" -ge 3 ] || fail "3 full snapshots were not taken"
grep -q "garbage collection" "$WORK/snap.log" && fail "GC ran before the outage (the test needs it not to)"
ectl put /before/last x >/dev/null
sleep 1.5
touch "$WORK/outage-on"
mark=$(wc -l <"$PROXY_LOG")
before=$(objects)
echo "outage of ${OUTAGE}s begins with $(wc -l <<<"$before") objects"
end=$(($(date +%s) + OUTAGE))
n=0
while [ "$(date +%s)" -lt "$end" ]; do
    n=$((n + 1))
    ectl put "/during/$n" "v$n" >/dev/null
    sleep 2
done
during=$(objects)
rm -f "$WORK/outage-on"
[ "$before" = "$during" ] || { diff <(echo "$before") <(echo "$during"); fail "the store changed during the outage"; }
if tail -n +"$((mark + 1))" "$PROXY_LOG" | grep "^req DELETE" >/dev/null; then
    fail "GC deleted during the outage: $(tail -n +"$((mark + 1))" "$PROXY_LOG" | grep '^req DELETE' | head -3)"
fi
[ "$(tail -n +"$((mark + 1))" "$PROXY_LOG" | grep -c '^outage')" -ge 10 ] || fail "the outage was not hit"
grep -q 'level=error.*HTTP 503.*retrying in' "$WORK/snap.log" || fail "the failures during the outage are not logged as errors"
gc_runs=$(grep -c "garbage collection" "$WORK/snap.log" || true)
echo "outage over: $n writes made during it, store unchanged, no DELETE sent ($gc_runs GC log lines)"

# backups resume on their own: a snapshot covering the current revision is stored
ectl put /after/1 x >/dev/null
want=$(current_revision "$SRC_EP")
for i in $(seq 1 600); do
    grep -q "snapshot \(Incr\|Full\)-[0-9]*-0*$want-.* stored" "$WORK/snap.log" && break
    sleep 0.1
done
grep -q "snapshot \(Incr\|Full\)-[0-9]*-0*$want-.* stored" "$WORK/snap.log" ||
    fail "backups did not resume after the outage (want revision $want): $(tail -3 "$WORK/snap.log")"
stop_snapshotter
dump_keys "$SRC_EP" >"$WORK/src.jsonl"
stop_pid "$ETCD_PID"
"$ETCDBR_BIN" restore "${FLAGS[@]}" --data-dir="$WORK/restored.etcd" --name=restored \
    --initial-cluster=restored=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" >"$WORK/restore.log" 2>&1 ||
    { cat "$WORK/restore.log"; fail "restore after the outage failed"; }
start_etcd restored "$WORK/restored.etcd"
dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
[ "$(current_revision "$ETCD_EP")" = "$want" ] || fail "restored revision $(current_revision "$ETCD_EP"), want $want"
cmp -s "$WORK/src.jsonl" "$WORK/restored.jsonl" || fail "the restore misses writes (those made during the outage?)"
grep -q "$(b64 "/during/$n")" "$WORK/restored.jsonl" || fail "the last write made during the outage is missing"
echo "PASS: a ${OUTAGE}s store outage: GC deleted nothing, backups resumed, restore exact at revision $want"
