#!/usr/bin/env bash
# The GCS service-account flow against a scripted FAKE token endpoint (gcs_auth_fake.py, python3
# stdlib + openssl) in front of fake-gcs-server, for what no emulator checks: an RSA key made
# here, a service-account JSON whose token_uri points at the fake; the fake verifies the RS256
# JWT (signature with the public key, iss, aud, scope, iat/exp) and then requires
# "Authorization: Bearer <its token>" on every storage request. Checks: the store contract passes
# with tokens that expire after 1 s (so the driver refreshes them: several grants, and every
# storage request the fake saw carried a token it issued); tokens revoked early (401) are replaced
# at once; the key file rotated under a live driver is re-read; etcdbrctl with a key that does not
# match the account fails with a clear message (token endpoint, account, invalid_grant) and no
# key material in the output; an expired token is never accepted.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
for t in store_contract gcs_contract; do [ -x "$BUILD/$t" ] || fail "$BUILD/$t not built"; done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || fail "python3 is needed for the fake token endpoint"
command -v openssl >/dev/null || fail "openssl is needed"
make_workdir
start_fake_gcs etcdbr-auth

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/key.pem" 2>/dev/null
openssl pkey -in "$WORK/key.pem" -pubout -out "$WORK/pub.pem"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/other.pem" 2>/dev/null
EMAIL=etcdbr-test@etcdbr-proj.iam.gserviceaccount.com

# start_auth_fake EXPIRES_IN [fake options]: the fake on a free port; sets FAKE_EP, FAKE_STATS
start_auth_fake() {
    local i exp=$1
    shift
    FAKE_STATS=$WORK/stats-$exp$#.json
    rm -f "$WORK/fake.port"
    "$PY" "$ETCDBR_SOURCE_DIR/tests/servers/gcs_auth_fake.py" --pubkey "$WORK/pub.pem" \
        --email "$EMAIL" --upstream "$GCS_ENDPOINT" --expires-in "$exp" "$@" \
        --port-file "$WORK/fake.port" --stats "$FAKE_STATS" >>"$WORK/fake.log" 2>&1 &
    PIDS+=($!)
    for i in $(seq 1 200); do
        [ -s "$WORK/fake.port" ] && break
        sleep 0.05
    done
    [ -s "$WORK/fake.port" ] || fail "the fake token endpoint did not start: $(cat "$WORK/fake.log")"
    FAKE_EP=http://127.0.0.1:$(cat "$WORK/fake.port")
}

# sa_json KEYFILE OUT: a service-account key file for $EMAIL with token_uri at the fake
sa_json() {
    "$PY" - "$1" "$FAKE_EP/token" "$EMAIL" >"$2" <<'PY'
import json, sys
key, uri, email = sys.argv[1:4]
print(json.dumps({"type": "service_account", "project_id": "etcdbr-proj",
                  "private_key_id": "0123456789abcdef", "private_key": open(key).read(),
                  "client_email": email, "client_id": "1234567890",
                  "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": uri,
                  "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
                  "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/x",
                  "universe_domain": "googleapis.com"}))
PY
}
stat_of() { "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$FAKE_STATS" "$1"; }

# 1. the contract through the fake with 1 s tokens: the driver must refresh them
export ETCDBR_GCS_HTTP_AUTH=1 # http:// endpoint, but send tokens (the fake is plain http)
start_auth_fake 1
sa_json "$WORK/key.pem" "$WORK/sa.json"
GOOGLE_APPLICATION_CREDENTIALS=$WORK/sa.json ETCDBR_GCS_LIST_PAGE_SIZE=4 "$BUILD/store_contract" \
    --provider GCS --container "$GCS_BUCKET" --endpoint "$FAKE_EP" --list-count 9 --parallel 3 \
    --min-chunk 65536 >"$WORK/contract.log" 2>&1 || { cat "$WORK/contract.log"; cat "$FAKE_STATS"; fail "store contract through the token fake"; }
sleep 1.2 # the last token expires: the next run starts with an expired one in no cache (new process)
GOOGLE_APPLICATION_CREDENTIALS=$WORK/sa.json "$BUILD/store_contract" --provider GCS \
    --container "$GCS_BUCKET" --endpoint "$FAKE_EP" --list-count 2 --parallel 1 \
    --min-chunk 65536 >>"$WORK/contract.log" 2>&1 || { cat "$WORK/contract.log"; fail "second contract run"; }
