#!/usr/bin/env bash
# Bad input gets from `get`, `diff` and `history` what it gets from `restore` (docs/inspect.md,
# docs/exit-codes.md): a clear error naming the object, a non-zero exit code, and nothing written
# (no answer on stdout, no scratch left, the store unchanged):
#  - a truncated full snapshot (plain and gzip), a full snapshot with a flipped byte, a delta with
#    a flipped byte, a delta missing in the middle (a gap): exit 1 naming the objects, as restore;
#    a point before the damage or the gap answers, as a restore to it does;
#  - an encrypted store read without keys, with a key of another id, with the right id and another
#    key: exit 1 naming the object and the key id, as restore;
#  - a revision beyond the store's last: exit 2; --revision with --time (get, history; diff's
#    --from-/--to- pairs): exit 2;
#  - an empty store, a store with deltas but no full snapshot, a --time at or before the Unix
#    epoch (or in its first second): exit 4, as restore;
#  - --cache-dir on the encrypted store: nothing is cached, so a second run without the key or
#    with a wrong one fails as the first would.
# Stores: the Go tool's fixture seed-plain / seed-gzip (full 190, deltas 191-202, 203-207,
# 208-210, 211-216) and an encrypted one written here by `snapshot` from etcd 3.4.
source "$(dirname "$0")/lib.sh"
make_workdir
FAILS=()
problem() {
    FAILS+=("$1")
    echo "PROBLEM: $1" >&2
}

store_sum() { (cd "$1" && find . -type f -exec sha256sum {} + | sort); }

# inspect_cmd CMD STORE [args...]: etcdbrctl CMD with the store flags and a fixture_store scratch dir;
# OUT, ERR, RC.
inspect_cmd() {
    local cmd=$1 store=$2
    shift 2
    rm -rf "$WORK/tmp" && mkdir -p "$WORK/tmp"
    OUT=$WORK/out.$cmd
    ERR=$WORK/err.$cmd
    RC=0
    "$ETCDBR_BIN" "$cmd" "$@" --storage-provider=Local --store-container="$store" \
        --snapstore-temp-directory="$WORK/tmp" --min-free-disk-bytes=0 --min-free-disk-percent=0 \
        >"$OUT" 2>"$ERR" || RC=$?
}

# restore_rc STORE [restore flags]: RESTORE_RC, RESTORE_ERR (the first error line).
restore_rc() {
    local store=$1
    shift
    rm -rf "$WORK/r.etcd" "$WORK/r.etcd.tmp"
    RESTORE_RC=0
    restore_store "$store" "$WORK/r.etcd" "$@" >"$WORK/restore.log" 2>&1 || RESTORE_RC=$?
    RESTORE_ERR=$(grep -m1 'level=error' "$WORK/restore.log" | sed 's/.*msg=//' || true)
}

# expect_all NAME STORE WANT_RC PATTERN [selector args...]: get, diff and history (at the selector,
# the latest by default) exit WANT_RC with PATTERN in their error, print nothing, leave no scratch
# and the store unchanged; restore at the same point exits WANT_RC too (when WANT_RC is not 2:
# restore's own usage codes are not inspect's).
expect_all() {
    local name=$1 store=$2 want=$3 pat=$4 cmd before sel=() diffsel=()
    shift 4
    sel=("$@")
    # diff: from the full snapshot to the point
    diffsel=(--from-revision 190)
    if [ ${#sel[@]} != 0 ]; then
        local tosel=("${sel[@]/#--revision/--to-revision}")
        diffsel+=("${tosel[@]/#--time/--to-time}")
    fi
    before=$(store_sum "$store")
    for cmd in get diff history; do
        case $cmd in
        get) inspect_cmd get "$store" "" --prefix -o json "${sel[@]}" ;;
        diff) inspect_cmd diff "$store" -o json "${diffsel[@]}" ;;
        history) inspect_cmd history "$store" /registry/ -o json "${sel[@]}" ;;
        esac
        local what="$name: $cmd ${sel[*]}"
        [ "$RC" = "$want" ] || problem "$what: exit $RC, want $want: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
        grep -q -- "$pat" "$ERR" || problem "$what: no '$pat' in the error: $(grep 'level=error' "$ERR" | sed 's/.*msg=//' | head -3)"
        [ ! -s "$OUT" ] || problem "$what: printed an answer ($(head -c 200 "$OUT"))"
        [ -z "$(ls -A "$WORK/tmp")" ] || problem "$what: scratch left: $(ls -A "$WORK/tmp")"
        echo "$what: exit $RC: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
    done
    [ "$before" = "$(store_sum "$store")" ] || problem "$name: the store changed"
    if [ "$want" != 2 ]; then
        restore_rc "$store" "${sel[@]}"
        [ "$RESTORE_RC" = "$want" ] || problem "$name: restore ${sel[*]} exits $RESTORE_RC ($RESTORE_ERR), inspect $want"
        echo "$name: restore ${sel[*]}: exit $RESTORE_RC: $RESTORE_ERR"
    fi
}

