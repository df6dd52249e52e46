#!/usr/bin/env bash
# The S3 driver against the strictest S3 server available here: Swift's s3api (Debian's Swift,
# tempauth; access key test:tester, secret testing, path style via --store-endpoint-override). It
# verifies SigV4 and the payload hash (x-amz-content-sha256), implements multipart uploads on SLO
# and their abort, and refuses conditional writes (If-None-Match: *) with 501, which the driver
# must survive. Checks: the shared store contract (listing in pages of 7); a 12 MiB object with
# 5 MiB parts really is a 3-part multipart upload (an SLO with 3 segments); an aborted multipart
# upload leaves no upload (GET ?uploads, signed here) and no part behind; a request signed here with
# a wrong payload hash is refused with 400 while the same one with the right hash succeeds.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
for t in store_contract swift_tool; do [ -x "$BUILD/$t" ] || fail "$BUILD/$t not built"; done
make_workdir
start_swift etcdbr-s3api
B=$SWIFT_CONTAINER
S3_CREDS=$WORK/s3-creds.json
printf '{"region":"us-east-1","accessKeyID":"%s","secretAccessKey":"%s","s3ForcePathStyle":true}\n' \
    "$SWIFT_USER" "$SWIFT_KEY" >"$S3_CREDS"
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS

ETCDBR_S3_LIST_PAGE_SIZE=7 "$BUILD/store_contract" --provider S3 --container "$B" \
    --endpoint "$SWIFT_ENDPOINT" --prefix "some/prefix" --list-count 25 --parallel 3 >"$WORK/contract.log" 2>&1 ||
    { cat "$WORK/contract.log"; fail "store contract on Swift's s3api"; }
cat "$WORK/contract.log"

