#!/usr/bin/env bash
# Builds and runs the host emulation check of the CUDA kernels (check_kernels.cpp): needs g++ with
# C++20 and the CUDA headers (for the host fp16/bf16 types), no GPU.
#   run.sh            every case, optimised build
#   run.sh --quick    two attention and two window cases per (dtype, head dim)
#   run.sh --tsan     OS threads under ThreadSanitizer: a missing __syncthreads/__syncwarp shows up
#                     as a race (slow: minutes)
set -euo pipefail
cd "$(dirname "$0")"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
OUT="${TMPDIR:-/tmp}/attnlab_check_kernels"
flags=(-O3 -g)
args=()
for a in "$@"; do
  case "$a" in
    --tsan) flags=(-O1 -g -fsanitize=thread -DATTNLAB_EMULATION_OS_THREADS); OUT="$OUT.tsan" ;;
    *) args+=("$a") ;;
  esac
done
g++ -std=c++20 "${flags[@]}" -pthread -DATTNLAB_CUDA_HOST_EMULATION -I"$CUDA_HOME/include" \
    -I../include check_kernels.cpp -o "$OUT"
"$OUT" "${args[@]}"
