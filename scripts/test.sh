#!/usr/bin/env bash
# The test command: installs dependencies, checks formatting, then builds with warnings as errors
# and AddressSanitizer + UndefinedBehaviorSanitizer and runs every ctest test (unit, fuzz corpus
# replay, integration against a real etcd started on loopback by each test, on etcd 3.4 and the
# 3.5/3.6/3.7 releases scripts/build-etcd.sh builds meanwhile).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

# etcd 3.5/3.6/3.7 for the integration tests (Debian ships 3.4 only): built from the Go module
# proxy into ~/.cache/etcdbr/etcd in the background while the C builds run; cached versions are
# not rebuilt. Without Go the tests run against 3.4 and say which versions they skip, unless
# ETCDBR_REQUIRE_ETCD_VERSIONS=1 (CI), where a missing version fails the tests.
etcd_build_pid=""
etcd_build_log=$(mktemp "${TMPDIR:-/tmp}/etcdbr-build-etcd.XXXXXX")
if command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || [ "${ETCDBR_REQUIRE_ETCD_VERSIONS:-0}" = 1 ]; then
    echo "== etcd 3.5/3.6/3.7 build started in the background (scripts/build-etcd.sh, log $etcd_build_log)"
    setsid -w ./scripts/build-etcd.sh >"$etcd_build_log" 2>&1 &
    etcd_build_pid=$!
    # its own process group: stopped with its go children if this script ends early
    trap 'kill -- -$etcd_build_pid 2>/dev/null || true; rm -f "$etcd_build_log"' EXIT
else
    echo "== no Go: etcd 3.5/3.6/3.7 not built; the integration tests run against etcd 3.4 only"
fi

echo "== clang-format check"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
echo "== build (-Werror, optimized, no sanitizers: catches -O2-only warnings)"
BUILD_DIR=build-werror ./scripts/build.sh -DETCDBR_WERROR=ON
echo "== build (-Werror, ASan+UBSan)"
BUILD_DIR=build-asan ./scripts/build.sh -DETCDBR_WERROR=ON -DETCDBR_SANITIZE=ON
if [ -n "$etcd_build_pid" ]; then
    echo "== waiting for the etcd 3.5/3.6/3.7 build"
    rc=0
    wait "$etcd_build_pid" || rc=$?
    trap 'rm -f "$etcd_build_log"' EXIT
    cat "$etcd_build_log"
    [ "$rc" = 0 ] || { echo "scripts/build-etcd.sh failed (exit $rc)" >&2; exit 1; }
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd build-asan
ctest --output-on-failure -j2 --timeout 900
