#!/usr/bin/env bash
# Nothing of the operator's is deleted (issue 17, section 2), against a real etcd and a Local store
# the snapshotter filled:
# (a) invalid data dirs moved aside by `initialize` are all kept ("<data-dir>.invalid.<UTC
#     time>"): a second one never replaces the first; with --max-invalid-copies=2 a third removes
#     the oldest copy with a log line naming it, and never a look-alike without etcdbr's marker
#     nor an "<data-dir>.invalid" of an older etcdbr.
# (b) an operator's "<data-dir>.part" (restore) or "<data-dir>.restore" (initialize) holding a
#     file is never removed: the command refuses with an error naming it, the file survives, no
#     data dir is written.
# (c) etcdbr's own leftovers (a restore / an initialization killed with -9 while etcd's restore
#     tool had written its output) are removed by the next run, which then restores exactly.
source "$(dirname "$0")/lib.sh"
make_workdir
unset POD_NAMESPACE
t0=$(date +%s)
STORE=$WORK/store

start_etcd src "$WORK/src.etcd"
for i in $(seq 1 10); do ectl put "/k/$i" "v$i" >/dev/null; done
start_snapshotter "$STORE" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-"
for i in $(seq 11 20); do ectl put "/k/$i" "v$i" >/dev/null; done
SRC_REV=$(current_revision "$ETCD_EP")
for i in $(seq 1 150); do
    ls "$STORE/v2" | awk -F- -v r="$SRC_REV" '$3 + 0 >= r { f = 1 } END { exit !f }' && break
    sleep 0.1
done
ls "$STORE/v2" | awk -F- -v r="$SRC_REV" '$3 + 0 >= r { f = 1 } END { exit !f }' ||
    fail "the store does not reach revision $SRC_REV: $(ls "$STORE/v2")"
stop_snapshotter
dump_keys "$ETCD_EP" >"$WORK/src.keys"
stop_pid "$ETCD_PID"

# initialize DATA_DIR LOG [flags]: exit status in RC
initialize() {
    local dd=$1 log=$2
    shift 2
    RC=0
    "$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$STORE" \
        --snapstore-temp-directory="$WORK/tmp" --data-dir="$dd" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$dd.tmp" "$@" >"$log" 2>&1 || RC=$?
}
# restore DATA_DIR LOG [flags]: exit status in RC
restore() {
    local dd=$1 log=$2
    shift 2
    RC=0
    restore_store "$STORE" "$dd" "$@" >"$log" 2>&1 || RC=$?
}
# expect_exact LABEL DATA_DIR: etcd on it is at the source's revision with its keys
expect_exact() {
    start_etcd restored "$2"
    [ "$(current_revision "$ETCD_EP")" = "$SRC_REV" ] || fail "$1: not at revision $SRC_REV"
    dump_keys "$ETCD_EP" | cmp -s - "$WORK/src.keys" || fail "$1: keys differ from the source"
    stop_pid "$ETCD_PID"
}
# corrupt DATA_DIR N: damages both bbolt meta pages and leaves a note "N" in the data dir
corrupt() {
    local off
    for off in 16 4112; do
        printf '\xde\xad\xbe\xef' | dd of="$1/member/snap/db" bs=1 seek="$off" conv=notrunc status=none
    done
    echo "$2" >"$1/member/note"
}
# copies DATA_DIR: the copies initialize moved aside (not the look-alike planted below)
copies() { ls -d "$1".invalid.* 2>/dev/null | grep -E '\.invalid\.[0-9]{8}T[0-9]{6}Z(\.[0-9]+)?$' | grep -v 19990101T000000Z || true; }

