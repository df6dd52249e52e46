#!/usr/bin/env bash
# Kubernetes Lease updates (docs/go-tool.md §10.6, docs/kubernetes.md) against a scripted FAKE API
# server (tests/servers/fake_k8s_apiserver.py over TLS: it answers 409, 500 or 401 to chosen
# requests, which a real API server cannot be made to do; test_chart_apiserver.sh runs the sidecar
# against a real kube-apiserver), with a
# real etcd and a real `etcdbrctl server`:
# - the full-snapshot Lease holds the full snapshot's last revision and its creation time as
#   renewTime; a first PATCH answered 409 (another writer came first) is re-read and retried;
# - the delta-snapshot Lease follows the deltas;
# - a lower revision never overwrites a higher one;
# - a 500 is retried one retry period later (ETCDBR_K8S_LEASE_RETRY_PERIOD=2s stands in for the
#   minute);
# - the member Lease is renewed every heartbeat with <member hex>:<cluster hex>:Leader and the
#   tls-enabled annotation;
# - outside a cluster the server refuses to start;
# - a refused token (401) is reported while backups go on, and a rotated token is picked up;
# - a restarted server that resumes the store's latest set updates the Leases from that set;
# - compact --enable-snapshot-lease-renewal updates the full-snapshot Lease.
source "$(dirname "$0")/lib.sh"
make_workdir
command -v openssl >/dev/null || skip_test "no openssl"
command -v jq >/dev/null || skip_test "no jq"

NS=shoot--lease-test
SA=$WORK/sa
mkdir -p "$SA"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/api.key" -out "$SA/ca.crt" -days 1 \
    -subj /CN=fake-apiserver -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 ||
    fail "openssl could not make a certificate"
echo "token-one" >"$SA/token"
echo "default" >"$SA/namespace" # POD_NAMESPACE wins
: >"$WORK/requests.jsonl"
python3 "$ETCDBR_SOURCE_DIR/tests/servers/fake_k8s_apiserver.py" --cert "$SA/ca.crt" \
    --key "$WORK/api.key" --token-file "$WORK/valid-token" --log "$WORK/requests.jsonl" \
    --port-file "$WORK/api.port" 2>"$WORK/api.log" &
PIDS+=("$!")
cp "$SA/token" "$WORK/valid-token"
for i in $(seq 1 100); do [ -s "$WORK/api.port" ] && break; sleep 0.05; done
[ -s "$WORK/api.port" ] || fail "the fake API server did not start: $(cat "$WORK/api.log")"
API=https://127.0.0.1:$(cat "$WORK/api.port")

fake() { # METHOD PATH [JSON]
    curl -sf --cacert "$SA/ca.crt" -X "$1" "$API$2" ${3:+-H 'Content-Type: application/json' -d "$3"}
}
lease() { fake GET "/fake/leases/$NS/$1"; }
holder() { lease "$1" | jq -r '.spec.holderIdentity // ""'; }
poll() { # SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds
    local secs=$1 what=$2 i
    shift 2
    for i in $(seq 1 $((secs * 10))); do
        if "$@"; then return 0; fi
        sleep 0.1
    done
    tail -20 "$WORK/server.log" >&2 || true
    fail "timed out: $what"
}
micro() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S.000000Z; }
latest() { ls "$WORK/store/v2" | grep "^$1-" | sort -t- -k3,3n | tail -1; } # Full|Incr
last_rev() { echo "$1" | cut -d- -f3 | sed 's/^0*//'; }
created() { echo "$1" | cut -d- -f4 | cut -d. -f1; }
holder_is() { [ "$(holder "$1")" = "$2" ]; }

MEMBER=etcd-main-0
for l in full-snapshot-revisions delta-snapshot-revisions "$MEMBER"; do
    fake PUT "/fake/leases/$NS/$l" '{"spec":{"leaseDurationSeconds":30}}' >/dev/null