# s3_signed METHOD PATH QUERY BODY_FILE PAYLOAD_HASH: a request signed here (SigV4 with openssl,
# independent of the driver) whose x-amz-content-sha256 is PAYLOAD_HASH, whatever the body; QUERY
# canonical already ("uploads=" or ""). Prints the HTTP status, the body goes to $WORK/s3.out.
hmac() { openssl dgst -sha256 -mac HMAC -macopt "$1" -binary | od -An -tx1 -v | tr -d ' \n'; }
s3_signed() {
    local method=$1 path=$2 query=$3 body=$4 hash=$5 date day host creq sts k
    date=$(date -u +%Y%m%dT%H%M%SZ)
    day=${date%%T*}
    host=${SWIFT_ENDPOINT#http://}
    creq=$(printf '%s\n%s\n%s\nhost:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n\nhost;x-amz-content-sha256;x-amz-date\n%s' \
        "$method" "$path" "$query" "$host" "$hash" "$date" "$hash")
    sts=$(printf 'AWS4-HMAC-SHA256\n%s\n%s/us-east-1/s3/aws4_request\n%s' "$date" "$day" \
        "$(printf '%s' "$creq" | sha256sum | cut -d' ' -f1)")
    k=$(printf '%s' "$day" | hmac "key:AWS4$SWIFT_KEY")
    k=$(printf 'us-east-1' | hmac "hexkey:$k")
    k=$(printf 's3' | hmac "hexkey:$k")
    k=$(printf 'aws4_request' | hmac "hexkey:$k")
    curl -s -o "$WORK/s3.out" -w '%{http_code}' -X "$method" --data-binary "@$body" \
        -H "x-amz-date: $date" -H "x-amz-content-sha256: $hash" -H "Content-Type:" \
        -H "Authorization: AWS4-HMAC-SHA256 Credential=$SWIFT_USER/$day/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=$(printf '%s' "$sts" | hmac "hexkey:$k")" \
        "$SWIFT_ENDPOINT$path${query:+?$query}"
}
empty_hash=$(printf '' | sha256sum | cut -d' ' -f1)
: >"$WORK/empty"

# the payload hash is verified: the same PUT signed with the hash of other bytes is refused
printf 'hello swift' >"$WORK/body"
code=$(s3_signed PUT "/$B/hash-check" "" "$WORK/body" "$(printf 'other bytes' | sha256sum | cut -d' ' -f1)")
[ "$code" = 400 ] || fail "a wrong payload hash got HTTP $code, want 400: $(cat "$WORK/s3.out")"
code=$(s3_signed PUT "/$B/hash-check" "" "$WORK/body" "$(sha256sum <"$WORK/body" | cut -d' ' -f1)")
[ "$code" = 200 ] || fail "the signed PUT with the right hash got HTTP $code: $(cat "$WORK/s3.out")"
code=$(s3_signed DELETE "/$B/hash-check" "" "$WORK/empty" "$empty_hash")
[ "$code" = 204 ] || fail "signed DELETE: HTTP $code"

export SWIFT_TOOL_PROVIDER=S3 SWIFT_TOOL_ENDPOINT=$SWIFT_ENDPOINT SWIFT_TOOL_MIN_CHUNK=5242880 SWIFT_TOOL_PARALLEL=2
T=$BUILD/swift_tool
size=$((12 * 1048576 + 4321))
"$T" "$B" put mp/v2/Full-00000000-00000042-1700000000.gz "$size" 5 || fail "multipart put"
[ "$("$T" "$B" sha mp/v2/Full-00000000-00000042-1700000000.gz 6000000)" = "$("$T" "$B" gen "$size" 5 6000000)" ] ||
    fail "multipart object read back (from inside part 2) differs"
# s3api stores a completed multipart upload as an SLO: its manifest lists the parts
curl -s -f -H "X-Auth-Token: $SWIFT_TOKEN" \
    "$SWIFT_STORAGE_URL/$B/mp/v2/Full-00000000-00000042-1700000000.gz?multipart-manifest=get&format=raw" \
    >"$WORK/slo.json" || fail "no SLO manifest: the object was not uploaded in parts"
parts=$(jq length "$WORK/slo.json")
[ "$parts" = 3 ] || fail "the multipart object has $parts parts, want 3: $(head -c 300 "$WORK/slo.json")"

# an aborted multipart upload leaves no upload and no part
"$T" "$B" abort mp/v2/aborted $((11 * 1048576)) 6 || fail "aborted write"
code=$(s3_signed GET "/$B" "uploads=" "$WORK/empty" "$empty_hash")
[ "$code" = 200 ] || fail "list multipart uploads: HTTP $code: $(cat "$WORK/s3.out")"
if grep -q "<Key>mp/v2/aborted</Key>" "$WORK/s3.out"; then fail "the aborted upload is still listed: $(cat "$WORK/s3.out")"; fi
grep -q "ListMultipartUploadsResult" "$WORK/s3.out" || fail "not an uploads listing: $(cat "$WORK/s3.out")"
left=$(curl -s -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$B+segments?prefix=mp/v2/aborted" || true)
[ -z "$left" ] || fail "parts of the aborted upload stayed: $left"
# the control: an upload started (signed here) and not aborted is listed, so the check above can fail
code=$(s3_signed POST "/$B/mp/v2/control" "uploads=" "$WORK/empty" "$empty_hash")
[ "$code" = 200 ] || fail "initiate multipart upload: HTTP $code: $(cat "$WORK/s3.out")"
upload_id=$(sed -n 's:.*<UploadId>\([^<]*\)</UploadId>.*:\1:p' "$WORK/s3.out")
[ -n "$upload_id" ] || fail "no UploadId: $(cat "$WORK/s3.out")"
code=$(s3_signed GET "/$B" "uploads=" "$WORK/empty" "$empty_hash")
grep -q "<Key>mp/v2/control</Key>" "$WORK/s3.out" || fail "an open upload is not listed (HTTP $code): $(cat "$WORK/s3.out")"
code=$(s3_signed DELETE "/$B/mp/v2/control" "uploadId=$upload_id" "$WORK/empty" "$empty_hash")
[ "$code" = 204 ] || fail "abort of the control upload: HTTP $code: $(cat "$WORK/s3.out")"
"$T" "$B" rm mp/v2/Full-00000000-00000042-1700000000.gz || fail "rm multipart object"
echo "PASS: S3 driver on Swift's s3api (contract, $parts-part upload, abort, payload hash verified)"
