#!/usr/bin/env bash
# The image (scripts/build-image.sh, docs/deploy.md) in containers, with podman (runc, the
# settings of image/containers.conf):
#  1. the image: its user is the non-root 65532:65532, it carries the OCI labels (version = the
#     binary's, revision = a git commit, source, created) and the pinned Debian packages, and it
#     is under 40 MB;
#  2. a `snapshot` container (--network=host, the store directory bind-mounted) backs up an etcd
#     on loopback into a Local store: a full snapshot, then a delta of later writes; SIGTERM to
#     the podman client (it forwards the signal) stops it with exit 0;
#  3. a `restore` container (no network, the store mounted read-only, the data dir's parent
#     bind-mounted) restores the store;
#  4. etcd started on the restored data dir serves every key written before with its value,
#     create/mod revision and version, at the same revision.
# The containers run as the image's user (65532): the bind-mounted directories are chowned to it,
# as an operator would (or a pod's fsGroup); the files they write are owned by 65532.
# The image: $ETCDBR_IMAGE when set (scripts/test.sh builds it once), else scripts/build-image.sh
# from $ETCDBR_BIN (not from a sanitizer build: the image takes a plain etcdbrctl).
source "$(dirname "$0")/lib.sh"
make_workdir
export CONTAINERS_CONF=${CONTAINERS_CONF:-$ETCDBR_SOURCE_DIR/image/containers.conf}
UID_IMAGE=65532
for t in podman runc; do
    command -v "$t" >/dev/null || skip_test "$t not installed (scripts/install-deps.sh installs podman, runc and mmdebstrap)"
done
[ "$(id -u)" = 0 ] || skip_test "needs root (podman's root storage, and the bind mounts are chowned to uid $UID_IMAGE)"

NAME=etcdbr-it-$$
CONTAINERS=("$NAME-snapshot" "$NAME-restore")
# the podman clients are stopped by PID first (each forwards SIGTERM to its container); a
# container still there after that is removed by its name, which only this test uses
trap 'stop_all; podman rm -f -i "${CONTAINERS[@]}" >/dev/null 2>&1 || true; cleanup' EXIT

IMAGE=${ETCDBR_IMAGE:-}
if [ -z "$IMAGE" ]; then
    if readelf -d "$ETCDBR_BIN" | grep -E 'lib(a|ub|t|l)san' >/dev/null; then
        skip_test "$ETCDBR_BIN is a sanitizer build: set ETCDBR_IMAGE (scripts/build-image.sh prints it) or run from a plain build"
    fi
    command -v mmdebstrap >/dev/null || skip_test "mmdebstrap not installed (scripts/install-deps.sh)"
    ETCDBR_BIN=$ETCDBR_BIN "$ETCDBR_SOURCE_DIR/scripts/build-image.sh" >"$WORK/build-image.log" 2>&1 ||
        fail "scripts/build-image.sh failed: $(tail -5 "$WORK/build-image.log")"
    IMAGE=$(tail -1 "$WORK/build-image.log")
fi
echo "image: $IMAGE"

# ---- 1. the image ----
label() { podman image inspect --format "{{index .Labels \"$1\"}}" "$IMAGE"; }
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "$user" = "$UID_IMAGE:$UID_IMAGE" ] || fail "the image's user is '$user', not $UID_IMAGE:$UID_IMAGE"
version=$(podman run --rm --network=none "$IMAGE" --version | head -1)
[ "$version" = "etcdbrctl version $(label org.opencontainers.image.version)" ] ||
    fail "--version says '$version', the label $(label org.opencontainers.image.version)"
[[ "$(label org.opencontainers.image.revision)" =~ ^[0-9a-f]{40}(-dirty)?$ ]] ||
    fail "revision label: '$(label org.opencontainers.image.revision)'"
[[ "$(label org.opencontainers.image.created)" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$ ]] ||
    fail "created label: '$(label org.opencontainers.image.created)'"
[ -n "$(label org.opencontainers.image.source)" ] || fail "no source label"
[[ " $(label io.etcdbr.image.debian-packages) " == *" libc6="* ]] ||
    fail "debian-packages label: '$(label io.etcdbr.image.debian-packages)'"
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "size: $size bytes"
[ "$size" -lt 40000000 ] || fail "the image is $size bytes (40 MB at most)"

