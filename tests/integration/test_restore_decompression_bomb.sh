#!/usr/bin/env bash
# Decompression is bounded (issue 17, section 3). A real etcd is backed up by `snapshot` into a
# Local store (zstd), with legitimately large deltas (1 MiB values, more than 1 MiB a delta). Then:
#  1. a small planted "bomb" delta (zstd, gzip and LZW streams of zeros, a few hundred KB at most)
#     that inflates past --max-delta-size makes restore fail at once with an error naming the
#     object and the flag; restore runs under `ulimit -f` just above the limit, so a spool file
#     one byte longer than the limit kills it (SIGXFSZ) instead: nothing past the limit is written;
#  2. the same at the default limit (1 GiB, no flag): a 1.25 GiB zstd bomb of a few dozen KB;
#  3. verify reports the bomb as undecodable, naming the object and the flag (exit 1), and
#     initialize (the sidecar's restore path) fails naming both, leaving no member dir;
#  4. the legitimate large delta is refused with --max-delta-size below its size (naming it and
#     the flag) and restored exactly once the flag is raised;
#  5. the spool stops before the free-space reserve: with --min-free-disk-bytes just under what the
#     file system has free, a bomb allowed by --max-delta-size fails in the spool with an error
#     naming the delta, the spool dir, the free bytes and the flag; a reserve above the free space
#     refuses before the first download, naming the full snapshot.
# No data dir is left behind by any refused restore.
source "$(dirname "$0")/lib.sh"
make_workdir
GZIP_TOOL=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/gzip_tool
[ -x "$GZIP_TOOL" ] || fail "gzip_tool not built ($GZIP_TOOL)"
command -v zstd >/dev/null || fail "zstd(1) is needed to write the zstd bomb"
MiB=1048576

start_etcd src "$WORK/src.etcd"
for i in $(seq 1 20); do ectl put "/registry/pods/ns1/pod-$i" "{\"v\":$i}" >/dev/null; done
start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=1s \
    --compress-snapshots --compression-policy=zstd
wait_for_log "$WORK/snap.log" "full snapshot Full-"
# legitimately large deltas: 1 MiB values of incompressible bytes
for i in 1 2 3; do
    head -c 786432 /dev/urandom | base64 -w0 >"$WORK/big$i"
    ectl put "/registry/big/$i" <"$WORK/big$i" >/dev/null
done
rev=$(current_revision "$ETCD_EP")
# until a delta reaches the current revision
for i in $(seq 1 300); do
    last=$(ls "$WORK/store/v2" | sed -n 's/^Incr-[0-9]*-0*\([0-9][0-9]*\)-.*/\1/p' | sort -n | tail -1)
    [ "${last:-0}" -ge "$rev" ] && break
    sleep 0.1
done
[ "${last:-0}" -ge "$rev" ] || fail "no delta reached revision $rev"
stop_snapshotter
dump_keys "$ETCD_EP" >"$WORK/expected.jsonl"
stop_pid "$ETCD_PID"
# plain sizes of the deltas, in revision order: the first one over 1 MiB is what a 1 MiB limit
# refuses, the largest what the raised limit must let through
ls "$WORK/store/v2" | grep '^Incr-' | sort | while read -r n; do
    printf '%s %s\n' "$(zstd -dc "$WORK/store/v2/$n" | wc -c)" "$n"; done >"$WORK/deltas.txt"
big_size=$(sort -n "$WORK/deltas.txt" | tail -1 | cut -d' ' -f1)
big_name=$(awk -v m=$MiB '$1 > m { print $2; exit }' "$WORK/deltas.txt")
[ -n "$big_name" ] || fail "no delta holds more than 1 MiB: $(cat "$WORK/deltas.txt")"
echo "store: $(ls "$WORK/store/v2" | wc -l) objects up to revision $last; first delta over 1 MiB $big_name, largest $big_size bytes"

# plant STORE KIND BYTES: a delta of BYTES zeros after the last one, compressed by KIND; prints
# its name. Its revisions follow the store's last, so restore fetches it like any other delta.
plant() {
    local store=$1 kind=$2 bytes=$3 suffix name
    case $kind in zstd) suffix=.zst ;; gzip) suffix=.gz ;; lzw) suffix=.Z ;; esac
    name=$(printf 'Incr-%08d-%08d-%d%s' $((last + 1)) $((last + 1)) "$(date +%s)" "$suffix")
    rm -rf "$store"
    cp -r "$WORK/store" "$store"
    case $kind in
    zstd) head -c "$bytes" /dev/zero | zstd -q -c >"$store/v2/$name" ;;
    gzip) head -c "$bytes" /dev/zero | gzip -9 -c >"$store/v2/$name" ;;
    lzw) head -c "$bytes" /dev/zero | "$GZIP_TOOL" --kind lzw >"$store/v2/$name" ;;
    esac
    echo "$name"
}

