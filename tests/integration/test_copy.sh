#!/usr/bin/env bash
# etcdbrctl copy (issue 9 item 4; docs/go-tool.md §1.12, §10.3) between real stores on loopback:
#  1. a real etcd backed up into a Local store by a server in 4 sets (a full snapshot and deltas each),
#     the newest full a final one (".final"), writes from a logged seed;
#  2. copy Local -> S3 (s3rver): every object copied, none named .final, the history record and
#     tags copied; a rerun copies nothing;
#  3. copy S3 -> ABS (azurite) with the source's credentials and container only in SOURCE_
#     variables (the unprefixed ones point at nothing);
#  4. a restore from S3 and from ABS equals the restore from the Local source: every key, value,
#     revision field and the current revision;
#  5. --max-backups-to-copy=1 copies only the newest set (its full and its deltas);
#  6. an unreachable source: a clear error naming it, exit 1, nothing written;
#  7. encrypted backups (.enc names) are copied byte for byte by a copy given no keys, and restore
#     from the copy with the keys.
source "$(dirname "$0")/lib.sh"
make_workdir
SEED=${ETCDBR_TEST_SEED:-$(date +%s)}
echo "seed $SEED (ETCDBR_TEST_SEED=$SEED replays the writes)"
RANDOM=$SEED
export ETCDBR_STORE_RETRY_BASE_MS=10

start_s3rver copy-dst
start_azurite copy-abs
start_etcd src "$WORK/src.etcd"
EP=$ETCD_EP
SRC=$WORK/local-src

# writes N: seeded puts, overwrites and deletes
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

# the source's backups: a server with deltas every second; 3 more full snapshots by its HTTP API,
# the last one final (as at a member's shutdown: the Go tool's ".final" name)
PORT=$(free_port)
H=http://127.0.0.1:$PORT
cat >"$WORK/etcd.conf.yaml" <<YAML
name: src
data-dir: $WORK/src.etcd
initial-cluster: src=http://127.0.0.1:2380
YAML
writes 30
ETCD_CONF=$WORK/etcd.conf.yaml "$ETCDBR_BIN" server --endpoints="$EP" --storage-provider=Local \
    --store-container="$SRC" --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" \
    --data-dir="$WORK/src.etcd" --name=src --initial-cluster="src=http://127.0.0.1:2380" \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 --restoration-temp-snapshots-dir="$WORK/rt" \
    --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=2s \
    --garbage-collection-period=0s >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_for_log "$WORK/server.log" "full snapshot Full-" 60
for set in 1 2 3; do
    writes 15
    sleep 1.3
    writes 15
    sleep 1.3
    final=false
    [ "$set" = 3 ] && final=true
    curl -sf -X POST "$H/snapshot/full?final=$final" >/dev/null || fail "full snapshot $set refused"
