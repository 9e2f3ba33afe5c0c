#!/usr/bin/env bash
# The main job of README.md: installs what is missing, builds, prepares the corpora (docs/data.md:
# the embedded Python documentation and the synthetic Bigram-Backcopy task), runs the demo sweep
# (configs/sweeps/demo.yaml: baseline and out_gate with three paired seeds and null twins on the
# Bigram-Backcopy task, two workers of one thread) and prints the paired-seed report, losses and
# probe figures with their noise floor, plus its plots.
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
"$ATTNLAB" report "$OUT" --probes --plots --python "$VENV/bin/python"
# README.md's demo excerpt is cut from this report (tools/readme_demo.py): say when this build's
# figures differ from it (a sweep with extra arguments is not the README's demo).
if [ $# -eq 0 ] && ! "$VENV/bin/python" tools/readme_demo.py --check "$OUT/report" > /dev/null; then
  echo
  echo "[demo] README.md's excerpt differs from this report; to update it:"
  echo "       python3 tools/readme_demo.py $OUT/report"
fi
