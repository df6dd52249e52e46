#!/usr/bin/env bash
# Retries and resumed downloads of the GCS driver against fake-gcs-server behind the
# fault-injecting proxy (tests/servers/fault_proxy.py): 503s on uploads and composes (POST), a
# 500 on a read and downloads cut mid-body; the round trip must still be exact, every retry
# logged with its cause, every cut download resumed at the byte reached (pinned to the object's
# generation), not restarted.
source "$(dirname "$0")/lib.sh"
make_workdir
export ETCDBR_STORE_RETRY_BASE_MS=20 # same number of tries, shorter backoff
unset GOOGLE_APPLICATION_CREDENTIALS
start_fake_gcs faults
start_fault_proxy "$GCS_ENDPOINT" --status POST:503:3 --status GET:500:1 --cut GET:1048576:2
store_round_trip gcs-faults --storage-provider=GCS --store-container="$GCS_BUCKET" --store-prefix=etcd \
    --store-endpoint-override="$PROXY_EP" --min-chunk-size=5242880 --max-parallel-chunk-uploads=2
dir=$WORK/rt-gcs-faults
n=$(grep -c "^status 503 POST" "$PROXY_LOG" || true)
[ "$n" = 3 ] || fail "$n of 3 injected 503s on POST fired"
[ "$(grep -c "^cut GET" "$PROXY_LOG" || true)" = 2 ] || fail "the 2 download cuts did not fire: $(cat "$PROXY_LOG")"
grep -q "retrying (try 2 of 6) in [0-9]* ms after: .*HTTP 503" "$dir/snap.log" ||
    fail "no retry after a 503 logged: $(grep -i retr "$dir/snap.log" | head -3)"
first=$(sed -n 's/^cut GET .* after 1048576 of \([0-9]*\) bytes$/\1/p' "$PROXY_LOG" | sed -n 1p)
second=$(sed -n 's/^cut GET .* after 1048576 of \([0-9]*\) bytes$/\1/p' "$PROXY_LOG" | sed -n 2p)
[ "$second" = "$((first - 1048576))" ] ||
    fail "the download after a cut at byte 1048576 of $first asked for $second bytes, not the rest"
grep -qi "resum" "$dir/restore.log" || fail "a cut download was not resumed: $(tail -5 "$dir/restore.log")"
grep -q "^req GET .*alt=media.*generation=[0-9]" "$PROXY_LOG" ||
    fail "the resumed download is not pinned to the object's generation: $(grep '^req GET' "$PROXY_LOG" | tail -3)"
left=$(gcs_object_names etcd/v2/ | grep -E '/[0-9]{10}$' || true)
[ -z "$left" ] || fail "chunk objects left after retried uploads: $left"
echo "GCS: $(grep -c "^status\|^cut" "$PROXY_LOG") faults injected, $(grep -c "retrying" "$dir/snap.log") retries while backing up, $(grep -ci "resum" "$dir/restore.log") resumed downloads"
echo "PASS: GCS faults"
