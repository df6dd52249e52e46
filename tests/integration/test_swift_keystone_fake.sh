#!/usr/bin/env bash
# Swift through Keystone v3, against a scripted FAKE Keystone (tests/servers/fake_keystone.py: no
# Keystone runs here) in front of Debian's real Swift: the fake checks the v3 request body (password
# with a project scope, application credential) and hands out real tempauth tokens of this Swift
# with a catalog (RegionOne's public object-store endpoint is this Swift, RegionTwo's points
# nowhere). The store contract runs through it; an unknown region and a wrong password give clear
# errors, and the password is never printed.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
[ -x "$BUILD/store_contract" ] || fail "$BUILD/store_contract not built"
make_workdir
start_swift etcdbr-keystone
C=$SWIFT_CONTAINER

# Keystone v3: tests/servers/fake_keystone.py checks the request body and hands out real tempauth
# tokens with a catalog (the RegionOne public object-store endpoint is this Swift; RegionTwo's
# points nowhere, so a wrong region choice fails)
for attempt in 1 2 3 4 5; do
    kport=$(free_port)
    /usr/bin/python3 "$ETCDBR_SOURCE_DIR/tests/servers/fake_keystone.py" "$kport" "$SWIFT_AUTH_URL" \
        "$SWIFT_STORAGE_URL" >"$WORK/keystone.out" 2>>"$WORK/keystone.log" &
    ks_pid=$!
    PIDS+=("$ks_pid")
    for i in $(seq 1 200); do
        grep -q listening "$WORK/keystone.out" && break 2
        kill -0 "$ks_pid" 2>/dev/null || continue 2
        sleep 0.05
    done
    fail "fake_keystone not ready: $(cat "$WORK/keystone.log")"
done
grep -q listening "$WORK/keystone.out" || fail "fake_keystone did not start: $(cat "$WORK/keystone.log")"
printf '{"authURL":"http://127.0.0.1:%s/v3","username":"tester","password":"testing","domainName":"Default","tenantName":"test","region":"RegionOne"}' \
    "$kport" >"$WORK/keystone.json"
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$WORK/keystone.json ETCDBR_SWIFT_LIST_PAGE_SIZE=3 \
    "$BUILD/store_contract" --provider Swift --container "$C" --list-count 4 --parallel 2 \
    >"$WORK/keystone-contract.log" 2>&1 || { cat "$WORK/keystone-contract.log"; fail "contract through Keystone v3"; }
# an application credential (no scope), the region from OS_REGION_NAME
printf '{"authURL":"http://127.0.0.1:%s","applicationCredentialID":"acid","applicationCredentialSecret":"acsecret"}' \
    "$kport" >"$WORK/keystone-ac.json"
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$WORK/keystone-ac.json OS_REGION_NAME=RegionOne \
    "$BUILD/store_contract" --provider Swift --container "$C" --list-count 2 --parallel 1 \
    >"$WORK/keystone-ac.log" 2>&1 || { cat "$WORK/keystone-ac.log"; fail "contract with a Keystone application credential"; }
# a region without an object-store endpoint, and a wrong password
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$WORK/keystone-ac.json OS_REGION_NAME=RegionNine \
    "$BUILD/store_contract" --provider Swift --container "$C" --list-count 1 >"$WORK/ks-region.log" 2>&1 &&
    fail "an unknown region was accepted"
grep -q "no public object-store endpoint in region RegionNine.*RegionTwo" "$WORK/ks-region.log" ||
    fail "unknown region: unclear error: $(cat "$WORK/ks-region.log")"
sed 's/"password":"testing"/"password":"wrong-ks-secret"/' "$WORK/keystone.json" >"$WORK/keystone-bad.json"
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$WORK/keystone-bad.json "$BUILD/store_contract" --provider Swift \
    --container "$C" --list-count 1 >"$WORK/ks-bad.log" 2>&1 && fail "Keystone: a wrong password was accepted"
grep -q "v3/auth/tokens answered HTTP 401: the credentials were refused" "$WORK/ks-bad.log" ||
    fail "Keystone wrong password: unclear error: $(cat "$WORK/ks-bad.log")"
if grep -q "wrong-ks-secret" "$WORK/ks-bad.log"; then fail "the Keystone password leaked"; fi

echo "PASS: Swift through Keystone v3 (fake Keystone, real Swift)"