grants=$(stat_of grants)
ok=$(stat_of storage_ok)
refused=$(stat_of storage_refused)
expired=$(stat_of expired_seen)
[ "$(stat_of grants_refused)" = 0 ] || fail "the fake refused a JWT: $(stat_of refusals)"
[ "$grants" -ge 3 ] || fail "only $grants token grants for runs of several seconds with 1 s tokens: no refresh"
[ "$ok" -ge 50 ] || fail "only $ok authorized storage requests"
# a request may race the expiry by a few ms (then 401, a new token, the request again); those are
# the only refusals allowed
[ "$refused" = "$expired" ] || fail "$refused storage requests refused, $expired of them for an expired token: some had no token at all"
echo "ok contract with 1 s tokens: $grants grants, $ok authorized requests, $expired raced an expiry"

# 2. tokens revoked before they expire (every 7th storage request answered 401): the driver
#    drops the token, gets a new one and sends the request again
start_auth_fake 3600 --revoke-every 7
sa_json "$WORK/key.pem" "$WORK/sa-revoke.json"
GOOGLE_APPLICATION_CREDENTIALS=$WORK/sa-revoke.json "$BUILD/store_contract" --provider GCS \
    --container "$GCS_BUCKET" --endpoint "$FAKE_EP" --list-count 5 --parallel 2 \
    --min-chunk 65536 >"$WORK/revoke.log" 2>&1 || { cat "$WORK/revoke.log"; cat "$FAKE_STATS"; fail "store contract with revoked tokens"; }
revoked=$(stat_of revoked)
grants=$(stat_of grants)
[ "$revoked" -ge 5 ] || fail "only $revoked tokens revoked"
[ "$grants" = "$((revoked + 1))" ] || fail "$grants grants for $revoked revocations: a revoked token was not replaced at once"
echo "ok revoked tokens: $revoked revocations, $grants grants, the contract passed"

# 3. a key that does not belong to the account: a clear error from etcdbrctl, no key material
sa_json "$WORK/other.pem" "$WORK/wrong.json"
set +e
GOOGLE_APPLICATION_CREDENTIALS=$WORK/wrong.json "$ETCDBR_BIN" restore --storage-provider=GCS \
    --store-container="$GCS_BUCKET" --store-prefix=etcd-main --store-endpoint-override="$FAKE_EP" \
    --data-dir="$WORK/r.etcd" --restoration-temp-snapshots-dir="$WORK/r.tmp" >"$WORK/wrong.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail "restore with a wrong key succeeded"
grep -q "GCS bucket $GCS_BUCKET: the token endpoint .*/token refused the service account $EMAIL (HTTP 400)" "$WORK/wrong.log" ||
    { cat "$WORK/wrong.log"; fail "no clear message for a wrong key (naming the provider, bucket and account)"; }
grep -q "invalid_grant" "$WORK/wrong.log" || { cat "$WORK/wrong.log"; fail "the OAuth2 error is not named"; }
if grep -q "PRIVATE KEY\|ya29\.\|assertion=" "$WORK/wrong.log"; then fail "key or token material in the output"; fi
echo "ok wrong key: $(grep -o 'GCS: the token endpoint[^"]*' "$WORK/wrong.log" | head -1 | cut -c1-200)"

# 4. the key file rotated under a live driver (gcs_contract --rotate): re-read on change, an
#    unreadable file keeps the old key
start_auth_fake 3600
sa_json "$WORK/key.pem" "$WORK/sa-rotate.json"
GOOGLE_APPLICATION_CREDENTIALS=$WORK/sa-rotate.json "$BUILD/gcs_contract" "$FAKE_EP" "$GCS_BUCKET" \
    --rotate "$WORK/wrong.json" >"$WORK/rotate.log" 2>&1 || { cat "$WORK/rotate.log"; fail "credentials rotation"; }
grep -q "changed but cannot be read" "$WORK/rotate.log" || { cat "$WORK/rotate.log"; fail "no warning for an unreadable key file"; }
grep "^ok" "$WORK/rotate.log"

# 5. a storage request with an expired or unknown token is refused by the fake (the fake is
#    strict, so test 1 proves the driver refreshed)
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer ya29.fake-unknown' \
    "$FAKE_EP/storage/v1/b/$GCS_BUCKET/o")
[ "$code" = 401 ] || fail "the fake accepted an unknown token (HTTP $code)"
echo "PASS: GCS service-account JWT flow against the token fake"
