# chart_lib.sh: helpers of the chart tests (test_helm_chart*.sh), sourced after lib.sh.

# chart_tools: HELM and VALIDATE, the binaries scripts/build-helm.sh builds; when one is missing
# the test is skipped (exit 77), or fails under ETCDBR_REQUIRE_TOOLS=1. helm's own state goes to
# the work dir.
chart_tools() {
    local t
    { read -r HELM; read -r VALIDATE; } < <("$ETCDBR_SOURCE_DIR/scripts/build-helm.sh" --paths)
    for t in "$HELM" "$VALIDATE"; do
        if [ ! -x "$t" ]; then
            [ "${ETCDBR_REQUIRE_TOOLS:-0}" = 1 ] && fail "$t not built (run scripts/build-helm.sh)"
            echo "SKIP: $t not built (run scripts/build-helm.sh)"
            exit 77
        fi
    done
    export HELM_CACHE_HOME=$WORK/helm-cache HELM_CONFIG_HOME=$WORK/helm-config HELM_DATA_HOME=$WORK/helm-data
}

# chart_sidecar_args MANIFEST: the backup-restore container's args, one a line
chart_sidecar_args() {
    awk '/^      - name: backup-restore$/ { c = 1; next }
         c && /^        args:$/ { a = 1; next }
         a && /^        - / { sub(/^        - /, ""); print; next }
         a && /^        #/ { next }
         a { exit }' "$1"
}

# chart_container MANIFEST NAME: the block of the (init) container NAME of the StatefulSet, from
# its "- name:" line to the next container or the pod's volumes
chart_container() {
    awk -v c="      - name: $2" '$0 == c { in_c = 1; print; next }
        in_c && (/^      - name: / || /^      [a-zA-Z]/ || /^  [a-zA-Z]/) { exit } in_c { print }' "$1"
}

# chart_block MANIFEST KEY: a config map's block scalar "  KEY: |-" (its lines indented by 4)
chart_block() {
    awk -v k="  $2: |-" '$0 == k { b = 1; next } b && /^    / { print substr($0, 5); next }
        b && /^$/ { print; next } b { exit }' "$1"
}

# chart_env MANIFEST CONTAINER NAME: the value of an env entry of a container
chart_env() {
    awk -v c="      - name: $2" -v e="        - name: $3" '$0 == c { in_c = 1; next }
        in_c && /^      - name: / { exit }
        in_c && $0 == e { v = 1; next } v { sub(/^ *value: /, ""); print; exit }' "$1"
}

# chart_envs MANIFEST CONTAINER: NAME=value of each env entry of a container with a plain value
chart_envs() {
    awk -v c="      - name: $2" '$0 == c { in_c = 1; next }
        in_c && /^      - name: / { exit }
        in_c && /^        - name: / { n = $3; next }
        in_c && n != "" && /^          value: / { v = $0; sub(/^          value: /, "", v); print n "=" v; n = ""; next }
        in_c && /^          valueFrom:/ { n = "" }' "$1"
}

