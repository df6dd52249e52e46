#!/usr/bin/env bash
# The one-pass full snapshot (docs/snapshot.md, issue 18 item 4): etcd's stream goes through the
# trailer and db checks straight into the store's uncommitted object, with no staging file.
# (a) every etcd version: Local, uncompressed and gzip; no staging file is made, each object is
#     etcd's stream (db pages, then their SHA-256), named with the revision, and a restore is
#     exact;
# (b) SIGTERM mid-stream: the snapshot stops, nothing is stored, the store's temp file is gone;
# (c) S3 (s3rver): the full snapshot stored in one pass as a multipart upload of 5 MiB parts
#     restores exactly (HashKV); a store write failing mid-stream (every upload of part 3) aborts
#     the upload and stores nothing;
# (d) the staged fallback (forced with ETCDBR_FULL_SNAPSHOT_STAGED=1) stores the same revision.
source "$(dirname "$0")/lib.sh"
make_workdir
LOADGEN=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/etcd_loadgen
[ -x "$LOADGEN" ] || fail "etcd_loadgen not built next to etcdbrctl"
versions=$(etcd_versions)

# no_staging LOG TMPD: the log does not report the staged path and TMPD holds no staging file
no_staging() {
    if grep -q "staging it" "$1"; then fail "the full snapshot was staged: $(grep 'staging it' "$1")"; fi
    [ -z "$(find "$2" -name 'etcdbr-full-*' 2>/dev/null)" ] || fail "a staging file was left in $2"
}

hashkv() { etcdctl --endpoints="$1" --command-timeout=60s endpoint hashkv --rev="$2" -w json | jq -r '.[0].HashKV.hash'; }

# restore_exact LABEL [restore flags]: restores the store the flags name, compares revision with
# SRC_REV and the keys with $WORK/$LABEL.src.jsonl, or with SRC_HASHKV (HashKV at SRC_REV) when set
restore_exact() {
    local label=$1
    shift
    "$ETCDBR_BIN" restore "$@" --data-dir="$WORK/$label.restored" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$WORK/$label.rtmp" >"$WORK/$label.restore.log" 2>&1 ||
        fail "$label: restore failed: $(tail -3 "$WORK/$label.restore.log")"
    start_etcd "$label-restored" "$WORK/$label.restored"
    local rev h=""
    rev=$(current_revision "$ETCD_EP")
    if [ -n "${SRC_HASHKV:-}" ]; then h=$(hashkv "$ETCD_EP" "$SRC_REV"); else dump_keys "$ETCD_EP" >"$WORK/$label.restored.jsonl"; fi
    stop_pid "$ETCD_PID"
    [ "$rev" = "$SRC_REV" ] || fail "$label: revision $rev after restore, source $SRC_REV"
    if [ -n "${SRC_HASHKV:-}" ]; then
        [ "$h" = "$SRC_HASHKV" ] || fail "$label: HashKV $h after restore, source $SRC_HASHKV"
    else
        cmp -s "$WORK/$label.src.jsonl" "$WORK/$label.restored.jsonl" || fail "$label: keys differ after restore"
    fi
}

# (a)
for v in $versions; do
    use_etcd "$v"
    sub_workdir "etcd-$v"
    start_etcd "src-${v//./-}" "$WORK/src.etcd"
    SRC_EP=$ETCD_EP
    SRC_PID=$ETCD_PID
    "$LOADGEN" "$ETCD_EP" puts 3000 4000 /big/ 64 >/dev/null
    for i in $(seq 1 50); do ectl put "/small/$i" "v$i" >/dev/null; done
    ectl del /small/7 >/dev/null
    SRC_REV=$(current_revision "$ETCD_EP")
    for comp in none gzip; do
        flag=--compression-policy=gzip
        [ "$comp" = gzip ] || flag=--compress-snapshots=false
        start_snapshotter "$WORK/store-$comp" "$WORK/$comp.log" "$flag"
        wait_for_log "$WORK/$comp.log" "full snapshot Full-.* stored" 60
        stop_snapshotter
        no_staging "$WORK/$comp.log" "$WORK/snaptmp"
        [ -n "$(find "$WORK/store-$comp/v2" -name "Full-00000000-$(printf '%08d' "$SRC_REV")-*")" ] ||
            fail "etcd $v $comp: no full snapshot at revision $SRC_REV: $(ls "$WORK/store-$comp/v2")"
        [ -z "$(ls -A "$WORK/store-$comp/v2" | grep '^\.etcdbr-tmp-')" ] || fail "etcd $v $comp: temp file left"
    done
    # each object is etcd's stream as it came: db pages, then the SHA-256 of them
    gzip -dc "$(find "$WORK/store-gzip/v2" -name 'Full-*')" >"$WORK/gunzipped"
    for plain in "$(find "$WORK/store-none/v2" -name 'Full-*')" "$WORK/gunzipped"; do
        [ "$(($(stat -c %s "$plain") % 4096))" = 32 ] || fail "etcd $v: $plain is not db pages + trailer"
        [ "$(head -c -32 "$plain" | sha256sum | cut -d' ' -f1)" = "$(tail -c 32 "$plain" | od -An -tx1 | tr -d ' \n')" ] ||
            fail "etcd $v: the trailer of $plain is not the SHA-256 of its db"
    done
    dump_keys "$SRC_EP" >"$WORK/a.src.jsonl"
    stop_pid "$SRC_PID"
    restore_exact a --storage-provider=Local --store-container="$WORK/store-gzip"
    echo "etcd $v: one-pass full snapshot at revision $SRC_REV, stream and trailer as etcd sent them, gzip restores exactly"
