#!/usr/bin/env bash
# scripts/try-store.sh (docs/stores.md, "Try it locally"): for S3, ABS, GCS, Swift and OSS (the
# last a scripted fake), whichever emulator is installed here (a missing one skips that provider,
# or fails under ETCDBR_REQUIRE_TOOLS=1), the script is started with a DIR and a real etcd's
# endpoint; its output is read as a user would copy it: the `export` lines are evaluated and the
# printed `snapshot` command runs against the etcd (a full snapshot, then writes stored by the
# last delta at SIGTERM), the printed `list` shows that full snapshot and a delta, the printed
# `restore` rebuilds a data dir whose keys and revision equal the source's. SIGTERM to the script
# must stop every emulator process it named, and exit 0. Then: without DIR its temporary
# directory is removed at the end, and a missing emulator is an exit 1 that names the command
# that installs it.
source "$(dirname "$0")/lib.sh"
make_workdir
TRY=$ETCDBR_SOURCE_DIR/scripts/try-store.sh
start_etcd try "$WORK/src.etcd"
SRC_EP=$ETCD_EP
SRC_PID=$ETCD_PID

# start_try OUT ARGS...: scripts/try-store.sh ARGS in the background (stdout OUT, stderr OUT.err)
# until it has printed its restore line (TRY_PID; returns 1 when it exits first, rc in TRY_RC).
start_try() {
    local out=$1 i
    shift
    ETCDBR_BIN=$ETCDBR_BIN "$TRY" "$@" >"$out" 2>"$out.err" &
    TRY_PID=$!
    PIDS+=("$TRY_PID")
    for i in $(seq 1 1200); do
        grep -q "^[^#].* restore " "$out" 2>/dev/null && return 0
        if ! kill -0 "$TRY_PID" 2>/dev/null; then
            TRY_RC=0
            wait "$TRY_PID" || TRY_RC=$?
            return 1
        fi
        sleep 0.1
    done
    fail "try-store.sh $* printed no restore command in 120 s: $(cat "$out" "$out.err")"
}

# stop_try OUT: SIGTERM to the script; it must exit 0, and every emulator PID it printed be gone.
stop_try() {
    local out=$1 pids pid rc=0
    pids=$(sed -n 's/^# emulator PIDs: //p' "$out")
    [ -n "$pids" ] || fail "no emulator PIDs in $out"
    for pid in $pids; do kill -0 "$pid" 2>/dev/null || fail "emulator PID $pid is not running before the stop"; done
    kill -TERM "$TRY_PID"
    wait "$TRY_PID" || rc=$?
    [ "$rc" = 0 ] || fail "try-store.sh exited $rc on SIGTERM: $(cat "$out.err")"
    for pid in $pids; do
        if kill -0 "$pid" 2>/dev/null; then fail "emulator PID $pid still runs after try-store.sh stopped"; fi
    done
}

# line OUT WORD: the one printed command line whose subcommand is WORD
line() {
    local l
    l=$(grep -E "^[^#].* $2 " "$1") || fail "no '$2' command in $1"
    [ "$(wc -l <<<"$l")" = 1 ] || fail "more than one '$2' command in $1"
    printf '%s' "$l"
}