# ---- (a) every invalid data dir is kept; the bound removes the oldest marked copy, logged ----
DD=$WORK/inv.etcd
cp -a "$WORK/src.etcd" "$DD"
# look-alikes that are not etcdbr's copies: never removed (they sort oldest by name)
mkdir -p "$DD.invalid.19990101T000000Z" "$DD.invalid"
echo mine >"$DD.invalid.19990101T000000Z/mine"
echo old >"$DD.invalid/old"
for n in 1 2 3; do
    corrupt "$DD" "$n"
    initialize "$DD" "$WORK/a$n.log" --max-invalid-copies=2
    [ "$RC" = 0 ] || { cat "$WORK/a$n.log" >&2; fail "(a) initialize $n exited $RC"; }
    grep -q "DataDirectoryCorrupt" "$WORK/a$n.log" || { cat "$WORK/a$n.log" >&2; fail "(a) $n: not seen as corrupt"; }
    if [ "$n" = 2 ]; then
        [ "$(copies "$DD" | wc -l)" = 2 ] || fail "(a) after two invalid data dirs: copies $(copies "$DD" | tr '\n' ' ')"
        for c in $(copies "$DD"); do cat "$c/member/note"; done | sort | tr '\n' ' ' | grep -qx "1 2 " ||
            fail "(a) the two copies do not hold the two invalid data dirs"
        ! grep -q "removing" "$WORK/a$n.log" || fail "(a) a copy was removed within the bound"
        echo "(a) two invalid data dirs in a row: both kept ($(copies "$DD" | xargs -n1 basename | tr '\n' ' '))"
    fi
done
first=$(grep -o "removing [^ ]*" "$WORK/a3.log" | awk '{ print $2 }' | sed 's/,$//')
[ -n "$first" ] || { cat "$WORK/a3.log" >&2; fail "(a) the third copy beyond --max-invalid-copies=2 removed nothing with a log line"; }
[ ! -e "$first" ] || fail "(a) $first was logged as removed but is there"
[ "$(copies "$DD" | wc -l)" = 2 ] || fail "(a) copies after the bound: $(copies "$DD" | tr '\n' ' ')"
for c in $(copies "$DD"); do cat "$c/member/note"; done | sort | tr '\n' ' ' | grep -qx "2 3 " || fail "(a) the bound did not remove the oldest copy"
[ -f "$DD.invalid.19990101T000000Z/mine" ] && [ -f "$DD.invalid/old" ] || fail "(a) a look-alike without the marker was removed"
grep -q "removing $first, the oldest copy of an invalid data dir" "$WORK/a3.log" || fail "(a) the removal log line does not say what it removed"
expect_exact "(a)" "$DD"
echo "(a) the third removed the oldest copy only ($(basename "$first")), logged; look-alikes kept"

# ---- (b) the operator's .part / .restore: refused, nothing removed ----
mkdir -p "$WORK/b.etcd.part"
echo precious >"$WORK/b.etcd.part/mine.txt"
restore "$WORK/b.etcd" "$WORK/b1.log"
[ "$RC" = 3 ] || { cat "$WORK/b1.log" >&2; fail "(b) restore over an operator's .part exited $RC, not 3"; }
grep -q "$WORK/b.etcd.part exists but was not made by etcdbr" "$WORK/b1.log" && grep -q "mv $WORK/b.etcd.part" "$WORK/b1.log" ||
    { cat "$WORK/b1.log" >&2; fail "(b) the refusal does not name the .part dir and what to do"; }
[ "$(cat "$WORK/b.etcd.part/mine.txt")" = precious ] || fail "(b) the operator's file in .part is gone"
[ ! -e "$WORK/b.etcd" ] || fail "(b) a data dir was written"
mkdir -p "$WORK/c.etcd.restore"
echo precious >"$WORK/c.etcd.restore/mine.txt"
initialize "$WORK/c.etcd" "$WORK/b2.log"
[ "$RC" != 0 ] || { cat "$WORK/b2.log" >&2; fail "(b) initialize over an operator's .restore succeeded"; }
grep -q "$WORK/c.etcd.restore exists but was not made by etcdbr" "$WORK/b2.log" || { cat "$WORK/b2.log" >&2; fail "(b) the refusal does not name the .restore dir"; }
[ "$(cat "$WORK/c.etcd.restore/mine.txt")" = precious ] || fail "(b) the operator's file in .restore is gone"
[ ! -e "$WORK/c.etcd" ] || fail "(b) initialize wrote a data dir"
echo "(b) an operator's <data-dir>.part and <data-dir>.restore are kept; restore and initialize refuse, naming them"

