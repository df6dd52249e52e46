# emulators.sh: the object-store emulators on loopback, sourced by tests/integration/lib.sh (the
# integration tests) and scripts/try-store.sh (a store to try by hand). Each start_* function
# starts its server on 127.0.0.1 on a free port, with its data and logs under $WORK, creates the
# bucket or container, writes the credentials file the driver reads, and sets variables that name
# them (each function's comment lists them).
#
# The sourcing script provides:
#   WORK                  a directory for the servers' data, logs and credentials files;
#   PIDS                  an array: every PID started is appended, for the caller to stop;
#   fail MSG              print MSG and exit non-zero;
#   emulator_missing MSG  the server is not installed (MSG says which command installs it): the
#                         tests skip (or fail under ETCDBR_REQUIRE_TOOLS=1), try-store.sh exits 1;
#   ETCDBR_SOURCE_DIR     the checkout (tests/servers/s3rver.js, tests/tools/fake_oss.py).
# EMULATOR_BUCKET_MAY_EXIST=1 accepts a bucket or container that exists already (a data
# directory used again); the tests leave it unset, so a leftover is an error there.

# free_port: a TCP port on 127.0.0.1 nobody listens on now.
free_port() {
    python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

stop_pid() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# start_s3rver: starts @20minutes/s3rver (installed by scripts/test-servers.sh into
# $ETCDBR_NPM_CACHE) on 127.0.0.1, a free port, with a data dir under $WORK and one bucket.
# Sets S3_ENDPOINT (http://127.0.0.1:PORT), S3_BUCKET, S3_PID, S3_ACCESS_KEY/S3_SECRET_KEY
# (S3RVER/S3RVER; SigV4 is verified) and S3_CREDS_JSON (an AWS_APPLICATION_CREDENTIALS_JSON
# file). Calls emulator_missing when the server is not installed.
ETCDBR_NPM_CACHE=${ETCDBR_NPM_CACHE:-$HOME/.cache/etcdbr/npm}
start_s3rver() {
    local bucket=${1:-etcdbr-test} port attempt i log
    if [ ! -f "$ETCDBR_NPM_CACHE/node_modules/@20minutes/s3rver/package.json" ] || ! command -v node >/dev/null; then
        emulator_missing "s3rver not installed in $ETCDBR_NPM_CACHE (run scripts/test-servers.sh)"
    fi
    mkdir -p "$WORK/s3rver"
    log=$WORK/s3rver.log
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        NODE_PATH=$ETCDBR_NPM_CACHE/node_modules NODE_OPTIONS=--openssl-legacy-provider \
            node "$ETCDBR_SOURCE_DIR/tests/servers/s3rver.js" "$port" "$WORK/s3rver" "$bucket" \
            >>"$log" 2>&1 &
        S3_PID=$!
        PIDS+=("$S3_PID")
        for i in $(seq 1 200); do
            if grep -q "listening 127.0.0.1:$port" "$log"; then
                S3_ENDPOINT=http://127.0.0.1:$port
                S3_BUCKET=$bucket
                S3_ACCESS_KEY=S3RVER
                S3_SECRET_KEY=S3RVER
                S3_CREDS_JSON=$WORK/s3-creds.json
                printf '{"region":"us-east-1","accessKeyID":"%s","secretAccessKey":"%s","s3ForcePathStyle":true}\n' \
                    "$S3_ACCESS_KEY" "$S3_SECRET_KEY" >"$S3_CREDS_JSON"
                return 0
            fi
            if ! kill -0 "$S3_PID" 2>/dev/null; then
                if grep -q EADDRINUSE "$log"; then continue 2; fi
                cat "$log" >&2
                fail "s3rver exited"
            fi
            sleep 0.05
        done
        fail "s3rver not ready: $(tail -5 "$log")"
    done
    fail "s3rver: no free port after 5 attempts"
}

# start_azurite [CONTAINER]: starts azurite-blob 3.35.0 (installed by scripts/test-servers.sh into
# $ETCDBR_NPM_CACHE) on 127.0.0.1, a free port, with its data under $WORK/azurite, never
# telemetry, and creates CONTAINER (default etcdbr-test; 3-63 chars) with a SharedKey request
# signed here by curl + openssl (independent of the driver's signing). Sets AZ_ENDPOINT
# (http://127.0.0.1:PORT), AZ_ACCOUNT/AZ_KEY (azurite's well-known account), AZ_CONTAINER,
# AZ_PID and AZ_CREDS_JSON (an AZURE_APPLICATION_CREDENTIALS_JSON file). Calls emulator_missing
# when azurite is not installed.
start_azurite() {
    local container=${1:-etcdbr-test} port attempt i log bin
    bin=$ETCDBR_NPM_CACHE/node_modules/.bin/azurite-blob
    if [ ! -x "$bin" ] || ! command -v node >/dev/null; then
        emulator_missing "azurite not installed in $ETCDBR_NPM_CACHE (run scripts/test-servers.sh)"
    fi
    mkdir -p "$WORK/azurite"
    log=$WORK/azurite.log
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        "$bin" --blobHost 127.0.0.1 --blobPort "$port" -l "$WORK/azurite" \
            --disableTelemetry --skipApiVersionCheck --loose --silent >>"$log" 2>&1 &
        AZ_PID=$!
        PIDS+=("$AZ_PID")
        for i in $(seq 1 200); do
            if curl -s -o /dev/null "http://127.0.0.1:$port/devstoreaccount1?comp=list"; then
                AZ_ENDPOINT=http://127.0.0.1:$port
                AZ_ACCOUNT=devstoreaccount1
                AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
                AZ_CONTAINER=$container
                AZ_CREDS_JSON=$WORK/azure-creds.json
                printf '{"storageAccount":"%s","storageKey":"%s","bucketName":"ignored"}\n' \
                    "$AZ_ACCOUNT" "$AZ_KEY" >"$AZ_CREDS_JSON"
                az_create_container "$container"
                return 0
            fi
            if ! kill -0 "$AZ_PID" 2>/dev/null; then
                if grep -q EADDRINUSE "$log"; then continue 2; fi
                cat "$log" >&2
                fail "azurite exited"
            fi
            sleep 0.05
        done
        fail "azurite not ready: $(tail -5 "$log")"
    done
    fail "azurite: no free port after 5 attempts"
}

# az_create_container NAME: Create Container on the azurite of start_azurite (201 expected; 409,
# the container exists, too when EMULATOR_BUCKET_MAY_EXIST=1).
az_create_container() {
    local name=$1 date sts sig hexkey code
    date=$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')
    hexkey=$(printf '%s' "$AZ_KEY" | base64 -d | od -An -tx1 -v | tr -d ' \n')
    # PUT, 11 empty standard headers, x-ms-* headers, then /account + path (account twice)
    sts=$(printf 'PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:2021-08-06\n/%s/%s/%s\nrestype:container' \
        "$date" "$AZ_ACCOUNT" "$AZ_ACCOUNT" "$name")
    sig=$(printf '%s' "$sts" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | base64 -w0)
    code=$(curl -s -o "$WORK/az-create.out" -w '%{http_code}' -X PUT -H 'Content-Length: 0' \
        -H "x-ms-date: $date" -H 'x-ms-version: 2021-08-06' \
        -H "Authorization: SharedKey $AZ_ACCOUNT:$sig" \
        "$AZ_ENDPOINT/$AZ_ACCOUNT/$name?restype=container")
    [ "$code" = 201 ] || { [ "$code" = 409 ] && [ "${EMULATOR_BUCKET_MAY_EXIST:-0}" = 1 ]; } ||
        fail "azurite: create container $name: HTTP $code: $(cat "$WORK/az-create.out")"
}

# start_fake_gcs [BUCKET]: starts fake-gcs-server (scripts/build-fake-gcs.sh caches it;
# emulator_missing when it is not built) on a free loopback port, in memory (its filesystem
# backend answers compose with a 500), and creates BUCKET (default etcdbr-test). Sets GCS_ENDPOINT (http://, so the
# driver sends no token, as the Go tool with an emulator), GCS_BUCKET, GCS_PID; log $WORK/fake-gcs.log.
start_fake_gcs() {
    local bucket=${1:-etcdbr-test} port attempt i log bin
    bin=${ETCDBR_FAKE_GCS:-$(bash "$ETCDBR_SOURCE_DIR/scripts/build-fake-gcs.sh" --path)}
    if [ ! -x "$bin" ]; then
        emulator_missing "fake-gcs-server not built at $bin (run scripts/build-fake-gcs.sh)"
    fi
    log=$WORK/fake-gcs.log
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        "$bin" -scheme http -host 127.0.0.1 -port "$port" -backend memory -log-level warn >>"$log" 2>&1 &
        GCS_PID=$!
        PIDS+=("$GCS_PID")
        for i in $(seq 1 200); do
            if curl -s -o /dev/null "http://127.0.0.1:$port/_internal/healthcheck"; then
                GCS_ENDPOINT=http://127.0.0.1:$port
                GCS_BUCKET=$bucket
                gcs_create_bucket "$bucket"
                return 0
            fi
            if ! kill -0 "$GCS_PID" 2>/dev/null; then
                if grep -q "address already in use" "$log"; then continue 2; fi
                cat "$log" >&2
                fail "fake-gcs-server exited"
            fi
            sleep 0.05
        done
        fail "fake-gcs-server not ready: $(tail -5 "$log")"
    done
    fail "fake-gcs-server: no free port after 5 attempts"
}

# gcs_create_bucket NAME: creates a bucket on the fake-gcs-server of start_fake_gcs (one that
# exists is an error, unless EMULATOR_BUCKET_MAY_EXIST=1).
gcs_create_bucket() {
    local code
    code=$(curl -s -o "$WORK/gcs-create.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -d "{\"name\":\"$1\"}" "$GCS_ENDPOINT/storage/v1/b")
    [ "$code" = 200 ] || { [ "$code" = 409 ] && [ "${EMULATOR_BUCKET_MAY_EXIST:-0}" = 1 ]; } ||
        fail "fake-gcs-server: create bucket $1: HTTP $code: $(cat "$WORK/gcs-create.out")"
}

# start_swift [CONTAINER]: starts Debian's OpenStack Swift (packages swift, swift-proxy,
# swift-object, swift-container, swift-account and memcached, installed by
# scripts/install-deps.sh) on 127.0.0.1: memcached, the object, container and account servers and a
# proxy with tempauth (user test:tester, key testing, .admin) and s3api (access key test:tester,
# secret testing) in its pipeline, dlo and slo (s3api multipart needs slo). Everything (config,
# rings, devices, logs) is under $WORK/swift; nothing in /etc is changed (Swift reads
# /etc/swift/swift.conf, the package's default, for its hash suffix). Free loopback ports; every
# PID is recorded in PIDS. Ready when tempauth answers. Creates CONTAINER (default etcdbr-test).
# Sets SWIFT_AUTH_URL (http://127.0.0.1:PORT/auth/v1.0), SWIFT_ENDPOINT (http://127.0.0.1:PORT),
# SWIFT_USER, SWIFT_KEY, SWIFT_STORAGE_URL, SWIFT_TOKEN, SWIFT_CONTAINER, SWIFT_MEMCACHED_PORT and
# SWIFT_CREDS_JSON (an OPENSTACK_APPLICATION_CREDENTIALS_JSON file). Calls emulator_missing when
# Swift is not installed. The servers run as the calling user (root needs no other account).
start_swift() {
    local container=${1:-etcdbr-test} sw t port i hdr code
    local -A ports
    if [ ! -x /usr/bin/swift-proxy-server ] || [ ! -x /usr/bin/swift-object-server ] ||
        [ ! -x /usr/bin/swift-ring-builder ] || ! command -v memcached >/dev/null; then
        emulator_missing "Swift not installed (run scripts/install-deps.sh)"
    fi
    sw=$WORK/swift
    mkdir -p "$sw/etc" "$sw/srv/d1" "$sw/run"
    # One run of Debian's python (Swift's own; `python3` may be a slow pyenv shim) picks five free
    # ports and builds the three rings (4 partitions, 1 replica, one device each): one
    # interpreter start instead of nine swift-ring-builder runs (~4 s each on a busy machine).
    cat >"$sw/rings.py" <<'PY'
import socket
from swift.common.ring import RingBuilder
socks = []
for _ in range(5):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
ports = [s.getsockname()[1] for s in socks]
for s in socks:
    s.close()
for t, port in zip(("object", "container", "account"), ports):
    b = RingBuilder(4, 1, 1)
    b.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1", "port": port,
               "device": "d1", "weight": 100})
    b.rebalance()
    b.save(t + ".builder")
    b.get_ring().save(t + ".ring.gz")
print(*ports)
PY
    read -r ports[object] ports[container] ports[account] ports[proxy] ports[memcached] \
        < <(cd "$sw/etc" && /usr/bin/python3 "$sw/rings.py" 2>"$sw/rings.log") || true
    [ -n "${ports[memcached]:-}" ] || fail "Swift: building the rings failed: $(cat "$sw/rings.log")"
    for t in object container account; do
        cat >"$sw/etc/$t-server.conf" <<CONF
[DEFAULT]
user = $(id -un)
devices = $sw/srv
mount_check = false
swift_dir = $sw/etc
bind_ip = 127.0.0.1
bind_port = ${ports[$t]}
workers = 1
log_name = $t

[pipeline:main]
pipeline = $t-server

[app:$t-server]
use = egg:swift#$t
CONF
    done
    cat >"$sw/etc/proxy-server.conf" <<CONF
[DEFAULT]
user = $(id -un)
swift_dir = $sw/etc
bind_ip = 127.0.0.1
bind_port = ${ports[proxy]}
workers = 1
log_name = proxy

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache s3api tempauth slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:${ports[memcached]}
[filter:s3api]
use = egg:swift#s3api
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
CONF
    # -u: memcached refuses to run as root without it, and ignores it otherwise
    memcached -u "$(id -un)" -l 127.0.0.1 -p "${ports[memcached]}" -U 0 >>"$sw/memcached.log" 2>&1 &
    PIDS+=("$!")
    for t in object container account proxy; do
        "/usr/bin/swift-$t-server" "$sw/etc/$t-server.conf" -v >>"$sw/$t.log" 2>&1 &
        PIDS+=("$!")
        eval "SWIFT_${t^^}_PID=\$!"
    done
    SWIFT_ENDPOINT=http://127.0.0.1:${ports[proxy]}
    SWIFT_AUTH_URL=$SWIFT_ENDPOINT/auth/v1.0
    SWIFT_USER=test:tester
    SWIFT_KEY=testing
    SWIFT_CONTAINER=$container
    for i in $(seq 1 300); do
        if hdr=$(curl -s -f -D - -o /dev/null -H "X-Auth-User: $SWIFT_USER" -H "X-Auth-Key: $SWIFT_KEY" \
            "$SWIFT_AUTH_URL" 2>/dev/null); then
            SWIFT_TOKEN=$(printf '%s' "$hdr" | tr -d '\r' | sed -n 's/^[Xx]-[Aa]uth-[Tt]oken: //p')
            SWIFT_STORAGE_URL=$(printf '%s' "$hdr" | tr -d '\r' | sed -n 's/^[Xx]-[Ss]torage-[Uu]rl: //p')
            break
        fi
        for t in OBJECT CONTAINER ACCOUNT PROXY; do
            eval "port=\$SWIFT_${t}_PID"
            kill -0 "$port" 2>/dev/null || { tail -20 "$sw/${t,,}.log" >&2; fail "swift-${t,,}-server exited"; }
        done
        sleep 0.05
    done
    [ -n "${SWIFT_TOKEN:-}" ] || fail "Swift not ready: $(tail -5 "$sw/proxy.log")"
    # the first container PUT may meet a container server that is not listening yet: retry
    for i in $(seq 1 100); do
        code=$(curl -s -o "$sw/create.out" -w '%{http_code}' -X PUT -H "X-Auth-Token: $SWIFT_TOKEN" \
            "$SWIFT_STORAGE_URL/$container")
        case "$code" in 201 | 202) break ;; esac
        sleep 0.1
    done
    case "$code" in 201 | 202) ;; *) fail "Swift: create container $container: HTTP $code: $(cat "$sw/create.out")" ;; esac
    SWIFT_MEMCACHED_PORT=${ports[memcached]}
    SWIFT_CREDS_JSON=$WORK/swift-creds.json
    printf '{"authURL":"%s","username":"%s","password":"%s","tenantName":"test","region":"RegionOne"}\n' \
        "$SWIFT_AUTH_URL" "$SWIFT_USER" "$SWIFT_KEY" >"$SWIFT_CREDS_JSON"
}

