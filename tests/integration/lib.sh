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
# A randomised test logs its seed; ETCDBR_SEED=N replays it (ETCDBR_TEST_SEED is the same knob's
# older name, still read).
if [ -n "${ETCDBR_SEED:-}" ]; then
    ETCDBR_TEST_SEED=$ETCDBR_SEED
elif [ -n "${ETCDBR_TEST_SEED:-}" ]; then
    ETCDBR_SEED=$ETCDBR_TEST_SEED
fi
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
# skip_test WHY: this test cannot run here (WHY: what is missing, how to get it). Exits 77, which
# ctest reports as skipped; under ETCDBR_REQUIRE_TOOLS=1 (CI) a failure instead.
skip_test() {
    [ "${ETCDBR_REQUIRE_TOOLS:-0}" != 1 ] || fail "cannot run here, and ETCDBR_REQUIRE_TOOLS=1 requires it: $1"
    echo "SKIP: $1" >&2
    exit 77
}

# emulator_missing WHY: a store emulator of scripts/lib/emulators.sh is not installed: skip_test.
emulator_missing() { skip_test "$1"; }

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
# set -e ends a test at a failing command without a word (e.g. `h=$(etcdctl ... | jq ...)` when
# etcdctl times out): say which command and where, so a CI log shows why the test failed
trap 'echo "FAIL: command exited $? at ${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND" >&2' ERR

make_workdir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/etcdbr-it.XXXXXX")
    WORK_ROOT=$WORK
}

# fixture_store NAME FIXTURE: $WORK/NAME, a writable copy of the store of tests/fixtures/FIXTURE
# (stores written by the Go tool) for a test to damage.
fixture_store() {
    rm -rf "${WORK:?}/$1"
    cp -r "$ETCDBR_SOURCE_DIR/tests/fixtures/$2/store" "$WORK/$1"
    chmod -R u+w "$WORK/$1"
}

# truncated_full NAME FIXTURE: fixture_store with its full snapshot cut short: to half its size
# when uncompressed, by its last 100 bytes when compressed (the gzip trailer and some data).
truncated_full() {
    fixture_store "$1" "$2"
    local f
    f=$(ls "$WORK/$1"/v2/Full-*)
    case $f in
    *.gz | *.zlib | *.Z | *.zst) truncate -s $(($(stat -c %s "$f") - 100)) "$f" ;;
    *) truncate -s $(($(stat -c %s "$f") / 2)) "$f" ;;
    esac
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
# etcd and etcdctl, and no etcdutl of any version on PATH; restore itself needs none of them,
# docs/member-dir.md), sets
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

# The store emulators (start_s3rver, start_azurite, start_fake_gcs, start_swift,
# start_fake_oss), free_port and stop_pid are shared with scripts/try-store.sh.
source "$ETCDBR_SOURCE_DIR/scripts/lib/emulators.sh"

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
                if tail -5 "$WORK/etcd-$name.log" | grep "address already in use" >/dev/null; then
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

# wait_stored LOG REV: until a snapshotter's log says revision REV (or a later one) is stored
# (its "stored: revision N" and "stored: K events, revisions A-B" lines), 30 s at most
wait_stored() {
    local log=$1 rev=$2 i
    for i in $(seq 1 300); do
        if grep -Eo "stored: (revision [0-9]+|[0-9]+ events, revisions [0-9]+-[0-9]+)" "$log" |
            grep -Eo "[0-9]+$" | sort -n | tail -1 | awk -v r="$rev" '{exit !($1 >= r)}'; then
            return 0
        fi
        sleep 0.1
    done
    tail -20 "$log" >&2
    fail "revision $rev not stored (log $log)"
}

# wait_healthz URL LOG: until GET URL/healthz answers 200 (30 s at most; LOG's tail on failure)
wait_healthz() {
    local i
    for i in $(seq 1 150); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/healthz")" = 200 ] && return 0
        sleep 0.2
    done
    tail -20 "$2" >&2
    fail "server at $1 not healthy"
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

