#!/usr/bin/env bash
# The store contract against the Azure Blob driver on azurite 3.35.0 (SharedKey signatures are
# verified): the shared suite (tests/tools/store_contract.c, listing in pages of 7), then the
# ABS-specific checks of tests/tools/abs_contract.c (paging by 2, no replace, credentials
# rotated on disk, connection string, a wrong key's 403, a missing container, the Store API).
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
for t in store_contract abs_contract; do [ -x "$BUILD/$t" ] || fail "$BUILD/$t not built"; done
make_workdir
start_azurite etcdbr-contract

ETCDBR_ABS_LIST_PAGE_SIZE=7 AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON \
    "$BUILD/store_contract" --provider ABS --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT" \
    --prefix "some/prefix" --list-count 25 --parallel 3 || fail "store contract on ABS (azurite)"

# credentials from a directory (one file per field, as a Kubernetes secret volume)
mkdir -p "$WORK/creds-dir"
printf '%s' "$AZ_ACCOUNT" >"$WORK/creds-dir/storageAccount"
printf '%s\n' "$AZ_KEY" >"$WORK/creds-dir/storageKey"
ETCDBR_ABS_LIST_PAGE_SIZE=3 AZURE_APPLICATION_CREDENTIALS=$WORK/creds-dir \
    "$BUILD/store_contract" --provider ABS --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT" \
    --list-count 8 --parallel 1 >"$WORK/dir.log" 2>&1 || { cat "$WORK/dir.log"; fail "contract with a credentials directory"; }

"$BUILD/abs_contract" "$AZ_ENDPOINT" "$AZ_CONTAINER" "$AZ_CREDS_JSON" "$WORK" || fail "abs_contract failed"
echo "PASS: store contract on ABS (azurite)"
