#!/usr/bin/env bash
# compact (docs/go-tool.md §1.10, §10.2): a random write history (history_gen.sh: puts, overwrites,
# deletes, txns, values up to 1.5 MiB, leases before and after the full snapshot) is backed up as
# a full snapshot plus deltas; a restore of that set is the oracle. Then `compact` writes one new
# full snapshot; a restore from it alone (the latest set is now that one object) must equal the
# oracle: every kv field (lease included), the revision, HashKV, the leases alive. Once on the
# Local store and once on s3rver (an object store), seeds logged (ETCDBR_SEED=N replays). Also:
# a second compact is a no-op; a set with a corrupt delta makes compact fail with nothing stored;
# an empty store exits 4.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/history_gen.sh"
make_workdir
v=$(etcd_versions | tail -1)
use_etcd "$v"

dump_kvs() {
    etcdctl --endpoints="$1" get "" --from-key -w json |
        sed -E 's/"lease":([0-9]+)/"lease":"\1"/g' |
        jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version,
            lease: (.lease // "0")}'
}

# snapshot with the store flags in STORE_FLAGS; sets SNAP_PID
start_snap() {
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" "${STORE_FLAGS[@]}" \
        --snapstore-temp-directory="$WORK/snaptmp" --schedule='0 0 1 1 *' \
        --garbage-collection-period=0s --delta-snapshot-period=1s \
        --max-changes-per-delta-snapshot=25 >"$WORK/snap.log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
}

# restore_to DIR LOG: restore from STORE_FLAGS into DIR
restore_to() {
    "$ETCDBR_BIN" restore "${STORE_FLAGS[@]}" --data-dir="$1" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$1.tmp" >"$2" 2>&1
}

# observe DIR OUT REV: starts etcd on DIR, writes OUT.kvs, OUT.rev, OUT.hash (HashKV at REV),
# OUT.leases (every lease a key names: "<id> alive" or "<id> missing")
observe() {
    local dir=$1 out=$2 rev=$3 id ttl
    start_etcd restored "$dir" --max-request-bytes=3145728
    dump_kvs "$ETCD_EP" >"$out.kvs"
    current_revision "$ETCD_EP" >"$out.rev"
    ectl endpoint hashkv --rev="$rev" -w json | jq -r '.[0].HashKV.hash' >"$out.hash"
    : >"$out.leases"
    for id in $(jq -r 'select(.lease != "0") | .lease' "$out.kvs" | sort -u); do
        ttl=$(etcdctl --endpoints="$ETCD_EP" lease timetolive "$(printf '%x' "$id")" -w json | jq -r .ttl)
        if [ "$ttl" -gt 0 ]; then echo "$id alive"; else echo "$id missing"; fi >>"$out.leases"
    done
    stop_pid "$ETCD_PID"
}

compact_run() {
    local label=$1 seed=$2
    echo "== $label seed=$seed (etcd $v)"
    sub_workdir "$label-$seed"
    start_etcd src "$WORK/src.etcd" --max-request-bytes=3145728 --unsafe-no-fsync
    local SRC_PID=$ETCD_PID
    gen_init "$seed" "$WORK/gen"
    gen_before_snapshot
    start_snap
    wait_for_log "$WORK/snap.log" "full snapshot Full-" 60
    gen_after_snapshot
    stop_snapshotter
    local src_rev
    src_rev=$(current_revision "$ETCD_EP")
    stop_pid "$SRC_PID"
    local n_deltas
    n_deltas=$(grep -c "delta snapshot Incr-.* stored" "$WORK/snap.log" || true)
    [ "$n_deltas" -ge 2 ] || fail "$label seed=$seed: $n_deltas deltas stored, want >= 2"

    # the oracle: a restore of the set as backed up
    restore_to "$WORK/set.etcd" "$WORK/restore-set.log" || {
        tail -20 "$WORK/restore-set.log"
        fail "$label seed=$seed: restore of the original set failed"
    }
    observe "$WORK/set.etcd" "$WORK/set" "$src_rev"
    [ "$(cat "$WORK/set.rev")" = "$src_rev" ] || fail "$label seed=$seed: the set restores to revision $(cat "$WORK/set.rev"), source $src_rev"

    "$ETCDBR_BIN" compact "${STORE_FLAGS[@]}" --restoration-temp-snapshots-dir="$WORK/compact.tmp" \
        >"$WORK/compact.log" 2>&1 || {
        tail -20 "$WORK/compact.log"
        fail "$label seed=$seed: compact failed"
    }
    name=$(sed -n 's/.*compact done: \(Full-[^ ]*\) at revision.*/\1/p' "$WORK/compact.log")
    [ -n "$name" ] || fail "$label seed=$seed: compact did not say what it stored: $(tail -3 "$WORK/compact.log")"
    case "$name" in Full-00000000-$(printf '%08d' "$src_rev")-*) ;;
    *) fail "$label seed=$seed: compacted snapshot $name, want Full-00000000-$(printf '%08d' "$src_rev")-..." ;;
    esac
    grep "read back and checked" "$WORK/compact.log" >/dev/null || fail "$label seed=$seed: compact did not read its snapshot back"
    [ ! -e "$WORK/compact.tmp" ] || [ -z "$(ls -A "$WORK/compact.tmp")" ] || fail "$label seed=$seed: compact left scratch files: $(ls -A "$WORK/compact.tmp")"

    # the restore now starts from the compacted snapshot and needs no delta
    restore_to "$WORK/compacted.etcd" "$WORK/restore-compacted.log" || {
        tail -20 "$WORK/restore-compacted.log"
        fail "$label seed=$seed: restore from the compacted snapshot failed"
    }
    grep "full snapshot [^ ]*$name and 0 delta snapshots" "$WORK/restore-compacted.log" >/dev/null ||
        fail "$label seed=$seed: the restore did not use $name alone: $(grep 'restoring from' "$WORK/restore-compacted.log")"
    observe "$WORK/compacted.etcd" "$WORK/compacted" "$src_rev"
    local problems=()
    [ "$(cat "$WORK/compacted.rev")" = "$src_rev" ] || problems+=("revision $(cat "$WORK/compacted.rev"), set $src_rev")
    cmp -s "$WORK/set.kvs" "$WORK/compacted.kvs" || problems+=("keyspace differs: $(diff "$WORK/set.kvs" "$WORK/compacted.kvs" | head -4)")
    cmp -s "$WORK/set.hash" "$WORK/compacted.hash" || problems+=("hashkv $(cat "$WORK/compacted.hash"), set $(cat "$WORK/set.hash")")
    cmp -s "$WORK/set.leases" "$WORK/compacted.leases" || problems+=("leases differ: $(diff "$WORK/set.leases" "$WORK/compacted.leases" | head -4)")
    grep missing "$WORK/set.leases" "$WORK/compacted.leases" >/dev/null && problems+=("a key names a lease that is not alive")
    [ "$(wc -l <"$WORK/set.kvs")" -ge 10 ] || problems+=("keyspace unexpectedly small")
    if [ ${#problems[@]} -gt 0 ]; then
        printf '  %s\n' "${problems[@]}"
        fail "$label seed=$seed: the compacted snapshot does not restore as the set (replay: ETCDBR_SEED=$seed)"
    fi

    # a second compact has nothing to do and stores nothing
    local before after
    before=$(list_objects | sort | md5sum)
    "$ETCDBR_BIN" compact "${STORE_FLAGS[@]}" --restoration-temp-snapshots-dir="$WORK/compact.tmp" \
        >"$WORK/compact2.log" 2>&1 || fail "$label: the second compact failed: $(tail -3 "$WORK/compact2.log")"
    grep "nothing to do" "$WORK/compact2.log" >/dev/null || fail "$label: the second compact did not say it had nothing to do"
    after=$(list_objects | sort | md5sum)
    [ "$before" = "$after" ] || fail "$label: the second compact changed the store"
    echo "$label seed=$seed: $name restores as the set: revision $src_rev, $(wc -l <"$WORK/set.kvs") keys," \
        "$(wc -l <"$WORK/set.leases") leases, hashkv $(cat "$WORK/set.hash"), from $n_deltas deltas"
}

list_objects() {
    if [ "${STORE_FLAGS[0]}" = --storage-provider=Local ]; then
        find "$STORE_DIR" -type f -printf '%P %s\n'
    else
        find "$S3_DIR" -type f -printf "%P %s\n"
    fi
}

seed=${ETCDBR_SEED:-$(((RANDOM << 15) | RANDOM))}

# 1. Local
STORE_DIR=$WORK_ROOT/local-store
STORE_FLAGS=(--storage-provider=Local --store-container="$STORE_DIR")
compact_run local "$seed"

# 2. a corrupt delta in a copy of that store: compact fails and stores nothing
bad=$WORK_ROOT/bad-store
cp -a "$STORE_DIR" "$bad"
rm -f "$bad"/v2/Full-*"$(sed -n 's/.*compact done: Full-[0-9]*-[0-9]*-\([0-9]*\).*/\1/p' "$WORK/compact.log")"*
last=$(ls "$bad/v2" | grep '^Incr-' | sort | tail -1)
[ -n "$last" ] || fail "no delta to corrupt"
size=$(stat -c %s "$bad/v2/$last")
printf '\xff\x00\xff' | dd of="$bad/v2/$last" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
nfull=$(ls "$bad/v2" | grep -c '^Full-')
rc=0
"$ETCDBR_BIN" compact --storage-provider=Local --store-container="$bad" \
    --restoration-temp-snapshots-dir="$WORK_ROOT/bad.tmp" >"$WORK_ROOT/compact-bad.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "compact of a set with a corrupt delta exited $rc, want 1: $(tail -3 "$WORK_ROOT/compact-bad.log")"
grep "compact failed: .*$last" "$WORK_ROOT/compact-bad.log" >/dev/null || fail "the error does not name the corrupt delta $last: $(grep level=error "$WORK_ROOT/compact-bad.log")"
[ "$(ls "$bad/v2" | grep -c '^Full-')" = "$nfull" ] || fail "compact stored a snapshot from a corrupt set"
echo "corrupt delta: compact failed naming $last, nothing stored"

# 3. an empty store: exit 4
rc=0
"$ETCDBR_BIN" compact --storage-provider=Local --store-container="$WORK_ROOT/empty" >"$WORK_ROOT/compact-empty.log" 2>&1 || rc=$?
[ "$rc" = 4 ] || fail "compact of an empty store exited $rc, want 4"

# 4. encrypted (docs/encryption.md): the set and the compacted snapshot are .enc objects
KEYS=$WORK_ROOT/keys
printf 'k1 %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$KEYS"
chmod 600 "$KEYS"
STORE_DIR=$WORK_ROOT/enc-store
STORE_FLAGS=(--storage-provider=Local --store-container="$STORE_DIR" --encryption-key-file="$KEYS")
compact_run encrypted "$((seed + 2))"
case "$name" in *.enc.gz) ;; *) fail "encrypted: the compacted snapshot $name is not .enc.gz" ;; esac
[ "$(head -c 3 "$STORE_DIR/v2/$name" | od -An -tx1 | tr -d ' ')" != 1f8b08 ] || fail "encrypted: $name is plain gzip"

# 5. s3rver
start_s3rver
S3_DIR=$WORK/s3rver
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
STORE_FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-endpoint-override="$S3_ENDPOINT" --store-prefix=compact)
compact_run s3 "$((seed + 1))"
echo "compact: every run restored as its set"
