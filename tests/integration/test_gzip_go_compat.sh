#!/usr/bin/env bash
# Go's compress/gzip reader (the Go tool's) reads what our gzip writer writes, in both modes and
# every thread count: tests/tools/go_gunzip, built here with the machine's go (standard library
# only, offline), must return the plain bytes' exact size and SHA-256 for empty, 1-byte, block
# boundary and seeded random/text inputs, a real etcd snapshot, the objects a real snapshotter
# writes with --gzip-mode=parallel, and the checked-in fixture tests/fixtures/etcdbr-gzip-parallel
# (which must also restore to its expected keyspace and revision). Skips (77) without go.
source "$(dirname "$0")/lib.sh"
make_workdir
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
if ! command -v go >/dev/null; then
    skip_test "go not found (PATH, /usr/local/go/bin)"
fi
GZIP_TOOL=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/gzip_tool
[ -x "$GZIP_TOOL" ] || fail "gzip_tool not built ($GZIP_TOOL)"
# stdlib only: no module download; the user's build cache when go has one, else a private one
[ -n "$(go env GOCACHE 2>/dev/null)" ] || export GOCACHE=$WORK/gocache
(cd "$ETCDBR_SOURCE_DIR/tests/tools/go_gunzip" &&
    GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=off go build -o "$WORK/go_gunzip" .) ||
    fail "building tests/tools/go_gunzip"
GO_GUNZIP=$WORK/go_gunzip

