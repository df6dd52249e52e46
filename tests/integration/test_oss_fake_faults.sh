#!/usr/bin/env bash
# Failure paths of the OSS driver through the scripted fake OSS server (tests/tools/fake_oss.py,
# faults injected with --fault), each a single driver call by tests/tools/store_put:
#  1. a transient 500 on UploadPart of part 2 is retried by the retry layer: the save succeeds,
#     byte-exact, and the fake saw part 2 twice;
#  2. part 2 failing every time: the save FAILS (the Go tool reports success here when the abort
#     succeeds, docs/go-tool.md §15 item 11) with a message naming the part, the request and the
#     error code; the multipart upload is aborted: no object, no upload left (ListMultipartUploads);
#  3. a 503 on GetObject once: the read is retried and byte-exact;
#  4. a wrong accessKeySecret: 403 SignatureDoesNotMatch, the message names the method and URL
#     and says what to check, and holds neither the wrong nor the right secret;
#  5. the fake itself: a request signed here by openssl passes, the same with a Date 20 minutes
#     old gets 403 RequestTimeTooSkewed (so the driver's passing requests are really checked);
#  6. a server that ignores Range (--legacy-range: OSS without x-oss-range-behavior: standard):
#     reads from an offset inside and past the end still give the right bytes;
#  7. a WORM-protected object (--worm): remove gives ERR_IMMUTABLE, the object stays;
#  8. the endpoint override flag is ignored with a warning (the Go tool honours it for S3, GCS
#     and ABS only): the credentials' storageEndpoint is used;
# 8b. a download broken off mid-body resumes from the byte reached, byte-exact;
#  9. parts run in parallel, never more than --max-parallel-chunk-uploads at once;
# 10. case 2 under a real `etcdbrctl snapshot` against a real etcd: the full snapshot fails
#     loudly (non-zero exit, the error logged), nothing stored, no upload left.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
[ -x "$BUILD/store_put" ] || fail "$BUILD/store_put not built"
make_workdir
head -c $((12 * 1024 * 1024 + 4321)) /dev/urandom >"$WORK/data" # parts of 5 MiB, 5 MiB, 2 MiB
put() { "$BUILD/store_put" --provider OSS --container "$OSS_BUCKET" --min-chunk 5242880 --parallel 3 "$@"; }
export ALICLOUD_APPLICATION_CREDENTIALS_JSON

# 1. transient part failure
start_fake_oss faults --fault UploadPart:part=2,status=500,times=1
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
put put etcd/v2/Full-00000000-00000010-1700000000.gz "$WORK/data" 2>"$WORK/1.err" || {
    cat "$WORK/1.err"
    fail "1: a transient part failure was not retried"
}
put get etcd/v2/Full-00000000-00000010-1700000000.gz "$WORK/back" || fail "1: read back"
cmp -s "$WORK/data" "$WORK/back" || fail "1: read back differs"
[ "$(grep -c '^UploadPart PUT .*partNumber=2&.* -> 500 fault' "$OSS_LOG")" = 1 ] || fail "1: the fault did not fire once"
[ "$(grep -c '^UploadPart PUT .*partNumber=2&.* -> 200' "$OSS_LOG")" = 1 ] || fail "1: part 2 was not retried to success"
grep -q "retrying" "$WORK/1.err" || fail "1: the retry was not logged"
echo "ok 1: transient UploadPart 500 retried, object byte-exact"

# 2. persistent part failure: the save fails and the upload is aborted
start_fake_oss faults --fault UploadPart:part=2,status=500,times=always
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
key=etcd/v2/Full-00000000-00000020-1700000100.gz
if put put "$key" "$WORK/data" 2>"$WORK/2.err"; then fail "2: the save succeeded although part 2 always failed"; fi
err=$(grep "^store_put:" "$WORK/2.err") || { cat "$WORK/2.err"; fail "2: no error message"; }
for want in "upload part 2" "PUT $OSS_ENDPOINT/$OSS_BUCKET/$key?partNumber=2&uploadId=" \
    "HTTP 500" "InternalError" "the multipart upload was aborted"; do
    grep -qF "$want" <<<"$err" || fail "2: the error does not say \"$want\": $err"
