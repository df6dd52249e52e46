#!/usr/bin/env bash
# Round trip through Azure Blob storage (azurite 3.35.0, SharedKey verified): store_round_trip
# (lib.sh) with `--storage-provider=ABS`, AZURE_APPLICATION_CREDENTIALS_JSON and a path-style
# endpoint override, the full snapshot staged in 5 MiB blocks (2 in flight) and committed.
source "$(dirname "$0")/lib.sh"
make_workdir
start_azurite etcdbr-round-trip
export AZURE_APPLICATION_CREDENTIALS_JSON=$AZ_CREDS_JSON
store_round_trip abs --storage-provider=ABS --store-container="$AZ_CONTAINER" --store-prefix=etcd-main \
    --store-endpoint-override="$AZ_ENDPOINT" --min-chunk-size=5242880 --max-parallel-chunk-uploads=2
grep -q "snapshot store: ABS:$AZ_CONTAINER" "$WORK/rt-abs/snap.log" || fail "not on ABS: $(head -3 "$WORK/rt-abs/snap.log")"
echo "PASS: ABS round trip"
