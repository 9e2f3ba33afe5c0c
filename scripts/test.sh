#!/usr/bin/env bash
# The test command of README.md: installs what is missing, builds, and runs every ctest suite.
# Extra arguments go to ctest (e.g. scripts/test.sh -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR="${ATTNLAB_BUILD_DIR:-build}"
cd "$BUILD_DIR"
ctest --output-on-failure -j "${ATTNLAB_JOBS:-$(nproc)}" "$@"
