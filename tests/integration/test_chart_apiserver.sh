#!/usr/bin/env bash
# chart/etcdbr against a real Kubernetes API server: kube-apiserver (scripts/build-kube-apiserver.sh)
# on loopback over a real etcd, RBAC authorization, service-account tokens (tests/integration/
# kube_lib.sh). No kubelet, scheduler or controller manager: objects are stored, pods never run.
# 1. For the Local, S3, ABS and GCS values of chart/etcdbr/ci, each in its own namespace: the
#    rendering passes the API server's strict server-side validation (`kubectl create
#    --dry-run=server --validate=strict`: unknown or duplicate fields are errors), `helm install
#    --wait=false` is accepted, every object of the release's manifest is there (`kubectl get`),
#    and RBAC works as the API server applies it: with Leases (S3) the chart's ServiceAccount may
#    get and patch Leases and get StatefulSets in its namespace and nothing else (`kubectl auth
#    can-i`); without Leases (ABS) there is no Role and it may not. The S3 values' PrometheusRule
#    needs its CRD (tests/helm-fixtures/crd-prometheusrule.yaml, a subset of prometheus-operator's).
# 2. The sidecar with the chart's ServiceAccount and Role: a release with the Local values and both
#    Lease flags (heartbeat and delta period 1 s) is installed; its pod runs on loopback as
#    test_helm_chart_pod.sh runs one (the installed manifest's config, bootstrap.sh, the sidecar's
#    exact args), with the service-account directory a pod would mount: the API server's CA, a
#    token of the chart's ServiceAccount (`kubectl create token`), the namespace. On the real API
#    server: the member Lease's holderIdentity is <member hex>:<cluster hex>:Leader and its
#    renewTime moves; the full-snapshot Lease holds the store's full snapshot revision; the
#    delta-snapshot Lease follows the writes and its renewTime moves.
# 3. The Role without the Lease verbs: the sidecar logs the API server's 403 and names the missing
#    permission; the Role restored, renewals resume. A refused token (401) is logged the same way
#    and a new token is picked up.
# Missing kube-apiserver, kubectl, helm or etcd 3.5: skipped (77), or fails under
# ETCDBR_REQUIRE_TOOLS=1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chart_lib.sh"
source "$(dirname "$0")/kube_lib.sh"
make_workdir
CHART=$ETCDBR_SOURCE_DIR/chart/etcdbr
chart_tools
kube_tools
command -v jq >/dev/null || skip_test "no jq"
# etcd 3.5 (kube-apiserver's supported etcd) stores the API server's objects and runs the pod
V=$(ETCDBR_ETCD_VERSIONS=3.5 ETCDBR_REQUIRE_ETCD_VERSIONS=0 etcd_versions 2>/dev/null | tail -1) || V=""
[ -n "$V" ] || skip_test "etcd 3.5 not built (run scripts/build-etcd.sh)"
use_etcd "$V"
start_etcd kube "$WORK/kube.etcd"
start_kube_apiserver "$ETCD_EP"
server_version=$(curl -sf --cacert "$KUBE_CA" -H "Authorization: Bearer $KUBE_ADMIN_TOKEN" "$KUBE_API/version" | jq -r .gitVersion)
echo "kube-apiserver $server_version at $KUBE_API (etcd $V), kubectl $("$KUBECTL" version --client -o json 2>/dev/null | jq -r .clientVersion.gitVersion)"

# the PrometheusRule kind, for the S3 values' alert rules
kctl apply -f "$ETCDBR_SOURCE_DIR/tests/helm-fixtures/crd-prometheusrule.yaml" >/dev/null || fail "the PrometheusRule CRD"
kctl wait --for=condition=Established --timeout=60s crd/prometheusrules.monitoring.coreos.com >/dev/null ||
    fail "the PrometheusRule CRD is not established"

