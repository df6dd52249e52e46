#!/usr/bin/env bash
# Backup leader handover in a 3-member cluster (issue 10): three `etcdbrctl server` sidecars, one
# per member (each on its member's loopback address 127.0.0.I, all on one --server-port, as pods),
# all writing into one Local store, under continuous writes through every member. Checks:
# only the leader's sidecar is healthy (/healthz 200, followers 503); /snapshot/full and
# /snapshot/delta through a follower are forwarded to the leader (200 and its snapshot JSON);
# after kill -9 of the leader's etcd and after a graceful `etcdctl move-leader` the new leader's
# sidecar continues with deltas from the store's latest revision + 1, no full snapshot is taken,
# no two deltas cover one revision and none is missing from the first full snapshot on; a restore
# of the store holds every write acknowledged up to the last stored revision, and equals a
# surviving member's keyspace at that revision. Random timings come from a logged seed
# (ETCDBR_TEST_SEED=N repeats them).
source "$(dirname "$0")/lib.sh"
make_workdir
SEED=${ETCDBR_TEST_SEED:-$(($(date +%s%N) % 1000000))}
echo "seed $SEED (ETCDBR_TEST_SEED=$SEED repeats the random timings)"
RANDOM=$SEED
T0=$SECONDS

CLUSTER_DISTINCT_HOSTS=1 start_cluster 3
STORE=$WORK/store
SPORT=$(free_port)
declare -a SIDECAR_PID
for i in 1 2 3; do
    "$ETCDBR_BIN" server --endpoints="${MEMBER_EP[i]}" --storage-provider=Local \
        --store-container="$STORE" --snapstore-temp-directory="$WORK/snaptmp$i" \
        --server-address="${MEMBER_HOST[i]}" --server-port="$SPORT" --data-dir="${MEMBER_DIR[i]}" \
        --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=1500ms \
        --etcd-connection-timeout-leader-election=1500ms --etcd-connection-timeout=2s \
        --garbage-collection-period=0s >"$WORK/sidecar$i.log" 2>&1 &
    SIDECAR_PID[i]=$!
    PIDS+=("${SIDECAR_PID[i]}")
done
url() { echo "http://${MEMBER_HOST[$1]}:$SPORT"; }
code() { curl -s -m 10 -o /dev/null -w '%{http_code}' "$@" || true; }
count() { grep -c -- "$2" "$WORK/sidecar$1.log" || true; }
alive() {
    local i
    for i in 1 2 3; do
        kill -0 "${SIDECAR_PID[i]}" 2>/dev/null || { tail -20 "$WORK/sidecar$i.log"; fail "sidecar $i died ($1)"; }
    done
}
# objects: "KIND START LAST TS" of every snapshot object in the store (Incr-<start>-<last>-<ts>)
objects() {
    ls "$STORE/v2" 2>/dev/null | sed -nE 's/^(Full|Incr)-0*([0-9]+)-0*([0-9]+)-([0-9]+).*/\1 \2 \3 \4/p'
}
n_full() { objects | grep -c '^Full ' || true; }
max_last() { objects | awk '$3 > m { m = $3 } END { print m + 0 }'; }
# new_leader NOT: waits until a member other than NOT leads; prints its index
new_leader() {
    local k l
    for k in $(seq 1 100); do
        l=$(leader_index)
        if [ -n "$l" ] && [ "$l" != "$1" ]; then echo "$l" && return 0; fi
        sleep 0.1
    done
    fail "no new raft leader within 10 s"
}
# wait_health I CODE: until sidecar I's /healthz answers CODE (15 s)
wait_health() {
    local k c
    for k in $(seq 1 150); do
        c=$(code "$(url "$1")/healthz")
        [ "$c" = "$2" ] && return 0
        sleep 0.1
    done
    fail "sidecar $1: /healthz $c, want $2"
}
# wait_count I PATTERN N: until sidecar I's log has N lines matching PATTERN (20 s)
wait_count() {
    local k
    for k in $(seq 1 200); do
        [ "$(count "$1" "$2")" -ge "$3" ] && return 0
        sleep 0.1
    done
    tail -20 "$WORK/sidecar$1.log" >&2
    fail "sidecar $1: fewer than $3 log lines \"$2\""
}
# via_follower F PATH KIND: PATH through follower F's sidecar answers 200 with the leader's
# snapshot JSON of KIND, and that object is in the store (a delta request that finds no pending
# event answers null: asked again, up to 5 times)
via_follower() {
    local out c body name k
    for k in 1 2 3 4 5; do
        out=$(curl -s -m 120 -w '\n%{http_code}' "$(url "$1")$2" || true)
        c=$(tail -n 1 <<<"$out")
        body=$(sed '$d' <<<"$out")
        [ "$c" = 200 ] || fail "$2 through follower $1: HTTP $c: $body"
        [ "$body" = null ] || break
        sleep 0.3
    done
    jq -e --arg k "$3" '.kind == $k' >/dev/null <<<"$body" || fail "$2 through follower $1: $body"
    name=$(jq -r .snapName <<<"$body")
    [ -e "$STORE/v2/$name" ] || fail "$2 through follower $1: $name is not in the store"
    echo "$2 through follower $1: 200, $name"
}

