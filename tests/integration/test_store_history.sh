#!/usr/bin/env bash
# One store, one history (issue 7 item 3; docs/store-history.md), with real etcd processes:
#  1. a second cluster backing up into a store that holds another cluster's backups is refused
#     (exit 1, an error naming both clusters), both when it is ahead of the store and when it is
#     behind it; nothing is written, and a restore still gives the first cluster's keyspace;
#  2. two clusters that started together on an empty store and interleave their objects: a
#     restore gives exactly one cluster's keyspace, never a mix; a snapshotter of the other
#     cluster with garbage collection refuses and removes none of the first one's objects;
#  3. a deliberate restore to an older revision, then backing up the restored etcd into the same
#     store works (a fork); a restore of the latest set then gives the restored etcd's keyspace,
#     not the abandoned newer objects, which are kept in the store;
#  4. --abandon-other-histories: the refused cluster starts a new history; restore gives it.
source "$(dirname "$0")/lib.sh"
make_workdir

# snap_run STORE LOG [flags]: a snapshotter with deltas every second until stopped by the caller
snap_run() {
    local store=$1 log=$2
    shift 2
    start_snapshotter "$store" "$log" --delta-snapshot-period=1s "$@"
}


puts() { # puts PREFIX N
    local i
    for i in $(seq 1 "$2"); do ectl put "$1/$i" "v-$1-$i-$RANDOM" >/dev/null; done
}

restore_dump() { # restore_dump STORE NAME [restore flags]: restores, dumps to $WORK/NAME.jsonl
    local store=$1 name=$2
    shift 2
    restore_store "$store" "$WORK/$name.etcd" "$@" >"$WORK/$name-restore.log" 2>&1 ||
        { tail -20 "$WORK/$name-restore.log"; fail "restore $name failed"; }
    local ep=$ETCD_EP pid=$ETCD_PID
    start_etcd "r$name" "$WORK/$name.etcd"
    dump_keys "$ETCD_EP" >"$WORK/$name.jsonl"
    stop_pid "$ETCD_PID"
    ETCD_EP=$ep
    ETCD_PID=$pid
}

# --- 1. sequential: another cluster, ahead of and behind the store -----------------------------
S1=$WORK/store1
start_etcd a "$WORK/a.etcd"
EP_A=$ETCD_EP
A_PID=$ETCD_PID
puts /a 30
snap_run "$S1" "$WORK/a1.log"
puts /a2 15
rev_a=$(current_revision "$EP_A")
wait_stored "$WORK/a1.log" "$rev_a"
stop_snapshotter
dump_keys "$EP_A" >"$WORK/a.jsonl"
ls -R "$S1" | grep "record.json" >/dev/null || fail "no history record written"
[ "$(find "$S1/etcdbr/history" -type f -name 'Full-*' | wc -l)" = "$(count_objects "$S1" Full)" ] ||
    fail "not every full snapshot is tagged"
[ "$(find "$S1/etcdbr/history" -type f -name 'Incr-*' | wc -l)" = "$(count_objects "$S1" Incr)" ] ||
    fail "not every delta is tagged"

start_etcd b "$WORK/b.etcd"
EP_B=$ETCD_EP
B_PID=$ETCD_PID
puts /b 60 # ahead of the store
objects_before=$(ls "$S1/v2" | wc -l)
rc=0
"$ETCDBR_BIN" snapshot --endpoints="$EP_B" --storage-provider=Local --store-container="$S1" \
    --snapstore-temp-directory="$WORK/snaptmp" --delta-snapshot-period=1s \
    --garbage-collection-period=0s >"$WORK/b1.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { tail "$WORK/b1.log"; fail "another cluster ahead of the store: exit $rc, want 1"; }
grep -q "belong to another etcd cluster" "$WORK/b1.log" || { tail "$WORK/b1.log"; fail "the refusal does not say why"; }
grep -q "cluster [0-9a-f]\{16\}.*cluster [0-9a-f]\{16\}" "$WORK/b1.log" || fail "the refusal does not name both clusters"
[ "$(ls "$S1/v2" | wc -l)" = "$objects_before" ] || fail "the refused snapshotter wrote into the store"
restore_dump "$S1" s1
cmp -s "$WORK/a.jsonl" "$WORK/s1.jsonl" || fail "restore after a refused cluster differs from cluster a"

