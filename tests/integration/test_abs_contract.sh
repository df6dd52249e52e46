#!/usr/bin/env bash
# The store contract against the Azure Blob driver on azurite 3.35.0 (SharedKey signatures are
# verified): tests/tools/abs_contract.c through the driver and the Store API.
source "$(dirname "$0")/lib.sh"
TOOL=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/abs_contract
[ -x "$TOOL" ] || fail "$TOOL not built"
make_workdir
start_azurite etcdbr-contract
"$TOOL" "$AZ_ENDPOINT" "$AZ_CONTAINER" "$AZ_CREDS_JSON" "$WORK" || fail "abs_contract failed"
echo "PASS: ABS contract on azurite"
