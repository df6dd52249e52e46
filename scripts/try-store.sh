#!/usr/bin/env bash
# try-store.sh: an object store to try etcdbrctl against, on this machine, with the emulator the
# integration tests use (docs/stores.md, "Try it locally" in each store's section).
#
#   scripts/try-store.sh [--endpoints URL] PROVIDER [DIR]
#
# PROVIDER is S3 (s3rver), ABS (azurite), GCS (fake-gcs-server), Swift (Debian's OpenStack
# Swift) or OSS (tests/tools/fake_oss.py: a scripted fake, there is no OSS emulator). The
# emulator starts on 127.0.0.1 on a free port with its data, logs and credentials file under DIR
# (created if missing and kept; default: a new temporary directory, removed at the end unless
# something failed). The
# bucket or container is etcdbr-try. Standard output is a shell script: comments, the `export`
# lines for the credentials (also written to DIR/env.sh) and example `etcdbrctl snapshot`,
# `list` and `restore` command lines for this store, against the etcd at URL (--endpoints,
# default http://127.0.0.1:2379). Then it waits in the foreground: Ctrl-C or SIGTERM stops
# the processes it started (by PID, nothing else) and it exits 0; an emulator that exits by itself
# stops the rest and exits 1.
#
# It installs nothing: a missing emulator is named with the command that installs it
# (scripts/test-servers.sh, scripts/build-fake-gcs.sh, scripts/install-deps.sh), exit 1.
# ETCDBR_BIN names the etcdbrctl the examples call (default: etcdbrctl on PATH, else this
# checkout's build/etcdbrctl).
set -euo pipefail
ETCDBR_SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    sed -n 's/^#   \(scripts\/try-store.sh .*\)/usage: \1/p' "${BASH_SOURCE[0]}"
    echo "PROVIDER: S3, ABS, GCS, Swift or OSS (OSS is a scripted fake); docs/stores.md says more"
}

etcd_ep=http://127.0.0.1:2379
while [ $# -gt 0 ]; do
    case "$1" in
    --endpoints=*) etcd_ep=${1#*=} ;;
    --endpoints)
        [ $# -ge 2 ] || { usage >&2; exit 2; }
        etcd_ep=$2
        shift
        ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "try-store: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
[ $# -ge 1 ] && [ $# -le 2 ] || { usage >&2; exit 2; }
case "${1,,}" in
s3) provider=S3 ;;
abs) provider=ABS ;;
gcs) provider=GCS ;;
swift) provider=Swift ;;
oss) provider=OSS ;;
*) echo "try-store: unknown provider '$1'" >&2; usage >&2; exit 2 ;;
esac

PIDS=()
WORK=""
temp_dir=""
stopping=0
fail() {
    echo "try-store: $*" >&2
    exit 1
}
emulator_missing() {
    echo "try-store: $1" >&2
    exit 1
}

# cleanup: stops every process started here (SIGTERM, then SIGKILL after 10 s), by PID.
cleanup() {
    local rc=$? pid i
    trap '' INT TERM
    stopping=1
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for i in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "try-store: PID $pid did not stop on SIGTERM within 10 s: SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$temp_dir" ] && [ "$rc" = 0 ]; then
        rm -rf "$temp_dir"
    elif [ -n "$temp_dir" ]; then
        echo "try-store: kept $temp_dir for its logs" >&2
    fi
    [ ${#PIDS[@]} = 0 ] || echo "try-store: stopped ${PIDS[*]}" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

if [ $# = 2 ]; then
    mkdir -p "$2"
    WORK=$(cd "$2" && pwd)
else
    temp_dir=$(mktemp -d "${TMPDIR:-/tmp}/etcdbr-try.XXXXXX")
    WORK=$temp_dir
fi
# shellcheck source=lib/emulators.sh
source "$ETCDBR_SOURCE_DIR/scripts/lib/emulators.sh"
EMULATOR_BUCKET_MAY_EXIST=1 # DIR may hold the bucket of an earlier run

bucket=etcdbr-try
store_flags=(--storage-provider="$provider" --store-container="$bucket")
exports=()
case "$provider" in
S3)
    start_s3rver "$bucket"
    what="s3rver (@20minutes/s3rver), a real S3 server; it checks SigV4 signatures (key S3RVER, secret S3RVER)"
    exports=("AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON")
    store_flags+=(--store-endpoint-override="$S3_ENDPOINT")
    endpoint=$S3_ENDPOINT
    ;;
ABS)
    start_azurite "$bucket"
    what="azurite, Microsoft's Blob storage emulator; it checks SharedKey signatures of its well-known account $AZ_ACCOUNT"
    exports=("AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON")
    store_flags+=(--store-endpoint-override="$AZ_ENDPOINT")
    endpoint=$AZ_ENDPOINT
    ;;
GCS)
    start_fake_gcs "$bucket"
    what="fake-gcs-server, a GCS JSON API emulator, objects in memory (gone when it stops); it takes no token, and on an http:// endpoint the driver sends none (no credentials needed)"
    store_flags+=(--store-endpoint-override="$GCS_ENDPOINT")
    endpoint=$GCS_ENDPOINT
    ;;
