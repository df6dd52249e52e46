#!/usr/bin/env bash
# etcdbr as a drop-in for the Go tool's container in the StatefulSet etcd-druid renders
# (tests/integration/data/druid-etcd-main.yaml, docs/druid.md):
#   a. every arg of the fixture's backup-restore container is accepted, with its value, by
#      `etcdbrctl server` (`--help` parses and validates every flag first), and so are the args
#      etcd-druid gives with TLS or profiling and the --etcd-process-name of older releases; an
#      unknown flag is refused (the check can fail); k8svalidate (scripts/build-helm.sh) accepts
#      the manifest when it is built;
#   b. the container runs: exactly those args and env against a real etcd on loopback, only the
#      pod's paths (/var/etcd/, /home/nonroot: the image's working directory, where the relative
#      STORAGE_CONTAINER resolves), host names and port replaced, the ConfigMap's etcd.conf.yaml
#      written out as mounted. It serves /livez and /healthz (200: the one member leads),
#      /config for its member, stores a full snapshot and a delta in the Local store, and stops
#      on SIGTERM with exit 0. The Lease flags are on, but no API server exists here: the
#      sidecar gets an in-cluster configuration pointing at a closed port, and its Lease updates
#      fail and are logged (test_k8s_lease_fake_apiserver.sh checks them).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chart_lib.sh"
make_workdir
M=$ETCDBR_SOURCE_DIR/tests/integration/data/druid-etcd-main.yaml
command -v openssl >/dev/null || skip_test "openssl is not installed"
mapfile -t ARGS < <(chart_sidecar_args "$M")
[ "${ARGS[0]:-}" = server ] && [ "${#ARGS[@]}" -ge 30 ] || fail "the fixture's args: ${ARGS[*]}"

# a. accepted: --help after the args parses every one of them first
accepts() { # WHAT ARGS...: etcdbrctl server accepts ARGS
    local what=$1
    shift
    "$ETCDBR_BIN" server "$@" --help >"$WORK/help.out" 2>&1 || { cat "$WORK/help.out" >&2; fail "$what: refused"; }
}
accepts "the fixture's ${#ARGS[@]} args" "${ARGS[@]:1}"
# with client TLS and the sidecar's HTTPS server (etcd-druid's mount paths), profiling, and the
# flag older etcd-druid releases pass
accepts "TLS args" --cacert=/var/etcd/ssl/ca/ca.crt --cert=/var/etcd/ssl/client/tls.crt \
    --key=/var/etcd/ssl/client/tls.key --insecure-transport=false --insecure-skip-tls-verify=false \
    --endpoints=https://etcd-main-local:2379 --service-endpoints=https://etcd-main-client:2379 \
    --server-cert=/var/etcdbr/ssl/server/tls.crt --server-key=/var/etcdbr/ssl/server/tls.key \
    --enable-profiling=true --etcd-process-name=etcd
if "$ETCDBR_BIN" server "${ARGS[@]:1}" --no-such-druid-flag=1 --help >"$WORK/help.out" 2>&1; then
    fail "an unknown flag was accepted: the check proves nothing"
fi
grep -q -- "unknown flag: --no-such-druid-flag" "$WORK/help.out" || fail "unknown flag: $(cat "$WORK/help.out")"
VALIDATE=$("$ETCDBR_SOURCE_DIR/scripts/build-helm.sh" --paths | tail -1)
if [ -x "$VALIDATE" ]; then
    "$VALIDATE" "$M" >"$WORK/validate.out" 2>&1 || { cat "$WORK/validate.out" >&2; fail "k8svalidate refused the fixture"; }
    echo "a. k8svalidate: $(tail -1 "$WORK/validate.out")"
else
    [ "${ETCDBR_REQUIRE_TOOLS:-0}" = 1 ] && fail "$VALIDATE not built (run scripts/build-helm.sh)"
    echo "a. NOT CHECKED: the manifest's schema ($VALIDATE not built)"
fi
echo "a. the fixture's ${#ARGS[@]} args, the TLS, profiling and --etcd-process-name args accepted; an unknown flag refused"