# az_account_sas: prints an account SAS token (blob service, all resource types, rwdlac, valid
# until 2030, http allowed) for the azurite of start_azurite, signed here with openssl
# (string-to-sign of version 2020-12-06 and later: the encryption-scope line included).
az_account_sas() {
    local hexkey sig
    hexkey=$(printf '%s' "$AZ_KEY" | base64 -d | od -An -tx1 -v | tr -d ' \n')
    sig=$(printf '%s\nrwdlac\nb\nsco\n\n2030-01-01T00:00:00Z\n\nhttps,http\n2021-08-06\n\n' "$AZ_ACCOUNT" |
        openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | base64 -w0 |
        sed 's/+/%2B/g; s#/#%2F#g; s/=/%3D/g')
    printf 'sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&spr=https,http&sig=%s' "$sig"
}

# store_round_trip LABEL STORE_FLAG...: the core round trip through any store, as every provider's
# test runs it: a real etcd with ~9 MiB of incompressible values (the gzip'ed full snapshot spans
# several parts, blocks, chunks or segments at --min-chunk-size=5242880), puts, a txn, a deleted
# prefix, a key and value with any bytes; `snapshot` with STORE_FLAGS cutting one full snapshot and
# at least 2 deltas, SIGTERM (exit 0, no error logged); the data dir lost; `restore` with the same
# flags: every key, value, revision field and the current revision equal the source's. Credentials
# come from the caller's environment. Sets RT_DELTAS and RT_REVISION; files under $WORK/rt-LABEL.
# RT_SNAPSHOT_FLAGS (optional, word-split) adds flags that only `snapshot` takes (compression).
store_round_trip() {
    local label=$1 dir i src_ep src_pid src_rev rev
    shift
    dir=$WORK/rt-$label
    mkdir -p "$dir"
    start_etcd "rt-$label" "$dir/src.etcd"
    src_ep=$ETCD_EP
    src_pid=$ETCD_PID
    for i in $(seq 1 9); do
        head -c 786432 /dev/urandom | base64 -w0 >"$dir/big"
        ectl put "/registry/big/$i" <"$dir/big" >/dev/null
    done
    for i in $(seq 1 40); do ectl put "/registry/pods/ns1/pod-$i" "{\"v\":$i}" >/dev/null; done
    ectl del /registry/pods/ns1/pod-2 >/dev/null

    # shellcheck disable=SC2086 # RT_SNAPSHOT_FLAGS: flags for the snapshot command only (word-split)
    "$ETCDBR_BIN" snapshot --endpoints="$src_ep" "$@" ${RT_SNAPSHOT_FLAGS:-} --snapstore-temp-directory="$dir/snaptmp" \
        --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s \
        >"$dir/snap.log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
    wait_for_log "$dir/snap.log" "full snapshot Full-" 60
    ectl put /registry/pods/ns1/pod-3 again >/dev/null
    printf '\nput /registry/txn/a 1\nput /registry/txn/b 2\n\n\n' | ectl txn >/dev/null
    sleep 1.3
    ectl del --prefix /registry/pods/ns1/pod-1 >/dev/null
    gw_put "$src_ep" "$(printf '/registry/bin-\xff\x00 +=%%' | base64 -w0)" "$(printf '\x00\x01\xff' | base64 -w0)"
    ectl put /registry/empty "" >/dev/null
    sleep 1.3
    for i in $(seq 1 20); do ectl put "/registry/last/$i" "v$i" >/dev/null; done
    stop_snapshotter
    if grep -q "level=error" "$dir/snap.log"; then
        grep "level=error" "$dir/snap.log" >&2
        fail "$label: the snapshotter logged errors"
    fi
    src_rev=$(current_revision "$src_ep")
    dump_keys "$src_ep" >"$dir/src.jsonl"
    stop_pid "$src_pid"
    rm -rf "$dir/src.etcd"
    RT_DELTAS=$(grep -c "delta snapshot Incr-.* stored" "$dir/snap.log" || true)
    [ "$RT_DELTAS" -ge 2 ] || fail "$label: expected at least 2 deltas stored, got $RT_DELTAS"

    "$ETCDBR_BIN" restore "$@" --data-dir="$dir/restored.etcd" --name="rt-$label-restored" \
        --initial-cluster="rt-$label-restored=http://127.0.0.1:2380" \
        --initial-advertise-peer-urls=http://127.0.0.1:2380 \
        --restoration-temp-snapshots-dir="$dir/restore.tmp" >"$dir/restore.log" 2>&1 || {
        cat "$dir/restore.log" >&2
        fail "$label: restore failed"
    }
    start_etcd "rt-$label-restored" "$dir/restored.etcd"
    dump_keys "$ETCD_EP" >"$dir/restored.jsonl"
    rev=$(current_revision "$ETCD_EP")
    stop_pid "$ETCD_PID"
    [ "$rev" = "$src_rev" ] || fail "$label: revision $rev after restore, source $src_rev"
    cmp -s "$dir/src.jsonl" "$dir/restored.jsonl" || fail "$label: keyspace differs after the round trip"
    grep -q "$(b64 /registry/last/20)" "$dir/restored.jsonl" || fail "$label: the last wave is missing"
    RT_REVISION=$rev
    echo "$label round trip: 1 full snapshot, $RT_DELTAS deltas, revision $rev, $(wc -l <"$dir/src.jsonl") keys equal"
}

