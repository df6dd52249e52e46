#!/usr/bin/env bash
# The store-driver contract (tests/tools/store_contract.c) against Local and against S3 on a real
# S3 server (@20minutes/s3rver, which verifies SigV4), listing in pages of 7 so continuation
# tokens are exercised; then a wrong secret must fail with a clear 403.
source "$(dirname "$0")/lib.sh"
make_workdir
TOOL=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}/store_contract
[ -x "$TOOL" ] || fail "store_contract not built at $TOOL"

"$TOOL" --provider Local --container "$WORK/local" --list-count 25 || fail "contract on Local"
[ -z "$(ls -A "$WORK/local")" ] || fail "Local contract left objects: $(ls -R "$WORK/local")"

start_s3rver contract-bucket
ETCDBR_S3_LIST_PAGE_SIZE=7 ETCDBR_CONTRACT_SKIP_XML_SPECIAL=1 AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON \
    "$TOOL" --provider S3 --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT" --prefix "some/prefix" \
    --list-count 25 --parallel 3 || fail "contract on S3 (s3rver)"

# credentials from a directory (one file per field, as a Kubernetes secret volume)
mkdir -p "$WORK/creds-dir"
printf 'us-east-1' >"$WORK/creds-dir/region"
printf '%s' "$S3_ACCESS_KEY" >"$WORK/creds-dir/accessKeyID"
printf '%s' "$S3_SECRET_KEY" >"$WORK/creds-dir/secretAccessKey"
ETCDBR_S3_LIST_PAGE_SIZE=3 ETCDBR_CONTRACT_SKIP_XML_SPECIAL=1 AWS_APPLICATION_CREDENTIALS=$WORK/creds-dir \
    "$TOOL" --provider S3 --container "$S3_BUCKET" --endpoint "$S3_ENDPOINT" --list-count 8 \
    --parallel 1 >"$WORK/dir.log" 2>&1 || { cat "$WORK/dir.log"; fail "contract with a credentials directory"; }

# a wrong secret: a clear 403 naming the method and URL, and never the secret
printf '{"region":"us-east-1","accessKeyID":"%s","secretAccessKey":"wrong-secret-xyz"}' "$S3_ACCESS_KEY" >"$WORK/bad.json"
rc=0
AWS_APPLICATION_CREDENTIALS_JSON=$WORK/bad.json "$TOOL" --provider S3 --container "$S3_BUCKET" \
    --endpoint "$S3_ENDPOINT" >"$WORK/bad.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/bad.log"; fail "wrong secret: exit $rc, want 1"; }
grep -q "HTTP 403: SignatureDoesNotMatch" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "wrong secret: no clear 403"; }
grep -q "S3 refused the credentials for bucket $S3_BUCKET" "$WORK/bad.log" ||
    { cat "$WORK/bad.log"; fail "wrong secret: the error does not name the provider and bucket"; }
grep -q "PUT $S3_ENDPOINT/$S3_BUCKET/" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "wrong secret: the error does not name the request"; }
if grep -q "wrong-secret-xyz" "$WORK/bad.log"; then fail "the secret leaked into the output"; fi
echo "wrong secret: $(grep -o 'HTTP 403[^(]*' "$WORK/bad.log" | head -1)"

# a missing bucket is an error, not an empty store
rc=0
AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON "$TOOL" --provider S3 --container no-such-bucket \
    --endpoint "$S3_ENDPOINT" >"$WORK/nobucket.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/nobucket.log"; fail "missing bucket: exit $rc, want 1"; }
echo "store contract passed on Local and S3 (s3rver)"
