# lib.sh: helpers for integration tests against a real etcd on loopback.
# Every test sources this, creates its work dir with make_workdir, and gets every process it
# started stopped (by PID) on exit.
set -euo pipefail

ETCDBR_BIN=${ETCDBR_BIN:-$(pwd)/build/etcdbrctl}
ETCDBR_SOURCE_DIR=${ETCDBR_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
ETCDBR_ETCD_CACHE=${ETCDBR_ETCD_CACHE:-$HOME/.cache/etcdbr/etcd}
ETCDBR_BASE_PATH=$PATH
PIDS=()
WORK=""
WORK_ROOT=""
ETCD_VERSION=""
# etcdctl 3.5+ warns when ETCDCTL_API is set; 3.4 (Debian's, the default etcd here) gets it.
case "$(etcdctl version 2>/dev/null | sed -n 1p)" in
*" 3.4."*) export ETCDCTL_API=3 ;;
*) unset ETCDCTL_API ;;
esac

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# stop_all: stops every process this shell started (PIDS); a test running a round in a
# subshell traps EXIT with it there, so a failing round leaves nothing running.
stop_all() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}

cleanup() {
    stop_all
    WORK=${WORK_ROOT:-$WORK}
    if [ -n "$WORK" ] && [ -z "${KEEP_WORK:-}" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

make_workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/etcdbr-it.XXXXXX")
    WORK_ROOT=$WORK
}

# sub_workdir NAME: WORK becomes $WORK_ROOT/NAME (created), e.g. one per etcd version, so the
# helpers' files (etcd logs, snaptmp) of one round do not mix with another's.
sub_workdir() {
    WORK=$WORK_ROOT/$1
    mkdir -p "$WORK"
}

# etcd_versions: the etcd versions to test, one per line: "3.4" (Debian's /usr/bin/etcd) and
# every 3.5/3.6/3.7 release cached by scripts/build-etcd.sh in $ETCDBR_ETCD_CACHE (vX.Y.Z).
# ETCDBR_ETCD_VERSIONS="3.4 v3.6.16" (or a minor: "3.6") restricts the list. Versions that are
# not available are named on stderr and skipped; with ETCDBR_REQUIRE_ETCD_VERSIONS=1 (CI) a
# missing one is an error (exit 1). Use as: versions=$(etcd_versions) (set -e stops on error).
etcd_versions() {
    local cached=() wanted=() out=() missing=() d v w found
    for d in "$ETCDBR_ETCD_CACHE"/v3.[567].*; do
        [[ "${d##*/}" =~ ^v3\.[567]\.[0-9]+$ ]] || continue # not a build in progress (.tmp)
        [ -x "$d/etcd" ] && [ -x "$d/etcdctl" ] && [ -x "$d/etcdutl" ] && cached+=("${d##*/}")
    done
    if [ -n "${ETCDBR_ETCD_VERSIONS:-}" ]; then
        read -r -a wanted <<<"$ETCDBR_ETCD_VERSIONS"
    else
        # 3.4 and the releases build-etcd.sh builds by default (the CI set), then any other
        # cached 3.5-3.7 release.
        wanted=(3.4)
        while read -r v; do wanted+=("$v"); done < <("$ETCDBR_SOURCE_DIR/scripts/build-etcd.sh" --list)
        for v in "${cached[@]}"; do
            case " ${wanted[*]} " in *" $v "*) ;; *) wanted+=("$v") ;; esac
        done
    fi
    for w in "${wanted[@]}"; do
        case "$w" in
        3.4 | v3.4 | 3.4.* | v3.4.*)
            if [ -x /usr/bin/etcd ] && [ -x /usr/bin/etcdctl ]; then out+=(3.4); else missing+=("$w"); fi
            continue
            ;;
        esac
        found=""
        for v in "${cached[@]}"; do
            case "$v" in "v${w#v}" | "v${w#v}".*) out+=("$v") && found=1 ;; esac
        done
        [ -n "$found" ] || missing+=("$w")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "${ETCDBR_REQUIRE_ETCD_VERSIONS:-0}" = 1 ]; then
            echo "FAIL: etcd ${missing[*]} not available (3.4: /usr/bin/etcd from apt; 3.5+: scripts/build-etcd.sh into $ETCDBR_ETCD_CACHE), and ETCDBR_REQUIRE_ETCD_VERSIONS=1" >&2
            return 1
        fi
        echo "SKIP etcd ${missing[*]}: not available (3.5+: run scripts/build-etcd.sh; ETCDBR_ETCD_CACHE=$ETCDBR_ETCD_CACHE)" >&2
    fi
    [ ${#out[@]} -gt 0 ] || { echo "FAIL: no etcd version to test" >&2; return 1; }
    printf '%s\n' "${out[@]}" | awk '!seen[$0]++'
}

# use_etcd VERSION: puts that version's etcd, etcdctl and etcdutl first on PATH (3.4: Debian's
# etcd and etcdctl, and no etcdutl of any version on PATH, so restore uses etcdctl), sets
# ETCD_VERSION (never export it: etcd reads ETCD_VERSION as its --version flag) and ETCDCTL_API
# (3.4 only; 3.5+ warn about it).
use_etcd() {
    local v=$1 bin p d newpath=""
    # start from the PATH the test began with, without any cached version or earlier shim
    IFS=: read -r -a p <<<"$ETCDBR_BASE_PATH"
    for d in "${p[@]}"; do
        case "$d" in "$ETCDBR_ETCD_CACHE"/* | */etcdbr-bin-3.4) continue ;; esac
        if [ "$v" = 3.4 ] && [ -x "$d/etcdutl" ]; then
            echo "use_etcd 3.4: $d dropped from PATH (it holds an etcdutl)" >&2
            continue
        fi
        newpath=${newpath:+$newpath:}$d
    done
    if [ "$v" = 3.4 ]; then
        [ -n "$WORK_ROOT" ] || fail "use_etcd: call make_workdir first"
        bin=$WORK_ROOT/etcdbr-bin-3.4
        mkdir -p "$bin"
        ln -sf /usr/bin/etcd "$bin/etcd"
        ln -sf /usr/bin/etcdctl "$bin/etcdctl"
        export ETCDCTL_API=3
    else
        bin=$ETCDBR_ETCD_CACHE/$v
        [ -x "$bin/etcd" ] && [ -x "$bin/etcdutl" ] || fail "use_etcd: etcd $v is not in $bin"
        unset ETCDCTL_API
    fi
    export PATH=$bin:$newpath
    hash -r
    ETCD_VERSION=$v
    case "$(etcd --version | sed -n 1p)" in
    *" ${v#v}"*) ;;
    *) fail "use_etcd $v: etcd on PATH says $(etcd --version | sed -n 1p)" ;;
    esac
    if [ "$v" = 3.4 ] && command -v etcdutl >/dev/null; then fail "use_etcd 3.4: etcdutl still on PATH"; fi
}

