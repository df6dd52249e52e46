#!/usr/bin/env bash
# Followers forward /snapshot/full and /snapshot/delta to the backup leader over HTTPS (docs/go-tool.md
# §2 "Not-leader handling", issue 10): a 3-member cluster, one `etcdbrctl server` sidecar per
# member on its member's loopback address, all with --server-cert/--server-key and --cacert as
# the root for the leader's certificate (openssl, self-signed for 127.0.0.1-3). Checks: /healthz
# 200 on the leader only, /livez 200 on every member (also without certificate or token when
# those are required); both paths through each follower answer 200 with the leader's snapshot
# JSON (query passed on); /snapshot/latest on a follower answers from the store; a follower whose
# --cacert does not sign the leader's certificate answers 405 (the TLS check is real); a request
# already forwarded once is not forwarded again (405); a follower without a store answers 405.
# Then every sidecar with --server-client-ca-file and --server-auth-token-file: a follower
# refuses a caller without token (401) or certificate (403) and forwards with both, presenting its
# own certificate and the token to the leader, whose certificate it verifies against the client
# CA (--cacert is another CA's then); a follower with another token, or presenting a certificate
# of another CA, answers 405 naming what the leader refused.
source "$(dirname "$0")/lib.sh"
make_workdir
CLUSTER_DISTINCT_HOSTS=1 start_cluster 3
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=etcdbr-test" \
    -addext "subjectAltName=IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3" \
    -keyout "$WORK/tls.key" -out "$WORK/tls.crt" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=other-ca" \
    -keyout "$WORK/other.key" -out "$WORK/other.crt" 2>/dev/null
STORE=$WORK/store
SPORT=$(free_port)
declare -a SIDECAR_PID
sidecar() { # I [extra flags...]
    local i=$1
    shift
    "$ETCDBR_BIN" server --endpoints="${MEMBER_EP[i]}" --server-address="${MEMBER_HOST[i]}" \
        --server-port="$SPORT" --server-cert="$WORK/tls.crt" --server-key="$WORK/tls.key" \
        --data-dir="${MEMBER_DIR[i]}" --snapstore-temp-directory="$WORK/snaptmp$i" \
        --delta-snapshot-period=1s --schedule='0 0 1 1 *' --reelection-period=1500ms \
        --etcd-connection-timeout-leader-election=1500ms --garbage-collection-period=0s \
        "$@" >>"$WORK/sidecar$i.log" 2>&1 &
    SIDECAR_PID[i]=$!
    PIDS+=("${SIDECAR_PID[i]}")
}
with_store=(--storage-provider=Local --store-container="$STORE")
for i in 1 2 3; do sidecar "$i" "${with_store[@]}" --cacert="$WORK/tls.crt"; done
url() { echo "https://${MEMBER_HOST[$1]}:$SPORT"; }
# req I PATH [curl options]: "CODE BODY" of an HTTPS request to sidecar I
req() {
    local i=$1 p=$2
    shift 2
    curl -s -m 120 --cacert "$WORK/tls.crt" -w '\n%{http_code}' "$@" "$(url "$i")$p" || true
}
code_of() { tail -n 1 <<<"$1"; }
body_of() { sed '$d' <<<"$1"; }
wait_code() { # I PATH CODE
    local k out
    for k in $(seq 1 200); do
        out=$(req "$1" "$2")
        [ "$(code_of "$out")" = "$3" ] && return 0
        sleep 0.1
    done
    tail -20 "$WORK/sidecar$1.log" >&2
    fail "sidecar $1 $2: HTTP $(code_of "$out"), want $3: $(body_of "$out")"
}

L=""
for k in $(seq 1 100); do
    L=$(leader_index)
    [ -n "$L" ] && break
    sleep 0.1
done
[ -n "$L" ] || fail "no raft leader"
wait_for_log "$WORK/sidecar$L.log" "full snapshot .* stored" 30
wait_code "$L" /healthz 200
for i in 1 2 3; do [ "$i" = "$L" ] || wait_code "$i" /healthz 503; done
# the liveness path: 200 on every member, followers included
for i in 1 2 3; do wait_code "$i" /livez 200; done
echo "HTTPS /healthz: leader m$L 200, followers 503; /livez 200 on all three"

n=0
for f in 1 2 3; do
    [ "$f" = "$L" ] && continue
    # a delta: put a key first; a request that finds nothing pending answers null, asked again
    for k in 1 2 3 4 5; do
        n=$((n + 1))
        etcdctl --endpoints="${MEMBER_EP[L]}" put "/p/$n" "v$n" >/dev/null
        out=$(req "$f" /snapshot/delta)
        [ "$(code_of "$out")" = 200 ] || fail "/snapshot/delta through follower $f: $out"
        [ "$(body_of "$out")" = null ] || break
    done
    jq -e '.kind == "Incr"' >/dev/null <<<"$(body_of "$out")" || fail "/snapshot/delta through follower $f: $out"
    [ -e "$STORE/v2/$(body_of "$out" | jq -r .snapName)" ] || fail "the forwarded delta is not in the store: $out"
    out=$(req "$f" '/snapshot/full?final=false')
    [ "$(code_of "$out")" = 200 ] || fail "/snapshot/full through follower $f: $out"
    jq -e '.kind == "Full" and .isFinal == false' >/dev/null <<<"$(body_of "$out")" || fail "/snapshot/full through follower $f: $out"
    name=$(body_of "$out" | jq -r .snapName)
    [ -e "$STORE/v2/$name" ] || fail "the forwarded full snapshot $name is not in the store"
    out=$(req "$f" '/snapshot/full?final=maybe')
    [ "$(code_of "$out")" = 400 ] || fail "/snapshot/full?final=maybe through follower $f: $out (want the leader's 400: the query is passed on)"
    out=$(req "$f" /snapshot/latest)
    [ "$(body_of "$out" | jq -r .fullSnapshot.snapName)" = "$name" ] || fail "/snapshot/latest on follower $f: $out"
    echo "follower m$f: /snapshot/delta and /snapshot/full forwarded over HTTPS (200, $name), bad query 400, /snapshot/latest from the store"
