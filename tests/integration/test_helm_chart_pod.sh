#!/usr/bin/env bash
# One pod of chart/etcdbr, run on loopback as Kubernetes would run it: `helm template` with the
# Local values (one member) renders the etcd config map, the etcd container's bootstrap.sh, the
# sidecar's args and env; only the pod's paths (/var/etcd/..., /home/nonroot), its host names
# (<release>-etcd-local, the peer service's DNS names, 0.0.0.0) and $(POD_NAME) are replaced by
# this machine's. The sidecar (etcdbrctl server with exactly the chart's args) and bootstrap.sh
# (which asks the sidecar to initialize the data dir, fetches /config and runs etcd) bring up
# etcd; the chart's readiness probe (the sidecar's /healthz) turns 200; writes reach the store as
# a full snapshot and deltas. Then etcd is killed (-9) and its data dir deleted, as after a lost
# volume: bootstrap.sh run again has the sidecar restore it from the store, and etcd comes back
# with every key. helm from scripts/build-helm.sh: missing, the test is skipped (77), or fails
# under ETCDBR_REQUIRE_TOOLS=1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/chart_lib.sh"
make_workdir
CHART=$ETCDBR_SOURCE_DIR/chart/etcdbr
chart_tools
# the newest etcd available (the image's default is 3.6)
V=$(etcd_versions | tail -1)
use_etcd "$V"
echo "etcd $V"
REL=pod
NS=etcd-test
N=$REL-etcd
CPORT=$(free_port)
PPORT=$(free_port)
MPORT=$(free_port)
SPORT=$(free_port)
"$HELM" template "$REL" "$CHART" --namespace "$NS" -f "$CHART/ci/local-values.yaml" \
    --set servicePorts.etcd.client="$CPORT" --set servicePorts.etcd.peer="$PPORT" \
    --set servicePorts.etcd.metrics="$MPORT" --set servicePorts.etcdBackupRestore.server="$SPORT" \
    --set backup.deltaSnapshotPeriod=1s --set backup.schedule="0 0 1 1 *" \
    --set backup.garbageCollectionPeriod=0s >"$WORK/pod.yaml"
P=$WORK/pod
chart_start_pod "$WORK/pod.yaml" "$P" 127.0.0.1 0 "$REL" "$NS"
SIDECAR=$POD_SIDECAR
BOOT=$POD_BOOT
STORE=$POD_STORE
BACKUP_EP=$POD_BACKUP_EP
cat "$P/args.log"
grep -q "^initial-cluster: $N-0=http://127.0.0.1:$PPORT$" "$P/var/etcd/config/etcd.conf.yaml" ||
    { cat "$P/var/etcd/config/etcd.conf.yaml"; fail "etcd.conf.yaml: unexpected initial-cluster"; }
[ "$STORE" = "$P/home/etcd-backups" ] || fail "STORAGE_CONTAINER: $STORE"
[ "$BACKUP_EP" = "http://127.0.0.1:$SPORT" ] || fail "BACKUP_ENDPOINT: $BACKUP_EP"
EP=http://127.0.0.1:$CPORT
wait_etcd() {
    local i
    for i in $(seq 1 600); do
        etcdctl --endpoints="$EP" endpoint health >/dev/null 2>&1 && return 0
        kill -0 "$BOOT" 2>/dev/null || { tail -20 "$P/etcd-container.log" "$P/sidecar.log"; fail "the etcd container exited"; }
        kill -0 "$SIDECAR" 2>/dev/null || { tail -20 "$P/sidecar.log"; fail "the sidecar exited"; }
        sleep 0.1
    done
    tail -20 "$P/etcd-container.log" "$P/sidecar.log"
    fail "etcd did not come up"
}
# ready: the chart's readiness probe for one member (the sidecar's /healthz)
wait_ready() {
    local i
    for i in $(seq 1 300); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$BACKUP_EP/healthz")" = 200 ] && return 0
        sleep 0.1
    done
    tail -20 "$P/sidecar.log"
    fail "the readiness probe (/healthz) did not turn 200"
}
wait_etcd
wait_ready
grep -q "bootstrap: requesting full validation" "$P/etcd-container.log" || fail "bootstrap did not request a full validation"
# etcd's health on the metrics port (the multi-member readiness probe) answers too
curl -sf "http://127.0.0.1:$MPORT/health" >/dev/null || fail "etcd /health on the metrics port"
# etcd runs with this member's config from /config
[ "$(etcdctl --endpoints="$EP" member list -w json | jq -r '.members[0].name')" = "$N-0" ] || fail "etcd's member name is not $N-0"

