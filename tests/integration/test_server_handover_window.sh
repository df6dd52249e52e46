#!/usr/bin/env bash
# The handover window of a new backup leader (docs/server.md, "Leader handover"): the previous
# leader's sidecar may land a delta it had begun to store after the new leader's sidecar listed
# the store. Staged deterministically with one etcd member: sidecar B starts on the store (latest
# revision L) with a long delta period; once it has listed the store, a delta covering L+1..X,
# made by another sidecar on a copy of the store, lands in it (with its history tag). Checks: B's
# first delta continues after X ("leader handover" in its log) instead of overlapping it, the
# store holds one chain without overlap or hole, and a restore equals etcd's keyspace. Without
# the window B would store L+1..Y over the other delta.
source "$(dirname "$0")/lib.sh"
make_workdir
start_etcd m1 "$WORK/m1.etcd"
S=$WORK/store
S2=$WORK/store2
server() { # STORE LOG DELTA_PERIOD
    PORT=$(free_port)
    "$ETCDBR_BIN" server --endpoints="$ETCD_EP" --storage-provider=Local --store-container="$1" \
        --snapstore-temp-directory="$WORK/snaptmp" --server-port="$PORT" --data-dir="$WORK/m1.etcd" \
        --delta-snapshot-period="$3" --schedule='0 0 1 1 *' --reelection-period=1500ms \
        --etcd-connection-timeout-leader-election=1500ms --garbage-collection-period=0s >"$2" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
}
stop_server() {
    kill -TERM "$SERVER_PID"
    wait "$SERVER_PID" || fail "server exited $? after SIGTERM: $(tail -5 "$1")"
}
put_keys() { # FROM TO
    local k
    for k in $(seq "$1" "$2"); do gw_put "$ETCD_EP" "$(printf /w/%s "$k" | base64 -w0)" "$(printf v%s "$k" | base64 -w0)"; done
}
objects() {
    ls "$S/v2" | sed -nE 's/^(Full|Incr)-0*([0-9]+)-0*([0-9]+)-([0-9]+).*/\1 \2 \3 \4/p' | sort -k3,3n -k1,1r
}

# A: the first leader: a full snapshot and deltas up to L
put_keys 1 5
server "$S" "$WORK/a.log" 1s
wait_for_log "$WORK/a.log" "full snapshot .* stored" 30
put_keys 6 10
stop_server "$WORK/a.log"
L=$(current_revision "$ETCD_EP")
echo "A stored revisions up to $L: $(ls "$S/v2" | tr '\n' ' ')"

# C, "the previous leader": stores L+1..X into a copy of the store
cp -r "$S" "$S2"
put_keys 11 15
X=$(current_revision "$ETCD_EP")
server "$S2" "$WORK/c.log" 1s
wait_for_log "$WORK/c.log" "revisions $((L + 1))-$X" 30
stop_server "$WORK/c.log"
[ "$(ls "$S2/v2" | grep -c "^Incr-.*-0*$X-")" = 1 ] || fail "C did not store a delta ending at $X: $(ls "$S2/v2")"

# B, the new leader: lists the store (latest L); C's delta lands before B's first delta
put_keys 16 20
Y=$(current_revision "$ETCD_EP")
server "$S" "$WORK/b.log" 4s
wait_for_log "$WORK/b.log" "resuming from .* deltas from revision $((L + 1))" 30
cp -rn "$S2/." "$S/"
wait_for_log "$WORK/b.log" "leader handover: .* covers revisions $((L + 1))-$X" 30
wait_for_log "$WORK/b.log" "revisions $((X + 1))-$Y" 30
echo "B continued after the landed delta: $(grep -o 'leader handover: [^"]*' "$WORK/b.log")"
stop_server "$WORK/b.log"

objects >"$WORK/objects"
awk 'NR == 1 { next_ = $3 + 1; next }
     $1 == "Full" { if ($3 + 1 > next_) next_ = $3 + 1; next }
     $2 < next_ { print "Incr " $2 "-" $3 " overlaps revisions up to " next_ - 1; bad = 1 }
     $2 > next_ { print "revisions " next_ "-" $2 - 1 " are in no delta"; bad = 1 }
     { next_ = $3 + 1 }
     END { exit bad }' "$WORK/objects" || { cat "$WORK/objects"; fail "the deltas do not form one chain"; }
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
restore_store "$S" "$WORK/restored.etcd" >"$WORK/restore.log" 2>&1 || { cat "$WORK/restore.log"; fail "restore failed"; }
stop_pid "$ETCD_PID"
start_etcd r "$WORK/restored.etcd"
[ "$(current_revision "$ETCD_EP")" = "$Y" ] || fail "restored revision $(current_revision "$ETCD_EP"), want $Y"
dump_keys "$ETCD_EP" | cmp - "$WORK/src.jsonl" || fail "restored keyspace differs"
echo "one chain without overlap up to $Y ($(grep -c '^Incr' "$WORK/objects") deltas); restore exact"