# free_port: a TCP port on 127.0.0.1 nobody listens on now.
free_port() {
    python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# start_etcd NAME DATA_DIR [extra etcd flags...]: starts etcd, sets ETCD_EP and ETCD_PID.
start_etcd() {
    local name=$1 dir=$2
    shift 2
    local cport pport attempt i
    # a port free_port found may be taken by a parallel test before etcd binds it: etcd then
    # exits before touching the data dir, and is started again on other ports
    for attempt in 1 2 3 4 5; do
        cport=$(free_port)
        pport=$(free_port)
        ETCD_EP=http://127.0.0.1:$cport
        ETCD_PEER_PORT=$pport
        etcd --name "$name" --data-dir "$dir" \
            --listen-client-urls "$ETCD_EP" --advertise-client-urls "$ETCD_EP" \
            --listen-peer-urls "http://127.0.0.1:$pport" \
            --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
            --initial-cluster "$name=http://127.0.0.1:$pport" "$@" \
            >>"$WORK/etcd-$name.log" 2>&1 &
        ETCD_PID=$!
        PIDS+=("$ETCD_PID")
        for i in $(seq 1 200); do
            if etcdctl --endpoints="$ETCD_EP" endpoint health >/dev/null 2>&1; then return 0; fi
            if ! kill -0 "$ETCD_PID" 2>/dev/null; then
                if tail -5 "$WORK/etcd-$name.log" | grep -q "address already in use"; then
                    echo "etcd $name: port taken meanwhile (attempt $attempt), trying other ports" >&2
                    continue 2
                fi
                tail -20 "$WORK/etcd-$name.log"
                fail "etcd $name exited"
            fi
            sleep 0.05
        done
        fail "etcd $name not ready"
    done
    fail "etcd $name: no free ports after 5 attempts"
}

stop_pid() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

ectl() {
    etcdctl --endpoints="$ETCD_EP" "$@"
}

# dump_keys EP: the keyspace as the fixtures' keys.jsonl (sorted by key bytes, lease left out).
dump_keys() {
    etcdctl --endpoints="$1" get "" --from-key -w json |
        jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version}'
}

