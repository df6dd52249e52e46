#!/usr/bin/env bash
# Object names and links in a Local store folder are hostile (issue 17): with a real etcd,
#  1. a store folder whose v2 directory is a symlink planted to a folder outside it: the
#     snapshotter with GC (LimitBased, --max-backups=1, every second) neither writes there nor
#     deletes the old full snapshot waiting there; it names the link;
#  2. copy from a crafted source Local store (a real full snapshot beside files named with "..",
#     backslashes, ESC sequences and a newline that forges a log line) into a Local store whose
#     v2 is a symlink to a folder outside: refused, naming the link, nothing written outside;
#  3. the same copy into a plain Local store: only the real snapshot is copied, nothing appears
#     outside the store folder, and the log holds no raw control character and no forged line.
source "$(dirname "$0")/lib.sh"
make_workdir

start_etcd a "$WORK/a.etcd"
for i in $(seq 1 20); do ectl put "/k/$i" "v$i" >/dev/null; done

# --- 1. a symlinked v2 in the snapshotter's store, GC running ---------------------------------------
OUT=$WORK/outside
mkdir -p "$OUT"
OLD=Full-00000000-00000001-1000000000
printf 'precious' >"$OUT/$OLD"
printf 'keep' >"$OUT/notes.txt"
before=$(cd "$OUT" && find . -printf '%p %s\n' | sort)
STORE=$WORK/store
mkdir -p "$STORE"
ln -s "$OUT" "$STORE/v2"
start_snapshotter "$STORE" "$WORK/snap.log" --garbage-collection-period=1s \
    --garbage-collection-policy=LimitBased --max-backups=1 --delta-snapshot-period=1s
for i in $(seq 1 600); do
    kill -0 "$SNAP_PID" 2>/dev/null || break
    grep -q "symlink" "$WORK/snap.log" && break
    [ -e "$OUT/$OLD" ] || break
    [ "$(ls "$OUT" | wc -l)" = 2 ] || break
    sleep 0.1
done
kill -TERM "$SNAP_PID" 2>/dev/null || true
wait "$SNAP_PID" 2>/dev/null || true
after=$(cd "$OUT" && find . -printf '%p %s\n' | sort)
[ "$before" = "$after" ] || fail "the snapshotter changed the folder outside the store through the link: before [$before] after [$after]"
grep -q "symlink inside the store folder" "$WORK/snap.log" ||
    { tail "$WORK/snap.log"; fail "the snapshotter does not name the planted symlink"; }
echo "1. a symlinked v2 in the store: nothing written or deleted outside, the link is named"

# --- 2. copy into a store with a planted link -------------------------------------------------------
SRC=$WORK/src
start_snapshotter "$SRC" "$WORK/src.log"
wait_for_log "$WORK/src.log" "full snapshot Full-" 60
stop_snapshotter
full=$(ls "$SRC/v2" | grep '^Full-') || fail "no full snapshot in the source"
printf x >"$SRC/v2/Full-00000001-00000002-3\\..\\..\\evil"
printf x >"$SRC/v2/"$'\x1b[2J\x1b[31mFull-00000001-00000002-3'
printf x >"$SRC/v2/Incr-00000001-00000002-3"$'\n''time="x" level=error msg="forged"'
printf x >"$SRC/v2/Full-00000001-00000002-3"$'\x7f'
mkdir -p "$SRC/v2/..Full-1-2-3"
OUT2=$WORK/outside2
mkdir -p "$OUT2"
DST=$WORK/dst
mkdir -p "$DST"
ln -s "$OUT2" "$DST/v2"
copy_local() {
    "$ETCDBR_BIN" copy --storage-provider=Local --store-container="$1" --store-prefix= \
        --source-storage-provider=Local --source-store-container="$SRC" --source-store-prefix= \
        --snapstore-temp-directory="$WORK/snaptmp"
}
rc=0
copy_local "$DST" >"$WORK/copy1.log" 2>&1 || rc=$?
[ "$rc" != 0 ] || { cat "$WORK/copy1.log"; fail "copy into a store with a planted symlink exited 0"; }
[ -z "$(ls -A "$OUT2")" ] || fail "copy wrote through the planted symlink: $(ls -A "$OUT2")"
grep -q "symlink inside the store folder" "$WORK/copy1.log" ||
    { cat "$WORK/copy1.log"; fail "copy does not name the planted symlink"; }
echo "2. copy into a store with a planted link: refused (exit $rc), nothing written outside"

# --- 3. copy of hostile names into a plain store ----------------------------------------------------
DST2=$WORK/plain/dst
mkdir -p "$DST2"
outside_before=$(cd "$WORK" && find . -path ./plain -prune -o -path ./snaptmp -prune -o -print | sort)
copy_local "$DST2" >"$WORK/copy2.log" 2>&1 || { cat "$WORK/copy2.log"; fail "copy into a plain store failed"; }
copied=$(ls -A "$DST2/v2" | grep -v '^\.' | tr '\n' ' ')
[ "$copied" = "$full " ] || fail "copy into a plain store copied [$copied], want only [$full]"
outside_after=$(cd "$WORK" && find . -path ./plain -prune -o -path ./snaptmp -prune -o -path ./copy2.log -prune -o -print | sort)
[ "$outside_before" = "$outside_after" ] || fail "copy created files outside the store folder"
! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$WORK/copy2.log" || fail "the copy's log holds raw control characters"
! grep -v '^time=' "$WORK/copy2.log" | grep -q . || fail "the copy's log holds a line a store name forged: $(grep -v '^time=' "$WORK/copy2.log" | head -3)"
echo "3. copy of hostile names into a plain store: only $full copied, nothing outside, the log escapes every name"
echo "PASS: a Local store never follows a planted symlink (snapshot+GC, copy), hostile source names are skipped and escaped in the log"
