#!/usr/bin/env bash
# Cluster identity (issue 17, "Cluster identity"; docs/snapshot.md "Continuing a chain"), with two
# real etcd clusters A and B writing seeded random histories (the seed is logged; SEED=... replays):
#  1. A backs up into a store, then its history tags are removed (an untagged chain, as the Go
#     tool leaves it). B, ahead of A's last revision, is started (server) on that store: it must
#     not continue A's chain. It logs one line naming A's last object and the reason, counts
#     etcdbr_snapshot_chain_rejected_total{reason="mismatch"}, takes a full snapshot first, and a
#     restore of the store equals B's keyspace, revision and HashKV.
#  2. The same for a chain that is only a full snapshot (the proof reads the full's db): A refuses
#     B's full-only chain, B continues it with deltas.
#  3. B restarted on its own chain with the tags removed continues it: no new full snapshot, the
#     metric stays 0, and the restore equals B again.
#  4. verify on a mixed chain built by copying objects (A's full + B's deltas, contiguous by
#     name) fails, naming B's first delta.
#  5. A's own chain whose last revision etcd has compacted cannot be proven, but its history was
#     started by A's cluster: it continues with a full snapshot first (not counted as rejected),
#     the restore equals A. 5b: the same chain untagged (as the Go tool writes it), compacted
#     again, is rejected ("compacted"), a full snapshot starts a new history, the restore equals A.
source "$(dirname "$0")/lib.sh"
make_workdir
SEED=${ETCDBR_SEED:-${SEED:-$(((RANDOM << 15) | RANDOM))}}
echo "seed $SEED (ETCDBR_SEED=$SEED replays the writes)"
RANDOM=$SEED

# writes PREFIX N: N seeded writes under PREFIX (puts of 12 keys, some deletes of live ones),
# every one a new revision; the first 12 create the keys
declare -A LIVE=()
writes() {
    local p=$1 n=$2 i k
    for i in $(seq 1 "$n"); do
        k="$p/$((RANDOM % 12))"
        if [ -n "${LIVE[$k]:-}" ] && [ $((RANDOM % 5)) = 0 ]; then
            ectl del "$k" >/dev/null
            unset "LIVE[$k]"
        else
            ectl put "$k" "v-$SEED-$i-$RANDOM" >/dev/null
            LIVE[$k]=1
        fi
    done
}


# backup STORE LOG REV: the snapshot command until REV is stored, then a clean stop
backup() {
    start_snapshotter "$1" "$2" --delta-snapshot-period=1s
    wait_stored "$2" "$3"
    stop_snapshotter
}

