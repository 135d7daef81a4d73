#!/usr/bin/env bash
# make check-export: every preset and 50 random models (the fuzz layer's generator) exported
# as PyTorch by the engine, then run under real PyTorch with the exported weights: the outputs,
# the loss and every parameter gradient of one training step must equal the engine's within
# float32 tolerance (scripts/check-export.mjs writes the cases, scripts/check_export.py checks
# them). Not part of `make test`.
#
# PyTorch runs from .venv-peers/ (torch, torch-geometric, safetensors from PyPI), created when
# missing. CHECK_EXPORT_MODELS (default 50) and CHECK_EXPORT_SEED (default 1) size the random
# models; the cases are kept in target/check-export/ (under $CARGO_TARGET_DIR when set).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv-peers"
OUT="${CARGO_TARGET_DIR:-$ROOT/target}/check-export"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import torch, torch_geometric, safetensors, scipy" 2>/dev/null; then
  echo "== creating $VENV (torch CPU, torch-geometric, safetensors from PyPI)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --index-url https://download.pytorch.org/whl/cpu torch ||
    "$VENV/bin/pip" install --quiet torch
  "$VENV/bin/pip" install --quiet torch-geometric safetensors scipy
fi

echo "== the Node package and the Planetoid files (RevGNN's preset trains on Cora)"
scripts/build-wasm.sh nodejs
scripts/stage-data.sh

echo "== the engine: export every preset and ${CHECK_EXPORT_MODELS:-50} random models, with one step's values"
node scripts/check-export.mjs --out "$OUT" --models "${CHECK_EXPORT_MODELS:-50}" --seed "${CHECK_EXPORT_SEED:-1}"

echo "== PyTorch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)'): run each export and compare"
"$VENV/bin/python" -W ignore scripts/check_export.py "$OUT"
