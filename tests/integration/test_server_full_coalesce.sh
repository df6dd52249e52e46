#!/usr/bin/env bash
# `etcdbrctl server` against a real etcd, full snapshots on demand and on schedule:
#  - 50 concurrent /snapshot/full requests (25 POST, 25 GET) after writes store ONE new full
#    snapshot; all 50 get 200 and the same snapshot, the newest full in the store, at etcd's
#    revision;
#  - with --schedule every minute and no write since, the scheduled full snapshot is skipped and
#    logged ("no new revision since full <name>: skipped"); no object is stored, and garbage
#    collection (LimitBased, --max-backups=1, every 2 s) keeps that full as the newest;
#    /snapshot/full then answers that same full; the Full last-success metric moves on;
#  - after one write, the next scheduled full snapshot is stored again.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP
for i in $(seq 1 30); do ectl put "/registry/a/$i" "v$i" >/dev/null; done
PORT=$(free_port)
H=http://127.0.0.1:$PORT
"$ETCDBR_BIN" server --endpoints="$EP" --storage-provider=Local --store-container="$WORK/store" \
    --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" \
    --data-dir="$WORK/m1.etcd" --delta-snapshot-period=1s --schedule='* * * * *' \
    --reelection-period=2s --garbage-collection-period=2s \
    --garbage-collection-policy=LimitBased --max-backups=1 >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_healthz "$H" "$WORK/server.log"
wait_for_log "$WORK/server.log" "full snapshot Full-.* stored"
# full snapshots stored so far (GC removes older ones from the store: the log counts them all)
fulls() { grep -c "full snapshot Full-.* stored" "$WORK/server.log" || true; }
newest_full() { ls "$WORK/store/v2" | grep '^Full-' | sort -t- -k3,3n -k4,4n | tail -1; }

# 1. 50 concurrent requests after new writes: one new full snapshot, the same answer for all.
# Begun early in a minute, so that the scheduled full snapshot (at each minute) does not fall
# between the writes and the requests
for i in $(seq 1 700); do
    s=$((10#$(date +%S)))
    [ "$s" -ge 1 ] && [ "$s" -le 30 ] && break
    sleep 0.1
done
for i in $(seq 1 20); do ectl put "/registry/b/$i" "v$i" >/dev/null; done
rev=$(current_revision "$EP")
# the puts are stored by a delta (every second) first: the burst's full must be the only new one
for i in $(seq 1 100); do
    ls "$WORK/store/v2" | grep -q "^Incr-[0-9]*-0*$rev-" && break
    sleep 0.1
done
before=$(fulls)
pids=()
for j in $(seq 1 50); do
    if [ $((j % 2)) = 0 ]; then m=POST; else m=GET; fi
    curl -s -m 120 -X "$m" -o "$WORK/burst.$j" -w '%{http_code}\n' "$H/snapshot/full" >>"$WORK/burst.codes" &
    pids+=("$!")
done
wait "${pids[@]}"
[ "$(grep -c '^200$' "$WORK/burst.codes")" = 50 ] || fail "burst: $(sort "$WORK/burst.codes" | uniq -c | tr '\n' ' ')"
names=$(for j in $(seq 1 50); do jq -r .snapName "$WORK/burst.$j"; done | sort | uniq -c)
[ "$(echo "$names" | wc -l)" = 1 ] || fail "burst: 50 requests got different snapshots: $names"
name=$(jq -r .snapName "$WORK/burst.1")
jq -e ".kind == \"Full\" and .lastRevision == $rev" "$WORK/burst.1" >/dev/null || fail "burst answer: $(cat "$WORK/burst.1")"
after=$(fulls)
[ "$after" = $((before + 1)) ] || fail "burst: $((after - before)) new full snapshots for 50 requests (expected 1): $(grep "full snapshot Full-.* stored" "$WORK/server.log")"
[ "$(newest_full)" = "$name" ] || fail "burst answered $name, but the newest full in the store is $(newest_full)"
echo "50 concurrent /snapshot/full: 1 new full snapshot ($name at revision $rev), the same answer for all 50"

# 2. idle: the next scheduled full snapshot is skipped, and GC keeps the newest full
n_skip=$(grep -c "scheduled full snapshot at revision $rev: no new revision since full $name: skipped" "$WORK/server.log" || true)
for i in $(seq 1 900); do # up to 90 s: the schedule runs at each minute
    [ "$(grep -c "scheduled full snapshot at revision $rev: no new revision since full $name: skipped" "$WORK/server.log" || true)" -gt "$n_skip" ] && break
    sleep 0.1
done
grep -q "no new revision since full $name: skipped" "$WORK/server.log" ||
    { tail -20 "$WORK/server.log"; fail "no scheduled full snapshot was skipped on the idle cluster"; }
t_skip=$(date +%s)
[ "$(fulls)" = "$after" ] || fail "idle cluster: a scheduled full snapshot was stored again: $(grep "full snapshot Full-.* stored" "$WORK/server.log" | tail -2)"
[ "$(newest_full)" = "$name" ] || fail "idle cluster: the newest full in the store is $(newest_full), not $name"
grep -q "GC: removed old full snapshot" "$WORK/server.log" || fail "GC did not run (no older full removed)"
latest=$(curl -s "$H/snapshot/latest")
echo "$latest" | jq -e ".fullSnapshot.snapName == \"$name\"" >/dev/null || fail "after the skip, /snapshot/latest: $latest"
[ -e "$WORK/store/v2/$name" ] || fail "GC removed $name, the newest full, after the skip"
ok_ts=$(curl -s "$H/metrics" | awk '/^etcdbr_snapshot_last_success_timestamp_seconds\{kind="Full"\}/ { printf "%d", $2 }')
[ "${ok_ts:-0}" -ge $((t_skip - 5)) ] || fail "Full last-success metric not moved on by the skip: ${ok_ts:-none}, skip at $t_skip"
# an explicit request now answers the same full, and stores nothing
j=$(curl -s -X POST "$H/snapshot/full")
echo "$j" | jq -e ".snapName == \"$name\"" >/dev/null || fail "/snapshot/full on an idle cluster: $j (expected $name)"
[ "$(fulls)" = "$after" ] || fail "/snapshot/full on an idle cluster stored a full snapshot"
echo "idle cluster: scheduled full snapshot skipped, $name kept as the newest full (GC ran), /snapshot/full answers it"

# 3. one write: the next scheduled full snapshot is stored
ectl put /registry/c/1 v1 >/dev/null
rev2=$(current_revision "$EP")
for i in $(seq 1 900); do
    [ "$(fulls)" -gt "$after" ] && break
    sleep 0.1
done
[ "$(fulls)" -gt "$after" ] || { tail -20 "$WORK/server.log"; fail "after a write, no scheduled full snapshot was stored"; }
grep -q "full snapshot Full-[0-9]*-0*$rev2-.* stored" "$WORK/server.log" || fail "the new full snapshot is not at revision $rev2"
echo "after a write: the scheduled full snapshot at revision $rev2 was stored"

kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" = 0 ] || { tail -20 "$WORK/server.log"; fail "server exited $rc"; }
echo "server full coalesce: one full for 50 requests, none on an idle schedule, one after a write"
