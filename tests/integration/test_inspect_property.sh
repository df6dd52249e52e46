#!/usr/bin/env bash
# Property: `get`, `diff` and `history` answer from the store what the live etcd answers (docs/
# inspect.md). Per etcd version and seed: a real etcd, never compacted, takes a random history
# (puts, same-value rewrites, deletes, prefix deletes, txns, leased keys, a revoked lease, keys
# that are prefixes of each other, a key and value with bytes a name would not hold) while
# `snapshot` stores it in a Local store as several backup sets (--schedule every 3-5 s, deltas
# every second, the snapshotter restarted once with another compression policy; a seed-chosen
# compression, sometimes encrypted). Then against etcdctl on the live etcd:
#  - get "" --prefix at revisions older than every full snapshot, each full's, inside deltas,
#    delta ends, between a set's last delta and the next full, the newest, and without
#    --revision: kvs, count and more exactly, header.revision = the revision asked for;
#  - key ranges (--prefix, KEY RANGE_END, --from-key, one key), --limit, --keys-only;
#  - diff A B: exactly the keys on which the two etcdctl dumps disagree (a same-value rewrite is a
#    new mod revision: "changed"), change kind, from/to states, events and deleted_revision as
#    `etcdctl watch --rev 1` replays them;
#  - history KEY: every event `etcdctl watch --rev 1 KEY` replays (type, revision, version,
#    create revision, lease, value size);
#  - get --time T for times in quiet gaps after a revision was stored: that revision's keyspace.
# Every failed assertion is listed with its command. seed=N is logged per run; ETCDBR_SEED=N
# replays one seed (the writes; the sets' boundaries depend on timing and are printed);
# ETCDBR_PROPERTY_RUNS (default 1) seeds per version; by default etcd 3.4 and the newest built
# version (ETCDBR_ETCD_VERSIONS restricts or widens, e.g. "3.4 3.5 3.6 3.7").
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/inspect_lib.sh"
make_workdir
versions=$(etcd_versions)
if [ -z "${ETCDBR_ETCD_VERSIONS:-}" ]; then
    versions=$(printf '%s\n' "$versions" | sed -n '1p;$p' | awk '!seen[$0]++')
fi
runs=${ETCDBR_PROPERTY_RUNS:-1}
[ -z "${ETCDBR_SEED:-}" ] || runs=1
POLICIES=(gzip zlib lzw zstd none)

# snap_flags POLICY: the snapshot flags of a compression policy (none: uncompressed).
snap_flags() {
    if [ "$1" = none ]; then echo --compress-snapshots=false; else echo --compress-snapshots=true --compression-policy="$1"; fi
}

property_run() {
    local v=$1 seed=$2 i sched p1 p2 enc=""
    ins_begin "$v" "$seed"
    local enc_flags=()
    ins_rnd 3 && sched=$((3 + R))
    ins_rnd 5 && p1=${POLICIES[$R]}
    ins_rnd 5 && p2=${POLICIES[$R]}
    ins_rnd 3
    if [ "$R" = 0 ]; then
        enc=" encrypted"
        printf 'k1 %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/keys"
        chmod 600 "$WORK/keys"
        enc_flags=(--encryption-key-file="$WORK/keys")
    fi
    INS_FLAGS=(--storage-provider=Local --store-container="$WORK/store" --snapstore-temp-directory="$WORK/tmp"
        --min-free-disk-bytes=0 --min-free-disk-percent=0 "${enc_flags[@]}")
    mkdir -p "$WORK/tmp"
    echo "etcd $v seed=$seed: full snapshots every ${sched}s, compression $p1 then $p2$enc"

    # before the snapshotter: revisions only the first full snapshot's db holds
    ins_rnd 20 && ins_wave $((15 + R))
    # shellcheck disable=SC2046 # snap_flags: two words
    start_snapshotter "$WORK/store" "$WORK/snap1.log" --delta-snapshot-period=1s \
        --schedule="@every ${sched}s" "${enc_flags[@]}" $(snap_flags "$p1")
    wait_for_log "$WORK/snap1.log" "full snapshot Full-" 60
    local log=$WORK/snap1.log
    for i in 1 2 3 4 5 6 7; do
        ins_rnd 25 && ins_wave $((8 + R))
        ins_rnd 3
        [ "$R" = 0 ] || ins_gap "$log"
        # at least three sets: wait for the next scheduled full snapshot twice
        [ "$i" != 2 ] && [ "$i" != 6 ] || ins_wait_new_full $((sched + 20)) "$WORK/store"
        if [ "$i" = 4 ]; then
            # a restart resumes the set (or takes a full snapshot when one is due), another policy
            stop_snapshotter
            # shellcheck disable=SC2046
            start_snapshotter "$WORK/store" "$WORK/snap2.log" --delta-snapshot-period=1s \
                --schedule="@every ${sched}s" "${enc_flags[@]}" $(snap_flags "$p2")
            log=$WORK/snap2.log
            wait_for_log "$log" "snapshot.*started\|full snapshot Full-\|resum" 60
        fi
    done
    ins_gap "$log"
    stop_snapshotter
    if grep -h "level=error" "$WORK"/snap*.log; then fail "seed=$seed etcd $v: the snapshotter logged errors"; fi
    local fulls
    fulls=$(count_objects "$WORK/store" Full)
    echo "etcd $v seed=$seed: $(wc -l <"$WORK/ops.log") ops, revision $(current_revision "$ETCD_EP"), $fulls full snapshots, $(count_objects "$WORK/store" Incr) deltas"
    [ "$fulls" -ge 3 ] || fail "seed=$seed etcd $v: want at least 3 backup sets, got $fulls full snapshots: $(ls "$WORK/store/v2")"
    ins_collect_events

    ins_check_store "etcd-$v-seed-$seed" "$WORK/store"
    if [ ${#INS_PROBLEMS[@]} -gt 0 ]; then
        echo "etcd $v seed=$seed: ${#INS_PROBLEMS[@]} failed assertions (store: $(ls "$WORK/store/v2" | tr '\n' ' '))"
        fail "seed=$seed etcd $v: inspect differs from etcdctl (replay: ETCDBR_SEED=$seed ETCDBR_ETCD_VERSIONS=$v)"
    fi
}

seeded_runs property_run "$versions" "$runs" "${ETCDBR_SEED:-}"
[ ${#FAILED_RUNS[@]} = 0 ] || fail "inspect differs from the live etcd for: ${FAILED_RUNS[*]} (KEEP_WORK=1 keeps the work dirs)"
echo "property: get, diff and history equal etcdctl on every run"
