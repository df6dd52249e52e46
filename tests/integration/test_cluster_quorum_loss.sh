#!/usr/bin/env bash
# Quorum loss, restored by the runbook: a 3-member etcd cluster with an `etcdbrctl server` sidecar
# on the leader takes a random history (history_gen.sh from a logged seed: puts, overwrites,
# deletes, txns, leases, values up to 1.5 MiB); a watcher from an early revision runs; once the
# store holds revision R the keyspace at R (every field) is the oracle. Then kill -9 of two
# members and their data dirs deleted: the survivor takes no write. The marked blocks of
# docs/runbook-quorum-loss.md run as written (pick the set, restore all members in one run,
# check), with the refusals on the way (name not in --initial-cluster, a target data dir not
# empty, the old token). Then: every key with every field and revision R + bump on every member,
# HashKV equal on all three, 3 voters with the member IDs and cluster ID etcd computes from the
# new token, writes taken, and the watcher from before (and a new watch from an old revision) get
# "required revision has been compacted".
# ETCDBR_SEED=N replays a history; ETCDBR_ETCD_VERSIONS picks the etcd versions (default 3.4, to
# stay within CI's time; "3.4 v3.6.16" passes too).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/history_gen.sh"
make_workdir
versions=$(ETCDBR_ETCD_VERSIONS=${ETCDBR_ETCD_VERSIONS:-3.4} etcd_versions)
RUNBOOK=$ETCDBR_SOURCE_DIR/docs/runbook-quorum-loss.md
BUMP=1000000000