# ---- (c) etcdbr's own leftovers (kill -9 after etcd's restore tool wrote) are cleaned ----
REAL_TOOL=$(command -v etcdutl || command -v etcdctl)
cat >"$WORK/tool.sh" <<EOF
#!/usr/bin/env bash
# etcd's restore tool, then held until etcdbrctl is gone (the test kills it with -9)
"$REAL_TOOL" "\$@" >/dev/null 2>&1 || exit \$?
touch "$WORK/tool-done"
while kill -0 \$PPID 2>/dev/null; do sleep 0.05; done
EOF
chmod +x "$WORK/tool.sh"
# kill9_when_tool_done PID: waits for the wrapper's flag, kills PID with -9
kill9_when_tool_done() {
    local i
    for i in $(seq 1 600); do
        [ -e "$WORK/tool-done" ] && break
        kill -0 "$1" 2>/dev/null || fail "(c) the command ended before the restore tool ran"
        sleep 0.05
    done
    [ -e "$WORK/tool-done" ] || fail "(c) the restore tool did not run within 30 s"
    kill -9 "$1"
    wait "$1" 2>/dev/null || true
    rm -f "$WORK/tool-done"
}
"$ETCDBR_BIN" restore --storage-provider=Local --store-container="$STORE" --data-dir="$WORK/k.etcd" \
    --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 --restoration-temp-snapshots-dir="$WORK/k.etcd.tmp" \
    --etcdutl-bin="$WORK/tool.sh" >"$WORK/c1.log" 2>&1 &
PIDS+=($!)
kill9_when_tool_done $!
[ -f "$WORK/k.etcd.part/.etcdbr-scratch" ] && [ -d "$WORK/k.etcd.part/data-dir/member" ] || fail "(c) the killed restore left no marked .part"
restore "$WORK/k.etcd" "$WORK/c2.log"
[ "$RC" = 0 ] || { cat "$WORK/c2.log" >&2; fail "(c) the restore after a killed one exited $RC"; }
grep -q "removed $WORK/k.etcd.part, left by an earlier restore" "$WORK/c2.log" || fail "(c) the leftover .part removal is not logged"
[ ! -e "$WORK/k.etcd.part" ] || fail "(c) .part left after a successful restore"
expect_exact "(c) restore" "$WORK/k.etcd"
"$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$STORE" \
    --snapstore-temp-directory="$WORK/tmp" --data-dir="$WORK/i.etcd" --name=restored \
    --initial-cluster=restored=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/i.etcd.tmp" --etcdutl-bin="$WORK/tool.sh" >"$WORK/c3.log" 2>&1 &
PIDS+=($!)
kill9_when_tool_done $!
[ -f "$WORK/i.etcd.restore/.etcdbr-scratch" ] || fail "(c) the killed initialize left no marked .restore"
initialize "$WORK/i.etcd" "$WORK/c4.log"
[ "$RC" = 0 ] || { cat "$WORK/c4.log" >&2; fail "(c) initialize after a killed one exited $RC"; }
grep -q "removed $WORK/i.etcd.restore, left by an earlier initialization" "$WORK/c4.log" || fail "(c) the leftover .restore removal is not logged"
[ ! -e "$WORK/i.etcd.restore" ] || fail "(c) .restore left after a successful initialize"
expect_exact "(c) initialize" "$WORK/i.etcd"
echo "(c) leftovers of a restore and an initialization killed with -9 are removed by the next run, which is exact"

echo "PASS test_never_delete_operator_files ($(($(date +%s) - t0)) s)"
