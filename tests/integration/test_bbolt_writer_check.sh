#!/usr/bin/env bash
# The real bbolt judges the dbs bbolt_writer writes: for each bbolt CLI scripts/build-etcd.sh
# caches (bbolt-v1.3.x as in etcd 3.5, bbolt-v1.4.x as in etcd 3.6+), bbolt_writer_gen writes
# small, big-value, many-key, nested, big-key and seeded random dbs at page sizes 1 KiB to 64 KiB;
# `bbolt check` must print OK, `bbolt compact` must copy each (every key and value read through
# bbolt's own API) into a db that checks OK too, and values the CLI reads equal what was written.
# The random seed is printed; ETCDBR_SEED replays it. No cached bbolt CLI: exit 77 (skip),
# or a failure when ETCDBR_REQUIRE_TOOLS=1.
source "$(dirname "$0")/lib.sh"
cache=${ETCDBR_ETCD_CACHE:-$HOME/.cache/etcdbr/etcd}
gen=${ETCDBR_BUILD_DIR:-$ETCDBR_SOURCE_DIR/build}/bbolt_writer_gen
[ -x "$gen" ] || fail "no $gen (build the tree first)"
bolts=()
for b in "$cache"/bbolt-*/bbolt; do
    if [ -x "$b" ]; then bolts+=("$b"); fi
done
if [ ${#bolts[@]} -eq 0 ]; then
    msg="no bbolt CLI in $cache/bbolt-*/ (scripts/build-etcd.sh bbolt@v1.3.12 bbolt@v1.4.3 builds it)"
    skip_test "$msg"
fi
make_workdir
seed=${ETCDBR_TEST_SEED:-$((RANDOM << 15 | RANDOM))}
echo "seed $seed (replay with ETCDBR_TEST_SEED=$seed)"

DBS=()
# gen_db NAME KIND PAGE_SIZE [generator flags...]
gen_db() {
    local name=$1 kind=$2 ps=$3
    shift 3
    "$gen" --page-size "$ps" "$@" "$kind" "$WORK/$name.db" >"$WORK/$name.gen" ||
        fail "$name: bbolt_writer_gen $kind failed"
    DBS+=("$name")
}
for ps in 1024 4096 65536; do
    gen_db small-$ps small $ps
    gen_db big-$ps big $ps
    gen_db nested-$ps nested $ps
    gen_db keysizes-$ps keysizes $ps
done
gen_db many many 4096 --count 300000
gen_db many-1k many 1024 --count 100000
for i in 0 1 2 3; do
    gen_db random-$i random $((1024 << (i * 2 % 7))) --seed $((seed + i))
done

for b in "${bolts[@]}"; do
    ver=$(basename "$(dirname "$b")")
    for name in "${DBS[@]}"; do
        out=$("$b" check "$WORK/$name.db" 2>&1) || fail "$ver check $name: $out ($(cat "$WORK/$name.gen"))"
        [ "$out" = OK ] || fail "$ver check $name: $out ($(cat "$WORK/$name.gen"))"
        rm -f "$WORK/$name.compact"
        "$b" compact -o "$WORK/$name.compact" "$WORK/$name.db" >"$WORK/$name.compact.log" 2>&1 ||
            fail "$ver compact $name: $(tail -3 "$WORK/$name.compact.log")"
        out=$("$b" check "$WORK/$name.compact" 2>&1) || true
        [ "$out" = OK ] || fail "$ver check of the compacted $name: $out"
    done
    # what bbolt reads is what was written
    [ "$("$b" buckets "$WORK/small-65536.db" | tr '\n' ' ')" = "alpha beta gamma " ] ||
        fail "$ver: buckets of small-65536"
    [ "$("$b" keys "$WORK/small-1024.db" alpha | wc -l)" = 1000 ] || fail "$ver: keys of small-1024"
    [ "$("$b" get "$WORK/small-4096.db" beta key-000500)" = value-1000 ] || fail "$ver: get in small"
    [ "$("$b" get "$WORK/nested-1024.db" top2 b-sub b-subsub deep-00499)" = "deep value" ] ||
        fail "$ver: get three buckets deep"
    [ "$("$b" keys "$WORK/nested-4096.db" top1 b-sub | tr '\n' ' ')" = "a b-subsub c-empty d " ] ||
        fail "$ver: keys of a nested bucket"
    echo "$ver: ${#DBS[@]} dbs check OK, and so do their copies by bbolt compact"
done
