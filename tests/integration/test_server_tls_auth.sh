#!/usr/bin/env bash
# The secured API (docs/server.md, "Production setting") of a real `etcdbrctl server` against a
# real etcd, with curl and certificates made here by openssl (a CA, a server certificate, a
# client certificate, one of another CA, one without the TLS client key purpose):
#   1. --server-cert/--server-key: HTTPS answers, plain HTTP does not;
#   2. + --server-client-ca-file: /snapshot/latest without a client certificate, with another
#      CA's or with a server-only one is 403, with the CA's is 200; /healthz, /livez and /metrics
#      answer without one;
#   3. + --server-auth-token-file: no token, a wrong one, another scheme: 401 with
#      WWW-Authenticate; the right one: 200; /healthz, /livez and /metrics open; the file
#      rewritten (a new token takes over, the old one stops), replaced by rename, emptied
#      (nothing accepted) and filled again; the token never appears in the log;
#   4. refusals at start: a client CA without --server-cert, a token file missing, empty or over
#      4 KiB, a client CA file without a certificate.
source "$(dirname "$0")/lib.sh"
make_workdir
command -v openssl >/dev/null || skip_test "openssl is not installed (apt-get install openssl)"
start_etcd m1 "$WORK/m1.etcd"
EP=$ETCD_EP
ectl put /a 1 >/dev/null

# ---- certificates ----
cd "$WORK"
mkcert() { # NAME CA_NAME EXT_LINES: a key and a certificate signed by CA_NAME
    local name=$1 ca=$2 ext=$3
    printf '%b\n' "$ext" >"$name.ext"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" -keyout "$name.key" -out "$name.csr" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 1 \
        -extfile "$name.ext" -out "$name.crt" 2>/dev/null
}
for ca in ca otherca; do
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$ca" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
        -keyout "$ca.key" -out "$ca.crt" 2>/dev/null
done
mkcert server ca "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth"
mkcert client ca "extendedKeyUsage=clientAuth"
mkcert rogue otherca "extendedKeyUsage=clientAuth"
mkcert serveronly ca "extendedKeyUsage=serverAuth"
cd - >/dev/null