# expect_answer NAME STORE [selector args...]: get, diff and history answer (exit 0), as restore.
expect_answer() {
    local name=$1 store=$2 cmd
    shift 2
    for cmd in get history; do
        case $cmd in
        get) inspect_cmd get "$store" "" --prefix -o json "$@" ;;
        history) inspect_cmd history "$store" /registry/ -o json "$@" ;;
        esac
        [ "$RC" = 0 ] || problem "$name: $cmd $*: exit $RC: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
    done
    inspect_cmd diff "$store" -o json --from-revision 190 "${@/--revision/--to-revision}"
    [ "$RC" = 0 ] || problem "$name: diff --from-revision 190 ${*/--revision/--to-revision}: exit $RC: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
    restore_rc "$store" "$@"
    [ "$RESTORE_RC" = 0 ] || problem "$name: restore $* exits $RESTORE_RC ($RESTORE_ERR), inspect answers"
    echo "$name: get, diff, history $*: answered (restore: exit $RESTORE_RC)"
}

# the fixture itself answers (else every case below tests nothing)
fixture_store good seed-plain
expect_answer good "$WORK/good"
inspect_cmd get "$WORK/good" "" --prefix -o json
[ "$(jq .count "$OUT")" = 202 ] || problem "good: get counts $(jq .count "$OUT") keys, the fixture has 202"

# a truncated full snapshot: plain, gzip
truncated_full trunc-plain seed-plain
expect_all trunc-plain "$WORK/trunc-plain" 1 "Full-00000000-00000190"
truncated_full trunc-gzip seed-gzip
expect_all trunc-gzip "$WORK/trunc-gzip" 1 "Full-00000000-00000190"

# a flipped byte in the full snapshot's db (its SHA-256 trailer no longer matches)
fixture_store flip-full seed-plain
f=$(ls "$WORK"/flip-full/v2/Full-*)
b=$(od -An -tu1 -j 20000 -N1 "$f" | tr -d ' ')
printf "\\x$(printf %02x $(((b + 1) % 256)))" | dd of="$f" bs=1 seek=20000 conv=notrunc status=none
expect_all flip-full "$WORK/flip-full" 1 "Full-00000000-00000190"

# a flipped byte in a delta (inside the JSON, before the trailer): the latest fails naming it; a
# point before it answers, as a restore to that point does
fixture_store flip-delta seed-plain
f=$(ls "$WORK"/flip-delta/v2/Incr-00000203-*)
printf '\x58' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
expect_all flip-delta "$WORK/flip-delta" 1 "Incr-00000203-00000207"
expect_all flip-delta-at-205 "$WORK/flip-delta" 1 "Incr-00000203-00000207" --revision 205
expect_answer flip-delta-at-200 "$WORK/flip-delta" --revision 200

# a delta missing in the middle: the error names the objects on both sides of the gap
fixture_store gap seed-plain
rm "$WORK"/gap/v2/Incr-00000203-*
expect_all gap "$WORK/gap" 1 "Incr-00000191-00000202.*Incr-00000208-00000210"
expect_all gap-at-209 "$WORK/gap" 1 "Incr-00000191-00000202.*Incr-00000208-00000210" --revision 209
expect_answer gap-at-202 "$WORK/gap" --revision 202

# beyond the store's last revision: usage (2), naming the last revision
fixture_store beyond seed-plain
expect_all beyond "$WORK/beyond" 2 "216" --revision 217
restore_rc "$WORK/beyond" --revision 217
echo "beyond: restore --revision 217: exit $RESTORE_RC: $RESTORE_ERR"
[ "$RESTORE_RC" != 0 ] || problem "beyond: restore --revision 217 succeeded"

# --revision with --time: refused before reading anything (2)
for args in "get /registry/ --prefix --revision 200 --time 2030-01-01T00:00:00Z" \
    "history /registry/a --revision 200 --time 2030-01-01T00:00:00Z" \
    "diff --from-revision 191 --from-time 2030-01-01T00:00:00Z" \
    "diff --from-revision 191 --to-revision 200 --to-time 2030-01-01T00:00:00Z"; do
    read -r -a a <<<"$args"
    inspect_cmd "${a[0]}" "$WORK/good" "${a[@]:1}"
    [ "$RC" = 2 ] || problem "$args: exit $RC, want 2 (usage): $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
    [ ! -s "$OUT" ] || problem "$args: printed an answer ($(head -c 200 "$OUT"))"
    echo "$args: exit $RC: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
done
restore_rc "$WORK/good" --revision 200 --time 2030-01-01T00:00:00Z
echo "restore --revision 200 --time ...: exit $RESTORE_RC: $RESTORE_ERR"

# a time at or before the Unix epoch, or in its first second: before every backup (4), as restore
# (a time of 0 inside is no target: it must not read as the latest)
for t in 1970-01-01T00:00:00Z 1970-01-01T00:00:01.5Z 1969-12-31T23:59:59Z 0001-01-01T00:00:00Z; do
    expect_all "epoch-$t" "$WORK/good" 4 "target time" --time "$t"
