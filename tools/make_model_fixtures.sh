#!/usr/bin/env bash
# Makes tests/data/model_files/ (tests/data/model_files/README.md) with the attnlab binary $1 for the
# repository $2: two tiny trained checkpoints (combo2 without a
# window; sink_out_gate with a window, rotary, parallel residual, erf, untied head) and their export-hf
# directories (config.json + model.safetensors). Run once, by hand; the output is committed:
#   tools/make_model_fixtures.sh build/attnlab .
set -euo pipefail
BIN=$(readlink -f "$1"); REPO=$(readlink -f "$2"); OUT=$REPO/tests/data/model_files
WORK=$(mktemp -d /tmp/attnlab-fixtures.XXXX)
cd "$WORK"
mkdir data
python3 - <<PY
import sys; sys.path.insert(0, "$REPO/tools")
import compare_runs as c
c.write_shard("data/fx_train_000001.bin", c.synthetic_tokens(4000, 1))
c.write_shard("data/fx_val_000000.bin", c.synthetic_tokens(1000, 2))
PY
cat > run.yaml <<Y
tier: fixture
seed: 3
out_dir: runs/plain
model: {arm: combo2, n_layer: 2, n_head: 2, d_model: 8, block_size: 16, vocab_size: 64}
data: {train: data/fx_train_*.bin, val: data/fx_val_*.bin, val_tokens: 257}
optim: {lr: 1.0e-2, warmup_steps: 1}
train: {batch_size: 2, seq_len: 16, tokens_per_step: 32, max_steps: 2, device: cpu, threads: 1, log_every: 1}
eval: {every: 2}
checkpoint: {every: 2, keep_last: 1}
Y
"$BIN" train --config run.yaml > train_plain.log 2>&1
"$BIN" train --config run.yaml --set out_dir=runs/windowed --set model.arm=sink_out_gate \
  --set model.window=5 --set model.window_pattern=LG --set model.window_keep_first=1 \
  --set model.rotary_fraction=0.5 --set model.parallel_residual=true --set model.gelu=erf \
  --set model.untied_head=true > train_windowed.log 2>&1
rm -rf "$OUT/plain" "$OUT/windowed"; mkdir -p "$OUT"
for kind in plain windowed; do
  "$BIN" export-hf --checkpoint runs/$kind --out hf_$kind --tokenizer none --modeling-dir "$REPO/python/attnlab_hf" > export_$kind.log 2>&1
  mkdir -p "$OUT/$kind/checkpoint" "$OUT/$kind/export"
  cp runs/$kind/checkpoints/step_000002/* "$OUT/$kind/checkpoint/"
  cp hf_$kind/config.json hf_$kind/model.safetensors "$OUT/$kind/export/"
done
ls -laR "$OUT"
echo "work: $WORK"