# gcs_object_names [PREFIX]: every object name in $GCS_BUCKET (all pages), one per line.
gcs_object_names() {
    python3 - "$GCS_ENDPOINT" "$GCS_BUCKET" "${1:-}" <<'PY'
import json, sys, urllib.parse, urllib.request
ep, bucket, prefix = sys.argv[1:4]
token = None
while True:
    q = {"prefix": prefix}
    if token:
        q["pageToken"] = token
    url = "%s/storage/v1/b/%s/o?%s" % (ep, bucket, urllib.parse.urlencode(q))
    page = json.load(urllib.request.urlopen(url))
    for it in page.get("items", []):
        print(it["name"])
    token = page.get("nextPageToken")
    if not token:
        break
PY
}

# start_fault_proxy UPSTREAM_URL [--status METHOD:STATUS:COUNT] [--cut METHOD:BYTES:COUNT]...:
# tests/servers/fault_proxy.py on 127.0.0.1 between etcdbrctl and a real store server, injecting
# the given faults (see the script). Sets PROXY_EP (http://127.0.0.1:PORT), PROXY_PID and
# PROXY_LOG (one line per injected fault).
start_fault_proxy() {
    local up=$1 i
    shift
    PROXY_LOG=$(mktemp "$WORK/fault-proxy.XXXXXX")
    rm -f "$PROXY_LOG.port"
    python3 "$ETCDBR_SOURCE_DIR/tests/servers/fault_proxy.py" --upstream "$up" \
        --port-file "$PROXY_LOG.port" --log "$PROXY_LOG" "$@" >>"$PROXY_LOG.out" 2>&1 &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    for i in $(seq 1 200); do
        if [ -s "$PROXY_LOG.port" ]; then
            PROXY_EP=http://127.0.0.1:$(cat "$PROXY_LOG.port")
            return 0
        fi
        kill -0 "$PROXY_PID" 2>/dev/null || fail "fault proxy exited: $(cat "$PROXY_LOG.out")"
        sleep 0.05
    done
    fail "fault proxy not ready"
}

# swift_memcached_flush: forgets every tempauth token of the Swift of start_swift (memcached
# flush_all), so the next request with an old token gets 401. SWIFT_TOKEN is renewed.
swift_memcached_flush() {
    local line hdr
    exec 9<>"/dev/tcp/127.0.0.1/$SWIFT_MEMCACHED_PORT" || fail "memcached: cannot connect"
    printf 'flush_all\r\n' >&9
    read -r -t 5 line <&9 || true
    exec 9>&-
    [ "${line%$'\r'}" = OK ] || fail "memcached flush_all: \"$line\""
    hdr=$(curl -s -f -D - -o /dev/null -H "X-Auth-User: $SWIFT_USER" -H "X-Auth-Key: $SWIFT_KEY" \
        "$SWIFT_AUTH_URL") || fail "Swift: authentication after the flush failed"
    SWIFT_TOKEN=$(printf '%s' "$hdr" | tr -d '\r' | sed -n 's/^[Xx]-[Aa]uth-[Tt]oken: //p')
}