# start_fake_oss [BUCKET] [fake_oss.py options...]: starts tests/tools/fake_oss.py (a scripted
# fake of the OSS API subset the OSS driver uses; it verifies signature V1 and the Date skew) on
# 127.0.0.1 (a free port picked by the fake), objects under $WORK/fake-oss. Extra options
# (--fault SPEC, --legacy-range, --worm) are passed on. Sets OSS_ENDPOINT
# (http://127.0.0.1:PORT: an IP, so the driver addresses it path-style), OSS_BUCKET,
# OSS_ACCESS_KEY, OSS_SECRET, OSS_CREDS_JSON (an ALICLOUD_APPLICATION_CREDENTIALS_JSON file),
# OSS_PID, OSS_LOG (one line per request: "OP METHOD target -> STATUS[ fault]"; emptied at each
# start). A second call stops the first fake and keeps its objects. Needs python3
# (/usr/bin/python3 preferred over a pyenv shim): missing, it calls emulator_missing.
start_fake_oss() {
    local bucket=${1:-etcdbr-test} py i
    shift || true
    py=/usr/bin/python3
    [ -x "$py" ] || py=$(command -v python3 || true)
    if [ -z "$py" ]; then
        emulator_missing "python3 not found (needed by tests/tools/fake_oss.py)"
    fi
    if [ -n "${OSS_PID:-}" ]; then stop_pid "$OSS_PID"; fi
    mkdir -p "$WORK/fake-oss"
    OSS_BUCKET=$bucket
    OSS_ACCESS_KEY=LTAIfakeAccessKeyId01
    OSS_SECRET=fakeSecret+/0123456789abcdefghijklmn
    printf '%s' "$OSS_SECRET" >"$WORK/fake-oss.secret"
    OSS_LOG=$WORK/fake-oss.requests
    : >"$OSS_LOG"
    : >"$WORK/fake-oss.out"
    "$py" "$ETCDBR_SOURCE_DIR/tests/tools/fake_oss.py" --dir "$WORK/fake-oss" --bucket "$bucket" \
        --access-key "$OSS_ACCESS_KEY" --secret-file "$WORK/fake-oss.secret" --log "$OSS_LOG" \
        "$@" >"$WORK/fake-oss.out" 2>&1 &
    OSS_PID=$!
    PIDS+=("$OSS_PID")
    for i in $(seq 1 200); do
        if grep -q "^listening 127.0.0.1:" "$WORK/fake-oss.out"; then
            OSS_ENDPOINT=http://$(sed -n 's/^listening //p' "$WORK/fake-oss.out" | tail -1)
            OSS_CREDS_JSON=$WORK/oss-creds.json
            printf '{"storageEndpoint":"%s","accessKeyID":"%s","accessKeySecret":"%s","bucketName":"ignored"}\n' \
                "$OSS_ENDPOINT" "$OSS_ACCESS_KEY" "$OSS_SECRET" >"$OSS_CREDS_JSON"
            return 0
        fi
        kill -0 "$OSS_PID" 2>/dev/null || fail "fake_oss exited: $(cat "$WORK/fake-oss.out")"
        sleep 0.05
    done
    fail "fake_oss not ready: $(tail -5 "$WORK/fake-oss.out")"
}

