#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the demo need (run as root).
set -euo pipefail
PKGS=(
    build-essential cmake pkg-config clang clang-format
    libcurl4-openssl-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
    libssl-dev zlib1g-dev libzstd-dev libdeflate-dev libjansson-dev libcmocka-dev libmicrohttpd-dev libgnutls28-dev libyaml-dev
    etcd-server etcd-client jq curl python3 ca-certificates openssl procps
    strace # test_durable_dirs_strace: which fsyncs a restore makes
    zsh fish groff-base man-db # test_completion_{zsh,fish}, test_man_install: the shells and man
    # OpenStack Swift (tempauth, dlo, s3api) for the Swift and strict-S3 tests (~35 s, ~150 packages)
    swift swift-proxy swift-object swift-account swift-container memcached
    # the image (scripts/build-image.sh, test_image_round_trip): podman with runc (crun fails on
    # hybrid cgroups; image/containers.conf), mmdebstrap extracts the pinned Debian packages
    podman runc mmdebstrap binutils
)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    # another apt (unattended-upgrades on a fresh machine) may hold the lock: wait for it
    apt_retry() {
        local i
        for i in $(seq 1 60); do
            $SUDO env DEBIAN_FRONTEND=noninteractive "$@" -o DPkg::Lock::Timeout=60 && return 0
            echo "apt failed (attempt $i; the apt lock may be held): retrying in 10 s" >&2
            sleep 10
        done
        return 1
    }
    apt_retry apt-get update
    apt_retry apt-get install -y --no-install-recommends "${missing[@]}"
fi
# object-store test servers (npm, into ~/.cache/etcdbr/npm, only when missing)
"$(dirname "$0")/test-servers.sh"
