#!/usr/bin/env bash
# chart/etcdbr: for every values file of chart/etcdbr/ci (Local, S3, ABS, GCS, Swift, OSS, ECS,
# no store) and for TLS (openssl-made certificates for etcd client, peer and the sidecar):
# `helm lint --strict` passes, `helm template` renders, tests/tools/k8svalidate accepts every
# rendered document as its k8s.io/api type (strict: unknown fields are errors) with resolved
# references, every flag the sidecar is given is one `etcdbrctl server` accepts (from the
# binary's `__flags-md`), and the rendering says what the values ask (provider credentials,
# readiness probe per member count, leases, alert rules). The chart's copy of the alert rules
# equals deploy/prometheus/etcdbr-alerts.yaml. Broken values (tests/helm-fixtures/broken-*.yaml)
# and broken manifests must be rejected: the checks can fail.
# helm and the validator come from scripts/build-helm.sh: missing, the test is skipped (77),
# or fails under ETCDBR_REQUIRE_TOOLS=1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chart_lib.sh"
make_workdir
CHART=$ETCDBR_SOURCE_DIR/chart/etcdbr
FIX=$ETCDBR_SOURCE_DIR/tests/helm-fixtures
chart_tools
REL=etcdbr-ci
NS=etcd-ci

# 1. the alert rules: one file in two places
cmp "$ETCDBR_SOURCE_DIR/deploy/prometheus/etcdbr-alerts.yaml" "$CHART/files/etcdbr-alerts.yaml" ||
    fail "chart/etcdbr/files/etcdbr-alerts.yaml differs from deploy/prometheus/etcdbr-alerts.yaml: copy it"

# 2. the flags `etcdbrctl server` accepts, from the binary's own table (one "--name" a line)
"$ETCDBR_BIN" __flags-md >"$WORK/flags.md"
awk -F'|' '/^\| `-/ && $7 ~ /(^|[ ,])server(,|[ ]|$)/ { print $2 }' "$WORK/flags.md" |
    grep -o -- '--[a-z0-9-]*' | sort -u >"$WORK/server-flags"
[ "$(wc -l <"$WORK/server-flags")" -gt 50 ] || fail "could not read the server flags from __flags-md"
grep -qx -- --storage-provider "$WORK/server-flags" || fail "--storage-provider not among the server flags"

# check_flags FILE: every sidecar flag is a server flag
check_flags() {
    local args bad=0 f
    args=$(chart_sidecar_args "$1")
    [ "$(sed -n 1p <<<"$args")" = server ] || { echo "sidecar does not run 'server': $(sed -n 1p <<<"$args")" >&2; return 1; }
    while IFS= read -r f; do
        case $f in server) continue ;; --*) ;; *) echo "sidecar argument '$f' is not a --flag" >&2; bad=1; continue ;; esac
        grep -qx -- "${f%%=*}" "$WORK/server-flags" || { echo "sidecar flag ${f%%=*} is not a flag of etcdbrctl server" >&2; bad=1; }
    done <<<"$args"
    return $bad
}
# render NAME ARGS...: lint, template and validate; the manifest in $WORK/NAME.yaml
render() {
    local name=$1
    shift
    "$HELM" lint --strict "$CHART" "$@" >"$WORK/$name.lint" 2>&1 || { cat "$WORK/$name.lint" >&2; fail "$name: helm lint --strict"; }
    "$HELM" template "$REL" "$CHART" --namespace "$NS" "$@" >"$WORK/$name.yaml" 2>"$WORK/$name.err" ||
        { cat "$WORK/$name.err" >&2; fail "$name: helm template"; }
    "$VALIDATE" "$WORK/$name.yaml" >"$WORK/$name.validate" 2>&1 || { cat "$WORK/$name.validate" >&2; fail "$name: k8svalidate"; }
    check_flags "$WORK/$name.yaml" || fail "$name: sidecar flags"
    echo "$name: $(tail -1 "$WORK/$name.validate"), $(chart_sidecar_args "$WORK/$name.yaml" | grep -c -- '^--') sidecar flags"
}
has() { grep -qF -- "$2" "$WORK/$1.yaml" || fail "$1: the manifest lacks: $2"; }
hasnt() { ! grep -qF -- "$2" "$WORK/$1.yaml" || fail "$1: the manifest must not contain: $2"; }