# objects MANIFEST: "<kind> <name>" of every document of a rendered manifest
objects() {
    awk '/^---/ { k = ""; m = 0; next } /^kind: / { k = $2 } /^metadata:/ { m = 1; next }
         m && /^  name: / { if (k != "") print k, $2; m = 0 } /^[^ ]/ && !/^metadata:/ { m = 0 }' "$1"
}
# can_i NS SA VERB RESOURCE: "yes" or "no", as the API server's authorizer decides for the SA
can_i() { kctl auth can-i "$3" "$4" -n "$1" --as="system:serviceaccount:$1:$2" 2>/dev/null || true; }

# 1. install the chart for each provider
for p in local s3 abs gcs; do
    ns=chart-$p
    rel=etcd
    sa=$rel-etcd
    kctl create namespace "$ns" >/dev/null || fail "$p: namespace $ns"
    "$HELM" template "$rel" "$CHART" -n "$ns" -f "$CHART/ci/$p-values.yaml" >"$WORK/$p.yaml" 2>"$WORK/$p.err" ||
        { cat "$WORK/$p.err" >&2; fail "$p: helm template"; }
    kctl create --dry-run=server --validate=strict -f "$WORK/$p.yaml" >"$WORK/$p.dry" 2>&1 ||
        { cat "$WORK/$p.dry" >&2; fail "$p: the API server's strict validation refused the rendering"; }
    "$HELM" install "$rel" "$CHART" -n "$ns" -f "$CHART/ci/$p-values.yaml" --wait=false \
        >"$WORK/$p.install" 2>&1 || { cat "$WORK/$p.install" >&2; fail "$p: helm install"; }
    [ "$("$HELM" status "$rel" -n "$ns" -o json | jq -r .info.status)" = deployed ] || fail "$p: release not deployed"
    "$HELM" get manifest "$rel" -n "$ns" >"$WORK/$p.installed.yaml"
    objects "$WORK/$p.installed.yaml" | sort >"$WORK/$p.objects"
    objects "$WORK/$p.yaml" | sort | cmp -s - "$WORK/$p.objects" || fail "$p: the release's objects differ from helm template's"
    n=0
    while read -r kind name; do
        got=$(kctl get -n "$ns" "$kind" "$name" -o jsonpath='{.kind}/{.metadata.name}' 2>&1) ||
            fail "$p: $kind $name not on the API server: $got"
        [ "$got" = "$kind/$name" ] || fail "$p: kubectl get $kind $name: $got"
        n=$((n + 1))
    done <"$WORK/$p.objects"
    [ "$n" -ge 6 ] || fail "$p: only $n objects in the release: $(cat "$WORK/$p.objects")"
    # what the API server holds is what was rendered
    [ "$(kctl get -n "$ns" statefulset "$sa" -o jsonpath='{.spec.template.spec.serviceAccountName}')" = "$sa" ] ||
        fail "$p: the StatefulSet's service account"
    replicas=$(awk '/^replicas:/ { print $2 }' "$CHART/ci/$p-values.yaml")
    [ "$(kctl get -n "$ns" statefulset "$sa" -o jsonpath='{.spec.replicas}')" = "$replicas" ] ||
        fail "$p: the StatefulSet's replicas"
    [ "$(kctl get -n "$ns" serviceaccount "$sa" -o jsonpath='{.automountServiceAccountToken}')" = false ] ||
        fail "$p: the ServiceAccount mounts its token by default"
    [ "$(kctl get -n "$ns" service "$sa-peer" -o jsonpath='{.spec.clusterIP}')" = None ] || fail "$p: the peer service is not headless"
    # no kubelet, no controller manager: no pod is created, none runs
    [ -z "$(kctl get pods -n "$ns" -o name)" ] || fail "$p: pods exist without a controller manager"
    echo "$p: $n objects accepted and stored: $(awk '{ print $1 }' "$WORK/$p.objects" | sort | uniq -c | awk '{ printf "%s%s %s", s, $1, $2; s = ", " }')"
done