# try_provider P: the round trip above through provider P (run in a subshell: its exports stay
# there). Exits 77 when P's emulator is not installed.
try_provider() {
    local p=$1 dir=$WORK/$1 out=$WORK/$1.out snap list restore i rc=0 rev src_rev
    if ! start_try "$out" --endpoints="$SRC_EP" "$p" "$dir"; then
        if [ "$TRY_RC" = 1 ] && grep -Eq "not (installed|built|found)" "$out.err"; then
            skip_test "$p: $(cat "$out.err")"
        fi
        fail "try-store.sh $p exited $TRY_RC: $(cat "$out.err")"
    fi
    head -1 "$out"
    grep -q "^# listening on http://127.0.0.1:" "$out" || fail "$p: not on 127.0.0.1: $(head -3 "$out")"
    # the whole output is a shell script: comments, exports and commands
    bash -n "$out" || fail "$p: the output is not a shell script"
    eval "$(grep '^export ' "$out")"
    snap=$(line "$out" snapshot)
    list=$(line "$out" list)
    restore=$(line "$out" restore)
    case "$snap" in "$(printf '%q' "$ETCDBR_BIN") snapshot "*"--storage-provider=$p "*) ;;
    *) fail "$p: the snapshot command is not ETCDBR_BIN with --storage-provider=$p: $snap" ;; esac
    [ "$p" = GCS ] || grep -q '^export [A-Z_]*_JSON=' "$out" || fail "$p: no credentials file exported"

    for i in $(seq 1 20); do ectl put "/try/$p/before/$i" "v$i" >/dev/null; done
    for i in 1 2; do head -c 700000 /dev/urandom | base64 -w0 | ectl put "/try/$p/big/$i" >/dev/null; done
    (eval "exec $snap") >"$dir.snap.log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
    wait_for_log "$dir.snap.log" "full snapshot Full-" 120
    for i in $(seq 1 20); do ectl put "/try/$p/after/$i" "w$i" >/dev/null; done
    src_rev=$(current_revision "$SRC_EP")
    stop_snapshotter
    grep -q "last delta before stop: stored up to revision $src_rev " "$dir.snap.log" ||
        fail "$p: the last delta did not store revision $src_rev: $(tail -5 "$dir.snap.log")"
    dump_keys "$SRC_EP" >"$dir.src.jsonl"

    (eval "exec $list -o json") >"$dir.list.json" 2>"$dir.list.log" || fail "$p: list failed: $(cat "$dir.list.log")"
    jq -e '.sets | length == 1' "$dir.list.json" >/dev/null || fail "$p: list: not one set: $(cat "$dir.list.json")"
    jq -e '.sets[0].full.name | test("^Full-")' "$dir.list.json" >/dev/null || fail "$p: list shows no full snapshot"
    jq -e '.sets[0].deltas | length >= 1' "$dir.list.json" >/dev/null || fail "$p: list shows no delta"

    (eval "exec $restore") >"$dir.restore.log" 2>&1 || fail "$p: restore failed: $(tail -5 "$dir.restore.log")"
    start_etcd default "$dir/restored.etcd"
    dump_keys "$ETCD_EP" >"$dir.restored.jsonl"
    rev=$(current_revision "$ETCD_EP")
    stop_pid "$ETCD_PID"
    [ "$rev" = "$src_rev" ] || fail "$p: revision $rev after the restore, source $src_rev"
    cmp -s "$dir.src.jsonl" "$dir.restored.jsonl" || fail "$p: the restored keys differ from the source's"
    grep -q "$(b64 "/try/$p/after/20")" "$dir.restored.jsonl" || fail "$p: the last write is not restored"
    stop_try "$out"
    echo "$p: snapshot, list and restore as printed: revision $rev, $(wc -l <"$dir.src.jsonl") keys equal; emulator stopped"
}

ran=()
skipped=()
for p in S3 ABS GCS Swift OSS; do
    # each provider in a subshell with errexit on (not in an `||` list, which would turn it off),
    # stopping what it started (and not the source etcd) when it ends
    set +e
    (
        set -e
        PIDS=()
        trap stop_all EXIT
        try_provider "$p"
    )
    rc=$?
    set -e
    case "$rc" in
    0) ran+=("$p") ;;
    77) skipped+=("$p") ;;
    *) fail "$p failed (exit $rc)" ;;
    esac
done
[ ${#ran[@]} -gt 0 ] || skip_test "no store emulator installed (scripts/test-servers.sh, scripts/build-fake-gcs.sh, scripts/install-deps.sh)"

# without DIR: a temporary directory, removed when the script stops
start_try "$WORK/tmpdir.out" --endpoints="$SRC_EP" "${ran[0]}" || fail "try-store.sh ${ran[0]} exited $TRY_RC: $(cat "$WORK/tmpdir.out.err")"
tmp=$(sed -n 's/^# data, logs and credentials in \(.*\) (removed at the end.*/\1/p' "$WORK/tmpdir.out")
[ -n "$tmp" ] && [ -d "$tmp" ] || fail "no temporary directory named in: $(head -4 "$WORK/tmpdir.out")"
stop_try "$WORK/tmpdir.out"
[ ! -e "$tmp" ] || fail "the temporary directory $tmp is left after the stop"

# a missing emulator: exit 1, the install command named, nothing started
for m in "S3 ETCDBR_NPM_CACHE scripts/test-servers.sh" "GCS ETCDBR_FAKE_GCS scripts/build-fake-gcs.sh"; do
    read -r p var cmd <<<"$m"
    rc=0
    env "$var=$WORK/nothing-here" "$TRY" "$p" "$WORK/missing-$p" >"$WORK/missing-$p.out" 2>&1 || rc=$?
    [ "$rc" = 1 ] || fail "try-store.sh $p without its emulator exited $rc: $(cat "$WORK/missing-$p.out")"
    grep -q "$cmd" "$WORK/missing-$p.out" || fail "try-store.sh $p without its emulator does not name $cmd: $(cat "$WORK/missing-$p.out")"
done
stop_pid "$SRC_PID"
echo "try-store.sh: ${ran[*]} passed${skipped[*]:+; not installed here: ${skipped[*]}}"
