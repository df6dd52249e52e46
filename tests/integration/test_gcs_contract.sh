#!/usr/bin/env bash
# The store contract against the GCS driver on fake-gcs-server (scripts/build-fake-gcs.sh), an
# http:// endpoint, so no token is sent (the Go tool's emulator mode): the shared suite
# (tests/tools/store_contract.c) listing in pages of 7 and with chunks of 64 KiB (the 3.3-chunk
# object is composed from chunk objects), again with every chunk folded into an intermediate
# composite (ETCDBR_GCS_COMPOSE_BATCH=1, the path of objects over 31 chunks); the GCS checks of
# tests/tools/gcs_contract.c (no replace, chunk-shaped keys, abort in flight); no chunk object is
# left in the bucket afterwards; chunk-shaped objects of a killed upload are never listed; a
# missing bucket is a clear error from etcdbrctl; an external_account file with a URL source is
# refused as unsupported; the endpoint from the deprecated storageAPIEndpoint file next to the key; chunk
# objects of a finished upload are deleted by a listing.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
for t in store_contract gcs_contract; do [ -x "$BUILD/$t" ] || fail "$BUILD/$t not built"; done
make_workdir
start_fake_gcs etcdbr-contract
unset GOOGLE_APPLICATION_CREDENTIALS

ETCDBR_GCS_LIST_PAGE_SIZE=7 "$BUILD/store_contract" --provider GCS --container "$GCS_BUCKET" \
    --endpoint "$GCS_ENDPOINT" --prefix "some/prefix" --list-count 25 --parallel 3 \
    --min-chunk 65536 >"$WORK/c1.log" 2>&1 || { cat "$WORK/c1.log"; fail "store contract on GCS (fake-gcs-server)"; }
cat "$WORK/c1.log"
ETCDBR_GCS_COMPOSE_BATCH=1 ETCDBR_GCS_LIST_PAGE_SIZE=2 "$BUILD/store_contract" --provider GCS \
    --container "$GCS_BUCKET" --endpoint "$GCS_ENDPOINT" --list-count 5 --parallel 2 \
    --min-chunk 65536 >"$WORK/c2.log" 2>&1 || { cat "$WORK/c2.log"; fail "store contract with folded intermediates"; }
"$BUILD/gcs_contract" "$GCS_ENDPOINT" "$GCS_BUCKET" || fail "gcs_contract failed"
left=$(gcs_object_names)
[ -z "$left" ] || fail "objects left in the bucket after the contract runs: $left"
echo "ok nothing left in the bucket (chunks and intermediates deleted)"

# the endpoint from storageAPIEndpoint next to the (unused: emulator) credentials path
mkdir -p "$WORK/sa"
printf '%s\n' "$GCS_ENDPOINT" >"$WORK/sa/storageAPIEndpoint"
GOOGLE_APPLICATION_CREDENTIALS=$WORK/sa/key.json "$BUILD/store_contract" --provider GCS \
    --container "$GCS_BUCKET" --list-count 2 --parallel 1 --min-chunk 65536 >"$WORK/c3.log" 2>&1 ||
    { cat "$WORK/c3.log"; fail "endpoint from the storageAPIEndpoint file"; }
echo "ok endpoint from the storageAPIEndpoint file"

# chunk objects of an upload that was killed are not snapshots: a restore ignores them (one
# that took them for a full snapshot at revision 999 would fail on their bytes)
put_obj() {
    curl -sf -o /dev/null -X POST -H 'Content-Type: application/octet-stream' --data-binary "$2" \
        "$GCS_ENDPOINT/upload/storage/v1/b/$GCS_BUCKET/o?uploadType=media&name=$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$1")" ||
        fail "upload $1"
}
put_obj "etcd-main/v2/Full-00000000-00000999-1700000000.gz/0000000001" "not a snapshot"
put_obj "etcd-main/v2/Full-00000000-00000999-1700000000.gz/1000000001" "not a snapshot either"
set +e
"$ETCDBR_BIN" restore --storage-provider=GCS --store-container="$GCS_BUCKET" --store-prefix=etcd-main \
    --store-endpoint-override="$GCS_ENDPOINT" --data-dir="$WORK/r.etcd" \
    --restoration-temp-snapshots-dir="$WORK/r.tmp" >"$WORK/chunks.log" 2>&1
rc=$?
set -e
grep -q "0000000001\|Full-00000000-00000999" "$WORK/chunks.log" && { cat "$WORK/chunks.log"; fail "a chunk object was taken for a snapshot"; }
[ -d "$WORK/r.etcd/member" ] && fail "restore made a data dir from chunk objects"
echo "ok chunk objects of a killed upload are not snapshots (restore rc=$rc: $(tail -1 "$WORK/chunks.log"))"

