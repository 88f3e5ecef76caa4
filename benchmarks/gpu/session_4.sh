#!/usr/bin/env bash
# One GPU session: whole layers no model was derived from (two held-out sets), their kernels,
# and the standard layers once more (run-to-run spread). Usage: benchmarks/gpu/session_4.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
nvidia-smi > "$out/smi.txt" 2>&1
python3 -c "import torch,triton;print(torch.__version__, triton.__version__)" >> "$out/smi.txt" 2>&1
timeout 150 python3 benchmarks/gpu/layers_heldout.py "$out/layers_large.json" large 2>&1 | tail -12
timeout 120 python3 benchmarks/gpu/layer_kernels.py "$out/layer_kernels_large.json" large 2>&1 | tail -12
timeout 100 python3 benchmarks/gpu/layers_heldout.py "$out/layers_heldout.json" heldout 2>&1 | tail -3
timeout 150 python3 benchmarks/gpu/layers_heldout.py "$out/layers_standard.json" standard 2>&1 | tail -3
ls -la "$out"
