#!/usr/bin/env bash
# Configures and builds attnlab into build/ (or $ATTNLAB_BUILD_DIR). Run setup first (test.sh and
# demo.sh do). Incremental: a second run rebuilds only what changed. Arguments go to
# `cmake --build` (e.g. `--target attnlab`: demo.sh builds only the program, not the tests).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
BUILD_DIR="${ATTNLAB_BUILD_DIR:-build}"
JOBS="${ATTNLAB_JOBS:-$(nproc)}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTorch_DIR="$Torch_DIR" \
        ${ATTNLAB_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "$JOBS" "$@"