# chunks of a finished upload (the object itself exists: the Go tool leaves them for its GC,
# docs/go-tool.md §6.1): a restore's listing deletes nothing; our GC, once it adopted the Go tool's
# backups, deletes them; chunks of an upload that never finished are only ignored
# the snapshotter continues (adopts) an untagged chain only once it proved it is its etcd's
# (docs/snapshot.md, the identity proof): the full snapshots are a real one of this etcd at
# revision 5
start_etcd sweep "$WORK/sweep.etcd"
for i in $(seq 1 4); do ectl put "/k/$i" "v$i" >/dev/null; done
ectl snapshot save "$WORK/sweep5.db" >/dev/null 2>&1
gzip -c "$WORK/sweep5.db" >"$WORK/sweep5.db.gz"
full=sweep/v2/Full-00000000-00000005-1700000000.gz
put_obj "$full" "@$WORK/sweep5.db.gz"
put_obj "$full.final" "@$WORK/sweep5.db.gz" # a name sorting between the object and its chunks
put_obj "$full/0000000001" "chunk 1"
put_obj "$full/0000000002" "chunk 2"
put_obj "sweep/v2/Full-00000000-00000009-1700000100.gz/0000000001" "chunk of a killed upload"
all="$full $full.final $full/0000000001 $full/0000000002 sweep/v2/Full-00000000-00000009-1700000100.gz/0000000001 "
set +e
"$ETCDBR_BIN" restore --storage-provider=GCS --store-container="$GCS_BUCKET" --store-prefix=sweep \
    --store-endpoint-override="$GCS_ENDPOINT" --data-dir="$WORK/s.etcd" \
    --restoration-temp-snapshots-dir="$WORK/s.tmp" >"$WORK/sweep.log" 2>&1
set -e
left=$(gcs_object_names sweep/ | tr '\n' ' ')
[ "$left" = "$all" ] || { cat "$WORK/sweep.log"; fail "a restore deleted objects: the bucket holds $left"; }
for i in $(seq 5 12); do ectl put "/k/$i" "v$i" >/dev/null; done # ahead of the store: adopted
"$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=GCS --store-container="$GCS_BUCKET" \
    --store-prefix=sweep --store-endpoint-override="$GCS_ENDPOINT" --snapstore-temp-directory="$WORK/sw.tmp" \
    --schedule='0 0 1 1 *' --delta-snapshot-period=0s --garbage-collection-period=2s >"$WORK/gc.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$WORK/gc.log" "deleted 2 chunk objects of finished uploads" 30
stop_snapshotter
stop_pid "$ETCD_PID"
left=$(gcs_object_names sweep/ | grep -v "/etcdbr/history/\|Full-00000000-0000001" | tr '\n' ' ')
# (GC also collected the two adopted old full snapshots: the new one replaces them)
[ "$left" = "sweep/v2/Full-00000000-00000009-1700000100.gz/0000000001 " ] ||
    { cat "$WORK/gc.log"; fail "after GC the bucket holds: $left"; }
echo "ok chunk objects of a finished upload: kept by a restore, deleted by GC; those of a killed one kept"

# a missing bucket: a clear error naming it, from the command
set +e
"$ETCDBR_BIN" restore --storage-provider=GCS --store-container=no-such-bucket --store-prefix=etcd-main \
    --store-endpoint-override="$GCS_ENDPOINT" --data-dir="$WORK/m.etcd" \
    --restoration-temp-snapshots-dir="$WORK/m.tmp" >"$WORK/missing.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail "restore from a missing bucket succeeded"
grep -q "bucket no-such-bucket does not exist" "$WORK/missing.log" || { cat "$WORK/missing.log"; fail "no clear message for a missing bucket"; }
echo "ok missing bucket: $(grep -o 'GCS: bucket no-such-bucket does not exist[^"]*' "$WORK/missing.log" | head -1)"

# workload identity with a URL-sourced subject token (only token files are read) is refused as
# not supported before any request, with https (auth on)
printf '{"type":"external_account","audience":"x","subject_token_type":"urn:ietf:params:oauth:token-type:jwt","token_url":"https://sts.googleapis.com/v1/token","credential_source":{"url":"http://169.254.169.254/token"}}' >"$WORK/ext.json"
set +e
GOOGLE_APPLICATION_CREDENTIALS=$WORK/ext.json "$ETCDBR_BIN" restore --storage-provider=GCS \
    --store-container="$GCS_BUCKET" --data-dir="$WORK/e.etcd" \
    --restoration-temp-snapshots-dir="$WORK/e.tmp" >"$WORK/ext.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail "an external_account file with a URL source was accepted"
grep -q "credential_source.url is not supported" "$WORK/ext.log" || { cat "$WORK/ext.log"; fail "no clear message for a URL-sourced external_account"; }
echo "ok external_account with credential_source.url refused: not supported"
echo "PASS: store contract on GCS (fake-gcs-server)"
