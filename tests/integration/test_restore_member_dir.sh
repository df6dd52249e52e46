#!/usr/bin/env bash
# The member dir etcdbrctl writes itself (docs/member-dir.md), on every etcd version
# (etcd_versions: 3.4, 3.5, 3.6, 3.7). Per version and seed, history_gen.sh drives a real etcd
# through a random history (puts, overwrites, deletes, prefix deletes, txns, leases granted before
# and after the full snapshot, a revocation) while `snapshot` cuts a full snapshot and deltas.
# Then:
# 1. `restore` runs with a PATH holding only trap etcd/etcdctl/etcdutl scripts (any call of them
#    fails the test): no etcd binary is needed. etcd of that version on the result serves the
#    source's keys (every field, lease included, read at the source's revision), its revision,
#    HashKV at it, every lease a key refers to, the granted TTL of the full snapshot's leases, and
#    the source's cluster version.
# 2. The oracle (tests only): the same store restored with the same flags by that release's own
#    tool (`--etcdutl-bin`: etcdutl 3.5+, Debian's `etcdctl snapshot restore` for 3.4). etcd on
#    each: the same keys, revision, HashKV, leases (IDs and granted TTLs), `member list` (IDs,
#    names, peer URLs) and `endpoint status` (cluster ID, version) and cluster version.
# 3. On 3.5 and 3.6: `restore --all-members` of that store into a 3-member cluster, again without
#    any etcd binary on PATH: every member healthy, `member list` the IDs the restore logged, the
#    same keys, revision and HashKV on each.
# seed=N is logged per run; SEED=N (or ETCDBR_SEED=N) replays it; ETCDBR_MEMBER_DIR_RUNS (default
# 1) seeds per version; ETCDBR_ETCD_VERSIONS restricts the versions.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/history_gen.sh"
make_workdir
versions=$(etcd_versions)
SEED=${ETCDBR_SEED:-${SEED:-}}
runs=${ETCDBR_MEMBER_DIR_RUNS:-1}
[ -z "$SEED" ] || runs=1

# trap binaries: the only things on PATH while etcdbrctl restores
TRAPBIN=$WORK_ROOT/trapbin
mkdir -p "$TRAPBIN"
for t in etcd etcdctl etcdutl; do
    printf '#!/bin/sh\necho "$0 $*" >>%s/trap.log\nexit 1\n' "$WORK_ROOT" >"$TRAPBIN/$t"
    chmod +x "$TRAPBIN/$t"
done
# no_etcd_restore DATA_DIR LOG [flags...]: etcdbrctl restore from $WORK/store with PATH=$TRAPBIN
no_etcd_restore() {
    local data=$1 log=$2
    shift 2
    env PATH="$TRAPBIN" "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$WORK/store" \
        --restoration-temp-snapshots-dir="$data.tmp" --data-dir="$data" "$@" >"$log" 2>&1 || {
        tail -15 "$log"
        fail "restore without etcd binaries on PATH failed ($log)"
    }
    [ ! -s "$WORK_ROOT/trap.log" ] || fail "the restore ran an etcd binary: $(cat "$WORK_ROOT/trap.log")"
}

