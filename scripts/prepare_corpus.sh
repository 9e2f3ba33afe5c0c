#!/usr/bin/env bash
# Builds the embedded real corpus data/pydoc/ (docs/data.md): the reStructuredText sources of the
# Python documentation that the release's python3.X-doc package ships (python3.11-doc on Debian 12;
# scripts/setup.sh installs the release's own), one document per file, a 5% document-level
# validation split, and a 4096-token SentencePiece BPE vocabulary trained on the train part.
# Idempotent: does nothing while the shards and tokenizer.json are newer than this script and
# tools/prepare_data.py. Writes into a temporary directory and renames, so a stopped run leaves
# no half corpus behind. Then the corpus's own downstream task, tasks/pydoc_next.jsonl (256
# continuation items of the validation documents, tools/task_convert.py corpus; docs/downstream.md),
# made again when it is older than the tokenizer or the converter. Last, the synthetic
# Bigram-Backcopy corpus data/bb/ (tools/synthetic_bb.py, its defaults; two seconds), made again when
# it is older than its generator, and data/pydoc_bytes/, the same documents as UTF-8 bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh

OUT="${ATTNLAB_CORPUS_DIR:-data/pydoc}"
VOCAB=4096

up_to_date() {
  [ -f "$OUT/tokenizer.json" ] || return 1
  ls "$OUT"/pydoc_train_*.bin "$OUT"/pydoc_val_*.bin >/dev/null 2>&1 || return 1
  local f
  for f in "$OUT"/tokenizer.json "$OUT"/pydoc_*.bin; do
    [ "$f" -nt tools/prepare_data.py ] && [ "$f" -nt scripts/prepare_corpus.sh ] || return 1
  done
}

build_corpus() {
  # The newest python3.X-doc installed (a release has one; the text, and so the demo's numbers, differ
  # a little between Python versions).
  if ! SOURCES=$(attnlab_python_doc_sources); then
    attnlab_read_os_release || true
    echo "[corpus] error: no /usr/share/doc/python3.*-doc/html/_sources; install the Debian package" \
         "$(attnlab_python_doc_package || echo 'python3.X-doc of your release')" >&2
    exit 1
  fi
  package=$(basename "$(dirname "$(dirname "$SOURCES")")")
  version=$(dpkg-query -W -f='${Version}' "$package" 2>/dev/null || echo unknown)
  tmp="$OUT.tmp.$$"
  trap 'rm -rf "$tmp"' EXIT
  rm -rf "$tmp"
  mkdir -p "$(dirname "$OUT")"
  echo "[corpus] tokenizing $SOURCES into $OUT (SentencePiece BPE, vocab $VOCAB; about a minute)"
  "$ATTNLAB_VENV/bin/python" tools/prepare_data.py text \
    --inputs "$SOURCES/**/*.rst.txt" --out "$tmp" --name pydoc \
    --tokenizer sentencepiece --vocab-size "$VOCAB" --val-fraction 0.05 \
    --source "Debian package $package $version: $SOURCES/**/*.rst.txt (Python Software Foundation License Version 2)"
  rm -rf "$OUT"
  mv "$tmp" "$OUT"
  trap - EXIT
  echo "[corpus] wrote $OUT"
}

write_task() {
  local task="$OUT/tasks/pydoc_next.jsonl"
  if [ -f "$task" ] && [ "$task" -nt "$OUT/tokenizer.json" ] && [ "$task" -nt tools/task_convert.py ]; then
    return
  fi
  mkdir -p "$OUT/tasks"
  "$ATTNLAB_VENV/bin/python" tools/task_convert.py corpus --input "$OUT/pydoc_val_000000.bin" \
    --tokenizer-json "$OUT/tokenizer.json" --limit 256 --out "$task"
}

BB="${ATTNLAB_BB_DIR:-data/bb}"

bb_up_to_date() {
  local f
  [ -f "$BB/tokenizer.json" ] || return 1
  for f in tools/synthetic_bb.py tools/prepare_data.py scripts/prepare_corpus.sh; do
    [ "$BB/tokenizer.json" -nt "$f" ] || return 1
  done
}

write_bb() {
  bb_up_to_date && return
  local tmp="$BB.tmp.$$"
  rm -rf "$tmp"
  "$ATTNLAB_VENV/bin/python" tools/prepare_data.py bb --out "$tmp" --name bb --quiet >/dev/null
  rm -rf "$BB"
  mv "$tmp" "$BB"
  echo "[corpus] wrote $BB (Bigram-Backcopy, docs/data.md)"
}

BYTES="${ATTNLAB_BYTES_DIR:-data/pydoc_bytes}"

# The same documents as raw UTF-8 bytes (vocabulary 257): the real-text setting of docs/sweeps.md,
# where a byte-level model is small enough to train far on two cores. Made again when it is older
# than the BPE corpus (the same sources) or the tools.
write_bytes() {
  local f ok=1
  [ -f "$BYTES/tokenizer.json" ] || ok=0
  for f in "$OUT/tokenizer.json" tools/prepare_data.py scripts/prepare_corpus.sh; do
    [ "$ok" = 1 ] && [ "$BYTES/tokenizer.json" -nt "$f" ] || ok=0
  done
  [ "$ok" = 1 ] && return
  local sources package version tmp="$BYTES.tmp.$$"
  sources=$(attnlab_python_doc_sources)
  package=$(basename "$(dirname "$(dirname "$sources")")")
  version=$(dpkg-query -W -f='${Version}' "$package" 2>/dev/null || echo unknown)
  rm -rf "$tmp"
  "$ATTNLAB_VENV/bin/python" tools/prepare_data.py text --inputs "$sources/**/*.rst.txt" --out "$tmp" \
    --name pydoc_bytes --tokenizer bytes --val-fraction 0.05 \
    --source "Debian package $package $version: $sources/**/*.rst.txt as UTF-8 bytes (Python Software Foundation License Version 2)" \
    >/dev/null
  rm -rf "$BYTES"
  mv "$tmp" "$BYTES"
  echo "[corpus] wrote $BYTES (the same documents as UTF-8 bytes, docs/data.md)"
}

if up_to_date; then
  echo "[corpus] $OUT is up to date"
else
  build_corpus
fi
write_task
write_bb
write_bytes