# chart_secret_files MANIFEST SECRET DIR: writes each data key of the rendered Secret SECRET
# into DIR (decoded), as a secret volume holds them; nothing when there is no such Secret.
chart_secret_files() {
    local k v
    while read -r k v; do
        mkdir -p "$3"
        base64 -d <<<"$v" >"$3/$k"
    done < <(awk -v s="  name: $2" '/^kind: / { sec = ($2 == "Secret"); found = 0; d = 0 }
        sec && $0 == s { found = 1 } found && /^data:/ { d = 1; next }
        d && /^  [^ ]/ { k = $1; sub(/:$/, "", k); print k, $2; next } d { d = 0 }' "$1")
}

# chart_localize ROOT IP INDEX RELEASE NAMESPACE: a sed filter that moves a rendered pod of
# release RELEASE onto this machine: /var/etcd/ and /home/nonroot/ under ROOT, member j's peer
# service name (and the pod's own, $(POD_NAME)...) to 127.0.0.(j+1), <release>-etcd-local,
# -client and 0.0.0.0 to IP, $(POD_NAME) to member INDEX's name.
chart_localize() {
    local root=$1 ip=$2 i=$3 n=$4-etcd ns=$5 j
    local args=(-e "s|/var/etcd/|$root/var/etcd/|g" -e "s|/var/etcd-backup|$root/var/etcd-backup|g"
        -e "s|/var/\.gcp/|$root/var/.gcp/|g" -e "s|/var/etcdbr/|$root/var/etcdbr/|g" -e "s|/home/nonroot/|$root/home/|g"
        -e "s|\$(POD_NAME)\.$n-peer\.$ns\.svc|$ip|g")
    for j in 0 1 2 3 4; do args+=(-e "s|$n-$j\.$n-peer\.$ns\.svc|127.0.0.$((j + 1))|g"); done
    args+=(-e "s|$n-local|$ip|g" -e "s|$n-client|$ip|g" -e "s|0\.0\.0\.0|$ip|g" -e "s|\$(POD_NAME)|$n-$i|g")
    sed "${args[@]}"
}

# chart_start_pod MANIFEST ROOT IP INDEX RELEASE NAMESPACE: starts the pod's two containers as
# processes: the sidecar (etcdbrctl with the rendered args and env) and the etcd container
# (bootstrap.sh). Sets POD_SIDECAR, POD_BOOT (PIDs), POD_BACKUP_EP, POD_STORE; logs in ROOT.
chart_start_pod() {
    local m=$1 root=$2 ip=$3 i=$4 rel=$5 ns=$6 args
    mkdir -p "$root/var/etcd/data" "$root/var/etcd/config" "$root/var/etcd/run" "$root/var/etcd/bootstrap" "$root/home"
    chart_block "$m" etcd.conf.yaml | chart_localize "$root" "$ip" "$i" "$rel" "$ns" >"$root/var/etcd/config/etcd.conf.yaml"
    chart_block "$m" bootstrap.sh | chart_localize "$root" "$ip" "$i" "$rel" "$ns" >"$root/var/etcd/bootstrap/bootstrap.sh"
    grep -q "etcd --config-file" "$root/var/etcd/bootstrap/bootstrap.sh" || fail "bootstrap.sh not found in $m"
    mapfile -t args < <(chart_sidecar_args "$m" | chart_localize "$root" "$ip" "$i" "$rel" "$ns")
    [ "${args[0]:-}" = server ] || fail "sidecar args: ${args[*]}"
    # the sidecar's env entries with a plain value (STORAGE_CONTAINER, *_APPLICATION_CREDENTIALS)
    local envs=() line
    while IFS= read -r line; do envs+=("$line"); done < <(chart_envs "$m" backup-restore | chart_localize "$root" "$ip" "$i" "$rel" "$ns")
    # the store Secret, as the kubelet mounts it: one file per key
    chart_secret_files "$m" "$rel-etcd-backup" "$root/var/etcd-backup"
    POD_STORE=$(chart_env "$m" backup-restore STORAGE_CONTAINER | chart_localize "$root" "$ip" "$i" "$rel" "$ns")
    POD_BACKUP_EP=$(chart_env "$m" etcd BACKUP_ENDPOINT | chart_localize "$root" "$ip" "$i" "$rel" "$ns")
    [ -z "$POD_STORE" ] || mkdir -p "$POD_STORE"
    printf '%s sidecar:' "$rel-etcd-$i" >>"$root/args.log"
    printf ' %q' "${args[@]}" >>"$root/args.log"
    echo >>"$root/args.log"
    env ${envs[@]+"${envs[@]}"} POD_NAME="$rel-etcd-$i" POD_NAMESPACE="$ns" HOME="$root/home" \
        ETCD_CONF="$root/var/etcd/config/etcd.conf.yaml" "$ETCDBR_BIN" "${args[@]}" >>"$root/sidecar.log" 2>&1 &
    POD_SIDECAR=$!
    PIDS+=("$POD_SIDECAR")
    POD_BACKUP_CA=$(chart_env "$m" etcd BACKUP_CA | chart_localize "$root" "$ip" "$i" "$rel" "$ns")
    chart_start_bootstrap "$root" "$POD_BACKUP_EP" "$POD_BACKUP_CA"
}

# chart_start_bootstrap ROOT BACKUP_EP [BACKUP_CA]: (re)starts the etcd container of the pod
# under ROOT (its sidecar at BACKUP_EP, TLS checked against BACKUP_CA); sets POD_BOOT.
chart_start_bootstrap() {
    (cd "$1" && exec env BACKUP_ENDPOINT="$2" BACKUP_CA="${3:-}" sh "$1/var/etcd/bootstrap/bootstrap.sh") \
        >>"$1/etcd-container.log" 2>&1 &
    POD_BOOT=$!
    PIDS+=("$POD_BOOT")
}
