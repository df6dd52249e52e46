#!/usr/bin/env bash
# The test command: installs dependencies, checks formatting, then builds with warnings as errors
# and AddressSanitizer + UndefinedBehaviorSanitizer and runs every ctest test (unit, fuzz corpus
# replay, integration against a real etcd started on loopback by each test).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
echo "== clang-format check"
git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror
echo "== build (-Werror, optimized, no sanitizers: catches -O2-only warnings)"
BUILD_DIR=build-werror ./scripts/build.sh -DETCDBR_WERROR=ON
echo "== build (-Werror, ASan+UBSan)"
BUILD_DIR=build-asan ./scripts/build.sh -DETCDBR_WERROR=ON -DETCDBR_SANITIZE=ON
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd build-asan
ctest --output-on-failure -j2 --timeout 900
