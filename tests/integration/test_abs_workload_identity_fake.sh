#!/usr/bin/env bash
# Azure workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID,
# AZURE_AUTHORITY_HOST) against a scripted FAKE Microsoft Entra ID token endpoint
# (tests/servers/wid_token_fake.py; nothing here emulates Entra ID). What is real: etcd,
# etcdbrctl, the driver, azurite holding the blobs. What is faked: the token endpoint (it checks
# tenant, client_id, scope, grant and assertion type, and that the assertion is the current
# token file content) and the bearer check of the Blob service: azurite checks Entra tokens only
# over https with its own token rules, so the fake stands in front of it, refuses requests
# without a token it issued (or with an expired one), and forwards the others to azurite with an
# account SAS in place of the token (signed here with openssl, lib.sh az_account_sas).
# 1. storageAccount only in the credentials file: the contract passes, one token for the run;
# 2. no credentials file, AZURE_STORAGE_ACCOUNT: the same;
# 3. precedence: a storageKey (or a SAS) in the credentials wins over workload identity;
# 4. 2 s tokens under a running snapshotter: fetched again after expiry; the token file rotated:
#    the next exchange sends its new content;
# 5. an assertion Entra refuses (HTTP 401 invalid_client) and an unknown tenant (HTTP 400): clear
#    errors naming the endpoint, never the token; a token file over the 64 KiB bound is refused.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
[ -x "$BUILD/store_contract" ] || fail "$BUILD/store_contract not built"
make_workdir
source "$ETCDBR_SOURCE_DIR/tests/integration/wid_lib.sh"
start_azurite etcdbr-wid
TENANT=72f988bf-86f1-41af-91ab-2d7cd011db47
CLIENT=0d6c6c3e-wid-test-client
start_wid_fake entra --upstream "$AZ_ENDPOINT" --upstream-query "$(az_account_sas)" \
    --tenant "$TENANT" --client-id "$CLIENT" --storage-kinds entra
export AZURE_FEDERATED_TOKEN_FILE=$TOKEN AZURE_CLIENT_ID=$CLIENT AZURE_TENANT_ID=$TENANT
export AZURE_AUTHORITY_HOST=$FAKE_EP/
printf '{"storageAccount":"%s"}\n' "$AZ_ACCOUNT" >"$WORK/account.json"
contract() { # contract LOG STORE_CONTRACT_ARGS...: the shared suite through the fake
    local log=$1
    shift
    "$BUILD/store_contract" --provider ABS --container "$AZ_CONTAINER" --endpoint "$FAKE_EP" "$@" \
        >"$log" 2>&1 || { tail -20 "$log"; cat "$FAKE_STATS"; fail "store contract: $log"; }
}

# 1. the account from the credentials file, tokens from workload identity
AZURE_APPLICATION_CREDENTIALS_JSON=$WORK/account.json contract "$WORK/c1.log" --prefix one \
    --list-count 9 --parallel 3
[ "$(st "s['grants']['entra']")" = 1 ] || fail "want one token for the run: $(cat "$FAKE_STATS")"
[ "$(st "s['storage_ok']['entra'] >= 30 and s['storage_refused'] == 0")" = True ] ||
    fail "blob requests without the token: $(cat "$FAKE_STATS")"
echo "ok workload identity: 1 token, $(st "s['storage_ok']['entra']") blob requests with it"

# 2. no credentials file: the account from AZURE_STORAGE_ACCOUNT
AZURE_STORAGE_ACCOUNT=$AZ_ACCOUNT contract "$WORK/c2.log" --prefix two --list-count 3 --parallel 2
[ "$(st "s['grants']['entra'] == 2 and s['storage_refused'] == 0")" = True ] ||
    fail "AZURE_STORAGE_ACCOUNT: $(cat "$FAKE_STATS")"
echo "ok the account from AZURE_STORAGE_ACCOUNT"

