#!/usr/bin/env bash
# The main job, end to end on loopback: installs dependencies, builds, starts a real etcd,
# writes data, runs `etcdbrctl snapshot` (a full snapshot and deltas), loses the data dir,
# runs `etcdbrctl restore`, starts etcd on the result and compares keys and revision.
# Everything lives in one temporary directory, removed at the end (KEEP=1 keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
BIN=$PWD/build/etcdbrctl
export ETCDCTL_API=3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/etcdbr-demo.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [ -n "${KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

start_etcd() { # name data-dir
    local c p
    c=$(port)
    p=$(port)
    EP=http://127.0.0.1:$c
    etcd --name "$1" --data-dir "$2" --listen-client-urls "$EP" --advertise-client-urls "$EP" \
        --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
        --initial-cluster "$1=http://127.0.0.1:$p" >"$WORK/etcd-$1.log" 2>&1 &
    ETCD_PID=$!
    PIDS+=("$ETCD_PID")
    until etcdctl --endpoints="$EP" endpoint health >/dev/null 2>&1; do sleep 0.1; done
}
dump() { etcdctl --endpoints="$1" get "" --from-key -w json | jq -c '(.kvs // [])[] | {key, value: (.value // ""), create_revision, mod_revision, version}'; }
rev() { etcdctl --endpoints="$1" endpoint status -w json | jq -r '.[0].Status.header.revision'; }

echo "== 1. etcd on loopback, with data"
start_etcd demo "$WORK/demo.etcd"
SRC=$EP
for i in $(seq 1 100); do echo "put /registry/pods/default/pod-$i {\"n\":$i}"; done |
    while read -r _ k v; do etcdctl --endpoints="$SRC" put "$k" "$v" >/dev/null; done
echo "   $(etcdctl --endpoints="$SRC" get /registry --prefix --keys-only | grep -c .) keys at revision $(rev "$SRC")"

echo "== 2. etcdbrctl snapshot: a full snapshot now, deltas every second"
"$BIN" snapshot --endpoints="$SRC" --storage-provider=Local --store-container="$WORK/backups" \
    --snapstore-temp-directory="$WORK/tmp" --delta-snapshot-period=1s --schedule='0 0 * * *' \
    >"$WORK/snapshot.log" 2>&1 &
SNAP=$!
PIDS+=("$SNAP")
until grep -q "full snapshot Full-" "$WORK/snapshot.log"; do sleep 0.1; done
for wave in 1 2 3; do
    for i in $(seq 1 20); do etcdctl --endpoints="$SRC" put "/registry/configmaps/wave-$wave/cm-$i" "v$i" >/dev/null; done
    etcdctl --endpoints="$SRC" del "/registry/pods/default/pod-$wave" >/dev/null
    sleep 1.5
done
kill -TERM "$SNAP"
wait "$SNAP"
grep -E "stored|stopped" "$WORK/snapshot.log" | sed 's/^/   /'
echo "   store: $(ls "$WORK/backups/v2" | tr '\n' ' ')"

SRC_REV=$(rev "$SRC")
dump "$SRC" >"$WORK/before.jsonl"
echo "== 3. lose the data dir"
kill "$ETCD_PID"
wait "$ETCD_PID" || true
rm -rf "$WORK/demo.etcd"

echo "== 4. etcdbrctl restore"
"$BIN" restore --storage-provider=Local --store-container="$WORK/backups" \
    --data-dir="$WORK/demo.etcd" --name=demo --initial-cluster=demo=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" 2>&1 | grep -E "restor" | sed 's/^/   /'

echo "== 5. etcd on the restored data dir"
start_etcd demo "$WORK/demo.etcd"
dump "$EP" >"$WORK/after.jsonl"
echo "   revision before: $SRC_REV, after: $(rev "$EP")"
echo "   keys before: $(wc -l <"$WORK/before.jsonl"), after: $(wc -l <"$WORK/after.jsonl")"
etcdctl --endpoints="$EP" get /registry/configmaps/wave-3/cm-20 -w fields | grep -E '"(Key|Value|CreateRevision|ModRevision|Version)"' | sed 's/^/   /'
if cmp -s "$WORK/before.jsonl" "$WORK/after.jsonl" && [ "$SRC_REV" = "$(rev "$EP")" ]; then
    echo "RESULT: every key, value, create/mod revision and version restored at revision $SRC_REV"
else
    echo "RESULT: MISMATCH"
    diff "$WORK/before.jsonl" "$WORK/after.jsonl" | head
    exit 1
fi
