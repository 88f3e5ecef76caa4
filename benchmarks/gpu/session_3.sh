#!/usr/bin/env bash
# One GPU session: host dispatch per kernel, fp8 GEMMs with TE's accumulation per pass, and the
# communication kernel beside compute. Usage: benchmarks/gpu/session_3.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
nvidia-smi > "$out/smi.txt" 2>&1
python3 -c "import torch,triton;print(torch.__version__, triton.__version__)" >> "$out/smi.txt" 2>&1
timeout 150 python3 benchmarks/gpu/host_dispatch.py "$out/host_dispatch.json" 2>&1 | tail -20
timeout 200 python3 benchmarks/gpu/fp8_ops.py "$out/fp8_ops.db" "$out/fp8_accum.json" 2>&1 | tail -8
timeout 120 python3 benchmarks/gpu/comm_beside_compute.py "$out/comm_beside_compute.json" 2>&1 | tail -20
ls -la "$out"
