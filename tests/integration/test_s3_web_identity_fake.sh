#!/usr/bin/env bash
# S3 web identity (roleARN + token, as the Go tool reads them, and the SDK's AWS_ROLE_ARN +
# AWS_WEB_IDENTITY_TOKEN_FILE) against a scripted FAKE STS (tests/servers/fake_sts.py: no STS
# emulator runs here) that checks the AssumeRoleWithWebIdentity form and hands out s3rver's keys
# with a session token; s3rver verifies every SigV4 signature made with them.
# 1. the round trip through S3 with keys that expire every few seconds: renewed, exact;
# 2. the token file rotated under a running snapshotter: the renewal sends the new token, deltas
#    go on; 3. the directory form and the SDK environment; 4. a rejected token: a clear error
#    naming STS's code, exit 1, the token never printed.
source "$(dirname "$0")/lib.sh"
make_workdir
start_s3rver webid
ROLE=arn:aws:iam::123456789012:role/etcd-backup
TOKEN=$WORK/token
ACCEPTED=$WORK/accepted
printf 'eyJhbGciOiJSUzI1NiJ9.token-one.sig' >"$TOKEN"
printf 'eyJhbGciOiJSUzI1NiJ9.token-one.sig\n' >"$ACCEPTED"
STS_LOG=$WORK/sts.log
python3 "$ETCDBR_SOURCE_DIR/tests/servers/fake_sts.py" --port-file "$WORK/sts.port" --log "$STS_LOG" \
    --role-arn "$ROLE" --accepted "$ACCEPTED" --access-key "$S3_ACCESS_KEY" \
    --secret-key "$S3_SECRET_KEY" --valid-seconds 303 >"$WORK/sts.out" 2>&1 &
PIDS+=($!)
for i in $(seq 1 100); do [ -s "$WORK/sts.port" ] && break; sleep 0.05; done
[ -s "$WORK/sts.port" ] || fail "fake STS did not start: $(cat "$WORK/sts.out")"
export AWS_ENDPOINT_URL_STS=http://127.0.0.1:$(cat "$WORK/sts.port")/
printf '{"region":"us-east-1","roleARN":"%s","tokenPath":"%s","s3ForcePathStyle":true}\n' "$ROLE" "$TOKEN" >"$WORK/creds.json"
export AWS_APPLICATION_CREDENTIALS_JSON=$WORK/creds.json
FLAGS=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-endpoint-override="$S3_ENDPOINT")

# 1. keys valid for 303 s are renewed 300 s before expiry: every ~3 s during the round trip
store_round_trip webid "${FLAGS[@]}" --store-prefix=rt
n=$(grep -c "^ok 1" "$STS_LOG" || true)
[ "$n" -ge 3 ] || fail "expected the keys to be renewed during the round trip, STS saw $n calls"
grep -q "temporary credentials for role $ROLE" "$WORK/rt-webid/snap.log" || fail "the renewal is not logged"
echo "1. round trip with web identity: $n AssumeRoleWithWebIdentity calls"

# 2. rotation of the token under a running snapshotter
start_etcd rot "$WORK/rot.etcd"
for i in $(seq 1 10); do ectl put "/a/$i" "v$i" >/dev/null; done
"$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" "${FLAGS[@]}" --store-prefix=rot \
    --snapstore-temp-directory="$WORK/snaptmp" --schedule='0 0 1 1 *' \
    --garbage-collection-period=0s --delta-snapshot-period=1s >"$WORK/rot.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_for_log "$WORK/rot.log" "full snapshot Full-" 60