# b. the container, run
P=$WORK/pod
mkdir -p "$P/var/etcd/data" "$P/var/etcd/config" "$P/home" "$P/sa"
start_etcd etcd-main-0 "$P/var/etcd/data/new.etcd"
CPORT=${ETCD_EP##*:}
SPORT=$(free_port)
APIPORT=$(free_port) # nothing listens there
PEER=etcd-main-0.etcd-main-peer.shoot--dev--druid.svc
localize() {
    sed -e "s|/var/etcd/|$P/var/etcd/|g" -e "s|/home/nonroot|$P/home|g" \
        -e "s|etcd-main-local:2379|127.0.0.1:$CPORT|g" -e "s|etcd-main-client:2379|127.0.0.1:$CPORT|g" \
        -e "s|$PEER:2380|127.0.0.1:$ETCD_PEER_PORT|g" -e "s|$PEER:2379|127.0.0.1:$CPORT|g" \
        -e "s|^--server-port=8080$|--server-port=$SPORT|"
}
mapfile -t RUN < <(printf '%s\n' "${ARGS[@]}" | localize)
chart_block "$M" etcd.conf.yaml | localize >"$P/var/etcd/config/etcd.conf.yaml"
grep -q "127.0.0.1:$ETCD_PEER_PORT" "$P/var/etcd/config/etcd.conf.yaml" || fail "etcd.conf.yaml not localized"
mapfile -t ENVS < <(chart_envs "$M" backup-restore)
[ "${ENVS[*]}" = "STORAGE_CONTAINER=etcd-main-bucket" ] || fail "the fixture's plain env: ${ENVS[*]}"
mkdir -p "$P/home/etcd-main-bucket" # the hostPath volume
# the pod's service account, and an API server address where none answers
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/api.key" -out "$P/sa/ca.crt" -days 1 \
    -subj /CN=none >/dev/null 2>&1 || fail "openssl"
echo token >"$P/sa/token"
echo shoot--dev--druid >"$P/sa/namespace"
printf '%q ' "${RUN[@]}" >"$WORK/args.log"
(cd "$P/home" && exec env "${ENVS[@]}" POD_NAME=etcd-main-0 POD_NAMESPACE=shoot--dev--druid HOME="$P/home" \
    ETCD_CONF="$P/var/etcd/config/etcd.conf.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 \
    KUBERNETES_SERVICE_PORT="$APIPORT" ETCDBR_K8S_SERVICE_ACCOUNT_DIR="$P/sa" \
    "$ETCDBR_BIN" "${RUN[@]}") >"$WORK/sidecar.log" 2>&1 &
SIDECAR=$!
PIDS+=("$SIDECAR")
H=http://127.0.0.1:$SPORT
code() { curl -s -m 10 -o "$WORK/body" -w '%{http_code}' "$H$1" || true; }
for i in $(seq 1 150); do
    [ "$(code /livez)" = 200 ] && break
    kill -0 "$SIDECAR" 2>/dev/null || { cat "$WORK/args.log"; tail -20 "$WORK/sidecar.log"; fail "the sidecar exited"; }
    sleep 0.2
done
[ "$(code /livez)" = 200 ] || { tail -20 "$WORK/sidecar.log"; fail "/livez"; }
wait_healthz "$H" "$WORK/sidecar.log"
STORE=$P/home/etcd-main-bucket/etcd-main/v2
for i in $(seq 1 150); do
    find "$STORE" -name 'Full-*' 2>/dev/null | grep -q . && break
    sleep 0.2
done
find "$STORE" -name 'Full-*' | grep -q . || { tail -20 "$WORK/sidecar.log"; fail "no full snapshot under $STORE"; }
[ "$(code /config)" = 200 ] || fail "/config: $(cat "$WORK/body")"
grep -qx 'name: "etcd-main-0"' "$WORK/body" || fail "/config: $(cat "$WORK/body")"
for i in $(seq 1 20); do ectl put "/registry/druid/$i" "v$i" >/dev/null; done
ok=""
for i in $(seq 1 60); do # 500 "not active" until the snapshotter's start-up decision is made
    [ "$(code /snapshot/delta)" = 200 ] && jq -e '.kind == "Incr"' "$WORK/body" >/dev/null 2>&1 && ok=1 && break
    sleep 0.5
done
[ -n "$ok" ] || { tail -20 "$WORK/sidecar.log"; fail "/snapshot/delta: $(cat "$WORK/body")"; }
find "$STORE" -name 'Incr-*' | grep -q . || fail "no delta under $STORE"
grep -qi "lease" "$WORK/sidecar.log" || fail "the sidecar's log says nothing of its Leases: were the Lease flags read?"
kill -TERM "$SIDECAR"
wait "$SIDECAR" && rc=0 || rc=$?
[ "$rc" = 0 ] || { tail -20 "$WORK/sidecar.log"; fail "the sidecar's exit status after SIGTERM: $rc"; }
echo "b. the fixture's container against etcd $(etcd --version | head -1 | awk '{print $3}'): /livez, /healthz, /config, a full and a delta in the Local store, exit 0 on SIGTERM"
echo "PASS: etcd-druid's backup-restore container runs etcdbr"
