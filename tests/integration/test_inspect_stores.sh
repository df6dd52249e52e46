#!/usr/bin/env bash
# `get`, `diff` and `history` read every store `restore` reads (docs/inspect.md):
#  - one random history (inspect_lib.sh; seed logged, ETCDBR_SEED=N replays its writes) on a real
#    etcd (the newest built version; ETCDBR_ETCD_VERSIONS picks others), stored at once by six
#    snapshotters into six Local stores: gzip, zlib, Go LZW, zstd, uncompressed, and encrypted
#    (--encryption-key-file, zstd), each in several backup sets; on each store the checks of
#    test_inspect_property.sh against etcdctl on the live etcd (get at every kind of revision, key
#    ranges, --limit, --keys-only, diff, history, --time);
#  - every store under tests/fixtures (written by the Go tool: plain, gzip, zlib, LZW, the legacy
#    v1 layout, v0.43.0 with 1 MiB values; and ours with parallel gzip members): get "" --prefix
#    -o json, latest and --revision of the last revision, is the keyspace a restore must give
#    (expected/keys.jsonl, lease left out) at expected/revision; the store is left unchanged and
#    the scratch directory empty.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/inspect_lib.sh"
make_workdir
versions=$(etcd_versions)
[ -n "${ETCDBR_ETCD_VERSIONS:-}" ] || versions=$(printf '%s\n' "$versions" | tail -1)
VARIANTS=(gzip zlib lzw zstd none enc-zstd)

variant_flags() {
    case "$1" in
    none) echo --compress-snapshots=false ;;
    enc-*) echo --compress-snapshots=true --compression-policy="${1#enc-}" --encryption-key-file="$WORK/keys" ;;
    *) echo --compress-snapshots=true --compression-policy="$1" ;;
    esac
}

