"""MosaicML MPT on A100-80GB servers: the compute model against published throughput.

Usage: ``PYTHONPATH=$PWD python benchmarks/bench_mpt_a100.py [--only 7b,13b] [--jobs N]`` (flow
fidelity; on 2 cores the 59 one-server rows take about 1.5 min with ``--jobs 2``, the two 70b rows
about 6 min and 15 GB of memory: run those alone, ``--only 70b --jobs 1``).

Source: mosaicml/llm-foundry ``scripts/train/benchmarking/README.md``, table "A100 80GB with 1600
Gbps node-node interconnect (RoCE)" (throughput per GPU in tokens/s, micro-batch, gradient
accumulation, global batch, precision amp_bf16, FSDP mixed precision DEFAULT, FULL_SHARD,
activation checkpointing per row), every A100 80GB row. Model dimensions from
``scripts/train/yamls/pretrain/mpt-*.yaml`` (expansion ratio 4, vocabulary 50368; ``attn_impl:
triton``). All but the two 70b rows are one-server runs (8 GPUs, NVSwitch): no tensor or pipeline
parallelism, so the miss is compute and FSDP overlap alone.

The table was taken with ``submit_benchmarks.py``'s defaults: image
``mosaicml/pytorch:1.13.1_cu117`` (before FlashAttention-2) and ``--attn_impl triton``: the 2022
Triton FlashAttention kernel (flash_attn_triton.py: "Overall Triton forward + backward is slightly
slower than CUDA forward + backward", i.e. FlashAttention-1).

Simulated as: GPT blocks with the same GEMM shapes (MPT has no biases), attention timed from the
FlashAttention-2 paper's A100 series of that Triton kernel (``training.attention_kernel:
flash-attention-triton``; MPT's ALiBi bias, which that kernel adds as a bias vector, is not in
the published series), bf16, FSDP as ZeRO-3 with prefetching (``parallel.zero: 3``), gradients
reduced in fp32 (Composer's DEFAULT mixed precision: ``reduce_dtype`` fp32). Both approximations
make the simulation faster, not slower. Nothing is fitted; these rows are not validation cases.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heterosim.catalog.gpus import gpu_spec  # noqa: E402
from heterosim.config.experiment import parse_experiment  # noqa: E402
from heterosim.validate.predict import iteration_time_s  # noqa: E402
from heterosim.workload.memory import estimate_rank_memory  # noqa: E402

# name: (d_model, n_layers, n_heads) from the pretrain yamls
MPT_DIMS = {
    "125m": (768, 12, 12),
    "350m": (1024, 24, 16),
    "760m": (1536, 24, 12),
    "1b": (2048, 24, 16),
    "3b": (2560, 32, 20),
    "7b": (4096, 32, 32),
    "13b": (5120, 40, 40),
    "30b": (7168, 48, 56),
    "70b": (8192, 80, 64),
}
# The table's A100 80GB rows: (model, seq len, GPUs, micro-batch, gradient accumulation,
# activation checkpointing, tokens/s/GPU). All amp_bf16 / FSDP mixed precision DEFAULT except the
# two 70b rows (bf16 PURE: parameters, gradients and their reduction in bf16), flagged by PURE.
ROWS = (
    ("70b", 2048, 64, 8, 4, True, 410),
    ("70b", 2048, 32, 2, 16, True, 373),
    ("30b", 8192, 8, 1, 21, True, 574),
    ("30b", 4096, 8, 1, 21, True, 814),
    ("30b", 2048, 8, 3, 21, True, 916),
    ("30b", 1024, 8, 6, 21, True, 946),
    ("30b", 512, 8, 12, 21, True, 967),
    ("13b", 32768, 8, 1, 3, True, 1016),
    ("13b", 16384, 8, 3, 3, True, 1431),
    ("13b", 8192, 8, 5, 3, True, 1795),
    ("13b", 4096, 8, 10, 3, True, 2060),
    ("13b", 2048, 8, 2, 3, False, 2262),
    ("13b", 1024, 8, 40, 3, True, 2330),
    ("7b", 65536, 8, 1, 2, True, 1013),
    ("7b", 32768, 8, 2, 2, True, 1672),
    ("7b", 16384, 8, 4, 2, True, 2453),
    ("7b", 8192, 8, 8, 2, True, 3206),
    ("7b", 4096, 8, 16, 2, True, 3684),
    ("7b", 2048, 8, 6, 2, False, 4641),
    ("7b", 1024, 8, 64, 2, True, 4357),
    ("3b", 65536, 8, 1, 2, True, 1767),
    ("3b", 32768, 8, 3, 6, True, 3029),
    ("3b", 16384, 8, 1, 6, False, 5529),
    ("3b", 8192, 8, 3, 6, False, 7695),
    ("3b", 4096, 8, 5, 6, False, 9457),
    ("3b", 2048, 8, 10, 2, False, 10811),
    ("3b", 1024, 8, 20, 6, False, 11580),
    ("3b", 512, 8, 40, 6, False, 12127),
    ("1b", 65536, 8, 1, 2, True, 3044),
    ("1b", 32768, 8, 1, 4, False, 6275),
    ("1b", 16384, 8, 2, 4, False, 9956),
    ("1b", 8192, 8, 3, 4, False, 13814),
    ("1b", 4096, 8, 7, 4, False, 17807),
    ("1b", 2048, 8, 14, 4, False, 20513),
    ("1b", 1024, 8, 18, 4, False, 22112),
    ("1b", 512, 8, 56, 4, False, 23148),
    ("760m", 65536, 8, 1, 2, True, 4143),
    ("760m", 32768, 8, 1, 2, False, 8802),
    ("760m", 16384, 8, 3, 2, False, 14274),
    ("760m", 8192, 8, 6, 2, False, 20933),
    ("760m", 4096, 8, 12, 2, False, 27351),
    ("760m", 2048, 8, 24, 2, False, 32434),
    ("760m", 1024, 8, 48, 2, False, 29765),
    ("760m", 512, 8, 96, 2, False, 29446),
    ("350m", 65536, 8, 1, 2, False, 7524),
    ("350m", 32768, 8, 2, 2, False, 13652),
    ("350m", 16384, 8, 4, 2, False, 23559),
    ("350m", 8192, 8, 8, 2, False, 36569),
    ("350m", 4096, 8, 16, 2, False, 49555),
    ("350m", 2048, 8, 32, 2, False, 58782),
    ("350m", 1024, 8, 64, 2, False, 64813),
    ("350m", 512, 8, 128, 2, False, 69330),
    ("125m", 65536, 8, 1, 2, False, 20368),
    ("125m", 32768, 8, 2, 2, False, 36407),
    ("125m", 16384, 8, 4, 2, False, 60040),
    ("125m", 8192, 8, 8, 2, False, 90392),
    ("125m", 4096, 8, 16, 2, False, 118396),
    ("125m", 2048, 8, 40, 2, False, 142830),
    ("125m", 2048, 8, 32, 2, False, 141737),
    ("125m", 1024, 8, 64, 2, False, 156468),
    ("125m", 512, 8, 128, 2, False, 165681),
)
PURE = {"70b"}  # rows run in bf16 PURE


def experiment(model: str, seq: int, gpus: int, micro: int, accum: int, checkpointing: bool) -> dict:
    hidden, layers, heads = MPT_DIMS[model]
    pure = model in PURE
    hosts = -(-gpus // 8)
    return {
        "name": f"mpt-{model}-{seq}-{gpus}",
        # arch gpt, kv_heads = heads and ffn = 4 x hidden are the model section's defaults
        "model": {"hidden": hidden, "layers": layers, "heads": heads, "vocab": 50368, "seq": seq},
        "training": {
            "global_batch": micro * accum * gpus,
            "micro_batch": micro,
            "seq_len": seq,
            "dtype": "bf16",
            "recompute": "full" if checkpointing else "none",
            "attention": "flash",
            "attention_kernel": "flash-attention-triton",
            "grad_reduce_dtype": "bf16" if pure else "fp32",
        },
        "parallel": {"tp": 1, "pp": 1, "dp": gpus, "zero": 3},
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
            "hosts": [{"type": "h", "count": hosts}],
            "fabric": {"kind": "fat-tree"},
        },
        "simulation": {"fidelity": "flow", "memory_check": "warn"},
    }


def simulate_row(row: tuple) -> tuple[float, float]:
    """(simulated tokens/s/GPU, estimated peak memory GiB) of one table row."""
    model, seq, gpus, micro, accum, ckpt, _ = row
    exp = parse_experiment(experiment(model, seq, gpus, micro, accum, ckpt), "bench_mpt_a100")
    t, _, _ = iteration_time_s(exp)
    memory = estimate_rank_memory(
        exp.model, exp.training, exp.parallel, range(exp.model.layers), True, True, 1
    )
    return micro * accum * seq / t, memory.total_bytes / 2**30


def _summary(name: str, errors: list[float]) -> str:
    if not errors:
        return f"| {name} | 0 | | | |"
    mape = sum(abs(e) for e in errors) / len(errors)
    fast = sum(e > 0 for e in errors)
    return f"| {name} | {len(errors)} | {mape:.1f} | {sum(errors) / len(errors):+.1f} | {fast} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated model names (e.g. 7b,13b)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    wanted = {m for m in args.only.split(",") if m}
    rows = [r for r in ROWS if not wanted or r[0] in wanted]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(simulate_row, rows))
    capacity = gpu_spec("A100-80GB-SXM").memory_bytes / 2**30
    print(
        "| MPT row | GPUs | micro-batch x accumulation | checkpointing | measured tokens/s/GPU "
        "| simulated | error % | memory estimate GiB |"
    )
    print("|---|---:|---|---|---:|---:|---:|---:|")
    errors: dict[tuple, float] = {}
    for row, (simulated, memory) in zip(rows, results):
        model, seq, gpus, micro, accum, ckpt, measured = row
        err = 100.0 * (simulated - measured) / measured
        errors[row] = err
        over = " (over)" if memory > capacity else ""
        print(
            f"| {model} s={seq} | {gpus} | {micro} x {accum} | {ckpt} | {measured:,} | {simulated:,.0f} "
            f"| {err:+.1f} | {memory:.1f}{over} |"
        )
    print("\n| rows | n | MAPE % | mean error % | too fast |\n|---|---:|---:|---:|---:|")
    print(_summary("all", list(errors.values())))
    for label, keep in (
        ("seq <= 2048", lambda r: r[1] <= 2048),
        ("seq 4096-16384", lambda r: 4096 <= r[1] <= 16384),
        ("seq >= 32768", lambda r: r[1] >= 32768),
        ("checkpointing", lambda r: r[5]),
        ("no checkpointing", lambda r: not r[5]),
        (">= 1b parameters", lambda r: r[0] not in ("125m", "350m", "760m")),
    ):
        print(_summary(label, [e for r, e in errors.items() if keep(r)]))
    print(f"\n(positive = simulator too fast; memory: one FSDP rank, capacity {capacity:.1f} GiB)")


if __name__ == "__main__":
    main()