done
writes 10
sleep 1.3
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "server exited $?"
! grep "level=error" "$WORK/server.log" || fail "the source's server logged errors"
SRC_REV=$(current_revision "$EP")
stop_pid "$ETCD_PID"
n_full=$(count_objects "$SRC" Full)
n_incr=$(count_objects "$SRC" Incr)
[ "$n_full" = 4 ] || fail "expected 4 full snapshots in the source, found $n_full"
[ "$n_incr" -ge 7 ] || fail "expected at least 7 deltas in the source, found $n_incr"
final_name=$(ls "$SRC/v2" | grep '^Full-.*\.final$') || fail "no final full snapshot in the source"
newest_full=${final_name%.final}
HIST=$(basename "$(dirname "$(ls -d "$SRC"/etcdbr/history/*/"$final_name")")")
n_src=$(ls "$SRC/v2" | wc -l)
echo "source: $n_full full snapshots, $n_incr deltas, history $HIST, revision $SRC_REV"

# restore_dump NAME RESTORE_STORE_FLAGS...: restores, starts etcd on it, dumps the keyspace to
# $WORK/NAME.jsonl and its revision to $WORK/NAME.rev
restore_dump() {
    local name=$1
    shift
    "$ETCDBR_BIN" restore "$@" --data-dir="$WORK/$name.etcd" --name="$name" \
        --initial-cluster="$name=http://127.0.0.1:2380" \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$WORK/$name.tmp" >"$WORK/$name-restore.log" 2>&1 ||
        { tail -20 "$WORK/$name-restore.log"; fail "restore $name failed"; }
    start_etcd "$name" "$WORK/$name.etcd"
    dump_keys "$ETCD_EP" >"$WORK/$name.jsonl"
    current_revision "$ETCD_EP" >"$WORK/$name.rev"
    stop_pid "$ETCD_PID"
}
restore_dump from-local --storage-provider=Local --store-container="$SRC"
[ "$(cat "$WORK/from-local.rev")" = "$SRC_REV" ] || fail "restore from the source: revision $(cat "$WORK/from-local.rev"), etcd had $SRC_REV"
[ -s "$WORK/from-local.jsonl" ] || fail "restore from the source is empty"

# --- 2. Local -> S3 ---------------------------------------------------------------------------
S3_FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=dst
    --store-endpoint-override="$S3_ENDPOINT")
S3_OBJ=$WORK/s3rver/$S3_BUCKET/dst
copy_to_s3() {
    AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON "$ETCDBR_BIN" copy "${S3_FLAGS[@]}" \
        --source-storage-provider=Local --source-store-container="$SRC" --source-store-prefix= \
        --max-parallel-copy-operations=3 "$@"
}
copy_to_s3 >"$WORK/copy1.log" 2>&1 || { cat "$WORK/copy1.log"; fail "copy Local -> S3 failed"; }
grep -q "copy done: 4 backups, $n_src objects copied" "$WORK/copy1.log" ||
    { cat "$WORK/copy1.log"; fail "copy Local -> S3 did not copy all $n_src objects"; }
n_dst=$(find "$S3_OBJ/v2" -name '*._S3rver_object' | wc -l)
[ "$n_dst" = "$n_src" ] || fail "S3 holds $n_dst objects, the source $n_src"
! find "$S3_OBJ/v2" -name '*.final*' | grep . || fail "a copy kept the .final suffix"
[ -f "$S3_OBJ/v2/$newest_full._S3rver_object" ] || fail "$newest_full.final not copied as $newest_full"
[ -f "$S3_OBJ/etcdbr/history/$HIST/record.json._S3rver_object" ] || fail "history record not copied"
n_tags=$(find "$S3_OBJ/etcdbr/history/$HIST" -name '*-*._S3rver_object' | wc -l)
[ "$n_tags" = "$n_src" ] || fail "S3 holds $n_tags history tags, expected $n_src"
[ -f "$S3_OBJ/etcdbr/history/$HIST/$newest_full._S3rver_object" ] || fail "the final full's tag was not copied under its new name"
# every copy has the source's bytes
for f in "$SRC"/v2/*; do
    b=$(basename "$f")
    cmp -s "$f" "$S3_OBJ/v2/${b%.final}._S3rver_object" || fail "$b differs in S3"
done
# a rerun copies nothing and replaces nothing
copy_to_s3 >"$WORK/copy2.log" 2>&1 || { cat "$WORK/copy2.log"; fail "second copy failed"; }
grep -q "copy done: 4 backups, 0 objects copied" "$WORK/copy2.log" || { cat "$WORK/copy2.log"; fail "rerun copied something"; }
grep -q "$n_src already there" "$WORK/copy2.log" || fail "rerun: not all objects seen as present"

# --- 3. S3 -> ABS, source credentials and container from SOURCE_ variables only -----------------
ABS_FLAGS=(--storage-provider=ABS --store-container="$AZ_CONTAINER" --store-prefix=abs
    --store-endpoint-override="$AZ_ENDPOINT")
env -u AWS_APPLICATION_CREDENTIALS_JSON -u AWS_APPLICATION_CREDENTIALS -u AWS_ACCESS_KEY_ID \
    SOURCE_AWS_APPLICATION_CREDENTIALS_JSON="$S3_CREDS_JSON" SOURCE_STORAGE_CONTAINER="$S3_BUCKET" \
    AZURE_APPLICATION_CREDENTIALS_JSON="$AZ_CREDS_JSON" \
    "$ETCDBR_BIN" copy "${ABS_FLAGS[@]}" --source-storage-provider=S3 --source-store-prefix=dst \
    --source-store-endpoint-override="$S3_ENDPOINT" >"$WORK/copy3.log" 2>&1 ||
    { cat "$WORK/copy3.log"; fail "copy S3 -> ABS failed"; }
grep -q "copy done: 4 backups, $n_src objects copied" "$WORK/copy3.log" || { cat "$WORK/copy3.log"; fail "copy S3 -> ABS incomplete"; }
grep -q "source store: S3:$S3_BUCKET" "$WORK/copy3.log" || fail "the source container was not taken from SOURCE_STORAGE_CONTAINER"
# without SOURCE_ credentials the source is refused, naming the prefixed variables
rc=0
env -u AWS_APPLICATION_CREDENTIALS_JSON -u AWS_APPLICATION_CREDENTIALS -u AWS_ACCESS_KEY_ID \
    -u AWS_SECRET_ACCESS_KEY AWS_APPLICATION_CREDENTIALS_JSON="$S3_CREDS_JSON" \
    AZURE_APPLICATION_CREDENTIALS_JSON="$AZ_CREDS_JSON" \
    "$ETCDBR_BIN" copy "${ABS_FLAGS[@]}" --source-storage-provider=S3 --source-store-prefix=dst \
    --source-store-container="$S3_BUCKET" --source-store-endpoint-override="$S3_ENDPOINT" \
    >"$WORK/copy-nocreds.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "a source without SOURCE_ credentials: exit $rc, expected 2"
grep -q "SOURCE_AWS_APPLICATION_CREDENTIALS_JSON" "$WORK/copy-nocreds.log" ||
    { cat "$WORK/copy-nocreds.log"; fail "the error does not name the SOURCE_ variable"; }

# --- 4. restores from the copies equal the restore from the source ----------------------------
AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON restore_dump from-s3 "${S3_FLAGS[@]}"
AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON restore_dump from-abs "${ABS_FLAGS[@]}"
for d in s3 abs; do
    [ "$(cat "$WORK/from-$d.rev")" = "$SRC_REV" ] || fail "restore from $d: revision $(cat "$WORK/from-$d.rev"), source $SRC_REV"
    cmp -s "$WORK/from-local.jsonl" "$WORK/from-$d.jsonl" || fail "restore from $d differs from the restore from the source"
done
grep -q "$newest_full" "$WORK/from-abs-restore.log" || fail "the ABS restore did not start from the newest full"

# --- 5. --max-backups-to-copy=1: only the newest set --------------------------------------------
DST1=$WORK/local-newest
"$ETCDBR_BIN" copy --storage-provider=Local --store-container="$DST1" \
    --source-storage-provider=Local --source-store-container="$SRC" --max-backups-to-copy=1 \
    --store-prefix=newest --source-store-prefix= \
    >"$WORK/copy4.log" 2>&1 || { cat "$WORK/copy4.log"; fail "copy --max-backups-to-copy=1 failed"; }
# the newest set: its full and every delta sorted after it (docs/go-tool.md §3.5: by last revision,
# ties by creation time), so a delta may start at or before the full's revision
full_last=$(echo "$newest_full" | cut -d- -f3)
full_ts=$(echo "$newest_full" | cut -d- -f4 | tr -cd 0-9)
expected=1
for o in $(ls "$SRC/v2" | grep '^Incr-'); do
    last=$(echo "$o" | cut -d- -f3)
    ts=$(echo "$o" | cut -d- -f4 | tr -cd 0-9)
    if [ "$((10#$last))" -gt "$((10#$full_last))" ] ||
        { [ "$((10#$last))" = "$((10#$full_last))" ] && [ "$ts" -ge "$full_ts" ]; }; then
        expected=$((expected + 1))
    fi
done
got=$(ls "$DST1/newest/v2" | wc -l)
[ "$(count_objects "$DST1/newest" Full)" = 1 ] || fail "--max-backups-to-copy=1 copied $(count_objects "$DST1/newest" Full) full snapshots"
[ "$got" = "$expected" ] || fail "--max-backups-to-copy=1 copied $got objects, the newest set has $expected"
[ -f "$DST1/newest/v2/$newest_full" ] || fail "--max-backups-to-copy=1 did not copy the newest full $newest_full"

# --- 6. an unreachable source ----------------------------------------------------------------
DEAD=$(free_port)
rc=0
SOURCE_AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON timeout 120 "$ETCDBR_BIN" copy \
    --storage-provider=Local --store-container="$WORK/local-unreached" \
    --source-storage-provider=S3 --source-store-container=nowhere \
    --source-store-endpoint-override="http://127.0.0.1:$DEAD" >"$WORK/copy5.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/copy5.log"; fail "unreachable source: exit $rc, expected 1"; }
grep "level=error" "$WORK/copy5.log" | grep "127.0.0.1:$DEAD" >/dev/null ||
    { cat "$WORK/copy5.log"; fail "the error does not name the unreachable source"; }
[ -z "$(ls "$WORK/local-unreached/v2" 2>/dev/null)" ] || fail "something was written for an unreachable source"
# --- 7. encrypted backups are copied as stored, without keys --------------------------------------
( umask 077; printf 'copytest %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" >"$WORK/keys" )
ENC=$WORK/enc-src
start_etcd enc "$WORK/enc.etcd"
writes 20
start_snapshotter "$ENC" "$WORK/enc-snap.log" --delta-snapshot-period=1s --encryption-key-file="$WORK/keys"
wait_for_log "$WORK/enc-snap.log" "full snapshot Full-" 60
writes 20
sleep 1.3
stop_snapshotter
ENC_REV=$(current_revision "$ETCD_EP")
dump_keys "$ETCD_EP" >"$WORK/enc-live.jsonl"
stop_pid "$ETCD_PID"
ls "$ENC/v2" | grep '^Full-.*\.enc' >/dev/null || fail "the source's full snapshot is not encrypted: $(ls "$ENC/v2")"
AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON "$ETCDBR_BIN" copy --storage-provider=S3 \
    --store-container="$S3_BUCKET" --store-prefix=enc --store-endpoint-override="$S3_ENDPOINT" \
    --source-storage-provider=Local --source-store-container="$ENC" --source-store-prefix= \
    >"$WORK/copy-enc.log" 2>&1 || { cat "$WORK/copy-enc.log"; fail "copy of encrypted backups failed"; }
for f in "$ENC"/v2/*; do
    cmp -s "$f" "$WORK/s3rver/$S3_BUCKET/enc/v2/$(basename "$f")._S3rver_object" ||
        fail "encrypted $(basename "$f") differs in S3"
done
AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON restore_dump enc-from-s3 --storage-provider=S3 \
    --store-container="$S3_BUCKET" --store-prefix=enc --store-endpoint-override="$S3_ENDPOINT" \
    --encryption-key-file="$WORK/keys"
[ "$(cat "$WORK/enc-from-s3.rev")" = "$ENC_REV" ] || fail "encrypted copy restored at revision $(cat "$WORK/enc-from-s3.rev"), etcd had $ENC_REV"
cmp -s "$WORK/enc-live.jsonl" "$WORK/enc-from-s3.jsonl" || fail "the restore of the encrypted copy differs from etcd"

echo "PASS: copy Local -> S3 -> ABS ($n_src objects, 4 sets), restores equal at revision $SRC_REV, rerun copies nothing, newest set only, unreachable source refused, encrypted objects copied as stored"
