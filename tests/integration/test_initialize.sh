#!/usr/bin/env bash
# `etcdbrctl initialize` (docs/go-tool.md §1.11, §9) against a real etcd and a Local store that the
# snapshotter filled: 10 puts (full snapshot), 30 lease grants, etcd stopped and its data dir
# copied aside ("stale"), etcd restarted on the original, 20 more puts stored as deltas.
# (a) the stale copy is restored: its db is 20 revisions behind the store, and the 30 lease grants
#     in its WAL past the consistent index (etcd 3.4 saves that index only with a key write)
#     cannot make up for them; it used to pass as valid and the 20 revisions were lost.
# (b) a missing data dir is restored. (c) the up-to-date original is valid and left alone: no
#     restore, every file unchanged. (d) a db whose meta pages are damaged is corrupt: the data dir
#     is kept as <data-dir>.invalid.<UTC time> and restored.
# Each restored data dir is started with etcd and compared with the source: revision and every
# key with its create/mod revision and version. Uses the etcd on PATH (Debian's 3.4 here, the
# version whose consistent index lags behind lease grants).
source "$(dirname "$0")/lib.sh"
make_workdir
unset POD_NAMESPACE # the safe_guard rule is not under test

STORE=$WORK/store
# the latest revision in the store: the largest LastRevision of its objects
store_revision() {
    ls "$STORE/v2" 2>/dev/null | awk -F- '/^(Full|Incr)-/ { if ($3 + 0 > m) m = $3 + 0 } END { print m + 0 }'
}

# initialize DATA_DIR LOG: exit status in INIT_RC
initialize() {
    INIT_RC=0
    "$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$STORE" \
        --snapstore-temp-directory="$WORK/init-tmp" --data-dir="$1" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$1.tmp" >"$2" 2>&1 || INIT_RC=$?
}