SEED=${ETCDBR_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "[${SECONDS}s] seed $SEED (ETCDBR_SEED=$SEED reproduces the inputs)"
B=$((1 << 20)) # the writer's default block: one gzip member per MiB
python3 - "$SEED" "$WORK" "$B" <<'PY'
import random, sys
rnd, d, b = random.Random(int(sys.argv[1])), sys.argv[2], int(sys.argv[3])
def text(n):
    out, i, have = [], 0, 0
    while have < n:
        out.append('{"key":"/registry/pods/ns%d/pod-%d","rev":%d},' % (rnd.randrange(9), rnd.randrange(500), i))
        have += len(out[-1])
        i += 1
    return "".join(out).encode()[:n]
def rand(n):
    return bytes(rnd.getrandbits(8) for _ in range(n)) if n < 4096 else rnd.randbytes(n)
inputs = {"empty": b"", "one-byte": b"x", "block-minus-1": rand(b - 1), "block": text(b),
          "block-plus-1": rand(b + 1), "three-blocks-mixed": text(b + 12345) + rand(2 * b - 12345),
          "random-len": text(rnd.randrange(1, 3 * b))}
for name, data in inputs.items():
    open("%s/in-%s" % (d, name), "wb").write(data)
PY

# the same inputs and a real etcd db
start_etcd src "$WORK/src.etcd"
{
    echo
    for i in $(seq 1 120); do echo "put /k/$i value-$i-$SEED-$(head -c 300 /dev/urandom | base64 -w0)"; done
    printf '\n\n'
} | ectl txn >/dev/null
ectl snapshot save "$WORK/in-etcd-snapshot.db" >/dev/null 2>&1 || fail "etcdctl snapshot save"

check() { # FILE.gz INPUT LABEL: Go's reader and ours both give INPUT's bytes
    local gz=$1 in=$2 label=$3 want got ours
    want="$(stat -c %s "$in") $(sha256sum <"$in" | cut -d' ' -f1)"
    got=$("$GO_GUNZIP" "$gz" 2>&1) || fail "$label: Go's gzip reader refused our output: $got"
    [ "$got" = "$want" ] || fail "$label: Go read \"$got\", want \"$want\""
    ours=$("$GZIP_TOOL" -d <"$gz" | sha256sum | cut -d' ' -f1)
    [ "$ours" = "${want#* }" ] || fail "$label: our reader gave sha256 $ours"
}

n=0
for in in "$WORK"/in-*; do
    name=${in##*/in-}
    for mode in "parallel --threads 1" "parallel --threads 2" "parallel --threads 4" "single"; do
        "$GZIP_TOOL" --mode $mode <"$in" >"$WORK/out.gz" || fail "$name: gzip_tool --mode $mode"
        check "$WORK/out.gz" "$in" "$name ($mode)"
        n=$((n + 1))
    done
    # more members than threads with small blocks
    "$GZIP_TOOL" --mode parallel --threads 3 --block 4096 <"$in" >"$WORK/out.gz"
    check "$WORK/out.gz" "$in" "$name (4 KiB blocks)"
done
echo "[${SECONDS}s] Go's gzip reader read $n outputs of gzip_tool exactly"

# Go's reader refuses a truncated multi-member output as ours does (no silent short read)
"$GZIP_TOOL" --threads 2 <"$WORK/in-three-blocks-mixed" >"$WORK/out.gz"
head -c $(($(stat -c %s "$WORK/out.gz") - 100)) "$WORK/out.gz" >"$WORK/cut.gz"
! "$GO_GUNZIP" "$WORK/cut.gz" >/dev/null 2>&1 || fail "Go's reader accepted a truncated output"
! "$GZIP_TOOL" -d <"$WORK/cut.gz" >/dev/null 2>&1 || fail "our reader accepted a truncated output"

# a real snapshotter writing with --gzip-mode=parallel: every object is read by Go
start_snapshotter "$WORK/store" "$WORK/snap.log" --compression-policy=gzip --gzip-mode=parallel \
    --gzip-threads=2 --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot .* stored" 60
for i in $(seq 1 20); do ectl put "/delta/$i" "d $i" >/dev/null; done
rev=$(current_revision "$ETCD_EP")
for i in $(seq 1 100); do
    last=$(ls "$WORK/store/v2" | sed -n 's/^Incr-[0-9]*-\([0-9]*\)-.*/\1/p' | sort -n | tail -1)
    [ "$((10#${last:-0}))" -ge "$rev" ] && break
    sleep 0.2
done
stop_snapshotter
[ "$((10#${last:-0}))" -ge "$rev" ] || fail "deltas do not reach revision $rev"
for obj in "$WORK"/store/v2/*.gz; do
    got=$("$GO_GUNZIP" "$obj" 2>&1) || fail "${obj##*/}: Go's gzip reader refused it: $got"
    [ "${got#* }" = "$("$GZIP_TOOL" -d <"$obj" | sha256sum | cut -d' ' -f1)" ] || fail "${obj##*/}: Go and we differ"
done
echo "[${SECONDS}s] Go's gzip reader read the $(ls "$WORK/store/v2" | wc -l) objects of a live snapshotter"

# the checked-in fixture: Go reads each object to the recorded bytes, and it restores
FX=$ETCDBR_SOURCE_DIR/tests/fixtures/etcdbr-gzip-parallel
while read -r name size sha; do
    got=$("$GO_GUNZIP" "$FX/store/v2/$name" 2>&1) || fail "fixture $name: Go's gzip reader refused it: $got"
    [ "$got" = "$size $sha" ] || fail "fixture $name: Go read \"$got\", recorded \"$size $sha\""
done <"$FX/expected/plain-sha256"
[ "$(wc -l <"$FX/expected/plain-sha256")" = "$(ls "$FX/store/v2" | wc -l)" ] || fail "fixture: plain-sha256 does not list every object"
members=$(python3 - "$FX"/store/v2/Full-* <<'PY'
import sys, zlib
b, n = open(sys.argv[1], "rb").read(), 0
while b:
    d = zlib.decompressobj(16 + 15)
    d.decompress(b)
    b, n = d.unused_data, n + 1
print(n)
PY
)
[ "$members" -ge 2 ] || fail "fixture: the full snapshot has $members gzip member(s), want several"
cp -r "$FX/store" "$WORK/fx-store"
restore_store "$WORK/fx-store" "$WORK/fx.etcd" >"$WORK/restore.log" 2>&1 || { tail -20 "$WORK/restore.log"; fail "fixture restore failed"; }
stop_pid "$ETCD_PID"
start_etcd restored "$WORK/fx.etcd"
[ "$(current_revision "$ETCD_EP")" = "$(cat "$FX/expected/revision")" ] || fail "fixture: revision $(current_revision "$ETCD_EP")"
dump_keys "$ETCD_EP" | cmp - "$FX/expected/keys.jsonl" || fail "fixture: keyspace differs from expected/keys.jsonl"
echo "fixture: $members-member full + deltas read by Go, restored at revision $(cat "$FX/expected/revision") with $(wc -l <"$FX/expected/keys.jsonl") keys"
echo PASS