# runbook_block NAME: the fenced block after "<!-- runbook-test: NAME -->" in the runbook.
runbook_block() {
    awk -v m="<!-- runbook-test: $1 -->" '$0 == m {f = 1; next}
        f && /^```/ {if (in_block) exit; in_block = 1; next}
        f && in_block {print}' "$RUNBOOK"
}

# run_block NAME: runs it as an operator would, in bash -euo pipefail, with the runbook's
# variables exported; its output goes to $WORK/block-NAME.log and the shell's variables it set
# (REV) are read back from there.
run_block() {
    local name=$1 body
    body=$(runbook_block "$name")
    [ -n "$body" ] || fail "runbook block $name not found in $RUNBOOK"
    echo "--- runbook block $name:"
    echo "$body"
    if ! bash -euo pipefail -c "$body"$'\n''echo "RUNBOOK_REV=${REV:-}"' \
        >"$WORK/block-$name.log" 2>&1; then
        tail -30 "$WORK/block-$name.log"
        fail "runbook block $name failed"
    fi
}

# dump_kvs EP: every key with every field (lease as a decimal string: jq would round it).
dump_kvs() {
    etcdctl --endpoints="$1" get "" --from-key -w json |
        sed -E 's/"lease":([0-9]+)/"lease":"\1"/g' |
        jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version,
            lease: (.lease // "0")}'
}

# etcd's IDs (membership.computeMemberId, RaftCluster.genID), independently of src/restore/cluster.c
member_id() { # PEER_URL TOKEN -> hex as etcd prints it (no leading zeros)
    printf '%x' "$((16#$(printf '%s%s' "$1" "$2" | sha1sum | cut -c1-16)))"
}
cluster_id() { # HEX_ID... -> hex
    python3 -c 'import hashlib, sys
ids = sorted(int(a, 16) for a in sys.argv[1:])
print("%x" % int.from_bytes(hashlib.sha1(b"".join(i.to_bytes(8, "big") for i in ids)).digest()[:8], "big"))' "$@"
}

quorum_run() {
    local v=$1 seed=$2 i
    echo "== etcd $v seed=$seed"
    use_etcd "$v"
    sub_workdir "$v-$seed"
    mkdir -p "$WORK/bin"
    ln -sf "$ETCDBR_BIN" "$WORK/bin/etcdbrctl"
    local t_start=$SECONDS
    start_cluster 3 --max-request-bytes=3145728 --unsafe-no-fsync
    echo "[$((SECONDS - t_start)) s] 3 members up"
    local old_token=$CLUSTER_TOKEN lead
    for i in $(seq 1 50); do
        lead=$(leader_index)
        [ -n "$lead" ] && break
        sleep 0.1
    done
    [ -n "$lead" ] || fail "no leader in the new cluster"
    ETCD_EP=${MEMBER_EP[lead]}

    gen_init "$seed" "$WORK/gen"
    gen_before_snapshot
    local early_rev port
    early_rev=$(current_revision "$ETCD_EP")
    # a client of the old cluster watching from an early revision, on every endpoint
    etcdctl --endpoints="$CLUSTER_EPS" watch --prefix / --rev="$early_rev" -w json >"$WORK/watch.out" 2>"$WORK/watch.err" &
    local watch_pid=$!
    PIDS+=("$watch_pid")
    port=$(free_port)
    "$ETCDBR_BIN" server --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$WORK/store" --snapstore-temp-directory="$WORK/snaptmp" \
        --server-port="$port" --data-dir="${MEMBER_DIR[lead]}" --name="m$lead" \
        --initial-cluster="$INITIAL_CLUSTER" --initial-advertise-peer-urls="${MEMBER_PEER[lead]}" \
        --initial-cluster-token="$old_token" \
        --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=2s \
        --garbage-collection-period=0s >"$WORK/server.log" 2>&1 &
    local server_pid=$!
    PIDS+=("$server_pid")
    wait_for_log "$WORK/server.log" "full snapshot Full-" 30
    echo "[$((SECONDS - t_start)) s] the sidecar on m$lead took its full snapshot at revision $(current_revision "$ETCD_EP")"
    local t0=$SECONDS
    gen_after_snapshot
    local R
    R=$(current_revision "$ETCD_EP")
    echo "etcd $v seed=$seed: $(wc -l <"$WORK/gen/ops.log") ops, $((SECONDS - t0)) s after the full snapshot, revision $R"
    wait_backed_up "http://127.0.0.1:$port" "$R" 30
    dump_kvs "$ETCD_EP" >"$WORK/oracle.jsonl"
    [ "$(current_revision "$ETCD_EP")" = "$R" ] || fail "the cluster moved past $R while the oracle was taken (a lease expired: too slow a machine?)"
    grep '"lease":"[1-9]' "$WORK/oracle.jsonl" >/dev/null || fail "no leased key in the oracle"
    [ "$(wc -l <"$WORK/oracle.jsonl")" -ge 10 ] || fail "oracle unexpectedly small"

    # quorum loss: two members killed, their data dirs gone; the leader (with its sidecar) survives
    local lost=() s=$lead
    for i in 1 2 3; do [ "$i" = "$lead" ] || lost+=("$i"); done
    for i in "${lost[@]}"; do
        kill_member "$i"
        rm -rf "${MEMBER_DIR[i]}"
    done
    if etcdctl --endpoints="${MEMBER_EP[s]}" --command-timeout=3s put /quorum-probe x >/dev/null 2>&1; then
        fail "the survivor m$s took a write without quorum"
    fi
    # what the runbook's step 0 tells the operator to look at
    local health
    if health=$(etcdctl --endpoints="$CLUSTER_EPS" --command-timeout=3s endpoint health 2>&1); then
        fail "endpoint health passes without quorum: $health"
    fi
    echo "endpoint health without quorum:"
    echo "$health" | sed 's/^/  | /'
    echo "[$((SECONDS - t_start)) s] quorum lost: m${lost[0]} and m${lost[1]} gone, m$s refuses writes"
    # the watcher: it saw the history, and etcd canceled it ("no leader", as etcdctl and the
    # Kubernetes API server watch with WithRequireLeader); a client resumes from the revision
    # after the last one it saw
    local seen
    for i in $(seq 1 100); do
        seen=$(jq -r '.Events[]?.kv.mod_revision' "$WORK/watch.out" 2>/dev/null | tail -1)
        [ "${seen:-0}" -ge "$R" ] && break
        sleep 0.1
    done
    [ "${seen:-0}" = "$R" ] || fail "the watcher from revision $early_rev saw up to revision '${seen:-}', not $R"

    # runbook step 2: stop everything that writes
    stop_pid "$server_pid"
    stop_pid "${MEMBER_PID[s]}"
    mv "${MEMBER_DIR[s]}" "${MEMBER_DIR[s]}.before-restore"

    export STORE_FLAGS="--storage-provider=Local --store-container=$WORK/store"
    export INITIAL_CLUSTER ENDPOINTS=$CLUSTER_EPS RESTORE_DIR=$WORK/restore
    export NEW_TOKEN="etcdbr-it-restored-$$-$RANDOM"
    export PATH=$WORK/bin:$PATH

    run_block pick-set
    export REV
    REV=$(sed -n 's/^RUNBOOK_REV=//p' "$WORK/block-pick-set.log")
    [ "$REV" = "$R" ] || fail "the runbook picked revision '$REV', the backups reach $R"

    # the refusals, each before anything is written
    local rc=0
    etcdbrctl restore $STORE_FLAGS --revision="$REV" --name=nobody \
        --initial-cluster="$INITIAL_CLUSTER" --initial-cluster-token="$NEW_TOKEN" \
        --data-dir="$WORK/refused.etcd" >"$WORK/refuse-name.log" 2>&1 || rc=$?
    [ "$rc" = 2 ] && grep "not a member of --initial-cluster" "$WORK/refuse-name.log" >/dev/null ||
        { cat "$WORK/refuse-name.log"; fail "a --name outside --initial-cluster: exit $rc"; }
    mkdir -p "$RESTORE_DIR/m2.etcd" && echo keep >"$RESTORE_DIR/m2.etcd/precious"
    rc=0
    bash -euo pipefail -c "$(runbook_block restore-all)" >"$WORK/refuse-nonempty.log" 2>&1 || rc=$?
    [ "$rc" = 3 ] && grep "move it aside" "$WORK/refuse-nonempty.log" >/dev/null ||
        { cat "$WORK/refuse-nonempty.log"; fail "a non-empty target data dir: exit $rc"; }
    [ "$(cat "$RESTORE_DIR/m2.etcd/precious")" = keep ] || fail "the non-empty data dir was touched"
    [ ! -e "$RESTORE_DIR/m1.etcd" ] && [ ! -e "$RESTORE_DIR/m3.etcd" ] || fail "a refused restore wrote a data dir"
    rm -rf "$RESTORE_DIR/m2.etcd"
    rc=0
    NEW_TOKEN=$old_token bash -euo pipefail -c "$(runbook_block restore-all)" >"$WORK/refuse-token.log" 2>&1 || rc=$?
    [ "$rc" = 2 ] && grep "a member ID of the backed-up cluster" "$WORK/refuse-token.log" >/dev/null ||
        { cat "$WORK/refuse-token.log"; fail "the old cluster token: exit $rc"; }
    ls "$RESTORE_DIR" 2>/dev/null | grep '\.etcd' >/dev/null && fail "a refused restore wrote a data dir"

    # the new history the restore records is logged at debug level (ETCDBR_LOG_LEVEL, the flag's
    # variable, so the runbook's commands run as written)
    ETCDBR_LOG_LEVEL=debug run_block restore-all
    echo "[$((SECONDS - t_start)) s] restored"
    # runbook: each member's data dir to its host (here: its place on this machine); m3 instead
    # restores itself (the runbook's Kubernetes variant), pinned to the same revision
    for i in 1 2; do
        mv "$RESTORE_DIR/m$i.etcd" "${MEMBER_DIR[i]}"
    done
    ETCDBR_LOG_LEVEL=debug NAME=m3 DATA_DIR=${MEMBER_DIR[3]} run_block restore-one
    # one restore mark for the cluster: the per-member run forks into the same new history as the
    # one-run restore (a sidecar on any member continues one history)
    local mark_all mark_one
    mark_all=$(sed -n 's/.*or backs up as history \([0-9a-f]*\).*/\1/p' "$WORK/block-restore-all.log" | sort -u)
    mark_one=$(sed -n 's/.*or backs up as history \([0-9a-f]*\).*/\1/p' "$WORK/block-restore-one.log" | sort -u)
    [ -n "$mark_all" ] && [ "$mark_all" = "$mark_one" ] ||
        fail "restore marks differ: --all-members '$mark_all', per-member '$mark_one'"
    echo "restore mark: new history $mark_all on every member"
    CLUSTER_TOKEN=$NEW_TOKEN
    CLUSTER_EXTRA=()
    for i in 1 2 3; do start_member "$i" new; done
    for i in 1 2 3; do wait_member "$i"; done

    run_block check
    echo "[$((SECONDS - t_start)) s] restored cluster up, runbook checks pass"
    local problems=() rev hash first_hash="" want_rev=$((R + BUMP))
    for i in 1 2 3; do
        rev=$(current_revision "${MEMBER_EP[i]}")
        # the check block's put and delete: two revisions after the bump
        [ "$rev" = $((want_rev + 2)) ] || problems+=("m$i at revision $rev, want $R + $BUMP + 2 (the check's put and delete)")
        etcdctl --endpoints="${MEMBER_EP[i]}" get "" --from-key --consistency=s -w json |
            sed -E 's/"lease":([0-9]+)/"lease":"\1"/g' |
            jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version,
                lease: (.lease // "0")}' >"$WORK/restored-m$i.jsonl"
        cmp -s "$WORK/oracle.jsonl" "$WORK/restored-m$i.jsonl" ||
            problems+=("m$i: keyspace differs from the oracle at $R ($(wc -l <"$WORK/restored-m$i.jsonl") keys, oracle $(wc -l <"$WORK/oracle.jsonl"))")
        hash=$(etcdctl --endpoints="${MEMBER_EP[i]}" endpoint hashkv -w json | jq -r '.[0].HashKV.hash')
        [ -n "$first_hash" ] || first_hash=$hash
        [ "$hash" = "$first_hash" ] || problems+=("m$i: hashkv $hash, m1 $first_hash")
    done
    # members: 3 voters, started, with the IDs etcd computes from the new token
    local ids=() id line
    etcdctl --endpoints="$CLUSTER_EPS" member list >"$WORK/members.txt"
    for i in 1 2 3; do
        id=$(member_id "${MEMBER_PEER[i]}" "$NEW_TOKEN")
        ids+=("$id")
        line=$(grep "^$id, started, m$i, ${MEMBER_PEER[i]}, ${MEMBER_EP[i]}, false" "$WORK/members.txt" || true)
        [ -n "$line" ] || problems+=("member m$i with ID $id not listed as a started voter: $(tr '\n' ';' <"$WORK/members.txt")")
        grep "member m$i: ID $id," "$WORK/block-restore-all.log" >/dev/null ||
            problems+=("the restore did not log m$i's ID $id")
    done
    [ "$(grep -c . "$WORK/members.txt")" = 3 ] || problems+=("member list: $(tr '\n' ';' <"$WORK/members.txt")")
    local cid want_cid
    want_cid=$(cluster_id "${ids[@]}")
    cid=$(etcdctl --endpoints="${MEMBER_EP[1]}" endpoint status -w json |
        sed -E 's/"cluster_id":([0-9]+)/"cluster_id":"\1"/' | jq -r '.[0].Status.header.cluster_id')
    cid=$(python3 -c 'import sys; print("%x" % int(sys.argv[1]))' "$cid")
    [ "$cid" = "$want_cid" ] || problems+=("cluster ID $cid, want $want_cid")
    grep "cluster ID $want_cid " "$WORK/block-restore-all.log" >/dev/null || problems+=("the restore did not log cluster ID $want_cid")

    # watches from before the restore: compacted
    local out
    out=$(timeout 10 etcdctl --endpoints="$CLUSTER_EPS" watch --prefix / --rev="$early_rev" 2>&1 </dev/null | head -3 || true)
    grep "required revision has been compacted" <<<"$out" >/dev/null ||
        problems+=("a watch from revision $early_rev after the restore: $out")
    out=$(timeout 10 etcdctl --endpoints="$CLUSTER_EPS" watch --prefix / --rev=$((seen + 1)) 2>&1 </dev/null | head -3 || true)
    grep "required revision has been compacted" <<<"$out" >/dev/null ||
        problems+=("the watcher from before the loss, resuming at revision $((seen + 1)): $out")
    stop_pid "$watch_pid"
    # backups again: a sidecar on the restored leader forks a new history from the old one
    local old_history new_history lead2 port2
    old_history=$(etcdbrctl list $STORE_FLAGS -o json | jq -r '.sets[] | select(.latest) | .history')
    lead2=$(leader_index)
    port2=$(free_port)
    "$ETCDBR_BIN" server --endpoints="${MEMBER_EP[lead2]}" $STORE_FLAGS \
        --snapstore-temp-directory="$WORK/snaptmp2" --server-port="$port2" \
        --data-dir="${MEMBER_DIR[lead2]}" --delta-snapshot-period=1s --schedule='0 0 1 1 *' \
        --reelection-period=2s --garbage-collection-period=0s >"$WORK/server2.log" 2>&1 &
    PIDS+=("$!")
    wait_backed_up "http://127.0.0.1:$port2" "$((want_rev + 2))" 30
    new_history=$(etcdbrctl list $STORE_FLAGS -o json | jq -r '.sets[] | select(.latest) | .history')
    [ "$new_history" != "$old_history" ] && [ -n "$new_history" ] ||
        problems+=("after the restore the latest set is of history '$new_history', before '$old_history': no fork")
    grep -i "fork" "$WORK/server2.log" >/dev/null || problems+=("the restored cluster's sidecar did not log a fork")
    # the old data dir was moved aside, not deleted
    [ -d "${MEMBER_DIR[s]}.before-restore/member" ] || problems+=("the survivor's old data dir is gone")

    if [ ${#problems[@]} -gt 0 ]; then
        printf '  %s\n' "${problems[@]}"
        fail "seed=$seed etcd $v: quorum-loss restore not exact (replay: ETCDBR_SEED=$seed ETCDBR_ETCD_VERSIONS=$v)"
    fi
    echo "etcd $v seed=$seed: 3 members restored from one set at revision $R + $BUMP," \
        "$(wc -l <"$WORK/oracle.jsonl") keys exact, hashkv $first_hash on all, cluster $want_cid," \
        "old watchers compacted"
    for i in 1 2 3; do stop_pid "${MEMBER_PID[i]}"; done
}

failed=()
for v in $versions; do
    seed=${ETCDBR_SEED:-$(((RANDOM << 15) | RANDOM))}
    start=$SECONDS
    set +e
    (
        set -e
        trap stop_all EXIT
        quorum_run "$v" "$seed"
    )
    rc=$?
    set -e
    if [ "$rc" = 0 ]; then
        echo "etcd $v seed=$seed: passed in $((SECONDS - start)) s"
    else
        echo "etcd $v seed=$seed: FAILED in $((SECONDS - start)) s"
        failed+=("etcd $v seed=$seed")
    fi
done
[ ${#failed[@]} = 0 ] || fail "quorum-loss restore failed for: ${failed[*]} (KEEP_WORK=1 keeps the work dirs)"
echo "quorum loss: every run restored all members exactly"
