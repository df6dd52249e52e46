#!/usr/bin/env bash
# Restore of an etcd with authentication enabled, on every etcd version (etcd_versions): users root
# and backup (root role), `auth enable`, `snapshot` logging in as backup (--etcd-username,
# --etcd-password) cutting a full snapshot and deltas, `restore`, etcd of the same version on the
# result: auth is still enabled (an unauthenticated get fails, root's works), and the keyspace,
# revision and HashKV equal the source's.
source "$(dirname "$0")/lib.sh"
make_workdir
versions=$(etcd_versions)

auth_run() {
    local v=$1 i
    use_etcd "$v"
    sub_workdir "$v"
    unset ETCDCTL_USER
    start_etcd src "$WORK/src.etcd"
    local SRC_EP=$ETCD_EP SRC_PID=$ETCD_PID
    ectl user add root:rootpw >/dev/null
    ectl user add backup:backuppw >/dev/null
    ectl role add root >/dev/null
    ectl user grant-role root root >/dev/null
    ectl user grant-role backup root >/dev/null
    ectl auth enable >/dev/null
    ectl get /x >/dev/null 2>&1 && fail "etcd $v: auth is not enabled on the source"
    export ETCDCTL_USER=root:rootpw # every etcdctl from here on (start_etcd's health check too)

    for i in $(seq 1 30); do ectl put "/auth/full/$i" "v$i" >/dev/null; done
    ectl del /auth/full/3 >/dev/null

    start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s \
        --etcd-username=backup --etcd-password=backuppw
    wait_for_log "$WORK/snap.log" "full snapshot Full-"
    for i in $(seq 1 20); do ectl put "/auth/delta1/$i" "v$i" >/dev/null; done
    printf '\nput /auth/txn/a 1\nput /auth/txn/b 2\ndel /auth/full/4\n\n\n' | ectl txn >/dev/null
    sleep 1.3
    ectl del --prefix /auth/full/1 >/dev/null
    for i in $(seq 1 20); do ectl put "/auth/delta2/$i" "w$i" >/dev/null; done
    sleep 1.3
    for i in $(seq 1 10); do ectl put "/auth/last/$i" "x$i" >/dev/null; done
    stop_snapshotter

    local src_rev src_hash
    src_rev=$(current_revision "$SRC_EP")
    dump_keys "$SRC_EP" >"$WORK/src.jsonl"
    src_hash=$(ectl endpoint hashkv --rev="$src_rev" -w json | jq -r '.[0].HashKV.hash')
    stop_pid "$SRC_PID"
    local n_deltas
    n_deltas=$(count_objects "$WORK/store" Incr)
    [ "$n_deltas" -ge 2 ] || fail "etcd $v: expected at least 2 deltas, got $n_deltas: $(ls "$WORK/store/v2")"

    # bounded: a restore of this small store takes seconds; one stuck on auth must not cost
    # minutes per version (the restore's own temporary etcd dies with it)
    restore_bg "$WORK/store" "$WORK/restored.etcd" "$WORK/restore.log"
    for i in $(seq 1 300); do
        kill -0 "$RESTORE_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$RESTORE_PID" 2>/dev/null; then
        stop_pid "$RESTORE_PID"
        tail -5 "$WORK/restore.log" | cut -c1-600
        fail "etcd $v: restore of an auth-enabled etcd still running after 30 s"
    fi
    wait "$RESTORE_PID" || {
        tail -5 "$WORK/restore.log" | cut -c1-600
        fail "etcd $v: restore of an auth-enabled etcd failed"
    }
    start_etcd restored "$WORK/restored.etcd"
    local rev hash out problems=()
    if out=$(env -u ETCDCTL_USER etcdctl --endpoints="$ETCD_EP" get /auth/last/1 2>&1); then
        problems+=("auth is not enabled on the restored member: an unauthenticated get works")
    else
        grep -q "user name is empty\|authentication\|permission denied" <<<"$out" ||
            problems+=("unauthenticated get failed for another reason: $out")
    fi
    ectl get /auth/last/1 >/dev/null 2>&1 || problems+=("root cannot read on the restored member")
    env -u ETCDCTL_USER etcdctl --endpoints="$ETCD_EP" --user=backup:backuppw get /auth/last/1 >/dev/null 2>&1 ||
        problems+=("user backup cannot read on the restored member")
    rev=$(current_revision "$ETCD_EP")
    dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
    hash=$(ectl endpoint hashkv --rev="$src_rev" -w json | jq -r '.[0].HashKV.hash')
    stop_pid "$ETCD_PID"
    [ "$rev" = "$src_rev" ] || problems+=("revision $rev, source $src_rev")
    cmp -s "$WORK/src.jsonl" "$WORK/restored.jsonl" || {
        problems+=("keyspace differs")
        diff <(jq -c '.key |= @base64d' "$WORK/src.jsonl") <(jq -c '.key |= @base64d' "$WORK/restored.jsonl") | head -10 || true
    }
    [ "$hash" = "$src_hash" ] || problems+=("hashkv $hash, source $src_hash")
    if [ ${#problems[@]} -gt 0 ]; then
        printf '  %s\n' "${problems[@]}"
        fail "etcd $v: the restore of an auth-enabled etcd is not exact"
    fi
    echo "etcd $v: auth enabled after restore; $n_deltas deltas, revision $rev, $(wc -l <"$WORK/src.jsonl") keys, hashkv $hash equal"
}

failed=()
for v in $versions; do
    start=$SECONDS
    set +e
    (
        set -e
        trap stop_all EXIT
        auth_run "$v"
    )
    rc=$?
    set -e
    echo "etcd $v: $([ "$rc" = 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s"
    [ "$rc" = 0 ] || failed+=("$v")
done
[ ${#failed[@]} = 0 ] || fail "auth restore failed on etcd ${failed[*]}"
