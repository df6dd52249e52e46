#!/usr/bin/env bash
# A follower whose data dir is lost rejoins as a learner and is promoted, with no downtime for
# the others: 3 members, each under `etcdbrctl run` (one Local store), continuous writes through
# the two others all along. kill -9 of a follower's etcd and rm -rf of its data dir: its run
# removes it from the member list, adds it as a learner (log, etcdbr_is_learner_count_total,
# etcdbr_is_learner 1 while it is one), starts etcd with --initial-cluster-state=existing, and
# promotes it (log, metric, member list: 3 voters, no learner); it is not restored from the
# store; no write through the others fails; HashKV at one revision agrees on all 3 members.
# Then, with two members stopped, the lost member finds no quorum among the others: the member
# list stays as it was (nothing removed or added) and its data dir is not restored from the store
# (nor started empty); once the second member is back it rejoins as a learner and HashKV agrees.
# ETCDBR_MEMBER_ETCD picks the etcd version (default 3.4, Debian's).
source "$(dirname "$0")/lib.sh"
make_workdir
use_etcd "${ETCDBR_MEMBER_ETCD:-3.4}"
T0=$SECONDS
plan_run_cluster 3
for i in 1 2 3; do run_member "$i" new "$INITIAL_CLUSTER" "${RUN_FLAGS[@]}"; done
for i in 1 2 3; do wait_member "$i" 40; done
# a member whose etcd started after the two others had formed a quorum joins as a learner and is
# promoted: the cluster is formed once all 3 are voters
wait_voters 3 60
echo "cluster of 3 under etcdbrctl run up after $((SECONDS - T0))s"

lead=""
for k in $(seq 1 50); do
    lead=$(leader_index)
    [ -n "$lead" ] && break
    sleep 0.2
done
[ -n "$lead" ] || fail "no leader"
v=$((lead % 3 + 1)) # a follower
others=()
for i in 1 2 3; do [ "$i" = "$v" ] || others+=("$i"); done
echo "leader m$lead; the victim is follower m$v"

# writes through the two others, round robin, each acknowledged or counted as failed
start_writer "${MEMBER_EP[${others[0]}]}" "${MEMBER_EP[${others[1]}]}"

# the victim's counters and log from here on (it may have joined as a learner at the bootstrap)
metric_count() { # metric_count I NAME: the sample's value on mI's /metrics (0 when absent)
    curl -s "http://127.0.0.1:${MEMBER_HTTP[$1]}/metrics" |
        awk -v n="$2" '$1 == n { v = $2 } END { print (v == "" ? 0 : v) }'
}
learner0=$(metric_count "$v" 'etcdbr_is_learner_count_total{succeeded="true"}')
promote0=$(metric_count "$v" 'etcdbr_member_promote_duration_seconds_count{succeeded="true"}')
remove0=$(metric_count "$v" 'etcdbr_member_remove_duration_seconds_count{succeeded="true"}')
: >"$WORK/run-m$v.log"
child=$(member_etcd_pid "$v")
[ -n "$child" ] || fail "m$v has no etcd child"
kill -9 "$child"
rm -rf "${MEMBER_DIR[v]}"
acked_at_kill=$(wc -l <"$WORK/acked")
echo "killed m$v's etcd (pid $child) and deleted its data dir at $((SECONDS - T0))s"
LOG=$WORK/run-m$v.log
wait_for_log "$LOG" "etcd was killed by signal 9" 10
wait_for_log "$LOG" "removed member m$v (" 30
wait_for_log "$LOG" "added member m$v as a learner" 30
wait_for_log "$LOG" "etcd starts as a learner with --initial-cluster-state=existing" 10
# the learner shows in the member list or in etcdbr_is_learner before it is promoted, or the
# promotion came first and was logged as one of a learner
saw_learner=""
for k in $(seq 1 300); do
    if etcdctl --endpoints="${MEMBER_EP[${others[0]}]}" member list -w json 2>/dev/null |
        jq -e '[.members[] | select(.isLearner == true)] | length == 1' >/dev/null 2>&1; then
        saw_learner="member list"
        break
    fi
    if curl -s "http://127.0.0.1:${MEMBER_HTTP[v]}/metrics" | grep -E '^etcdbr_is_learner 1' >/dev/null; then
        saw_learner="etcdbr_is_learner"
        break
    fi
    grep -q "promoted member m$v" "$LOG" && break
    sleep 0.05
done
wait_for_log "$LOG" "member m$v ([0-9a-f]*) is a learner: promoting it" 30
wait_promoted "$v" 60
acked_at_promotion=$(wc -l <"$WORK/acked")
echo "m$v rejoined as a learner (seen in: ${saw_learner:-logs only}) and was promoted at $((SECONDS - T0))s"
grep -q "restored from" "$LOG" && fail "m$v was restored from the store instead of rejoining"
[ -d "${MEMBER_DIR[v]}/member" ] || fail "m$v's etcd did not create a new data dir"
[ "$(metric_count "$v" 'etcdbr_is_learner_count_total{succeeded="true"}')" = $((learner0 + 1)) ] ||
    fail "etcdbr_is_learner_count_total{succeeded=true} did not go from $learner0 to $((learner0 + 1))"