current_revision() {
    etcdctl --endpoints="$1" endpoint status -w json | jq -r '.[0].Status.header.revision'
}

# restore_and_start STORE_DIR DATA_DIR [extra restore flags]: restores, starts etcd on the
# result (sets ETCD_EP / ETCD_PID).
restore_store() {
    local store=$1 data=$2
    shift 2
    "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$store" \
        --data-dir="$data" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$data.tmp" "$@"
}

# restore_bg STORE DATA_DIR LOG: the binary itself in the background (not a subshell, so kill -9
# reaches it); sets RESTORE_PID.
restore_bg() {
    local store=$1 data=$2 log=$3
    "$ETCDBR_BIN" restore --storage-provider=Local --store-container="$store" \
        --data-dir="$data" --name=restored \
        --initial-cluster=restored=http://127.0.0.1:2380 \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$data.tmp" >"$log" 2>&1 &
    RESTORE_PID=$!
    PIDS+=("$RESTORE_PID")
}

# wait_for_log FILE PATTERN [seconds]
wait_for_log() {
    local f=$1 pat=$2 secs=${3:-30} i
    for i in $(seq 1 $((secs * 10))); do
        if grep -q -- "$pat" "$f" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    tail -20 "$f" >&2 || true
    fail "timed out waiting for '$pat' in $f"
}

b64() { printf '%s' "$1" | base64 -w0; }

# gw_put EP KEY_B64 VALUE_B64: a put through etcd's JSON gateway, for keys and values with any
# bytes (NUL included), which etcdctl's argv cannot carry.
gw_put() {
    curl -sf -X POST "$1/v3/kv/put" -d "{\"key\":\"$2\",\"value\":\"$3\"}" >/dev/null
}

# start_snapshotter STORE LOG [extra flags]: sets SNAP_PID.
start_snapshotter() {
    local store=$1 log=$2
    shift 2
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$store" --snapstore-temp-directory="$WORK/snaptmp" \
        --schedule='0 0 1 1 *' --garbage-collection-period=0s "$@" >"$log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
}

# stop_snapshotter: SIGTERM, expects exit 0.
stop_snapshotter() {
    kill -TERM "$SNAP_PID"
    local rc=0
    wait "$SNAP_PID" || rc=$?
    [ "$rc" = 0 ] || fail "snapshotter exited $rc"
}