# dump_at EP REV: the keyspace at REV, one JSON line per key, every field (lease as a string: jq
# would round a 64-bit ID through a double)
dump_at() {
    etcdctl --endpoints="$1" get "" --from-key --rev="$2" -w json |
        sed -E 's/"lease":([0-9]+)/"lease":"\1"/g' |
        jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version,
            lease: (.lease // "0")}'
}
hashkv_at() { etcdctl --endpoints="$1" endpoint hashkv --rev="$2" -w json | jq -r '.[0].HashKV.hash'; }
# lease_ttl EP HEX_ID: "<ttl> <granted ttl>" (-1 when not found)
lease_ttl() { etcdctl --endpoints="$1" lease timetolive "$2" -w json | jq -r '"\(.ttl) \(.["granted-ttl"])"'; }
# leases EP: "<hex id> <granted ttl>" per lease, sorted
leases() {
    local id
    for id in $(etcdctl --endpoints="$1" lease list | tail -n +2); do
        echo "$id $(lease_ttl "$1" "$id" | awk '{print $2}')"
    done | sort
}
# members EP: the member list as sorted JSON lines {id (hex), name, peerURLs}; waits (5 s) until
# every member published its name
members() {
    local i out
    for i in $(seq 1 50); do
        out=$(etcdctl --endpoints="$1" member list -w json | sed -E 's/"ID":([0-9]+)/"ID":"\1"/g' |
            jq -c '.members[] | {id: .ID, name: (.name // ""), peerURLs: (.peerURLs | sort)}' | sort)
        grep -q '"name":""' <<<"$out" || break
        sleep 0.1
    done
    while read -r line; do
        jq -c --arg hex "$(printf '%x' "$(jq -r .id <<<"$line")")" '.id = $hex' <<<"$line"
    done <<<"$out" | sort
}
# status EP: cluster ID (hex), etcd version, cluster version
status() {
    local cid ver cv
    cid=$(etcdctl --endpoints="$1" endpoint status -w json | sed -E 's/"cluster_id":([0-9]+)/"cluster_id":"\1"/' |
        jq -r '.[0].Status.header.cluster_id')
    ver=$(etcdctl --endpoints="$1" endpoint status -w json | jq -r '.[0].Status.version')
    cv=$(curl -s "$1/version" | jq -r .etcdcluster)
    echo "cluster_id=$(printf '%x' "$cid") version=$ver cluster_version=$cv"
}

# observe NAME EP REV: what etcd at EP serves, into $WORK/NAME.*
observe() {
    local n=$1 ep=$2 rev=$3
    current_revision "$ep" >"$WORK/$n.rev"
    dump_at "$ep" "$rev" >"$WORK/$n.jsonl"
    hashkv_at "$ep" "$rev" >"$WORK/$n.hash"
    leases "$ep" >"$WORK/$n.leases"
    members "$ep" >"$WORK/$n.members"
    status "$ep" >"$WORK/$n.status"
}

member_dir_run() {
    local v=$1 seed=$2 tool
    echo "== etcd $v seed=$seed"
    use_etcd "$v"
    sub_workdir "$v-$seed"
    if [ "$v" = 3.4 ]; then tool=/usr/bin/etcdctl; else tool=$ETCDBR_ETCD_CACHE/$v/etcdutl; fi
    start_etcd src "$WORK/src.etcd" --max-request-bytes=3145728 --unsafe-no-fsync
    local SRC_EP=$ETCD_EP SRC_PID=$ETCD_PID
    gen_init "$seed" "$WORK/gen"
    gen_before_snapshot
    start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s \
        --max-changes-per-delta-snapshot=25
    wait_for_log "$WORK/snap.log" "full snapshot Full-"
    gen_after_snapshot
    stop_snapshotter
    local src_rev
    src_rev=$(current_revision "$SRC_EP")
    dump_at "$SRC_EP" "$src_rev" >"$WORK/src.jsonl"
    hashkv_at "$SRC_EP" "$src_rev" >"$WORK/src.hash"
    status "$SRC_EP" >"$WORK/src.status"
    local src_leases=()
    for id in "${GEN_LEASES_PRE[@]}"; do
        read -r ttl gttl < <(lease_ttl "$SRC_EP" "$id")
        [ "$ttl" -le 0 ] || src_leases+=("$id:$gttl")
    done
    stop_pid "$SRC_PID"
    [ "$(ls "$WORK/store/v2" | grep -c '^Incr-')" -ge 2 ] || fail "seed=$seed etcd $v: fewer than 2 deltas"
    echo "etcd $v seed=$seed: $(wc -l <"$WORK/gen/ops.log") ops, revision $src_rev, $(wc -l <"$WORK/src.jsonl") keys"

    local flags=(--name=restored --initial-cluster=restored=http://127.0.0.1:2380
        --initial-advertise-peer-urls=http://127.0.0.1:2380 --initial-cluster-token=md-$seed)
    no_etcd_restore "$WORK/ours.etcd" "$WORK/ours.log" "${flags[@]}"
    "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$WORK/store" \
        --restoration-temp-snapshots-dir="$WORK/oracle.tmp" --data-dir="$WORK/oracle.etcd" \
        "${flags[@]}" --etcdutl-bin="$tool" >"$WORK/oracle.log" 2>&1 || {
        tail -15 "$WORK/oracle.log"
        fail "seed=$seed etcd $v: the oracle restore ($tool) failed"
    }
    [ -f "$WORK/ours.etcd/member/wal/0000000000000000-0000000000000000.wal" ] ||
        fail "seed=$seed etcd $v: no WAL in our member dir"

    local problems=() who id ttl gttl
    for who in ours oracle; do
        start_etcd restored "$WORK/$who.etcd" # the same name: etcd publishes it as the member's
        echo "== $who" >>"$WORK/etcd-restored.log"
        observe "$who" "$ETCD_EP" "$src_rev"
        if [ "$who" = ours ]; then
            # every lease a key refers to is alive; the full snapshot's keep their granted TTL
            for id in $(jq -r 'select(.lease != "0") | .lease' "$WORK/src.jsonl" | sort -u); do
                read -r ttl gttl < <(lease_ttl "$ETCD_EP" "$(printf '%x' "$id")")
                [ "$ttl" -gt 0 ] || problems+=("lease $(printf '%x' "$id") of a key is not alive")
            done
            for id in "${src_leases[@]}"; do
                read -r ttl gttl < <(lease_ttl "$ETCD_EP" "${id%%:*}")
                [ "$ttl" -gt 0 ] && [ "$gttl" = "${id#*:}" ] ||
                    problems+=("lease ${id%%:*}: ttl $ttl granted $gttl, source granted ${id#*:}")
            done
        fi
        stop_pid "$ETCD_PID"
    done
    # ours against the source
    [ "$(cat "$WORK/ours.rev")" = "$src_rev" ] || problems+=("revision $(cat "$WORK/ours.rev"), source $src_rev")
    cmp -s "$WORK/src.jsonl" "$WORK/ours.jsonl" || problems+=("keys differ from the source's")
    cmp -s "$WORK/src.hash" "$WORK/ours.hash" || problems+=("HashKV $(cat "$WORK/ours.hash"), source $(cat "$WORK/src.hash")")
    [ "$(sed 's/.*cluster_version=//' "$WORK/ours.status")" = "$(sed 's/.*cluster_version=//' "$WORK/src.status")" ] ||
        problems+=("cluster version: $(cat "$WORK/ours.status"), source $(cat "$WORK/src.status")")
    # ours against the oracle
    local f
    for f in rev jsonl hash leases members status; do
        cmp -s "$WORK/ours.$f" "$WORK/oracle.$f" ||
            problems+=("$f differs from ${tool##*/}'s: $(diff "$WORK/oracle.$f" "$WORK/ours.$f" | grep '^[<>]' | head -4 | tr '\n' ' ' || true)")
    done
    if [ ${#problems[@]} -gt 0 ]; then
        printf '  %s\n' "${problems[@]}"
        fail "seed=$seed etcd $v: our member dir is not what etcd serves from the source and ${tool##*/}'s (replay: SEED=$seed ETCDBR_ETCD_VERSIONS=$v)"
    fi
    echo "etcd $v seed=$seed: ours = source = ${tool##*/}'s: revision $src_rev, $(wc -l <"$WORK/ours.jsonl") keys," \
        "$(wc -l <"$WORK/ours.leases") leases, hashkv $(cat "$WORK/ours.hash"), $(cat "$WORK/ours.members"), $(cat "$WORK/ours.status")"

    case "$v" in v3.5.* | v3.6.*) cluster_run "$v" "$src_rev" ;; esac
}

# cluster_run VERSION SRC_REV: --all-members into a 3-member cluster from $WORK/store
cluster_run() {
    local v=$1 src_rev=$2 i
    plan_cluster 3
    no_etcd_restore "$WORK/{name}.etcd" "$WORK/all.log" --all-members \
        --initial-cluster="$INITIAL_CLUSTER" --initial-cluster-token="$CLUSTER_TOKEN"
    for i in 1 2 3; do [ -d "${MEMBER_DIR[i]}/member/wal" ] || fail "etcd $v: no member dir ${MEMBER_DIR[i]}"; done
    for i in 1 2 3; do start_member "$i" new; done
    for i in 1 2 3; do wait_member "$i"; done
    etcdctl --endpoints="$CLUSTER_EPS" endpoint health >/dev/null || fail "etcd $v: the restored cluster is not healthy"
    local want got
    want=$(for i in 1 2 3; do grep -o "member m$i: ID [0-9a-f]*" "$WORK/all.log" | awk -v p="${MEMBER_PEER[i]}" \
        '{printf "{\"id\":\"%s\",\"name\":\"%s\",\"peerURLs\":[\"%s\"]}\n", $4, substr($2, 1, length($2) - 1), p}'; done | sort)
    [ "$(wc -l <<<"$want")" = 3 ] || fail "etcd $v: the restore did not log 3 member IDs"
    for i in 1 2 3; do
        got=$(members "${MEMBER_EP[i]}")
        [ "$got" = "$want" ] || fail "etcd $v: member list of m$i: $got, want $want"
        [ "$(current_revision "${MEMBER_EP[i]}")" = "$src_rev" ] || fail "etcd $v: m$i at revision $(current_revision "${MEMBER_EP[i]}"), want $src_rev"
        dump_at "${MEMBER_EP[i]}" "$src_rev" >"$WORK/m$i.jsonl"
        cmp -s "$WORK/src.jsonl" "$WORK/m$i.jsonl" || fail "etcd $v: m$i's keys differ from the source's"
    done
    hashkv_agree "$src_rev"
    [ "$HASHKV" = "$(cat "$WORK/src.hash")" ] || fail "etcd $v: the cluster's HashKV $HASHKV, source $(cat "$WORK/src.hash")"
    # and it takes writes
    etcdctl --endpoints="$CLUSTER_EPS" put /after/restore ok >/dev/null || fail "etcd $v: the restored cluster refuses a write"
    for i in 1 2 3; do stop_pid "${MEMBER_PID[i]}"; done
    echo "etcd $v: --all-members: 3 members healthy, IDs as logged, revision $src_rev, $(wc -l <"$WORK/m1.jsonl") keys, hashkv $HASHKV on each"
}

seeded_runs member_dir_run "$versions" "$runs" "${SEED:-}"
[ ${#FAILED_RUNS[@]} = 0 ] || fail "member dir not right for: ${FAILED_RUNS[*]} (KEEP_WORK=1 keeps the work dirs)"
echo "PASS test_restore_member_dir"