done

# an empty store, and one with deltas but no full snapshot: 4, as restore
mkdir -p "$WORK/empty"
expect_all empty "$WORK/empty" 4 "full snapshot"
fixture_store nofull seed-plain
rm "$WORK"/nofull/v2/Full-*
expect_all nofull "$WORK/nofull" 4 "full snapshot"

# encryption: a store written here under key id k-right
use_etcd 3.4
start_etcd src "$WORK/src.etcd" --unsafe-no-fsync
for i in $(seq 1 20); do ectl put "/registry/a/$i" "v$i" >/dev/null; done
printf 'k-right %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/right.keys"
printf 'k-other %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/other.keys"
printf 'k-right %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/same-id.keys"
chmod 600 "$WORK"/*.keys
start_snapshotter "$WORK/enc" "$WORK/snap.log" --delta-snapshot-period=1s --encryption-key-file="$WORK/right.keys"
wait_for_log "$WORK/snap.log" "full snapshot Full-"
for i in $(seq 1 10); do ectl put "/registry/b/$i" "v$i" >/dev/null; done
wait_stored "$WORK/snap.log" "$(current_revision "$ETCD_EP")"
stop_snapshotter
stop_pid "$ETCD_PID"
ls "$WORK/enc/v2" | grep -q '^Incr-.*\.enc' || fail "the encrypted store has no encrypted delta: $(ls "$WORK/enc/v2")"
full=$(ls "$WORK/enc/v2" | grep '^Full-' | sed 's/-[0-9]*\..*//')
before=$(store_sum "$WORK/enc")
for keys in none other same-id right; do
    kf=()
    [ "$keys" = none ] || kf=(--encryption-key-file="$WORK/$keys.keys")
    case $keys in
    none) want=1 pat="$full.*is encrypted and no encryption keys were given" ;;
    other) want=1 pat="$full.*k-right.*not among the keys given (k-other)" ;;
    same-id) want=1 pat="$full" ;;
    right) want=0 pat="" ;;
    esac
    for cmd in get diff history; do
        case $cmd in
        get) inspect_cmd get "$WORK/enc" "" --prefix -o json "${kf[@]}" ;;
        diff) inspect_cmd diff "$WORK/enc" --from-revision 2 -o json "${kf[@]}" ;;
        history) inspect_cmd history "$WORK/enc" /registry/a/1 -o json "${kf[@]}" ;;
        esac
        [ "$RC" = "$want" ] || problem "encrypted, keys $keys: $cmd exit $RC, want $want: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
        if [ "$want" != 0 ]; then
            grep -q -- "$pat" "$ERR" || problem "encrypted, keys $keys: $cmd: no '$pat' in the error: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
            [ ! -s "$OUT" ] || problem "encrypted, keys $keys: $cmd printed an answer"
            [ -z "$(ls -A "$WORK/tmp")" ] || problem "encrypted, keys $keys: $cmd left scratch: $(ls -A "$WORK/tmp")"
        fi
        echo "encrypted, keys $keys: $cmd: exit $RC $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
    done
    [ "$keys" != right ] || [ "$(jq .count "$WORK/out.get")" = 30 ] || problem "encrypted, right key: get counts $(jq .count "$WORK/out.get"), want 30"
    restore_rc "$WORK/enc" "${kf[@]}"
    [ "$RESTORE_RC" = "$want" ] || problem "encrypted, keys $keys: restore exits $RESTORE_RC ($RESTORE_ERR), inspect $want"
done
[ "$before" = "$(store_sum "$WORK/enc")" ] || problem "encrypted: the store changed"

# --cache-dir: an encrypted object is never kept (an entry would hold its plaintext), so a run
# without the key, or with a wrong one, after a run with the right one fails as it would alone
mkdir -p "$WORK/cache"
for keys in right none other; do
    kf=()
    [ "$keys" = none ] || kf=(--encryption-key-file="$WORK/$keys.keys")
    inspect_cmd get "$WORK/enc" "" --prefix -o json --cache-dir="$WORK/cache" "${kf[@]}"
    want=1
    [ "$keys" != right ] || want=0
    [ "$RC" = "$want" ] || problem "cache, keys $keys: get exit $RC, want $want: $(grep -m1 'level=error' "$ERR" | sed 's/.*msg=//')"
    [ "$want" = 0 ] || [ ! -s "$OUT" ] || problem "cache, keys $keys: get answered from the cache"
    echo "encrypted with --cache-dir, keys $keys: get exit $RC"
done
if ls "$WORK/cache" | grep -q '\.ok$'; then problem "cache: encrypted objects were kept: $(ls "$WORK/cache")"; fi

if [ ${#FAILS[@]} -gt 0 ]; then
    printf '  %s\n' "${FAILS[@]}"
    fail "${#FAILS[@]} bad-input cases not handled as a restore handles them"
fi
echo "bad input: every case refused as restore refuses it, nothing written"
