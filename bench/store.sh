#!/usr/bin/env bash
# Object-store transfer benchmark: upload and download of one snapshot-sized object (default
# 200 MB of incompressible bytes) to S3 on @20minutes/s3rver (loopback), through the S3 driver
# (build/store_put) with 1 and with 5 parts in flight (--min-chunk-size 5 MiB), side by side with
# curl's own SigV4 PUT and GET of the same file in the same run. Prints throughput and peak RSS;
# the driver's peak RSS must stay at or under 64 MiB (parts in flight x part size + buffers).
#   bench/store.sh [MB]
# Needs a built tree (./scripts/build.sh), scripts/test-servers.sh's s3rver, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-200}
export ETCDBR_BIN=$PWD/build/etcdbrctl
TOOL=$PWD/build/store_put
[ -x "$TOOL" ] || { echo "build first: ./scripts/build.sh (no $TOOL)" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || apt-get install -y time >/dev/null
source tests/integration/lib.sh
make_workdir
start_s3rver bench
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
head -c $((MB << 20)) /dev/urandom >"$WORK/snap.bin"
SUM=$(sha256sum <"$WORK/snap.bin" | cut -d' ' -f1)
LIMIT_KB=$((64 * 1024))
over=0
# measure LABEL CMD...: wall time, MB/s and peak RSS of CMD
measure() {
    local label=$1 secs kb
    shift
    sync
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >"$WORK/out.log" 2>&1 || { cat "$WORK/out.log"; fail "$label failed"; }
    read -r secs kb <"$WORK/time"
    printf '| %-46s | %7s s | %7.1f MB/s | %7.1f MiB |\n' "$label" "$secs" \
        "$(echo "$MB / $secs" | bc -l)" "$(echo "$kb / 1024" | bc -l)"
    case $label in etcdbr*) [ "$kb" -le "$LIMIT_KB" ] || over=1 ;; esac
}
check() { [ "$(sha256sum <"$WORK/back.bin" | cut -d' ' -f1)" = "$SUM" ] || fail "$1: the object read back differs"; rm -f "$WORK/back.bin"; }
URL=$S3_ENDPOINT/$S3_BUCKET
SIG=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")

echo "| $MB MB object, S3 (s3rver on loopback) | time | throughput | peak RSS |"
echo "|---|---|---|---|"
measure "curl PUT (one request, reference)" curl -sf "${SIG[@]}" -T "$WORK/snap.bin" "$URL/curl/snap.bin"
measure "curl GET (reference)" curl -sf "${SIG[@]}" -o "$WORK/back.bin" "$URL/curl/snap.bin"
check "curl GET"
for p in 1 5; do
    measure "etcdbr S3 upload, $p part(s) in flight" "$TOOL" --provider S3 --container "$S3_BUCKET" \
        --endpoint "$S3_ENDPOINT" --min-chunk 5242880 --parallel "$p" put "p$p/snap.bin" "$WORK/snap.bin"
    measure "etcdbr S3 download ($p)" "$TOOL" --provider S3 --container "$S3_BUCKET" \
        --endpoint "$S3_ENDPOINT" get "p$p/snap.bin" "$WORK/back.bin"
    check "download after $p parallel parts"
done
echo
if [ "$over" = 1 ]; then echo "etcdbr's peak RSS went over 64 MiB" >&2; exit 1; fi
echo "etcdbr's peak RSS stayed at or under 64 MiB; every download matched the upload (SHA-256)"
