#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions run through "bash -c" (export -f)
# GPU check (docs/building.md): on a machine with an NVIDIA GPU, nvcc, cmake, ninja and a python3
# whose torch has CUDA, but no Debian -dev packages and no network, build attnlab against that torch
# and the offline Debian bundle in .deps/, run the gpu and parity tests and the attention benchmark,
# and write logs and results to OUT_DIR. Budget: 8 minutes on 16 cores (ATTNLAB_GPU_CHECK_BUDGET s).
#   scripts/gpu_check.sh OUT_DIR
# Exit status: 0 when the build and both test labels passed, 1 otherwise (OUT_DIR/summary.txt says
# which step failed). Files in OUT_DIR (kept to a few, flat): summary.txt, env.txt, build.log,
# ctest-gpu.log, ctest-parity.log, bench.log.
set -uo pipefail
OUT_DIR=${1:?usage: scripts/gpu_check.sh OUT_DIR}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
BUILD_DIR=${ATTNLAB_BUILD_DIR:-build-gpu}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
DEPS_DIR=${ATTNLAB_DEPS_DIR:-.deps}
JOBS=${ATTNLAB_JOBS:-$(nproc)}
DEADLINE=$((SECONDS + ${ATTNLAB_GPU_CHECK_BUDGET:-470}))
SUMMARY="$OUT_DIR/summary.txt"
: >"$SUMMARY"
status=0

note() { echo "[gpu_check] $*" | tee -a "$SUMMARY"; }
left() { echo $((DEADLINE - SECONDS > 1 ? DEADLINE - SECONDS : 1)); }

# Runs the exported function $3 with its output appended to OUT_DIR/$2, under what is left of the
# budget less $4 seconds kept for later steps; notes the outcome.
step() {
  local name=$1 log=$2 fn=$3 reserve=${4:-0}
  local t0=$SECONDS rc limit
  limit=$(($(left) - reserve > 30 ? $(left) - reserve : 30))
  timeout --kill-after=10 "$limit" bash -c "$fn" >>"$OUT_DIR/$log" 2>&1
  rc=$?
  note "$name: $([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc$([ $rc -eq 124 ] && echo ', out of time'))") in $((SECONDS - t0)) s, log $log"
  return $rc
}

describe_machine() {
  {
    echo "date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
    nvcc --version 2>&1 | tail -1
    cmake --version | head -1
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")' 2>&1
    echo "cores: $(nproc)"
  } >"$OUT_DIR/env.txt" 2>&1
}

# Prints the exports that make CMake and the loader find the unpacked Debian packages.
unpack_deps() {
  if [ ! -x "$DEPS_DIR/offline-deps.sh" ]; then
    echo "no $DEPS_DIR/offline-deps.sh: fetch the bundle with scripts/offline-deps.sh download $DEPS_DIR" >&2
    return 1
  fi
  if command -v dpkg >/dev/null; then
    "$DEPS_DIR/offline-deps.sh" unpack "$DEPS_DIR" "$BUILD_DIR/deps-prefix"
  else
    unpack_with_ar "$BUILD_DIR/deps-prefix"
  fi
}

# The bundle's unpack step uses dpkg -x; where there is no dpkg, ar and tar do the same.
unpack_with_ar() {
  local prefix=$1 tmp f
  mkdir -p "$prefix"
  tmp=$(mktemp -d)
  for f in "$PWD/$DEPS_DIR"/*.deb; do
    (cd "$tmp" && rm -f data.tar.* && ar x "$f" && tar -xf data.tar.* -C "$prefix") || return 1
  done
  rm -rf "$tmp"
  echo "export CMAKE_PREFIX_PATH=$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
  echo "export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
}

configure_and_build() {
  local torch_prefix targets=()
  torch_prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || return 1
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTNLAB_CUDA_ARCHS=90 \
        -DTorch_DIR="$torch_prefix/Torch" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" || return 1
  # Only what the check runs, when those targets exist; everything otherwise.
  for t in test_gpu test_parity bench_attention; do
    ninja -C "$BUILD_DIR" -t targets all | grep -q "^$t:" && targets+=("$t")
  done
  echo "building: ${targets[*]:-all}"
  cmake --build "$BUILD_DIR" -j "$JOBS" ${targets[@]:+--target "${targets[@]}"}
}

run_label() {
  (cd "$BUILD_DIR" && ctest -L "$1" --output-on-failure -j 4 --timeout 300)
}

run_bench() {
  if [ ! -x "$BUILD_DIR/bench_attention" ]; then
    echo "no $BUILD_DIR/bench_attention in this build: benchmark skipped"
    return 0
  fi
  # shellcheck disable=SC2086  # word splitting of the optional arguments is wanted
  "$BUILD_DIR/bench_attention" ${ATTNLAB_BENCH_ARGS:-}
}
export -f configure_and_build run_label run_bench
export BUILD_DIR JOBS

[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
for log in build.log ctest-gpu.log ctest-parity.log bench.log; do : >"$OUT_DIR/$log"; done
describe_machine
note "budget $(left) s, $JOBS jobs, build dir $BUILD_DIR"
if exports=$(unpack_deps 2>>"$OUT_DIR/build.log"); then
  eval "$exports"  # CMAKE_PREFIX_PATH and LD_LIBRARY_PATH for the unpacked packages
  # Debian puts some headers (OpenSSL's opensslconf.h) under the multiarch include directory, which
  # the compiler searches only under /usr: add the unpacked one.
  multiarch="$BUILD_DIR/deps-prefix/usr/include/x86_64-linux-gnu"
  [ -d "$multiarch" ] && export CPLUS_INCLUDE_PATH="$multiarch${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
else
  note "unpacking $DEPS_DIR: FAILED (see build.log)"
  exit 1
fi
if ! step "configure and build" build.log configure_and_build; then
  note "see the end of build.log; a missing Debian package means adding its .deb to $DEPS_DIR"
  exit 1
fi
step "ctest -L gpu" ctest-gpu.log "run_label gpu" 150 || status=1
step "ctest -L parity" ctest-parity.log "run_label parity" 150 || status=1  # leaves the benchmark 150 s
step "bench_attention" bench.log run_bench || true  # a benchmark, not a test: reported, never fatal
grep -hE "tests passed|tests failed|No tests were found" "$OUT_DIR"/ctest-*.log | sed 's/^/[gpu_check]   /' |
  tee -a "$SUMMARY"
note "done in ${SECONDS} s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
