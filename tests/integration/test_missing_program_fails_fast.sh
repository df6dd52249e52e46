#!/usr/bin/env bash
# An external program a command needs is checked before anything else (issue "operators' day
# one", item 5): restore --etcdutl-bin naming a missing file, a file that is not executable or a
# directory exits 2 within a second with a message naming the flag, before the store is read
# (no scratch dir, no <data-dir>.part, no data dir); so do `run` with a missing etcd command
# and verify --restore-test with a missing --restore-test-etcd-bin. A good --etcdutl-bin (the
# check lets it through) restores as before.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd src "$WORK/src.etcd"
ectl put /k v >/dev/null
start_snapshotter "$WORK/store" "$WORK/snap.log"
wait_for_log "$WORK/snap.log" "full snapshot Full-"
stop_snapshotter
stop_pid "$ETCD_PID"

: >"$WORK/not-exec"
chmod 644 "$WORK/not-exec"
mkdir "$WORK/a-dir"
# fails_fast LABEL MESSAGE_RE CMD...: exit 2 in under a second, MESSAGE_RE in the log, nothing
# under $WORK/r (the data dir, its .part, the temp dir) created
fails_fast() {
    local label=$1 re=$2 rc=0 t0 ms
    shift 2
    rm -rf "$WORK/r" && mkdir "$WORK/r"
    t0=$(date +%s%N)
    "$@" >"$WORK/$label.log" 2>&1 || rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$rc" = 2 ] || { cat "$WORK/$label.log"; fail "$label: exit $rc, want 2"; }
    [ "$ms" -lt 1000 ] || fail "$label: took $ms ms, want under a second"
    grep -Eq -e "$re" "$WORK/$label.log" || { cat "$WORK/$label.log"; fail "$label: no message matching: $re"; }
    [ -z "$(ls -A "$WORK/r")" ] || fail "$label: created $(ls -A "$WORK/r")"
    ! grep -q "restoring from\|downloading" "$WORK/$label.log" || fail "$label: the store was read"
    echo "$label: exit 2 in $ms ms: $(grep -m1 'level=error' "$WORK/$label.log" | sed 's/.*msg=//')"
}
restore_to_r() {
    "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$WORK/store" \
        --data-dir="$WORK/r/data" --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$WORK/r/tmp" "$@"
}
fails_fast missing "--etcdutl-bin: $WORK/no/etcdutl: No such file or directory" \
    restore_to_r --etcdutl-bin="$WORK/no/etcdutl"
fails_fast not-exec "--etcdutl-bin: $WORK/not-exec: not executable" \
    restore_to_r --etcdutl-bin="$WORK/not-exec"
fails_fast dir "--etcdutl-bin: $WORK/a-dir: not a regular file" restore_to_r --etcdutl-bin="$WORK/a-dir"
fails_fast not-in-path "--etcdutl-bin: etcdutl-not-installed-here: not found in \\\$PATH" \
    restore_to_r --etcdutl-bin=etcdutl-not-installed-here
fails_fast env "--etcdutl-bin: $WORK/no/etcdutl" env ETCDBR_ETCDUTL_BIN="$WORK/no/etcdutl" \
    "$BASH" -c "$(declare -f restore_to_r); ETCDBR_BIN=$ETCDBR_BIN WORK=$WORK restore_to_r"
fails_fast run "run: the etcd command after --: $WORK/no/etcd: No such file or directory" \
    "$ETCDBR_BIN" run --storage-provider=Local --store-container="$WORK/store" \
    --data-dir="$WORK/r/data" --snapstore-temp-directory="$WORK/r/snaptmp" \
    --restoration-temp-snapshots-dir="$WORK/r/tmp" --server-port="$(free_port)" -- \
    "$WORK/no/etcd" --data-dir="$WORK/r/data"
fails_fast verify "--restore-test-etcd-bin: $WORK/no/etcd: No such file or directory" \
    "$ETCDBR_BIN" verify --storage-provider=Local --store-container="$WORK/store" \
    --snapstore-temp-directory="$WORK/r/tmp" --restore-test --restore-test-etcd-bin="$WORK/no/etcd"

# the check lets a real tool through: a shell script standing in for etcdutl is run (it fails on
# purpose, after the download: exit 1, its own message)
cat >"$WORK/tool.sh" <<'SH'
#!/bin/sh
echo "stand-in etcdutl ran: $*" >&2
exit 7
SH
chmod +x "$WORK/tool.sh"
rm -rf "$WORK/r" && mkdir "$WORK/r"
rc=0
restore_to_r --etcdutl-bin="$WORK/tool.sh" >"$WORK/tool.log" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "stand-in etcdutl ran: snapshot restore" "$WORK/tool.log" ||
    { cat "$WORK/tool.log"; fail "an executable --etcdutl-bin was not run (exit $rc)"; }
echo "an executable --etcdutl-bin is run after the download, as before"
