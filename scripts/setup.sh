#!/usr/bin/env bash
# Installs what attnlab needs, only where it is missing; safe to run again.
# Sourced by demo.sh and test.sh; exports ATTNLAB_VENV, Torch_DIR and the ccache settings.
set -euo pipefail

ATTNLAB_CACHE="${ATTNLAB_CACHE:-$HOME/.cache/attnlab}"
ATTNLAB_VENV="${ATTNLAB_VENV:-$ATTNLAB_CACHE/venv}"
TORCH_VERSION="2.11.0"
DEB_PACKAGES=(cmake ninja-build ccache g++ python3-venv
              libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
              libgtest-dev python3.11-doc libssl-dev libgloo-dev)

missing_debs() {
  local p
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

install_debs() {
  local need
  need=$(missing_debs)
  [ -z "$need" ] && return 0
  echo "[setup] installing Debian packages: $need"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
}

python_for_venv() {
  # The venv needs a python with the venv module; Debian's python3 has it once python3-venv is in.
  if command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    command -v python3
  else
    echo /usr/bin/python3
  fi
}

install_venv() {
  if [ -x "$ATTNLAB_VENV/bin/python" ] &&
     "$ATTNLAB_VENV/bin/python" -c "import torch, numpy, matplotlib, sentencepiece, tiktoken; assert torch.__version__.startswith('$TORCH_VERSION')" 2>/dev/null; then
    return 0
  fi
  echo "[setup] preparing the Python environment in $ATTNLAB_VENV (torch==$TORCH_VERSION; a few GB, once)"
  mkdir -p "$ATTNLAB_CACHE"
  [ -x "$ATTNLAB_VENV/bin/python" ] || "$(python_for_venv)" -m venv "$ATTNLAB_VENV"
  "$ATTNLAB_VENV/bin/python" -m pip install -q --upgrade pip
  "$ATTNLAB_VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" numpy matplotlib sentencepiece tiktoken
}

# GPT-2's BPE vocabulary for offline use (tools/prepare_data.py --tokenizer gpt2 and its known-id test):
# tiktoken downloads it at run time, which needs network, so take the copy that the openai-whisper
# source package on PyPI ships (whisper/assets/gpt2.tiktoken, MIT; the 50,256 ranks of GPT-2's
# encoder.json/vocab.bpe). Only that file is kept; whisper itself is not installed. Not fatal.
GPT2_TIKTOKEN="${ATTNLAB_GPT2_TIKTOKEN:-$ATTNLAB_CACHE/gpt2/gpt2.tiktoken}"
GPT2_TIKTOKEN_SHA256="306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
WHISPER_SDIST="openai-whisper==20250625"

install_gpt2_vocab() {
  if [ -f "$GPT2_TIKTOKEN" ] && echo "$GPT2_TIKTOKEN_SHA256  $GPT2_TIKTOKEN" | sha256sum -c --status; then
    return 0
  fi
  echo "[setup] fetching GPT-2's BPE vocabulary (from the $WHISPER_SDIST source package) to $GPT2_TIKTOKEN"
  local tmp
  tmp=$(mktemp -d)
  if "$ATTNLAB_VENV/bin/python" -m pip download -q --no-deps --no-binary :all: "$WHISPER_SDIST" -d "$tmp" &&
     tar -xzf "$tmp"/openai_whisper-*.tar.gz -C "$tmp" --wildcards '*/whisper/assets/gpt2.tiktoken' &&
     echo "$GPT2_TIKTOKEN_SHA256  $(ls "$tmp"/*/whisper/assets/gpt2.tiktoken)" | sha256sum -c --status; then
    mkdir -p "$(dirname "$GPT2_TIKTOKEN")"
    mv "$tmp"/*/whisper/assets/gpt2.tiktoken "$GPT2_TIKTOKEN"
  else
    echo "[setup] warning: no GPT-2 vocabulary; the GPT-2 known-id test will be skipped" >&2
  fi
  rm -rf "$tmp"
}

install_debs
install_venv
install_gpt2_vocab

export ATTNLAB_VENV
if [ -f "$GPT2_TIKTOKEN" ]; then export ATTNLAB_GPT2_TIKTOKEN="$GPT2_TIKTOKEN"; fi
Torch_DIR="$("$ATTNLAB_VENV/bin/python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')/Torch"
export Torch_DIR
export CCACHE_DIR="${CCACHE_DIR:-$ATTNLAB_CACHE/ccache}"
# PCH-friendly ccache settings (a precompiled LibTorch header is used by every target).
export CCACHE_SLOPPINESS="pch_defines,time_macros"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
# Paths inside the checkout are hashed relative to it, so a fresh clone elsewhere (CI) hits the
# objects an earlier build on this machine left in the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
export CCACHE_NOHASHDIR=true
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
