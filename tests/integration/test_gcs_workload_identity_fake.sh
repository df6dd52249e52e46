#!/usr/bin/env bash
# GCS workload identity federation and the metadata server against a scripted FAKE token
# endpoint (tests/servers/wid_token_fake.py; nothing here emulates Google's STS, IAM Credentials
# or the metadata server). What is real: etcd, etcdbrctl, the driver, fake-gcs-server holding the
# objects. What is faked: the token endpoints (they check the request fields as Google documents
# them) and the bearer check of the storage API: fake-gcs-server accepts any token or none, so
# the fake stands in front of it, refuses storage requests without a token it issued (or with an
# expired one) and forwards the others.
# 1. an external_account file (text token file, no impersonation): the contract passes, one STS
#    exchange for the whole run (cached), a devstorage scope, only STS tokens at storage;
# 2. impersonation (service_account_impersonation_url) and a json-format token file: STS with the
#    cloud-platform scope, then generateAccessToken; storage sees only the impersonated token;
# 3. the metadata server (no GOOGLE_APPLICATION_CREDENTIALS, GCE_METADATA_HOST at the fake);
# 4. 2 s tokens under a running snapshotter: fetched again after expiry; the token file rotated:
#    the next exchange sends its new content;
# 5. a subject token STS refuses (HTTP 400): a clear error naming the endpoint, never the token;
#    a token file over the 64 KiB bound is refused.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
[ -x "$BUILD/store_contract" ] || fail "$BUILD/store_contract not built"
make_workdir
source "$ETCDBR_SOURCE_DIR/tests/integration/wid_lib.sh"
start_fake_gcs etcdbr-wid
export ETCDBR_GCS_HTTP_AUTH=1 # the fake is plain http: send tokens anyway
AUD=//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/pool/providers/k8s
SA=backup@etcdbr-proj.iam.gserviceaccount.com

# ext_json OUT [extra JSON members]: an external_account file with token_url at the fake
ext_json() {
    local out=$1 extra=${2:-}
    printf '{"type":"external_account","audience":"%s","subject_token_type":"urn:ietf:params:oauth:token-type:jwt","token_url":"%s/v1/token","credential_source":{"file":"%s"}%s}\n' \
        "$AUD" "$FAKE_EP" "$TOKEN" "$extra" >"$out"
}
contract() { # contract LOG STORE_CONTRACT_ARGS...: the shared suite through the fake
    local log=$1
    shift
    "$BUILD/store_contract" --provider GCS --container "$GCS_BUCKET" --endpoint "$FAKE_EP" "$@" \
        >"$log" 2>&1 || { tail -20 "$log"; cat "$FAKE_STATS"; fail "store contract: $log"; }
}

# 1. external account, plain token file: one exchange, cached for the whole run
start_wid_fake ext --upstream "$GCS_ENDPOINT" --audience "$AUD" --storage-kinds sts
ext_json "$WORK/ext.json"
GOOGLE_APPLICATION_CREDENTIALS=$WORK/ext.json contract "$WORK/c1.log" --list-count 9 --parallel 3 --min-chunk 65536
[ "$(st "s['grants']['sts']")" = 1 ] || fail "want one STS exchange for the run: $(cat "$FAKE_STATS")"
[ "$(st "s['storage_ok']['sts'] >= 30 and s['storage_refused'] == 0")" = True ] ||
    fail "storage requests without the STS token: $(cat "$FAKE_STATS")"
[ "$(st "s['scopes']")" = "['https://www.googleapis.com/auth/devstorage.full_control']" ] ||
    fail "STS scope: $(st "s['scopes']")"
echo "ok external account: 1 exchange, $(st "s['storage_ok']['sts']") storage requests with its token"

# 2. impersonation, token file in json format
start_wid_fake imp --upstream "$GCS_ENDPOINT" --audience "$AUD" --storage-kinds imp
printf '{"id_token":"subject-one","other":"x"}' >"$WORK/token.json"
printf '{"type":"external_account","audience":"%s","subject_token_type":"urn:ietf:params:oauth:token-type:jwt","token_url":"%s/v1/token","credential_source":{"file":"%s","format":{"type":"json","subject_token_field_name":"id_token"}},"service_account_impersonation_url":"%s/v1/projects/-/serviceAccounts/%s:generateAccessToken","client_id":"ignored"}\n' \
    "$AUD" "$FAKE_EP" "$WORK/token.json" "$FAKE_EP" "$SA" >"$WORK/imp.json"
