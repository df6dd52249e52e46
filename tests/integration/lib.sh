# lib.sh: helpers for integration tests against a real etcd on loopback.
# Every test sources this, creates its work dir with make_workdir, and gets every process it
# started stopped (by PID) on exit.
set -euo pipefail

ETCDBR_BIN=${ETCDBR_BIN:-$(pwd)/build/etcdbrctl}
ETCDBR_SOURCE_DIR=${ETCDBR_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export ETCDCTL_API=3
PIDS=()
WORK=""

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$WORK" ] && [ -z "${KEEP_WORK:-}" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

make_workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/etcdbr-it.XXXXXX")
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
    local cport pport
    cport=$(free_port)
    pport=$(free_port)
    ETCD_EP=http://127.0.0.1:$cport
    ETCD_PEER_PORT=$pport
    etcd --name "$name" --data-dir "$dir" \
        --listen-client-urls "$ETCD_EP" --advertise-client-urls "$ETCD_EP" \
        --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "$name=http://127.0.0.1:$pport" "$@" \
        >"$WORK/etcd-$name.log" 2>&1 &
    ETCD_PID=$!
    PIDS+=("$ETCD_PID")
    local i
    for i in $(seq 1 200); do
        if etcdctl --endpoints="$ETCD_EP" endpoint health >/dev/null 2>&1; then return 0; fi
        kill -0 "$ETCD_PID" 2>/dev/null || { tail -20 "$WORK/etcd-$name.log"; fail "etcd $name exited"; }
        sleep 0.05
    done
    fail "etcd $name not ready"
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
