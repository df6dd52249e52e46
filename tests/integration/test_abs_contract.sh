#!/usr/bin/env bash
# The store contract against the Azure Blob driver on azurite 3.35.0 (SharedKey signatures are
# verified): the shared suite (tests/tools/store_contract.c, listing in pages of 7), then the
# ABS-specific checks of tests/tools/abs_contract.c (paging by 2, no replace, credentials
# rotated on disk, connection string, SAS tokens, a wrong key's 403, a missing container, the Store API).
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

# a SAS token instead of the key: in the credentials (sasToken) and from AZURE_STORAGE_SAS_TOKEN
printf '{"storageAccount":"%s","sasToken":"?%s"}' "$AZ_ACCOUNT" "$(az_account_sas)" >"$WORK/sas.json"
AZURE_APPLICATION_CREDENTIALS_JSON=$WORK/sas.json \
    "$BUILD/store_contract" --provider ABS --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT" \
    --list-count 3 --parallel 2 >"$WORK/sas.log" 2>&1 || { cat "$WORK/sas.log"; fail "contract with a SAS token"; }
if grep -q "sig=[^R]" "$WORK/sas.log"; then fail "the SAS signature leaked into the output"; fi
printf '%s' "$AZ_ACCOUNT" >"$WORK/creds-dir/storageAccount"
rm "$WORK/creds-dir/storageKey"
AZURE_APPLICATION_CREDENTIALS=$WORK/creds-dir AZURE_STORAGE_SAS_TOKEN=$(az_account_sas) \
    "$BUILD/store_contract" --provider ABS --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT" \
    --list-count 3 --parallel 1 >"$WORK/sas-env.log" 2>&1 || { cat "$WORK/sas-env.log"; fail "contract with AZURE_STORAGE_SAS_TOKEN"; }

"$BUILD/abs_contract" "$AZ_ENDPOINT" "$AZ_CONTAINER" "$AZ_CREDS_JSON" "$WORK" || fail "abs_contract failed"
echo "PASS: store contract on ABS (azurite)"
