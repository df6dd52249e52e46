#!/usr/bin/env bash
# The store contract against the OpenStack Swift driver on Debian's Swift (tempauth v1, dlo):
# the shared suite (tests/tools/store_contract.c) listing in pages of 7 (marker paging), with
# credentials from OPENSTACK_APPLICATION_CREDENTIALS_JSON, from a directory (one file per field)
# and from the OS_* environment; then the Swift layout: a large object is segments
# "<key>/%010d" plus a zero-byte manifest with X-Object-Manifest "<container>/<key>/", segments are
# never listed, a ranged read of the manifest, remove takes exactly that object's segments (not a
# sibling's), an aborted upload leaves no segment, a token made invalid is renewed (401 ->
# authenticate again), and a wrong password is a clear 401 error.
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
for t in store_contract; do [ -x "$BUILD/$t" ] || fail "$BUILD/$t not built"; done
make_workdir
start_swift etcdbr-contract
C=$SWIFT_CONTAINER

# swift_ls PREFIX: every object name under PREFIX (raw Swift listing, segments included)
swift_ls() {
    curl -s -f -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$C?prefix=$1" || fail "listing $1"
}

ETCDBR_SWIFT_LIST_PAGE_SIZE=7 OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON \
    "$BUILD/store_contract" --provider Swift --container "$C" --prefix "some/prefix" \
    --list-count 25 --parallel 3 || fail "store contract on Swift"
[ -z "$(swift_ls some/prefix/)" ] || fail "the contract left objects behind: $(swift_ls some/prefix/)"

# credentials from a directory (one file per field, verbatim), then from OS_* (gophercloud)
mkdir -p "$WORK/creds-dir"
printf '%s' "$SWIFT_AUTH_URL" >"$WORK/creds-dir/authURL"
printf '%s' "$SWIFT_USER" >"$WORK/creds-dir/username"
printf '%s' "$SWIFT_KEY" >"$WORK/creds-dir/password"
ETCDBR_SWIFT_LIST_PAGE_SIZE=2 OPENSTACK_APPLICATION_CREDENTIALS=$WORK/creds-dir \
    "$BUILD/store_contract" --provider Swift --container "$C" --list-count 5 --parallel 1 \
    >"$WORK/dir.log" 2>&1 || { cat "$WORK/dir.log"; fail "contract with a credentials directory"; }
OS_AUTH_URL=$SWIFT_AUTH_URL OS_USERNAME=tester OS_TENANT_NAME=test OS_PASSWORD=$SWIFT_KEY \
    "$BUILD/store_contract" --provider Swift --container "$C" --list-count 3 --parallel 2 \
    >"$WORK/env.log" 2>&1 || { cat "$WORK/env.log"; fail "contract with the OS_* environment"; }
# mixing a password and an application credential is refused
OS_AUTH_URL=$SWIFT_AUTH_URL OS_USERNAME=tester OS_PASSWORD=$SWIFT_KEY OS_APPLICATION_CREDENTIAL_ID=x \
    OS_APPLICATION_CREDENTIAL_SECRET=y "$ETCDBR_BIN" snapshot --storage-provider=Swift --store-container="$C" \
    --endpoints=http://127.0.0.1:1 >"$WORK/mix.log" 2>&1 && fail "mixed credentials accepted"
grep -q "not both" "$WORK/mix.log" || fail "mixed credentials: unclear error: $(cat "$WORK/mix.log")"

# a wrong password: a clear error naming the 401, and the password never printed
printf '{"authURL":"%s","username":"%s","password":"wrong-secret-42"}' "$SWIFT_AUTH_URL" "$SWIFT_USER" >"$WORK/bad.json"
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$WORK/bad.json "$BUILD/store_contract" --provider Swift \
    --container "$C" --list-count 1 >"$WORK/bad.log" 2>&1 && fail "a wrong password was accepted"
grep -q "HTTP 401" "$WORK/bad.log" || fail "wrong password: no HTTP 401 in: $(cat "$WORK/bad.log")"
grep -q "credentials were refused" "$WORK/bad.log" || fail "wrong password: unclear error: $(cat "$WORK/bad.log")"
if grep -q "wrong-secret-42" "$WORK/bad.log"; then fail "the password leaked into the output"; fi
# a missing container
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON "$BUILD/store_contract" --provider Swift \
    --container no-such-container --list-count 1 >"$WORK/nocont.log" 2>&1 && fail "a missing container was accepted"
grep -q "container no-such-container does not exist" "$WORK/nocont.log" || fail "missing container: $(cat "$WORK/nocont.log")"

# the layout, through the snapshot store: `etcdbrctl` itself is not needed, swift_layout checks it
"$BUILD/swift_layout" "$SWIFT_CREDS_JSON" "$C" "$SWIFT_STORAGE_URL" "$SWIFT_TOKEN" "$WORK" ||
    fail "Swift layout checks"
echo "PASS: store contract on Swift (tempauth)"
