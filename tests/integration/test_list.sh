#!/usr/bin/env bash
# etcdbrctl list (issue 9 item 3) against stores real snapshotters wrote, with real etcd:
#  1. S3 (s3rver): one set; the JSON names exactly the objects in the bucket (full snapshot and
#     deltas, sizes as stored, gzip, not encrypted, the store's history id) and the table shows
#     the same objects with the same set, revisions and status; --output=json equals -o json;
#  2. Local, after a fork (restore to an older revision, backed up into the same store) and a
#     delta of another history planted with its tag: two sets (the old history's full snapshot
#     with its deltas up to the fork, the fork's), the old history's later objects marked
#     "abandoned", the planted delta "other-history"; JSON and table name every object of the
#     store exactly once and agree on each object's set and status;
#  3. verify on that store: the planted delta fails both scopes (other-history); without it the
#     store passes (abandoned objects are no fault), and a bad hash in the older set fails only
#     --all-sets, naming the object.
source "$(dirname "$0")/lib.sh"
make_workdir
SEED=${ETCDBR_TEST_SEED:-$RANDOM}
RANDOM=$SEED
echo "seed: $SEED (ETCDBR_TEST_SEED=$SEED to replay)"

puts() { local i; for i in $(seq 1 "$2"); do ectl put "$1/$i" "v-$RANDOM" >/dev/null; done; }
snap_run() { # snap_run LOG STORE_FLAGS...
    local log=$1
    shift
    "$ETCDBR_BIN" snapshot --endpoints="$ETCD_EP" --snapstore-temp-directory="$WORK/snaptmp" \
        --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s "$@" \
        >"$log" 2>&1 &
    SNAP_PID=$!
    PIDS+=("$SNAP_PID")
}
rounds() { # rounds LOG N: N batches of puts, each stored as its own delta
    local r
    for r in $(seq 1 "$2"); do
        puts "/b$RANDOM" $((2 + RANDOM % 5))
        wait_stored "$1" "$(current_revision "$ETCD_EP")"
        sleep 1.1
    done
}

# table_field NAME COLUMN: a column (1 SET, 2 KIND, 3 REVISIONS, 10 STATUS-or-NAME...) of the
# table row of object NAME; the status column is empty for older sets, so it is read by name
table_row() { grep -E " $1\$" "$2"; }

# --- 1. S3 -------------------------------------------------------------------------------------
start_s3rver backups
export AWS_APPLICATION_CREDENTIALS_JSON=$S3_CREDS_JSON
S3=(--storage-provider=S3 --store-container="$S3_BUCKET" --store-prefix=etcd-main
    --store-endpoint-override="$S3_ENDPOINT")
start_etcd s "$WORK/s.etcd"
puts /s 25
snap_run "$WORK/s3-snap.log" "${S3[@]}"
wait_for_log "$WORK/s3-snap.log" "stored: revision" 30
rounds "$WORK/s3-snap.log" 3
stop_snapshotter
"$ETCDBR_BIN" list "${S3[@]}" -o json >"$WORK/s3.json" 2>"$WORK/s3.json.log" || fail "list -o json failed: $(cat "$WORK/s3.json.log")"
"$ETCDBR_BIN" list "${S3[@]}" --output=json >"$WORK/s3-long.json" 2>/dev/null || fail "list --output=json failed"
cmp -s "$WORK/s3.json" "$WORK/s3-long.json" || fail "-o json and --output=json differ"
"$ETCDBR_BIN" list "${S3[@]}" >"$WORK/s3.txt" 2>/dev/null || fail "list failed"
BDIR=$WORK/s3rver/$S3_BUCKET/etcd-main
# the bucket's objects (s3rver keeps each as <key>._S3rver_object) with their sizes
find "$BDIR/v2" -name '*._S3rver_object' -printf '%f %s\n' | sed 's/._S3rver_object / /' | sort >"$WORK/s3-bucket.txt"
jq -r '.sets[] | (.full, .deltas[]) | "\(.name) \(.size)"' "$WORK/s3.json" | sort >"$WORK/s3-list.txt"
diff "$WORK/s3-bucket.txt" "$WORK/s3-list.txt" >&2 || fail "list JSON and the bucket differ (bucket <, list >)"
[ "$(jq '.sets | length' "$WORK/s3.json")" = 1 ] || fail "expected one set"
[ "$(jq '.other_objects | length' "$WORK/s3.json")" = 0 ] || fail "objects outside the set"
HS=$(ls "$BDIR/etcdbr/history")
[ "$(jq -r '[.sets[] | (.full, .deltas[]) | "\(.history) \(.compression) \(.encrypted)"] | unique | .[]' "$WORK/s3.json")" = "$HS gzip false" ] ||
    fail "history/compression/encryption: $(jq -c '[.sets[] | (.full, .deltas[]) | [.history, .compression, .encrypted]] | unique' "$WORK/s3.json")"
