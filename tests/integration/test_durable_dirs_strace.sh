#!/usr/bin/env bash
# What must survive a crash is made durable (issue 17, section 2): every directory etcdbr creates
# has its parent fsynced after the mkdir, and every rename its target's directory fsynced after
# it. Checked on the system calls (strace -f, etcd's restore tool included) of, against a real
# etcd:
# (a) the snapshotter's first full snapshot into a new Local store several levels deep (the
#     store's folders and its first object);
# (b) a restore into a data dir whose parents do not exist (the commit of <data-dir>);
# (c) initialize of a corrupt data dir (the move aside, the swap-in of the restored one).
# Exits 77 (skipped) when strace is missing or cannot trace here.
source "$(dirname "$0")/lib.sh"
make_workdir
unset POD_NAMESPACE
command -v strace >/dev/null && strace -f -o /dev/null true 2>/dev/null ||
    skip_test "strace is missing or cannot trace here (apt-get install strace)"
t0=$(date +%s)

# check TRACE ROOT LABEL: every mkdir of a new path under ROOT and every rename onto a path under
# ROOT is followed (later in the trace) by an fsync of that path's directory
check() {
    python3 - "$1" "$2" <<'PY' || fail "$3: not durable (trace $1)"
import re, sys
trace, root = sys.argv[1], sys.argv[2].rstrip('/')
pending, unfinished, made = {}, {}, 0
def done(call, args):
    global made
    paths = re.findall(r'"((?:[^"\\]|\\.)*)"', args)
    if not paths:
        return
    p = paths[-1].rstrip('/')
    if p == root or p.startswith(root + '/'):
        parent = p.rsplit('/', 1)[0]
        pending.setdefault(parent, []).append('%s %s' % (call, p))
        made += 1
for ln in open(trace):
    m = re.match(r'(\d+) +(.*)', ln.rstrip('\n'))
    if not m:
        continue
    pid, rest = m.groups()
    f = re.match(r'fsync\(\d+<([^>]+)>', rest)
    if f:  # the directory's entries so far are durable once this returns
        pending.pop(f.group(1), None)
        continue
    c = re.match(r'(mkdir|mkdirat|rename|renameat|renameat2)\((.*?)(?: <unfinished \.\.\.>$|\) += (-?\d+).*$)', rest)
    if c:
        if rest.endswith('<unfinished ...>'):
            unfinished[pid] = (c.group(1), c.group(2))
        elif c.group(3) == '0':
            done(c.group(1), c.group(2))
        continue
    r = re.match(r'<\.\.\. (\w+) resumed>.*\) += (-?\d+)', rest)
    if r and pid in unfinished:
        call, args = unfinished.pop(pid)
        if r.group(2) == '0' and r.group(1) == call:
            done(call, args)
if made == 0:
    print("nothing created under", root); sys.exit(1)
left = [e for v in pending.values() for e in v]
if left:
    print("no fsync of the directory after:", *left, sep='\n  '); sys.exit(1)
print("%d creations/renames under %s, each followed by an fsync of its directory" % (made, root))
PY
}
# LeakSanitizer cannot run under ptrace (an ASan build aborts at exit): leaks are checked elsewhere
TRACE=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    strace -f -y -qq -e trace=mkdir,mkdirat,rename,renameat,renameat2,fsync)

# ---- (a) the snapshotter's first objects in a new Local store ----
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 10); do ectl put "/k/$i" "v$i" >/dev/null; done
STORE=$WORK/deep-store/x/y
"${TRACE[@]}" -o "$WORK/a.trace" "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=Local \
    --store-container="$STORE" --snapstore-temp-directory="$WORK/snaptmp" --schedule='0 0 1 1 *' \
    --garbage-collection-period=0s --delta-snapshot-period=0s >"$WORK/a.log" 2>&1 &
STRACE_PID=$!
PIDS+=("$STRACE_PID")
wait_for_log "$WORK/a.log" "full snapshot Full-"
SNAP=$(pgrep -P "$STRACE_PID" | head -1)
[ -n "$SNAP" ] || fail "(a) no snapshotter under strace"
kill -TERM "$SNAP"
wait "$STRACE_PID" || fail "(a) the snapshotter exited non-zero"
check "$WORK/a.trace" "$WORK/deep-store" "(a)"
dump_keys "$ETCD_EP" >"$WORK/src.keys"
SRC_REV=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"

expect_exact() { # LABEL DATA_DIR
    start_etcd restored "$2"
    [ "$(current_revision "$ETCD_EP")" = "$SRC_REV" ] || fail "$1: not at revision $SRC_REV"
    dump_keys "$ETCD_EP" | cmp -s - "$WORK/src.keys" || fail "$1: keys differ from the source"
    stop_pid "$ETCD_PID"
}
common=(--storage-provider=Local --store-container="$STORE" --name=restored
    --initial-cluster=restored=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380)

# ---- (b) a restore into a data dir whose parents do not exist ----
"${TRACE[@]}" -o "$WORK/b.trace" "$ETCDBR_BIN" restore "${common[@]}" --data-dir="$WORK/deep/a/b/r.etcd" \
    --restoration-temp-snapshots-dir="$WORK/b.tmp" >"$WORK/b.log" 2>&1 || { cat "$WORK/b.log" >&2; fail "(b) restore failed"; }
grep -q 'rename.*"'"$WORK"'/deep/a/b/r.etcd".* = 0' "$WORK/b.trace" || fail "(b) no rename into the data dir traced"
check "$WORK/b.trace" "$WORK/deep" "(b)"
expect_exact "(b)" "$WORK/deep/a/b/r.etcd"

# ---- (c) initialize of a corrupt data dir: moved aside, restored, swapped in ----
mkdir -p "$WORK/ini"
cp -a "$WORK/src.etcd" "$WORK/ini/c.etcd"
for off in 16 4112; do
    printf '\xde\xad\xbe\xef' | dd of="$WORK/ini/c.etcd/member/snap/db" bs=1 seek="$off" conv=notrunc status=none
done
"${TRACE[@]}" -o "$WORK/c.trace" "$ETCDBR_BIN" initialize "${common[@]}" --data-dir="$WORK/ini/c.etcd" \
    --snapstore-temp-directory="$WORK/c.snaptmp" --restoration-temp-snapshots-dir="$WORK/c.tmp" \
    >"$WORK/c.log" 2>&1 || { cat "$WORK/c.log" >&2; fail "(c) initialize failed"; }
grep -q 'rename.*"'"$WORK"'/ini/c.etcd.invalid.[0-9TZ]*".* = 0' "$WORK/c.trace" || fail "(c) no move aside traced"
check "$WORK/c.trace" "$WORK/ini" "(c)"
expect_exact "(c)" "$WORK/ini/c.etcd"
echo "PASS test_durable_dirs_strace ($(($(date +%s) - t0)) s)"