done
WORK=$WORK_ROOT
use_etcd 3.4

# (b) SIGTERM while the stream flows: ~120 MB of random values
start_etcd big "$WORK/big.etcd"
"$LOADGEN" "$ETCD_EP" puts 30000 4000 /big/ 64 >/dev/null
start_snapshotter "$WORK/store-term" "$WORK/term.log" --compression-policy=gzip
for i in $(seq 1 500); do
    [ -n "$(find "$WORK/store-term/v2" -name '.etcdbr-tmp-*' -size +1M 2>/dev/null)" ] && break
    sleep 0.01
done
[ -n "$(find "$WORK/store-term/v2" -name '.etcdbr-tmp-*' 2>/dev/null)" ] ||
    fail "(b) the stream did not reach the store's temp file: $(tail -3 "$WORK/term.log")"
kill -TERM "$SNAP_PID"
rc=0
wait "$SNAP_PID" || rc=$?
grep -q "full snapshot stopped by a signal" "$WORK/term.log" ||
    fail "(b) the log does not say the full snapshot was stopped: $(grep level= "$WORK/term.log" | tail -3)"
[ "$rc" != 0 ] || fail "(b) the first full snapshot was stopped, yet exit 0"
[ -z "$(ls -A "$WORK/store-term/v2")" ] || fail "(b) the store holds something after the stop: $(ls -A "$WORK/store-term/v2")"
no_staging "$WORK/term.log" "$WORK/snaptmp"
echo "(b) SIGTERM mid-stream: stopped, exit $rc, nothing in the store"

# (c) S3, multipart, one pass; then a part that always fails
BIG_EP=$ETCD_EP
start_s3rver onepass
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
S3FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=one
    --store-endpoint-override="$S3_ENDPOINT" --min-chunk-size=5242880 --max-parallel-chunk-uploads=2)
"$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" "${S3FLAGS[@]}" --compress-snapshots=false \
    --snapstore-temp-directory="$WORK/s3tmp" --schedule='0 0 1 1 *' \
    --garbage-collection-period=0s >"$WORK/s3.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$WORK/s3.log" "full snapshot Full-.* stored" 120
stop_snapshotter
no_staging "$WORK/s3.log" "$WORK/s3tmp"
size=$(find "$WORK/s3rver/$S3_BUCKET/one/v2" -name 'Full-*._S3rver_object' -printf '%s')
[ "${size:-0}" -gt $((5 * 5242880)) ] || fail "(c) the full snapshot (${size:-no} bytes) is not several parts"
SRC_REV=$(current_revision "$ETCD_EP")
SRC_HASHKV=$(hashkv "$ETCD_EP" "$SRC_REV")
restore_exact c "${S3FLAGS[@]}"
echo "(c) S3: full snapshot of $size bytes stored in one pass in 5 MiB parts, restored exactly"

start_fault_proxy "$S3_ENDPOINT" --status PUT:500:100000:partNumber=3
export ETCDBR_STORE_RETRY_BASE_MS=20
rc=0
timeout 300 "$ETCDBR_BIN" snapshot --endpoints="$BIG_EP" --storage-provider=S3 \
    --store-container="$S3_BUCKET" --store-prefix=dead --store-endpoint-override="$PROXY_EP" \
    --min-chunk-size=5242880 --compress-snapshots=false --snapstore-temp-directory="$WORK/deadtmp" \
    --garbage-collection-period=0s >"$WORK/dead.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "(c) part 3 failing: exit $rc, want 1: $(tail -3 "$WORK/dead.log")"
grep -q "^req DELETE /$S3_BUCKET/dead/v2/Full-[^ ]*uploadId=" "$PROXY_LOG" ||
    fail "(c) the failed multipart upload was not aborted: $(grep -v '^status' "$PROXY_LOG" | tail -5)"
[ -z "$(find "$WORK/s3rver/$S3_BUCKET/dead" -name '*._S3rver_object' 2>/dev/null | grep -v '/etcdbr/history/[0-9a-f]*/record.json')" ] ||
    fail "(c) something was stored although part 3 failed: $(find "$WORK/s3rver/$S3_BUCKET/dead")"
no_staging "$WORK/dead.log" "$WORK/deadtmp"
echo "(c) a store write failing mid-stream: upload aborted, nothing stored"
# (d) the staged fallback still works (ETCDBR_FULL_SNAPSHOT_STAGED=1 forces it): same name
ETCD_EP=$BIG_EP
ETCDBR_FULL_SNAPSHOT_STAGED=1 start_snapshotter "$WORK/store-staged" "$WORK/staged.log" --compress-snapshots=false
wait_for_log "$WORK/staged.log" "full snapshot Full-.* stored" 120
stop_snapshotter
grep -q "staging it in" "$WORK/staged.log" || fail "(d) the staged path was not taken"
[ -n "$(find "$WORK/store-staged/v2" -name "Full-00000000-$(printf '%08d' "$SRC_REV")-*")" ] ||
    fail "(d) the staged full snapshot is not at revision $SRC_REV: $(ls "$WORK/store-staged/v2")"
[ -z "$(find "$WORK/snaptmp" -name 'etcdbr-full-*')" ] || fail "(d) the staging file was left"
echo "(d) staged fallback: stored at revision $SRC_REV"
echo "PASS: one-pass full snapshot"
