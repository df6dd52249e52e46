# wid_lib.sh: what the workload identity tests share (test_gcs_workload_identity_fake.sh,
# test_abs_workload_identity_fake.sh): the scripted fake token endpoint
# (tests/servers/wid_token_fake.py), its counters, and a token file rotated under a running
# snapshotter. Sourced after lib.sh and make_workdir.

PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || fail "python3 is needed for the fake token endpoint"
TOKEN=$WORK/token       # the subject token file the driver reads
ACCEPTED=$WORK/accepted # the subject tokens the fake accepts, one a line
printf 'subject-one\n' >"$TOKEN"
printf 'subject-one\n' >"$ACCEPTED"

# start_wid_fake NAME [wid_token_fake.py options]: the fake on a free port; sets FAKE_EP,
# FAKE_STATS.
start_wid_fake() {
    local name=$1 i
    shift
    FAKE_STATS=$WORK/$name.stats.json
    rm -f "$WORK/$name.port"
    "$PY" "$ETCDBR_SOURCE_DIR/tests/servers/wid_token_fake.py" --port-file "$WORK/$name.port" \
        --stats "$FAKE_STATS" --accepted "$ACCEPTED" "$@" >>"$WORK/fake-$name.log" 2>&1 &
    PIDS+=($!)
    for i in $(seq 1 200); do
        [ -s "$WORK/$name.port" ] && break
        sleep 0.05
    done
    [ -s "$WORK/$name.port" ] || fail "the fake token endpoint did not start: $(cat "$WORK/fake-$name.log")"
    FAKE_EP=http://127.0.0.1:$(cat "$WORK/$name.port")
}

# st EXPR: a Python expression over the fake's counters `s` (its JSON stats), printed.
st() {
    "$PY" -c 'import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$FAKE_STATS" "$1"
}

# delta_round LOG: one key more in etcd, then waits (30 s at most) until the snapshotter logging
# to LOG stored a delta up to that revision.
delta_round() {
    local log=$1 want i
    ectl put "/round/$RANDOM" "v" >/dev/null
    want=$(current_revision "$ETCD_EP")
    for i in $(seq 1 300); do
        grep -q "delta snapshot Incr-[0-9]*-0*$want-.* stored" "$log" && return 0
        sleep 0.1
    done
    fail "no delta up to revision $want: $(tail -3 "$log")"
}

# wid_rotation LABEL KIND STORE_FLAG...: a snapshotter (deltas every second) on a fake that hands
# out tokens of a few seconds; the subject token file is rotated under it. Checks that tokens of
# KIND are fetched again after they expire, that the exchange after the rotation sends the new
# file content (and the old one is then refused without harm), and that no exchange was refused.
wid_rotation() {
    local label=$1 kind=$2 i n0 g0
    shift 2
    start_etcd "$label" "$WORK/$label.etcd"
    for i in $(seq 1 10); do ectl put "/a/$i" "v$i" >/dev/null; done
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" "$@" --store-prefix="$label" \
        --snapstore-temp-directory="$WORK/$label.tmp" --schedule='0 0 1 1 *' \
        --garbage-collection-period=0s --delta-snapshot-period=1s >"$WORK/$label.log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
    wait_for_log "$WORK/$label.log" "full snapshot Full-" 60
    g0=$(st "s['grants']['$kind']")
    # rotation: both accepted while an exchange that read the old file may be in flight
    printf 'subject-one\nsubject-two\n' >"$ACCEPTED.new"
    mv "$ACCEPTED.new" "$ACCEPTED"
    printf 'subject-two\n' >"$TOKEN.new"
    mv "$TOKEN.new" "$TOKEN"
    for i in $(seq 1 30); do
        [ "$(st "2 in s['subjects']")" = True ] && break
        delta_round "$WORK/$label.log"
    done
    [ "$(st "2 in s['subjects']")" = True ] || fail "no exchange with the rotated token file: $(cat "$FAKE_STATS")"
    # the old subject token is refused from now on: the snapshotter must not need it
    printf 'revoked\nsubject-two\n' >"$ACCEPTED.new"
    mv "$ACCEPTED.new" "$ACCEPTED"
    n0=$(st "len(s['subjects'])")
    for i in $(seq 1 30); do
        [ "$(st "len(s['subjects']) > $n0")" = True ] && break
        delta_round "$WORK/$label.log"
    done
    delta_round "$WORK/$label.log"
    stop_snapshotter
    [ "$(st "len(s['subjects']) > $n0 and s['subjects'][-1] == 2")" = True ] ||
        fail "no exchange after the old token was revoked: $(cat "$FAKE_STATS")"
    [ "$(st "s['refused']")" = 0 ] || fail "the fake refused an exchange: $(st "s['refusals']")"
    [ "$(st "s['grants']['$kind']")" -ge $((g0 + 2)) ] || fail "tokens not fetched again after they expired: $(cat "$FAKE_STATS")"
    echo "ok rotation: $(st "s['grants']['$kind']") $kind tokens, subjects used in order $(st "s['subjects']")"
}