# refused NAME STORE FILE_LIMIT PATTERN... [-- restore flags]: restore under `ulimit -f FILE_LIMIT`
# (bytes) exits 1 (not killed by SIGXFSZ) and its log holds every PATTERN; no data dir is left.
refused() {
    local name=$1 store=$2 flimit=$3 rc=0 t0=$SECONDS pats=()
    shift 3
    while [ $# -gt 0 ] && [ "$1" != -- ]; do pats+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    (ulimit -f $((flimit / 1024)) && restore_store "$store" "$WORK/$name.etcd" "$@") \
        >"$WORK/$name.log" 2>&1 || rc=$?
    [ "$rc" = 1 ] || { tail -5 "$WORK/$name.log"; fail "$name: exit $rc, expected 1 (153: a file grew past $flimit bytes)"; }
    local p
    for p in "${pats[@]}"; do
        grep -q -- "$p" "$WORK/$name.log" || { tail -5 "$WORK/$name.log"; fail "$name: no '$p' in the error"; }
    done
    [ ! -e "$WORK/$name.etcd" ] || fail "$name: a data dir was left behind"
    echo "$name: refused in $((SECONDS - t0))s: $(grep -m1 'level=error' "$WORK/$name.log" | sed 's/.*msg=//' | cut -c1-400)"
}

# 1. bombs of every compressed kind against a 16 MiB limit, 8x past it
for kind in zstd gzip lzw; do
    name=$(plant "$WORK/bomb-$kind" "$kind" $((128 * MiB)))
    size=$(stat -c %s "$WORK/bomb-$kind/v2/$name")
    [ "$size" -lt $((400 * 1024)) ] || fail "$kind bomb is $size bytes, not small"
    echo "$kind bomb $name: $size bytes inflating to $((128 * MiB))"
    refused "bomb-$kind" "$WORK/bomb-$kind" $((17 * MiB)) "$name" "--max-delta-size" \
        "more than $((16 * MiB)) bytes" -- --max-delta-size=$((16 * MiB))
done

# 2. at the default limit (1 GiB): a zstd bomb of 1.25 GiB, no flag given
name=$(plant "$WORK/bomb-default" zstd $((1280 * MiB)))
echo "default-limit bomb $name: $(stat -c %s "$WORK/bomb-default/v2/$name") bytes inflating to $((1280 * MiB))"
refused bomb-default "$WORK/bomb-default" $((1024 * MiB + MiB)) "$name" "--max-delta-size" \
    "more than 1073741824 bytes"

# 3. verify names the bomb and the flag
rc=0
"$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/bomb-zstd" \
    --snapstore-temp-directory="$WORK/vt" --max-delta-size=$((16 * MiB)) \
    >"$WORK/verify.out" 2>"$WORK/verify.log" || rc=$?
name=$(ls "$WORK/bomb-zstd/v2" | grep "^Incr-$(printf %08d $((last + 1)))-")
[ "$rc" = 1 ] || { cat "$WORK/verify.out" "$WORK/verify.log"; fail "verify of the bomb exited $rc"; }
grep -q "$name.*--max-delta-size" "$WORK/verify.out" || { cat "$WORK/verify.out"; fail "verify did not name the bomb and the flag"; }
echo "verify: $(grep -m1 "$name" "$WORK/verify.out" | cut -c1-300)"

# initialize (the sidecar's restore path, also the server's) decodes through the same bound
name=$(ls "$WORK/bomb-zstd/v2" | grep "^Incr-$(printf %08d $((last + 1)))-")
rc=0
(ulimit -f $((17 * 1024)) && "$ETCDBR_BIN" initialize --storage-provider=Local \
    --store-container="$WORK/bomb-zstd" --snapstore-temp-directory="$WORK/init-tmp" \
    --data-dir="$WORK/init.etcd" --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/init.etcd.tmp" --max-delta-size=$((16 * MiB))) \
    >"$WORK/init.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 153 ] || { tail -5 "$WORK/init.log"; fail "initialize of the bomb exited $rc"; }
grep -q "$name.*--max-delta-size" "$WORK/init.log" || { tail -5 "$WORK/init.log"; fail "initialize did not name the bomb and the flag"; }
[ ! -e "$WORK/init.etcd/member" ] || fail "initialize left a member dir from the bomb"
echo "initialize: exit $rc: $(grep -m1 "$name" "$WORK/init.log" | sed 's/.*msg=//' | cut -c1-300)"

# 4. the legitimate large delta: refused below its size, restored exactly above it
refused big-low "$WORK/store" $((64 * MiB)) "$big_name" "--max-delta-size" \
    -- --max-delta-size=$((1 * MiB))
restore_store "$WORK/store" "$WORK/big.etcd" --max-delta-size=$((big_size + 1)) \
    >"$WORK/big.log" 2>&1 || { tail -5 "$WORK/big.log"; fail "the large delta did not restore with the flag raised"; }
start_etcd restored "$WORK/big.etcd"
dump_keys "$ETCD_EP" | cmp - "$WORK/expected.jsonl" || fail "the restored keyspace differs"
stop_pid "$ETCD_PID"
echo "large delta: refused at --max-delta-size=$MiB, restored exactly at $((big_size + 1))"

# 5. the free-space reserve. avail: what an unprivileged writer may use where the spool goes.
avail() { df -B1 --output=avail "$WORK" | tail -1 | tr -d ' '; }
name=$(plant "$WORK/bomb-reserve" zstd $((3072 * MiB)))
reserve=$(($(avail) - 512 * MiB))
refused reserve-spool "$WORK/bomb-reserve" $((4096 * MiB)) "$name" "delta spool" \
    "$WORK/reserve-spool.etcd.tmp" "bytes free" "--min-free-disk-bytes" \
    -- --max-delta-size=$((4096 * MiB)) --min-free-disk-bytes="$reserve" --min-free-disk-percent=0
reserve=$(($(avail) + 1024 * 1024 * MiB))
refused reserve-full "$WORK/store" $((64 * MiB)) "Full-" "bytes free" "--min-free-disk-bytes" \
    -- --min-free-disk-bytes="$reserve"
echo "PASS"
