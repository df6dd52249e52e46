# Shared by the bench scripts (sourced from the repository's root): the tools they need, a work
# dir removed on exit with every process they started, a single-member etcd on loopback, and a
# wait for a quiet machine. Each script keeps its own measurements.

# bench_init NAME: installs GNU time, bc and jq when missing (Debian), sets WORK (a new dir under
# TMPDIR named after NAME) and PIDS, and on exit stops the PIDS (TERM, then waits) and removes
# WORK.
bench_init() {
    local c
    for c in /usr/bin/time bc jq; do
        command -v "$c" >/dev/null || apt-get install -y time bc jq >/dev/null
    done
    export ETCDCTL_API=3
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/etcdbr-bench-$1.XXXXXX")
    PIDS=()
    trap bench_cleanup EXIT
}
bench_cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}

port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# start_etcd DATA_DIR [LOG [ETCD_FLAG...]]: a single-member etcd on two free loopback ports with
# an 8 GiB quota, its output in LOG ($WORK/etcd.log by default); sets EP and ETCD_PID (also in
# PIDS) and returns once it answers health (60 s at most, or exits the script).
start_etcd() {
    local dir=$1 log=${2:-$WORK/etcd.log} c p k
    shift $(($# < 2 ? $# : 2))
    c=$(port)
    p=$(port)
    EP=http://127.0.0.1:$c
    etcd --name b --data-dir "$dir" --listen-client-urls "$EP" --advertise-client-urls "$EP" \
        --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
        --initial-cluster "b=http://127.0.0.1:$p" --quota-backend-bytes=$((8 << 30)) "$@" \
        >"$log" 2>&1 &
    ETCD_PID=$!
    PIDS+=("$ETCD_PID")
    for k in $(seq 1 600); do
        etcdctl --endpoints="$EP" --dial-timeout=1s --command-timeout=2s endpoint health \
            >/dev/null 2>&1 && return 0
        kill -0 "$ETCD_PID" 2>/dev/null || break
        sleep 0.1
    done
    tail -20 "$log" >&2
    echo "etcd did not become healthy" >&2
    exit 1
}
stop_etcd() {
    kill "$ETCD_PID" 2>/dev/null || true
    wait "$ETCD_PID" 2>/dev/null || true
}

# db_status: one line with the db's size, revision, etcd's version and the CPUs; sets DBSIZE
# (bytes).
db_status() {
    local st
    st=$(etcdctl --endpoints="$EP" endpoint status -w json)
    DBSIZE=$(jq -r '.[0].Status.dbSize' <<<"$st")
    echo "db: $DBSIZE bytes ($((DBSIZE / 1048576)) MiB) at revision $(jq -r '.[0].Status.header.revision' <<<"$st"), etcd $(etcd --version | sed -n 's/etcd Version: //p'), $(nproc) CPUs"
}

# wait_low_load: until the 1-minute load average is below MAX_LOAD (default 1.5), LOAD_WAIT
# seconds at most (default 300; then it says so and goes on).
load1() { cut -d' ' -f1 /proc/loadavg; }
wait_low_load() {
    local max=${MAX_LOAD:-1.5} end=$((SECONDS + ${LOAD_WAIT:-300}))
    while [ "$(echo "$(load1) >= $max" | bc)" = 1 ] && [ "$SECONDS" -lt "$end" ]; do sleep 5; done
    [ "$(echo "$(load1) < $max" | bc)" = 1 ] || echo "(load still $(load1): running anyway)" >&2
}

# go_tools NAME:DIR...: go builds each DIR (a module of this repository, offline: its
# dependencies come from the module cache) into $WORK/NAME. Exits when go is missing.
go_tools() {
    local t
    command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
    command -v go >/dev/null || { echo "go not found" >&2; exit 1; }
    [ -n "$(go env GOCACHE 2>/dev/null)" ] || export GOCACHE=$WORK/gocache
    for t in "$@"; do
        (cd "${t#*:}" && GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off go build -o "$WORK/${t%%:*}" .)
    done
}