[ "$(jq -r '.sets[0].latest' "$WORK/s3.json")" = true ] || fail "the set is not marked latest"
# the table: the same objects, set 1, the revisions of their names, status latest
while read -r name size; do
    row=$(table_row "$name" "$WORK/s3.txt") || fail "table lacks $name"
    revs=$(jq -r --arg n "$name" '.sets[] | (.full, .deltas[]) | select(.name == $n) | "\(.start_revision)-\(.last_revision)"' "$WORK/s3.json")
    read -r set kind trevs _ <<<"$row"
    [ "$set" = 1 ] && [ "$trevs" = "$revs" ] || fail "table row of $name: $row (JSON revisions $revs)"
    echo "$row" | grep " latest " >/dev/null || fail "table row of $name not marked latest: $row"
done <"$WORK/s3-list.txt"
[ "$(grep -c -E '(Full|Incr)-' "$WORK/s3.txt")" = "$(wc -l <"$WORK/s3-list.txt")" ] || fail "table has other rows: $(cat "$WORK/s3.txt")"
stop_pid "$ETCD_PID"
echo "ok: S3: list JSON and table agree with the bucket ($(wc -l <"$WORK/s3-list.txt") objects)"

# --- 2. Local: two histories after a fork, abandoned and other-history objects ------------------
L=$WORK/local
start_etcd f "$WORK/f.etcd"
puts /f 20
snap_run "$WORK/f.log" --store-container="$L"
wait_for_log "$WORK/f.log" "stored: revision" 30
rounds "$WORK/f.log" 2
fork_rev=$(current_revision "$ETCD_EP")
rounds "$WORK/f.log" 2
stop_snapshotter
stop_pid "$ETCD_PID"
H1=$(ls "$L/etcdbr/history")
restore_store "$L" "$WORK/g.etcd" --revision="$fork_rev" >"$WORK/g-restore.log" 2>&1 ||
    { tail "$WORK/g-restore.log"; fail "restore --revision=$fork_rev failed"; }
start_etcd g "$WORK/g.etcd"
puts /g 10
snap_run "$WORK/g.log" --store-container="$L"
wait_for_log "$WORK/g.log" "stored: revision" 30
rounds "$WORK/g.log" 2
stop_snapshotter
grep "(fork)" "$WORK/g.log" >/dev/null || { tail "$WORK/g.log"; fail "no fork"; }
stop_pid "$ETCD_PID"
H2=$(ls "$L/etcdbr/history" | grep -v "^$H1\$")
# a delta of a third, unrelated history whose revisions fall inside the fork's set
start_etcd o "$WORK/o.etcd"
puts /o 60
O=$WORK/other
snap_run "$WORK/o.log" --store-container="$O"
wait_for_log "$WORK/o.log" "stored: revision" 30
rounds "$WORK/o.log" 1
stop_snapshotter
stop_pid "$ETCD_PID"
H3=$(ls "$O/etcdbr/history")
foreign=$(ls "$O/v2" | grep '^Incr-' | head -1)
cp "$O/v2/$foreign" "$L/v2/"
mkdir -p "$L/etcdbr/history/$H3"
cp "$O/etcdbr/history/$H3/record.json" "$O/etcdbr/history/$H3/$foreign" "$L/etcdbr/history/$H3/"

"$ETCDBR_BIN" list --store-container="$L" -o json >"$WORK/l.json" 2>"$WORK/l.json.log" || fail "list -o json: $(cat "$WORK/l.json.log")"
"$ETCDBR_BIN" list --store-container="$L" >"$WORK/l.txt" 2>/dev/null || fail "list failed"
# every object of the store exactly once (sets first, then the objects outside every set)
ls "$L/v2" | sort >"$WORK/l-store.txt"
jq -r '[.sets[] | (.full, .deltas[]) | .name] + [.other_objects[].name] | unique | .[]' "$WORK/l.json" >"$WORK/l-list.txt"
diff "$WORK/l-store.txt" "$WORK/l-list.txt" >&2 || fail "list JSON and the store differ (store <, list >)"
[ "$(jq '.sets | length' "$WORK/l.json")" = 2 ] || fail "expected 2 sets: $(jq -c '[.sets[] | .full.name]' "$WORK/l.json")"
[ "$(jq -r '.sets[0].history' "$WORK/l.json")" = "$H1" ] || fail "set 1 is not history $H1"
[ "$(jq -r '.sets[1].history' "$WORK/l.json")" = "$H2" ] || fail "set 2 is not history $H2"
[ "$(jq -r '.sets[1].latest' "$WORK/l.json")" = true ] || fail "set 2 is not the latest"
# abandoned: exactly the old history's objects after the fork revision
ls "$L/etcdbr/history/$H1" | grep -E '^(Full|Incr)-' | while read -r n; do
    last=$(echo "$n" | cut -d- -f3 | sed 's/^0*//')
    st=$(jq -r --arg n "$n" '.other_objects[] | select(.name == $n) | .status' "$WORK/l.json")
    if [ "$last" -gt "$fork_rev" ]; then
        [ "$st" = abandoned ] || fail "$n (after the fork at $fork_rev) is not marked abandoned: '$st'"
        table_row "$n" "$WORK/l.txt" | grep -E "^- .* abandoned +$n\$" >/dev/null || fail "table: $n not abandoned: $(table_row "$n" "$WORK/l.txt")"
    else
        [ -z "$st" ] || fail "$n (before the fork) is marked $st"
        [ "$(jq -r --arg n "$n" '[.sets[0] | (.full, .deltas[]) | select(.name == $n)] | length' "$WORK/l.json")" = 1 ] || fail "$n is not in set 1"
        table_row "$n" "$WORK/l.txt" | grep -E "^1 " >/dev/null || fail "table: $n not in set 1: $(table_row "$n" "$WORK/l.txt")"
    fi
