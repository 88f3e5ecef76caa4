#!/usr/bin/env bash
# An H200 session: the ops of torchtitan's H200 fp8 runs (heterosim profile --experiment), then the
# standard layers' ops and whole layers, all sustained (the H200 had no profile).
# Usage: benchmarks/gpu/session_5c.sh OUT_DIR
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv > "$out/smi.txt" 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
python3 - "$out/trainy_fp8.yaml" <<'PY'
import sys

import yaml

cases = yaml.safe_load(open("validation/cases.yaml"))["cases"]
case = next(c for c in cases if c["id"] == "torchtitan-trainy2506-8b-32-h200-fp8")
yaml.safe_dump(case["experiment"], open(sys.argv[1], "w"), sort_keys=False)
PY
timeout 100 python3 -m heterosim.cli profile --out "$out/trainy_fp8.db" --experiment "$out/trainy_fp8.yaml" 2>&1 | tail -3
timeout 200 python3 benchmarks/gpu/profile_session.py "$out" --budget-s 165 --skip-contention 2>&1 | grep -E "==|wrote|rror"
ls -la "$out"
