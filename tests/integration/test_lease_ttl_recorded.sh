#!/usr/bin/env bash
# The snapshotter records the granted TTL of a lease its deltas use ("leaseTTL", docs/snapshot.md),
# on every etcd version (etcd_versions): after the full snapshot a lease is granted with TTL 77
# and two keys are put with it; the stored delta (gzip, the default) holds "leaseTTL":77 exactly
# once, right after "time" of the first put of that lease. A lease that is gone by the time the
# snapshotter sees its put (the snapshotter is paused with SIGSTOP until the lease expired) gets
# no "leaseTTL" and no warning. A restore grants the first lease with its recorded TTL (not
# --new-lease-ttl, set to something else here) and both keys are attached to it.
source "$(dirname "$0")/lib.sh"
make_workdir
# etcd_versions/use_etcd come with the multi-version lib.sh; without them: the etcd on PATH
if declare -F etcd_versions >/dev/null; then versions=$(etcd_versions); else versions=path; fi

lease_run() {
    local v=$1
    if [ "$v" != path ]; then
        use_etcd "$v"
        sub_workdir "$v"
    fi
    start_etcd src "$WORK/src.etcd"
    local SRC_PID=$ETCD_PID
    ectl put /base/k v >/dev/null
    # a delta period longer than the test: the delta is cut by the stop, so both puts share it
    start_snapshotter "$WORK/store" "$WORK/snap.log" --delta-snapshot-period=5m
    wait_for_log "$WORK/snap.log" "full snapshot Full-"

    local out hex dec
    out=$(ectl lease grant 77)
    hex=$(awk '/granted/ {print $2}' <<<"$out")
    [ -n "$hex" ] || fail "etcd $v: no lease ID in: $out"
    dec=$(printf '%d' "0x$hex")
    ectl put --lease="$hex" /leased/one 1 >/dev/null
    ectl put --lease="$hex" /leased/two 2 >/dev/null
    ectl put /plain/after x >/dev/null

    # a lease that expires while the snapshotter is paused: its lookup finds nothing
    local gone_hex gone_dec i
    out=$(ectl lease grant 1)
    gone_hex=$(awk '/granted/ {print $2}' <<<"$out")
    gone_dec=$(printf '%d' "0x$gone_hex")
    kill -STOP "$SNAP_PID"
    ectl put --lease="$gone_hex" /gone/k x >/dev/null
    for i in $(seq 1 100); do
        [ "$(ectl lease timetolive "$gone_hex" -w json | jq '.ttl')" = -1 ] && break
        sleep 0.1
    done
    kill -CONT "$SNAP_PID"
    [ "$(ectl get /gone/k --print-value-only)" = "" ] || fail "etcd $v: lease $gone_hex did not expire"
    stop_snapshotter
    grep -q "level=warn" "$WORK/snap.log" && {
        grep "level=warn" "$WORK/snap.log" >&2
        fail "etcd $v: the snapshotter warned"
    }

    local deltas json
    deltas=$(ls "$WORK/store/v2" | grep '^Incr-' || true)
    [ "$(wc -l <<<"$deltas")" = 1 ] && [ -n "$deltas" ] ||
        fail "etcd $v: expected one delta, got: $(ls "$WORK/store/v2")"
    case "$deltas" in *.gz) ;; *) fail "etcd $v: delta $deltas is not gzip (the default)" ;; esac
    json=$WORK/delta.json
    gzip -dc "$WORK/store/v2/$deltas" | head -c -32 >"$json"
    # 3 puts, the put with the expired lease and the delete of its key by the expiry
    jq -e 'length == 5' "$json" >/dev/null || fail "etcd $v: delta is not a JSON array of 5 events: $(cat "$json")"
    grep -q "\"lease\":$gone_dec}},\"time\":\"[^\"]*\"}" "$json" ||
        fail "etcd $v: the put with expired lease $gone_dec is missing or has a leaseTTL: $(cat "$json")"
    local n_ttl n_exact
    n_ttl=$(grep -o '"leaseTTL":[0-9-]*' "$json" | wc -l)
    n_exact=$(grep -o "\"lease\":$dec}},\"time\":\"[^\"]*\",\"leaseTTL\":77}" "$json" | wc -l)
    [ "$n_ttl" = 1 ] && [ "$n_exact" = 1 ] ||
        fail "etcd $v: want \"leaseTTL\":77 once, on lease $dec; got $n_ttl leaseTTL fields, $n_exact on it: $(cat "$json")"
    # on the first put of the lease
    grep -o '{"etcdEvent":[^{]*{[^}]*}},"time":"[^"]*"[^}]*}' "$json" | sed -n 1p |
        grep -q "\"leaseTTL\":77}$" || fail "etcd $v: leaseTTL is not on the first put of the lease"
    stop_pid "$SRC_PID"

    restore_store "$WORK/store" "$WORK/restored.etcd" --new-lease-ttl=5m >"$WORK/restore.log" 2>&1 || {
        tail -15 "$WORK/restore.log"
        fail "etcd $v: restore failed"
    }
    start_etcd restored "$WORK/restored.etcd"
    local ttl_json granted keys
    ttl_json=$(ectl lease timetolive "$hex" --keys -w json)
    granted=$(jq -r '."granted-ttl"' <<<"$ttl_json")
    keys=$(jq -r '[.keys[] | @base64d] | sort | join(",")' <<<"$ttl_json")
    [ "$granted" = 77 ] || fail "etcd $v: restored lease $hex granted TTL $granted, want 77: $ttl_json"
    [ "$keys" = "/leased/one,/leased/two" ] ||
        fail "etcd $v: restored lease $hex has keys '$keys', want /leased/one,/leased/two"
    [ "$(ectl get /leased/two --print-value-only)" = 2 ] || fail "etcd $v: /leased/two not restored"
    [ "$(ectl get /gone/k --print-value-only)" = "" ] || fail "etcd $v: /gone/k restored"
    echo "etcd $v: lease $hex recorded with TTL 77 once, expired lease $gone_hex with none; restored with TTL 77 and both keys"
    stop_pid "$ETCD_PID"
}

for v in $versions; do
    lease_run "$v"
done
echo "PASS test_lease_ttl_recorded"
