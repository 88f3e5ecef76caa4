"""MosaicML MPT on one 8 x A100-80GB server: the compute model against published throughput.

Usage: ``PYTHONPATH=$PWD python benchmarks/bench_mpt_a100.py`` (flow fidelity, about 1 min on 2
cores).

Source: mosaicml/llm-foundry ``scripts/train/benchmarking/README.md``, table "A100 80GB with 1600
Gbps node-node interconnect (RoCE)" (throughput per GPU in tokens/s, micro-batch, gradient
accumulation, global batch, precision amp_bf16, FSDP mixed precision DEFAULT, FULL_SHARD,
activation checkpointing per row). Model dimensions from ``scripts/train/yamls/pretrain/mpt-*.yaml``
(expansion ratio 4, vocabulary 50368; ``attn_impl: triton``). The rows are one-server runs (8 GPUs,
NVSwitch): no tensor or pipeline parallelism, so the miss is compute and FSDP overlap alone.

Simulated as: GPT blocks with the same GEMM shapes (MPT has no biases and its attention is
Triton's FlashAttention, timed here as FlashAttention-2, the faster kernel), bf16, FSDP as
ZeRO-3 with prefetching (``parallel.zero: 3``), gradients reduced in fp32 (Composer's DEFAULT
mixed precision: ``reduce_dtype`` fp32). Both approximations make the simulation faster, not
slower. Nothing is fitted; these rows are not validation cases.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterosim.config.experiment import parse_experiment  # noqa: E402
from heterosim.validate.predict import iteration_time_s  # noqa: E402

# name: (d_model, n_layers, n_heads) from the pretrain yamls
MPT_DIMS = {
    "760m": (1536, 24, 12),
    "1b": (2048, 24, 16),
    "3b": (2560, 32, 20),
    "7b": (4096, 32, 32),
    "13b": (5120, 40, 40),
}
# (model, seq len, micro-batch, gradient accumulation, activation checkpointing, tokens/s/GPU)
ROWS = (
    ("760m", 2048, 24, 2, False, 32434),
    ("1b", 2048, 14, 4, False, 20513),
    ("1b", 8192, 3, 4, False, 13814),
    ("3b", 2048, 10, 2, False, 10811),
    ("7b", 2048, 6, 2, False, 4641),
    ("7b", 4096, 16, 2, True, 3684),
    ("13b", 2048, 2, 3, False, 2262),
)
GPUS = 8


def experiment(model: str, seq: int, micro: int, accum: int, checkpointing: bool) -> dict:
    hidden, layers, heads = MPT_DIMS[model]
    return {
        "name": f"mpt-{model}-{seq}",
        # arch gpt, kv_heads = heads and ffn = 4 x hidden are the model section's defaults
        "model": {"hidden": hidden, "layers": layers, "heads": heads, "vocab": 50368, "seq": seq},
        "training": {
            "global_batch": micro * accum * GPUS,
            "micro_batch": micro,
            "seq_len": seq,
            "dtype": "bf16",
            "recompute": "full" if checkpointing else "none",
            "attention": "flash",
            "grad_reduce_dtype": "fp32",
        },
        "parallel": {"tp": 1, "pp": 1, "dp": GPUS, "zero": 3},
        "cluster": {
            "name": "mosaic-a100-80gb",
            "host_types": {
                "h": {
                    "gpu": "A100-80GB-SXM",
                    "gpus": 8,
                    "fabric": "nvswitch",
                    "nics": 8,
                    "nic_speed": "200Gbps",
                }
            },
            "hosts": [{"type": "h", "count": 1}],
            "fabric": {"kind": "fat-tree"},
        },
        "simulation": {"fidelity": "flow", "memory_check": "warn"},
    }


def main() -> None:
    header = (
        "MPT row",
        "micro-batch x accumulation",
        "checkpointing",
        "measured tokens/s/GPU",
        "simulated",
        "error %",
    )
    print("| " + " | ".join(header) + " |")
    print("|---|---|---|---:|---:|---:|")
    errors = []
    for model, seq, micro, accum, ckpt, measured in ROWS:
        data = experiment(model, seq, micro, accum, ckpt)
        exp = parse_experiment(data, "bench_mpt_a100")
        exp = replace(exp, simulation=replace(exp.simulation, fidelity="flow"))
        t, _, _ = iteration_time_s(exp)
        simulated = micro * accum * GPUS * seq / (t * GPUS)
        err = 100.0 * (simulated - measured) / measured
        errors.append(err)
        cells = (
            f"{model} s={seq}",
            f"{micro} x {accum}",
            str(ckpt),
            f"{measured:,}",
            f"{simulated:,.0f}",
            f"{err:+.1f}",
        )
        print("| " + " | ".join(cells) + " |")
    print(f"\nmean error {sum(errors) / len(errors):+.1f} % (positive = simulator too fast)")


if __name__ == "__main__":
    main()
