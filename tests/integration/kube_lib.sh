# kube_lib.sh: a real kube-apiserver on loopback (tests/integration/test_chart_apiserver.sh),
# sourced after lib.sh. kube-apiserver comes from scripts/build-kube-apiserver.sh, kubectl from
# PATH. No kubelet, scheduler or controller manager: objects are stored and served, pods never run.

# kube_tools: KUBE_APISERVER and KUBECTL; when one is missing the test is skipped (exit 77), or
# fails under ETCDBR_REQUIRE_TOOLS=1. kubectl's discovery cache goes to the work dir.
kube_tools() {
    KUBE_APISERVER=$("$ETCDBR_SOURCE_DIR/scripts/build-kube-apiserver.sh" --path)
    [ -x "$KUBE_APISERVER" ] || skip_test "$KUBE_APISERVER not built (run scripts/build-kube-apiserver.sh)"
    KUBECTL=$(command -v kubectl) || skip_test "kubectl not on PATH"
    command -v openssl >/dev/null || skip_test "no openssl"
    export KUBECACHEDIR=$WORK/kube-cache
}

# kube_certs DIR: in DIR, a CA (ca.crt, ca.key), the API server's serving pair for 127.0.0.1 and
# localhost (server.crt, server.key) and the service-account token signing pair (sa.key, sa.pub).
kube_certs() {
    local d=$1
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.crt" -days 1 \
        -subj /CN=etcdbr-test-kube-ca >/dev/null 2>&1 || fail "openssl: the CA"
    openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
        -subj /CN=kube-apiserver >/dev/null 2>&1 || fail "openssl: the serving key"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/server.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 1 \
        -extfile "$d/server.ext" -out "$d/server.crt" >/dev/null 2>&1 || fail "openssl: the serving certificate"
    openssl genrsa -out "$d/sa.key" 2048 >/dev/null 2>&1 || fail "openssl: the service-account key"
    openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" >/dev/null 2>&1 || fail "openssl: the service-account public key"
}

# start_kube_apiserver ETCD_EP: starts kube-apiserver on 127.0.0.1 (a free port) storing in the
# etcd at ETCD_EP, RBAC authorization, an admin token (group system:masters) from a token file,
# service-account tokens signed with kube_certs' pair; waits until /readyz answers ok. Sets
# KUBE_API (https://127.0.0.1:PORT), KUBE_CA (the CA of its serving certificate), KUBE_ADMIN_TOKEN,
# KUBE_APISERVER_PID, and exports KUBECONFIG (the admin token). Log: $WORK/kube-apiserver.log.
start_kube_apiserver() {
    local etcd_ep=$1 d=$WORK/kube attempt port i ready=""
    kube_certs "$d"
    KUBE_CA=$d/ca.crt
    KUBE_ADMIN_TOKEN=$(openssl rand -hex 24)
    # token,user,uid,"group"
    printf '%s,etcdbr-test-admin,etcdbr-test-admin,"system:masters"\n' "$KUBE_ADMIN_TOKEN" >"$d/tokens.csv"
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        KUBE_API=https://127.0.0.1:$port
        # --endpoint-reconciler-type=none: the `kubernetes` Service's endpoints would be this
        # loopback address, which Endpoints validation refuses; the service ranges are only
        # allocated (ClusterIPs in Service objects), nothing is routed there
        "$KUBE_APISERVER" --etcd-servers="$etcd_ep" --etcd-prefix=/registry \
            --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
            --tls-cert-file="$d/server.crt" --tls-private-key-file="$d/server.key" \
            --cert-dir="$d/certs" --token-auth-file="$d/tokens.csv" --authorization-mode=RBAC \
            --service-account-key-file="$d/sa.pub" --service-account-signing-key-file="$d/sa.key" \
            --service-account-issuer=https://kubernetes.default.svc.cluster.local \
            --service-cluster-ip-range=10.96.0.0/24 --endpoint-reconciler-type=none \
            --enable-priority-and-fairness=false --profiling=false \
            >>"$WORK/kube-apiserver.log" 2>&1 &
        KUBE_APISERVER_PID=$!
        PIDS+=("$KUBE_APISERVER_PID")
        trap 'kube_stop; cleanup' EXIT
        # a cold start on a busy 2-core machine: bootstrap RBAC roles, priority classes, ...
        for i in $(seq 1 1200); do
            if [ "$(curl -s -m 5 --cacert "$KUBE_CA" -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" \
                "$KUBE_API/readyz" 2>/dev/null)" = ok ]; then
                ready=1
                break 2
            fi
            if ! kill -0 "$KUBE_APISERVER_PID" 2>/dev/null; then
                wait "$KUBE_APISERVER_PID" 2>/dev/null || true
                if tail -20 "$WORK/kube-apiserver.log" | grep -q "address already in use"; then
                    echo "kube-apiserver: port $port taken meanwhile (attempt $attempt), trying another" >&2
                    continue 2
                fi
                tail -30 "$WORK/kube-apiserver.log" >&2
                fail "kube-apiserver exited"
            fi
            sleep 0.1
        done
        curl -s -m 5 --cacert "$KUBE_CA" -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" "$KUBE_API/readyz?verbose" >&2 || true
        tail -30 "$WORK/kube-apiserver.log" >&2
        fail "kube-apiserver not ready at $KUBE_API after 120 s"
    done
    [ -n "$ready" ] || fail "kube-apiserver: no free port after 5 attempts"
    export KUBECONFIG=$WORK/kubeconfig
    cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: etcdbr-test
  cluster:
    server: $KUBE_API
    certificate-authority: $KUBE_CA
users:
- name: etcdbr-test-admin
  user:
    token: $KUBE_ADMIN_TOKEN
contexts:
- name: etcdbr-test
  context:
    cluster: etcdbr-test
    user: etcdbr-test-admin
current-context: etcdbr-test
EOF
    chmod 600 "$KUBECONFIG"
}

# kctl ARGS...: kubectl against the test's API server (the admin token)
kctl() { "$KUBECTL" --kubeconfig="$KUBECONFIG" --request-timeout=30s "$@"; }

# kube_stop: stops kube-apiserver (SIGTERM, then SIGKILL after 30 s) before cleanup stops the
# rest: stopped together with its etcd, it retries that etcd for minutes before it exits.
kube_stop() {
    local i
    [ -n "${KUBE_APISERVER_PID:-}" ] || return 0
    kill "$KUBE_APISERVER_PID" 2>/dev/null || true
    for i in $(seq 1 300); do
        kill -0 "$KUBE_APISERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$KUBE_APISERVER_PID" 2>/dev/null || true
    wait "$KUBE_APISERVER_PID" 2>/dev/null || true
}