[ "$(metric_count "$v" 'etcdbr_member_promote_duration_seconds_count{succeeded="true"}')" = $((promote0 + 1)) ] ||
    fail "etcdbr_member_promote_duration_seconds{succeeded=true} not observed once more (from $promote0)"
[ "$(metric_count "$v" 'etcdbr_member_remove_duration_seconds_count{succeeded="true"}')" = $((remove0 + 1)) ] ||
    fail "etcdbr_member_remove_duration_seconds{succeeded=true} not observed once more (from $remove0)"
for k in $(seq 1 50); do
    curl -s "http://127.0.0.1:${MEMBER_HTTP[v]}/metrics" | grep -E '^etcdbr_is_learner 0' >/dev/null && break
    sleep 0.1
done
curl -s "http://127.0.0.1:${MEMBER_HTTP[v]}/metrics" | grep -E '^etcdbr_is_learner 0' >/dev/null ||
    fail "etcdbr_is_learner is not 0 after the promotion"
members=$(etcdctl --endpoints="${MEMBER_EP[${others[0]}]}" member list -w json)
[ "$(jq '.members | length' <<<"$members")" = 3 ] || fail "member list: $members"
[ "$(jq '[.members[] | select(.isLearner == true)] | length' <<<"$members")" = 0 ] ||
    fail "a learner is left: $members"
[ "$(jq -r '[.members[].name] | sort | join(",")' <<<"$members")" = "m1,m2,m3" ] ||
    fail "member names: $members"

# writes go on through the promoted member too
gw_put "${MEMBER_EP[v]}" "$(b64 /after)" "$(b64 promoted)" || fail "a write through m$v failed"
touch "$WORK/stop-writer"
wait "$WRITER" || true
acked=$(wc -l <"$WORK/acked")
nfail=$(wc -l <"$WORK/failed")
[ "$nfail" = 0 ] || { head "$WORK/failed" >&2; fail "$nfail writes through the other members failed"; }
[ "$acked_at_promotion" -gt "$acked_at_kill" ] ||
    fail "no write was acknowledged while m$v was down and rejoining"

# HashKV at one revision agrees across the 3 members
rev=$(current_revision "${MEMBER_EP[$lead]}")
hashkv_agree "$rev"
h1=$HASHKV
n=$(etcdctl --endpoints="${MEMBER_EP[v]}" get /w/ --prefix --keys-only | grep -c . || true)
[ "$n" -ge "$acked" ] || fail "m$v has $n of $acked acknowledged keys"
summary="$acked writes through the others ($((acked_at_promotion - acked_at_kill)) while m$v was down or a learner), none failed; HashKV $h1 at revision $rev on all 3"

# Without quorum among the others nothing is removed or added: stop m$v and a second member,
# delete m$v's data dir, start m$v's run again: it says so and keeps the single-member rules.
ids_before=$(curl -s -m 5 -X POST "${MEMBER_EP[${others[0]}]}/v3/cluster/member/list" -d '{}' | jq -c '[.members[].ID] | sort')
b=${others[1]}
for i in "$v" "$b"; do
    kill -TERM "${MEMBER_PID[i]}"
    wait "${MEMBER_PID[i]}" || fail "m$i's run did not stop cleanly"
done
rm -rf "${MEMBER_DIR[v]}"
: >"$LOG"
run_member "$v" new "$INITIAL_CLUSTER" "${RUN_FLAGS[@]}"
wait_for_log "$LOG" "member m$v: the other members have no quorum" 30
grep -q "removed member\|added member" "$LOG" && fail "a member was removed or added without quorum"
ids_after=$(curl -s -m 5 -X POST "${MEMBER_EP[${others[0]}]}/v3/cluster/member/list" -d '{}' | jq -c '[.members[].ID] | sort')
[ "$ids_before" = "$ids_after" ] || fail "the member list changed without quorum: $ids_before -> $ids_after"
# ...and its lost data dir is neither restored from the store nor started empty: under its old
# member ID the old leader would replay its raft log onto the restored db once quorum returns
# (a diverging keyspace, HashKV differing). It waits; with m$b back it rejoins as a learner.
wait_for_log "$LOG" "not restoring it from the store nor starting etcd empty" 30
grep -q "restoring data dir\|etcd starts empty\|started etcd" "$LOG" &&
    fail "m$v was restored or started without quorum among the others"
[ -e "${MEMBER_DIR[v]}" ] && fail "m$v's data dir was created without quorum among the others"
run_member "$b" existing "$INITIAL_CLUSTER" "${RUN_FLAGS[@]}"
wait_for_log "$LOG" "added member m$v as a learner" 60
wait_promoted "$v" 60
gw_put "${MEMBER_EP[$b]}" "$(b64 /after-quorum)" "$(b64 back)" || fail "a write through m$b failed"
hashkv_agree "$(current_revision "${MEMBER_EP[$b]}")" 20
echo "member rejoin (etcd $ETCD_VERSION): $summary; without quorum among the others the member list stayed $ids_after and the lost data dir was not restored; with quorum back it rejoined, HashKV $HASHKV on all 3; $((SECONDS - T0))s"