start_etcd c "$WORK/c.etcd" # a fresh cluster, behind the store's revision
EP_C=$ETCD_EP
ectl put /c/1 one >/dev/null
rc=0
"$ETCDBR_BIN" snapshot --endpoints="$EP_C" --storage-provider=Local --store-container="$S1" \
    --snapstore-temp-directory="$WORK/snaptmp" --garbage-collection-period=0s >"$WORK/c1.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { tail "$WORK/c1.log"; fail "a fresh cluster behind the store: exit $rc, want 1"; }
grep -q "Refusing to write" "$WORK/c1.log" || fail "the fresh cluster's refusal does not say so"
[ "$(ls "$S1/v2" | wc -l)" = "$objects_before" ] || fail "the fresh cluster wrote into the store"
echo "1. another cluster (ahead and behind) is refused with both named; nothing written"

# the server: /healthz 503 and etcdbr_snapshotter_store_conflict 1 while refusing
PORT=$(free_port)
HOME=$WORK/home "$ETCDBR_BIN" server --endpoints="$EP_C" --storage-provider=Local \
    --store-container="$S1" --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" \
    --delta-snapshot-period=1s --schedule='0 0 1 1 *' --garbage-collection-period=0s \
    >"$WORK/c-server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_for_log "$WORK/c-server.log" "Refusing to write"
for i in $(seq 1 50); do
    curl -s "http://127.0.0.1:$PORT/metrics" | grep "^etcdbr_snapshotter_store_conflict 1" >/dev/null && break
    sleep 0.2
done
curl -s "http://127.0.0.1:$PORT/metrics" | grep "^etcdbr_snapshotter_store_conflict 1" >/dev/null ||
    fail "server refusing the store: etcdbr_snapshotter_store_conflict is not 1"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz")
[ "$code" = 503 ] || fail "server refusing the store: /healthz $code, want 503"
stop_pid "$SERVER_PID"
[ "$(ls "$S1/v2" | wc -l)" = "$objects_before" ] || fail "the refusing server wrote into the store"
echo "1b. the server refusing the store: /healthz 503, etcdbr_snapshotter_store_conflict 1"

# --- 4. --abandon-other-histories ---------------------------------------------------------------
ETCD_EP=$EP_B
snap_run "$S1" "$WORK/b4.log" --abandon-other-histories
rev_b=$(current_revision "$EP_B")
wait_stored "$WORK/b4.log" "$rev_b"
puts /b4 5
rev_b=$(current_revision "$EP_B")
wait_stored "$WORK/b4.log" "$rev_b"
stop_snapshotter
grep -q "takeover" "$WORK/b4.log" || fail "no takeover logged"
dump_keys "$EP_B" >"$WORK/b.jsonl"
restore_dump "$S1" s4
cmp -s "$WORK/b.jsonl" "$WORK/s4.jsonl" || fail "restore after a takeover differs from cluster b"
[ "$(count_objects "$S1" Full)" -ge 2 ] || fail "cluster a's backups were removed by the takeover"
echo "4. --abandon-other-histories: cluster b's new history restores; a's objects are kept"