Swift)
    start_swift "$bucket"
    what="Debian's OpenStack Swift (proxy with tempauth: user test:tester, key testing; account, container and object servers, memcached)"
    exports=("OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON")
    endpoint=$SWIFT_AUTH_URL
    ;;
OSS)
    start_fake_oss "$bucket"
    what="tests/tools/fake_oss.py, a SCRIPTED FAKE of the OSS API subset the driver uses (there is no OSS emulator): it checks signature V1, Date and Content-MD5, not real OSS behaviour"
    exports=("ALICLOUD_APPLICATION_CREDENTIALS_JSON=$OSS_CREDS_JSON")
    endpoint=$OSS_ENDPOINT
    ;;
esac

bin=${ETCDBR_BIN:-}
if [ -z "$bin" ]; then
    if command -v etcdbrctl >/dev/null; then
        bin=etcdbrctl
    elif [ -x "$ETCDBR_SOURCE_DIR/build/etcdbrctl" ]; then
        bin=$ETCDBR_SOURCE_DIR/build/etcdbrctl
    else
        bin=etcdbrctl
        echo "try-store: no etcdbrctl on PATH nor in $ETCDBR_SOURCE_DIR/build (./scripts/build.sh builds it)" >&2
    fi
fi
# q WORD...: the words quoted for a shell, space-separated
q() { printf '%q ' "$@" | sed 's/ $//'; }

: >"$WORK/env.sh"
for e in "${exports[@]}"; do echo "export ${e%%=*}=$(q "${e#*=}")" >>"$WORK/env.sh"; done
{
    echo "# $provider store: $what"
    echo "# listening on $endpoint, bucket/container $bucket"
    echo "# data, logs and credentials in $WORK$([ -z "$temp_dir" ] || echo " (removed at the end; give DIR to keep them)")"
    echo "# emulator PIDs: ${PIDS[*]}"
    echo "# Ctrl-C here (or SIGTERM to PID $$) stops it."
    echo "#"
    echo "# In another shell (or: source $(q "$WORK/env.sh")):"
    if [ ${#exports[@]} = 0 ]; then echo "# (no credentials to export)"; fi
    cat "$WORK/env.sh"
    echo "# back up the etcd at $etcd_ep: a full snapshot now, then deltas; Ctrl-C stops it after a last delta"
    echo "$(q "$bin") snapshot $(q --endpoints="$etcd_ep" "${store_flags[@]}" --snapstore-temp-directory="$WORK/snaptmp")"
    echo "# what the store holds"
    echo "$(q "$bin") list $(q "${store_flags[@]}")"
    echo "# restore the latest into a new data dir (then: etcd --data-dir $(q "$WORK/restored.etcd"))"
    echo "$(q "$bin") restore $(q "${store_flags[@]}" --data-dir="$WORK/restored.etcd" --restoration-temp-snapshots-dir="$WORK/restore.tmp")"
}
# wait until a signal (the trap exits 0) or until an emulator process exits by itself
while :; do
    wait -n "${PIDS[@]}" || true
    for pid in "${PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && continue
        [ "$stopping" = 0 ] || exit 0
        fail "emulator PID $pid exited by itself; its log is under $WORK"
    done
done
