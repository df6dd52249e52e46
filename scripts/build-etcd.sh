#!/usr/bin/env bash
# Builds etcd, etcdctl and etcdutl of the newest 3.5, 3.6 and 3.7 releases (or the versions given as
# arguments) from the Go module proxy, each in a throwaway wrapper module outside the checkout, and
# caches them in $ETCDBR_ETCD_CACHE (default ~/.cache/etcdbr/etcd)/<version>/. A version whose three
# binaries are already cached is not rebuilt. Prints nothing but progress; exit 1 if a build fails.
# Debian's etcd 3.4 comes from apt (install-deps.sh); these are the releases Debian does not ship.
# `build-etcd.sh --list` prints the default versions (the set CI requires), one per line.
# Cold (empty Go module and build caches) on 2 cores: 2-4.7 min for the first version, 1-2.4 and
# 0.8-1.4 min for the next two (the modules and packages they share are cached), 4-8.5 min for
# the three depending on what else runs (in CI, beside the C builds: 2 + 1.1 + 0.8 min). Go's
# build cache ($GOCACHE, default ~/.cache/go-build) makes a rebuild of a version take seconds.
set -euo pipefail
DEFAULT_VERSIONS=(v3.5.35 v3.6.16 v3.7.3)
if [ "${1:-}" = --list ]; then
    printf '%s\n' "${DEFAULT_VERSIONS[@]}"
    exit 0
fi
cache=${ETCDBR_ETCD_CACHE:-$HOME/.cache/etcdbr/etcd}
# Go: on PATH or the machine's /usr/local/go (CI's PATH may lack it). It needs a build cache (kept
# across versions and runs); without HOME or XDG_CACHE_HOME it has none: keep it beside ours.
command -v go >/dev/null || [ ! -x /usr/local/go/bin/go ] || PATH=$PATH:/usr/local/go/bin
! command -v go >/dev/null || [ -n "$(go env GOCACHE 2>/dev/null)" ] || export GOCACHE=$cache/.go-build
# Test-only: the bbolt CLI (go.etcd.io/bbolt/cmd/bbolt; tests run its `bbolt check` on the dbs
# bbolt_writer writes) of the bbolt lines etcd 3.5 (1.3.x) and 3.6+ (1.4.x) use, each built in a
# throwaway wrapper module and cached in <cache>/bbolt-<version>/bbolt. Arguments bbolt@<version>
# select these builds (`build-etcd.sh bbolt@v1.3.12` builds only that one); no arguments build
# the default bbolt versions and then the default etcd versions.
bbolt_versions=()
etcd_args=()
for a in "$@"; do
    case $a in
    bbolt@*) bbolt_versions+=("${a#bbolt@}") ;;
    *) etcd_args+=("$a") ;;
    esac
done
[ $# -gt 0 ] || bbolt_versions=(v1.3.12 v1.4.3)
for v in ${bbolt_versions[@]+"${bbolt_versions[@]}"}; do
    out=$cache/bbolt-$v
    if [ -x "$out/bbolt" ]; then
        echo "build-etcd: bbolt $v cached in $out"
        continue
    fi
    command -v go >/dev/null || { echo "build-etcd: go is not on PATH (needed to build bbolt)" >&2; exit 1; }
    mkdir -p "$cache"
    bwork=$(mktemp -d)
    echo "build-etcd: building the bbolt CLI $v"
    rc=0
    (
        cd "$bwork"
        go mod init etcdbr-bbolt-build >/dev/null 2>&1
        go get "go.etcd.io/bbolt/cmd/bbolt@$v" >"$bwork/go-get.log" 2>&1 || { cat "$bwork/go-get.log" >&2; exit 1; }
        rm -rf "$out.tmp"
        mkdir -p "$out.tmp"
        go build -o "$out.tmp/bbolt" go.etcd.io/bbolt/cmd/bbolt
    ) || rc=$?
    rm -rf "$bwork"
    [ "$rc" = 0 ] || { echo "build-etcd: bbolt $v failed" >&2; exit 1; }
    rm -rf "$out"
    mv "$out.tmp" "$out"
done
[ $# -eq 0 ] || [ ${#etcd_args[@]} -gt 0 ] || exit 0
set -- ${etcd_args[@]+"${etcd_args[@]}"}
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("${DEFAULT_VERSIONS[@]}")
mkdir -p "$cache"
work=""
trap '[ -z "$work" ] || rm -rf "$work"' EXIT
for v in "${versions[@]}"; do
    out=$cache/$v
    if [ -x "$out/etcd" ] && [ -x "$out/etcdctl" ] && [ -x "$out/etcdutl" ]; then
        echo "build-etcd: $v cached in $out"
        continue
    fi
    command -v go >/dev/null || { echo "build-etcd: go is not on PATH nor in /usr/local/go/bin (needed to build etcd $v)" >&2; exit 1; }
    work=$(mktemp -d)
    start=$SECONDS
    echo "build-etcd: building etcd $v (1-5 minutes on 2 cores when nothing is cached)"
    (
        cd "$work"
        go mod init etcdbr-etcd-build >/dev/null 2>&1
        go get "go.etcd.io/etcd/server/v3@$v" "go.etcd.io/etcd/etcdutl/v3@$v" \
            "go.etcd.io/etcd/etcdctl/v3@$v" >"$work/go-get.log" 2>&1 || { cat "$work/go-get.log" >&2; exit 1; }
        echo "build-etcd: $v modules fetched after $((SECONDS - start)) s"
        rm -rf "$out.tmp"
        mkdir -p "$out.tmp"
        # one go build for the three: packages compile once, the links run in parallel; no
        # symbol table or DWARF (a third faster to link, a third smaller)
        go build -ldflags='-s -w' -o "$out.tmp/" go.etcd.io/etcd/server/v3 \
            go.etcd.io/etcd/etcdutl/v3 go.etcd.io/etcd/etcdctl/v3
        mv "$out.tmp/server" "$out.tmp/etcd"
    )
    rm -rf "$out"
    mv "$out.tmp" "$out"
    rm -rf "$work"
    work=""
    echo "build-etcd: $("$out/etcd" --version | sed -n 1p) built in $((SECONDS - start)) s"
done
