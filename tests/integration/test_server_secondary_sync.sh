#!/usr/bin/env bash
# The server's secondary backup sync (issue 9 item 4; docs/go-tool.md §1.7, §10.3) with a real etcd,
# a Local primary store and an S3 (s3rver) secondary store whose credentials are only in
# SECONDARY_ variables:
#  1. every full snapshot the server takes (4, by its HTTP API) and the deltas between them reach
#     the secondary store within a few sync periods;
#  2. garbage collection runs on the secondary with the primary's policy (LimitBased, 2 full
#     snapshots): it removes the older copies of this cluster's history and keeps objects that
#     are not of it (an untagged full snapshot and another history's, planted beforehand);
#  3. a restore from the secondary equals a restore from the primary (every key, value,
#     revision field, and the current revision);
#  4. /metrics: the last successful sync time is set, no failure counted; then the secondary
#     goes away: the failed sync is logged at error level and counted.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
[ -x "$BUILD/store_put" ] || fail "$BUILD/store_put not built"
make_workdir
SEED=${ETCDBR_TEST_SEED:-$(date +%s)}
echo "seed $SEED (ETCDBR_TEST_SEED=$SEED replays the writes)"
RANDOM=$SEED
export ETCDBR_STORE_RETRY_BASE_MS=10

start_s3rver secondary
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP
PRIMARY=$WORK/primary
SEC_OBJ=$WORK/s3rver/$S3_BUCKET/sec

writes() {
    local i k
    for i in $(seq 1 "$1"); do
        k=$((RANDOM % 40))
        case $((RANDOM % 6)) in
        0) ectl del "/registry/k/$k" >/dev/null ;;
        *) ectl put "/registry/k/$k" "v-$RANDOM-$i" >/dev/null ;;
        esac
    done
}