done
[ "$(jq -r --arg n "$foreign" '.other_objects[] | select(.name == $n) | "\(.status) \(.history)"' "$WORK/l.json")" = "other-history $H3" ] ||
    fail "the planted delta $foreign is not other-history $H3"
table_row "$foreign" "$WORK/l.txt" | grep -E "^- .* $H3 +other-history +$foreign\$" >/dev/null ||
    fail "table: $foreign: $(table_row "$foreign" "$WORK/l.txt")"
for n in $(jq -r '.sets[1] | (.full, .deltas[]) | .name' "$WORK/l.json"); do
    table_row "$n" "$WORK/l.txt" | grep -E "^2 .* $H2 +latest +$n\$" >/dev/null || fail "table: $n not in the latest set 2: $(table_row "$n" "$WORK/l.txt")"
done
[ "$(grep -c -E '(Full|Incr)-' "$WORK/l.txt")" = "$(wc -l <"$WORK/l-store.txt")" ] || fail "table rows differ from the store's objects: $(cat "$WORK/l.txt")"
echo "ok: Local: 2 sets, abandoned and other-history objects marked in JSON and table"

# --- 3. verify on the same store: every set ------------------------------------------------------
vrun() { # vrun WANT OUT [flags]
    local want=$1 out=$2 rc=0
    shift 2
    "$ETCDBR_BIN" verify --store-container="$L" --snapstore-temp-directory="$WORK/vt" "$@" >"$out" 2>"$out.log" || rc=$?
    [ "$rc" = "$want" ] || { cat "$out" "$out.log" >&2; fail "verify $* exited $rc, expected $want"; }
}
vrun 1 "$WORK/v-foreign.txt" --all-sets
grep -F "v2/$foreign belongs to history $H3" "$WORK/v-foreign.txt" >/dev/null || fail "other-history not reported: $(cat "$WORK/v-foreign.txt")"
rm "$L/v2/$foreign" "$L/etcdbr/history/$H3/$foreign"
vrun 0 "$WORK/v-all.txt" --all-sets
grep "^scope: every set" "$WORK/v-all.txt" >/dev/null || fail "scope: $(cat "$WORK/v-all.txt")"
[ "$(grep -c '^set ' "$WORK/v-all.txt")" = 2 ] || fail "expected 2 sets verified: $(cat "$WORK/v-all.txt")"
old=$(jq -r '.sets[0].deltas[0].name' "$WORK/l.json")
python3 - "$L/v2/$old" <<'PY'
import gzip, sys
p = sys.argv[1]
raw = bytearray(gzip.decompress(open(p, "rb").read()))
raw[(len(raw) - 32) // 2] ^= 1
open(p, "wb").write(gzip.compress(bytes(raw)))
PY
vrun 0 "$WORK/v-latest.txt"
vrun 1 "$WORK/v-old.txt" --all-sets
grep -F "FAULT [bad-hash] bad hash in v2/$old" "$WORK/v-old.txt" >/dev/null || fail "older set's bad hash: $(cat "$WORK/v-old.txt")"
grep -E "^set v2/Full-.*: FAULTY" "$WORK/v-old.txt" >/dev/null || fail "the older set is not FAULTY"
grep -E "^set v2/Full-.* \(latest\): .*: ok" "$WORK/v-old.txt" >/dev/null || fail "the latest set is not ok"
echo "ok: verify --all-sets: abandoned objects pass, a bad hash in the older set fails only --all-sets"
echo "PASS: list"
