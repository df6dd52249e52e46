#!/usr/bin/env bash
# Three pods of chart/etcdbr (replicas 3, S3 on s3rver) run on loopback as Kubernetes would run
# them: member i on 127.0.0.(i+1) (the peer service's DNS names resolved to those addresses), each
# with the rendered etcd config, bootstrap.sh, the sidecar's exact args and env, and the store
# Secret written out as the kubelet mounts it (the S3 credentials directory). Only paths, host
# names, $(POD_NAME) and the sidecars' ports (one port per machine here, one per pod in a
# cluster) differ; the Kubernetes API is tests/servers/fake_k8s_apiserver.py (a fake, light enough
# for three pods; test_chart_apiserver.sh runs a sidecar against a real kube-apiserver) holding the Lease objects the chart renders. The three etcd members form one
# cluster under the chart's member names; the
# chart's readiness probe for several members (etcd's /health on the metrics port) turns 200 on
# each; writes reach the store through the backup leader's sidecar; the sidecars renew the
# snapshot Leases as the Go tool does (full: the full's revision; delta: renewed every delta
# period, "0" while the full has no delta, then the last delta's revision) and their member
# Leases (one Leader); a restore of the store has every key. helm from scripts/build-helm.sh, s3rver from scripts/test-servers.sh: missing,
# the test is skipped (77), or fails under ETCDBR_REQUIRE_TOOLS=1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chart_lib.sh"
make_workdir
CHART=$ETCDBR_SOURCE_DIR/chart/etcdbr
chart_tools
V=$(etcd_versions | tail -1)
use_etcd "$V"
start_s3rver etcd-backups
# the Kubernetes API for the Leases: the fake API server of the Lease tests, with the Lease
# objects the chart renders created in it
command -v openssl >/dev/null || fail "openssl not found"
SA=$WORK/sa
mkdir -p "$SA"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/api.key" -out "$SA/ca.crt" -days 1 \
    -subj /CN=fake-apiserver -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 || fail "openssl"
echo "chart-token" >"$SA/token"
cp "$SA/token" "$WORK/valid-token"
echo default >"$SA/namespace"
python3 "$ETCDBR_SOURCE_DIR/tests/servers/fake_k8s_apiserver.py" --cert "$SA/ca.crt" --key "$WORK/api.key" \
    --token-file "$WORK/valid-token" --log "$WORK/requests.jsonl" --port-file "$WORK/api.port" 2>"$WORK/api.log" &
