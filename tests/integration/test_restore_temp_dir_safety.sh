#!/usr/bin/env bash
# restore and initialize never delete what they did not create: --restoration-temp-snapshots-dir
# pointing at a directory with other files, or at the directory holding the store itself, loses
# nothing; only the private scratch directory made inside it is removed (issue 7 item 1).
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 20); do ectl put "/k/$i" "v$i" >/dev/null; done
start_snapshotter "$WORK/x/store" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-"
for i in $(seq 21 40); do ectl put "/k/$i" "v$i" >/dev/null; done
stop_snapshotter
rev=$(current_revision "$ETCD_EP")
stop_pid "$ETCD_PID"
store_sum() { (cd "$WORK/x/store" && find . -type f -exec sha256sum {} + | sort); }
before=$(store_sum)

# 1. a temp dir holding the user's files
mkdir -p "$WORK/mine"
echo precious >"$WORK/mine/notes.txt"
mkdir -p "$WORK/mine/sub" && echo deep >"$WORK/mine/sub/file"
restore_store "$WORK/x/store" "$WORK/r1.etcd" --restoration-temp-snapshots-dir="$WORK/mine" >"$WORK/r1.log" 2>&1 || { cat "$WORK/r1.log"; fail "restore failed"; }
[ "$(cat "$WORK/mine/notes.txt")" = precious ] && [ "$(cat "$WORK/mine/sub/file")" = deep ] || fail "restore removed files in the temp dir"
[ -z "$(ls -A "$WORK/mine" | grep -v -e notes.txt -e sub)" ] || fail "restore left its scratch dir: $(ls -A "$WORK/mine")"

# 2. the temp dir is the directory that holds the store
restore_store "$WORK/x/store" "$WORK/r2.etcd" --restoration-temp-snapshots-dir="$WORK/x" >"$WORK/r2.log" 2>&1 || { cat "$WORK/r2.log"; fail "restore failed"; }
[ "$(store_sum)" = "$before" ] || fail "restore changed the store that lives in its temp dir"
[ "$(ls -A "$WORK/x")" = store ] || fail "restore left files in $WORK/x: $(ls -A "$WORK/x")"

# 3. initialize (restores a missing data dir) with the same temp dir
"$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$WORK/x/store" \
    --data-dir="$WORK/r3.etcd" --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/x" >"$WORK/r3.log" 2>&1 || { cat "$WORK/r3.log"; fail "initialize failed"; }
[ "$(store_sum)" = "$before" ] || fail "initialize changed the store that lives in its temp dir"

# 4. a failed restore (the data dir is not empty) touches nothing either
mkdir -p "$WORK/busy.etcd" && echo keep >"$WORK/busy.etcd/file"
rc=0
restore_store "$WORK/x/store" "$WORK/busy.etcd" --restoration-temp-snapshots-dir="$WORK/mine" >"$WORK/r4.log" 2>&1 || rc=$?
[ "$rc" = 3 ] || fail "restore into a non-empty data dir: exit $rc"
[ "$(cat "$WORK/busy.etcd/file")" = keep ] && [ "$(cat "$WORK/mine/notes.txt")" = precious ] || fail "a refused restore touched files"

# 5. the default temp dir (the Go tool's relative "default.restoration.tmp") is made in the
#    working directory and removed with the restore, as the Go tool does; an empty one that was
#    there before is the user's and stays
mkdir -p "$WORK/cwd"
(cd "$WORK/cwd" && "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$WORK/x/store" \
    --data-dir="$WORK/r5.etcd" --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380) >"$WORK/r5.log" 2>&1 || { cat "$WORK/r5.log"; fail "restore with the default temp dir failed"; }
[ -z "$(ls -A "$WORK/cwd")" ] || fail "restore left in the working directory: $(ls -A "$WORK/cwd")"
mkdir "$WORK/cwd/default.restoration.tmp"
(cd "$WORK/cwd" && "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$WORK/x/store" \
    --data-dir="$WORK/r6.etcd" --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380) >"$WORK/r6.log" 2>&1 || { cat "$WORK/r6.log"; fail "restore with an existing default temp dir failed"; }
[ "$(ls -A "$WORK/cwd")" = default.restoration.tmp ] && [ -z "$(ls -A "$WORK/cwd/default.restoration.tmp")" ] ||
    fail "restore removed the user's empty default.restoration.tmp or left files in it: $(ls -AR "$WORK/cwd")"

for d in r1 r2 r3 r5 r6; do
    start_etcd restored "$WORK/$d.etcd"
    [ "$(current_revision "$ETCD_EP")" = "$rev" ] || fail "$d: revision differs"
    stop_pid "$ETCD_PID"
done
echo "temp dir with user files, temp dir holding the store, initialize, refused restore: nothing lost; the default temp dir made and removed, an existing one kept"
