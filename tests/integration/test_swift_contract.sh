#!/usr/bin/env bash
# The store contract against the OpenStack Swift driver on Debian's Swift (tempauth v1, dlo):
# the shared suite (tests/tools/store_contract.c) listing in pages of 7 (marker paging), with
# credentials from OPENSTACK_APPLICATION_CREDENTIALS_JSON, from a directory (one file per field)
# and from the OS_* environment; then the Swift layout: a large object is segments
# "<key>/%010d" plus a zero-byte manifest with X-Object-Manifest "<container>/<key>/", segments are
# never listed, a ranged read of the manifest, remove takes exactly that object's segments (not a
# sibling's), an aborted upload leaves no segment, a token made invalid is renewed (401 ->
# authenticate again), and a wrong password is a clear 401 error. (Keystone v3:
# test_swift_keystone_fake.sh.)
source "$(dirname "$0")/lib.sh"
BUILD=${ETCDBR_BUILD_DIR:-$(dirname "$ETCDBR_BIN")}
for t in store_contract; do [ -x "$BUILD/$t" ] || fail "$BUILD/$t not built"; done
make_workdir
start_swift etcdbr-contract
C=$SWIFT_CONTAINER

# swift_ls PREFIX: every object name under PREFIX (raw Swift listing, segments included)
swift_ls() {
    curl -s -f -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$C?prefix=$1" | LC_ALL=C sort ||
        fail "listing $1"
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
grep -q "Swift refused the credentials for bucket $C" "$WORK/bad.log" ||
    fail "wrong password: the error does not name the provider and container: $(cat "$WORK/bad.log")"
if grep -q "wrong-secret-42" "$WORK/bad.log"; then fail "the password leaked into the output"; fi
# a missing container
OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON "$BUILD/store_contract" --provider Swift \
    --container no-such-container --list-count 1 >"$WORK/nocont.log" 2>&1 && fail "a missing container was accepted"
grep -q "container no-such-container does not exist" "$WORK/nocont.log" || fail "missing container: $(cat "$WORK/nocont.log")"

# The layout (swift_tool drives the driver, curl looks at the container).
export OPENSTACK_APPLICATION_CREDENTIALS_JSON=$SWIFT_CREDS_JSON
T=$BUILD/swift_tool
[ -x "$T" ] || fail "$T not built"
MiB=1048576
big=lay/v2/Full-00000000-00000009-1700000000.gz
sib=lay/v2/Full-00000000-00000009-1700000000.gz.final
SWIFT_TOOL_MIN_CHUNK=$MiB SWIFT_TOOL_PARALLEL=2 "$T" "$C" put "$big" $((3 * MiB + 1234)) 7 || fail "put $big"
SWIFT_TOOL_MIN_CHUNK=$MiB "$T" "$C" put "$sib" $((2 * MiB + 5)) 8 || fail "put $sib"
"$T" "$C" put lay/v2/small 100 9 || fail "put small"
want=$(printf '%s\n' "$big" "$big/0000000001" "$big/0000000002" "$big/0000000003" "$big/0000000004" \
    "$sib" "$sib/0000000001" "$sib/0000000002" "$sib/0000000003" lay/v2/small | LC_ALL=C sort)
[ "$(swift_ls lay/)" = "$want" ] || fail "segments: got $(swift_ls lay/ | tr '\n' ' '), want $(echo $want)"
manifest=$(curl -s -I -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$C/$big" | tr -d '\r' |
    sed -n 's/^[Xx]-[Oo]bject-[Mm]anifest: //p')
[ "$manifest" = "$C/$big/" ] || fail "X-Object-Manifest is \"$manifest\", want \"$C/$big/\""
[ "$(curl -s -H "X-Auth-Token: $SWIFT_TOKEN" "$SWIFT_STORAGE_URL/$C/lay/v2/small" | wc -c)" = 100 ] ||
    fail "a small object is not one plain object"
# the listing hides segments; sizes are known for plain objects only (a manifest lists as 0 bytes)
got=$("$T" "$C" ls lay/ | LC_ALL=C sort) || fail "ls"
[ "$got" = "$(printf '%s -1\n%s -1\nlay/v2/small 100\n' "$big" "$sib" | LC_ALL=C sort)" ] || fail "driver listing: $got"
[ "$("$T" "$C" stat "$big")" = $((3 * MiB + 1234)) ] || fail "stat of a manifest"
# whole and ranged reads of the manifest (the offset inside segment 3)
[ "$("$T" "$C" sha "$big" 0)" = "$("$T" "$C" gen $((3 * MiB + 1234)) 7 0)" ] || fail "read of $big"
[ "$("$T" "$C" sha "$big" $((2 * MiB + 77)))" = "$("$T" "$C" gen $((3 * MiB + 1234)) 7 $((2 * MiB + 77)))" ] ||
    fail "ranged read of $big"
# no replace: a second large write of the key is refused before it touches the segments
SWIFT_TOOL_MIN_CHUNK=$MiB "$T" "$C" put "$big" $((2 * MiB + 9)) 99 2>"$WORK/replace.log" && fail "an existing object was replaced"
grep -q ERR_EXISTS "$WORK/replace.log" || fail "replace: $(cat "$WORK/replace.log")"
[ "$("$T" "$C" sha "$big" 0)" = "$("$T" "$C" gen $((3 * MiB + 1234)) 7 0)" ] || fail "a refused write changed $big"
"$T" "$C" put lay/v2/small 5 99 2>"$WORK/replace.log" && fail "an existing small object was replaced"
# remove takes the manifest and exactly its segments; the sibling .final keeps all of its own
"$T" "$C" rm "$big" || fail "rm $big"
want=$(printf '%s\n' "$sib" "$sib/0000000001" "$sib/0000000002" "$sib/0000000003" lay/v2/small | LC_ALL=C sort)
[ "$(swift_ls lay/)" = "$want" ] || fail "after rm: $(swift_ls lay/ | tr '\n' ' ')"
[ "$("$T" "$C" sha "$sib" 0)" = "$("$T" "$C" gen $((2 * MiB + 5)) 8 0)" ] || fail "the sibling changed"
# an aborted upload leaves no segment; a killed one's extra segments are not concatenated into a
# later upload of the same key
SWIFT_TOOL_MIN_CHUNK=$MiB "$T" "$C" abort lay/v2/aborted $((3 * MiB)) 3 || fail "abort"
[ -z "$(swift_ls lay/v2/aborted)" ] || fail "abort left: $(swift_ls lay/v2/aborted)"
for i in 1 2 3 4; do
    curl -s -f -X PUT -H "X-Auth-Token: $SWIFT_TOKEN" --data-binary "stale$i" \
        "$SWIFT_STORAGE_URL/$C/lay/v2/again/000000000$i" >/dev/null || fail "stale segment"
done
SWIFT_TOOL_MIN_CHUNK=$MiB "$T" "$C" put lay/v2/again $((MiB + 3)) 4 || fail "put again"
[ "$("$T" "$C" sha lay/v2/again 0)" = "$("$T" "$C" gen $((MiB + 3)) 4 0)" ] || fail "stale segments were concatenated"
[ "$(swift_ls lay/v2/again/)" = "$(printf 'lay/v2/again/0000000001\nlay/v2/again/0000000002')" ] ||
    fail "stale segments stayed: $(swift_ls lay/v2/again/)"
# faults between the driver and Swift (tests/servers/fault_proxy.py, reached through
# --store-endpoint-override, which keeps the storage URL's /v1/AUTH_test path): a segment PUT
# answered 401 (authenticate again, send again), another answered 503 (retried), and a download
# cut in the middle of segment 2 (resumed from the byte reached, same ETag)
start_fault_proxy "$SWIFT_ENDPOINT" --status PUT:401:1:0000000002 --status PUT:503:1:0000000003 \
    --cut GET:1500000:1
SWIFT_TOOL_ENDPOINT=$PROXY_EP SWIFT_TOOL_MIN_CHUNK=$MiB "$T" "$C" put lay/v2/faults $((3 * MiB + 5)) 11 \
    >"$WORK/faults.log" 2>&1 || { cat "$WORK/faults.log"; fail "write through the fault proxy"; }
[ "$(SWIFT_TOOL_ENDPOINT=$PROXY_EP "$T" "$C" sha lay/v2/faults 0 2>>"$WORK/faults.log")" = \
    "$("$T" "$C" gen $((3 * MiB + 5)) 11 0)" ] || { cat "$WORK/faults.log"; fail "read through the fault proxy"; }
for f in "status 401 PUT" "status 503 PUT" "cut GET"; do
    grep -q "$f" "$PROXY_LOG" || fail "fault \"$f\" not injected: $(cat "$PROXY_LOG")"
done
grep -q "authenticating again" "$WORK/faults.log" || fail "no re-authentication after the 401: $(cat "$WORK/faults.log")"
grep -q "broke at byte 1500000; resuming there" "$WORK/faults.log" || fail "the cut download was not resumed: $(cat "$WORK/faults.log")"

# a revoked token (tempauth keeps tokens in memcached: flush_all forgets them all) is refused with
# 401; the driver authenticates again, once, and the call goes through
"$T" "$C" reauth lay/v2/reauth "$WORK/ready" "$WORK/go" >"$WORK/reauth.log" 2>&1 &
tool_pid=$!
PIDS+=("$tool_pid")
for i in $(seq 1 600); do [ -e "$WORK/ready" ] && break; sleep 0.1; done
[ -e "$WORK/ready" ] || fail "swift_tool reauth did not start: $(cat "$WORK/reauth.log")"
swift_memcached_flush
touch "$WORK/go"
wait "$tool_pid" || fail "no re-authentication after a 401: $(cat "$WORK/reauth.log")"
grep -q "authenticating again" "$WORK/reauth.log" || fail "the token was not refused: $(cat "$WORK/reauth.log")"
for k in "$sib" lay/v2/small lay/v2/again lay/v2/reauth lay/v2/faults; do "$T" "$C" rm "$k" || fail "rm $k"; done
[ -z "$(swift_ls lay/)" ] || fail "left behind: $(swift_ls lay/)"
echo "PASS: store contract on Swift (tempauth)"
