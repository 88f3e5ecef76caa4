#!/usr/bin/env bash
# The copy kernel beside GEMMs again, with 120 KB of shared memory per block: one block per SM.
# Usage: benchmarks/gpu/session_5d.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
timeout 100 python3 benchmarks/gpu/copy_block_timeline.py "$out/copy_blocks_1per_sm.json" 120 2>&1 | tail -8
