#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions run through "bash -c" (export -f)
# GPU check (docs/building.md, "GPU check"): on a machine with an NVIDIA GPU, runs the prebuilt bundle
# that scripts/gpu_bundle.sh made on the CPU machine (nothing is built here) against this machine's
# torch wheel, in five steps, each stopped at its own time budget so that the next one still runs:
#   1 self_check       the first-use self-check of flash, cudnn, fused and reference, every arm, bf16 + f16
#   2 gpu_tests        the gpu-labelled tests (test_gpu, one process; sliding windows included)
#   3 bench_attention  flash vs cudnn vs plain SDPA vs the reference, every arm, bf16, T = 1024-4096; then a
#                      local layer (W = 256, T = 4096) on flash and fused beside full attention
#   4 bench_step       the 124m tier's training step: tokens/s and MFU per arm and backend
#   5 train_check      200 steps of the 10m tier's model, baseline and sink_logit, losses against CPU fp32
# and writes to OUT_DIR the 8 files that come back from the GPU machine: summary.txt, env.txt,
# steps.log (every step's output), self-check.md and .json, bench-attention.md, bench-step.md and
# train-check.md. The whole fits 8 minutes (docs/building.md has each step's estimate and budget).
#   scripts/gpu_check.sh OUT_DIR              on the GPU machine, bundle in $ATTNLAB_GPU_BUNDLE (.gpu-bundle)
#   scripts/gpu_check.sh --dry-run OUT_DIR    on the CPU machine: everything but the device calls (the
#                                             bundle's size, its libraries in a clean environment, every
#                                             step's CPU form under the same time limits)
# ATTNLAB_GPU_CHECK_STEPS="1 3" runs only those steps; ATTNLAB_GPU_CHECK_BUDGETS="bench_attention=0.5"
# overrides budgets (seconds). Exit status 0 when the bundle's checks, the self-check, the gpu tests
# and the training check passed (benchmarks are reported, never fatal); OUT_DIR/summary.txt says
# which step did what, in how long.
set -uo pipefail
DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
OUT_DIR=${1:?usage: scripts/gpu_check.sh [--dry-run] OUT_DIR}
cd "$(dirname "$0")/.." || exit 1
REPO=$PWD
# shellcheck source=scripts/lib/gpu_bundle_env.sh
source scripts/lib/gpu_bundle_env.sh
mkdir -p "$OUT_DIR" && OUT_DIR=$(cd "$OUT_DIR" && pwd)
BUNDLE=$(cd "${ATTNLAB_GPU_BUNDLE:-.gpu-bundle}" 2>/dev/null && pwd) || BUNDLE=""
SUMMARY="$OUT_DIR/summary.txt"
: >"$SUMMARY"
: >"$OUT_DIR/steps.log"
T0=$SECONDS
status=0
note() { echo "[gpu_check] $*" | tee -a "$SUMMARY"; }