# file list and content hashes of a data dir, for "left alone"
fingerprint() {
    (cd "$1" && find . -print | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

# expect_restored NAME DATA_DIR: etcd starts on it at the source's revision with its keys
expect_restored() {
    local name=$1 dir=$2 rev
    start_etcd "$name" "$dir"
    rev=$(current_revision "$ETCD_EP")
    [ "$rev" = "$SRC_REV" ] || fail "($name) etcd on the restored data dir is at revision $rev, the source at $SRC_REV"
    dump_keys "$ETCD_EP" >"$WORK/$name.keys"
    cmp -s "$WORK/src.keys" "$WORK/$name.keys" || {
        diff "$WORK/src.keys" "$WORK/$name.keys" | head -10 >&2
        fail "($name) keys differ from the source"
    }
    stop_pid "$ETCD_PID"
}

# ---- the source etcd and its backups ----
t0=$(date +%s)
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 10); do ectl put "/before/$i" "v$i" >/dev/null; done
start_snapshotter "$STORE" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-"
for i in $(seq 1 30); do ectl lease grant 600 >/dev/null; done
stale_rev=$(current_revision "$ETCD_EP")
[ "$stale_rev" = 11 ] || fail "lease grants changed the revision: $stale_rev"
stop_pid "$ETCD_PID"
cp -a "$WORK/src.etcd" "$WORK/stale.etcd"
restart_etcd src "$WORK/src.etcd"
for i in $(seq 1 20); do ectl put "/after/$i" "w$i" >/dev/null; done
SRC_REV=$(current_revision "$ETCD_EP")
[ "$SRC_REV" = 31 ] || fail "source at revision $SRC_REV after 10 + 20 puts"
dump_keys "$ETCD_EP" >"$WORK/src.keys"
[ "$(wc -l <"$WORK/src.keys")" = 30 ] || fail "source has $(wc -l <"$WORK/src.keys") keys, not 30"
for i in $(seq 1 100); do
    [ "$(store_revision)" -ge "$SRC_REV" ] && break
    sleep 0.1
done
[ "$(store_revision)" -ge "$SRC_REV" ] || fail "the store reaches revision $(store_revision), not $SRC_REV: $(ls "$STORE/v2")"
stop_snapshotter
stop_pid "$ETCD_PID"

# ---- (a) stale: lease grants past the consistent index do not make up for missing revisions ----
initialize "$WORK/stale.etcd" "$WORK/a.log"
[ "$INIT_RC" = 0 ] || { cat "$WORK/a.log" >&2; fail "(a) initialize exited $INIT_RC"; }
grep -q "RevisionConsistencyError" "$WORK/a.log" && grep -q "restoring data dir" "$WORK/a.log" || {
    cat "$WORK/a.log" >&2
    fail "(a) the data dir 20 revisions behind the store (30 lease grants in its WAL) was not restored"
}
ls -d "$WORK"/stale.etcd.invalid.*/member >/dev/null 2>&1 || fail "(a) the stale data dir was not kept as stale.etcd.invalid.<time>"
expect_restored stale "$WORK/stale.etcd"
echo "(a) stale data dir (db revision 11, 30 lease grants in the WAL, store at $SRC_REV) restored"

# ---- (b) missing ----
initialize "$WORK/missing.etcd" "$WORK/b.log"
[ "$INIT_RC" = 0 ] || { cat "$WORK/b.log" >&2; fail "(b) initialize exited $INIT_RC"; }
grep -q "DataDirectoryNotExist" "$WORK/b.log" && grep -q "restoring data dir" "$WORK/b.log" ||
    { cat "$WORK/b.log" >&2; fail "(b) the missing data dir was not restored"; }
! ls -d "$WORK"/missing.etcd.invalid* >/dev/null 2>&1 || fail "(b) an .invalid dir appeared for a missing data dir"
expect_restored missing "$WORK/missing.etcd"
echo "(b) missing data dir restored"

# ---- (c) valid and up to date: left alone ----
fingerprint "$WORK/src.etcd" >"$WORK/c.before"
initialize "$WORK/src.etcd" "$WORK/c.log"
[ "$INIT_RC" = 0 ] || { cat "$WORK/c.log" >&2; fail "(c) initialize exited $INIT_RC"; }
grep -q "DataDirectoryValid" "$WORK/c.log" || { cat "$WORK/c.log" >&2; fail "(c) the up-to-date data dir is not valid"; }
! grep -Eq "restoring data dir|restored from" "$WORK/c.log" || { cat "$WORK/c.log" >&2; fail "(c) initialize restored a valid data dir"; }
fingerprint "$WORK/src.etcd" >"$WORK/c.after"
cmp -s "$WORK/c.before" "$WORK/c.after" || {
    diff "$WORK/c.before" "$WORK/c.after" >&2
    fail "(c) files of the valid data dir changed"
}
! ls -d "$WORK"/src.etcd.invalid* >/dev/null 2>&1 && [ ! -e "$WORK/src.etcd.restore" ] || fail "(c) side directories appeared"
echo "(c) valid data dir left alone"

# ---- (d) corrupt db: kept aside and restored ----
cp -a "$WORK/src.etcd" "$WORK/corrupt.etcd"
db=$WORK/corrupt.etcd/member/snap/db
for off in 16 4112; do # the magic of both bbolt meta pages (page size 4096)
    printf '\xde\xad\xbe\xef' | dd of="$db" bs=1 seek="$off" conv=notrunc status=none
done
cp "$db" "$WORK/corrupt.db"
initialize "$WORK/corrupt.etcd" "$WORK/d.log"
[ "$INIT_RC" = 0 ] || { cat "$WORK/d.log" >&2; fail "(d) initialize exited $INIT_RC"; }
grep -q "DataDirectoryCorrupt" "$WORK/d.log" && grep -q "restoring data dir" "$WORK/d.log" ||
    { cat "$WORK/d.log" >&2; fail "(d) the corrupt data dir was not restored"; }
cmp -s "$WORK/corrupt.db" "$(ls -d "$WORK"/corrupt.etcd.invalid.* | head -1)/member/snap/db" ||
    fail "(d) corrupt.etcd.invalid.<time> does not hold the damaged db"
expect_restored corrupt "$WORK/corrupt.etcd"
echo "(d) corrupt data dir kept as $(basename "$(ls -d "$WORK"/corrupt.etcd.invalid.*)") and restored"
echo "PASS test_initialize ($(($(date +%s) - t0)) s)"
