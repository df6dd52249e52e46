#!/usr/bin/env bash
# The test command: installs dependencies, checks formatting, then builds with warnings as errors
# and AddressSanitizer + UndefinedBehaviorSanitizer and runs every ctest test (unit, fuzz corpus
# replay, integration against a real etcd started on loopback by each test, on etcd 3.4 and the
# 3.5/3.6/3.7 releases scripts/build-etcd.sh builds meanwhile).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

# Background builds from the Go module proxy, each in its own process group (stopped with its go
# children if this script ends early) while the C builds run; cached results are not rebuilt:
# - etcd 3.5/3.6/3.7 for the integration tests (Debian ships 3.4 only) into ~/.cache/etcdbr/etcd.
#   Without Go the tests run against 3.4 and say which versions they skip, unless
#   ETCDBR_REQUIRE_ETCD_VERSIONS=1 (CI), where a missing version fails the tests;
# - fake-gcs-server (the GCS emulator of the test_gcs_* tests) into ~/.cache/etcdbr/fake-gcs
#   (about 4-5 min cold on 2 cores, seconds cached);
# - helm and the chart validator (test_helm_chart*) into ~/.cache/etcdbr/helm (docs/deploy.md
#   has the measured times); it shares Go's build cache with the builds above;
# - kube-apiserver (test_chart_apiserver: the chart on a real API server) into
#   ~/.cache/etcdbr/kube (docs/deploy.md has the measured times; seconds cached).
declare -A bg_pid bg_log
have_go() { command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; }
# bg_start NAME SCRIPT: runs SCRIPT in the background, its output in a temporary log.
bg_start() {
    bg_log[$1]=$(mktemp "${TMPDIR:-/tmp}/etcdbr-build-$1.XXXXXX")
    echo "== $1 build started in the background ($2, log ${bg_log[$1]})"
    setsid -w "$2" >"${bg_log[$1]}" 2>&1 &
    bg_pid[$1]=$!
}
# bg_wait NAME: waits for a bg_start'ed build (nothing if none was started), prints its log and
# exits the script if it failed.
bg_wait() {
    [ -n "${bg_pid[$1]:-}" ] || return 0
    echo "== waiting for the $1 build"
    local rc=0
    wait "${bg_pid[$1]}" || rc=$?
    unset "bg_pid[$1]"
    cat "${bg_log[$1]}"
    [ "$rc" = 0 ] || { echo "the $1 build failed (exit $rc)" >&2; exit 1; }
}
outage_pid=""
kill_builds() { # and the outage test if it still runs (it has its own process group)
    local p
    for p in "${bg_pid[@]}" "$outage_pid"; do
        [ -z "$p" ] || kill -- -"$p" 2>/dev/null || true
    done
    rm -f "${bg_log[@]}"
}
trap kill_builds EXIT
if have_go || [ "${ETCDBR_REQUIRE_ETCD_VERSIONS:-0}" = 1 ]; then
    bg_start etcd ./scripts/build-etcd.sh
else
    echo "== no Go: etcd 3.5/3.6/3.7 not built; the integration tests run against etcd 3.4 only"
fi
if have_go; then
    bg_start fake-gcs-server ./scripts/build-fake-gcs.sh
    bg_start helm ./scripts/build-helm.sh
    bg_start kube-apiserver ./scripts/build-kube-apiserver.sh
fi

echo "== clang-format check"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
echo "== build (-Werror, optimized, no sanitizers: catches -O2-only warnings)"
BUILD_DIR=build-werror ./scripts/build.sh -DETCDBR_WERROR=ON
# The image (docs/deploy.md) from that plain build, for test_image_round_trip (ETCDBR_IMAGE); its
# pinned Debian packages are extracted once (~45 s cold, then cached in ~/.cache/etcdbr/image).
# A failed build fails the run at the end, and the test then fails too (it has no image).
echo "== image (scripts/build-image.sh)"
image_t0=$SECONDS
image_log=$(mktemp "${TMPDIR:-/tmp}/etcdbr-image.XXXXXX")
image_failed=""
if ETCDBR_BIN=build-werror/etcdbrctl ./scripts/build-image.sh >"$image_log" 2>&1; then
    export ETCDBR_IMAGE
    ETCDBR_IMAGE=$(tail -1 "$image_log")
    grep '^== ' "$image_log"
    echo "== image $ETCDBR_IMAGE built in $((SECONDS - image_t0)) s"
else
    cat "$image_log"
    image_failed=1
