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

# fake-gcs-server (the GCS emulator of the test_gcs_* tests) from the Go module proxy into
# ~/.cache/etcdbr/fake-gcs, in the background too (about 4-5 min cold on 2 cores, seconds cached).
gcs_build_pid=""
gcs_build_log=$(mktemp "${TMPDIR:-/tmp}/etcdbr-build-fake-gcs.XXXXXX")
if command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; then
    echo "== fake-gcs-server build started in the background (scripts/build-fake-gcs.sh, log $gcs_build_log)"
    setsid -w ./scripts/build-fake-gcs.sh >"$gcs_build_log" 2>&1 &
    gcs_build_pid=$!
    trap 'kill -- -$etcd_build_pid 2>/dev/null || true; kill -- -$gcs_build_pid 2>/dev/null || true; rm -f "$etcd_build_log" "$gcs_build_log"' EXIT
fi

# helm and the chart validator (tests/integration/test_helm_chart.sh) from the Go module proxy
# into ~/.cache/etcdbr/helm, in the background too (docs/deploy.md has the measured times;
# seconds when cached). It shares Go's build cache with the builds above.
helm_build_pid=""
helm_build_log=$(mktemp "${TMPDIR:-/tmp}/etcdbr-build-helm.XXXXXX")
if command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; then
    echo "== helm + k8svalidate build started in the background (scripts/build-helm.sh, log $helm_build_log)"
    setsid -w ./scripts/build-helm.sh >"$helm_build_log" 2>&1 &
    helm_build_pid=$!
fi
outage_pid=""
kill_builds() { # and the outage test if it still runs (it has its own process group)
    local p
    for p in "$etcd_build_pid" "$gcs_build_pid" "$helm_build_pid" "$outage_pid"; do
        [ -z "$p" ] || kill -- -"$p" 2>/dev/null || true
    done
    rm -f "$etcd_build_log" "$gcs_build_log" "$helm_build_log"
}
trap kill_builds EXIT

echo "== clang-format check"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
echo "== build (-Werror, optimized, no sanitizers: catches -O2-only warnings)"
BUILD_DIR=build-werror ./scripts/build.sh -DETCDBR_WERROR=ON
echo "== build (-Werror, ASan+UBSan)"
BUILD_DIR=build-asan ./scripts/build.sh -DETCDBR_WERROR=ON -DETCDBR_SANITIZE=ON
echo "== build (-Werror, ThreadSanitizer; etcdbrctl and store_put, for the threaded server tests)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETCDBR_WERROR=ON -DETCDBR_TSAN=ON >/dev/null
cmake --build build-tsan -j"$(nproc)" --target etcdbrctl store_put
if [ -n "$etcd_build_pid" ]; then
    echo "== waiting for the etcd 3.5/3.6/3.7 build"
    rc=0
    wait "$etcd_build_pid" || rc=$?
    etcd_build_pid=""
    cat "$etcd_build_log"
    [ "$rc" = 0 ] || { echo "scripts/build-etcd.sh failed (exit $rc)" >&2; exit 1; }
fi
if [ -n "$gcs_build_pid" ]; then
    echo "== waiting for the fake-gcs-server build"
    rc=0
    wait "$gcs_build_pid" || rc=$?
    gcs_build_pid=""
    cat "$gcs_build_log"
    [ "$rc" = 0 ] || { echo "scripts/build-fake-gcs.sh failed (exit $rc)" >&2; exit 1; }
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# test_store_outage mostly waits (a 5-minute store outage, one put every 2 s): it runs beside
# the others instead of holding one of ctest's two slots for 5 minutes
outage_log=$PWD/build-asan/test_store_outage.log
ETCDBR_SOURCE_DIR=$PWD ETCDBR_BIN=$PWD/build-asan/etcdbrctl ETCDBR_BUILD_DIR=$PWD/build-asan \
    setsid -w timeout 900 bash tests/integration/test_store_outage.sh >"$outage_log" 2>&1 &
outage_pid=$!
# every other test but the chart's while helm still builds (its cold build is ~500 CPU-seconds:
# it overlaps the tests instead of delaying them), then the chart's tests once it is done
(cd build-asan && ctest --output-on-failure -j2 --timeout 900 \
    -E '^integration\.(test_helm_chart.*|test_store_outage)$')
echo "== integration.test_store_outage (ran beside the others)"
outage_rc=0
wait "$outage_pid" || outage_rc=$?
outage_pid=""
tail -20 "$outage_log"
case "$outage_rc" in
0) echo "integration.test_store_outage passed" ;;
77) echo "integration.test_store_outage SKIPPED (exit 77)" ;;
*) echo "integration.test_store_outage FAILED (exit $outage_rc; log $outage_log)" >&2 && exit 1 ;;
esac
if [ -n "$helm_build_pid" ]; then
    echo "== waiting for the helm + k8svalidate build"
    rc=0
    wait "$helm_build_pid" || rc=$?
    helm_build_pid=""
    cat "$helm_build_log"
    [ "$rc" = 0 ] || { echo "scripts/build-helm.sh failed (exit $rc)" >&2; exit 1; }
fi
(cd build-asan && ctest --output-on-failure -j2 --timeout 900 -R '^integration\.test_helm_chart')

# The server's threads (HTTP connections, snapshotter, initialization, leader check, Leases, the
# leader fence and forwarding to the leader in test_cluster_handover) under
# ThreadSanitizer: the server and run-mode integration tests again with the TSan binary. A report
# stops the process (halt_on_error) and is also written to build-tsan/tsan-reports/, which must
# stay empty: a test that would not notice the dead server still fails here.
echo "== server tests under ThreadSanitizer"
rm -rf build-tsan/tsan-reports
mkdir -p build-tsan/tsan-reports
tsan_rc=0
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$PWD/tsan-reports/report" \
    ctest --output-on-failure -j2 --timeout 900 -R '^integration\.(test_server.*|test_run_mode|test_k8s_lease.*|test_cluster_handover)$') || tsan_rc=$?
if [ -n "$(ls build-tsan/tsan-reports)" ]; then
    cat build-tsan/tsan-reports/*
    echo "ThreadSanitizer reported the races above" >&2
    exit 1
fi
exit "$tsan_rc"
