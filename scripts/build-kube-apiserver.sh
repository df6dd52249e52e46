#!/usr/bin/env bash
# Builds kube-apiserver of a Kubernetes release (default below; ETCDBR_KUBE_VERSION overrides) from
# the Go module proxy and caches it in $ETCDBR_KUBE_CACHE (default ~/.cache/etcdbr/kube)/<version>/
# kube-apiserver, for tests/integration/test_chart_apiserver.sh (the chart installed against a real
# API server, the sidecar's Leases on it). A cached binary is not rebuilt. Like
# scripts/build-etcd.sh and build-helm.sh: started in the background by scripts/test.sh while the C
# builds run; prints nothing but progress; exit 1 if the build fails.
# `build-kube-apiserver.sh --path` prints the binary's path (built or not).
#
# k8s.io/kubernetes is not meant to be a dependency: its go.mod requires each staging module
# (k8s.io/api, apiserver, client-go, ...) at v0.0.0 and replaces it with ./staging/src/k8s.io/<name>,
# a replace that only applies inside its own checkout. So the build is a throwaway wrapper module
# that requires k8s.io/kubernetes <version>, replaces every staging module named in that replace
# block with its published tag (v1.X.Y -> v0.X.Y, the tags Kubernetes publishes together), and
# blank-imports k8s.io/kubernetes/cmd/kube-apiserver/app so `go mod tidy` resolves the whole graph;
# then it builds the k8s.io/kubernetes/cmd/kube-apiserver command.
# Cold on the project's 2-core machine (modules downloaded, nothing in Go's build cache): 557
# CPU-seconds, 20.5 min wall under a load of 13-25 from other jobs (so roughly 5 min on 2 idle
# cores; not measured), 2.4 GB peak RSS; a 114 MB binary (-s -w). docs/deploy.md has the details.
set -euo pipefail
# the newest release on the module proxy when this was written (v1.38.0-beta.0 was a pre-release)
KUBE_VERSION=${ETCDBR_KUBE_VERSION:-v1.37.2}
cache=${ETCDBR_KUBE_CACHE:-$HOME/.cache/etcdbr/kube}
out=$cache/$KUBE_VERSION
if [ "${1:-}" = --path ]; then
    echo "$out/kube-apiserver"
    exit 0
fi
if [ -x "$out/kube-apiserver" ]; then
    echo "build-kube-apiserver: kube-apiserver $KUBE_VERSION cached in $out"
    exit 0
fi
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || { echo "build-kube-apiserver: go is not on PATH nor in /usr/local/go/bin" >&2; exit 1; }
[ -n "$(go env GOCACHE 2>/dev/null)" ] || export GOCACHE=$cache/.go-build
case $KUBE_VERSION in
v1.*.*) ;;
*) echo "build-kube-apiserver: version $KUBE_VERSION is not v1.X.Y" >&2; exit 1 ;;
esac
staging_version=v0.${KUBE_VERSION#v1.}
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
echo "build-kube-apiserver: building kube-apiserver $KUBE_VERSION (5-20 minutes on 2 cores when nothing is cached)"
cd "$work"
go mod init etcdbr-kube-apiserver-build >/dev/null 2>&1
# the release's own go.mod, for its list of staging modules
go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" >download.json 2>download.log ||
    { cat download.log download.json >&2; exit 1; }
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p' download.json)
[ -f "$gomod" ] || { echo "build-kube-apiserver: no go.mod for k8s.io/kubernetes@$KUBE_VERSION" >&2; cat download.json >&2; exit 1; }
staging=$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9.-]*\) => \./staging/src/k8s\.io/.*#\1#p' "$gomod")
[ -n "$staging" ] || { echo "build-kube-apiserver: no staging replace block in $gomod" >&2; exit 1; }
{
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo "replace ("
    for m in $staging; do echo "	$m => $m $staging_version"; done
    echo ")"
} >>go.mod
cat >main.go <<'EOF'
// Package main only pulls the kube-apiserver command into the module graph for `go mod tidy`.
package main

import _ "k8s.io/kubernetes/cmd/kube-apiserver/app"

func main() {}
EOF
GOFLAGS=-mod=mod go mod tidy >tidy.log 2>&1 || { cat tidy.log >&2; exit 1; }
echo "build-kube-apiserver: modules resolved after $((SECONDS - start)) s"
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
# the version the binary reports (/version, --version), as Kubernetes' own build stamps it
minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
go build -ldflags="$ldflags" -o "$out.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
rm -rf "$out"
mv "$out.tmp" "$out"
echo "build-kube-apiserver: $("$out/kube-apiserver" --version) built in $((SECONDS - start)) s ($(du -m "$out/kube-apiserver" | cut -f1) MB)"