# the old token is refused now (line 1 no longer matches it); the new one is line 2
printf 'revoked\neyJhbGciOiJSUzI1NiJ9.token-two.sig\n' >"$WORK/accepted.new"
mv "$WORK/accepted.new" "$ACCEPTED"
printf 'eyJhbGciOiJSUzI1NiJ9.token-two.sig' >"$TOKEN.new"
mv "$TOKEN.new" "$TOKEN"
sleep 0.5 # a renewal that read the old token before the rename has answered
n0=$(wc -l <"$STS_LOG")
sleep 3.5 # whatever keys the snapshotter holds are due for renewal now
for i in $(seq 1 10); do ectl put "/b/$i" "v$i" >/dev/null; done
want=$(current_revision "$ETCD_EP")
for i in $(seq 1 300); do
    grep -q "delta snapshot Incr-[0-9]*-0*$want-.* stored" "$WORK/rot.log" && break
    sleep 0.1
done
grep -q "delta snapshot Incr-[0-9]*-0*$want-.* stored" "$WORK/rot.log" ||
    fail "no delta up to revision $want after the rotation: $(tail -3 "$WORK/rot.log")"
stop_snapshotter
after=$(tail -n +"$((n0 + 1))" "$STS_LOG")
grep -q "^ok 2" <<<"$after" || fail "no renewal with the rotated token: $after"
if grep -q "^error\|^ok 1" <<<"$after"; then fail "the old token was sent after the rotation: $after"; fi
echo "2. token rotated: $(grep -c '^ok 2' <<<"$after") renewals with the new token, deltas up to revision $want"

# 3. the directory form (files roleARN, region, s3ForcePathStyle; the token is its file "token")
#    and the SDK's environment
mkdir -p "$WORK/creds-dir"
printf '%s' "$ROLE" >"$WORK/creds-dir/roleARN"
printf 'us-east-1' >"$WORK/creds-dir/region"
printf 'true' >"$WORK/creds-dir/s3ForcePathStyle"
cp "$TOKEN" "$WORK/creds-dir/token"
TOOL=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/store_contract
before=$(grep -c '^ok 2' "$STS_LOG")
env -u AWS_APPLICATION_CREDENTIALS_JSON AWS_APPLICATION_CREDENTIALS="$WORK/creds-dir" ETCDBR_CONTRACT_SKIP_XML_SPECIAL=1 \
    "$TOOL" --provider S3 --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT" --prefix dir --list-count 3 \
    --parallel 1 >"$WORK/dir.log" 2>&1 || { tail -5 "$WORK/dir.log"; fail "contract with a web-identity credentials directory"; }
env -u AWS_APPLICATION_CREDENTIALS_JSON AWS_ROLE_ARN="$ROLE" AWS_WEB_IDENTITY_TOKEN_FILE="$TOKEN" AWS_REGION=us-east-1 \
    ETCDBR_CONTRACT_SKIP_XML_SPECIAL=1 "$TOOL" --provider S3 --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT" \
    --prefix env --list-count 3 --parallel 1 >"$WORK/env.log" 2>&1 ||
    { tail -5 "$WORK/env.log"; fail "contract with AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE"; }
[ "$(grep -c '^ok 2' "$STS_LOG")" -ge $((before + 2)) ] || fail "the directory form or the environment did not assume the role"
echo "3. the directory form and AWS_ROLE_ARN/AWS_WEB_IDENTITY_TOKEN_FILE work"

# 4. a token STS refuses
printf 'eyJhbGciOiJSUzI1NiJ9.stolen-token-xyz' >"$TOKEN"
rc=0
"$TOOL" --provider S3 --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT" --prefix bad >"$WORK/bad.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/bad.log"; fail "a refused token: exit $rc, want 1"; }
grep -q "AssumeRoleWithWebIdentity for role $ROLE.*HTTP 400: InvalidIdentityToken" "$WORK/bad.log" ||
    { cat "$WORK/bad.log"; fail "a refused token: no clear error"; }
if grep -q "stolen-token-xyz" "$WORK/bad.log"; then fail "the token leaked into the output"; fi
echo "4. refused token: $(grep -o 'HTTP 400: InvalidIdentityToken[^"]*' "$WORK/bad.log" | head -1 | cut -c1-80)"
echo "PASS: S3 web identity (fake STS)"
