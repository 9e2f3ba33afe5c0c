#!/usr/bin/env bash
# The main job of README.md: installs what is missing, builds, prepares the embedded real corpus
# (Python's documentation, docs/data.md), runs the demo sweep (configs/sweeps/demo.yaml: baseline,
# sink_logit, proj_gate and combo2 with two paired seeds on the micro tier, two workers of one
# thread) and prints the paired-seed report with the paper's figures beside it, plus its plots.
# Re-running skips finished runs and resumes interrupted ones. Extra arguments go to `attnlab sweep`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh --target attnlab
BUILD_DIR="${ATTNLAB_BUILD_DIR:-build}"
bash scripts/prepare_corpus.sh

ATTNLAB="$BUILD_DIR/attnlab"
SWEEP=configs/sweeps/demo.yaml
OUT=runs/sweeps/demo
VENV="${ATTNLAB_VENV:-${ATTNLAB_CACHE:-$HOME/.cache/attnlab}/venv}"

"$ATTNLAB" sweep --config "$SWEEP" --dry-run
echo
start=$(date +%s)
"$ATTNLAB" sweep --config "$SWEEP" --workers 2 "$@"
echo "[demo] sweep: $(( $(date +%s) - start )) s"
echo
"$ATTNLAB" report "$OUT" --compare-paper --plots --python "$VENV/bin/python"