GOOGLE_APPLICATION_CREDENTIALS=$WORK/imp.json contract "$WORK/c2.log" --list-count 3 --parallel 2
[ "$(st "s['grants']['sts'] == 1 and s['grants']['imp'] == 1")" = True ] ||
    fail "want one STS exchange and one impersonation: $(cat "$FAKE_STATS")"
[ "$(st "s['storage_ok']['sts'] == 0 and s['storage_ok']['imp'] >= 10 and s['storage_refused'] == 0")" = True ] ||
    fail "storage requests without the impersonated token: $(cat "$FAKE_STATS")"
[ "$(st "s['scopes']")" = "['https://www.googleapis.com/auth/cloud-platform']" ] ||
    fail "STS scope when impersonating: $(st "s['scopes']")"
echo "ok impersonation: STS (cloud-platform) then generateAccessToken, $(st "s['storage_ok']['imp']") storage requests"

# 3. the metadata server
start_wid_fake md --upstream "$GCS_ENDPOINT" --storage-kinds md
(
    unset GOOGLE_APPLICATION_CREDENTIALS
    GCE_METADATA_HOST=${FAKE_EP#http://} contract "$WORK/c3.log" --list-count 3 --parallel 2
)
[ "$(st "s['grants']['md'] == 1 and s['storage_ok']['md'] >= 10 and s['storage_refused'] == 0")" = True ] ||
    fail "metadata server tokens: $(cat "$FAKE_STATS")"
echo "ok metadata server: 1 token, $(st "s['storage_ok']['md']") storage requests"

# 4. short tokens and a rotated token file under a running snapshotter
start_wid_fake rot --upstream "$GCS_ENDPOINT" --audience "$AUD" --storage-kinds sts --expires-in 2
ext_json "$WORK/rot.json"
GOOGLE_APPLICATION_CREDENTIALS=$WORK/rot.json wid_rotation gcsrot sts --storage-provider=GCS \
    --store-container="$GCS_BUCKET" --store-endpoint-override="$FAKE_EP"

# 5. refusals and a hostile token file, through etcdbrctl
restore_with() { # restore_with LOG CREDS: a restore that must fail
    local rc=0
    GOOGLE_APPLICATION_CREDENTIALS=$2 "$ETCDBR_BIN" restore --storage-provider=GCS \
        --store-container="$GCS_BUCKET" --store-prefix=gcsrot --store-endpoint-override="$FAKE_EP" \
        --data-dir="$WORK/r.etcd" --restoration-temp-snapshots-dir="$WORK/r.tmp" >"$1" 2>&1 || rc=$?
    [ "$rc" != 0 ] || fail "restore succeeded: $1"
}
printf 'stolen-subject-xyz\n' >"$TOKEN"
restore_with "$WORK/refused.log" "$WORK/rot.json"
grep -q "GCS workload identity: the token endpoint $FAKE_EP/v1/token refused the exchange (HTTP 400): invalid_grant" "$WORK/refused.log" ||
    { cat "$WORK/refused.log"; fail "no clear message for a refused subject token"; }
if grep -q "stolen-subject-xyz" "$WORK/refused.log"; then fail "the subject token leaked into the output"; fi
echo "ok refused: $(grep -o 'the token endpoint [^;]*' "$WORK/refused.log" | head -1 | cut -c1-160)"
head -c 70000 /dev/zero | tr '\0' 'a' >"$TOKEN"
restore_with "$WORK/big.log" "$WORK/rot.json"
grep -q "token file $TOKEN is larger than 65536 bytes: refused" "$WORK/big.log" ||
    { cat "$WORK/big.log"; fail "an oversized token file was not refused clearly"; }
echo "ok a 70000-byte token file is refused"
echo "PASS: GCS workload identity and metadata server (fake token endpoints)"
