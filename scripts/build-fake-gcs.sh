#!/usr/bin/env bash
# Builds fake-gcs-server (github.com/fsouza/fake-gcs-server, a GCS JSON API emulator the GCS
# integration tests run on loopback) from the Go module proxy in a throwaway wrapper module outside
# the checkout and caches the binary in $ETCDBR_FAKE_GCS_CACHE (default
# ~/.cache/etcdbr/fake-gcs)/<version>/fake-gcs-server. A cached version is not rebuilt. Like
# scripts/build-etcd.sh: started in the background by scripts/test.sh; exit 1 if the build fails.
# `build-fake-gcs.sh --path` prints where the binary of the default version is (built or not).
set -euo pipefail
VERSION=${ETCDBR_FAKE_GCS_VERSION:-v1.56.1}
cache=${ETCDBR_FAKE_GCS_CACHE:-$HOME/.cache/etcdbr/fake-gcs}
out=$cache/$VERSION
if [ "${1:-}" = --path ]; then
    echo "$out/fake-gcs-server"
    exit 0
fi
if [ -x "$out/fake-gcs-server" ]; then
    echo "build-fake-gcs: $VERSION cached in $out"
    exit 0
fi
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "build-fake-gcs: go is not on PATH nor in /usr/local/go/bin" >&2; exit 1; }
[ -n "$(go env GOCACHE 2>/dev/null)" ] || export GOCACHE=$cache/.go-build
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
echo "build-fake-gcs: building fake-gcs-server $VERSION"
(
    cd "$work"
    go mod init etcdbr-fake-gcs-build >/dev/null 2>&1
    go get "github.com/fsouza/fake-gcs-server@$VERSION" >"$work/go-get.log" 2>&1 || { cat "$work/go-get.log" >&2; exit 1; }
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    go build -ldflags='-s -w' -o "$out.tmp/fake-gcs-server" github.com/fsouza/fake-gcs-server
)
rm -rf "$out"
mv "$out.tmp" "$out"
echo "build-fake-gcs: $VERSION built in $((SECONDS - start)) s"
