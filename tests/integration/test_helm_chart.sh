#!/usr/bin/env bash
# chart/etcdbr: for every values file of chart/etcdbr/ci (Local, S3, ABS, GCS, Swift, OSS, ECS,
# no store) and for TLS (openssl-made certificates for etcd client, peer and the sidecar):
# `helm lint --strict` passes, `helm template` renders, tests/tools/k8svalidate accepts every
# rendered document as its k8s.io/api type (strict: unknown fields are errors) with resolved
# references, every flag the sidecar is given is one `etcdbrctl server` accepts (from the
# binary's `__flags-md`), and the rendering says what the values ask (provider credentials,
# readiness probe per member count, leases, alert rules); the sidecar's liveness (/livez) and
# readiness probes per member count and TLS; every container's securityContext and writable
# volumes; the Local init container's chown -R under exactly its capabilities (as root with
# setpriv; CHOWN alone must fail); images by tag and by digest; no rendering without
# images.etcd.repository; the PodDisruptionBudget for 1, 3, 5 members. The chart's copy of the alert rules
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
# the defaults, with the one value that has none (the etcd container's image)
ETCD_IMG=(--set images.etcd.repository=registry.example.com/etcd-custom-image --set images.etcd.tag=v3.5.13)
render default "${ETCD_IMG[@]}"

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

# 3a. the sidecar's probes (docs/server.md: /healthz is 503 on followers, /livez 200 on every
# member): liveness /livez always; readiness /healthz with one member, /livez with several
# probe FILE CONTAINER KIND: "SCHEME PATH" of the container's livenessProbe or readinessProbe
probe() {
    chart_container "$WORK/$1.yaml" "$2" | awk -v k="        $3:" '$0 == k { p = 1; next }
        p && /^        [a-zA-Z]/ { exit } p && $1 == "scheme:" { sc = $2 } p && $1 == "path:" { pa = $2 }
        END { print sc, pa }'
}
expect_probe() { # FILE CONTAINER KIND WANT
    [ "$(probe "$1" "$2" "$3")" = "$4" ] || fail "$1: $2 $3: '$(probe "$1" "$2" "$3")', want '$4'"
}
for f in local default gcs ecs nobackup; do
    expect_probe "$f" backup-restore livenessProbe "HTTP /livez"
    expect_probe "$f" backup-restore readinessProbe "HTTP /healthz"
    expect_probe "$f" etcd readinessProbe "HTTP /healthz"
done
for f in s3 abs swift oss; do
    expect_probe "$f" backup-restore livenessProbe "HTTP /livez"
    expect_probe "$f" backup-restore readinessProbe "HTTP /livez"
    expect_probe "$f" etcd readinessProbe "HTTP /health"
    chart_container "$WORK/$f.yaml" backup-restore | grep -q "path: /healthz" && fail "$f: a sidecar probe on /healthz with several members"
done
echo "probes: sidecar liveness /livez; readiness /healthz (1 member) or /livez (3)"

# 3b. security: the pod's seccomp profile; every container and init container non-root (the
# init container excepted), without privilege escalation, with a read-only root filesystem and
# no capabilities but the init container's CHOWN and DAC_READ_SEARCH; the writable emptyDirs
has local "type: RuntimeDefault"
for c in etcd backup-restore change-backup-bucket-permissions; do
    blk=$(chart_container "$WORK/local.yaml" "$c")
    [ -n "$blk" ] || fail "local: no container $c"
    for want in "allowPrivilegeEscalation: false" "readOnlyRootFilesystem: true" "- ALL"; do
        grep -qF -- "$want" <<<"$blk" || fail "local: container $c lacks $want"
    done
    case $c in
    change-backup-bucket-permissions)
        [ "$(awk '/^            add:$/ { a = 1; next } a && /^            - / { print $2; next } a { exit }' <<<"$blk" | tr '\n' ' ')" = "CHOWN DAC_READ_SEARCH " ] ||
            fail "local: the init container's capabilities: $(grep -A3 'add:' <<<"$blk")" ;;
    *) grep -qF "runAsNonRoot: true" <<<"$blk" || fail "local: container $c lacks runAsNonRoot"
        ! grep -q "add:" <<<"$blk" || fail "local: container $c adds capabilities" ;;
    esac
done
for m in "backup-restore:/home/nonroot" "backup-restore:/tmp" "etcd:/tmp" "etcd:/var/etcd/run/"; do
    chart_container "$WORK/local.yaml" "${m%%:*}" | grep -qx "          mountPath: ${m#*:}" || fail "local: ${m%%:*} has no volume at ${m#*:}"
