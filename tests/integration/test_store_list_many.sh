#!/usr/bin/env bash
# More than 1,000 objects under one prefix, listed with each driver's own page size (no test
# knob: S3 asks 1,000 keys a page, so s3rver answers in two pages; GCS and Swift page by their
# defaults): the store contract (tests/tools/store_contract.c) with --list-count 1001 must list
# every object exactly once, on s3rver, azurite, fake-gcs-server, Debian's Swift and the scripted
# fake OSS server.
source "$(dirname "$0")/lib.sh"
make_workdir
TOOL=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/store_contract
[ -x "$TOOL" ] || fail "store_contract not built at $TOOL"
unset ETCDBR_S3_LIST_PAGE_SIZE ETCDBR_ABS_LIST_PAGE_SIZE ETCDBR_GCS_LIST_PAGE_SIZE \
    ETCDBR_SWIFT_LIST_PAGE_SIZE ETCDBR_OSS_LIST_PAGE_SIZE
N=1001
many() { # LABEL ARGS...: the contract with N objects to list
    local label=$1
    shift
    "$@" --list-count "$N" --parallel 4 >"$WORK/$label.log" 2>&1 || { tail -5 "$WORK/$label.log"; fail "$label: contract with $N objects"; }
    grep -q "^ok list of $N objects" "$WORK/$label.log" || fail "$label: the listing was not checked"
    echo "$label: $N objects listed"
}

start_s3rver many
ETCDBR_CONTRACT_SKIP_XML_SPECIAL=1 AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON \
    many S3 "$TOOL" --provider S3 --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT"
start_azurite many
AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON \
    many ABS "$TOOL" --provider ABS --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT"
start_fake_gcs many
(unset GOOGLE_APPLICATION_CREDENTIALS; many GCS "$TOOL" --provider GCS --container "$GCS_BUCKET" --endpoint "$GCS_ENDPOINT")
start_swift many
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON \
    many Swift "$TOOL" --provider Swift --container "$SWIFT_CONTAINER"
start_fake_oss many
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON many OSS "$TOOL" --provider OSS --container "$OSS_BUCKET"
echo "PASS: more than 1,000 objects listed on every object store"
