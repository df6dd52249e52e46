#!/usr/bin/env bash
# copy from an S3 store whose listing is hostile (a scripted fake: tests/servers/
# s3_hostile_listing_fake.py; no real server lists names it cannot store) into a Local store,
# with a real full snapshot of a real etcd among the hostile names:
#  1. names with "..", backslashes, ESC sequences, DEL and a newline that forges a log line are
#     skipped: only the real full snapshot is copied, nothing appears outside the Local store
#     folder, and the log holds no raw control character and no forged line;
#  2. a name with a raw NUL ("v2/Full-...-1700000000<NUL>/../../evil", which cut short is another,
#     valid name the fake also serves) is refused, never read as the shorter name: copy exits
#     non-zero naming the NUL, and the destination holds no object of that name.
source "$(dirname "$0")/lib.sh"
make_workdir

start_etcd a "$WORK/a.etcd"
for i in $(seq 1 20); do ectl put "/k/$i" "v$i" >/dev/null; done
SRC=$WORK/src
start_snapshotter "$SRC" "$WORK/src.log"
wait_for_log "$WORK/src.log" "full snapshot Full-" 60
stop_snapshotter
full=$(ls "$SRC/v2" | grep '^Full-') || fail "no full snapshot from etcd"
OBJ=$WORK/objects
mkdir -p "$OBJ"
cp "$SRC/v2/$full" "$OBJ/"
LIE=Full-00000001-00000005-1700000000
printf 'lie!' >"$OBJ/$LIE"

start_fake() { # KEYS_FILE: sets FAKE_EP
    rm -f "$WORK/fake.port"
    python3 "$ETCDBR_SOURCE_DIR/tests/servers/s3_hostile_listing_fake.py" "$WORK/fake.port" "$1" \
        "$OBJ" >"$WORK/fake.log" 2>&1 &
    FAKE_PID=$!
    PIDS+=("$FAKE_PID")
    local i
    for i in $(seq 1 100); do
        [ -s "$WORK/fake.port" ] && break
        kill -0 "$FAKE_PID" 2>/dev/null || { cat "$WORK/fake.log"; fail "the fake S3 did not start"; }
        sleep 0.1
    done
    [ -s "$WORK/fake.port" ] || fail "the fake S3 did not start"
    FAKE_EP=http://127.0.0.1:$(cat "$WORK/fake.port")
}
printf '{"region":"us-east-1","accessKeyID":"k","secretAccessKey":"s","s3ForcePathStyle":true}\n' >"$WORK/creds.json"
copy_from_fake() { # DST LOG
    env -u AWS_APPLICATION_CREDENTIALS -u AWS_ACCESS_KEY_ID SOURCE_AWS_APPLICATION_CREDENTIALS_JSON="$WORK/creds.json" \
        "$ETCDBR_BIN" copy --storage-provider=Local --store-container="$1" --store-prefix= \
        --source-storage-provider=S3 --source-store-container=b --source-store-prefix=p \
        --source-store-endpoint-override="$FAKE_EP" --snapstore-temp-directory="$WORK/snaptmp" >"$2" 2>&1
}

# --- 1. hostile names beside a real full -------------------------------------------------------------
cat >"$WORK/keys1" <<KEYS
p/v2/$full
p/v2/../../../escape/Full-00000001-00000002-3
p/v2/Full-00000001-00000002-3\\\\..\\\\..\\\\evil
p/v2/\\x1b[2J\\x1b[31mFull-00000001-00000002-3
p/v2/Full-00000001-00000002-3\\x7f
p/v2/Incr-00000001-00000002-3\\ntime="x" level=error msg="forged"
p/v2/../$LIE
/p/v2/$LIE
KEYS
start_fake "$WORK/keys1"
DST=$WORK/plain/dst
mkdir -p "$DST"
before=$(cd "$WORK" && find . -path ./plain -prune -o -path ./snaptmp -prune -o -print | sort)
copy_from_fake "$DST" "$WORK/copy1.log" || { cat "$WORK/copy1.log"; fail "copy from the hostile listing failed"; }
copied=$(ls -A "$DST/v2" | grep -v '^\.' | tr '\n' ' ')
[ "$copied" = "$full " ] || fail "copy copied [$copied], want only [$full]"
cmp -s "$DST/v2/$full" "$OBJ/$full" || fail "the copied full differs from the served one"
after=$(cd "$WORK" && find . -path ./plain -prune -o -path ./snaptmp -prune -o -path ./copy1.log -prune -o -print | sort)
[ "$before" = "$after" ] || fail "copy created files outside the store folder: $(diff <(echo "$before") <(echo "$after"))"
! LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$WORK/copy1.log" || fail "the copy's log holds raw control characters"
! grep -v '^time=' "$WORK/copy1.log" | grep -q . || fail "a listed name forged a log line: $(grep -v '^time=' "$WORK/copy1.log" | head -3)"
stop_pid "$FAKE_PID"
echo "1. hostile names skipped: only $full copied, nothing outside, the log escapes every name"

# --- 2. a raw NUL that would cut a name short into another valid one ---------------------------------
printf 'p/v2/%s\\x00/../../evil\n' "$LIE" >"$WORK/keys2"
start_fake "$WORK/keys2"
DST2=$WORK/plain/dst2
mkdir -p "$DST2"
rc=0
copy_from_fake "$DST2" "$WORK/copy2.log" || rc=$?
[ ! -e "$DST2/v2/$LIE" ] || fail "a name with a NUL was read as the shorter name $LIE and copied"
[ "$rc" != 0 ] || { cat "$WORK/copy2.log"; fail "copy of a listing with a NUL in a name exited 0"; }
grep -q "NUL" "$WORK/copy2.log" || { cat "$WORK/copy2.log"; fail "the error does not name the NUL"; }
stop_pid "$FAKE_PID"
echo "2. a name with a NUL: refused (exit $rc), never read as $LIE"
echo "PASS: copy from a hostile S3 listing into Local: hostile names skipped and escaped, a NUL never cuts a name short"