# planted in the secondary: a Go tool's (untagged) full snapshot and one of another history
echo junk >"$WORK/junk"
sput() { AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON "$BUILD/store_put" --provider S3 \
    --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT" put "$@" >/dev/null; }
sput sec/v2/Full-00000000-00000001-1700000000.gz "$WORK/junk"
sput sec/etcdbr/history/00000000000000aa/Full-00000000-00000002-1700000001.gz "$WORK/junk"
sput sec/v2/Full-00000000-00000002-1700000001.gz "$WORK/junk"

PORT=$(free_port)
H=http://127.0.0.1:$PORT
cat >"$WORK/etcd.conf.yaml" <<YAML
name: m1
data-dir: $WORK/m1.etcd
initial-cluster: m1=http://127.0.0.1:2380
YAML
writes 30
env -u AWS_APPLICATION_CREDENTIALS_JSON SECONDARY_AWS_APPLICATION_CREDENTIALS_JSON="$S3_CREDS_JSON" \
    ETCD_CONF="$WORK/etcd.conf.yaml" "$ETCDBR_BIN" server --endpoints="$EP" \
    --storage-provider=Local --store-container="$PRIMARY" --snapstore-temp-directory="$WORK/snaptmp" \
    --server-port="$PORT" --data-dir="$WORK/m1.etcd" --name=m1 \
    --initial-cluster="m1=http://127.0.0.1:2380" --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/rt" --delta-snapshot-period=1s --schedule='0 0 1 1 *' \
    --reelection-period=2s --garbage-collection-policy=LimitBased --max-backups=2 \
    --garbage-collection-period=3s --secondary-storage-provider=S3 \
    --secondary-store-container="$S3_BUCKET" --secondary-store-prefix=sec \
    --secondary-store-endpoint-override="$S3_ENDPOINT" --secondary-backup-sync-enabled \
    --secondary-backup-sync-period=2s >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_for_log "$WORK/server.log" "full snapshot Full-" 60
wait_for_log "$WORK/server.log" "secondary store: S3:$S3_BUCKET/sec" 5

# wait_in_secondary NAME: until the secondary holds NAME (".final" stripped)
wait_in_secondary() {
    local i
    for i in $(seq 1 150); do
        [ -f "$SEC_OBJ/v2/${1%.final}._S3rver_object" ] && return 0
        sleep 0.2
    done
    tail -20 "$WORK/server.log" >&2
    fail "$1 did not reach the secondary store"
}

first=$(ls "$PRIMARY/v2" | grep '^Full-' | head -1)
wait_in_secondary "$first"
fulls=("$first")
for round in 1 2 3; do
    writes 15
    sleep 1.3
    writes 15
    sleep 1.3
    name=$(curl -sf -X POST "$H/snapshot/full" | jq -r .snapName) || fail "full snapshot $round refused"
    wait_in_secondary "$name"
    fulls+=("$name")
done
writes 10
REV=$(current_revision "$EP")
wait_backed_up "$H" "$REV"

# converged: every primary object is in the secondary, the secondary's GC has removed the older
# copies of this history (2 full snapshots left of ours, as in the primary)
HIST=$(ls "$PRIMARY/etcdbr/history")
for i in $(seq 1 150); do
    missing=0
    for o in $(ls "$PRIMARY/v2"); do [ -f "$SEC_OBJ/v2/${o%.final}._S3rver_object" ] || missing=1; done
    ours=$(find "$SEC_OBJ/etcdbr/history/$HIST" -name 'Full-*._S3rver_object' | wc -l)
    ours_objs=$(for f in "$SEC_OBJ"/etcdbr/history/"$HIST"/Full-*._S3rver_object; do
        b=$(basename "$f" ._S3rver_object)
        [ -f "$SEC_OBJ/v2/$b._S3rver_object" ] && echo "$b"
    done | wc -l)
    [ "$missing" = 0 ] && [ "$ours_objs" = 2 ] && break
    sleep 0.2
done
[ "$missing" = 0 ] || { tail -30 "$WORK/server.log"; fail "the secondary lacks objects of the primary"; }
[ "$ours_objs" = 2 ] || { tail -30 "$WORK/server.log"; fail "the secondary holds $ours_objs full snapshots of this history, GC should leave 2"; }
for f in "${fulls[@]:0:2}"; do
    [ ! -f "$SEC_OBJ/v2/$f._S3rver_object" ] || fail "the secondary's GC kept the old $f"
done
grep -q "secondary store S3:$S3_BUCKET/sec garbage collection (history $HIST): removed [1-9]" "$WORK/server.log" ||
    fail "no secondary garbage collection removed anything"
[ -f "$SEC_OBJ/v2/Full-00000000-00000001-1700000000.gz._S3rver_object" ] || fail "the secondary's GC removed an untagged object"
[ -f "$SEC_OBJ/v2/Full-00000000-00000002-1700000001.gz._S3rver_object" ] || fail "the secondary's GC removed another history's object"
[ "$(count_objects "$PRIMARY" Full)" = 2 ] || fail "the primary holds $(count_objects "$PRIMARY" Full) full snapshots"

# metrics
curl -sf "$H/metrics" >"$WORK/metrics1"
ts=$(awk '$1 == "etcdbr_secondary_sync_last_success_timestamp_seconds" {print int($2)}' "$WORK/metrics1")
[ "${ts:-0}" -gt 1700000000 ] || fail "etcdbr_secondary_sync_last_success_timestamp_seconds not set ($ts)"
grep -qx 'etcdbr_secondary_sync_failures_total 0' "$WORK/metrics1" || fail "sync failures counted: $(grep failures_total "$WORK/metrics1")"
grep -E '^etcdbr_secondary_snapshot_gc_total\{kind="Full",succeeded="true"\} [1-9]' "$WORK/metrics1" >/dev/null ||
    fail "secondary GC removals not counted: $(grep secondary_snapshot_gc "$WORK/metrics1")"
! grep "level=error" "$WORK/server.log" || fail "the server logged errors"

# restores from the primary and from the secondary are equal
restore_dump() { # NAME RESTORE_STORE_FLAGS...
    local name=$1
    shift
    "$ETCDBR_BIN" restore "$@" --data-dir="$WORK/$name.etcd" --name="$name" \
        --initial-cluster="$name=http://127.0.0.1:2380" \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$WORK/$name.tmp" >"$WORK/$name-restore.log" 2>&1 ||
        { tail -20 "$WORK/$name-restore.log"; fail "restore $name failed"; }
    local ep=$ETCD_EP pid=$ETCD_PID
    start_etcd "$name" "$WORK/$name.etcd"
    dump_keys "$ETCD_EP" >"$WORK/$name.jsonl"
    current_revision "$ETCD_EP" >"$WORK/$name.rev"
    stop_pid "$ETCD_PID"
    ETCD_EP=$ep
    ETCD_PID=$pid
}
restore_dump from-primary --storage-provider=Local --store-container="$PRIMARY"
AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON restore_dump from-secondary --storage-provider=S3 \
    --store-container="$S3_BUCKET" --store-prefix=sec --store-endpoint-override="$S3_ENDPOINT"
[ "$(cat "$WORK/from-primary.rev")" = "$REV" ] || fail "restore from the primary: revision $(cat "$WORK/from-primary.rev"), etcd had $REV"
[ "$(cat "$WORK/from-secondary.rev")" = "$REV" ] || fail "restore from the secondary: revision $(cat "$WORK/from-secondary.rev"), etcd had $REV"
cmp -s "$WORK/from-primary.jsonl" "$WORK/from-secondary.jsonl" || fail "the restore from the secondary differs from the primary's"
dump_keys "$EP" | cmp -s - "$WORK/from-primary.jsonl" || fail "the restore differs from the live etcd"

# the secondary goes away: the failed sync is an error and counted
stop_pid "$S3_PID"
writes 5
wait_for_log "$WORK/server.log" "level=error msg=\"secondary backup sync to S3:$S3_BUCKET/sec failed" 60
curl -sf "$H/metrics" >"$WORK/metrics2"
grep -E '^etcdbr_secondary_sync_failures_total [1-9]' "$WORK/metrics2" >/dev/null || fail "the failed sync was not counted"
kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" = 0 ] || fail "server exited $rc"
echo "PASS: secondary sync: 4 full snapshots and their deltas copied, secondary GC kept 2 of ours and the foreign objects, restores equal at revision $REV, failure logged and counted"
