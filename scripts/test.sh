#!/usr/bin/env bash
# The test command of README.md: installs what is missing, builds, and runs every ctest suite.
# Extra arguments go to ctest (e.g. scripts/test.sh -L unit). Without any, the sliding-window grid
# (label window, minutes; docs/building.md) is left out: CI runs its slice, window.ci_sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR="${ATTNLAB_BUILD_DIR:-build}"
cd "$BUILD_DIR"
if [ $# -eq 0 ]; then set -- -LE '^window$'; fi
ctest --output-on-failure -j "${ATTNLAB_JOBS:-$(nproc)}" "$@"
