#!/usr/bin/env bash
# Scale-up from 1 to 3 members through etcdbrctl: m1 runs alone under `etcdbrctl run` with a
# Local store and takes writes and backups; then m2 and m3 start under `etcdbrctl run` with the
# 3-member initial cluster. Each finds itself absent from the member list, moves its data dir
# aside (m3 gets a stale one), adds itself as a learner (m3 waits while m2 is the learner:
# etcd allows one), starts etcd with --initial-cluster-state=existing and is promoted. Writes
# through m1 never fail; the member list ends with 3 voters; HashKV at one revision agrees;
# m1's backups go on (deltas after the promotions, covering the writes made after them).
# ETCDBR_MEMBER_ETCD picks the etcd version (default 3.4, Debian's).
source "$(dirname "$0")/lib.sh"
make_workdir
use_etcd "${ETCDBR_MEMBER_ETCD:-3.4}"
T0=$SECONDS
plan_run_cluster 3
run_member 1 new "m1=${MEMBER_PEER[1]}" "${RUN_FLAGS[@]}"
wait_member 1 30
wait_for_log "$WORK/run-m1.log" "full snapshot Full-" 30

start_writer "${MEMBER_EP[1]}"

# m3 has a stale data dir from an earlier life: it must go aside, not be used or deleted
mkdir -p "${MEMBER_DIR[3]}/member"
echo stale >"${MEMBER_DIR[3]}/member/marker"
acked_before=$(wc -l <"$WORK/acked")
echo "m1 alone up with backups after $((SECONDS - T0))s; scaling up to 3"
MEMBER_HTTP[2]=$(free_port)
MEMBER_HTTP[3]=$(free_port)
run_member 2 new "$INITIAL_CLUSTER" "${RUN_FLAGS[@]}"
run_member 3 new "$INITIAL_CLUSTER" "${RUN_FLAGS[@]}"
for i in 2 3; do
    wait_for_log "$WORK/run-m$i.log" "member m$i is not in the cluster's member list" 30
    wait_for_log "$WORK/run-m$i.log" "added member m$i as a learner" 60
    wait_for_log "$WORK/run-m$i.log" "etcd starts as a learner with --initial-cluster-state=existing" 10
    wait_for_log "$WORK/run-m$i.log" "member m$i ([0-9a-f]*) is a learner: promoting it" 30
    wait_promoted "$i" 60
done
waited=""
grep -q "waiting for its promotion before joining" "$WORK/run-m2.log" "$WORK/run-m3.log" &&
    waited=" (one waited for the other's promotion: etcd allows one learner)"
echo "m2 and m3 joined as learners and were promoted at $((SECONDS - T0))s$waited"
ls "${MEMBER_DIR[3]}".invalid.*/member/marker >/dev/null 2>&1 || fail "m3's stale data dir was not kept aside"
[ -e "${MEMBER_DIR[3]}/member/marker" ] && fail "m3's etcd runs on the stale data dir"
for i in 2 3; do
    grep -q "restored from" "$WORK/run-m$i.log" && fail "m$i was restored from the store instead of joining"
    curl -s "http://127.0.0.1:${MEMBER_HTTP[i]}/metrics" |
        grep -E '^etcdbr_is_learner_count_total\{succeeded="true"\} 1$' >/dev/null ||
        fail "m$i: etcdbr_is_learner_count_total{succeeded=true} is not 1"
done
members=$(etcdctl --endpoints="${MEMBER_EP[1]}" member list -w json)
[ "$(jq '.members | length' <<<"$members")" = 3 ] || fail "member list: $members"
[ "$(jq '[.members[] | select(.isLearner == true)] | length' <<<"$members")" = 0 ] ||
    fail "a learner is left: $members"
[ "$(jq -r '[.members[].name] | sort | join(",")' <<<"$members")" = "m1,m2,m3" ] ||
    fail "member names: $members"

# writes after the scale-up, then the backups must cover them
for k in $(seq 1 50); do [ "$(wc -l <"$WORK/acked")" -ge $((acked_before + 40)) ] && break; sleep 0.1; done
touch "$WORK/stop-writer"
wait "$WRITER" || true
acked=$(wc -l <"$WORK/acked")
nfail=$(wc -l <"$WORK/failed")
[ "$nfail" = 0 ] || { head "$WORK/failed" >&2; fail "$nfail writes through m1 failed during the scale-up"; }
[ "$acked" -gt "$acked_before" ] || fail "no write acknowledged during the scale-up"
rev=$(current_revision "${MEMBER_EP[1]}")
hashkv_agree "$rev"
h1=$HASHKV
# the backup continues: some member's sidecar (the raft leader's) stores deltas up to rev
lead=$(leader_index)
[ -n "$lead" ] || fail "no leader after the scale-up"
wait_backed_up "http://127.0.0.1:${MEMBER_HTTP[$lead]}" "$rev" 30
incr=$(count_objects "$WORK/store" Incr)
last=$(ls "$WORK/store/v2" | grep '^Incr-' | sort | tail -1)
[ "$((10#$(cut -d- -f3 <<<"$last")))" -ge "$rev" ] || fail "the newest delta $last does not reach revision $rev"
echo "scale-up 1 -> 3 (etcd $ETCD_VERSION): $acked writes through m1, none failed; HashKV $h1 at revision $rev on all 3; $incr deltas, the newest $last; $((SECONDS - T0))s"