done
cat >"$WORK/etcd.conf.yaml" <<YAML
name: etcd-main
initial-cluster: etcd-main-0=https://etcd-main-0.etcd-main-peer:2380
initial-advertise-peer-urls:
  etcd-main-0:
  - https://etcd-main-0.etcd-main-peer:2380
YAML

start_etcd m1 "$WORK/m1.etcd"
for i in $(seq 1 10); do ectl put "/k/$i" "v$i" >/dev/null; done

# outside a cluster (no KUBERNETES_SERVICE_HOST) the server refuses to start and says why
rc=0
env -u KUBERNETES_SERVICE_HOST "$ETCDBR_BIN" server --endpoints="$ETCD_EP" --server-port=0 \
    --data-dir="$WORK/m1.etcd" --enable-snapshot-lease-renewal >"$WORK/refused.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set" \
    "$WORK/refused.log" >/dev/null || fail "server outside a cluster: exit $rc, $(tail -2 "$WORK/refused.log")"

# the first PATCH of the full-snapshot Lease meets another writer (holderIdentity "1")
fake POST /fake/faults '{"method":"PATCH","name":"full-snapshot-revisions","status":409,"count":1,
    "concurrent":{"spec":{"holderIdentity":"1"}}}' >/dev/null

PORT=$(free_port)
H=http://127.0.0.1:$PORT
start_server() { # sets SERVER_PID; log in server.log
    KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=${API##*:} \
        ETCDBR_K8S_SERVICE_ACCOUNT_DIR=$SA POD_NAMESPACE=$NS POD_NAME=$MEMBER \
        ETCD_CONF=$WORK/etcd.conf.yaml ETCDBR_K8S_LEASE_RETRY_PERIOD=2s \
        "$ETCDBR_BIN" server --endpoints="$ETCD_EP" --storage-provider=Local \
        --store-container="$WORK/store" --snapstore-temp-directory="$WORK/snaptmp" \
        --server-port="$PORT" --data-dir="$WORK/m1.etcd" --delta-snapshot-period=1s \
        --schedule='0 0 1 1 *' --reelection-period=2s --garbage-collection-period=0s \
        --enable-snapshot-lease-renewal --enable-member-lease-renewal \
        --k8s-heartbeat-duration=1s >>"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
start_server
wait_for_log "$WORK/server.log" "full snapshot .* stored" 30

# --- full-snapshot Lease: revision and creation time of the full snapshot, after a 409 ---
FULL=$(latest Full)
REV=$(last_rev "$FULL")
poll 10 "full-snapshot Lease holds $REV" holder_is full-snapshot-revisions "$REV"
got=$(lease full-snapshot-revisions | jq -r .spec.renewTime)
[ "$got" = "$(micro "$(created "$FULL")")" ] ||
    fail "full-snapshot Lease renewTime $got, expected the creation time of $FULL"
jq -r 'select(.method=="PATCH" and (.path|endswith("/full-snapshot-revisions"))) | .status' \
    "$WORK/requests.jsonl" | head -2 | tr '\n' ' ' | grep -x "409 200 " >/dev/null ||
    fail "the full-snapshot Lease PATCH was not a 409 then a 200: $(grep full-snapshot "$WORK/requests.jsonl")"
grep "after a conflict" "$WORK/server.log" >/dev/null || fail "the conflict was not logged"
echo "full-snapshot Lease: $REV at $got after a 409"

# --- delta-snapshot Lease follows the deltas ---
for round in 1 2 3; do
    for i in $(seq 1 5); do ectl put "/d/$round/$i" "x" >/dev/null; done
    target=$(current_revision "$ETCD_EP")
    wait_backed_up "$H" "$target" 20
    INCR=$(latest Incr)
    [ "$(last_rev "$INCR")" = "$target" ] || fail "latest delta $INCR does not end at $target"
    poll 10 "delta-snapshot Lease holds $target" holder_is delta-snapshot-revisions "$target"
done
echo "delta-snapshot Lease follows the deltas: $(holder delta-snapshot-revisions)"
# and is renewed every delta period without writes (renewTime moves, holder stays)
t1=$(lease delta-snapshot-revisions | jq -r .spec.renewTime)
renewed() { [ "$(lease delta-snapshot-revisions | jq -r .spec.renewTime)" \> "$t1" ]; }
poll 5 "delta-snapshot Lease renewed in an idle delta period" renewed
holder_is delta-snapshot-revisions "$target" || fail "an idle delta period changed the delta Lease holder"

# --- member Lease: every heartbeat, <member hex>:<cluster hex>:Leader, tls-enabled ---
read -r MID CID < <(etcdctl --endpoints="$ETCD_EP" endpoint status -w json |
    python3 -c 'import json,sys; h=json.load(sys.stdin)[0]["Status"]["header"]; print("%x %x" % (h["member_id"], h["cluster_id"]))')
want="$MID:$CID:Leader"
poll 10 "member Lease holds $want" holder_is "$MEMBER" "$want"
[ "$(lease "$MEMBER" | jq -r '.metadata.annotations["member.etcd.gardener.cloud/tls-enabled"]')" = true ] ||
    fail "member Lease lacks tls-enabled=true: $(lease "$MEMBER")"
n0=$(grep -c "\"PATCH\", \"path\": \"[^\"]*/leases/$MEMBER\", \"status\": 200" "$WORK/requests.jsonl" || true)
r0=$(lease "$MEMBER" | jq -r .spec.renewTime)
sleep 3.2
n1=$(grep -c "\"PATCH\", \"path\": \"[^\"]*/leases/$MEMBER\", \"status\": 200" "$WORK/requests.jsonl" || true)
r1=$(lease "$MEMBER" | jq -r .spec.renewTime)
[ $((n1 - n0)) -ge 2 ] && [ $((n1 - n0)) -le 5 ] ||
    fail "member Lease renewed $((n1 - n0)) times in 3.2 s with a 1 s heartbeat"
[ "$r1" \> "$r0" ] || fail "member Lease renewTime did not move ($r0 -> $r1)"
echo "member Lease: $want, $((n1 - n0)) renewals in 3.2 s"

# --- a lower revision never overwrites a higher one ---
fake PUT "/fake/leases/$NS/full-snapshot-revisions" '{"spec":{"holderIdentity":"999999999"}}' >/dev/null
curl -sf -X POST "$H/snapshot/full" >/dev/null || fail "/snapshot/full failed"
wait_for_log "$WORK/server.log" "already holds revision 999999999" 15
holder_is full-snapshot-revisions 999999999 || fail "a lower revision overwrote the full-snapshot Lease"
echo "lower revision left the higher one"

# --- a 500 is retried one retry period (2 s here) later ---
fake PUT "/fake/leases/$NS/full-snapshot-revisions" '{"spec":{"holderIdentity":"1"}}' >/dev/null
fake POST /fake/faults '{"method":"PATCH","name":"full-snapshot-revisions","status":500,"count":1}' >/dev/null
ectl put /k/after500 x >/dev/null
before=$(wc -l <"$WORK/requests.jsonl")
curl -sf -X POST "$H/snapshot/full" >/dev/null || fail "/snapshot/full failed"
FULL=$(latest Full)
REV=$(last_rev "$FULL")
poll 10 "full-snapshot Lease holds $REV after a 500" holder_is full-snapshot-revisions "$REV"
tail -n +"$((before + 1))" "$WORK/requests.jsonl" |
    jq -s '[.[] | select(.method=="PATCH" and (.path|endswith("/full-snapshot-revisions")))] |
        (.[0].status == 500 and .[1].status == 200 and (.[1].time - .[0].time) >= 1.8 and
         (.[1].time - .[0].time) < 6)' | grep -x true >/dev/null ||
    fail "the 500 was not retried one period later: $(tail -n +"$((before + 1))" "$WORK/requests.jsonl" | grep full-snapshot)"
grep "HTTP 500 Internal Server Error: injected fault 500" "$WORK/server.log" >/dev/null ||
    fail "the 500 was not reported with the API's message"
[ "$(lease full-snapshot-revisions | jq -r .spec.renewTime)" = "$(micro "$(created "$FULL")")" ] ||
    fail "renewTime after the retry is not the creation time of $FULL"
echo "500 retried 2 s later"

# --- a refused token (401) is reported; backups go on; a rotated token is used ---
echo "token-two" >"$WORK/valid-token" # the API server now wants another token
wait_for_log "$WORK/server.log" "member Lease not renewed: .*HTTP 401 Unauthorized" 10
ectl put /k/during401 x >/dev/null
target=$(current_revision "$ETCD_EP")
wait_backed_up "$H" "$target" 20
grep "delta-snapshot Lease not updated.*HTTP 401" "$WORK/server.log" >/dev/null ||
    fail "the delta Lease's 401 was not reported"
curl -sf "$H/healthz" >/dev/null || fail "/healthz is not 200 while the Lease updates fail"
echo "token-two" >"$SA/token" # the kubelet rotates the token
poll 10 "delta-snapshot Lease holds $target after the token rotation" \
    holder_is delta-snapshot-revisions "$target"
echo "401 reported, backups went on, rotated token used"
grep -i "token-one\|token-two" "$WORK/server.log" >/dev/null && fail "a token reached the log"

kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" = 0 ] || fail "server exited $rc"

# --- a restarted server resumes the store's latest set: the Leases follow that set ---
FULL=$(latest Full)
fake PUT "/fake/leases/$NS/full-snapshot-revisions" '{"spec":{"holderIdentity":"3"}}' >/dev/null
mv "$WORK/server.log" "$WORK/server1.log"
start_server
wait_for_log "$WORK/server.log" "snapshotter started" 30
poll 15 "full-snapshot Lease holds the resumed set's $(last_rev "$FULL")" \
    holder_is full-snapshot-revisions "$(last_rev "$FULL")"
[ "$(lease full-snapshot-revisions | jq -r .spec.renewTime)" = "$(micro "$(created "$FULL")")" ] ||
    fail "resumed: renewTime is not the creation time of $FULL"
[ "$(latest Full)" = "$FULL" ] || fail "the restarted server took a full snapshot: the resume was not tested"
echo "restarted server: full-snapshot Lease follows the resumed set"
kill -TERM "$SERVER_PID"
rc=0
wait "$SERVER_PID" || rc=$?
[ "$rc" = 0 ] || fail "server exited $rc"

# --- compact --enable-snapshot-lease-renewal ---
fake PUT "/fake/leases/$NS/full-snapshot-revisions" '{"spec":{"holderIdentity":"2"}}' >/dev/null
KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=${API##*:} \
    ETCDBR_K8S_SERVICE_ACCOUNT_DIR=$SA POD_NAMESPACE=$NS \
    "$ETCDBR_BIN" compact --storage-provider=Local --store-container="$WORK/store" \
    --restoration-temp-snapshots-dir="$WORK/compact.tmp" --enable-snapshot-lease-renewal \
    >"$WORK/compact.log" 2>&1 || fail "compact failed: $(tail -5 "$WORK/compact.log")"
FULL=$(latest Full)
REV=$(last_rev "$FULL")
[ "$REV" = "$(last_rev "$(latest Incr)")" ] || fail "compact did not write a full snapshot at the last delta's revision"
holder_is full-snapshot-revisions "$REV" || fail "compact did not set the full-snapshot Lease to $REV"
[ "$(lease full-snapshot-revisions | jq -r .spec.renewTime)" = "$(micro "$(created "$FULL")")" ] ||
    fail "compact: renewTime is not the creation time of $FULL"
echo "compact updated the full-snapshot Lease to $REV"
echo PASS