done
F=$((L % 3 + 1))
out=$(req "$F" /snapshot/delta -H 'X-Etcdbr-Forwarded-By: test')
[ "$(code_of "$out")" = 405 ] || fail "an already forwarded request was not refused: $out"
echo "an already forwarded request: 405 ($(body_of "$out" | head -c 80)...)"

# a follower whose --cacert does not sign the leader's certificate: the chain fails, 405
stop_pid "${SIDECAR_PID[F]}"
sidecar "$F" "${with_store[@]}" --cacert="$WORK/other.crt"
wait_code "$F" /healthz 503
out=$(req "$F" /snapshot/delta)
[ "$(code_of "$out")" = 405 ] || fail "follower with another CA: $out, want 405"
grep -i "could not be forwarded" >/dev/null <<<"$out" || fail "follower with another CA: unclear answer: $out"
echo "follower m$F with another --cacert: 405 ($(body_of "$out" | head -c 120)...)"

# a follower without a store: 405
stop_pid "${SIDECAR_PID[F]}"
sidecar "$F" --cacert="$WORK/tls.crt"
wait_code "$F" /healthz 503
out=$(req "$F" /snapshot/full)
[ "$(code_of "$out")" = 405 ] || fail "follower without a store: $out, want 405"
echo "follower m$F without a store: 405"

# every sidecar with client certificates and a token (docs/server.md, "Production setting"): the
# self-signed tls.crt is the client CA, so each sidecar's own certificate, presented to the
# leader, verifies; --cacert is now another CA's: the leader's certificate is verified against
# the client CA, not --cacert
TOKEN="proxy-$RANDOM-$RANDOM"
printf '%s\n' "$TOKEN" >"$WORK/token"
printf '%s\n' "other-$TOKEN" >"$WORK/token.other"
for i in 1 2 3; do stop_pid "${SIDECAR_PID[i]}"; done
secured=(--server-client-ca-file="$WORK/tls.crt" --cacert="$WORK/other.crt")
for i in 1 2 3; do sidecar "$i" "${with_store[@]}" "${secured[@]}" --server-auth-token-file="$WORK/token"; done
AUTH=(--cert "$WORK/tls.crt" --key "$WORK/tls.key" -H "Authorization: Bearer $TOKEN")
wait_code "$L" /healthz 200
F=$((L % 3 + 1))
wait_code "$F" /healthz 503
# /livez stays open (no certificate, no token), as a kubelet probe needs
wait_code "$F" /livez 200
out=$(req "$F" '/snapshot/full?final=false' --cert "$WORK/tls.crt" --key "$WORK/tls.key")
[ "$(code_of "$out")" = 401 ] || fail "follower $F without a token: $out, want 401"
out=$(req "$F" '/snapshot/full?final=false' -H "Authorization: Bearer $TOKEN")
[ "$(code_of "$out")" = 403 ] || fail "follower $F without a client certificate: $out, want 403"
out=$(req "$F" '/snapshot/full?final=false' "${AUTH[@]}")
[ "$(code_of "$out")" = 200 ] || fail "/snapshot/full through follower $F with certificate and token: $out"
jq -e '.kind == "Full"' >/dev/null <<<"$(body_of "$out")" || fail "/snapshot/full through follower $F: $out"
[ -e "$STORE/v2/$(body_of "$out" | jq -r .snapName)" ] || fail "the forwarded full snapshot is not in the store: $out"
echo "client CA + token: follower m$F refuses no token (401) and no certificate (403), forwards with both (200)"

# a follower whose token the leader does not share: the leader's 401 becomes a 405 naming it
stop_pid "${SIDECAR_PID[F]}"
sidecar "$F" "${with_store[@]}" "${secured[@]}" --server-auth-token-file="$WORK/token.other"
AUTH_OTHER=(--cert "$WORK/tls.crt" --key "$WORK/tls.key" -H "Authorization: Bearer other-$TOKEN")
wait_code "$F" /healthz 503
out=$(req "$F" /snapshot/delta "${AUTH_OTHER[@]}")
[ "$(code_of "$out")" = 405 ] || fail "follower with another token: $out, want 405"
grep -q "refused this sidecar's token" <<<"$out" || fail "follower with another token: unclear answer: $out"
echo "follower m$F with another token: 405 ($(body_of "$out" | grep -o "refused this sidecar's token.*" | head -c 100))"

# a follower whose certificate the leader's client CA did not sign: the leader's 403, a 405
stop_pid "${SIDECAR_PID[F]}"
sidecar "$F" "${with_store[@]}" "${secured[@]}" --server-auth-token-file="$WORK/token" \
    --server-cert="$WORK/other.crt" --server-key="$WORK/other.key"
for k in $(seq 1 150); do
    [ "$(curl -sk -o /dev/null -w '%{http_code}' "$(url "$F")/healthz" || true)" = 503 ] && break
    sleep 0.2
done
out=$(req "$F" /snapshot/delta "${AUTH[@]}" -k)
[ "$(code_of "$out")" = 405 ] || fail "follower with a certificate of another CA: $out, want 405"
grep -q "refused this sidecar's client certificate" <<<"$out" || fail "follower with another certificate: unclear answer: $out"
echo "follower m$F presenting a certificate of another CA: 405 (the leader refused it)"
