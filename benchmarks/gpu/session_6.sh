#!/usr/bin/env bash
# An H200 session: the SM clock and board power of sustained kernels (NVML, read only), for the
# H200's clock-power curve (`power_limit_w`), as session_5.sh measured the H100's.
# Usage: benchmarks/gpu/session_6.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
{ nvidia-smi; nvidia-smi -q -d POWER,CLOCK,PERFORMANCE,TEMPERATURE; } > "$out/smi.txt" 2>&1
python3 -c "import torch, pynvml; print(torch.__version__)" >> "$out/smi.txt" 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
timeout 112 python3 benchmarks/gpu/power_clock.py "$out/power_clock.json" 2>&1 | tail -5
timeout 92 python3 benchmarks/gpu/power_clock.py "$out/power_dvfs.json" dvfs 2>&1 | tail -5
ls -la "$out"