# run_server STORE LOG: `etcdbrctl server` for the etcd at $ETCD_EP (sets SERVER_PID, H)
run_server() {
    local port
    port=$(free_port)
    H=http://127.0.0.1:$port
    "$ETCDBR_BIN" server --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$1" --snapstore-temp-directory="$WORK/snaptmp" \
        --server-port="$port" --schedule='0 0 1 1 *' --delta-snapshot-period=1s \
        --garbage-collection-period=0s >"$2" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}

# rejected REASON: the server's etcdbr_snapshot_chain_rejected_total{reason=REASON}
rejected() {
    curl -sf "$H/metrics" | awk -v r="etcdbr_snapshot_chain_rejected_total{reason=\"$1\"}" \
        '$1 == r {print $2; f=1} END {if (!f) print "missing"}'
}

untag() { rm -rf "$1/etcdbr"; } # the history tree: records and tags

# restored_equals STORE EP NAME: a restore of STORE equals the etcd at EP: keys, revision, HashKV
restored_equals() {
    local store=$1 ep=$2 name=$3 rev
    rev=$(current_revision "$ep")
    dump_keys "$ep" >"$WORK/$name.want"
    rm -rf "$WORK/$name.etcd" "$WORK/$name.etcd.tmp"
    restore_store "$store" "$WORK/$name.etcd" >"$WORK/$name.restore.log" 2>&1 ||
        { cat "$WORK/$name.restore.log"; fail "$name: restore failed"; }
    local save_ep=$ETCD_EP save_pid=$ETCD_PID
    start_etcd "$name" "$WORK/$name.etcd"
    dump_keys "$ETCD_EP" >"$WORK/$name.got"
    cmp -s "$WORK/$name.want" "$WORK/$name.got" ||
        { diff "$WORK/$name.want" "$WORK/$name.got" | head -10; fail "$name: the restore is not the keyspace of $ep"; }
    [ "$(current_revision "$ETCD_EP")" = "$rev" ] ||
        fail "$name: restored revision $(current_revision "$ETCD_EP"), want $rev"
    local h1 h2
    h1=$(etcdctl --endpoints="$ep" endpoint hashkv --rev="$rev" -w json | jq -r '.[0].HashKV.hash')
    h2=$(ectl endpoint hashkv --rev="$rev" -w json | jq -r '.[0].HashKV.hash')
    [ "$h1" = "$h2" ] || fail "$name: HashKV at $rev: restored $h2, live $h1"
    stop_pid "$ETCD_PID"
    ETCD_EP=$save_ep ETCD_PID=$save_pid
    echo "$name: restore equals $ep at revision $rev (HashKV $h1)"
}

# --- A: a chain of a full snapshot and deltas (revisions 2-31 in the full, 32-51 in deltas)
start_etcd a "$WORK/a.etcd"
A_EP=$ETCD_EP
writes /a 30
start_snapshotter "$WORK/shared" "$WORK/a1.log" --delta-snapshot-period=1s
wait_stored "$WORK/a1.log" 31
writes /a 20
wait_stored "$WORK/a1.log" 51
stop_snapshotter
RA=$(current_revision "$A_EP")
untag "$WORK/shared"
A_LAST=$(ls "$WORK/shared/v2" | grep '^Incr-' | sort -t- -k3,3n | tail -1)

# --- B: its own store (full at 31, deltas 32-61), then ahead of A's chain
start_etcd b "$WORK/b.etcd"
B_EP=$ETCD_EP
unset LIVE
declare -A LIVE=()
writes /b 30
start_snapshotter "$WORK/bstore" "$WORK/b1.log" --delta-snapshot-period=1s
wait_stored "$WORK/b1.log" 31
writes /b 30
wait_stored "$WORK/b1.log" 61
stop_snapshotter
[ "$(current_revision "$B_EP")" -gt "$RA" ] || fail "B must be ahead of A's chain ($RA)"

# 1. B's server on A's untagged chain
run_server "$WORK/shared" "$WORK/b2.log"
wait_for_log "$WORK/b2.log" "full snapshot Full-.* stored" 60
grep -q "resuming from" "$WORK/b2.log" && fail "B resumed A's chain: $(grep 'resuming from' "$WORK/b2.log")"
grep -q "not continuing the store's chain ending with .*$A_LAST (history untagged): .*(mismatch); taking a full snapshot that starts a new history" "$WORK/b2.log" ||
    { tail -20 "$WORK/b2.log"; fail "no log line naming A's last object $A_LAST and the reason"; }
[ "$(rejected mismatch)" = 1 ] || fail "etcdbr_snapshot_chain_rejected_total{reason=\"mismatch\"} is $(rejected mismatch), want 1"
writes /b 15
wait_backed_up "$H" "$(current_revision "$B_EP")" 60
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
restored_equals "$WORK/shared" "$B_EP" shared1
echo "1. B did not continue A's untagged chain: logged, counted, full first, restore is B's"

# 2. a chain that is only a full snapshot: B's full at 31, untagged
mkdir -p "$WORK/fonly/v2"
cp "$WORK/bstore/v2/$(ls "$WORK/bstore/v2" | grep '^Full-' | head -1)" "$WORK/fonly/v2/"
cp -r "$WORK/fonly" "$WORK/fonly-a"
ETCD_EP=$A_EP
start_snapshotter "$WORK/fonly-a" "$WORK/a2.log" --delta-snapshot-period=1s
wait_for_log "$WORK/a2.log" "full snapshot Full-.* stored" 60
stop_snapshotter
grep -q "not continuing the store's chain ending with .*Full-.*(mismatch)" "$WORK/a2.log" ||
    { tail -20 "$WORK/a2.log"; fail "A continued B's full-only chain"; }
ETCD_EP=$B_EP
start_snapshotter "$WORK/fonly" "$WORK/b3.log" --delta-snapshot-period=1s
wait_for_log "$WORK/b3.log" "resuming from .*Full-" 60
wait_stored "$WORK/b3.log" "$(current_revision "$B_EP")"
stop_snapshotter
[ "$(count_objects "$WORK/fonly" Full)" = 1 ] || fail "B took a full snapshot on its own full-only chain"
grep -q "is this cluster's history" "$WORK/b3.log" || fail "no proof logged for B's full-only chain"
restored_equals "$WORK/fonly" "$B_EP" fonly
echo "2. a full-only chain: A refuses B's, B continues its own with deltas"

# 3. B restarted on its own chain, tags removed: continued without a new full snapshot
untag "$WORK/shared"
n_full=$(count_objects "$WORK/shared" Full)
run_server "$WORK/shared" "$WORK/b4.log"
wait_for_log "$WORK/b4.log" "resuming from" 60
writes /b 10
wait_backed_up "$H" "$(current_revision "$B_EP")" 60
for r in mismatch compacted ahead unreadable; do
    [ "$(rejected "$r")" = 0 ] || fail "B's own chain counted as rejected ($r: $(rejected "$r"))"
done
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
[ "$(count_objects "$WORK/shared" Full)" = "$n_full" ] || fail "B took a full snapshot on its own untagged chain"
restored_equals "$WORK/shared" "$B_EP" shared2
echo "3. B continued its own untagged chain with deltas only"

# 4. verify on a mixed chain: A's full at 31 and B's deltas from 32 (copied objects)
mkdir -p "$WORK/mixed/v2"
cp "$WORK/shared/v2/$(ls "$WORK/shared/v2" | grep '^Full-' | sort -t- -k3,3n | head -1)" "$WORK/mixed/v2/"
for f in $(ls "$WORK/bstore/v2" | grep '^Incr-'); do cp "$WORK/bstore/v2/$f" "$WORK/mixed/v2/"; done
B_FIRST=$(ls "$WORK/mixed/v2" | grep '^Incr-' | sort -t- -k2,2n | head -1)
grep -q "Full-00000000-00000031-" <(ls "$WORK/mixed/v2") || fail "A's full is not at revision 31: $(ls "$WORK/mixed/v2")"
rc=0
"$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/mixed" \
    --snapstore-temp-directory="$WORK/snaptmp" >"$WORK/verify.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || { cat "$WORK/verify.log"; fail "verify passed a chain of A's full and B's deltas"; }
grep -q "inconsistent-events\|does not continue the keyspace" "$WORK/verify.log" ||
    { cat "$WORK/verify.log"; fail "verify did not report the foreign events"; }
grep "does not continue the keyspace" "$WORK/verify.log" | grep -q "$B_FIRST" ||
    { cat "$WORK/verify.log"; fail "verify did not name B's first delta $B_FIRST"; }
# the same objects in their own chains pass
"$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/bstore" \
    --snapstore-temp-directory="$WORK/snaptmp" >"$WORK/verify-b.log" 2>&1 ||
    { cat "$WORK/verify-b.log"; fail "verify failed B's own chain"; }
echo "4. verify fails the mixed chain, naming $B_FIRST; B's own chain passes"
# 5. A's own chain whose last revision etcd has compacted: no proof is possible, but the history
#    was started by A's cluster (its record's cluster ID), so it continues, with a full first
ETCD_EP=$A_EP
ra=$(current_revision "$A_EP")
[ "$(ls "$WORK/fonly-a/v2" | grep -c "^Full-00000000-0*$ra-")" = 1 ] || fail "A's full at $ra missing: $(ls "$WORK/fonly-a/v2")"
hist_a=$(cd "$WORK/fonly-a/etcdbr/history" && ls -d */Full-00000000-*"$ra"-* | cut -d/ -f1)
[ -n "$hist_a" ] || fail "A's full at $ra has no history tag"
writes /a 2
ectl compact "$(current_revision "$A_EP")" >/dev/null
writes /a 1 # HashKV needs a revision after the compacted one
ra2=$(current_revision "$A_EP")
n_full=$(count_objects "$WORK/fonly-a" Full)
run_server "$WORK/fonly-a" "$WORK/a3.log"
wait_for_log "$WORK/a3.log" "full snapshot Full-.* stored" 60
grep -q "chain ending with .*Full-00000000-0*$ra-.*cannot be compared with etcd: etcd has compacted revision $ra; its history $hist_a was started by this etcd cluster" "$WORK/a3.log" ||
    { tail -20 "$WORK/a3.log"; fail "A's compacted chain: no log line with the reason"; }
[ "$(rejected compacted)" = 0 ] || fail "A's own compacted chain counted as rejected"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
[ "$(count_objects "$WORK/fonly-a" Full)" = $((n_full + 1)) ] || fail "no new full snapshot for A's compacted chain"
ls "$WORK/fonly-a/etcdbr/history/$hist_a/" | grep -q "^Full-00000000-0*$ra2-" ||
    fail "A's new full at $ra2 is not in its history $hist_a: $(ls -R "$WORK/fonly-a/etcdbr/history")"
restored_equals "$WORK/fonly-a" "$A_EP" fonlya
echo "5. A's own chain whose last revision is compacted: logged, its history continued, full first"

# 5b. the same chain untagged (as the Go tool writes it), its last revision compacted: nothing
#     tells whose it is, so it is rejected ("compacted") and a full starts a new history; the
#     untagged objects stay (not ours to collect)
cp -r "$WORK/fonly-a" "$WORK/fonly-b"
untag "$WORK/fonly-b"
writes /a 2
ectl compact "$(current_revision "$A_EP")" >/dev/null
writes /a 1
n_full=$(count_objects "$WORK/fonly-b" Full)
run_server "$WORK/fonly-b" "$WORK/a5.log"
wait_for_log "$WORK/a5.log" "full snapshot Full-.* stored" 60
grep -q "not continuing the store's chain ending with .*Full-00000000-0*$ra2-.*etcd has compacted revision $ra2 (compacted)" "$WORK/a5.log" ||
    { tail -20 "$WORK/a5.log"; fail "A's untagged compacted chain: no log line with the reason"; }
[ "$(rejected compacted)" = 1 ] || fail "etcdbr_snapshot_chain_rejected_total{reason=\"compacted\"} is $(rejected compacted), want 1"
[ "$(rejected mismatch)" = 0 ] || fail "a compacted chain counted as a mismatch"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || true
[ "$(count_objects "$WORK/fonly-b" Full)" = $((n_full + 1)) ] || fail "no new full snapshot on the untagged compacted chain"
restored_equals "$WORK/fonly-b" "$A_EP" fonlyb
echo "5b. an untagged chain whose last revision is compacted: logged, counted as compacted, full first"
echo "PASS (seed $SEED)"
