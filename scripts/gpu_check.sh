#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions run through "bash -c" (export -f)
# GPU check (docs/building.md): on a machine with an NVIDIA GPU, nvcc, cmake, ninja and a python3
# whose torch has CUDA, but no Debian -dev packages and no network, build attnlab against that torch
# and the offline Debian bundle in .deps/, run the gpu-labelled tests, the attention benchmark and the
# 124m training-step benchmark, and write logs and figures to OUT_DIR. Budget: 8 minutes on one GPU
# and 16 cores (ATTNLAB_GPU_CHECK_BUDGET s). ATTNLAB_GPU_CHECK_PARITY=1 also runs the parity label
# (CPU tests, run by CI anyway; minutes more).
#   scripts/gpu_check.sh OUT_DIR
# Exit status: 0 when the build and the test labels passed, 1 otherwise (OUT_DIR/summary.txt says
# which step failed). Files in OUT_DIR (kept to a few, flat): summary.txt, env.txt, build.log,
# ctest-gpu.log, [ctest-parity.log,] bench-attention.md and bench-step.md (the Markdown tables that
# go into docs/benchmarks.md), bench.log (the benchmarks' progress and errors).
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
  for t in test_gpu bench_attention bench_optimizer attnlab $([ "${ATTNLAB_GPU_CHECK_PARITY:-0}" = 1 ] && echo test_parity); do
    ninja -C "$BUILD_DIR" -t targets all | grep -q "^$t:" && targets+=("$t")
  done
  echo "building: ${targets[*]:-all}"
  cmake --build "$BUILD_DIR" -j "$JOBS" ${targets[@]:+--target "${targets[@]}"}
}

run_label() {
  (cd "$BUILD_DIR" && ctest -L "$1" --output-on-failure -j 4 --timeout 300)
}

# The attention benchmark: every arm on flash and fused against baseline and SDPA, bf16, B=8 H=12
# (B*H = 96) d=64, T in {1024, 2048, 4096}, forward and forward+backward; then flash against the
# O(T^2) reference at T = 2048 only (the reference is slow and big at 4096).
run_bench_attention() {
  if [ ! -x "$BUILD_DIR/bench_attention" ]; then
    echo "no $BUILD_DIR/bench_attention in this build: benchmark skipped"
    return 0
  fi
  local bench=("$BUILD_DIR/bench_attention" --device cuda --min-time 0.1)
  # shellcheck disable=SC2086  # word splitting of the optional arguments is wanted
  "${bench[@]}" --backends flash fused sdpa ${ATTNLAB_BENCH_ARGS:-} >"$OUT_DIR/bench-attention.md" &&
    "${bench[@]}" --backends flash reference --T 2048 >>"$OUT_DIR/bench-attention.md"
}

# The 124m tier's training step through `attnlab train` (bf16 autocast, seq 1024, batch 32): every
# arm on flash, and baseline on sdpa (the yardstick); then the AdamW step alone,
# the per-parameter loop against the fused kernel, over the 124m parameters.
run_bench_step() {
  local bench=(python3 tools/bench/step_bench.py --tier 124m --attnlab "$BUILD_DIR/attnlab" --device cuda --steps 6
               --skip 2 --batch "${ATTNLAB_STEP_BATCH:-32}")
  "${bench[@]}" --backends flash >"$OUT_DIR/bench-step.md" &&
    "${bench[@]}" --arms baseline --backends sdpa >>"$OUT_DIR/bench-step.md" &&
    "$BUILD_DIR/bench_optimizer" --device cuda --n-layer 18 --d-model 768 --n-head 12 --vocab-size 50257 \
      >>"$OUT_DIR/bench-step.md"
}
export -f configure_and_build run_label run_bench_attention run_bench_step
export BUILD_DIR JOBS OUT_DIR

[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
for log in build.log ctest-gpu.log bench.log; do : >"$OUT_DIR/$log"; done
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
step "ctest -L gpu" ctest-gpu.log "run_label gpu" 240 || status=1  # leaves the benchmarks 240 s
if [ "${ATTNLAB_GPU_CHECK_PARITY:-0}" = 1 ]; then
  step "ctest -L parity" ctest-parity.log "run_label parity" 300 || status=1
fi
# Benchmarks, not tests: reported, never fatal.
step "bench_attention" bench.log run_bench_attention 130 || true
step "124m step benchmark" bench.log run_bench_step || true
grep -hE "tests passed|tests failed|No tests were found" "$OUT_DIR"/ctest-*.log | sed 's/^/[gpu_check]   /' |
  tee -a "$SUMMARY"
note "done in ${SECONDS} s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