done
[ "$(grep -c '^UploadPart PUT .*partNumber=2&.* -> 500 fault' "$OSS_LOG")" -ge 2 ] || fail "2: part 2 was not retried"
grep -q "^AbortMultipartUpload DELETE .* -> 204" "$OSS_LOG" || fail "2: the upload was not aborted"
if grep -q "^CompleteMultipartUpload" "$OSS_LOG"; then fail "2: a failed upload was completed"; fi
if put stat "$key" >/dev/null 2>&1; then fail "2: the object exists after a failed save"; fi
uploads=$(oss_curl GET "" uploads)
[ "$(cat "$WORK/oss-curl.status")" = 200 ] || fail "2: ListMultipartUploads: HTTP $(cat "$WORK/oss-curl.status")"
if grep -q "<Upload>" <<<"$uploads"; then fail "2: an upload was left behind: $uploads"; fi
echo "ok 2: persistent UploadPart failure: save failed ($err), upload aborted, nothing left"

# 3. transient read failure
start_fake_oss faults --fault GetObject:status=503,times=1
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
put get etcd/v2/Full-00000000-00000010-1700000000.gz "$WORK/back3" 2>"$WORK/3.err" || { cat "$WORK/3.err"; fail "3: read not retried"; }
cmp -s "$WORK/data" "$WORK/back3" || fail "3: read back differs"
grep -q '^GetObject GET .* -> 503 fault' "$OSS_LOG" || fail "3: the fault did not fire"
echo "ok 3: transient GetObject 503 retried"

# 4. wrong secret
wrong=WRONGsecretWRONGsecret0123456789
sed "s|\"accessKeySecret\":\"[^\"]*\"|\"accessKeySecret\":\"$wrong\"|" "$OSS_CREDS_JSON" >"$WORK/wrong.json"
if ALICLOUD_APPLICATION_CREDENTIALS_JSON=$WORK/wrong.json put put etcd/v2/x "$WORK/1.err" 2>"$WORK/4.err"; then
    fail "4: a put with a wrong secret succeeded"
fi
err=$(cat "$WORK/4.err")
for want in "SignatureDoesNotMatch" "PUT $OSS_ENDPOINT/$OSS_BUCKET/etcd/v2/x" "HTTP 403" \
    "check accessKeyID and accessKeySecret in $WORK/wrong.json" \
    "OSS refused the credentials for bucket $OSS_BUCKET"; do
    grep -qF "$want" <<<"$err" || fail "4: the error does not say \"$want\": $err"
done
if grep -qF -e "$wrong" -e "$OSS_SECRET" <<<"$err"; then fail "4: a secret is in the message: $err"; fi
if ALICLOUD_APPLICATION_CREDENTIALS_JSON=$WORK/wrong.json put list etcd/ 2>"$WORK/4b.err"; then fail "4: a listing with a wrong secret succeeded"; fi
grep -q "SignatureDoesNotMatch" "$WORK/4b.err" || fail "4: listing: $(cat "$WORK/4b.err")"
echo "ok 4: wrong secret: $err"

# 5. the fake checks what it is sent
oss_curl GET "" "" >/dev/null
[ "$(cat "$WORK/oss-curl.status")" = 200 ] || fail "5: an openssl-signed listing: HTTP $(cat "$WORK/oss-curl.status")"
body=$(OSS_CURL_DATE=$(LC_ALL=C TZ=GMT date -d '-20 min' '+%a, %d %b %Y %H:%M:%S GMT') oss_curl GET "" "")
[ "$(cat "$WORK/oss-curl.status")" = 403 ] && grep -q "<Code>RequestTimeTooSkewed</Code>" <<<"$body" ||
    fail "5: a 20 minutes old Date was accepted: $body"
body=$(OSS_SECRET=other oss_curl GET "" "")
grep -q "<Code>SignatureDoesNotMatch</Code>" <<<"$body" || fail "5: a bad signature was accepted: $body"
echo "ok 5: the fake verifies signatures and the Date"

# 6. a server that ignores Range
start_fake_oss faults --legacy-range
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
put get etcd/v2/Full-00000000-00000010-1700000000.gz "$WORK/back6" 7000000 || fail "6: read from an offset"
tail -c +7000001 "$WORK/data" | cmp -s - "$WORK/back6" || fail "6: read from an offset differs"
put get etcd/v2/Full-00000000-00000010-1700000000.gz "$WORK/back6b" 99999999 || fail "6: read past the end"
[ ! -s "$WORK/back6b" ] || fail "6: read past the end gave bytes"
echo "ok 6: Range ignored by the server: the driver skips to the offset"