PIDS+=("$!")
for i in $(seq 1 100); do [ -s "$WORK/api.port" ] && break; sleep 0.05; done
[ -s "$WORK/api.port" ] || fail "the fake API server did not start: $(cat "$WORK/api.log")"
API=https://127.0.0.1:$(cat "$WORK/api.port")
fake() { curl -sf --cacert "$SA/ca.crt" -X "$1" "$API$2" ${3:+-H 'Content-Type: application/json' -d "$3"}; }
# what the kubelet gives every pod (the token directory stands in for the mounted service account)
export KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=${API##*:} ETCDBR_K8S_SERVICE_ACCOUNT_DIR=$SA
REL=cl
NS=etcd-test
N=$REL-etcd
CPORT=$(free_port)
PPORT=$(free_port)
MPORT=$(free_port)
ROOT=()
BACKUP_EP=()
SIDECARS=()
for i in 0 1 2; do
    ip=127.0.0.$((i + 1))
    sport=$(free_port)
    "$HELM" template "$REL" "$CHART" --namespace "$NS" -f "$CHART/ci/s3-values.yaml" \
        --set backup.leases.heartbeatDuration=1s \
        --set backup.s3.region=us-east-1 --set backup.s3.accessKeyID="$S3_ACCESS_KEY" \
        --set backup.s3.secretAccessKey="$S3_SECRET_KEY" --set backup.s3.endpoint="$S3_ENDPOINT" \
        --set backup.deltaSnapshotPeriod=1s --set backup.schedule="0 0 1 1 *" \
        --set backup.garbageCollectionPeriod=0s --set backup.leaderElection.reelectionPeriod=2s \
        --set servicePorts.etcd.client="$CPORT" --set servicePorts.etcd.peer="$PPORT" \
        --set servicePorts.etcd.metrics="$MPORT" --set servicePorts.etcdBackupRestore.server="$sport" \
        >"$WORK/pod-$i.yaml"
    ROOT[i]=$WORK/pod-$i
    if [ "$i" = 0 ]; then
        # the chart's Lease objects, created as `helm install` would
        leases=$(awk '/^kind: Lease$/ { l = 1; next } l && /^  name: / { print $2; l = 0 }' "$WORK/pod-0.yaml" | sort | tr '\n' ' ')
        [ "$leases" = "$N-0 $N-1 $N-2 delta-snapshot-revisions full-snapshot-revisions " ] || fail "rendered Leases: $leases"
        for l in $leases; do fake PUT "/fake/leases/$NS/$l" '{"spec":{}}' >/dev/null || fail "creating Lease $l"; done
    fi
    chart_start_pod "$WORK/pod-$i.yaml" "${ROOT[i]}" "$ip" "$i" "$REL" "$NS"
    BACKUP_EP[i]=$POD_BACKUP_EP
    SIDECARS[i]=$POD_SIDECAR
    [ -s "${ROOT[i]}/var/etcd-backup/secretAccessKey" ] || fail "pod $i: the store Secret has no secretAccessKey"
done
grep -q "name: AWS_APPLICATION_CREDENTIALS" "$WORK/pod-0.yaml" || fail "no AWS_APPLICATION_CREDENTIALS in the sidecar's env"

# readiness (replicas > 1): etcd's /health on the metrics port of every member
# (a sidecar that exits fails the test at once)
alive() {
    local i
    for i in 0 1 2; do
        kill -0 "${SIDECARS[i]}" 2>/dev/null || { tail -5 "${ROOT[i]}/sidecar.log"; fail "pod $i: the sidecar exited"; }
    done
}
end=$((SECONDS + 90))
while [ "$SECONDS" -lt "$end" ]; do
    alive
    ready=0
    for i in 0 1 2; do
        [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.$((i + 1)):$MPORT/health")" = 200 ] && ready=$((ready + 1))
    done
    [ "$ready" = 3 ] && break
    sleep 0.2
done
if [ "$ready" != 3 ]; then
    for i in 0 1 2; do tail -5 "${ROOT[i]}/sidecar.log" "${ROOT[i]}/etcd-container.log"; done
    fail "only $ready of 3 members ready"
fi
EP=http://127.0.0.1:$CPORT
names=$(etcdctl --endpoints="$EP" member list -w json | jq -r '[.members[].name] | sort | join(",")')
[ "$names" = "$N-0,$N-1,$N-2" ] || fail "members: $names"

# the store and the snapshot Leases, as the backup leader's sidecar keeps them (the Go tool's
# heartbeat.go): after each delta period the delta-snapshot Lease gets renewTime now, and
# holderIdentity the latest set's last delta revision when higher, or "0" when unset and the set
# has no delta; the full-snapshot Lease holds the latest full's revision.
export AWS_APPLICATION_CREDENTIALS=${ROOT[0]}/var/etcd-backup
store=(--storage-provider=S3 --store-container=etcd-backups --store-prefix="$N")
lease_holder() { fake GET "/fake/leases/$NS/$1" | jq -r '.spec.holderIdentity // ""'; }
lease_renewed() { fake GET "/fake/leases/$NS/$1" | jq -r '.spec.renewTime // ""'; }
# latest_set: "<full's last revision> <number of deltas> <last delta's last revision or 0>"
latest_set() {
    "$ETCDBR_BIN" list "${store[@]}" -o json 2>/dev/null |
        jq -r '.sets | max_by(.full.last_revision) // empty |
            "\(.full.last_revision) \(.deltas | length) \(.deltas[-1].last_revision // 0)"'
}
# expect_snapshot_leases FULL DELTA: until the full-snapshot Lease holds FULL and the
# delta-snapshot Lease DELTA, and the latter's renewTime moves on after that (renewed every
# delta period, 1 s here)
expect_snapshot_leases() {
    local full=$1 delta=$2 t0="" t end=$((SECONDS + 30))
    while [ "$SECONDS" -lt "$end" ]; do
        alive
        if [ "$(lease_holder full-snapshot-revisions)" = "$full" ] &&
            [ "$(lease_holder delta-snapshot-revisions)" = "$delta" ]; then
            t=$(lease_renewed delta-snapshot-revisions)
            [ -z "$t0" ] && t0=$t
            [ -n "$t" ] && [[ "$t" > "$t0" ]] && { echo "Leases: full $full, delta $delta, renewed $t0 -> $t"; return 0; }
        fi
        sleep 0.2
    done
    for l in full-snapshot-revisions delta-snapshot-revisions; do echo "Lease $l: $(lease_holder "$l") renewTime $(lease_renewed "$l")"; done
    fail "the snapshot Leases were not renewed as expected: full $full and delta $delta (renewTime moving) wanted"
}

# before any write: the backup leader's first full, no delta; the delta Lease says "0"
set=""
end=$((SECONDS + 60))
while [ "$SECONDS" -lt "$end" ]; do
    alive
    set=$(latest_set) || set=""
    [ -n "$set" ] && break
    sleep 0.2
done
[ -n "$set" ] || { for i in 0 1 2; do tail -8 "${ROOT[i]}/sidecar.log"; done; fail "no full snapshot in the store"; }
read -r full0 ndeltas _ <<<"$set"
[ "$ndeltas" = 0 ] || fail "the store has $ndeltas deltas before any write: $set"
expect_snapshot_leases "$full0" 0

for i in $(seq 1 30); do etcdctl --endpoints="http://127.0.0.$((i % 3 + 1)):$CPORT" put "/registry/cl/$i" "v$i" >/dev/null; done
rev=$(current_revision "$EP")
dump_keys "$EP" >"$WORK/before.jsonl"

# the store reaches rev in deltas after that full (the backup leader's sidecar)
last=0
end=$((SECONDS + 60))
while [ "$SECONDS" -lt "$end" ]; do
    alive
    read -r full ndeltas last <<<"$(latest_set)" || last=0
    [ "${last:-0}" -ge "$rev" ] && break
    sleep 0.2
done
if [ "${last:-0}" -lt "$rev" ]; then
    for i in 0 1 2; do tail -8 "${ROOT[i]}/sidecar.log"; done
    fail "the store's last delta revision ${last:-0} < etcd's $rev"
fi
[ "$full" = "$full0" ] || fail "a new full snapshot ($full) instead of deltas after $full0"
# one backup leader: the leader election flags the chart passes work (one sidecar stored snapshots)
writers=$(grep -l "snapshot .* stored" "${ROOT[0]}/sidecar.log" "${ROOT[1]}/sidecar.log" "${ROOT[2]}/sidecar.log" | wc -l)
[ "$writers" = 1 ] || fail "$writers sidecars stored snapshots; one (the backup leader) should"
echo "store at revision $last ($ndeltas deltas after the full at $full; etcd $rev), written by one sidecar"
# the delta Lease follows the last delta; every member renews its own Lease, exactly one Leader
expect_snapshot_leases "$full0" "$last"
end=$((SECONDS + 30))
while [ "$SECONDS" -lt "$end" ]; do
    ok=1
    for i in 0 1 2; do [[ "$(lease_holder "$N-$i")" =~ ^[0-9a-f]+:[0-9a-f]+:(Leader|Member)$ ]] || ok=0; done
    [ "$ok" = 1 ] && break
    sleep 0.2
done
for l in "$N-0" "$N-1" "$N-2"; do echo "Lease $l: $(lease_holder "$l")"; done
[ "$ok" = 1 ] || fail "the member Leases were not renewed as expected"
leaders=0
for i in 0 1 2; do case "$(lease_holder "$N-$i")" in *:Leader) leaders=$((leaders + 1)) ;; esac; done
[ "$leaders" = 1 ] || fail "$leaders member Leases say Leader"

# a restore of the store has every key
"$ETCDBR_BIN" restore "${store[@]}" --data-dir="$WORK/restored" --snapstore-temp-directory="$WORK/tmp" \
    --restoration-temp-snapshots-dir="$WORK/restore.tmp" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; fail "restore"; }
start_etcd restored "$WORK/restored"
dump_keys "$ETCD_EP" >"$WORK/after.jsonl"
cmp "$WORK/before.jsonl" "$WORK/after.jsonl" || fail "the restored keyspace differs from the cluster's"
echo "PASS: three chart pods on loopback form one cluster, are ready by etcd's /health, back up to S3 (revision $last), renew the chart's Leases (fake API server), and the store restores every key (etcd $V)"