stores_run() {
    local v=$1 seed=$2 var i pids=() logs=() rc
    ins_begin "$v" "$seed"
    printf 'k-stores %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/keys"
    chmod 600 "$WORK/keys"
    mkdir -p "$WORK/tmp"
    ins_rnd 10 && ins_wave $((10 + R))
    for var in "${VARIANTS[@]}"; do
        # shellcheck disable=SC2046 # variant_flags: several words
        start_snapshotter "$WORK/store-$var" "$WORK/snap-$var.log" --delta-snapshot-period=1s \
            --schedule='@every 4s' $(variant_flags "$var")
        pids+=("$SNAP_PID")
        logs+=("$WORK/snap-$var.log")
    done
    for var in "${VARIANTS[@]}"; do wait_for_log "$WORK/snap-$var.log" "full snapshot Full-" 60; done
    for i in 1 2 3 4 5; do
        ins_rnd 20 && ins_wave $((8 + R))
        ins_rnd 2
        [ "$R" = 0 ] || ins_gap "${logs[@]}"
        if [ "$i" = 2 ] || [ "$i" = 4 ]; then
            # one more set in every store
            ins_wait_new_full 30 "${VARIANTS[@]/#/$WORK/store-}"
        fi
    done
    ins_gap "${logs[@]}"
    for i in "${!pids[@]}"; do
        kill -TERM "${pids[$i]}"
        rc=0
        wait "${pids[$i]}" || rc=$?
        [ "$rc" = 0 ] || fail "snapshotter ${VARIANTS[$i]} exited $rc"
    done
    if grep -H "level=error" "${logs[@]}"; then fail "seed=$seed: a snapshotter logged errors"; fi
    ins_collect_events
    echo "seed=$seed: $(wc -l <"$WORK/ops.log") ops, revision $(current_revision "$ETCD_EP")"
    for var in "${VARIANTS[@]}"; do
        ls "$WORK/store-$var/v2" | grep -q "^Full-.*$(case $var in none) echo '[0-9]$' ;; gzip) echo '\.gz$' ;;
            zlib) echo '\.zlib$' ;; lzw) echo '\.Z$' ;; zstd) echo '\.zst$' ;; enc-zstd) echo '\.enc\.zst$' ;; esac)" ||
            fail "$var: the full snapshots are not named as $var writes them: $(ls "$WORK/store-$var/v2" | tr '\n' ' ')"
        INS_FLAGS=(--storage-provider=Local --store-container="$WORK/store-$var"
            --snapstore-temp-directory="$WORK/tmp" --min-free-disk-bytes=0 --min-free-disk-percent=0)
        case "$var" in enc-*) INS_FLAGS+=(--encryption-key-file="$WORK/keys") ;; esac
        ins_check_store "$var" "$WORK/store-$var"
    done
    [ -z "$(ls -A "$WORK/tmp")" ] || fail "scratch left in $WORK/tmp: $(ls -A "$WORK/tmp")"
    if [ ${#INS_PROBLEMS[@]} -gt 0 ]; then
        echo "seed=$seed: ${#INS_PROBLEMS[@]} failed assertions"
        fail "seed=$seed etcd $v: inspect differs from etcdctl (replay: ETCDBR_SEED=$seed ETCDBR_ETCD_VERSIONS=$v)"
    fi
}

seeded_runs stores_run "$versions" 1 "${ETCDBR_SEED:-}"
failed=("${FAILED_RUNS[@]}")

# the Go tool's stores (and ours with parallel gzip members): the keyspace a restore gives
sub_workdir fixtures
mkdir -p "$WORK/tmp"
FX_FAILED=()
for fx in "$ETCDBR_SOURCE_DIR"/tests/fixtures/*/; do
    fx=${fx%/}
    name=$(basename "$fx")
    [ -f "$fx/expected/keys.jsonl" ] || continue
    cp -r "$fx/store" "$WORK/$name-store"
    chmod -R u+w "$WORK/$name-store"
    sha_before=$(cd "$WORK/$name-store" && find . -type f -exec sha256sum {} + | sort)
    want_rev=$(cat "$fx/expected/revision")
    for sel in latest "--revision=$want_rev"; do
        args=(get "" --prefix -o json --storage-provider=Local --store-container="$WORK/$name-store"
            --snapstore-temp-directory="$WORK/tmp" --min-free-disk-bytes=0 --min-free-disk-percent=0)
        [ "$sel" = latest ] || args+=("$sel")
        rc=0
        "$ETCDBR_BIN" "${args[@]}" >"$WORK/$name.json" 2>"$WORK/$name.err" || rc=$?
        if [ "$rc" != 0 ]; then
            echo "PROBLEM: $name ($sel): exit $rc: $(grep -m1 level=error "$WORK/$name.err")"
            FX_FAILED+=("$name $sel")
            continue
        fi
        if ! python3 "$INSPECT_CHECK" keyspace "$fx/expected/keys.jsonl" "$WORK/$name.json" "$want_rev" >"$WORK/$name.chk" 2>&1; then
            echo "PROBLEM: $name ($sel): get differs from expected/keys.jsonl: $(head -c 1500 "$WORK/$name.chk")"
            FX_FAILED+=("$name $sel")
            continue
        fi
        echo "$name ($sel): get equals expected/keys.jsonl ($(wc -l <"$fx/expected/keys.jsonl") keys at revision $want_rev)"
    done
    sha_after=$(cd "$WORK/$name-store" && find . -type f -exec sha256sum {} + | sort)
    [ "$sha_before" = "$sha_after" ] || FX_FAILED+=("$name: get changed the store")
done
[ -z "$(ls -A "$WORK/tmp")" ] || FX_FAILED+=("scratch left in $WORK/tmp: $(ls -A "$WORK/tmp")")

[ ${#failed[@]} = 0 ] || echo "FAILED: ${failed[*]} (KEEP_WORK=1 keeps the work dirs)"
[ ${#FX_FAILED[@]} = 0 ] || echo "FAILED fixtures: ${FX_FAILED[*]}"
[ ${#failed[@]} = 0 ] && [ ${#FX_FAILED[@]} = 0 ] || fail "inspect differs on some stores"
echo "stores: every compression, the encrypted store and every fixture read as the live etcd or the restore says"