# 7. WORM
start_fake_oss faults --worm
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
if put rm etcd/v2/Full-00000000-00000010-1700000000.gz 2>"$WORK/7.err"; then fail "7: a WORM object was removed"; fi
grep -q "ERR_IMMUTABLE" "$WORK/7.err" || fail "7: $(cat "$WORK/7.err")"
put stat etcd/v2/Full-00000000-00000010-1700000000.gz >/dev/null || fail "7: the object is gone"
echo "ok 7: WORM-protected remove gives ERR_IMMUTABLE"

# 8. --store-endpoint-override is ignored
put --endpoint http://127.0.0.1:9 stat etcd/v2/Full-00000000-00000010-1700000000.gz >/dev/null 2>"$WORK/8.err" ||
    fail "8: the override was used: $(cat "$WORK/8.err")"
grep -q "store-endpoint-override=http://127.0.0.1:9 is ignored" "$WORK/8.err" || fail "8: no warning: $(cat "$WORK/8.err")"
echo "ok 8: --store-endpoint-override ignored with a warning"
# 8b. a download that breaks off mid-body resumes from the byte reached (Range + If-Match)
start_fake_oss faults --fault GetObject:cut=3000000,times=1
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
put get etcd/v2/Full-00000000-00000010-1700000000.gz "$WORK/back8b" 2>"$WORK/8b.err" || { cat "$WORK/8b.err"; fail "8b: no resume"; }
cmp -s "$WORK/data" "$WORK/back8b" || fail "8b: resumed read differs"
grep -q "^GetObject GET .* fault cut=3000000" "$OSS_LOG" || fail "8b: the cut did not happen"
grep -q "^GetObject GET .* -> 206 range=bytes=3000000-" "$OSS_LOG" || fail "8b: not resumed at byte 3000000: $(cat "$OSS_LOG")"
grep -q "broke at byte 3000000; resuming there" "$WORK/8b.err" || fail "8b: the resume was not logged"
echo "ok 8b: a broken download resumed at byte 3000000, byte-exact"

# 9. at most --max-parallel-chunk-uploads parts in flight (each takes 0.5 s at the fake)
start_fake_oss faults --part-delay 0.5
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
head -c $((21 * 1024 * 1024)) /dev/urandom >"$WORK/data9" # 5 parts
"$BUILD/store_put" --provider OSS --container "$OSS_BUCKET" --min-chunk 5242880 --parallel 2 \
    put etcd/v2/Full-00000000-00000030-1700000200 "$WORK/data9" || fail "9: put"
[ "$(grep -c '^UploadPart PUT .* -> 200' "$OSS_LOG")" = 5 ] || fail "9: not 5 parts: $(grep UploadPart "$OSS_LOG")"
max=$(grep -o ' max=[0-9]*' "$OSS_LOG" | cut -d= -f2 | sort -n | tail -1)
[ "$max" = 2 ] || fail "9: $max parts in flight at once, want 2 (--parallel 2)"
echo "ok 9: 5 parts, 2 in flight at most"
# 10. the same persistent part failure under `etcdbrctl snapshot`: the full snapshot fails
#     loudly (the process exits non-zero, the error names the part), nothing is stored
start_fake_oss snapfail --fault UploadPart:part=2,status=500,times=always
ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 9); do # ~7 MiB gzip'ed: 2 parts
    head -c 786432 /dev/urandom | base64 -w0 >"$WORK/big"
    ectl put "/registry/big/$i" <"$WORK/big" >/dev/null
done
rc=0
timeout 300 "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=OSS \
    --store-container="$OSS_BUCKET" --store-prefix=etcd-main --min-chunk-size=5242880 \
    --max-parallel-chunk-uploads=2 --snapstore-temp-directory="$WORK/snaptmp" \
    --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s \
    >"$WORK/snap.log" 2>&1 || rc=$?
stop_pid "$ETCD_PID"
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "10: snapshot exited $rc with a part that always fails: $(tail -3 "$WORK/snap.log")"
grep "level=error" "$WORK/snap.log" | grep "upload part 2 .*HTTP 500: InternalError.*the multipart upload was aborted" >/dev/null ||
    fail "10: no error naming the part: $(grep -v retrying "$WORK/snap.log" | tail -3)"
listed=$(put list etcd-main/v2/)
[ -z "$listed" ] || fail "10: objects stored after a failed full snapshot: $listed"
uploads=$(oss_curl GET "" uploads)
if grep -q "<Upload>" <<<"$uploads"; then fail "10: an upload was left behind: $uploads"; fi
echo "ok 10: etcdbrctl snapshot fails (exit $rc) naming the part; nothing stored, no upload left"
echo "PASS: OSS fault paths through fake_oss.py"
