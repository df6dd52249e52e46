#!/usr/bin/env bash
# Builds etcdbrctl into build/ (or $BUILD_DIR). Extra arguments go to cmake's configure step,
# e.g. ./scripts/build.sh -DETCDBR_SANITIZE=ON. JOBS=N caps the build's parallelism (default: every
# core).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"${JOBS:-$(nproc)}"