L=$(new_leader 0)
wait_count "$L" "full snapshot .* stored" 1
echo "leader m$L's sidecar took the first full snapshot ($((SECONDS - T0)) s)"

# the writer: one put after another through every live member, each acknowledged write recorded
# as "key value revision"
writer() {
    RANDOM=$((SEED + 1))
    local n=0 i key val out rev
    while [ ! -e "$WORK/stop-writer" ]; do
        n=$((n + 1))
        i=$((n % 3 + 1))
        [ -e "$WORK/dead-$i" ] && continue
        key=$(printf 'hk/%06d' "$n")
        val=v$n-$RANDOM
        # etcd's JSON gateway: the put's answer carries its revision (a lighter process than
        # etcdctl put -w json, so more writes per second on a loaded machine)
        if out=$(curl -s -f -m 3 -X POST "${MEMBER_EP[i]}/v3/kv/put" \
            -d "{\"key\":\"$(printf %s "$key" | base64 -w0)\",\"value\":\"$(printf %s "$val" | base64 -w0)\"}" \
            2>/dev/null) && rev=$(jq -er '.header.revision' <<<"$out"); then
            echo "$key $val $rev" >>"$WORK/acked"
        fi
        sleep "0.0$((RANDOM % 4))"
    done
}
writer &
WRITER_PID=$!
PIDS+=("$WRITER_PID")

# 1. the leader's sidecar alone is healthy; a follower forwards snapshot requests to it
sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))"
wait_health "$L" 200
for i in 1 2 3; do [ "$i" = "$L" ] || wait_health "$i" 503; done
F=$((L % 3 + 1))
via_follower "$F" /snapshot/delta Incr
via_follower "$F" /snapshot/full Full
via_follower "$F" /snapshot/delta Incr
c=$(code "$(url "$F")/snapshot/full?final=maybe")
[ "$c" = 400 ] || fail "/snapshot/full?final=maybe through follower $F: HTTP $c, want the leader's 400"
latest=$(curl -s -m 10 "$(url "$F")/snapshot/latest")
jq -e '.fullSnapshot.kind == "Full"' >/dev/null <<<"$latest" || fail "/snapshot/latest on follower $F: $latest"
for i in 1 2 3; do [ "$i" = "$L" ] || [ "$(count "$i" 'snapshotter started')" = 0 ] || fail "follower $i started a snapshotter"; done
FULLS=$(n_full)
echo "1. healthz: leader 200, followers 503; follower $F forwards /snapshot/* to m$L; $FULLS full snapshots ($((SECONDS - T0)) s)"

# 2. kill -9 of the leader's etcd
sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))"
before=$(max_last)
touch "$WORK/dead-$L"
kill_member "$L"
echo "2. killed m$L's etcd (store up to revision $before)"
NL=$(new_leader "$L")
wait_count "$NL" "snapshotter started" 1
wait_count "$NL" "resuming from" 1
grep -m1 "resuming from" "$WORK/sidecar$NL.log" | sed 's/^/   m'"$NL"': /'
wait_count "$NL" "delta snapshot Incr-.* stored" 1
wait_count "$L" "snapshotter stopped" 1
wait_count "$L" "not confirmed as the raft leader" 1 # the fence: nothing stored after the kill
wait_health "$NL" 200
wait_health "$L" 503
S=$((6 - L - NL)) # the surviving follower
wait_health "$S" 503
via_follower "$S" /snapshot/delta Incr
[ "$(n_full)" = "$FULLS" ] || fail "a full snapshot was taken after the handover: $(objects | grep '^Full')"
alive "after the kill"
echo "   new leader m$NL continues with deltas, no full snapshot; healthz m$NL 200, m$S 503, m$L 503 ($((SECONDS - T0)) s)"

