#!/usr/bin/env bash
# Backups the Go tool wrote, restored from every object store: the objects of two stores written
# by the Go etcdbrctl (tests/fixtures: ebr043-gzip-bigvalues, v0.43.0 with ~1 MiB values, v2
# layout; seed-v1-mixed, the legacy v1/Backup-<time>/ layout) are put under a prefix of each store
# in the layout the Go tool's driver leaves there:
# - S3, Azure Blob, OSS: one object per snapshot under <prefix>/v2/ (or v1/...);
# - GCS: the composed object plus the chunk objects <key>/%010d the Go tool leaves behind;
# - Swift: segments <key>/%010d and a zero-byte manifest whose X-Object-Manifest is
#   "<container>/<key>" (no trailing slash, as gophercloud writes it).
# `etcdbrctl restore` from each must give the fixture's keyspace and revision, and must not
# change the store (a restore only reads).
source "$(dirname "$0")/lib.sh"
make_workdir
PUT=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/store_put
[ -x "$PUT" ] || fail "store_put not built at $PUT"
FIXTURES=(ebr043-gzip-bigvalues seed-v1-mixed)
files() { (cd "$ETCDBR_SOURCE_DIR/tests/fixtures/$1/store" && find . -type f | sed 's|^\./||' | LC_ALL=C sort); }

# restore_from LABEL FIXTURE STORE_FLAGS...: restore, compare with expected/
restore_from() {
    local label=$1 fx=$2 dir rev
    shift 2
    dir=$WORK/$label-$fx
    "$ETCDBR_BIN" restore "$@" --store-prefix="go/$fx" --data-dir="$dir.etcd" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$dir.tmp" >"$dir.log" 2>&1 || { tail -5 "$dir.log"; fail "$label $fx: restore failed"; }
    start_etcd "$label-$fx" "$dir.etcd"
    dump_keys "$ETCD_EP" >"$dir.jsonl"
    rev=$(current_revision "$ETCD_EP")
    stop_pid "$ETCD_PID"
    [ "$rev" = "$(cat "$ETCDBR_SOURCE_DIR/tests/fixtures/$fx/expected/revision")" ] || fail "$label $fx: revision $rev"
    cmp -s "$dir.jsonl" "$ETCDBR_SOURCE_DIR/tests/fixtures/$fx/expected/keys.jsonl" || fail "$label $fx: keyspace differs"
    echo "$label: $fx restored (revision $rev, $(wc -l <"$dir.jsonl") keys)"
}

# go_store LABEL PUT_ARGS...: puts both fixtures' objects with store_put, restores, and checks
# that the restore left the listing as it was; EXTRA (a function name, optional) adds objects
go_store() {
    local label=$1 fx f before after
    shift
    for fx in "${FIXTURES[@]}"; do
        while read -r f; do
            "$PUT" "$@" put "go/$fx/$f" "$ETCDBR_SOURCE_DIR/tests/fixtures/$fx/store/$f" ||
                fail "$label: putting go/$fx/$f"
            [ -n "${EXTRA:-}" ] && "$EXTRA" "go/$fx/$f" "$ETCDBR_SOURCE_DIR/tests/fixtures/$fx/store/$f"
        done < <(files "$fx")
    done
    before=$("$PUT" "$@" list go/ | LC_ALL=C sort)
    for fx in "${FIXTURES[@]}"; do restore_from "$label" "$fx" "${FLAGS[@]}"; done
    after=$("$PUT" "$@" list go/ | LC_ALL=C sort)
    [ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") | head; fail "$label: the restore changed the store"; }
}

start_s3rver golayout
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-endpoint-override="$S3_ENDPOINT")
go_store S3 --provider S3 --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT"

start_azurite golayout
export AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON
FLAGS=(--storage-provider=ABS --store-container="$AZ_CONTAINER" --store-endpoint-override="$AZ_ENDPOINT")
go_store ABS --provider ABS --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT"

start_fake_oss golayout
export ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
FLAGS=(--storage-provider=OSS --store-container="$OSS_BUCKET")
go_store OSS --provider OSS --container "$OSS_BUCKET"

# GCS: the Go tool composes <key> from chunk objects <key>/0000000001.. and leaves the chunks
start_fake_gcs golayout
unset GOOGLE_APPLICATION_CREDENTIALS
# store_put refuses chunk-shaped keys (the driver never writes one for a snapshot): upload them raw
gcs_raw_put() { curl -sf -X POST --data-binary @"$2" "$GCS_ENDPOINT/upload/storage/v1/b/$GCS_BUCKET/o?uploadType=media&name=$(printf '%s' "$1" | jq -sRr @uri)" >/dev/null; }
gcs_chunks() {
    local half=$(($(stat -c %s "$2") / 2 + 1))
    head -c "$half" "$2" >"$WORK/chunk1"
    tail -c +"$((half + 1))" "$2" >"$WORK/chunk2"
    gcs_raw_put "$1/0000000001" "$WORK/chunk1" || fail "GCS: raw chunk upload"
    gcs_raw_put "$1/0000000002" "$WORK/chunk2" || fail "GCS: raw chunk upload"
}
FLAGS=(--storage-provider=GCS --store-container="$GCS_BUCKET" --store-endpoint-override="$GCS_ENDPOINT")
EXTRA=gcs_chunks go_store GCS --provider GCS --container "$GCS_BUCKET" --endpoint "$GCS_ENDPOINT"
[ "$(gcs_object_names go/ | grep -c '/000000000[12]$')" -ge 4 ] || fail "GCS: the chunk objects are not in the bucket"

# Swift: gophercloud's layout, written with curl: segments, then a manifest without a trailing /
start_swift golayout
export OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON
swift_go_put() { # KEY FILE
    local half=$(($(stat -c %s "$2") / 2 + 1)) u="$SWIFT_STORAGE_URL/$SWIFT_CONTAINER"
    head -c "$half" "$2" >"$WORK/seg1"
    tail -c +"$((half + 1))" "$2" >"$WORK/seg2"
    curl -sf -X PUT -H "X-Auth-Token: $SWIFT_TOKEN" -T "$WORK/seg1" "$u/$1/0000000001" >/dev/null &&
        curl -sf -X PUT -H "X-Auth-Token: $SWIFT_TOKEN" -T "$WORK/seg2" "$u/$1/0000000002" >/dev/null &&
        curl -sf -X PUT -H "X-Auth-Token: $SWIFT_TOKEN" -H "X-Object-Manifest: $SWIFT_CONTAINER/$1" \
            --data-binary '' "$u/$1" >/dev/null || fail "Swift: gophercloud-style upload of $1"
}
for fx in "${FIXTURES[@]}"; do
    while read -r f; do swift_go_put "go/$fx/$f" "$ETCDBR_SOURCE_DIR/tests/fixtures/$fx/store/$f"; done < <(files "$fx")
done
FLAGS=(--storage-provider=Swift --store-container="$SWIFT_CONTAINER")
before=$(curl -sf -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$SWIFT_CONTAINER?prefix=go/")
for fx in "${FIXTURES[@]}"; do restore_from Swift "$fx" "${FLAGS[@]}"; done
after=$(curl -sf -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$SWIFT_CONTAINER?prefix=go/")
[ "$before" = "$after" ] || fail "Swift: the restore changed the container"
echo "PASS: the Go tool's layout restores from S3, ABS, OSS, GCS and Swift"