PORT=$(free_port)
H=https://127.0.0.1:$PORT
SERVER_PID=""
LOG=""
server() { # LOG [flags...]: a server on 127.0.0.1:PORT with HTTPS
    LOG=$1
    shift
    "$ETCDBR_BIN" server --endpoints="$EP" --storage-provider=Local --store-container="$WORK/store" \
        --snapstore-temp-directory="$WORK/snaptmp" --server-address=127.0.0.1 --server-port="$PORT" \
        --server-cert="$WORK/server.crt" --server-key="$WORK/server.key" \
        --data-dir="$WORK/m1.etcd" --delta-snapshot-period=1s --schedule='0 0 1 1 *' \
        --reelection-period=1500ms --etcd-connection-timeout-leader-election=1500ms --garbage-collection-period=0s "$@" >"$LOG" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
# st PATH [curl options]: the HTTP status of an HTTPS request (000: no answer); body in $WORK/body,
# headers in $WORK/headers
st() {
    local p=$1
    shift
    curl -s -m 20 --cacert "$WORK/ca.crt" -D "$WORK/headers" -o "$WORK/body" -w '%{http_code}' \
        "$@" "$H$p" || true
}
expect() { # WANT PATH [curl options]
    local want=$1 got
    shift
    got=$(st "$@")
    [ "$got" = "$want" ] || { tail -20 "$LOG" >&2; fail "$*: HTTP $got, want $want: $(cat "$WORK/body" 2>/dev/null)"; }
}
wait_status() { # WANT PATH [curl options]: 30 s at most
    local want=$1 i
    shift
    for i in $(seq 1 150); do
        [ "$(st "$@")" = "$want" ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$LOG" >&2; fail "the server exited"; }
        sleep 0.2
    done
    expect "$want" "$@"
}
CLIENT=(--cert "$WORK/client.crt" --key "$WORK/client.key")

# ---- 1. HTTPS ----
server "$WORK/s1.log"
wait_status 200 /healthz
wait_for_log "$LOG" "full snapshot .* stored" 30
expect 200 /snapshot/latest
jq -e '.fullSnapshot.kind == "Full"' "$WORK/body" >/dev/null || fail "/snapshot/latest: $(cat "$WORK/body")"
grep -qi '^strict-transport-security:' "$WORK/headers" || fail "HTTPS answer without HSTS"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz" || true)
[ "$code" != 200 ] || fail "plain HTTP answered 200 on the HTTPS port"
grep -qF "serving HTTPS on port $PORT (127.0.0.1)\"" "$LOG" || fail "start line: $(grep serving "$LOG")"
echo "1. HTTPS: /healthz and /snapshot/latest 200 over TLS; plain HTTP: $code"
stop_pid "$SERVER_PID"

# ---- 2. client certificates ----
server "$WORK/s2.log" --server-client-ca-file="$WORK/ca.crt"
wait_status 200 /healthz
grep -q "client certificates required" "$LOG" || fail "start line does not say client certificates are required"
expect 200 /metrics
expect 200 /livez
expect 403 /snapshot/latest
grep -q "client certificate" "$WORK/body" || fail "403 without a reason: $(cat "$WORK/body")"
expect 403 /snapshot/latest --cert "$WORK/rogue.crt" --key "$WORK/rogue.key"
expect 403 /snapshot/latest --cert "$WORK/serveronly.crt" --key "$WORK/serveronly.key"
expect 403 /config --cert "$WORK/rogue.crt" --key "$WORK/rogue.key"
expect 200 /snapshot/latest "${CLIENT[@]}"
expect 200 /healthz "${CLIENT[@]}"
# the server's own certificate (serverAuth and clientAuth) is what a follower presents
expect 200 /snapshot/latest --cert "$WORK/server.crt" --key "$WORK/server.key"
echo "2. client CA: none/other CA/server-only purpose 403, the CA's client certificate 200, /healthz, /livez and /metrics open"
stop_pid "$SERVER_PID"

# ---- 3. bearer token ----
TOKEN1="tok-$RANDOM-$RANDOM-first"
TOKEN2="tok-$RANDOM-$RANDOM-second"
printf '%s\n' "$TOKEN1" >"$WORK/token"
server "$WORK/s3.log" --server-client-ca-file="$WORK/ca.crt" --server-auth-token-file="$WORK/token"
wait_status 200 /healthz
grep -q "bearer token required" "$LOG" || fail "start line does not say a token is required"
expect 200 /metrics
expect 200 /livez
expect 401 /snapshot/latest "${CLIENT[@]}"
grep -qi '^www-authenticate: Bearer realm="etcdbr"' "$WORK/headers" || fail "401 without WWW-Authenticate: $(cat "$WORK/headers")"
expect 401 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer wrong-$TOKEN1"
grep -qi '^www-authenticate: .*error="invalid_token"' "$WORK/headers" || fail "wrong token: no invalid_token: $(cat "$WORK/headers")"
expect 401 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer ${TOKEN1%?}"
expect 401 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Basic $(printf 'x:%s' "$TOKEN1" | base64 -w0)"
expect 200 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer $TOKEN1"
expect 200 /initialization/status "${CLIENT[@]}" -H "Authorization: bearer  $TOKEN1"
expect 401 /no/such/path "${CLIENT[@]}"
# the client certificate is checked before the token: the right token alone is not enough
expect 403 /snapshot/latest -H "Authorization: Bearer $TOKEN1"
echo "3a. token: none/wrong/prefix/Basic 401 with WWW-Authenticate, right 200"

# rotation: rewritten in place
printf '%s\n' "$TOKEN2" >"$WORK/token"
wait_status 200 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer $TOKEN2"
expect 401 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer $TOKEN1"
wait_for_log "$LOG" "token file .* changed: its new token is in use" 10
# replaced by rename (as a Kubernetes Secret volume does)
printf '%s\n' "$TOKEN1" >"$WORK/token.new"
mv "$WORK/token.new" "$WORK/token"
wait_status 200 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer $TOKEN1"
expect 401 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer $TOKEN2"
# emptied: nothing is accepted (fail closed), /healthz still answers; filled again: accepted
: >"$WORK/token"
wait_status 401 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer $TOKEN1"
expect 401 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer "
expect 200 /healthz
wait_for_log "$LOG" "no request is accepted until the file holds a token again" 10
printf '%s' "$TOKEN2" >"$WORK/token"
wait_status 200 /snapshot/latest "${CLIENT[@]}" -H "Authorization: Bearer $TOKEN2"
echo "3b. token rotation: rewrite, rename, empty (fail closed) and refill each took effect"
stop_pid "$SERVER_PID"
for t in "$TOKEN1" "$TOKEN2"; do
    ! grep -rqF -- "$t" "$WORK"/s*.log || fail "the token was written to the log"
done

# ---- 4. refusals at start ----
refused() { # WHAT PATTERN FLAGS...: the server exits non-zero at once, naming the problem
    local what=$1 pat=$2 rc=0
    shift 2
    timeout 30 "$ETCDBR_BIN" server --endpoints="$EP" --server-port="$PORT" \
        --data-dir="$WORK/m1.etcd" "$@" >"$WORK/refused.log" 2>&1 || rc=$?
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "$what: exit $rc, want a refusal at start"
    grep -q -- "$pat" "$WORK/refused.log" || fail "$what: unclear error: $(cat "$WORK/refused.log")"
    echo "4. refused at start ($what): $(grep -- "$pat" "$WORK/refused.log" | head -1 | cut -c1-160)"
}
refused "client CA without HTTPS" "needs --server-cert and --server-key" \
    --server-client-ca-file="$WORK/ca.crt"
refused "missing token file" "token file $WORK/absent" --server-auth-token-file="$WORK/absent"
: >"$WORK/empty"
refused "empty token file" "is empty" --server-auth-token-file="$WORK/empty"
head -c 5000 /dev/zero | tr '\0' a >"$WORK/big"
refused "token file over 4 KiB" "longer than 4096 bytes" --server-auth-token-file="$WORK/big"
echo "not a certificate" >"$WORK/notca.pem"
refused "client CA without a certificate" "holds no PEM certificate" \
    --server-cert="$WORK/server.crt" --server-key="$WORK/server.key" \
    --server-client-ca-file="$WORK/notca.pem"
echo "PASS"
