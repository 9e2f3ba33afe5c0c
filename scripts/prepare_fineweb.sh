#!/usr/bin/env bash
# FineWeb-Edu into llm.c-format shards (docs/data.md). Needs network: installs Hugging Face's
# `datasets` into the venv here, only for this path, then runs tools/prepare_data.py fineweb.
# Arguments go to the tool, e.g. --out data/edu_fineweb10B --shard-size 100000000 --max-tokens 1000000000.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
if ! "$ATTNLAB_VENV/bin/python" -c "import datasets" 2>/dev/null; then
  echo "[fineweb] installing the datasets library into $ATTNLAB_VENV"
  "$ATTNLAB_VENV/bin/python" -m pip install -q datasets
fi
exec "$ATTNLAB_VENV/bin/python" tools/prepare_data.py fineweb --version edu "$@"