# ---- 2. snapshot container ----
v=$(etcd_versions | tail -1)
use_etcd "$v"
echo "etcd $v"
start_etcd src "$WORK/src.etcd"
for i in $(seq 1 50); do ectl put "/img/k$i" "value-$i-$RANDOM" >/dev/null; done
ectl put /img/k7 overwritten >/dev/null
ectl del /img/k9 >/dev/null
rev1=$(current_revision "$ETCD_EP")
mkdir -p "$WORK/store" "$WORK/restore"
chown "$UID_IMAGE:$UID_IMAGE" "$WORK/store" "$WORK/restore"
podman run --rm --name "$NAME-snapshot" --network=host -v "$WORK/store:/backups" "$IMAGE" \
    snapshot --endpoints="$ETCD_EP" --storage-provider=Local --store-container=/backups \
    --schedule='0 0 1 1 *' --garbage-collection-period=0s --delta-snapshot-period=1s \
    >"$WORK/snapshot.log" 2>&1 &
SNAP_PID=$!
PIDS+=("$SNAP_PID")
wait_stored "$WORK/snapshot.log" "$rev1"
grep -q "stored: revision" "$WORK/snapshot.log" || fail "no full snapshot in the log"
for i in $(seq 51 80); do ectl put "/img/k$i" "later-$i" >/dev/null; done
ectl put /img/k1 "changed after the full snapshot" >/dev/null
ectl del /img/k2 >/dev/null
rev2=$(current_revision "$ETCD_EP")
wait_stored "$WORK/snapshot.log" "$rev2"
grep -Eq "stored: [0-9]+ events" "$WORK/snapshot.log" || fail "no delta in the log"
stop_snapshotter
dump_keys "$ETCD_EP" >"$WORK/src.jsonl"
[ "$(current_revision "$ETCD_EP")" = "$rev2" ] || fail "the source moved past $rev2"
stop_pid "$ETCD_PID"
[ "$(wc -l <"$WORK/src.jsonl")" = 78 ] || fail "the source has $(wc -l <"$WORK/src.jsonl") keys, not 78"
others=$(find "$WORK/store" -mindepth 1 ! -uid "$UID_IMAGE")
[ -z "$others" ] || fail "store files not written by uid $UID_IMAGE: $others"
[ -n "$(find "$WORK/store" -type f)" ] || fail "the store is empty"

# ---- 3. restore container ----
podman run --rm --name "$NAME-restore" --network=none -v "$WORK/store:/backups:ro" \
    -v "$WORK/restore:/restore" "$IMAGE" \
    restore --storage-provider=Local --store-container=/backups --data-dir=/restore/data.etcd \
    --name=restored --initial-cluster=restored=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --restoration-temp-snapshots-dir=/restore/tmp >"$WORK/restore.log" 2>&1 &
RESTORE_PID=$!
PIDS+=("$RESTORE_PID")
rc=0
wait "$RESTORE_PID" || rc=$?
[ "$rc" = 0 ] || fail "the restore container exited $rc: $(tail -5 "$WORK/restore.log")"
[ -d "$WORK/restore/data.etcd/member" ] || fail "no member dir restored"
others=$(find "$WORK/restore/data.etcd" ! -uid "$UID_IMAGE")
[ -z "$others" ] || fail "restored files not written by uid $UID_IMAGE: $others"

# ---- 4. etcd on the restored data dir ----
start_etcd restored "$WORK/restore/data.etcd"
dump_keys "$ETCD_EP" >"$WORK/restored.jsonl"
got=$(current_revision "$ETCD_EP")
[ "$got" = "$rev2" ] || fail "restored revision $got, the source's $rev2"
diff "$WORK/src.jsonl" "$WORK/restored.jsonl" >&2 || fail "the restored keys differ from the source's"
[ "$(ectl get /img/k1 --print-value-only)" = "changed after the full snapshot" ] || fail "/img/k1 lost its delta value"
[ -z "$(ectl get /img/k2)" ] || fail "/img/k2, deleted in the delta, is back"
echo "PASS: snapshot and restore in containers of $IMAGE; etcd $v serves the $(wc -l <"$WORK/restored.jsonl") keys at revision $rev2"