done
# the init container's command with its capabilities only (as root, setpriv's bounding set),
# on a bucket as the sidecar leaves it (0700 directories of uid 65532) and a root-owned file:
# the chown must succeed, and fail without DAC_READ_SEARCH (so the check can fail)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    caps=$(chart_container "$WORK/local.yaml" change-backup-bucket-permissions |
        awk '/^            add:$/ { a = 1; next } a && /^            - / { printf ",+%s", tolower($2); next } a { exit }')
    mkbucket() {
        rm -rf "$WORK/bucket"
        mkdir -p "$WORK/bucket/etcd/v2"
        echo x >"$WORK/bucket/etcd/v2/Full-1"
        chown -R 65532:65532 "$WORK/bucket/etcd"
        chmod 700 "$WORK/bucket/etcd" "$WORK/bucket/etcd/v2"
        touch "$WORK/bucket/from-root"
    }
    mkbucket
    setpriv --bounding-set=-all"$caps" --inh-caps=-all chown -R 65532:65532 "$WORK/bucket" ||
        fail "the init container's chown fails with its capabilities ($caps)"
    [ "$(stat -c %u "$WORK/bucket/from-root")" = 65532 ] || fail "the init container's chown left a root-owned file"
    mkbucket
    if setpriv --bounding-set=-all,+chown --inh-caps=-all chown -R 65532:65532 "$WORK/bucket" 2>/dev/null; then
        fail "chown -R succeeded with CHOWN alone: the capability check proves nothing"
    fi
    echo "init container: chown -R with${caps//,+/ } only succeeds; with chown alone it fails"
else
    [ "${ETCDBR_REQUIRE_TOOLS:-0}" = 1 ] && fail "the init container's capabilities need root and setpriv"
    echo "NOT CHECKED: the init container's chown with its capabilities (needs root and setpriv)"
fi

# 3c. image references: repository:tag, or repository@digest (tag ignored) when a digest is set;
# the etcd container's image is required, with a message naming what it must hold
has default "image: etcdbr:0.1.0"
has default "image: registry.example.com/etcd-custom-image:v3.5.13"
D1=sha256:$(printf a | sha256sum | cut -d' ' -f1)
D2=sha256:$(printf b | sha256sum | cut -d' ' -f1)
render digest -f "$CHART/ci/local-values.yaml" --set images.etcdbr.digest="$D1" --set images.etcd.digest="$D2"
has digest "image: etcdbr@$D1"
has digest "image: registry.example.com/etcd-custom-image@$D2"
hasnt digest "image: etcdbr:"
hasnt digest ":v3.5.13"
[ "$(grep -c "image: registry.example.com/etcd-custom-image@$D2" "$WORK/digest.yaml")" = 2 ] || fail "digest: the etcd and init containers do not both use the etcd image's digest"
if "$HELM" template "$REL" "$CHART" "${ETCD_IMG[@]}" --set images.etcdbr.digest=sha256:abc >/dev/null 2>"$WORK/digest-bad.err"; then
    fail "a malformed digest rendered"
fi
grep -q 'images.etcdbr.digest "sha256:abc"' "$WORK/digest-bad.err" || fail "malformed digest: $(cat "$WORK/digest-bad.err")"
for v in "" "-f $CHART/ci/local-values.yaml --set images.etcd.repository="; do
    # shellcheck disable=SC2086
    if "$HELM" template "$REL" "$CHART" $v >/dev/null 2>"$WORK/noetcd.err"; then
        fail "rendered without images.etcd.repository ($v)"
    fi
    grep -q "images.etcd.repository is required: an image with sh, curl and etcd" "$WORK/noetcd.err" ||
        fail "without images.etcd.repository, another error: $(cat "$WORK/noetcd.err")"
done
if "$HELM" lint --strict "$CHART" >"$WORK/noetcd.lint" 2>&1; then fail "helm lint passed without images.etcd.repository"; fi
echo "images: tag, digest (@sha256:, both images), malformed digest and missing etcd image refused"

# 3d. the PodDisruptionBudget: quorum kept (3 members: minAvailable 2, 5: 3); none for one
# member, none when disabled
hasnt local "kind: PodDisruptionBudget"
hasnt default "kind: PodDisruptionBudget"
render five -f "$CHART/ci/s3-values.yaml" --set replicas=5
has five "kind: PodDisruptionBudget"
has five "minAvailable: 3"
render nopdb -f "$CHART/ci/s3-values.yaml" --set podDisruptionBudget.enabled=false
hasnt nopdb "kind: PodDisruptionBudget"

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
# the probes of the sidecar follow its TLS
expect_probe tls backup-restore livenessProbe "HTTPS /livez"
expect_probe tls backup-restore readinessProbe "HTTPS /livez"
render tls1 -f "$CHART/ci/local-values.yaml" --set-file tls.etcdBackupRestore.ca="$T/br-ca.crt" \
    --set-file tls.etcdBackupRestore.server.crt="$T/br.crt" --set-file tls.etcdBackupRestore.server.key="$T/br.key"
expect_probe tls1 backup-restore livenessProbe "HTTPS /livez"
expect_probe tls1 backup-restore readinessProbe "HTTPS /healthz"
expect_probe tls1 etcd readinessProbe "HTTPS /healthz"
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