fi
rm -f "$image_log"
echo "== build (-Werror, ASan+UBSan)"
BUILD_DIR=build-asan ./scripts/build.sh -DETCDBR_WERROR=ON -DETCDBR_SANITIZE=ON
echo "== build (-Werror, ThreadSanitizer; etcdbrctl and store_put, for the threaded server tests)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETCDBR_WERROR=ON -DETCDBR_TSAN=ON >/dev/null
cmake --build build-tsan -j"$(nproc)" --target etcdbrctl store_put
bg_wait etcd
bg_wait fake-gcs-server
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# test_store_outage mostly waits (a 5-minute store outage, one put every 2 s): it runs beside
# the others instead of holding one of ctest's two slots for 5 minutes
outage_log=$PWD/build-asan/test_store_outage.log
ETCDBR_SOURCE_DIR=$PWD ETCDBR_BIN=$PWD/build-asan/etcdbrctl ETCDBR_BUILD_DIR=$PWD/build-asan \
    setsid -w timeout 900 bash tests/integration/test_store_outage.sh >"$outage_log" 2>&1 &
outage_pid=$!
# Every stage runs even when one before failed, so one run shows every failure; the script
# fails at the end if any did (failed lists them).
failed=()
[ -z "$image_failed" ] || failed+=("image build (scripts/build-image.sh)")
# Skipped tests are listed at the end; under ETCDBR_REQUIRE_TOOLS=1 (CI) a skip fails the run
# (each test also fails itself there when it would skip; this catches one that does not).
skipped=()
# run_ctest BUILD_DIR STAGE CTEST_ARGS...: ctest in BUILD_DIR; a failure adds STAGE to failed,
# every test ctest reports skipped is added to skipped.
run_ctest() {
    local dir=$1 stage=$2 log rc=0
    shift 2
    log=$(mktemp "${TMPDIR:-/tmp}/etcdbr-ctest.XXXXXX")
    (cd "$dir" && ctest "$@") 2>&1 | tee "$log" || rc=$?
    [ "$rc" = 0 ] || failed+=("$stage")
    mapfile -t -O "${#skipped[@]}" skipped < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$log")
    rm -f "$log"
}
# every other test but the chart's while helm and kube-apiserver still build (each cold build is
# ~500 CPU-seconds: they overlap the tests instead of delaying them), then the chart's tests once
# they are done
run_ctest build-asan "ASan+UBSan ctest" --output-on-failure -j2 --timeout 900 \
    -E '^integration\.(test_helm_chart.*|test_chart_apiserver|test_store_outage)$'
echo "== integration.test_store_outage (ran beside the others)"
outage_rc=0
wait "$outage_pid" || outage_rc=$?
outage_pid=""
tail -20 "$outage_log"
case "$outage_rc" in
0) echo "integration.test_store_outage passed" ;;
77)
    echo "integration.test_store_outage SKIPPED (exit 77)"
    skipped+=("integration.test_store_outage")
    ;;
*)
    echo "integration.test_store_outage FAILED (exit $outage_rc; log $outage_log)" >&2
    failed+=("integration.test_store_outage")
    ;;
esac
bg_wait helm
bg_wait kube-apiserver
run_ctest build-asan "chart tests" --output-on-failure -j2 --timeout 900 -R '^integration\.test_(helm_chart.*|chart_apiserver)$'

# The server's threads (HTTP connections, snapshotter, initialization, leader check, Leases, the
# leader fence and forwarding to the leader in test_cluster_handover) under
# ThreadSanitizer: the server and run-mode integration tests again with the TSan binary. A report
# stops the process (halt_on_error) and is also written to build-tsan/tsan-reports/, which must
# stay empty: a test that would not notice the dead server still fails here.
echo "== server tests under ThreadSanitizer"
rm -rf build-tsan/tsan-reports
mkdir -p build-tsan/tsan-reports
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$PWD/build-tsan/tsan-reports/report" \
    run_ctest build-tsan "ThreadSanitizer ctest" --output-on-failure -j2 --timeout 900 \
    -R '^integration\.(test_server.*|test_run_mode|test_k8s_lease.*|test_cluster_handover)$'
if [ -n "$(ls build-tsan/tsan-reports)" ]; then
    cat build-tsan/tsan-reports/*
    echo "ThreadSanitizer reported the races above" >&2
    failed+=("ThreadSanitizer reports")
fi
if [ "${#skipped[@]}" -gt 0 ]; then
    printf '== skipped: %s\n' "${skipped[@]}"
    [ "${ETCDBR_REQUIRE_TOOLS:-0}" != 1 ] || failed+=("tests skipped under ETCDBR_REQUIRE_TOOLS=1")
fi
if [ "${#failed[@]}" -gt 0 ]; then
    printf '== FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "== all test stages passed"