# oss_curl METHOD KEY SUBRESOURCE [curl options...]: one request to the fake of start_fake_oss,
# signed here with openssl (V1, independent of the driver's signing). KEY "" is the bucket;
# SUBRESOURCE (e.g. "uploads", or "") is both signed and sent as the query. Date: now, or
# $OSS_CURL_DATE. Prints the body; the HTTP status goes to $WORK/oss-curl.status.
oss_curl() {
    local method=$1 key=$2 sub=$3 date sig q=""
    shift 3
    date=${OSS_CURL_DATE:-$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')}
    [ -n "$sub" ] && q="?$sub"
    sig=$(printf '%s\n\n\n%s\n/%s/%s%s' "$method" "$date" "$OSS_BUCKET" "$key" "$q" |
        openssl dgst -sha1 -hmac "$OSS_SECRET" -binary | base64 -w0)
    curl -s -X "$method" -o - -w '%{http_code}' -H "Date: $date" \
        -H "Authorization: OSS $OSS_ACCESS_KEY:$sig" "$@" "$OSS_ENDPOINT/$OSS_BUCKET/$key$q" >"$WORK/oss-curl.out" || true
    tail -c 3 "$WORK/oss-curl.out" >"$WORK/oss-curl.status"
    head -c -3 "$WORK/oss-curl.out"
}

# ---------- multi-member clusters ----------
# start_cluster N [extra etcd flags...]: starts an N-member etcd cluster on loopback (members
# m1..mN, data dirs $WORK/mI.etcd, logs $WORK/etcd-mI.log) and waits until every member answers.
# Sets, indexed 1..N: MEMBER_EP (client URL), MEMBER_PEER (peer URL), MEMBER_DIR, MEMBER_PID;
# and CLUSTER_EPS (comma-joined client URLs), INITIAL_CLUSTER (m1=peer,...), CLUSTER_TOKEN.
# The extra flags are remembered for start_member. With CLUSTER_DISTINCT_HOSTS=1 member mI
# listens on 127.0.0.I (MEMBER_HOST), so a sidecar per member can bind the same port on its
# member's address, as pods do.
declare -a MEMBER_EP MEMBER_PEER MEMBER_DIR MEMBER_PID MEMBER_HOST
CLUSTER_EXTRA=()
start_cluster() {
    local n=$1 i
    shift
    plan_cluster "$n" "$@"
    for i in $(seq 1 "$n"); do start_member "$i" new; done
    for i in $(seq 1 "$n"); do wait_member "$i"; done
}

# plan_cluster N [extra etcd flags...]: start_cluster's ports, data dirs, INITIAL_CLUSTER,
# CLUSTER_EPS and token, without starting anything (for members started otherwise, run_member).
plan_cluster() {
    local n=$1 i
    shift
    CLUSTER_EXTRA=("$@")
    CLUSTER_TOKEN=etcdbr-it-$$-$RANDOM
    INITIAL_CLUSTER=""
    CLUSTER_EPS=""
    for i in $(seq 1 "$n"); do
        MEMBER_HOST[i]=127.0.0.1
        [ "${CLUSTER_DISTINCT_HOSTS:-0}" = 1 ] && MEMBER_HOST[i]=127.0.0.$i
        MEMBER_EP[i]=http://${MEMBER_HOST[i]}:$(free_port)
        MEMBER_PEER[i]=http://${MEMBER_HOST[i]}:$(free_port)
        MEMBER_DIR[i]=$WORK/m$i.etcd
        INITIAL_CLUSTER+="${INITIAL_CLUSTER:+,}m$i=${MEMBER_PEER[i]}"
        CLUSTER_EPS+="${CLUSTER_EPS:+,}${MEMBER_EP[i]}"
    done
    CLUSTER_SIZE=$n
}

# start_member I STATE [extra etcd flags...]: starts member mI of the cluster (STATE: new or
# existing) on its ports and data dir with INITIAL_CLUSTER; does not wait (wait_member).
start_member() {
    local i=$1 state=$2
    shift 2
    etcd --name "m$i" --data-dir "${MEMBER_DIR[i]}" \
        --listen-client-urls "${MEMBER_EP[i]}" --advertise-client-urls "${MEMBER_EP[i]}" \
        --listen-peer-urls "${MEMBER_PEER[i]}" --initial-advertise-peer-urls "${MEMBER_PEER[i]}" \
        --initial-cluster "$INITIAL_CLUSTER" --initial-cluster-token "$CLUSTER_TOKEN" \
        --initial-cluster-state "$state" "${CLUSTER_EXTRA[@]}" "$@" \
        >>"$WORK/etcd-m$i.log" 2>&1 &
    MEMBER_PID[i]=$!
    PIDS+=("${MEMBER_PID[i]}")
}

# wait_member I [seconds]: until member mI answers /health (a learner answers too).
wait_member() {
    local i=$1 secs=${2:-30} k
    for k in $(seq 1 $((secs * 10))); do
        if curl -s -m 1 "${MEMBER_EP[i]}/health" 2>/dev/null | grep '"health":"true"' >/dev/null; then
            return 0
        fi
        if ! kill -0 "${MEMBER_PID[i]}" 2>/dev/null; then
            tail -20 "$WORK/etcd-m$i.log" >&2
            fail "etcd m$i exited"
        fi
        sleep 0.1
    done
    tail -20 "$WORK/etcd-m$i.log" >&2
    fail "etcd m$i not healthy within ${secs}s"
}

# seeded_runs FUNC "VERSIONS" RUNS [SEED]: FUNC V SEED for each etcd version V and each of RUNS
# runs, each in a subshell with errexit on and stop_all on its exit, so a failing run stops its
# own processes and the other runs still run. SEED replays one seed; otherwise each run draws one.
# Prints a line per run (passed or FAILED, with the seed); FAILED_RUNS lists the failed ones.
seeded_runs() {
    local fn=$1 versions=$2 runs=$3 fixed=${4:-} v i seed start rc
    FAILED_RUNS=()
    for v in $versions; do
        for i in $(seq 1 "$runs"); do
            seed=${fixed:-$(((RANDOM << 15) | RANDOM))}
            start=$SECONDS
            set +e
            (
                set -e
                trap stop_all EXIT
                "$fn" "$v" "$seed"
            )
            rc=$?
            set -e
            if [ "$rc" = 0 ]; then
                echo "etcd $v seed=$seed: passed in $((SECONDS - start)) s"
            else
                echo "etcd $v seed=$seed: FAILED in $((SECONDS - start)) s${KEEP_WORK:+ (work dir $WORK_ROOT/$v-$seed)}"
                FAILED_RUNS+=("etcd $v seed=$seed")
            fi
        done
    done
}

# wait_voters N [seconds]: until the member list (asked of each member in turn) has N members,
# each started (named) and none a learner. Members of a new cluster under `etcdbrctl run` that
# start together can still be joining: one whose etcd starts after the others formed a quorum
# joins as a learner and is promoted (docs/cluster.md), so /health alone is not "formed".
wait_voters() {
    local want=$1 secs=${2:-60} end i out
    end=$((SECONDS + secs))
    while [ "$SECONDS" -lt "$end" ]; do
        for i in $(seq 1 "$CLUSTER_SIZE"); do
            out=$(curl -s -m 2 -X POST "${MEMBER_EP[i]}/v3/cluster/member/list" -d '{}' 2>/dev/null) || continue
            if jq -e --argjson n "$want" '(.members | length) == $n and
                    all(.members[]; (.name // "") != "" and (.isLearner // false) == false)' \
                <<<"$out" >/dev/null 2>&1; then
                return 0
            fi
            break
        done
        sleep 0.1
    done
    fail "the member list did not reach $want started voting members in ${secs}s: ${out:-no answer}"
}

# wait_promoted I [seconds]: until mI's run log says "promoted member mI (<id>)" (polled every
# 20 ms). Operators read that line as "the member serves as a voting member", so: mI's own etcd
# (its output goes to the same log) must have logged applying the promotion ("promote member
# <id>" of etcd 3.4, or "promote member" with "promoted-member-id":"<id>" of 3.5+) on an earlier
# line, and at once one write through mI must succeed, no retry (a learner refuses writes: "rpc
# not supported for learner").
wait_promoted() {
    local i=$1 secs=${2:-60} log=$WORK/run-m$1.log out id at applied
    local end=$((SECONDS + secs))
    until grep -q "promoted member m$i (" "$log" 2>/dev/null; do
        [ "$SECONDS" -lt "$end" ] || { tail -20 "$log" >&2; fail "timed out waiting for m$i's promotion in $log"; }
        sleep 0.02
    done
    out=$(curl -sS -m 10 -X POST "${MEMBER_EP[i]}/v3/kv/put" \
        -d "{\"key\":\"$(b64 "/promoted/m$i")\",\"value\":\"$(b64 yes)\"}" 2>&1) || true
    printf '%s' "$out" | jq -e '.header.revision' >/dev/null 2>&1 ||
        fail "m$i was logged as promoted, but a write through it right after failed: ${out:0:300}"
    id=$(grep -o -m1 "promoted member m$i ([0-9a-f]*)" "$log" | sed 's/.*(\(.*\))/\1/') || true
    at=$(grep -n -m1 "promoted member m$i (" "$log" | cut -d: -f1) || true
    applied=$(grep -n "promote member" "$log" | grep -E -m1 "promote member $id |\"promoted-member-id\":\"$id\"" | cut -d: -f1) || true
    [ -n "$applied" ] || fail "m$i's etcd did not log applying its promotion ($id) in $log"
    [ "$applied" -lt "$at" ] ||
        fail "m$i was logged as promoted (line $at) before its etcd applied the promotion (line $applied of $log)"
}

# kill_member I: kill -9 of member mI's etcd, reaped.
kill_member() {
    kill -9 "${MEMBER_PID[$1]}" 2>/dev/null || true
    wait "${MEMBER_PID[$1]}" 2>/dev/null || true
}

# leader_index: the index I of the member the cluster reports as raft leader (empty if none
# answers).
leader_index() {
    local i id lead
    for i in $(seq 1 "$CLUSTER_SIZE"); do
        lead=$(curl -s -m 2 -X POST "${MEMBER_EP[i]}/v3/maintenance/status" -d '{}' 2>/dev/null |
            jq -r '.leader // empty' 2>/dev/null) || continue
        [ -n "$lead" ] || continue
        for i in $(seq 1 "$CLUSTER_SIZE"); do
            id=$(curl -s -m 2 -X POST "${MEMBER_EP[i]}/v3/maintenance/status" -d '{}' 2>/dev/null |
                jq -r '.header.member_id // empty' 2>/dev/null) || continue
            [ "$id" = "$lead" ] && echo "$i" && return 0
        done
        return 0
    done
}

# member_hashkv I REV: HashKV of member mI at revision REV (0 = current). Through etcdctl: etcd
# 3.4's gateway maps /v3/maintenance/hash to Hash (the whole backend, members and meta included,
# revision ignored), not HashKV, and has no /v3/maintenance/hashkv.
member_hashkv() {
    etcdctl --endpoints="${MEMBER_EP[$1]}" --command-timeout=5s endpoint hashkv --rev="$2" -w json |
        jq -r '.[0].HashKV.hash'
}

# run_member I STATE IC [etcdbrctl flags...]: member mI as `etcdbrctl run -- etcd ...` with
# initial cluster IC (start_member's etcd flags; MEMBER_HTTP[I] its server port), logging to
# $WORK/run-mI.log; MEMBER_PID[I] is etcdbrctl's PID (member_etcd_pid I: its etcd child's).
run_member() {
    local i=$1 state=$2 ic=$3
    shift 3
    MEMBER_HTTP[i]=${MEMBER_HTTP[i]:-$(free_port)}
    "$ETCDBR_BIN" run --server-port="${MEMBER_HTTP[i]}" "$@" -- \
        etcd --name "m$i" --data-dir "${MEMBER_DIR[i]}" \
        --listen-client-urls "${MEMBER_EP[i]}" --advertise-client-urls "${MEMBER_EP[i]}" \
        --listen-peer-urls "${MEMBER_PEER[i]}" --initial-advertise-peer-urls "${MEMBER_PEER[i]}" \
        --initial-cluster "$ic" --initial-cluster-token "$CLUSTER_TOKEN" \
        --initial-cluster-state "$state" "${CLUSTER_EXTRA[@]}" \
        >>"$WORK/run-m$i.log" 2>&1 &
    MEMBER_PID[i]=$!
    PIDS+=("${MEMBER_PID[i]}")
}

member_etcd_pid() { pgrep -P "${MEMBER_PID[$1]}" -x etcd || true; }

# hashkv_agree REV [seconds]: until every member (1..CLUSTER_SIZE) has reached REV and their
# HashKV at REV agree (a member still applying can answer a transient value); HASHKV is the
# agreed hash. Fails with every member's answer when they do not agree in time.
hashkv_agree() {
    local rev=$1 secs=${2:-10} k i h all ok
    for k in $(seq 1 $((secs * 5))); do
        all="" ok=1 HASHKV=""
        for i in $(seq 1 "$CLUSTER_SIZE"); do
            h=$(member_hashkv "$i" "$rev" 2>/dev/null || true)
            all+="${all:+ }m$i=${h:-none}"
            [ -n "$h" ] && [ "$h" != null ] || ok=0
            [ -n "$HASHKV" ] || HASHKV=$h
            [ "$h" = "$HASHKV" ] || ok=0
        done
        [ "$ok" = 1 ] && return 0
        [ "$k" = 1 ] && echo "HashKV at revision $rev not (yet) agreed: $all; polling" >&2
        sleep 0.2
    done
    fail "HashKV at revision $rev does not agree: $all"
}

# member_run_flags: sets RUN_FLAGS, the `etcdbrctl run` flags the member tests share (one Local
# store under $WORK, deltas every second, no scheduled full snapshot, no GC, a 2 s reelection
# period, the cluster found through --service-endpoints=$CLUSTER_EPS). After plan_cluster.
member_run_flags() {
    RUN_FLAGS=(--storage-provider=Local --store-container="$WORK/store"
        --snapstore-temp-directory="$WORK/snaptmp" --restoration-temp-snapshots-dir="$WORK/restore.tmp"
        --delta-snapshot-period=1s --schedule='0 0 1 1 *' --garbage-collection-period=0s
        --reelection-period=2s --etcd-connection-timeout-leader-election=2s
        --service-endpoints="$CLUSTER_EPS")
}

# plan_run_cluster N: plan_cluster N for members run under `etcdbrctl run` (run_member), with
# etcd's election timeout at 2.5 s (heartbeat 250 ms): the default 1 s elects a new leader
# whenever a loaded CI machine stalls the leader for a second, failing the writes in flight,
# which is not what the member tests are about; then member_run_flags (RUN_FLAGS).
plan_run_cluster() {
    plan_cluster "$1" --heartbeat-interval=250 --election-timeout=2500
    member_run_flags
}

# start_writer EP...: a background writer putting /w/N = vN through the endpoints round robin
# until $WORK/stop-writer exists; appends N to $WORK/acked for every acknowledged put and
# "N EP +Ss curl=RC ANSWER" to $WORK/failed for every other one (an error answer, or none within
# 10 s: a put on a loaded CI machine can take seconds without the cluster being down). Returns
# once 20 are acknowledged (5 s at most); sets WRITER (stop: touch $WORK/stop-writer; wait
# "$WRITER").
start_writer() {
    local eps=("$@")
    : >"$WORK/acked"
    : >"$WORK/failed"
    (
        n=0
        while [ ! -e "$WORK/stop-writer" ]; do
            ep=${eps[$((n % ${#eps[@]}))]}
            rc=0
            out=$(curl -sS -m 10 -X POST "$ep/v3/kv/put" \
                -d "{\"key\":\"$(b64 "/w/$n")\",\"value\":\"$(b64 "v$n")\"}" 2>&1) || rc=$?
            if [ "$rc" = 0 ] && printf '%s' "$out" | jq -e '.header.revision' >/dev/null 2>&1; then
                echo "$n" >>"$WORK/acked"
            else
                echo "$n $ep +$((SECONDS - ${T0:-0}))s curl=$rc ${out:0:300}" >>"$WORK/failed"
            fi
            n=$((n + 1))
        done
    ) &
    WRITER=$!
    PIDS+=("$WRITER")
    local k
    for k in $(seq 1 50); do [ "$(wc -l <"$WORK/acked")" -ge 20 ] && break; sleep 0.1; done
}