for i in $(seq 1 50); do etcdctl --endpoints="$EP" put "/registry/pod/$i" "v$i" >/dev/null; done
# a full snapshot on demand, then the deltas up to rev
ok=""
for i in $(seq 1 60); do # 500 "not active" until the snapshotter's start-up decision is made
    curl -sf -m 30 "$BACKUP_EP/snapshot/full" >/dev/null && ok=1 && break
    sleep 0.5
done
[ -n "$ok" ] || fail "/snapshot/full"
etcdctl --endpoints="$EP" put /registry/pod/last after-full >/dev/null
rev=$(current_revision "$EP")
for i in $(seq 1 200); do
    last=$(curl -sf "$BACKUP_EP/snapshot/latest" | jq '[.fullSnapshot.lastRevision // 0, ((.deltaSnapshots // [])[].lastRevision)] | max')
    [ "${last:-0}" -ge "$rev" ] && break
    sleep 0.1
done
[ "${last:-0}" -ge "$rev" ] || fail "the store's latest revision ${last:-none} < etcd's $rev"
find "$STORE/$N/v2" -name 'Full-*' | grep -q . || fail "no full snapshot under $STORE/$N/v2"
dump_keys "$EP" >"$WORK/before.jsonl"

# the volume is lost: etcd killed, its data dir deleted; the container restarts
ETCD_CHILD=$(pgrep -P "$BOOT" -x etcd) || fail "etcd is not the bootstrap script's child"
kill -9 "$ETCD_CHILD"
wait "$BOOT" 2>/dev/null || true
[ "$(cat "$P/var/etcd/data/validation_marker")" = 137 ] || fail "bootstrap.sh did not record etcd's exit status 137"
rm -rf "$P/var/etcd/data/new.etcd"
chart_start_bootstrap "$P" "$BACKUP_EP" "$POD_BACKUP_CA"
BOOT=$POD_BOOT
wait_etcd
wait_ready
grep -q "restor" "$P/sidecar.log" || fail "the sidecar log does not mention a restore"
dump_keys "$EP" >"$WORK/after.jsonl"
cmp "$WORK/before.jsonl" "$WORK/after.jsonl" || fail "the restored keyspace differs"
[ "$(current_revision "$EP")" -ge "$rev" ] || fail "restored revision below $rev"

# SIGTERM (the kubelet's stop): etcd stops, the exit status is recorded for a sanity check next time
ETCD_CHILD=$(pgrep -P "$BOOT" -x etcd)
kill -TERM "$BOOT"
wait "$BOOT" 2>/dev/null || true
! kill -0 "$ETCD_CHILD" 2>/dev/null || fail "etcd still runs after the container's SIGTERM"
case "$(cat "$P/var/etcd/data/validation_marker")" in 0 | 143) ;; *) fail "marker after SIGTERM: $(cat "$P/var/etcd/data/validation_marker")" ;; esac

# TLS: etcd client and peer traffic and the sidecar's server, with certificates for the pod's
# names (and 127.0.0.1, where the names point here); the TLS Secrets written out as mounted
T=$WORK/tls
mkdir -p "$T"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/ca.key" -subj /CN=ca -days 2 -out "$T/ca.crt" 2>/dev/null
for c in server client; do
    openssl req -newkey rsa:2048 -nodes -keyout "$T/$c.key" -subj "/CN=$c" -out "$T/$c.csr" 2>/dev/null
    printf 'subjectAltName=DNS:%s,DNS:%s,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' "$N-local" "$N-0.$N-peer.$NS.svc" >"$T/$c.ext"
    openssl x509 -req -in "$T/$c.csr" -CA "$T/ca.crt" -CAkey "$T/ca.key" -CAcreateserial -days 2 \
        -extfile "$T/$c.ext" -out "$T/$c.crt" 2>/dev/null
