"""Compute model speed and its GPT-layer predictions against published single-GPU numbers.

Run: python benchmarks/bench_compute_model.py
Prints (1) the time to build a ComputeModel (load + calibrate) and to time N distinct op
templates, and (2) the validation table recorded in benchmarks/README.md ("Compute model").
"""

from __future__ import annotations

import time

import numpy as np

from heterosim.catalog.models import ModelConfig
from heterosim.config.experiment import TrainingConfig
from heterosim.plan.compute import ComputeModel
from heterosim.plan.compute.layer_check import estimate_iteration, single_gpu_parallel


def bench_lookup(n: int = 5000) -> None:
    t0 = time.perf_counter()
    model = ComputeModel()
    model.params("H100-SXM")
    model.params("A100-80GB-SXM")
    t1 = time.perf_counter()
    rng = np.random.default_rng(1)
    ms = rng.integers(64, 16384, n)
    ns = rng.integers(64, 16384, n)
    ks = rng.integers(64, 16384, n)
    t2 = time.perf_counter()
    for m, nn, k in zip(ms.tolist(), ns.tolist(), ks.tolist()):
        model.time_op(
            "gemm", "bf16", (m, nn, k, 1), (0, 0), 2 * m * nn * k, 2 * (m * k + k * nn + m * nn), "H100-SXM"
        )
    t3 = time.perf_counter()
    print(f"ComputeModel() + calibrate A100/H100: {1e3 * (t1 - t0):.0f} ms")
    print(
        f"{n} distinct GEMM templates timed: {1e3 * (t3 - t2):.0f} ms "
        f"({1e6 * (t3 - t2) / n:.1f} us per template)"
    )


CASES = [
    # (case id, gpu, published s/iteration, attention, dp, distributed optimizer, model, training)
    (
        "megatron-readme2020-dgxa100-1b",
        "A100-40GB-SXM",
        1.076,
        "unfused",
        1,
        False,
        ModelConfig("gpt-1.16b", "gpt", 1920, 24, 15, 15, 7680, 51200, 1024),
        TrainingConfig(16, 16, 1024, "fp16", "full"),
    ),
    (
        "nemo2407-h100-fp8-gpt3-5b-64",
        "H100-SXM",
        2048 * 2048 / (23406 * 64),
        "flash",
        64,
        True,
        ModelConfig("gpt3-5b", "gpt", 4096, 24, 32, 32, 16384, 50304, 2048),
        TrainingConfig(2048, 4, 2048, "fp8", "none"),
    ),
    # Secondary, DER: time derived from 408.8 TFLOP/s with Megatron-Core's own FLOP formula
    # 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)) (convention not stated by the source), ffn = 4h,
    # no GQA, micro-batch 1 (all NS).
    (
        "megatron-core-readme-h100-1p7b",
        "H100-SXM",
        72 * 192 * 4096 * 24 * 2048**2 * (1 + 4096 / (6 * 2048) + 131072 / (12 * 24 * 2048)) / 48 / 408.8e12,
        "flash",
        48,
        True,
        ModelConfig("gpt-1.7b", "gpt", 2048, 24, 16, 16, 8192, 131072, 4096),
        TrainingConfig(192, 1, 4096, "bf16", "none"),
    ),
]


def bench_validation() -> None:
    model = ComputeModel()
    fa2 = ComputeModel(attention_impl="flash-attention-2")
    print("| case | GPU | layer fwd+bwd (ms/micro-batch) | predicted s/iter | published s/iter | error |")
    print("|---|---|---|---|---|---|")
    sensitivity = []
    for case, gpu, measured, attention, dp, dist, mcfg, tcfg in CASES:
        par = single_gpu_parallel(dp, dist)
        est = estimate_iteration(mcfg, tcfg, par, gpu, model, attention=attention)
        err = est.iteration_s / measured - 1
        print(
            f"| {case} | {gpu} | {1e3 * est.layer_fwd_bwd_s:.2f} | {est.iteration_s:.3f} | "
            f"{measured:.3f} | {100 * err:+.1f}% |"
        )
        if model.gpu_attention_impl(gpu) != "flash-attention-2" and attention == "flash":
            alt = estimate_iteration(mcfg, tcfg, par, gpu, fa2, attention=attention)
            sensitivity.append(f"{case}: {100 * (alt.iteration_s / measured - 1):+.1f}%")
    print("with FlashAttention-2 tables instead of cuDNN on Hopper: " + "; ".join(sensitivity))
    for note in model.notes():
        print("note:", note)


if __name__ == "__main__":
    bench_lookup()
    bench_validation()