# restart_etcd NAME DATA_DIR: starts etcd again on the ports of the last start_etcd (so clients
# configured with $ETCD_EP reconnect); sets ETCD_PID.
restart_etcd() {
    local name=$1 dir=$2 cport=${ETCD_EP##*:}
    local pport=$ETCD_PEER_PORT
    etcd --name "$name" --data-dir "$dir" \
        --listen-client-urls "$ETCD_EP" --advertise-client-urls "$ETCD_EP" \
        --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "$name=http://127.0.0.1:$pport" >>"$WORK/etcd-$name.log" 2>&1 &
    ETCD_PID=$!
    PIDS+=("$ETCD_PID")
    local i
    for i in $(seq 1 200); do
        if etcdctl --endpoints="$ETCD_EP" endpoint health >/dev/null 2>&1; then return 0; fi
        sleep 0.05
    done
    fail "etcd $name did not come back on $cport"
}

# count_objects DIR KIND: number of Full or Incr objects in a store's v2 dir
count_objects() { ls "$1/v2" 2>/dev/null | grep -c "^$2-" || true; }

# wait_backed_up URL REV [seconds]: until the server's /snapshot/latest covers revision REV.
wait_backed_up() {
    local url=$1 rev=$2 secs=${3:-30} i got
    for i in $(seq 1 $((secs * 5))); do
        got=$(curl -s "$url/snapshot/latest" | jq '[.fullSnapshot.lastRevision // 0, ((.deltaSnapshots // [])[-1].lastRevision // 0)] | max' 2>/dev/null || echo 0)
        [ "${got:-0}" -ge "$rev" ] && return 0
        sleep 0.2
    done
    fail "the store does not reach revision $rev (latest: $got)"
}

# start_s3rver: starts @20minutes/s3rver (installed by scripts/test-servers.sh into
# $ETCDBR_NPM_CACHE) on 127.0.0.1, a free port, with a data dir under $WORK and one bucket.
# Sets S3_ENDPOINT (http://127.0.0.1:PORT), S3_BUCKET, S3_PID, S3_ACCESS_KEY/S3_SECRET_KEY
# (S3RVER/S3RVER; SigV4 is verified) and S3_CREDS_JSON (an AWS_APPLICATION_CREDENTIALS_JSON
# file). Exits 77 (skip) when the server is not installed, unless ETCDBR_REQUIRE_TOOLS=1.
ETCDBR_NPM_CACHE=${ETCDBR_NPM_CACHE:-$HOME/.cache/etcdbr/npm}
start_s3rver() {
    local bucket=${1:-etcdbr-test} port attempt i log
    if [ ! -f "$ETCDBR_NPM_CACHE/node_modules/@20minutes/s3rver/package.json" ] || ! command -v node >/dev/null; then
        [ "${ETCDBR_REQUIRE_TOOLS:-0}" = 1 ] && fail "s3rver not installed in $ETCDBR_NPM_CACHE (run scripts/test-servers.sh)"
        echo "SKIP: s3rver not installed in $ETCDBR_NPM_CACHE (run scripts/test-servers.sh)" >&2
        exit 77
    fi
    mkdir -p "$WORK/s3rver"
    log=$WORK/s3rver.log
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        NODE_PATH=$ETCDBR_NPM_CACHE/node_modules NODE_OPTIONS=--openssl-legacy-provider \
            node "$ETCDBR_SOURCE_DIR/tests/servers/s3rver.js" "$port" "$WORK/s3rver" "$bucket" \
            >>"$log" 2>&1 &
        S3_PID=$!
        PIDS+=("$S3_PID")
        for i in $(seq 1 200); do
            if grep -q "listening 127.0.0.1:$port" "$log"; then
                S3_ENDPOINT=http://127.0.0.1:$port
                S3_BUCKET=$bucket
                S3_ACCESS_KEY=S3RVER
                S3_SECRET_KEY=S3RVER
                S3_CREDS_JSON=$WORK/s3-creds.json
                printf '{"region":"us-east-1","accessKeyID":"%s","secretAccessKey":"%s","s3ForcePathStyle":true}\n' \
                    "$S3_ACCESS_KEY" "$S3_SECRET_KEY" >"$S3_CREDS_JSON"
                return 0
            fi
            if ! kill -0 "$S3_PID" 2>/dev/null; then
                if grep -q EADDRINUSE "$log"; then continue 2; fi
                cat "$log" >&2
                fail "s3rver exited"
            fi
            sleep 0.05
        done
        fail "s3rver not ready: $(tail -5 "$log")"
    done
    fail "s3rver: no free port after 5 attempts"
}
