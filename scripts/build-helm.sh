#!/usr/bin/env bash
# Builds the chart-check tools of tests/integration/test_helm_chart.sh from the Go module proxy
# and caches them in $ETCDBR_HELM_CACHE (default ~/.cache/etcdbr/helm):
#   <cache>/<helm version>/helm              helm v3 (helm.sh/helm/v3/cmd/helm, `go install`)
#   <cache>/k8svalidate-<source hash>/k8svalidate   tests/tools/k8svalidate (k8s.io/api schemas)
# A cached build is not rebuilt; the validator is rebuilt when its sources change. The validator
# shares most packages (k8s.io/api, apimachinery) with helm, so it is built after helm, from the
# Go build cache helm filled. Like scripts/build-etcd.sh: started in the background by
# scripts/test.sh while the C builds run; exit 1 if a build fails.
# `build-helm.sh --paths` prints the two binaries' paths (built or not), one per line.
# Measured on the project's 2-core machine (load 8-13 from other jobs): helm cold (empty build
# cache, its modules not yet downloaded) 19 min wall for 512 CPU-seconds (390 user + 122 sys, so
# about 4.5-6 min on 2 idle cores), 1.1 GB peak RSS, 720 MB of build cache; helm again with that
# build cache 35 s (the link); the validator after helm 5-6 s (helm compiled its k8s.io
# packages), alone and cold ~3 min; both cached: 0.3 s.
set -euo pipefail
HELM_VERSION=${ETCDBR_HELM_VERSION:-v3.22.0}
cache=${ETCDBR_HELM_CACHE:-$HOME/.cache/etcdbr/helm}
src=$(cd "$(dirname "$0")/../tests/tools/k8svalidate" && pwd)
hash=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-16)
helm_out=$cache/$HELM_VERSION
val_out=$cache/k8svalidate-$hash
if [ "${1:-}" = --paths ]; then
    echo "$helm_out/helm"
    echo "$val_out/k8svalidate"
    exit 0
fi
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "build-helm: go is not on PATH nor in /usr/local/go/bin" >&2; exit 1; }
[ -n "$(go env GOCACHE 2>/dev/null)" ] || export GOCACHE=$cache/.go-build
mkdir -p "$cache"
if [ -x "$helm_out/helm" ]; then
    echo "build-helm: helm $HELM_VERSION cached in $helm_out"
else
    start=$SECONDS
    echo "build-helm: building helm $HELM_VERSION"
    rm -rf "$helm_out.tmp"
    mkdir -p "$helm_out.tmp"
    # go install pkg@version: helm's own go.mod decides every dependency's version
    GOBIN=$helm_out.tmp GOFLAGS=-mod=mod go install -ldflags='-s -w' "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    rm -rf "$helm_out"
    mv "$helm_out.tmp" "$helm_out"
    echo "build-helm: $("$helm_out/helm" version --short) built in $((SECONDS - start)) s"
fi
if [ -x "$val_out/k8svalidate" ]; then
    echo "build-helm: k8svalidate cached in $val_out"
else
    start=$SECONDS
    echo "build-helm: building tests/tools/k8svalidate"
    rm -rf "$val_out.tmp"
    mkdir -p "$val_out.tmp"
    (cd "$src" && GOFLAGS="-mod=mod -buildvcs=false" go build -ldflags='-s -w' -o "$val_out.tmp/k8svalidate" .)
    rm -rf "$val_out"
    mv "$val_out.tmp" "$val_out"
    # older validator builds are stale
    find "$cache" -maxdepth 1 -name 'k8svalidate-*' ! -name "k8svalidate-$hash" -exec rm -rf {} +
    echo "build-helm: k8svalidate built in $((SECONDS - start)) s"
fi