# the checks can fail: an unknown field in the StatefulSet's pod template, and one in a
# PrometheusRule rule (the CRD's schema), are refused by the same strict validation
sed 's/^      serviceAccountName: /      serviceAccountNam: /' "$WORK/s3.yaml" >"$WORK/bad-sts.yaml"
sed '0,/^    - alert: /s//    - alertName: /' "$WORK/s3.yaml" >"$WORK/bad-rule.yaml"
for b in bad-sts:serviceAccountNam bad-rule:alertName; do
    ! kctl create --dry-run=server --validate=strict -n chart-s3 -f "$WORK/${b%%:*}.yaml" >"$WORK/${b%%:*}.out" 2>&1 ||
        fail "${b%%:*}: strict validation accepted an unknown field"
    grep -q "unknown field.*${b#*:}" "$WORK/${b%%:*}.out" || { cat "$WORK/${b%%:*}.out" >&2; fail "${b%%:*}: refused, but not for the unknown field ${b#*:}"; }
done
echo "strict validation refuses an unknown field in the StatefulSet and in a PrometheusRule rule"

# RBAC as the API server applies it. S3 (Leases on): the Role grants get/patch/update on leases
# and get on statefulsets, bound to the chart's ServiceAccount, and nothing more.
ns=chart-s3
sa=etcd-etcd
[ "$(kctl get -n $ns role $sa -o jsonpath='{.rules[0].resources[0]}:{.rules[0].verbs}')" = 'leases:["get","patch","update"]' ] ||
    fail "s3: the Role's lease rule: $(kctl get -n $ns role $sa -o jsonpath='{.rules}')"
[ "$(kctl get -n $ns rolebinding $sa -o jsonpath='{.roleRef.name} {.subjects[0].kind} {.subjects[0].name} {.subjects[0].namespace}')" = \
    "$sa ServiceAccount $sa $ns" ] || fail "s3: the RoleBinding"
for vr in "get leases" "patch leases" "update leases" "get statefulsets"; do
    [ "$(can_i $ns $sa $vr)" = yes ] || fail "s3: the chart's ServiceAccount may not $vr"
done
for vr in "create leases" "delete leases" "list secrets" "get pods" "patch statefulsets"; do
    [ "$(can_i $ns $sa $vr)" = no ] || fail "s3: the chart's ServiceAccount may $vr"
done
[ "$(can_i chart-abs $sa get leases)" = no ] || fail "s3: the Role reaches beyond its namespace"
# the s3 release's Leases: full, delta, one per member, created empty
[ "$(kctl get -n $ns lease -o jsonpath='{range .items[*]}{.metadata.name} {end}')" = \
    "delta-snapshot-revisions etcd-etcd-0 etcd-etcd-1 etcd-etcd-2 full-snapshot-revisions " ] ||
    fail "s3: the Leases: $(kctl get -n $ns lease -o name)"
# ABS (Leases off): no Role, and the ServiceAccount may not touch Leases
! kctl get -n chart-abs role $sa >/dev/null 2>&1 || fail "abs: a Role without Leases"
[ "$(can_i chart-abs $sa get leases)" = no ] || fail "abs: the ServiceAccount may get leases without a Role"
echo "RBAC: the s3 release's ServiceAccount may get/patch/update leases and get statefulsets, nothing else checked; abs has no Role"

# 1b. etcd-druid's shape (docs/druid.md): the StatefulSet, Services, RBAC and Leases druid
# generates, with etcdbr's image in the backup-restore container, are accepted by the API server
# as they are (strict validation, then created)
DRUID=$ETCDBR_SOURCE_DIR/tests/integration/data/druid-etcd-main.yaml
dns=$(awk '/^  namespace: / { print $2; exit }' "$DRUID")
kctl create namespace "$dns" >/dev/null || fail "druid: namespace $dns"
kctl create --dry-run=server --validate=strict -f "$DRUID" >"$WORK/druid.dry" 2>&1 ||
    { cat "$WORK/druid.dry" >&2; fail "druid: the API server's strict validation refused the manifest"; }