done
SPORT=$(free_port)
"$HELM" template "$REL" "$CHART" --namespace "$NS" -f "$CHART/ci/local-values.yaml" \
    --set servicePorts.etcd.client="$CPORT" --set servicePorts.etcd.peer="$PPORT" \
    --set servicePorts.etcd.metrics="$MPORT" --set servicePorts.etcdBackupRestore.server="$SPORT" \
    --set backup.deltaSnapshotPeriod=1s --set backup.schedule="0 0 1 1 *" --set backup.storageContainer=tls-backups \
    --set-file tls.etcd.ca="$T/ca.crt" --set-file tls.etcd.server.crt="$T/server.crt" \
    --set-file tls.etcd.server.key="$T/server.key" --set-file tls.etcd.client.crt="$T/client.crt" \
    --set-file tls.etcd.client.key="$T/client.key" --set-file tls.etcd.peer.ca="$T/ca.crt" \
    --set-file tls.etcd.peer.server.crt="$T/server.crt" --set-file tls.etcd.peer.server.key="$T/server.key" \
    --set-file tls.etcdBackupRestore.ca="$T/ca.crt" --set-file tls.etcdBackupRestore.server.crt="$T/server.crt" \
    --set-file tls.etcdBackupRestore.server.key="$T/server.key" >"$WORK/tls.yaml"
P=$WORK/tls-pod
for s in ca:var/etcd/ssl/ca server-tls:var/etcd/ssl/server client-tls:var/etcd/ssl/client \
    peer-ca:var/etcd/ssl/peer/ca peer-server-tls:var/etcd/ssl/peer/server; do
    chart_secret_files "$WORK/tls.yaml" "$N-${s%%:*}" "$P/${s#*:}"
done
chart_secret_files "$WORK/tls.yaml" "$REL-etcdbr-ca" "$P/var/etcdbr/ssl/ca"
chart_secret_files "$WORK/tls.yaml" "$REL-etcdbr-server-tls" "$P/var/etcdbr/ssl/server"
cmp "$P/var/etcdbr/ssl/server/tls.crt" "$T/server.crt" || fail "tls: the sidecar's certificate Secret differs"
chart_start_pod "$WORK/tls.yaml" "$P" 127.0.0.1 0 "$REL" "$NS"
SIDECAR=$POD_SIDECAR
BOOT=$POD_BOOT
BACKUP_EP=$POD_BACKUP_EP
[ "$BACKUP_EP" = "https://127.0.0.1:$SPORT" ] || fail "tls: BACKUP_ENDPOINT $BACKUP_EP"
[ "$POD_BACKUP_CA" = "$P/var/etcdbr/ssl/ca/bundle.crt" ] || fail "tls: BACKUP_CA $POD_BACKUP_CA"
EP=https://127.0.0.1:$CPORT
TLSCTL=(--cacert="$T/ca.crt" --cert="$T/client.crt" --key="$T/client.key")
for i in $(seq 1 600); do
    etcdctl --endpoints="$EP" "${TLSCTL[@]}" endpoint health >/dev/null 2>&1 && break
    kill -0 "$BOOT" 2>/dev/null || { tail -20 "$P/etcd-container.log" "$P/sidecar.log"; fail "tls: the etcd container exited"; }
    kill -0 "$SIDECAR" 2>/dev/null || { tail -20 "$P/sidecar.log"; fail "tls: the sidecar exited"; }
    sleep 0.1
done
etcdctl --endpoints="$EP" "${TLSCTL[@]}" put /registry/tls/a b >/dev/null || fail "tls: etcd does not serve TLS clients"
# the readiness probe over HTTPS, the certificate checked
for i in $(seq 1 300); do
    [ "$(curl -s --cacert "$T/ca.crt" -o /dev/null -w '%{http_code}' "$BACKUP_EP/healthz")" = 200 ] && break
    sleep 0.1
done
[ "$(curl -s --cacert "$T/ca.crt" -o /dev/null -w '%{http_code}' "$BACKUP_EP/healthz")" = 200 ] ||
    { tail -20 "$P/sidecar.log"; fail "tls: /healthz over HTTPS did not turn 200"; }
# /healthz turns 200 when etcd answers; the snapshotter serves requests once its start-up decision
# is made (until then /snapshot/full answers 500 "not active", as the Go tool): retried
ok=""
for i in $(seq 1 60); do
    curl -sf -m 30 --cacert "$T/ca.crt" "$BACKUP_EP/snapshot/full" >/dev/null && ok=1 && break
    sleep 0.5
done
[ -n "$ok" ] || fail "tls: /snapshot/full (the sidecar did not back up over TLS)"
find "$P/home/tls-backups/$N/v2" -name 'Full-*' | grep -q . || fail "tls: no full snapshot in the store"
grep -q "^peer-transport-security:" "$P/var/etcd/run/etcd.conf.yaml" || fail "tls: etcd runs without peer TLS"
echo "PASS: one chart pod on loopback: bootstrap, readiness, backups, restore after a lost data dir ($(wc -l <"$WORK/after.jsonl") keys, etcd $V); with TLS: bootstrap, readiness over HTTPS, a backup"
