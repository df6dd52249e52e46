#!/usr/bin/env bash
# A data dir restored on purpose to an older revision than the store's latest (the runbook's
# "pick an older set": restore --revision) is kept by initialize, server and run: its restore mark
# says the newer backups were all stored before that restore. Before, validation called it
# "behind the backups" and restored the latest set over it, undoing the operator's choice.
# A backup stored after the restore still makes an older data dir stale (restored as before).
source "$(dirname "$0")/lib.sh"
make_workdir
STORE=$WORK/store
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 10); do ectl put "/k/$i" "v$i" >/dev/null; done
start_snapshotter "$STORE" "$WORK/snap.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap.log" "full snapshot Full-" 30
chosen=$(current_revision "$ETCD_EP")
for i in $(seq 1 10); do ectl put "/later/$i" "x$i" >/dev/null; done
latest=$(current_revision "$ETCD_EP")
for i in $(seq 1 100); do
    last=$(ls "$STORE/v2" | sed -n 's/^Incr-[0-9]*-0*\([0-9]*\)-.*/\1/p' | sort -n | tail -1)
    [ "${last:-0}" -ge "$latest" ] && break
    sleep 0.1
done
[ "${last:-0}" -ge "$latest" ] || fail "the store does not reach revision $latest"
stop_snapshotter
stop_pid "$ETCD_PID"
echo "store up to revision $latest; restoring revision $chosen on purpose"

restore_store "$STORE" "$WORK/chosen.etcd" --revision="$chosen" >"$WORK/restore.log" 2>&1 ||
    { cat "$WORK/restore.log"; fail "restore --revision=$chosen failed"; }
initialize() { # DATA_DIR LOG
    "$ETCDBR_BIN" initialize --storage-provider=Local --store-container="$STORE" \
        --data-dir="$1" --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$1.tmp" >"$2" 2>&1
}
initialize "$WORK/chosen.etcd" "$WORK/init.log" || { cat "$WORK/init.log"; fail "initialize failed"; }
grep "restored on purpose to revision $chosen" "$WORK/init.log" >/dev/null ||
    { cat "$WORK/init.log"; fail "initialize did not keep the data dir restored to $chosen"; }
grep "restoring data dir" "$WORK/init.log" >/dev/null &&
    { cat "$WORK/init.log"; fail "initialize restored the latest set over the chosen revision"; }
! ls -d "$WORK"/chosen.etcd.invalid* >/dev/null 2>&1 || fail "the chosen data dir was moved aside"
# etcd on it: the chosen revision, none of the later keys
start_etcd restored "$WORK/chosen.etcd"
got=$(current_revision "$ETCD_EP")
[ "$got" = "$chosen" ] || fail "etcd on the kept data dir is at revision $got, want $chosen"
[ -z "$(ectl get /later/ --prefix --keys-only)" ] || fail "keys written after revision $chosen are there"
echo "initialize kept the data dir at the chosen revision $chosen (store latest $latest)"

# a backup stored after a restore makes that older data dir stale again: restored as before
stop_pid "$ETCD_PID"
restore_store "$STORE" "$WORK/old.etcd" --revision="$chosen" >"$WORK/restore2.log" 2>&1 ||
    { cat "$WORK/restore2.log"; fail "second restore failed"; }
sleep 1.1 # the next backup's name (whole seconds) must be later than this restore
restart_etcd restored "$WORK/chosen.etcd"
ectl put /after/1 y >/dev/null
start_snapshotter "$STORE" "$WORK/snap2.log" --delta-snapshot-period=1s
wait_for_log "$WORK/snap2.log" "full snapshot Full-.* stored" 30
stop_snapshotter
stop_pid "$ETCD_PID"
initialize "$WORK/old.etcd" "$WORK/init2.log" || { cat "$WORK/init2.log"; fail "second initialize failed"; }
grep "restored on purpose" "$WORK/init2.log" >/dev/null &&
    { cat "$WORK/init2.log"; fail "a data dir behind a backup stored after its restore was kept"; }
grep "restoring data dir" "$WORK/init2.log" >/dev/null ||
    { cat "$WORK/init2.log"; fail "the stale data dir was not restored"; }
echo "a data dir behind a backup stored after its restore is still restored"
