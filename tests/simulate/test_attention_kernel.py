"""``training.attention_kernel`` picks the published kernel table that times attention."""

from __future__ import annotations

from dataclasses import replace

from heterosim.config.experiment import load_experiment
from heterosim.simulate.experiment import experiment_compute_model

TINY = "tests/data/tiny_experiment.yaml"


def test_auto_keeps_each_gpus_kernel_and_a_name_overrides_it() -> None:
    exp = load_experiment(TINY)
    assert exp.training.attention_kernel == "auto"
    auto = experiment_compute_model(exp)
    assert auto.gpu_attention_impl("A100-80GB-SXM") == "flash-attention-2"
    assert auto.gpu_attention_impl("H100-SXM") == "cudnn"
    triton = experiment_compute_model(
        replace(exp, training=replace(exp.training, attention_kernel="flash-attention-triton"))
    )
    assert {triton.gpu_attention_impl(g) for g in ("A100-80GB-SXM", "H100-SXM")} == {"flash-attention-triton"}
    op = ("attention", "bf16", (8, 2048, 16, 128), (16, 1), 4 * 8 * 2048**2 * 16 * 128 // 2, 0)
    assert triton.time_op(*op, "A100-80GB-SXM")[0] > 1.8 * auto.time_op(*op, "A100-80GB-SXM")[0]
