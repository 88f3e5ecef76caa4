#!/usr/bin/env bash
# Second run of the same GPU session: the clock-power curve of fp8 products and a whole layer.
# Usage: benchmarks/gpu/session_5b.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
timeout 200 python3 benchmarks/gpu/power_clock.py "$out/power_dvfs.json" dvfs 2>&1 | tail -16