# Each step's budget in seconds (docs/building.md gives the estimate beside each).
declare -A BUDGET=([self_check]=45 [gpu_tests]=110 [bench_attention]=100 [bench_step]=140 [train_check]=60)
for kv in ${ATTNLAB_GPU_CHECK_BUDGETS:-}; do BUDGET[${kv%%=*}]=${kv#*=}; done

# Runs step $1 (function $1, its output appended to OUT_DIR/steps.log under a header) under its
# budget; notes the outcome.
step() {
  local name=$1 t0=$SECONDS rc
  echo "==== $name" >>"$OUT_DIR/steps.log"
  timeout --signal=TERM --kill-after=5 "${BUDGET[$name]}" bash -c "$name" >>"$OUT_DIR/steps.log" 2>&1
  rc=$?
  local what="ok"
  [ $rc -ne 0 ] && what="FAILED (exit $rc)"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && what="STOPPED at its budget of ${BUDGET[$name]} s"
  note "$name: $what in $((SECONDS - t0)) s (budget ${BUDGET[$name]} s)"
  return $rc
}

describe_machine() {
  {
    echo "date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)  dry run: $DRY"
    echo "bundle: $BUNDLE"
    sed 's/^/  /' "$BUNDLE/manifest.txt"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3 ||
      echo "nvidia-smi: not found or failed"
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")' 2>&1
    echo "glibc: $(ldd --version | head -1)"
    echo "cores: $(nproc)"
  } >"$OUT_DIR/env.txt" 2>&1
}

# The bundle is usable here: present, built from this tree's torch version, its libraries resolved.
check_bundle() {
  if [ -z "$BUNDLE" ] || [ ! -f "$BUNDLE/manifest.txt" ]; then
    note "no bundle at ${ATTNLAB_GPU_BUNDLE:-.gpu-bundle}: make it on the CPU machine with scripts/gpu_bundle.sh and carry it"
    return 1
  fi
  local want
  want=$(sed -n 's/^torch: //p' "$BUNDLE/manifest.txt")
  if [ "$want" != "$TORCH_VERSION" ]; then
    note "the bundle was built against torch $want, this python ($PYTHON) has ${TORCH_VERSION:-no torch}: rebuild for it"
    return 1
  fi
  grep -q "^commit: $(git rev-parse HEAD 2>/dev/null)\$" "$BUNDLE/manifest.txt" ||
    note "warning: the bundle was built from another commit ($(sed -n 's/^commit: //p' "$BUNDLE/manifest.txt"))"
  echo "==== libraries" >>"$OUT_DIR/steps.log"
  if ! gpu_bundle_check_libraries "$BUNDLE" "$TORCH_PATH" >>"$OUT_DIR/steps.log" 2>&1; then
    note "libraries: some do not resolve from the bundle, torch's wheels or the base system (steps.log)"
    return 1
  fi
  note "libraries: every binary's resolve from the bundle, torch's wheels or the base system (steps.log)"
}

# What travels: the working tree and the bundle, against the 64 MiB limit (dry run).
check_size() {
  local tree bundle limit=$((64 * 1024 * 1024))
  tree=$(git ls-files -z -c -o --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  bundle=$(du -sb "$BUNDLE" | cut -f1)
  note "size: tree $((tree / 1024)) KiB + bundle $((bundle / 1024)) KiB = $(((tree + bundle) / 1024)) KiB of $((limit / 1024)) KiB ($(((limit - tree - bundle) / 1024)) KiB to spare)"
  [ $((tree + bundle)) -le $limit ]
}

# ---- The steps. On the GPU machine: the device runs. Dry run: the same binaries and scripts on the
# ---- CPU at toy sizes (what they print is not the GPU's, only that they run end to end).
self_check() {
  if [ "$DRY" = 1 ]; then
    "$BUNDLE/bin/attnlab" self-check --device cpu --arms baseline sink_logit renorm --json "$OUT_DIR/self-check.json" \
      >"$OUT_DIR/self-check.md"
  else
    "$BUNDLE/bin/attnlab" self-check --device cuda --backends flash cudnn fused reference \
      --dtypes bfloat16 float16 --json "$OUT_DIR/self-check.json" >"$OUT_DIR/self-check.md"
  fi
}

gpu_tests() {
  "$BUNDLE/bin/test_gpu" --gtest_brief=1
}

bench_attention() {
  local bench=("$BUNDLE/bin/bench_attention")
  if [ "$DRY" = 1 ]; then
    "${bench[@]}" --device cpu --B 1 --H 2 --T 64 --arms baseline --backends flash reference sdpa --min-time 0.01 \
      >"$OUT_DIR/bench-attention.md"
  else
    # shellcheck disable=SC2086  # word splitting of the optional arguments is wanted
    "${bench[@]}" --device cuda --min-time 0.1 --backends flash cudnn sdpa reference ${ATTNLAB_BENCH_ARGS:-} \
      >"$OUT_DIR/bench-attention.md"
    # A local layer (docs/windows.md): FlashAttention-2's window and the fused kernels beside full attention.
    "${bench[@]}" --device cuda --min-time 0.1 --T 4096 --windows 0 256 --arms baseline sink_logit combo2 \
      --backends flash fused >>"$OUT_DIR/bench-attention.md"
  fi
}

# Baseline on every backend first, then every arm on flash, then on cudnn: rows the budget leaves
# no time for are listed as not run (step_bench.py --deadline).
bench_step() {
  local bench=("$PYTHON" tools/bench/step_bench.py --attnlab "$BUNDLE/bin/attnlab" --deadline $((${BUDGET_bench_step%.*} - 15)))
  if [ "$DRY" = 1 ]; then
    "${bench[@]}" --tier micro --device cpu --threads 1 --arms baseline --backends flash,sdpa --steps 2 --skip 0 \
      --batch 2 --tokens-per-step 512 >"$OUT_DIR/bench-step.md"
  else
    "${bench[@]}" --tier 124m --device cuda --steps 6 --skip 2 --batch "${ATTNLAB_STEP_BATCH:-32}" \
      --runs "baseline/flash,baseline/cudnn,baseline/sdpa,*/flash,*/cudnn" >"$OUT_DIR/bench-step.md"
  fi
}

train_check() {
  if [ "$DRY" = 1 ]; then
    "$PYTHON" tools/bench/train_check.py smoke --attnlab "$BUNDLE/bin/attnlab" --device cpu --arms baseline \
      >"$OUT_DIR/train-check.md"
  else
    "$PYTHON" tools/bench/train_check.py check --attnlab "$BUNDLE/bin/attnlab" --device cuda >"$OUT_DIR/train-check.md"
  fi
}

# The GPU machine's python with its torch; in a dry run the one the bundle was made with (manifest).
PYTHON=${ATTNLAB_GPU_PYTHON:-python3}
if [ "$DRY" = 1 ] && [ -z "${ATTNLAB_GPU_PYTHON:-}" ] && [ -n "$BUNDLE" ]; then
  PYTHON=$(sed -n 's/^python: //p' "$BUNDLE/manifest.txt" 2>/dev/null)
fi
TORCH_VERSION="" TORCH_PATH=""
{ read -r TORCH_VERSION; read -r TORCH_PATH; } < <(gpu_bundle_torch_info "$PYTHON" 2>/dev/null)
# The binaries find the bundle's libraries, then torch's wheels', before anything of this machine's.
export LD_LIBRARY_PATH="${BUNDLE:+$BUNDLE/lib:}$TORCH_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ATTNLAB_SOURCE_DIR=$REPO  # the tests' configs: this tree, not the build machine's
export BUNDLE DRY OUT_DIR PYTHON
export -f self_check gpu_tests bench_attention bench_step train_check
export BUDGET_bench_step=${BUDGET[bench_step]}  # an associative array does not reach the steps' shells

note "$([ "$DRY" = 1 ] && echo "dry run (CPU)" || echo "GPU run"), budgets: $(for s in self_check gpu_tests bench_attention bench_step train_check; do printf '%s %s s, ' "$s" "${BUDGET[$s]}"; done)"
if ! check_bundle; then exit 1; fi
describe_machine
if [ "$DRY" = 1 ] && ! check_size; then note "size: over the limit"; status=1; fi
selected=${ATTNLAB_GPU_CHECK_STEPS:-1 2 3 4 5}
n=0
for name in self_check gpu_tests bench_attention bench_step train_check; do
  n=$((n + 1))
  case " $selected " in *" $n "*) ;; *) continue ;; esac
  if ! step "$name"; then
    case $name in bench_*) ;; *) status=1 ;; esac  # benchmarks: reported, never fatal
  fi
done
note "done in $((SECONDS - T0)) s: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
