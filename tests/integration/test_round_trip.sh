#!/usr/bin/env bash
# Round trip against a real etcd, once per etcd version (etcd_versions: Debian's 3.4 and the cached
# 3.5/3.6/3.7 builds): a varied keyspace, a running `snapshot` cutting several deltas, SIGTERM, the
# data dir lost, `restore` (its member dir written by etcdbrctl, docs/member-dir.md), etcd of the same version
# started on the result: every key, value, create and mod revision, version, the current revision
# and HashKV equal the source's.
source "$(dirname "$0")/lib.sh"
make_workdir
versions=$(etcd_versions)

round_trip() {
    local v=$1 i
    use_etcd "$v"
    sub_workdir "$v"
    start_etcd src "$WORK/src.etcd"
    local SRC_EP=$ETCD_EP SRC_PID=$ETCD_PID

    # initial data, in the full snapshot
    for i in $(seq 1 50); do ectl put "/registry/pods/ns1/pod-$i" "{\"v\":$i}" >/dev/null; done
    ectl put /registry/pods/ns1/pod-1 overwritten >/dev/null
    ectl del /registry/pods/ns1/pod-2 >/dev/null

    start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s
    wait_for_log "$WORK/snap.log" "full snapshot Full-"

    wave() { sleep 1.3; }
    # wave 1: overwrites, deletes, a txn putting 3 keys in one revision
    ectl put /registry/pods/ns1/pod-3 again >/dev/null
    ectl del /registry/pods/ns1/pod-4 >/dev/null
    printf '\nput /registry/txn/a 1\nput /registry/txn/b 2\nput /registry/txn/c 3\n\n\n' | ectl txn >/dev/null
    wave
    # wave 2: delete of a whole prefix, an empty value, binary key and value (NUL bytes included)
    ectl del --prefix /registry/pods/ns1/pod-1 >/dev/null
    ectl put /registry/empty "" >/dev/null
    gw_put "$SRC_EP" "$(printf '/registry/bin-\xff\xfe\x00\x01' | base64 -w0)" "$(printf '\x00\x01\xff\xfe\xc3\x28\x00' | base64 -w0)"
    wave
    # wave 3: a 1 MiB value, a key deleted and recreated
    head -c 786432 /dev/urandom | base64 -w0 >"$WORK/big"
    [ "$(stat -c %s "$WORK/big")" = 1048576 ] || fail "1 MiB value not made"
    ectl put /registry/big <"$WORK/big" >/dev/null
    ectl del /registry/txn/b >/dev/null
    ectl put /registry/txn/b recreated >/dev/null
    wave
    # wave 4: written right before SIGTERM: must be in the last delta
    for i in $(seq 1 20); do ectl put "/registry/last/$i" "v$i" >/dev/null; done
    stop_snapshotter

    local src_rev src_hash
    src_rev=$(current_revision "$SRC_EP")
    dump_keys "$SRC_EP" >"$WORK/src.jsonl"
    src_hash=$(ectl endpoint hashkv --rev="$src_rev" -w json | jq -r '.[0].HashKV.hash')
    stop_pid "$SRC_PID"
    rm -rf "$WORK/src.etcd"

    local n_deltas n_full
    n_deltas=$(count_objects "$WORK/store" Incr)
    [ "$n_deltas" -ge 3 ] || fail "etcd $v: expected at least 3 deltas, got $n_deltas: $(ls "$WORK/store/v2")"
    n_full=$(count_objects "$WORK/store" Full)
    [ "$n_full" = 1 ] || fail "etcd $v: expected 1 full snapshot, got $n_full"
    ls "$WORK/store/v2" | grep '\.gz$' >/dev/null || fail "gzip is the default compression"

    restore_store "$WORK/store" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || {
        cat "$WORK/restore.log"
        fail "etcd $v: restore failed"
    }
    start_etcd restored "$WORK/restored.etcd"
    dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
    local rev hash
    rev=$(current_revision "$ETCD_EP")
    hash=$(ectl endpoint hashkv --rev="$src_rev" -w json | jq -r '.[0].HashKV.hash')
    stop_pid "$ETCD_PID"

    [ "$rev" = "$src_rev" ] || fail "etcd $v: revision $rev, source $src_rev"
    cmp "$WORK/src.jsonl" "$WORK/restored.jsonl" || fail "etcd $v: keyspace differs"
    [ "$hash" = "$src_hash" ] || fail "etcd $v: hashkv $hash, source $src_hash"
    [ "$(wc -l <"$WORK/src.jsonl")" -gt 60 ] || fail "etcd $v: source keyspace unexpectedly small"
    grep -q "$(printf '/registry/last/20' | base64 -w0)" "$WORK/restored.jsonl" || fail "etcd $v: last wave missing"
    echo "round trip etcd $v ($(etcd --version | sed -n 1p)): $n_deltas deltas, revision $rev, $(wc -l <"$WORK/src.jsonl") keys, hashkv $hash equal"
}

for v in $versions; do
    start=$SECONDS
    round_trip "$v"
    echo "etcd $v: $((SECONDS - start)) s"
done
