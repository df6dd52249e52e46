#!/usr/bin/env bash
# Bad input never gives a wrong restore: a truncated full snapshot, a flipped byte in a delta, a
# 0-byte object with a valid name, a gap between deltas each fail with a clear error and leave no
# data dir; foreign files in the store are skipped; wrong flags, a non-empty data dir, an empty
# store and a dead endpoint get distinct exit codes.
source "$(dirname "$0")/lib.sh"
make_workdir
FX=$ETCDBR_SOURCE_DIR/tests/fixtures

# expect_fail NAME STORE EXIT PATTERN: restore must exit EXIT, print PATTERN, leave no data dir.
expect_fail() {
    local name=$1 store=$2 want=$3 pat=$4 rc=0
    restore_store "$store" "$WORK/$name.etcd" >"$WORK/$name.log" 2>&1 || rc=$?
    [ "$rc" = "$want" ] || { cat "$WORK/$name.log"; fail "$name: exit $rc, expected $want"; }
    grep -q -- "$pat" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: no '$pat' in the error"; }
    [ ! -e "$WORK/$name.etcd" ] || fail "$name: a data dir was left behind"
    [ ! -e "$WORK/$name.etcd.part" ] || fail "$name: a .part dir was left behind"
    echo "$name: exit $rc: $(grep -m1 'level=error' "$WORK/$name.log" | sed 's/.*msg=//')"
}

# truncated full snapshot, uncompressed and gzip
truncated_full trunc-plain seed-plain
expect_fail trunc-plain "$WORK/trunc-plain" 1 "Full-00000000-00000190"
truncated_full trunc-gzip seed-gzip
expect_fail trunc-gzip "$WORK/trunc-gzip" 1 "Full-00000000-00000190"

# one flipped byte in a delta (inside the JSON, before the trailer)
fixture_store flip seed-plain
f=$(ls "$WORK"/flip/v2/Incr-00000203-*)
printf '\x58' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
expect_fail flip "$WORK/flip" 1 "Incr-00000203-00000207"

# a 0-byte object with a valid name: as the newest delta, and as the newest full
fixture_store empty-delta seed-plain
: >"$WORK/empty-delta/v2/Incr-00000217-00000220-1795975100"
expect_fail empty-delta "$WORK/empty-delta" 1 "Incr-00000217-00000220"
fixture_store empty-full seed-plain
: >"$WORK/empty-full/v2/Full-00000000-00000300-1795975100"
expect_fail empty-full "$WORK/empty-full" 1 "Full-00000000-00000300"

# a gap between deltas: the error names the objects on both sides
fixture_store gap seed-plain
rm "$WORK"/gap/v2/Incr-00000203-*
expect_fail gap "$WORK/gap" 1 "Incr-00000191-00000202.*Incr-00000208-00000210"

# a delta holding an event outside the revisions its name gives (well-formed, hash correct)
fixture_store outside seed-plain
python3 - "$WORK/outside/v2/Incr-00000217-00000217-1795975100" <<'PY'
import base64, hashlib, sys
ev = '[{"etcdEvent":{"kv":{"key":"%s","create_revision":100,"mod_revision":100,"version":1,"value":"%s"}},"time":"2026-11-29T17:55:24Z"}]' % (
    base64.b64encode(b"/registry/old").decode(), base64.b64encode(b"x").decode())
js = ev.encode()
open(sys.argv[1], "wb").write(js + hashlib.sha256(js).digest())
PY
expect_fail outside "$WORK/outside" 1 "outside its name's revisions"

# a store container that is a regular file
: >"$WORK/afile"
expect_fail notadir "$WORK/afile" 1 "is not a directory"

# deltas but no full snapshot: an error, not success
fixture_store nofull seed-plain
rm "$WORK"/nofull/v2/Full-*
expect_fail nofull "$WORK/nofull" 4 "no full snapshot"

# foreign files are skipped (and left alone); the restore is still exact
fixture_store foreign seed-gzip
echo hello >"$WORK/foreign/v2/README.txt"
echo junk >"$WORK/foreign/v2/Full-abc-def"
echo junk >"$WORK/foreign/v2/Incr-00000300-00000200-1795975100"
mkdir -p "$WORK/foreign/v2/somedir"
restore_store "$WORK/foreign" "$WORK/foreign.etcd" >"$WORK/foreign.log" 2>&1 || { cat "$WORK/foreign.log"; fail "foreign: restore failed"; }
# counted and named once per listing, not a line each (docs/stores.md)
skipped=$(grep -c "objects under .* are not snapshots and are skipped, e.g. " "$WORK/foreign.log" || true)
[ "$skipped" = 1 ] || fail "foreign: skipped objects logged $skipped times, want once: $(grep -i skip "$WORK/foreign.log")"
grep -Eq "level=warn.* ([3-9]) objects under .* are not snapshots and are skipped, e.g. .*(README.txt|Full-abc-def|Incr-00000300-00000200-1795975100)" "$WORK/foreign.log" ||
    fail "foreign: the skipped objects are not counted and named: $(grep -i skip "$WORK/foreign.log")"
[ -f "$WORK/foreign/v2/README.txt" ] && [ -f "$WORK/foreign/v2/Full-abc-def" ] || fail "foreign files touched"
start_etcd restored "$WORK/foreign.etcd"
dump_keys "$ETCD_EP" | cmp - "$FX/seed-gzip/expected/keys.jsonl" || fail "foreign: keyspace differs"
stop_pid "$ETCD_PID"
echo "foreign: skipped and logged, restore exact"

# a non-empty data dir is refused and left as it was
mkdir -p "$WORK/busy.etcd/member"
echo keep >"$WORK/busy.etcd/member/file"
rc=0
restore_store "$FX/seed-plain/store" "$WORK/busy.etcd" >"$WORK/busy.log" 2>&1 || rc=$?
[ "$rc" = 3 ] || fail "non-empty data dir: exit $rc"
[ "$(cat "$WORK/busy.etcd/member/file")" = keep ] || fail "non-empty data dir was touched"

# wrong flag, bad duration: usage errors
rc=0; "$ETCDBR_BIN" restore --no-such-flag >"$WORK/flag.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "unknown flag: --no-such-flag" "$WORK/flag.log" || fail "unknown flag: exit $rc"
rc=0; "$ETCDBR_BIN" snapshot --delta-snapshot-period=soon >"$WORK/flag2.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "delta-snapshot-period" "$WORK/flag2.log" || fail "bad duration: exit $rc"

# a dead endpoint: the snapshot command fails at once, naming the endpoint
port=$(free_port)
rc=0
timeout 60 "$ETCDBR_BIN" snapshot --endpoints="http://127.0.0.1:$port" --storage-provider=Local \
    --store-container="$WORK/dead-store" --snapstore-temp-directory="$WORK/snaptmp" \
    --etcd-connection-timeout=2s >"$WORK/dead.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/dead.log"; fail "dead endpoint: exit $rc"; }
grep -q "127.0.0.1:$port" "$WORK/dead.log" || { cat "$WORK/dead.log"; fail "dead endpoint not named"; }
[ -z "$(ls -A "$WORK/dead-store/v2" 2>/dev/null)" ] || fail "dead endpoint: something was stored"
echo "flags, busy data dir, dead endpoint: ok"
