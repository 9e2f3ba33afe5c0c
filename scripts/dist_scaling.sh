#!/usr/bin/env bash
# Data-parallel scaling on CPU (docs/distributed.md): time per optimizer step of the demo's micro-tier
# run (configs/demo.yaml, the embedded corpus) as one process and as Gloo jobs of 2 ranks, each
# configuration for STEPS steps into a fresh run directory under runs/dist_scaling/. Prints the
# median seconds per step after the first 3 (which pay for warm-up) and the job's wall time.
#   scripts/dist_scaling.sh [STEPS]      (default 30; build and scripts/prepare_corpus.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}
ATTNLAB="${ATTNLAB_BUILD_DIR:-build}/attnlab"
PY="${ATTNLAB_VENV:-$HOME/.cache/attnlab/venv}/bin/python"
OUT=runs/dist_scaling
rm -rf "$OUT"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"
printf '%-34s %14s %10s\n' configuration "median s/step" "wall s"
measure() {  # name, nproc, threads per rank
  local name=$1 nproc=$2 threads=$3 t0
  t0=$(date +%s.%N)
  "$ATTNLAB" train --config configs/demo.yaml --nproc "$nproc" --set "out_dir=$OUT/$name" \
    --set train.max_steps="$STEPS" --set train.threads="$threads" --set eval.every=100000 \
    --set checkpoint.every=100000 >"$OUT/$name.log" 2>&1
  "$PY" - "$OUT/$name/metrics.jsonl" "$name" "$t0" <<'PY'
import json, statistics, sys, time
wall = time.time() - float(sys.argv[3])
lines = [json.loads(l) for l in open(sys.argv[1])]
times = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(lines, lines[1:])][3:]
print(f"{sys.argv[2]:<34} {statistics.median(times):14.3f} {wall:10.1f}")
PY
}
mkdir -p "$OUT"
measure "1 process x 1 thread" 1 1
measure "1 process x 2 threads" 1 2
measure "2 Gloo ranks x 1 thread" 2 1
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
