#!/usr/bin/env bash
# Installs what attnlab needs, only where it is missing; safe to run again.
# Sourced by build.sh, demo.sh, test.sh and prepare_corpus.sh; exports ATTNLAB_VENV, Torch_DIR and
# the ccache settings. docs/building.md says what it installs and how to do it by hand.
#   ATTNLAB_SKIP_SETUP=1   install nothing (no apt-get, no pip, no download); only check and export
#   ATTNLAB_VENV=DIR       a Python environment of your own: used, never modified; it must have torch==2.11.0
set -euo pipefail

ATTNLAB_CACHE="${ATTNLAB_CACHE:-$HOME/.cache/attnlab}"
ATTNLAB_DEFAULT_VENV="$ATTNLAB_CACHE/venv"
ATTNLAB_VENV="${ATTNLAB_VENV:-$ATTNLAB_DEFAULT_VENV}"
TORCH_VERSION="2.11.0"
# transformers, tokenizers, safetensors and lm-eval[hf] (with accelerate): Hugging Face interop and its
# tests (docs/interop.md); protobuf: reading a SentencePiece model's settings when export-hf writes its
# fast tokenizer; scipy: the tests' Spearman correlations and t intervals; wandb: `attnlab watch --wandb`
# and its tests against W&B's offline files (docs/monitoring.md)
PIP_PACKAGES=(numpy matplotlib sentencepiece protobuf tiktoken tensorboard tqdm transformers tokenizers safetensors
              "lm-eval[hf]" scipy "wandb>=0.19.10")
PIP_MODULES="numpy, matplotlib, sentencepiece, google.protobuf, tiktoken, tensorboard, tqdm, transformers, tokenizers, safetensors, lm_eval, accelerate, scipy, wandb"
# shellcheck source=scripts/lib/os_packages.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/os_packages.sh"

debian_packages() {
  local doc
  echo cmake ninja-build ccache g++ python3-venv libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev \
       nlohmann-json3-dev libgtest-dev libssl-dev libboost-dev libgloo-dev
  # The embedded corpus's text; an unknown release goes without it (prepare_corpus.sh then says so).
  if doc=$(attnlab_python_doc_package); then echo "$doc"; fi
}

missing_debs() {
  local p
  for p in $(debian_packages); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

install_debs() {
  attnlab_read_os_release || true
  if ! attnlab_is_debian_like || ! command -v dpkg-query >/dev/null; then
    echo "[setup] not Debian or Ubuntu (${OS_ID:-unknown}): install the libraries of docs/building.md yourself" \
         "and set ATTNLAB_SKIP_SETUP=1" >&2
    return 1
  fi
  local need
  need=$(missing_debs | tr '\n' ' ')
  [ -z "${need// /}" ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "[setup] missing Debian packages: $need; install them as root (apt-get install $need)" \
           "or set ATTNLAB_SKIP_SETUP=1" >&2
      return 1
    fi
    sudo=(sudo)
  fi
  echo "[setup] installing Debian packages: $need"
  # env inside sudo: sudo's default env_reset would drop DEBIAN_FRONTEND set outside it.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # The doc package's name may only be known once the package lists are read.
  need=$(missing_debs | tr '\n' ' ')
  # shellcheck disable=SC2086
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
}

python_for_venv() {
  # The venv needs a python with the venv module; Debian's python3 has it once python3-venv is in.
  if command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    command -v python3
  else
    echo /usr/bin/python3
  fi
}

venv_has_torch() {
  "$ATTNLAB_VENV/bin/python" -c "import torch; assert torch.__version__.startswith('$TORCH_VERSION')" 2>/dev/null
}

venv_complete() {
  venv_has_torch && "$ATTNLAB_VENV/bin/python" -c "import $PIP_MODULES" 2>/dev/null
}

# An environment setup may not touch (another one of the user's, or any with ATTNLAB_SKIP_SETUP=1):
# checked, never modified. The arguments say how to get one that works.
check_foreign_venv() {
  local fix="$*"
  if [ ! -x "$ATTNLAB_VENV/bin/python" ]; then
    echo "[setup] error: ATTNLAB_VENV=$ATTNLAB_VENV has no bin/python. $fix" >&2
    return 1
  fi
  if ! venv_has_torch; then
    echo "[setup] error: ATTNLAB_VENV=$ATTNLAB_VENV has no torch==$TORCH_VERSION, which attnlab builds" \
         "against; nothing was changed. $fix" >&2
    return 1
  fi
  venv_complete || echo "[setup] warning: ATTNLAB_VENV=$ATTNLAB_VENV lacks some of: $PIP_MODULES" \
                        "(data preparation, plots, watch); install them there yourself" >&2
}

install_venv() {
  venv_complete && return 0
  echo "[setup] preparing the Python environment in $ATTNLAB_VENV (torch==$TORCH_VERSION; a few GB, once)"
  mkdir -p "$ATTNLAB_CACHE"
  [ -x "$ATTNLAB_VENV/bin/python" ] || "$(python_for_venv)" -m venv "$ATTNLAB_VENV"
  "$ATTNLAB_VENV/bin/python" -m pip install -q --upgrade pip
  "$ATTNLAB_VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" "${PIP_PACKAGES[@]}"
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

if [ "${ATTNLAB_SKIP_SETUP:-0}" = 1 ]; then
  # Nothing is installed; the environment must already hold torch (a venv, conda, ...).
  check_foreign_venv "With ATTNLAB_SKIP_SETUP=1 nothing is installed: point ATTNLAB_VENV at an environment with" \
                     "torch==$TORCH_VERSION (docs/building.md), or run without ATTNLAB_SKIP_SETUP."
elif [ "$ATTNLAB_VENV" != "$ATTNLAB_DEFAULT_VENV" ]; then
  install_debs
  check_foreign_venv "Install torch==$TORCH_VERSION there yourself, or unset ATTNLAB_VENV to let setup make its" \
                     "own venv in $ATTNLAB_DEFAULT_VENV."
  install_gpt2_vocab
else
  install_debs
  install_venv
  install_gpt2_vocab
fi

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