# --- 2. two clusters started together, interleaved ----------------------------------------------
# Both snapshotters find an empty store and start a history each. The race is made
# deterministic: each backs up into its own store, then e's objects (and tags) are copied into
# d's store, as if both had written there from the start.
S2=$WORK/store2
start_etcd d "$WORK/d.etcd"
EP_D=$ETCD_EP
start_etcd e "$WORK/e.etcd"
EP_E=$ETCD_EP
ETCD_EP=$EP_D
puts /d 20
ETCD_EP=$EP_E
puts /e 40
ETCD_EP=$EP_D
snap_run "$S2" "$WORK/d2.log"
D_SNAP=$SNAP_PID
ETCD_EP=$EP_E
snap_run "$WORK/store2e" "$WORK/e2.log"
E_SNAP=$SNAP_PID
wait_for_log "$WORK/d2.log" "full snapshot Full-"
wait_for_log "$WORK/e2.log" "full snapshot Full-"
ETCD_EP=$EP_D
puts /d2 60 # d's deltas pass e's full snapshot's revision
rev_d=$(current_revision "$EP_D")
wait_stored "$WORK/d2.log" "$rev_d"
ETCD_EP=$EP_E
puts /e2 10
rev_e=$(current_revision "$EP_E")
wait_stored "$WORK/e2.log" "$rev_e"
for p in $D_SNAP $E_SNAP; do kill -TERM "$p"; wait "$p" || true; done
cp -rn "$WORK/store2e/." "$S2/"
dump_keys "$EP_D" >"$WORK/d.jsonl"
dump_keys "$EP_E" >"$WORK/e.jsonl"
restore_dump "$S2" s2
cmp -s "$WORK/e.jsonl" "$WORK/s2.jsonl" ||
    fail "restore of two interleaved histories is not the newest full snapshot's cluster e ($(wc -l <"$WORK/s2.jsonl") keys; d $(wc -l <"$WORK/d.jsonl"), e $(wc -l <"$WORK/e.jsonl"))"
grep -q "other histories" "$WORK/s2-restore.log" || fail "the restore does not warn about the other history"
# d's snapshotter, with GC that would keep 1 full: refused, removes nothing
objects_before=$(find "$S2" -type f | sort)
rc=0
"$ETCDBR_BIN" snapshot --endpoints="$EP_D" --storage-provider=Local --store-container="$S2" \
    --snapstore-temp-directory="$WORK/snaptmp" --garbage-collection-period=2s \
    --garbage-collection-policy=LimitBased --max-backups=1 >"$WORK/gc2.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { tail "$WORK/gc2.log"; fail "cluster d's snapshotter: exit $rc, want 1"; }
[ "$(find "$S2" -type f | sort)" = "$objects_before" ] || fail "cluster d's snapshotter changed the store"
echo "2. two interleaved histories: restore gives cluster e exactly, d's deltas are left out; d is refused and removes nothing"

# --- 3. a deliberate restore to an older revision, then backing it up -----------------------------
S3=$WORK/store3
start_etcd f "$WORK/f.etcd"
EP_F=$ETCD_EP
puts /f 20
snap_run "$S3" "$WORK/f3.log"
wait_for_log "$WORK/f3.log" "full snapshot Full-"
puts /f2 20
fork_rev=$(current_revision "$EP_F")
wait_stored "$WORK/f3.log" "$fork_rev"
sleep 1.2 # the next delta in another second
puts /f3 30
rev_f=$(current_revision "$EP_F")
wait_stored "$WORK/f3.log" "$rev_f"
stop_snapshotter
stop_pid "$ETCD_PID"
newer=$(ls "$S3/v2" | sort)
restore_store "$S3" "$WORK/g.etcd" --revision="$fork_rev" >"$WORK/g-restore.log" 2>&1 ||
    { tail "$WORK/g-restore.log"; fail "restore --revision=$fork_rev failed"; }
start_etcd g "$WORK/g.etcd"
EP_G=$ETCD_EP
puts /g 10
snap_run "$S3" "$WORK/g3.log"
rev_g=$(current_revision "$EP_G")
wait_stored "$WORK/g3.log" "$rev_g"
puts /g2 5
rev_g=$(current_revision "$EP_G")
wait_stored "$WORK/g3.log" "$rev_g"
stop_snapshotter
grep -q "(fork)" "$WORK/g3.log" || { tail "$WORK/g3.log"; fail "backing up the restored etcd did not fork the history"; }
dump_keys "$EP_G" >"$WORK/g.jsonl"
for o in $newer; do [ -e "$S3/v2/$o" ] || fail "abandoned object $o was removed"; done
restore_dump "$S3" s3
cmp -s "$WORK/g.jsonl" "$WORK/s3.jsonl" || fail "restore after a fork differs from the restored etcd's keyspace"
grep -q "/f3/" "$WORK/s3.jsonl" && fail "the abandoned revisions came back"
echo "3. restore to revision $fork_rev, backed up as a fork: the latest restore is the fork's keyspace; abandoned objects kept"