# 3. a storage key or a SAS comes first: straight to azurite, no token asked for
AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON "$BUILD/store_contract" --provider ABS \
    --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT" --prefix key --list-count 3 \
    --parallel 2 >"$WORK/c3.log" 2>&1 || { tail -20 "$WORK/c3.log"; fail "contract with a key and workload identity set"; }
AZURE_APPLICATION_CREDENTIALS_JSON=$WORK/account.json AZURE_STORAGE_SAS_TOKEN=$(az_account_sas) \
    "$BUILD/store_contract" --provider ABS --container "$AZ_CONTAINER" --endpoint "$AZ_ENDPOINT" \
    --prefix sas --list-count 3 --parallel 2 >"$WORK/c4.log" 2>&1 || { tail -20 "$WORK/c4.log"; fail "contract with a SAS and workload identity set"; }
[ "$(st "s['grants']['entra']")" = 2 ] || fail "a token was asked for although a key or SAS was given"
echo "ok precedence: a storage key or SAS is used before workload identity"

# 4. short tokens and a rotated token file under a running snapshotter
start_wid_fake rot --upstream "$AZ_ENDPOINT" --upstream-query "$(az_account_sas)" \
    --tenant "$TENANT" --client-id "$CLIENT" --storage-kinds entra --expires-in 2
AZURE_AUTHORITY_HOST=$FAKE_EP AZURE_APPLICATION_CREDENTIALS_JSON=$WORK/account.json \
    wid_rotation absrot entra --storage-provider=ABS --store-container="$AZ_CONTAINER" \
    --store-endpoint-override="$FAKE_EP"

# 5. refusals and a hostile token file, through etcdbrctl
restore_with() { # restore_with LOG: a restore that must fail
    local rc=0
    AZURE_AUTHORITY_HOST=$FAKE_EP AZURE_APPLICATION_CREDENTIALS_JSON=$WORK/account.json \
        "$ETCDBR_BIN" restore --storage-provider=ABS --store-container="$AZ_CONTAINER" \
        --store-prefix=absrot --store-endpoint-override="$FAKE_EP" --data-dir="$WORK/r.etcd" \
        --restoration-temp-snapshots-dir="$WORK/r.tmp" >"$1" 2>&1 || rc=$?
    [ "$rc" != 0 ] || fail "restore succeeded: $1"
}
printf 'stolen-assertion-xyz\n' >"$TOKEN"
restore_with "$WORK/refused.log"
grep -q "ABS workload identity: the token endpoint $FAKE_EP/$TENANT/oauth2/v2.0/token refused the exchange (HTTP 401): invalid_client: AADSTS700024" "$WORK/refused.log" ||
    { cat "$WORK/refused.log"; fail "no clear message for a refused assertion"; }
if grep -q "stolen-assertion-xyz" "$WORK/refused.log"; then fail "the assertion leaked into the output"; fi
echo "ok refused assertion: $(grep -o 'the token endpoint [^;]*' "$WORK/refused.log" | head -1 | cut -c1-160)"
printf 'subject-two\n' >"$TOKEN"
AZURE_TENANT_ID=contoso.example restore_with "$WORK/tenant.log"
grep -q "the token endpoint $FAKE_EP/contoso.example/oauth2/v2.0/token refused the exchange (HTTP 400): invalid_request: AADSTS90002" "$WORK/tenant.log" ||
    { cat "$WORK/tenant.log"; fail "no clear message for an unknown tenant"; }
echo "ok unknown tenant: HTTP 400 named"
head -c 70000 /dev/zero | tr '\0' 'a' >"$TOKEN"
restore_with "$WORK/big.log"
grep -q "token file $TOKEN is larger than 65536 bytes: refused" "$WORK/big.log" ||
    { cat "$WORK/big.log"; fail "an oversized token file was not refused clearly"; }
echo "ok a 70000-byte token file is refused"
echo "PASS: ABS workload identity (fake Entra ID token endpoint)"