kctl create -f "$DRUID" >"$WORK/druid.create" 2>&1 || { cat "$WORK/druid.create" >&2; fail "druid: create"; }
img=$(kctl get statefulset -n "$dns" -o json |
    jq -r '.items[0].spec.template.spec.containers[] | select(.name == "backup-restore") | .image')
case "$img" in *etcdbr*) ;; *) fail "druid: the backup-restore container's image is '$img', not etcdbr's" ;; esac
echo "ok 1b: druid's manifest with etcdbr's container accepted and created ($(grep -c '^kind:' "$DRUID") objects)"

# 2. the sidecar with the chart's ServiceAccount, on the real API server
REL=lease
NS=etcd-lease
N=$REL-etcd
CPORT=$(free_port)
PPORT=$(free_port)
MPORT=$(free_port)
SPORT=$(free_port)
"$HELM" install "$REL" "$CHART" -n "$NS" --create-namespace -f "$CHART/ci/local-values.yaml" --wait=false \
    --set backup.leases.snapshotLeaseRenewal=true --set backup.leases.memberLeaseRenewal=true \
    --set backup.leases.heartbeatDuration=1s --set backup.deltaSnapshotPeriod=1s \
    --set backup.schedule="0 0 1 1 *" --set backup.garbageCollectionPeriod=0s \
    --set servicePorts.etcd.client="$CPORT" --set servicePorts.etcd.peer="$PPORT" \
    --set servicePorts.etcd.metrics="$MPORT" --set servicePorts.etcdBackupRestore.server="$SPORT" \
    >"$WORK/lease.install" 2>&1 || { cat "$WORK/lease.install" >&2; fail "lease: helm install"; }
