#!/usr/bin/env bash
# A member of the initial cluster that starts late, after the others formed the cluster, took
# writes and backed them up (a slow third pod of a new StatefulSet; the third member of a
# quorum-loss restore started after the two others): three members under `etcdbrctl run` on one
# Local store, m1 and m2 first. m3's data dir is missing and its entry in the member list has
# never started. It must not be restored from the store: its restored db would sit at raft index
# 3 (a bootstrap) and the leader would replay the raft log from index 4 onto it, so its keyspace
# would differ from the others'. It joins as a learner (removed, re-added), is promoted, and
# HashKV agrees on all three. ETCDBR_MEMBER_ETCD picks the etcd version (default 3.4).
source "$(dirname "$0")/lib.sh"
make_workdir
use_etcd "${ETCDBR_MEMBER_ETCD:-3.4}"
T0=$SECONDS
plan_run_cluster 3
for i in 1 2; do run_member "$i" new "$INITIAL_CLUSTER" "${RUN_FLAGS[@]}"; done
for i in 1 2; do wait_member "$i" 40; done
for n in $(seq 1 40); do gw_put "${MEMBER_EP[$((n % 2 + 1))]}" "$(b64 /w/$n)" "$(b64 v$n)" >/dev/null || fail "put $n"; done
# until the store holds a delta: the 40 writes may all lie inside the leader's first full
# snapshot (then no delta follows without another write), so one more write each second; a
# condition wait of up to 90 s (a new cluster's first snapshots under ASan at load take long)
extra=0
for k in $(seq 1 450); do
    [ "$(count_objects "$WORK/store" Incr)" -ge 1 ] && break
    if [ $((k % 5)) = 0 ] && [ "$(count_objects "$WORK/store" Full)" -ge 1 ]; then
        extra=$((extra + 1))
        gw_put "${MEMBER_EP[1]}" "$(b64 /w/extra-$extra)" "$(b64 x)" >/dev/null || fail "extra put $extra"
    fi
    sleep 0.2
done
[ "$(count_objects "$WORK/store" Incr)" -ge 1 ] || {
    for i in 1 2; do tail -15 "$WORK/run-m$i.log"; done
    fail "m1 and m2 stored no delta in 90 s (store: $(ls "$WORK/store/v2" 2>/dev/null | tr '\n' ' '))"
}
echo "m1 and m2 took 40 writes (+$extra), the store has $(count_objects "$WORK/store" Full) full and $(count_objects "$WORK/store" Incr) deltas ($((SECONDS - T0)) s)"

run_member 3 new "$INITIAL_CLUSTER" "${RUN_FLAGS[@]}"
LOG=$WORK/run-m3.log
wait_for_log "$LOG" "started etcd" 60
grep -q "restoring data dir" "$LOG" && fail "m3 was restored from the store instead of joining the running cluster"
wait_for_log "$LOG" "added member m3 as a learner" 30
wait_promoted 3 60
gw_put "${MEMBER_EP[3]}" "$(b64 /after)" "$(b64 m3)" >/dev/null || fail "a write through m3 failed"
CLUSTER_SIZE=3
hashkv_agree "$(current_revision "${MEMBER_EP[1]}")" 20
echo "late member m3 joined as a learner, promoted; HashKV $HASHKV on all 3 ($((SECONDS - T0)) s)"