# 3. graceful handover: move-leader to the surviving follower
sleep "$((1 + RANDOM % 2)).$((RANDOM % 10))"
TID=$(etcdctl --endpoints="${MEMBER_EP[S]}" endpoint status | awk -F', ' '{print $2}')
stopped=$(count "$NL" "snapshotter stopped")
deltas_s=$(count "$S" "delta snapshot Incr-.* stored")
etcdctl --endpoints="${MEMBER_EP[NL]}" move-leader "$TID" >/dev/null || fail "move-leader to m$S ($TID)"
for k in $(seq 1 50); do
    [ "$(leader_index)" = "$S" ] && break
    sleep 0.1
done
[ "$(leader_index)" = "$S" ] || fail "m$S is not the leader after move-leader"
wait_count "$S" "snapshotter started" 1
wait_count "$NL" "snapshotter stopped" $((stopped + 1))
wait_count "$NL" "not confirmed as the raft leader" 1 # its fence refused the next store
wait_count "$S" "delta snapshot Incr-.* stored" $((deltas_s + 2))
wait_health "$S" 200
wait_health "$NL" 503
via_follower "$NL" /snapshot/delta Incr
[ "$(n_full)" = "$FULLS" ] || fail "a full snapshot was taken after move-leader: $(objects | grep '^Full')"
alive "after move-leader"
echo "3. move-leader m$NL -> m$S: m$S continues with deltas, no full snapshot ($((SECONDS - T0)) s)"

# 4. the store: one chain from the first full snapshot, no overlap, no hole
touch "$WORK/stop-writer"
wait "$WRITER_PID" 2>/dev/null || true
R=$(current_revision "${MEMBER_EP[S]}")
for k in $(seq 1 100); do
    [ "$(max_last)" -ge "$R" ] && break
    sleep 0.2
done
[ "$(max_last)" -ge "$R" ] || fail "the store does not reach revision $R (at $(max_last))"
objects | sort -k3,3n -k1,1r >"$WORK/objects"
awk 'NR == 1 { if ($1 != "Full") { print "the first object is not a full snapshot: " $0; exit 1 } next_ = $3 + 1; next }
     $1 == "Full" { if ($3 + 1 > next_) next_ = $3 + 1; next }
     $2 < next_ { print "Incr " $2 "-" $3 " covers revisions stored before (up to " next_ - 1 ")"; bad = 1 }
     $2 > next_ { print "revisions " next_ "-" $2 - 1 " are in no delta (before Incr " $2 "-" $3 ")"; bad = 1 }
     { next_ = $3 + 1 }
     END { exit bad }' "$WORK/objects" || { cat "$WORK/objects"; fail "the deltas do not form one chain"; }
LAST=$(max_last)
echo "4. store: $(grep -c '^Incr' "$WORK/objects") deltas and $FULLS full snapshots, one chain up to revision $LAST"

# 5. restore: every acknowledged write up to LAST, and the keyspace of a survivor at LAST
restore_store "$STORE" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; fail "restore failed"; }
start_etcd r "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$LAST" ] || fail "restored revision $(current_revision "$ETCD_EP"), want $LAST"
keys() { jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version}'; }
etcdctl --endpoints="$ETCD_EP" get "" --from-key -w json | keys >"$WORK/restored.jsonl"
etcdctl --endpoints="${MEMBER_EP[S]}" get "" --from-key --rev="$LAST" -w json | keys >"$WORK/oracle.jsonl"
cmp "$WORK/restored.jsonl" "$WORK/oracle.jsonl" || fail "restored keyspace differs from m$S's at revision $LAST"
jq -r '"\(.key | @base64d) \(.value | @base64d)"' "$WORK/restored.jsonl" >"$WORK/restored.kv"
acked=$(awk -v last="$LAST" '$3 <= last' "$WORK/acked" | wc -l)
awk -v last="$LAST" 'NR == FNR { kv[$1] = $2; next }
     $3 <= last && kv[$1] != $2 { print "acknowledged " $1 "=" $2 " (revision " $3 ") restored as \"" kv[$1] "\""; bad = 1 }
     END { exit bad }' "$WORK/restored.kv" "$WORK/acked" || fail "acknowledged writes are missing from the restore"
[ "$acked" -gt 20 ] || fail "only $acked acknowledged writes: the writer did not run"
echo "5. restore at revision $LAST: all $acked acknowledged writes, keyspace equal to m$S's ($((SECONDS - T0)) s)"