"$HELM" get manifest "$REL" -n "$NS" >"$WORK/lease.yaml"
# the service-account directory the kubelet would mount for the pod: CA, token, namespace
SA=$WORK/serviceaccount
mkdir -p "$SA"
cp "$KUBE_CA" "$SA/ca.crt"
kctl create token "$N" -n "$NS" --duration=1h >"$SA/token.new" || fail "kubectl create token $N"
mv "$SA/token.new" "$SA/token"
printf '%s' "$NS" >"$SA/namespace"
export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=${KUBE_API##*:} ETCDBR_K8S_SERVICE_ACCOUNT_DIR=$SA
P=$WORK/pod
chart_start_pod "$WORK/lease.yaml" "$P" 127.0.0.1 0 "$REL" "$NS"
SIDECAR=$POD_SIDECAR
BOOT=$POD_BOOT
grep -q -- "--enable-member-lease-renewal=true" "$P/args.log" || fail "the sidecar runs without --enable-member-lease-renewal"
alive() {
    kill -0 "$SIDECAR" 2>/dev/null || { tail -20 "$P/sidecar.log"; fail "the sidecar exited"; }
    kill -0 "$BOOT" 2>/dev/null || { tail -20 "$P/etcd-container.log"; fail "the etcd container exited"; }
}
# lease NAME: "<holderIdentity> <renewTime>" on the API server
lease() { kctl get lease "$1" -n "$NS" -o jsonpath='{.spec.holderIdentity} {.spec.renewTime}'; }
# wait_lease NAME REGEX [SECONDS]: until the Lease's holderIdentity matches REGEX and its renewTime
# moves on (two different values, each with a matching holder); prints the last "<holder> <time>"
wait_lease() {
    local name=$1 re=$2 end=$((SECONDS + ${3:-60})) h t t0="" got=""
    while [ "$SECONDS" -lt "$end" ]; do
        alive
        got=$(lease "$name") || got=""
        read -r h t <<<"$got"
        if [[ "${h:-}" =~ $re ]] && [ -n "${t:-}" ]; then
            [ -z "$t0" ] && t0=$t
            if [ "$t" != "$t0" ]; then
                echo "$got"
                return 0
            fi
        fi
        sleep 0.2
    done
    tail -20 "$P/sidecar.log" >&2
    fail "Lease $name: holderIdentity ~ $re with a moving renewTime wanted; it is: $got"
}
# wait_log_fixed FILE STRING: until FILE has the fixed STRING (60 s at most)
wait_log_fixed() {
    local end=$((SECONDS + 60))
    until grep -qF -- "$2" "$1"; do
        alive
        [ "$SECONDS" -lt "$end" ] || { tail -5 "$1" >&2; fail "timed out waiting for the sidecar to log: $2"; }
        sleep 0.2
    done
}
EP=http://127.0.0.1:$CPORT
for i in $(seq 1 600); do
    etcdctl --endpoints="$EP" endpoint health >/dev/null 2>&1 && break
    alive
    sleep 0.1
done
etcdctl --endpoints="$EP" endpoint health >/dev/null 2>&1 || { tail -20 "$P/sidecar.log" "$P/etcd-container.log"; fail "the pod's etcd did not come up"; }

# the member Lease: <member ID hex>:<cluster ID hex>:Leader, renewed every second
got=$(wait_lease "$N-0" '^[0-9a-f]+:[0-9a-f]+:Leader$')
echo "member Lease $N-0 renewed on the API server: $got"
# etcd's IDs in hex (python: the uint64 IDs exceed jq's doubles)
ids=$(etcdctl --endpoints="$EP" endpoint status -w json | python3 -c 'import json, sys
h = json.load(sys.stdin)[0]["Status"]["header"]
print("%x:%x" % (h["member_id"], h["cluster_id"]))')
[ "${got%% *}" = "$ids:Leader" ] || fail "member Lease holderIdentity ${got%% *}, etcd says $ids"
[ "$(kctl get lease "$N-0" -n "$NS" -o jsonpath='{.metadata.annotations.member\.etcd\.gardener\.cloud/tls-enabled}')" = false ] ||
    fail "member Lease: the tls-enabled annotation is not \"false\""
# the chart's annotation that keeps the Lease across upgrades is still there (a merge patch)
[ "$(kctl get lease "$N-0" -n "$NS" -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}')" = keep ] ||
    fail "member Lease: the chart's helm.sh/resource-policy annotation is gone"

# the snapshot Leases: the full snapshot's revision; the delta Lease renewed every period
STORE=$POD_STORE/$N
for i in $(seq 1 600); do
    find "$STORE/v2" -name 'Full-*' 2>/dev/null | grep -q . && break
    alive
    sleep 0.1
done
full=$(find "$STORE/v2" -name 'Full-*' | sort | tail -1)
[ -n "$full" ] || fail "no full snapshot in $STORE/v2"
full_rev=$(basename "$full" | cut -d- -f3 | sed 's/^0*//')
holder() { lease "$1" | cut -d' ' -f1; }
end=$((SECONDS + 60))
while [ "$(holder full-snapshot-revisions)" != "$full_rev" ]; do
    alive
    [ "$SECONDS" -lt "$end" ] || { tail -20 "$P/sidecar.log"; fail "full-snapshot Lease: $(lease full-snapshot-revisions), revision $full_rev wanted"; }
    sleep 0.2
done
echo "full-snapshot Lease: $(lease full-snapshot-revisions) (the store's $(basename "$full"))"
for i in $(seq 1 20); do etcdctl --endpoints="$EP" put "/registry/lease/$i" "v$i" >/dev/null; done
rev=$(current_revision "$EP")
got=$(wait_lease delta-snapshot-revisions '^[0-9]+$')
end=$((SECONDS + 60))
until h=$(holder delta-snapshot-revisions) && [[ "$h" =~ ^[0-9]+$ ]] && [ "$h" -ge "$rev" ]; do
    alive
    [ "$SECONDS" -lt "$end" ] || { tail -20 "$P/sidecar.log"; fail "delta-snapshot Lease: $(lease delta-snapshot-revisions), revision $rev wanted"; }
    sleep 0.2
done
got=$(wait_lease delta-snapshot-revisions '^[0-9]+$')
echo "delta-snapshot Lease follows the deltas: $got (etcd at revision $rev)"

# 3. the Role without the Lease verbs: the API server answers 403, the sidecar says what is missing
kctl patch role "$N" -n "$NS" --type=json -p '[{"op":"replace","path":"/rules/0/verbs","value":["list"]}]' >/dev/null ||
    fail "patching the Role"
# the authorizer reads Roles from its watch cache: until it has the change
end=$((SECONDS + 30))
until [ "$(can_i "$NS" "$N" get leases)" = no ]; do
    [ "$SECONDS" -lt "$end" ] || fail "the patched Role still grants get leases"
    sleep 0.2
done
# the log line is logfmt: msg="...", its quotes escaped
forbidden() { # LEASE: the sidecar's words for the API server's 403 on GET of that Lease
    echo "Lease $1 in namespace $NS: Kubernetes API GET /apis/coordination.k8s.io/v1/namespaces/$NS/leases/$1: HTTP 403 Forbidden: leases.coordination.k8s.io \\\"$1\\\" is forbidden: User \\\"system:serviceaccount:$NS:$N\\\" cannot get resource \\\"leases\\\" in API group \\\"coordination.k8s.io\\\" in the namespace \\\"$NS\\\" (the service account lacks RBAC permission)"
}
wait_log_fixed "$P/sidecar.log" "member Lease not renewed: $(forbidden "$N-0")"
wait_log_fixed "$P/sidecar.log" "delta-snapshot Lease not updated for the last delta: $(forbidden delta-snapshot-revisions)"
grep -F "member Lease not renewed: $(forbidden "$N-0")" "$P/sidecar.log" | head -1
# the Role restored: renewals resume (the first success after a failure is logged at info)
successes=$(grep -c "member Lease $N-0 renewed" "$P/sidecar.log" || true)
kctl patch role "$N" -n "$NS" --type=json -p '[{"op":"replace","path":"/rules/0/verbs","value":["get","patch","update"]}]' >/dev/null ||
    fail "restoring the Role"
end=$((SECONDS + 60))
while [ "$(grep -c "member Lease $N-0 renewed" "$P/sidecar.log" || true)" -le "$successes" ]; do
    alive
    [ "$SECONDS" -lt "$end" ] || { tail -20 "$P/sidecar.log"; fail "no member Lease renewal after the Role was restored"; }
    sleep 0.2
done
got=$(wait_lease "$N-0" '^[0-9a-f]+:[0-9a-f]+:Leader$')
echo "the Role restored: member Lease renewed again: $got"

# a refused token: 401, said so; a new token of the ServiceAccount (as the kubelet rotates it) works
echo "not-a-token" >"$SA/token"
unauthorized="member Lease not renewed: Lease $N-0 in namespace $NS: Kubernetes API GET /apis/coordination.k8s.io/v1/namespaces/$NS/leases/$N-0: HTTP 401 Unauthorized: Unauthorized (the service account token was refused)"
wait_log_fixed "$P/sidecar.log" "$unauthorized"
grep -F "$unauthorized" "$P/sidecar.log" | head -1
successes=$(grep -c "member Lease $N-0 renewed" "$P/sidecar.log" || true)
kctl create token "$N" -n "$NS" --duration=1h >"$SA/token.new" || fail "kubectl create token $N"
mv "$SA/token.new" "$SA/token"
end=$((SECONDS + 60))
while [ "$(grep -c "member Lease $N-0 renewed" "$P/sidecar.log" || true)" -le "$successes" ]; do
    alive
    [ "$SECONDS" -lt "$end" ] || { tail -20 "$P/sidecar.log"; fail "no member Lease renewal with the new token"; }
    sleep 0.2
done
got=$(wait_lease "$N-0" '^[0-9a-f]+:[0-9a-f]+:Leader$')
echo "a refused token reported (401), a new token picked up: $got"
echo "PASS: chart/etcdbr on kube-apiserver $server_version: local, s3, abs and gcs releases accepted (strict validation, every object stored, RBAC as applied); the sidecar with the chart's ServiceAccount renews its member and snapshot Leases there, reports a 403 from a Role without the Lease verbs and a refused token"
