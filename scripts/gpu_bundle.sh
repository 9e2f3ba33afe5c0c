#!/usr/bin/env bash
# The prebuilt GPU bundle (docs/building.md, "GPU check"): builds attnlab, test_gpu and bench_attention
# here (CUDA 13.0, sm_90, against the venv's torch 2.11 wheel), and puts their
# stripped copies in DIR/bin and the shared libraries they need that a GPU machine without Debian's
# -dev packages lacks (yaml-cpp, spdlog, fmt, OpenSSL's libcrypto, ...) in DIR/lib. Torch and its
# nvidia-* wheels are not carried: the binaries run against the GPU machine's own (the same wheel
# version), found at run time (scripts/lib/gpu_bundle_env.sh). Then checks, in a clean environment,
# that every library resolves from the bundle, torch's wheels or the base system, and that the bundle
# and the working tree together fit what travels to the GPU machine (64 MiB).
#   scripts/gpu_bundle.sh [DIR]        (default .gpu-bundle; idempotent: DIR is replaced)
# DIR must be ignored by git (it travels as a carried path); .gpu-bundle is, in .gitignore.
# ATTNLAB_BUILD_DIR picks the build (default build); ATTNLAB_GPU_BUNDLE_NO_BUILD=1 packages what is
# built there without building (the dry-run test).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/gpu_bundle_env.sh
source scripts/lib/gpu_bundle_env.sh
DIR=${1:-.gpu-bundle}
BUILD_DIR=${ATTNLAB_BUILD_DIR:-build}
LIMIT=$((64 * 1024 * 1024))
MARGIN=$((8 * 1024 * 1024))  # kept free: the tree grows between making the bundle and the run

if ! git check-ignore -q "$DIR"; then
  echo "gpu_bundle: $DIR is not ignored by git; add it to .gitignore or .git/info/exclude (it travels as a carried path)" >&2
  exit 1
fi
if [ "${ATTNLAB_GPU_BUNDLE_NO_BUILD:-0}" != 1 ]; then
  # shellcheck disable=SC2086  # the list is words
  ATTNLAB_BUILD_DIR=$BUILD_DIR bash scripts/build.sh --target $GPU_BUNDLE_BINARIES
fi
# The python whose torch the build compiled against (the tests' too): its version goes in the
# manifest, its library directories into the checks below, and the dry run runs it.
python=$(sed -n 's/^ATTNLAB_PYTHON:FILEPATH=//p' "$BUILD_DIR/CMakeCache.txt")
if [ ! -x "$python" ]; then
  echo "gpu_bundle: $BUILD_DIR/CMakeCache.txt names no ATTNLAB_PYTHON that exists ('$python'): configure with scripts/build.sh" >&2
  exit 1
fi
if ! grep -q '^ATTNLAB_CUDA_ARCHS:STRING=90$' "$BUILD_DIR/CMakeCache.txt" || ! grep -q 'torch_cuda' "$BUILD_DIR/build.ninja"; then
  echo "gpu_bundle: $BUILD_DIR is not a CUDA build for sm_90 against torch_cuda (nvcc missing at configure time?)" >&2
  exit 1
fi

tmp="$DIR.partial"
rm -rf "$tmp"
mkdir -p "$tmp/bin" "$tmp/lib"
for bin in $GPU_BUNDLE_BINARIES; do
  strip --strip-unneeded -o "$tmp/bin/$bin" "$(gpu_bundle_built "$BUILD_DIR" "$bin")"
done

# The system libraries the binaries load that are not the base system's: resolved as the build
# machine's loader resolves them, copied under their sonames.
{ read -r torch_version; read -r torch_path; } < <(gpu_bundle_torch_info "$python")
for bin in $GPU_BUNDLE_BINARIES; do
  LD_LIBRARY_PATH="$torch_path" ldd "$(gpu_bundle_built "$BUILD_DIR" "$bin")" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  case " ${GPU_BUNDLE_BASE_LIBS//$'\n'/ } $GPU_BUNDLE_DRIVER_LIBS " in *" $soname "*) continue ;; esac
  case "$path" in /lib/* | /usr/lib/* | /lib64/* | /usr/lib64/*) ;; *) continue ;; esac
  strip --strip-unneeded -o "$tmp/lib/$soname" "$(readlink -f "$path")"
done

{
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- src include tools kernels tests || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(gcc --version | head -1)"
  echo "torch: $torch_version"
  echo "python: $python"
  echo "cuda archs: $(grep '^ATTNLAB_CUDA_ARCHS:' "$BUILD_DIR/CMakeCache.txt" | cut -d= -f2)"
  echo "needs: $(gpu_bundle_symbol_versions "$tmp")"
  echo "carried libraries: $(find "$tmp/lib" -type f -printf '%f\n' | sort | tr '\n' ' ')"
} >"$tmp/manifest.txt"

echo "library check (clean environment: the bundle, then torch's wheels):"
gpu_bundle_check_libraries "$tmp" "$torch_path"
rm -rf "$DIR"
mv "$tmp" "$DIR"

bundle_bytes=$(du -sb "$DIR" | cut -f1)
tree_bytes=$(git ls-files -z -c -o --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$((bundle_bytes + tree_bytes))
echo "bundle: $DIR, $((bundle_bytes / 1024)) KiB (bin $(du -sk "$DIR/bin" | cut -f1) KiB, lib $(du -sk "$DIR/lib" | cut -f1) KiB)"
echo "travels with the working tree ($((tree_bytes / 1024)) KiB): $((total / 1024)) KiB of $((LIMIT / 1024)) KiB," \
     "$(((LIMIT - total) / 1024)) KiB to spare"
if [ "$total" -gt $((LIMIT - MARGIN)) ]; then
  echo "gpu_bundle: bundle and tree leave less than $((MARGIN / 1024 / 1024)) MiB of the $((LIMIT / 1024 / 1024)) MiB that travel" >&2
  exit 1
fi
