#!/usr/bin/env bash
# One GPU session: SM clock and board power of sustained kernels (what a power limit does), the
# blocks of a copy kernel beside back-to-back GEMMs (%smid, %globaltimer), and the GPU-bound
# held-out layers on a third H100. Usage: benchmarks/gpu/session_5.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
{ nvidia-smi; nvidia-smi -q -d POWER,CLOCK,PERFORMANCE,TEMPERATURE; } > "$out/smi.txt" 2>&1
python3 -c "import torch,cupy;print(torch.__version__, cupy.__version__)" >> "$out/smi.txt" 2>&1
export PYTHONUNBUFFERED=1
timeout 170 python3 benchmarks/gpu/power_clock.py "$out/power_clock.json" 2>&1 | tail -22
timeout 100 python3 benchmarks/gpu/copy_block_timeline.py "$out/copy_blocks.json" 2>&1 | tail -8
timeout 170 python3 benchmarks/gpu/layers_heldout.py "$out/layers_large.json" large 2>&1 | tail -3
nvidia-smi -q -d PERFORMANCE >> "$out/smi.txt" 2>&1
ls -la "$out"