# 3. every values file
n=0
for v in "$CHART"/ci/*-values.yaml; do
    name=$(basename "$v" -values.yaml)
    render "$name" -f "$v"
    n=$((n + 1))
done
[ "$n" -ge 6 ] || fail "only $n values files in chart/etcdbr/ci"
render default

# what each rendering must say
has local "--storage-provider=Local"
has local "value: /home/nonroot/etcd-backups"
has local "path: /var/lib/etcdbr-backups/etcd-backups"
has local "path: /healthz"
has s3 "--storage-provider=S3"
has s3 "name: AWS_APPLICATION_CREDENTIALS"
has s3 "secretName: $REL-etcd-backup"
has s3 "replicas: 3"
has s3 "path: /health"
has s3 "--enable-snapshot-lease-renewal=true"
has s3 "--enable-member-lease-renewal=true"
has s3 "kind: PrometheusRule"
has s3 "kind: PodDisruptionBudget"
has s3 "minAvailable: 2"
has s3 "initial-cluster: $REL-etcd-0=http://$REL-etcd-0.$REL-etcd-peer.$NS.svc:2380,$REL-etcd-1="
for m in 0 1 2; do has s3 "name: $REL-etcd-$m"; done
has s3 "name: full-snapshot-revisions"
has s3 "kind: RoleBinding"
has abs "name: AZURE_APPLICATION_CREDENTIALS"
has abs "etcdbr-alerts.yaml: |-"
hasnt abs "kind: PrometheusRule"
hasnt abs "--enable-member-lease-renewal"
hasnt abs "kind: Role"
has gcs "value: /var/.gcp/serviceaccount.json"
has gcs "serviceaccount.json: "
has gcs "--compression-policy=zlib"
has gcs "name: ETCD_PASSWORD"
hasnt gcs "--etcd-password"
has swift "name: OPENSTACK_APPLICATION_CREDENTIALS"
has oss "name: ALICLOUD_APPLICATION_CREDENTIALS"
has oss "storageEndpoint: "
has ecs "name: ECS_SECRET_ACCESS_KEY"
hasnt nobackup "--storage-provider"
hasnt default "kind: Secret"
# the alert rules in the PrometheusRule are the file's (every alert name, same count)
alerts=$(grep -c '^      - alert: ' "$CHART/files/etcdbr-alerts.yaml")
[ "$alerts" -gt 0 ] || fail "no alerts in the rules file"
[ "$(grep -c -- '- alert: Etcdbr' "$WORK/s3.yaml")" = "$alerts" ] || fail "the PrometheusRule does not carry the $alerts alerts"
# the RPO alert's threshold follows the delta period: 2 x period + 60 s, or the value given
rpo_rule() { # NAME: the threshold EtcdbrBackupRPOHigh has in the rendering NAME
    grep -o 'etcdbr_snapshot_rpo_seconds) > [0-9]*' "$WORK/$1.yaml" | awk '{ print $NF }'
}
has s3 "- alert: EtcdbrBackupRPOHigh"
[ "$(rpo_rule s3)" = 100 ] || fail "s3 (deltaSnapshotPeriod 20s): RPO threshold $(rpo_rule s3), not 100"
[ "$(rpo_rule abs)" = 180 ] || fail "abs (ConfigMap, the 60s default): RPO threshold $(rpo_rule abs), not 180"
render rpo-period -f "$CHART/ci/s3-values.yaml" --set backup.deltaSnapshotPeriod=1m30s
[ "$(rpo_rule rpo-period)" = 240 ] || fail "deltaSnapshotPeriod 1m30s: RPO threshold $(rpo_rule rpo-period), not 240"
render rpo-given -f "$CHART/ci/s3-values.yaml" --set prometheusRules.rpoThresholdSeconds=600
[ "$(rpo_rule rpo-given)" = 600 ] || fail "rpoThresholdSeconds 600: RPO threshold $(rpo_rule rpo-given)"
if "$HELM" template "$REL" "$CHART" -f "$CHART/ci/s3-values.yaml" --set backup.deltaSnapshotPeriod=soon \
    >/dev/null 2>"$WORK/rpo-bad.err"; then fail "deltaSnapshotPeriod 'soon' rendered"; fi
grep -q 'deltaSnapshotPeriod "soon"' "$WORK/rpo-bad.err" || fail "bad deltaSnapshotPeriod: $(cat "$WORK/rpo-bad.err")"

# 4. TLS for etcd client and peer traffic and for the sidecar's server, with real certificates
T=$WORK/tls
mkdir -p "$T"
mkcert() { # NAME CA SAN...
    local n=$1 ca=$2 san=""
    shift 2
    for s in "$@"; do san="${san:+$san,}DNS:$s"; done
    openssl req -newkey rsa:2048 -nodes -keyout "$T/$n.key" -subj "/CN=$n" -out "$T/$n.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$T/$n.ext"
    openssl x509 -req -in "$T/$n.csr" -CA "$T/$ca.crt" -CAkey "$T/$ca.key" -CAcreateserial -days 2 \
        -extfile "$T/$n.ext" -out "$T/$n.crt" 2>/dev/null
}
for ca in ca peer-ca br-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/$ca.key" -subj "/CN=$ca" -days 2 -out "$T/$ca.crt" 2>/dev/null
done
sans=("$REL-etcd-local" "$REL-etcd-client" "$REL-etcd-client.$NS.svc")
for m in 0 1 2; do sans+=("$REL-etcd-$m.$REL-etcd-peer.$NS.svc"); done
mkcert server ca "${sans[@]}"
mkcert client ca etcdbr-client
mkcert peer peer-ca "${sans[@]}"
mkcert br br-ca "$REL-etcd-local"
render tls -f "$CHART/ci/s3-values.yaml" \
    --set-file tls.etcd.ca="$T/ca.crt" --set-file tls.etcd.server.crt="$T/server.crt" \
    --set-file tls.etcd.server.key="$T/server.key" --set-file tls.etcd.client.crt="$T/client.crt" \
    --set-file tls.etcd.client.key="$T/client.key" --set-file tls.etcd.peer.ca="$T/peer-ca.crt" \
    --set-file tls.etcd.peer.server.crt="$T/peer.crt" --set-file tls.etcd.peer.server.key="$T/peer.key" \
    --set-file tls.etcdBackupRestore.ca="$T/br-ca.crt" --set-file tls.etcdBackupRestore.server.crt="$T/br.crt" \
    --set-file tls.etcdBackupRestore.server.key="$T/br.key"
has tls "--cacert=/var/etcd/ssl/ca/bundle.crt"
has tls "--endpoints=https://$REL-etcd-local:2379"
has tls "--server-cert=/var/etcdbr/ssl/server/tls.crt"
has tls "initial-cluster: $REL-etcd-0=https://"
has tls "peer-transport-security:"
has tls "value: https://$REL-etcd-local:8080"
has tls "type: kubernetes.io/tls"
# the secrets carry the certificates given, byte for byte
crt=$(awk -v n="$REL-etcdbr-server-tls" '$1 == "name:" && $2 == n { s = 1 } s && $1 == "tls.crt:" { print $2; exit }' "$WORK/tls.yaml")
[ "$(base64 -d <<<"$crt")" = "$(cat "$T/br.crt")" ] || fail "tls: $REL-etcdbr-server-tls does not carry the sidecar's certificate"

# 5. the checks can fail: broken values and broken manifests are rejected
# rejected REPORT WHY: k8svalidate's report names the expected problem
rejected() {
    grep -F -- "$2" "$1" >/dev/null || { cat "$1" >&2; fail "$(basename "$1"): rejected, but not for: $2"; }
    grep -F -- "$2" "$1" | head -1
}
for f in broken-quantity:"quantities must match" broken-annotation-type:"cannot unmarshal number into Go struct field ObjectMeta.spec.template.metadata.annotations"; do
    why=${f#*:}
    f=${f%%:*}
    "$HELM" template "$REL" "$CHART" --namespace "$NS" -f "$FIX/$f.yaml" >"$WORK/$f.yaml" 2>"$WORK/$f.err" ||
        fail "$f: helm template failed ($(cat "$WORK/$f.err")); the validator was to reject it"
    if "$VALIDATE" "$WORK/$f.yaml" >"$WORK/$f.validate" 2>&1; then fail "$f: k8svalidate accepted it"; fi
    rejected "$WORK/$f.validate" "$why"
done
"$HELM" template "$REL" "$CHART" --namespace "$NS" -f "$FIX/broken-flag.yaml" >"$WORK/broken-flag.yaml"
if check_flags "$WORK/broken-flag.yaml" 2>"$WORK/broken-flag.err"; then fail "broken-flag: the flag check accepted it"; fi
grep -q -- "--no-such-etcdbr-flag" "$WORK/broken-flag.err" || fail "broken-flag: rejected for another reason: $(cat "$WORK/broken-flag.err")"
for f in broken-provider broken-replicas; do
    if "$HELM" template "$REL" "$CHART" --namespace "$NS" -f "$FIX/$f.yaml" >/dev/null 2>"$WORK/$f.err"; then
        fail "$f: helm template accepted it"
    fi
    grep -q "storageProvider\|replicas" "$WORK/$f.err" || fail "$f: failed for another reason: $(cat "$WORK/$f.err")"
done
# manifests edited after rendering: a dangling Secret, a selector that selects nothing, an
# unknown field, an unknown kind
sed "s/secretName: $REL-etcd-backup/secretName: $REL-etcd-backup-typo/" "$WORK/s3.yaml" >"$WORK/bad-ref.yaml"
sed "s/^        app.kubernetes.io\/name: etcd$/        app.kubernetes.io\/name: etcd-typo/" "$WORK/s3.yaml" >"$WORK/bad-label.yaml"
sed "s/^  serviceName: /  serviceNmae: /" "$WORK/s3.yaml" >"$WORK/bad-field.yaml"
sed "s/^kind: Lease$/kind: Leese/" "$WORK/s3.yaml" >"$WORK/bad-kind.yaml"
for f in bad-ref:"refers to Secret \"$REL-etcd-backup-typo\", which is not in the manifests" \
    bad-label:"does not match the pod template labels" bad-field:"unknown field \"serviceNmae\"" \
    bad-kind:"unknown apiVersion/kind coordination.k8s.io/v1 Leese"; do
    why=${f#*:}
    f=${f%%:*}
    cmp -s "$WORK/$f.yaml" "$WORK/s3.yaml" && fail "$f: the edit did not apply"
    if "$VALIDATE" "$WORK/$f.yaml" >"$WORK/$f.validate" 2>&1; then fail "$f: k8svalidate accepted it"; fi
    rejected "$WORK/$f.validate" "$why"
done
# a changed copy of the alert rules is noticed
cp "$CHART/files/etcdbr-alerts.yaml" "$WORK/alerts-copy.yaml"
echo "# edited" >>"$WORK/alerts-copy.yaml"
if cmp -s "$ETCDBR_SOURCE_DIR/deploy/prometheus/etcdbr-alerts.yaml" "$WORK/alerts-copy.yaml"; then fail "cmp missed an edit"; fi
echo "PASS: chart/etcdbr renders and validates for $n values files, default and TLS; broken input is rejected"
