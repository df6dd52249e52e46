#!/usr/bin/env bash
# Round trip through Google Cloud Storage (fake-gcs-server, http:// endpoint = emulator, no
# token): store_round_trip (lib.sh) with `--storage-provider=GCS` and the endpoint override; the
# ~9 MiB gzip'ed full snapshot is streamed as 5 MiB chunk objects (2 in flight), the first folded
# into an intermediate composite (ETCDBR_GCS_COMPOSE_BATCH=1) and composed into the snapshot
# object. Afterwards the bucket holds exactly the full snapshot and the deltas (no chunk object,
# no intermediate) besides the history records.
source "$(dirname "$0")/lib.sh"
make_workdir
start_fake_gcs etcdbr-round-trip
unset GOOGLE_APPLICATION_CREDENTIALS
export ETCDBR_GCS_COMPOSE_BATCH=1
store_round_trip gcs --storage-provider=GCS --store-container="$GCS_BUCKET" --store-prefix=etcd-main \
    --store-endpoint-override="$GCS_ENDPOINT" --min-chunk-size=5242880 --max-parallel-chunk-uploads=2
grep -q "snapshot store: GCS:$GCS_BUCKET" "$WORK/rt-gcs/snap.log" || fail "not on GCS: $(head -3 "$WORK/rt-gcs/snap.log")"
gcs_object_names etcd-main/v2/ >"$WORK/objects"
grep -Eq '/[0-9]{10}$' "$WORK/objects" && fail "chunk objects left in the bucket: $(grep -E '/[0-9]{10}$' "$WORK/objects")"
fulls=$(grep -c '^etcd-main/v2/Full-' "$WORK/objects" || true)
deltas=$(grep -c '^etcd-main/v2/Incr-' "$WORK/objects" || true)
[ "$fulls" = 1 ] || fail "expected 1 full snapshot object, found $fulls: $(cat "$WORK/objects")"
[ "$deltas" = "$RT_DELTAS" ] || fail "expected $RT_DELTAS delta objects, found $deltas"
echo "PASS: GCS round trip ($fulls full, $deltas deltas, no chunk objects left)"
